package check

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// Deferred unknown writes.
//
// The textbook treatment of an operation with unknown outcome (give it an
// infinite return time and apply it wherever the search linearizes it)
// makes porcupine's search try, at every later step, every subset and
// every order of the unknown writes still "in the air": k unknown RPUSHes
// that were never applied cost k! per step, k unknown INCRs 2^k.
//
// Instead, linearizing an unknown write only adds it to the pending
// multiset of the state; before each later operation with a known reply,
// the model may apply any sequence of pending writes (the state is the
// set of configurations that are still possible). A pending write applied
// later takes effect later than its linearization point, which is still
// after its invocation, and one never applied never took effect: both are
// allowed outcomes of an unknown operation, so the specification is the
// same; only the search is different. Check also replaces the value of an
// unknown write that no reply ever showed by one placeholder (anonValue),
// so such writes become interchangeable and merge into counts.
//
// Before an operation T with its reply, the sequences are searched
// breadth-first, with three cuts:
//
//   - a configuration is dropped when another has the same key state and
//     pending writes that allow at least as much (see pendGE);
//   - when T succeeds on a state, longer sequences from that state are
//     not needed, except for RPUSH: the reply pins the state T needs (or T
//     has no effect and the writes can as well be applied after T), and
//     the longer sequences stay possible after T from the pending
//     multiset;
//   - for LRANGE and RPUSH on a list, when no pending SET or DEL could
//     reset the list, a list that is no prefix of the LRANGE reply, or not
//     shorter than the RPUSH reply, cannot become one by appending.

// anonValue is the placeholder Check gives the value of an unknown write
// that no reply ever showed.
const anonValue = "\x00unobserved\x00"

// pendOp is a pending unknown write and how many identical ones there are.
type pendOp struct {
	in Input
	n  int
}

// config is one possible configuration of a key: its state and the
// unknown writes that may still take effect. pend is sorted by inputLess
// and shared between configurations: never modified in place.
type config struct {
	s    keyState
	pend []pendOp
}

// configs is the model state: the set of possible configurations, none
// dominated by another.
type configs []config

func inputLess(a, b Input) bool {
	if a.Kind != b.Kind {
		return a.Kind < b.Kind
	}
	if a.Value != b.Value {
		return a.Value < b.Value
	}
	if a.Expect != b.Expect {
		return a.Expect < b.Expect
	}
	return a.Key < b.Key
}

// pendAdd returns p plus one in.
func pendAdd(p []pendOp, in Input) []pendOp {
	i := sort.Search(len(p), func(i int) bool { return !inputLess(p[i].in, in) })
	out := make([]pendOp, 0, len(p)+1)
	out = append(out, p[:i]...)
	if i < len(p) && p[i].in == in {
		out = append(out, pendOp{in, p[i].n + 1})
		return append(out, p[i+1:]...)
	}
	out = append(out, pendOp{in, 1})
	return append(out, p[i:]...)
}

// pendRemove returns p minus one of p[i].
func pendRemove(p []pendOp, i int) []pendOp {
	out := make([]pendOp, 0, len(p))
	out = append(out, p[:i]...)
	if p[i].n > 1 {
		out = append(out, pendOp{p[i].in, p[i].n - 1})
	}
	return append(out, p[i+1:]...)
}

// count returns how many of in p holds.
func count(p []pendOp, in Input) int {
	i := sort.Search(len(p), func(i int) bool { return !inputLess(p[i].in, in) })
	if i < len(p) && p[i].in == in {
		return p[i].n
	}
	return 0
}

// pendGE reports whether the pending writes a allow everything the pending
// writes b allow: a contains b, where a write of value v may stand in for
// a weaker one of the same value. A pending SET v can do what a pending
// SET v GET, SET v NX or CAS to v can do (it takes the same effect where
// they would, and need not be applied where they would fail), and a
// pending SET v GET what a SET v NX or a CAS to v can.
func pendGE(a, b []pendOp) bool {
	var short []pendOp // writes of b that a lacks, and how many
	for _, y := range b {
		if have := count(a, y.in); have < y.n {
			switch y.in.Kind {
			case OpGetSet, OpSetNX, OpCAS:
				short = append(short, pendOp{y.in, y.n - have})
			default:
				return false
			}
		}
	}
	if len(short) == 0 {
		return true
	}
	done := map[string]bool{}
	for _, d := range short {
		v := d.in.Value
		if done[v] {
			continue
		}
		done[v] = true
		weak, gs := 0, 0 // missing SET NX / CAS to v, missing SET v GET
		for _, e := range short {
			if e.in.Value == v {
				if e.in.Kind == OpGetSet {
					gs += e.n
				} else {
					weak += e.n
				}
			}
		}
		getset := Input{Kind: OpGetSet, Key: d.in.Key, Value: v}
		set := Input{Kind: OpSet, Key: d.in.Key, Value: v}
		spareGetSet := max(0, count(a, getset)-count(b, getset))
		spareSet := count(a, set) - count(b, set) // >= 0: checked above
		use := min(spareGetSet, weak)
		if weak-use+gs > spareSet {
			return false
		}
	}
	return true
}

func pendEqual(a, b []pendOp) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (a config) dominates(b config) bool {
	return stateEqual(a.s, b.s) && pendGE(a.pend, b.pend)
}

func (cs configs) dominated(c config) bool {
	for _, o := range cs {
		if o.dominates(c) {
			return true
		}
	}
	return false
}

// add inserts c unless it is dominated, removing what it dominates. cs is
// owned by the caller (filtered in place).
func (cs configs) add(c config) configs {
	if cs.dominated(c) {
		return cs
	}
	out := cs[:0]
	for _, o := range cs {
		if !c.dominates(o) {
			out = append(out, o)
		}
	}
	return append(out, c)
}

// stepConfigs is the model's step function.
func stepConfigs(ctx context.Context, cs configs, in Input, out Output) (bool, configs) {
	next := make(configs, 0, len(cs))
	for _, c := range cs {
		next = successors(ctx, c, in, out, next)
		if ctx.Err() != nil {
			return false, nil
		}
	}
	return len(next) > 0, next
}

// successors adds to acc the configurations c can reach by applying a
// sequence of its pending writes and then in with reply out.
func successors(ctx context.Context, c config, in Input, out Output, acc configs) configs {
	if out.Unknown {
		if !in.Kind.IsWrite() {
			return acc.add(c) // no effect
		}
		return acc.add(config{c.s, pendAdd(c.pend, in)})
	}
	if len(c.pend) == 0 {
		if ok, n := step(c.s, in, out); ok {
			acc = acc.add(config{n, nil})
		}
		return acc
	}
	visited := configs{c}
	frontier := []config{c}
	for steps := 0; len(frontier) > 0; steps++ {
		if steps%32 == 31 && ctx.Err() != nil {
			return acc
		}
		x := frontier[0]
		frontier = frontier[1:]
		if ok, n := step(x.s, in, out); ok {
			acc = acc.add(config{n, x.pend})
			if in.Kind != OpAppend {
				continue
			}
		}
		if hopeless(x, in, out) {
			continue
		}
		for i, p := range x.pend {
			ns, _ := apply(x.s, p.in)
			y := config{ns, pendRemove(x.pend, i)}
			if visited.dominated(y) {
				continue
			}
			visited = visited.add(y)
			frontier = append(frontier, y)
		}
	}
	return acc
}

// hopeless reports whether no sequence of x's pending writes can bring a
// list to where the LRANGE or RPUSH in, with reply out, succeeds.
func hopeless(x config, in Input, out Output) bool {
	if x.s.kind != list || out.Err != "" || (in.Kind != OpRead && in.Kind != OpAppend) {
		return false
	}
	for _, p := range x.pend {
		if p.in.Kind == OpSet || p.in.Kind == OpDel {
			return false // could reset the list
		}
	}
	n := x.s.tail.n
	if in.Kind == OpAppend {
		return int64(n) >= out.Int
	}
	if n > len(out.List) {
		return true
	}
	c := x.s.tail
	for i := n - 1; i >= 0; i, c = i-1, c.prev {
		if c.val != out.List[i] {
			return true
		}
	}
	return false
}

func configsEqual(a, b configs) bool {
	if len(a) != len(b) {
		return false
	}
outer:
	for _, x := range a {
		for _, y := range b {
			if pendEqual(x.pend, y.pend) && stateEqual(x.s, y.s) {
				continue outer
			}
		}
		return false
	}
	return true
}

func configsHash(cs configs) uint64 {
	var h uint64
	for _, c := range cs {
		ch := stateHash(c.s)
		for _, p := range c.pend {
			ch = ch*1099511628211 ^ hashString(p.in.Value) ^ uint64(p.in.Kind)<<56 ^ uint64(p.n)
		}
		h ^= ch // order-independent: a set
	}
	return h
}

func describeConfigs(cs configs) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = describeState(c.s)
		if len(c.pend) > 0 {
			var ps []string
			for _, p := range c.pend {
				d := strings.TrimSuffix(describeOp(p.in, Output{Unknown: true}), " → ? (unknown)")
				if p.n > 1 {
					d = fmt.Sprintf("%d× %s", p.n, d)
				}
				ps = append(ps, d)
			}
			parts[i] += " + may still apply: " + strings.Join(ps, ", ")
		}
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return "one of: " + strings.Join(parts, " | ")
}

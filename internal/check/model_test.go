package check

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// History-building helpers.

func op(client int, call, ret int64, in Input, out Output) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
}

func unk(client int, call int64, in Input) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: Output{Unknown: true}, Return: math.MaxInt64}
}

func get(k string) Input           { return Input{Kind: OpGet, Key: k} }
func set(k, v string) Input        { return Input{Kind: OpSet, Key: k, Value: v} }
func setnx(k, v string) Input      { return Input{Kind: OpSetNX, Key: k, Value: v} }
func getset(k, v string) Input     { return Input{Kind: OpGetSet, Key: k, Value: v} }
func del(k string) Input           { return Input{Kind: OpDel, Key: k} }
func incr(k string) Input          { return Input{Kind: OpIncr, Key: k} }
func cas(k, from, to string) Input { return Input{Kind: OpCAS, Key: k, Expect: from, Value: to} }
func rpush(k, v string) Input      { return Input{Kind: OpAppend, Key: k, Value: v} }
func lrange(k string) Input        { return Input{Kind: OpRead, Key: k} }

func val(v string) Output                                      { return Output{Exists: true, Value: v} }
func none() Output                                             { return Output{} }
func num(n int64) Output                                       { return Output{Int: n} }
func ok(b bool) Output                                         { return Output{OK: b} }
func lst(l ...string) Output                                   { return Output{List: l} }
func errOut(e string) Output                                   { return Output{Err: e} }
func history(ops ...porcupine.Operation) []porcupine.Operation { return ops }

func mustPass(t *testing.T, name string, h []porcupine.Operation) {
	t.Helper()
	res := Check(h, 10*time.Second)
	if !res.Linearizable || res.TimedOut {
		t.Errorf("%s: want linearizable, got %+v (bad keys %v)", name, res.Linearizable, res.BadKeys)
	}
}

func mustFail(t *testing.T, name string, h []porcupine.Operation, badKey string) {
	t.Helper()
	res := Check(h, 10*time.Second)
	if res.Linearizable || res.TimedOut {
		t.Errorf("%s: want a violation, got linearizable=%v timedOut=%v", name, res.Linearizable, res.TimedOut)
		return
	}
	if !slices.Equal(res.BadKeys, []string{badKey}) {
		t.Errorf("%s: bad keys %v, want [%s]", name, res.BadKeys, badKey)
	}
}

func TestLinearizablePerKind(t *testing.T) {
	cases := map[string][]porcupine.Operation{
		"get/set": history(
			op(0, 0, 1, get("r"), none()),
			op(0, 2, 10, set("r", "a"), none()),
			op(1, 20, 30, get("r"), val("a")),
			op(0, 25, 40, set("r", "b"), none()),
			op(1, 31, 35, get("r"), val("b")), // concurrent with the SET
			op(2, 32, 36, get("r"), val("a")), // also concurrent: before it
			op(1, 41, 45, get("r"), val("b")),
		),
		"setnx": history(
			op(0, 0, 10, setnx("r", "a"), ok(true)),
			op(1, 5, 12, setnx("r", "b"), ok(false)),
			op(1, 20, 30, setnx("r", "c"), ok(false)),
			op(2, 31, 32, get("r"), val("a")),
		),
		"getset": history(
			op(0, 0, 10, getset("r", "a"), none()),
			op(1, 11, 20, getset("r", "b"), val("a")),
			op(0, 21, 30, get("r"), val("b")),
		),
		"del": history(
			op(0, 0, 10, set("r", "a"), none()),
			op(0, 11, 20, del("r"), num(1)),
			op(1, 21, 30, del("r"), num(0)),
			op(1, 31, 40, get("r"), none()),
		),
		"incr": history(
			op(0, 0, 10, incr("c"), num(1)),
			op(0, 11, 20, incr("c"), num(3)), // concurrent with client 1's
			op(1, 12, 19, incr("c"), num(2)),
			op(2, 21, 22, get("c"), val("3")),
			op(2, 23, 24, del("c"), num(1)),
			op(2, 25, 26, incr("c"), num(1)),
		),
		"incr errors": history(
			op(0, 0, 1, set("c", "x"), none()),
			op(0, 2, 3, incr("c"), errOut(ErrNotInteger)),
			op(0, 4, 5, set("c", "-0"), none()),
			op(0, 6, 7, incr("c"), errOut(ErrNotInteger)),
			op(0, 8, 9, set("c", strconv.FormatInt(math.MaxInt64, 10)), none()),
			op(0, 10, 11, incr("c"), errOut(ErrOverflow)),
			op(0, 12, 13, set("c", "-5"), none()),
			op(0, 14, 15, incr("c"), num(-4)),
			op(0, 16, 17, rpush("l", "x"), num(1)),
			op(0, 18, 19, incr("l"), errOut(ErrWrongType)),
		),
		"cas": history(
			op(0, 0, 10, set("r", "a"), none()),
			op(1, 11, 20, cas("r", "a", "b"), ok(true)),
			op(0, 15, 25, cas("r", "a", "c"), ok(false)), // aborted: no effect
			op(2, 26, 30, get("r"), val("b")),
		),
		"append/read": history(
			op(0, 0, 1, lrange("l"), lst()),
			op(0, 2, 10, rpush("l", "x"), num(2)),
			op(1, 3, 9, rpush("l", "y"), num(1)),
			op(2, 4, 5, lrange("l"), lst()),
			op(2, 6, 11, lrange("l"), lst("y")),
			op(1, 12, 13, lrange("l"), lst("y", "x")),
			op(0, 14, 15, rpush("l", "z"), num(3)),
			op(1, 16, 17, lrange("l"), lst("y", "x", "z")),
		),
		"types": history(
			op(0, 0, 1, rpush("k", "x"), num(1)),
			op(0, 2, 3, get("k"), errOut(ErrWrongType)),
			op(0, 4, 5, getset("k", "s"), errOut(ErrWrongType)),
			op(0, 6, 7, setnx("k", "s"), ok(false)),
			op(0, 8, 9, lrange("k"), lst("x")),
			op(0, 10, 11, set("k", "s"), none()), // SET replaces the list
			op(0, 12, 13, lrange("k"), errOut(ErrWrongType)),
			op(0, 14, 15, rpush("k", "y"), errOut(ErrWrongType)),
			op(0, 16, 17, get("k"), val("s")),
			op(0, 18, 19, del("k"), num(1)),
			op(0, 20, 21, rpush("k", "z"), num(1)),
			op(0, 22, 23, del("k"), num(1)),
			op(0, 24, 25, lrange("k"), lst()),
		),
		"unknown error class": history(
			op(0, 0, 1, set("r", "a"), errOut("ERR some definite refusal")),
			op(0, 2, 3, get("r"), none()),
		),
		"independent keys": history(
			op(0, 0, 10, set("r:0", "a"), none()),
			op(1, 0, 10, set("r:1", "b"), none()),
			op(0, 11, 12, get("r:1"), val("b")),
			op(1, 11, 12, get("r:0"), val("a")),
		),
	}
	for name, h := range cases {
		mustPass(t, name, h)
	}
}

func TestViolations(t *testing.T) {
	mustFail(t, "stale read after a completed write", history(
		op(0, 0, 10, set("r", "a"), none()),
		op(0, 11, 20, set("r", "b"), none()),
		op(1, 21, 30, get("r"), val("a")),
	), "r")
	mustFail(t, "read of a value never written", history(
		op(0, 0, 10, set("r", "a"), none()),
		op(1, 21, 30, get("r"), val("zzz")),
	), "r")
	mustFail(t, "lost append", history(
		op(0, 0, 10, rpush("l", "x"), num(1)),
		op(1, 11, 20, lrange("l"), lst()),
	), "l")
	mustFail(t, "lost append among others", history(
		op(0, 0, 10, rpush("l", "x"), num(1)),
		op(0, 11, 20, rpush("l", "y"), num(2)),
		op(1, 21, 30, lrange("l"), lst("y")),
	), "l")
	mustFail(t, "appends read out of order", history(
		op(0, 0, 10, rpush("l", "x"), num(1)),
		op(0, 11, 20, rpush("l", "y"), num(2)),
		op(1, 21, 30, lrange("l"), lst("y", "x")),
	), "l")
	mustFail(t, "RPUSH lengths inconsistent", history(
		op(0, 0, 10, rpush("l", "x"), num(1)),
		op(1, 5, 15, rpush("l", "y"), num(1)),
	), "l")
	mustFail(t, "CAS succeeding on an overwritten value", history(
		op(0, 0, 10, set("r", "a"), none()),
		op(0, 11, 20, set("r", "b"), none()),
		op(1, 21, 30, cas("r", "a", "c"), ok(true)),
	), "r")
	mustFail(t, "INCR returning a duplicate", history(
		op(0, 0, 10, incr("c"), num(1)),
		op(1, 5, 15, incr("c"), num(1)),
	), "c")
	mustFail(t, "INCR going back", history(
		op(0, 0, 10, incr("c"), num(1)),
		op(0, 11, 15, incr("c"), num(2)),
		op(1, 16, 20, get("c"), val("1")),
	), "c")
	mustFail(t, "two SET NX applied", history(
		op(0, 0, 10, setnx("r", "a"), ok(true)),
		op(1, 5, 15, setnx("r", "b"), ok(true)),
	), "r")
	mustFail(t, "DEL removing twice", history(
		op(0, 0, 10, set("r", "a"), none()),
		op(0, 11, 15, del("r"), num(1)),
		op(1, 16, 20, del("r"), num(1)),
	), "r")
	mustFail(t, "GETSET wrong previous value", history(
		op(0, 0, 10, set("r", "a"), none()),
		op(1, 11, 20, getset("r", "b"), none()),
	), "r")
	mustFail(t, "GET of a list answered", history(
		op(0, 0, 10, rpush("k", "x"), num(1)),
		op(1, 11, 20, get("k"), val("x")),
	), "k")
	mustFail(t, "WRONGTYPE where there is none", history(
		op(0, 0, 10, set("k", "a"), none()),
		op(1, 11, 20, get("k"), errOut(ErrWrongType)),
	), "k")
	mustFail(t, "INCR error on an integer", history(
		op(0, 0, 10, set("c", "41"), none()),
		op(1, 11, 20, incr("c"), errOut(ErrNotInteger)),
	), "c")
	mustFail(t, "only one bad key of several", history(
		op(0, 0, 10, set("a", "1"), none()),
		op(0, 11, 20, get("a"), val("1")),
		op(1, 0, 10, incr("c"), num(1)),
		op(1, 11, 20, incr("c"), num(1)),
	), "c")
}

func TestUnknownMayOrMayNotApply(t *testing.T) {
	// An unknown SET: reads that see it and reads that do not are both
	// fine, before and after its (unknown) linearization point.
	mustPass(t, "unknown set, seen", history(
		unk(0, 0, set("r", "a")),
		op(1, 10, 20, get("r"), val("a")),
	))
	mustPass(t, "unknown set, not seen", history(
		unk(0, 0, set("r", "a")),
		op(1, 10, 20, get("r"), none()),
		op(1, 30, 40, get("r"), none()),
	))
	mustPass(t, "unknown set, seen late", history(
		unk(0, 0, set("r", "a")),
		op(1, 10, 20, get("r"), none()),
		op(1, 30, 40, get("r"), val("a")),
	))
	mustFail(t, "unknown set, seen then unseen", history(
		unk(0, 0, set("r", "a")),
		op(1, 10, 20, get("r"), val("a")),
		op(1, 30, 40, get("r"), none()),
	), "r")
	mustFail(t, "unknown set seen before it was invoked", history(
		op(1, 0, 5, get("r"), val("a")),
		unk(0, 10, set("r", "a")),
	), "r")
	mustPass(t, "unknown append, applied", history(
		unk(0, 0, rpush("l", "x")),
		op(1, 10, 20, lrange("l"), lst()),
		op(0, 21, 22, rpush("l", "y"), num(2)),
		op(1, 30, 40, lrange("l"), lst("x", "y")),
	))
	mustPass(t, "unknown append, not applied", history(
		unk(0, 0, rpush("l", "x")),
		op(0, 21, 22, rpush("l", "y"), num(1)),
		op(1, 30, 40, lrange("l"), lst("y")),
	))
	mustFail(t, "unknown append, applied then lost", history(
		unk(0, 0, rpush("l", "x")),
		op(1, 10, 20, lrange("l"), lst("x")),
		op(1, 30, 40, lrange("l"), lst()),
	), "l")
	mustPass(t, "unknown incr, applied", history(
		unk(0, 0, incr("c")),
		op(1, 10, 20, incr("c"), num(2)),
	))
	mustPass(t, "unknown incr, not applied", history(
		unk(0, 0, incr("c")),
		op(1, 10, 20, incr("c"), num(1)),
	))
	mustPass(t, "unknown CAS, applied", history(
		op(0, 0, 1, set("r", "a"), none()),
		unk(0, 2, cas("r", "a", "b")),
		op(1, 10, 20, get("r"), val("b")),
	))
	mustPass(t, "unknown CAS, not applied", history(
		op(0, 0, 1, set("r", "a"), none()),
		unk(0, 2, cas("r", "a", "b")),
		op(1, 10, 20, get("r"), val("a")),
	))
	mustFail(t, "unknown CAS cannot apply on another value", history(
		op(0, 0, 1, set("r", "z"), none()),
		unk(0, 2, cas("r", "a", "b")),
		op(1, 10, 20, get("r"), val("b")),
	), "r")

	// Unknown reads constrain nothing and are not checked.
	res := Check(history(
		op(0, 0, 1, set("r", "a"), none()),
		unk(1, 0, get("r")),
		unk(1, 0, lrange("l")),
		unk(2, 0, incr("c")),
	), time.Second)
	if !res.Linearizable || res.Ops != 4 || res.Checked != 2 {
		t.Errorf("pruning: %+v, want linearizable with 4 ops, 2 checked", res)
	}
}

func TestFailedIsInvisible(t *testing.T) {
	rec := NewRecorder()
	rec.Begin(0, set("r", "a")).Fail()
	rec.Begin(0, rpush("l", "x")).FailBecause("CLUSTERDOWN")
	p := rec.Begin(1, get("r"))
	p.Ok(val("a"))
	ops := rec.Operations()
	if len(ops) != 1 {
		t.Fatalf("operations %v, want only the GET", ops)
	}
	mustFail(t, "read of a failed write", ops, "r")

	rec = NewRecorder()
	rec.Begin(0, set("r", "a")).Fail()
	rec.Begin(1, get("r")).Ok(none())
	rec.Begin(0, rpush("l", "x")).Fail()
	rec.Begin(1, rpush("l", "y")).Ok(num(1))
	mustPass(t, "failed writes not seen", rec.Operations())
}

func TestExecSemantics(t *testing.T) {
	strS := keyState{kind: str, val: "s"}
	listS := keyState{kind: list, tail: push(push(nil, "a"), "b")}
	intS := keyState{kind: str, val: "41"}
	cases := []struct {
		name string
		s    keyState
		in   Input
		want Output
		next keyState
	}{
		{"GET absent", keyState{}, get("k"), none(), keyState{}},
		{"GET string", strS, get("k"), val("s"), strS},
		{"GET list", listS, get("k"), errOut(ErrWrongType), listS},
		{"SET over list", listS, set("k", "v"), none(), keyState{kind: str, val: "v"}},
		{"SETNX absent", keyState{}, setnx("k", "v"), ok(true), keyState{kind: str, val: "v"}},
		{"SETNX list", listS, setnx("k", "v"), ok(false), listS},
		{"GETSET absent", keyState{}, getset("k", "v"), none(), keyState{kind: str, val: "v"}},
		{"GETSET string", strS, getset("k", "v"), val("s"), keyState{kind: str, val: "v"}},
		{"GETSET list", listS, getset("k", "v"), errOut(ErrWrongType), listS},
		{"DEL absent", keyState{}, del("k"), num(0), keyState{}},
		{"DEL list", listS, del("k"), num(1), keyState{}},
		{"INCR absent", keyState{}, incr("k"), num(1), keyState{kind: str, val: "1"}},
		{"INCR int", intS, incr("k"), num(42), keyState{kind: str, val: "42"}},
		{"INCR string", strS, incr("k"), errOut(ErrNotInteger), strS},
		{"INCR +1", keyState{kind: str, val: "+1"}, incr("k"), errOut(ErrNotInteger), keyState{kind: str, val: "+1"}},
		{"INCR 01", keyState{kind: str, val: "01"}, incr("k"), errOut(ErrNotInteger), keyState{kind: str, val: "01"}},
		{"INCR -1", keyState{kind: str, val: "-1"}, incr("k"), num(0), keyState{kind: str, val: "0"}},
		{"INCR 2^63", keyState{kind: str, val: "9223372036854775808"}, incr("k"), errOut(ErrNotInteger), keyState{kind: str, val: "9223372036854775808"}},
		{"INCR list", listS, incr("k"), errOut(ErrWrongType), listS},
		{"CAS match", strS, cas("k", "s", "t"), ok(true), keyState{kind: str, val: "t"}},
		{"CAS mismatch", strS, cas("k", "x", "t"), ok(false), strS},
		{"RPUSH absent", keyState{}, rpush("k", "a"), num(1), keyState{kind: list, tail: push(nil, "a")}},
		{"RPUSH list", listS, rpush("k", "c"), num(3), keyState{kind: list, tail: push(listS.tail, "c")}},
		{"RPUSH string", strS, rpush("k", "c"), errOut(ErrWrongType), strS},
		{"LRANGE string", strS, lrange("k"), errOut(ErrWrongType), strS},
	}
	for _, c := range cases {
		next, out := apply(c.s, c.in)
		if out.Err != c.want.Err || out.Exists != c.want.Exists || out.Value != c.want.Value || out.Int != c.want.Int || out.OK != c.want.OK {
			t.Errorf("%s: reply %+v, want %+v", c.name, out, c.want)
		}
		if !stateEqual(next, c.next) {
			t.Errorf("%s: state %s, want %s", c.name, describeState(next), describeState(c.next))
		}
		if ok, _ := step(c.s, c.in, c.want); !ok {
			t.Errorf("%s: step rejects the reply Redis gives", c.name)
		}
	}
	// LRANGE compares the whole list.
	if ok, _ := step(listS, lrange("k"), lst("a", "b")); !ok {
		t.Error("LRANGE [a b] rejected")
	}
	for _, l := range [][]string{{"a"}, {"b", "a"}, {"a", "b", "c"}, nil} {
		if ok, _ := step(listS, lrange("k"), lst(l...)); ok {
			t.Errorf("LRANGE %v accepted on [a b]", l)
		}
	}
	// States built along different paths are equal and hash alike.
	a := keyState{kind: list, tail: push(push(nil, "a"), "b")}
	if !stateEqual(a, listS) || stateHash(a) != stateHash(listS) {
		t.Error("equal lists built separately are not equal")
	}
	if stateEqual(a, keyState{kind: list, tail: push(push(nil, "b"), "a")}) {
		t.Error("lists in different orders are equal")
	}
}

// genHistory simulates clients against a sequential store: every
// operation takes effect at a random instant between its invocation and
// its completion, so the history is linearizable by construction. One
// write in unknownEvery is unknown (half of them applied).
func genHistory(seed uint64, clients, perClient, keys, unknownEvery int) []porcupine.Operation {
	rng := rand.New(rand.NewPCG(seed, 0))
	type gop struct {
		porcupine.Operation
		lp      int64
		unknown bool
		applied bool
	}
	var all []*gop
	seq := 0
	for c := 0; c < clients; c++ {
		t := int64(rng.IntN(100))
		for i := 0; i < perClient; i++ {
			call := t + int64(rng.IntN(50))
			ret := call + 1 + int64(rng.IntN(400))
			seq++
			n := strconv.Itoa(rng.IntN(keys))
			v := "v-" + strconv.Itoa(seq)
			var in Input
			switch x := rng.IntN(100); {
			case x < 25:
				in = get("r:" + n)
			case x < 40:
				in = set("r:"+n, v)
			case x < 45:
				in = setnx("r:"+n, v)
			case x < 50:
				in = getset("r:"+n, v)
			case x < 55:
				in = del("r:" + n)
			case x < 65:
				in = incr("c:" + n)
			case x < 75:
				in = cas("r:"+n, "", v) // Expect filled at the linearization point
			case x < 90:
				in = rpush("l:"+n, v)
			default:
				in = lrange("l:" + n)
			}
			g := &gop{Operation: op(c, call, ret, in, Output{}), lp: call + rng.Int64N(ret-call+1)}
			if in.Kind.IsWrite() && rng.IntN(unknownEvery) == 0 {
				g.unknown, g.applied = true, rng.IntN(2) == 0
			}
			all = append(all, g)
			t = ret + 1
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].lp < all[j].lp })
	states := map[string]keyState{}
	for _, g := range all {
		in := g.Input.(Input)
		s := states[in.Key]
		if in.Kind == OpCAS {
			if s.kind == str && rng.IntN(4) > 0 {
				in.Expect = s.val // usually a CAS that succeeds
			} else {
				in.Expect = "nope"
			}
			g.Input = in
		}
		next, out := apply(s, in)
		if in.Kind == OpRead && s.kind == list {
			out.List = s.tail.elems()
		}
		switch {
		case g.unknown:
			g.Output, g.Return = Output{Unknown: true}, math.MaxInt64
			if g.applied {
				states[in.Key] = next
			}
		case in.Kind == OpCAS && !out.OK:
			// The workload records a failed CAS as a GET.
			g.Input = get(in.Key)
			g.Output = Output{Exists: s.kind == str, Value: s.val}
		default:
			g.Output = out
			states[in.Key] = next
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Call < all[j].Call })
	ops := make([]porcupine.Operation, len(all))
	for i, g := range all {
		ops[i] = g.Operation
	}
	return ops
}

func TestLargeHistory(t *testing.T) {
	for _, every := range []int{50, 10} {
		ops := genHistory(7, 8, 2500, 3, every) // 20,000 operations over 3+3+3 keys
		start := time.Now()
		res := Check(ops, 2*time.Minute)
		t.Logf("1 write in %d unknown: %d operations (%d checked) in %v", every, res.Ops, res.Checked, time.Since(start))
		if !res.Linearizable || res.TimedOut {
			t.Fatalf("generated linearizable history refuted: timed out %v, bad keys %v, suspect %v", res.TimedOut, res.BadKeys, res.Suspect)
		}

		// A lost append: drop the first element of an LRANGE in the
		// middle of the history (lists are never deleted, and unknown
		// appends cannot remove anything).
		bad := slices.Clone(ops)
		var key string
		for i := len(bad) / 2; i < len(bad); i++ {
			in, out := bad[i].Input.(Input), bad[i].Output.(Output)
			if in.Kind == OpRead && !out.Unknown && len(out.List) >= 10 {
				out.List = slices.Clone(out.List[1:])
				bad[i].Output, key = out, in.Key
				break
			}
		}
		start = time.Now()
		res = Check(bad, 2*time.Minute)
		t.Logf("lost append refuted in %v", time.Since(start))
		if res.Linearizable || res.TimedOut || !slices.Equal(res.BadKeys, []string{key}) {
			t.Fatalf("lost element in LRANGE %s not detected: timed out %v, bad keys %v", key, res.TimedOut, res.BadKeys)
		}

		// A duplicate INCR: a completed INCR returns what an earlier
		// completed one returned (counters are never deleted here).
		bad = slices.Clone(ops)
		key = ""
		last := map[string]porcupine.Operation{}
		for i := len(bad) / 2; i < len(bad) && key == ""; i++ {
			in, out := bad[i].Input.(Input), bad[i].Output.(Output)
			if in.Kind != OpIncr || out.Unknown {
				continue
			}
			if prev, ok := last[in.Key]; ok && prev.Return < bad[i].Call {
				bad[i].Output, key = prev.Output, in.Key
			}
			last[in.Key] = bad[i]
		}
		start = time.Now()
		res = Check(bad, 2*time.Minute)
		t.Logf("duplicate INCR refuted in %v", time.Since(start))
		if res.Linearizable || res.TimedOut || !slices.Equal(res.BadKeys, []string{key}) {
			t.Fatalf("duplicate INCR on %s not detected: timed out %v, bad keys %v", key, res.TimedOut, res.BadKeys)
		}
	}
}

func TestDeferredUnknownWrites(t *testing.T) {
	mustPass(t, "two unknown appends applied in either order", history(
		unk(0, 0, rpush("l", "x")),
		unk(1, 1, rpush("l", "y")),
		op(2, 10, 20, lrange("l"), lst("y", "x")),
		op(2, 21, 22, rpush("l", "z"), num(3)),
	))
	mustPass(t, "unknown appends applied one by one", history(
		unk(0, 0, rpush("l", "x")),
		unk(1, 1, rpush("l", "y")),
		op(2, 10, 20, rpush("l", "z"), num(2)), // one of x, y before z
		op(2, 21, 22, lrange("l"), lst("y", "z", "x")),
	))
	mustFail(t, "unknown append applied twice", history(
		unk(0, 0, rpush("l", "x")),
		op(2, 10, 20, lrange("l"), lst("x", "x")),
	), "l")
	mustPass(t, "two unknown INCRs", history(
		unk(0, 0, incr("c")),
		unk(1, 1, incr("c")),
		op(2, 10, 20, incr("c"), num(2)),
		op(2, 21, 22, get("c"), val("2")),
		op(2, 23, 24, incr("c"), num(4)),
	))
	mustFail(t, "more INCRs than there were", history(
		unk(0, 0, incr("c")),
		unk(1, 1, incr("c")),
		op(2, 10, 20, incr("c"), num(4)),
	), "c")
	mustPass(t, "unknown DEL applied late", history(
		op(0, 0, 1, set("r", "a"), none()),
		unk(1, 2, del("r")),
		op(2, 10, 20, get("r"), val("a")),
		op(2, 21, 22, get("r"), none()),
	))
	mustFail(t, "unknown DEL cannot be undone", history(
		op(0, 0, 1, set("r", "a"), none()),
		unk(1, 2, del("r")),
		op(2, 10, 20, get("r"), none()),
		op(2, 21, 22, get("r"), val("a")),
	), "r")
	mustPass(t, "unknown DEL then INCR from 1", history(
		op(0, 0, 1, incr("c"), num(1)),
		unk(1, 2, del("c")),
		unk(1, 3, incr("c")),
		op(2, 10, 20, get("c"), val("1")), // DEL then INCR, or neither
		op(2, 21, 22, incr("c"), num(2)),
	))
	mustPass(t, "unknown CAS applies only on its value", history(
		op(0, 0, 1, set("r", "a"), none()),
		unk(1, 2, cas("r", "b", "c")),
		op(0, 3, 4, set("r", "b"), none()),
		op(2, 10, 20, get("r"), val("c")),
	))
	mustFail(t, "unknown CAS on a value the key never had", history(
		op(0, 0, 1, set("r", "a"), none()),
		unk(1, 2, cas("r", "b", "c")),
		op(2, 10, 20, get("r"), val("c")),
	), "r")

	// An unknown SET whose value nobody read, needed to explain a DEL
	// that removed something: the first pass (which leaves it out)
	// refutes the key, the second (with it) accepts.
	h := history(
		unk(0, 0, set("r", "q")),
		op(1, 10, 20, del("r"), num(1)),
		op(1, 21, 22, get("r"), none()),
	)
	res := Check(h, 10*time.Second)
	if !res.Linearizable || res.Checked != 3 {
		t.Errorf("DEL of an unobserved unknown SET: %+v, want linearizable with 3 operations checked", res)
	}
	mustFail(t, "DEL of nothing", h[1:], "r")
	mustFail(t, "unobserved unknown SET cannot be read", history(
		unk(0, 0, set("r", "q")),
		op(1, 10, 20, del("r"), num(1)),
		op(1, 21, 22, get("r"), val("p")),
	), "r")
}

func TestCheckTimeout(t *testing.T) {
	// A history too hard for 1ns: neither proven nor refuted.
	res := Check(genHistory(3, 8, 500, 1, 10), time.Nanosecond)
	if res.Linearizable || !res.TimedOut || res.BadKeys != nil {
		t.Errorf("with a 1ns timeout: %+v, want timed out", res)
	}
}

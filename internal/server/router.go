package server

import (
	"bytes"
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvorum/kvorum/internal/kv"
	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/resp"
	"github.com/kvorum/kvorum/internal/slot"
	"github.com/kvorum/kvorum/internal/storage"
	"github.com/kvorum/kvorum/internal/store"
)

// Routing (docs/ranges.md §3.6). The keyspace is cut into ranges, each a
// Raft group owning an interval of hash slots; a command goes to the range
// that owns the slots of its keys (kv.EachKey: the keys the range check at
// apply tests, those of COMMAND GETKEYS and of the commands a wrapper
// holds). While the store holds one range (the default), execWrite and
// execRead hand their run to it without looking at a key: the one-range
// path costs what it did before routing existed.
//
// With several ranges, a run of writes or of reads (backend.Do) is cut
// into one group per range, in command order within each, and the groups
// go out in parallel: one proposal and one read barrier per range touched.
// That is still linearizable: the client sent the commands pipelined,
// without waiting for replies, so they are concurrent operations (Redis
// Cluster clients get the same). Replies come back in command order.
//
//   - A command with no key goes to range 1 (the system range), except the
//     keyspace commands of fanOut, which act on every range.
//   - A command whose keys belong to different ranges answers CROSSRANGE
//     (commands across ranges are slice 2 of issue 18).
//   - A write answered RANGEKEYMISMATCH wrote nothing (the range check at
//     apply refused it: its range no longer owns the key, after a split) and
//     is routed again; so is a read group whose range's descriptor
//     generation changed while it waited for its read barrier.
//
// Every node hosts every range in slice 1 (each range has range 1's
// replica set): a fan-out read takes a read barrier on every range and
// then reads the node's one Pebble, which holds them all.

// errCrossRange answers a command whose keys span ranges.
var errCrossRange = reply.Error("CROSSRANGE the command's keys belong to different ranges (Raft groups owning different hash slots); commands across ranges are not supported yet (issue 18, slice 2): put the keys in one hash slot with a hash tag, e.g. {user1}:a and {user1}:b")

// errRangeMoving answers a command still misrouted after routeRetries.
var errRangeMoving = reply.Error("TRYAGAIN the range owning the command's keys is changing (a split); try again")

// testMisroute, set only by tests, replaces the range a command is first
// sent to (a stale route, as a split leaves): the range check at apply
// (or, for a read, the descriptor given to kv.ReadIn) refuses it and
// routeGroups routes it again.
var testMisroute atomic.Pointer[func(n *Node, args [][]byte) *store.Replica]

// routeRetries bounds the re-routings of one command (RANGEKEYMISMATCH, a
// descriptor generation change during a read barrier).
const routeRetries = 50

// multiRange reports whether the store holds more than one range.
func (n *Node) multiRange() bool { return n.store.ReplicaCount() > 1 }

// replicaForKey is the local replica whose range owns key (range 1 if no
// local replica owns its slot).
func (n *Node) replicaForKey(key []byte) *store.Replica {
	if r := n.store.ReplicaForSlot(slot.Of(key)); r != nil {
		return r
	}
	return n.store.Replica(firstRange)
}

// routeOf returns the replica of args' range: the one owning its keys, or
// range 1 for a command with no key; cross is set when its keys belong to
// different ranges.
func (n *Node) routeOf(args [][]byte) (r *store.Replica, cross bool) {
	kv.EachKey(args, func(k []byte) bool {
		x := n.replicaForKey(k)
		if r == nil {
			r = x
			return true
		}
		if x != r {
			cross = true
			return false
		}
		return true
	})
	if r == nil {
		r = n.store.Replica(firstRange)
	}
	return r, cross
}

// fanOut are the keyspace commands that act on every range.
var fanOut = map[string]bool{
	"dbsize": true, "keys": true, "randomkey": true, "scan": true,
	"flushall": true, "flushdb": true,
}

func isFanOut(args [][]byte) bool {
	return len(args) > 0 && len(args[0]) <= len("randomkey") && fanOut[strings.ToLower(string(args[0]))]
}

// execWrite runs a run of writes, routed to their ranges, not counted in
// the ranges' load (the node's own writes: ranges_load.go).
func (n *Node) execWrite(ctx context.Context, cmds [][][]byte, out []reply.Reply) {
	n.execWriteRun(ctx, false, cmds, out)
}

// execWriteRun is execWrite; count: the writes are a client's, counted in
// their ranges' load (ranges_load.go).
func (n *Node) execWriteRun(ctx context.Context, count bool, cmds [][][]byte, out []reply.Reply) {
	if !n.multiRange() {
		r1 := n.store.Replica(firstRange)
		n.execWriteOn(ctx, r1, cmds, out)
		// A split applied between the check above and the commands'
		// apply: range 1 refused the keys it no longer owns (they wrote
		// nothing); route those again.
		var idx []int
		for i := range out {
			if _, mismatch := kv.IsRangeKeyMismatch(out[i]); mismatch {
				idx = append(idx, i)
			}
		}
		if count {
			n.countLoad(r1, true, len(cmds)-len(idx), cmds)
		}
		if len(idx) > 0 {
			sub := make([][][]byte, len(idx))
			subOut := make([]reply.Reply, len(idx))
			for j, i := range idx {
				sub[j] = cmds[i]
			}
			n.routeRun(ctx, true, count, sub, subOut)
			for j, i := range idx {
				out[i] = subOut[j]
			}
		}
		return
	}
	n.routeRun(ctx, true, count, cmds, out)
}

// execRead runs a run of reads, routed to their ranges, not counted in
// the ranges' load (ranges_load.go).
func (n *Node) execRead(ctx context.Context, cmds [][][]byte, out []reply.Reply) {
	n.execReadRun(ctx, false, cmds, out)
}

// execReadRun is execRead; count: the reads are a client's, counted in
// their ranges' load (ranges_load.go).
func (n *Node) execReadRun(ctx context.Context, count bool, cmds [][][]byte, out []reply.Reply) {
	if !n.multiRange() {
		// The one range may not own every slot: a node that caught up on
		// range 1 by a snapshot taken after a split holds no replica of
		// the other half yet (a hole, ranges_repair.go). The read checks
		// its keys against the descriptor, as routed reads do: without
		// it, a key of the hole read this node's leftover state (the
		// torture's split fault found such stale reads).
		r := n.store.Replica(firstRange)
		desc := r.Descriptor()
		if !desc.IsFull() {
			n.routeRun(ctx, false, count, cmds, out)
			return
		}
		if !n.execReadOn(ctx, r, desc, cmds, out) {
			if count {
				n.countLoad(r, false, len(cmds), cmds)
			}
			return
		}
		// The range changed during the read (a split may have moved the
		// keys to a range whose writes this read point does not cover):
		// read again, routed.
	}
	n.routeRun(ctx, false, count, cmds, out)
}

// routeRun executes a run of writes or reads over several ranges: the
// fan-out commands one at a time, in order, the commands between them
// grouped by range. count: as execWriteRun's.
func (n *Node) routeRun(ctx context.Context, write, count bool, cmds [][][]byte, out []reply.Reply) {
	for i := 0; i < len(cmds); {
		if isFanOut(cmds[i]) {
			n.execFanOut(ctx, write, count, cmds[i], out[i:i+1])
			i++
			continue
		}
		j := i + 1
		for j < len(cmds) && !isFanOut(cmds[j]) {
			j++
		}
		n.routeGroups(ctx, write, count, cmds[i:j], out[i:j])
		i = j
	}
}

// routeGroup is the commands of one run that go to one range.
type routeGroup struct {
	r     *store.Replica
	desc  *storage.Descriptor
	idx   []int
	cmds  [][][]byte
	out   []reply.Reply
	stale bool
}

// routeGroups groups cmds by range, runs the groups in parallel, and
// routes again the commands their range refused. count: each command is
// counted in the load of the range whose reply it gets (ranges_load.go).
func (n *Node) routeGroups(ctx context.Context, write, count bool, cmds [][][]byte, out []reply.Reply) {
	pending := make([]int, len(cmds))
	for i := range pending {
		pending[i] = i
	}
	for attempt := 0; len(pending) > 0; attempt++ {
		var groups []*routeGroup
		for _, k := range pending {
			r, cross := n.routeOf(cmds[k])
			if cross {
				out[k] = errCrossRange
				continue
			}
			if f := testMisroute.Load(); attempt == 0 && f != nil {
				if w := (*f)(n, cmds[k]); w != nil {
					r = w // a stale route, as after a split (tests)
				}
			}
			gi := slices.IndexFunc(groups, func(g *routeGroup) bool { return g.r == r })
			if gi < 0 {
				gi = len(groups)
				groups = append(groups, &routeGroup{r: r})
			}
			g := groups[gi]
			g.idx = append(g.idx, k)
			g.cmds = append(g.cmds, cmds[k])
		}
		run := func(g *routeGroup) {
			g.out = make([]reply.Reply, len(g.cmds))
			if g.r.RangeID() != firstRange {
				g.cmds = n.resolveScripts(ctx, g.cmds)
			}
			if write {
				n.execWriteOn(ctx, g.r, g.cmds, g.out)
				return
			}
			g.desc = g.r.Descriptor()
			g.stale = n.execReadOn(ctx, g.r, g.desc, g.cmds, g.out)
		}
		if len(groups) == 1 {
			run(groups[0])
		} else {
			var wg sync.WaitGroup
			for _, g := range groups {
				wg.Add(1)
				go func() {
					defer wg.Done()
					run(g)
				}()
			}
			wg.Wait()
		}
		pending = pending[:0]
		last := attempt >= routeRetries || ctx.Err() != nil
		for _, g := range groups {
			answered := 0
			for i, k := range g.idx {
				switch _, mismatch := kv.IsRangeKeyMismatch(g.out[i]); {
				case (g.stale || mismatch) && last:
					// Never the internal RANGEKEYMISMATCH: the client
					// gets what it can act on.
					out[k] = errRangeMoving
				case g.stale || (mismatch && !last):
					pending = append(pending, k)
				default:
					out[k] = g.out[i]
					answered++
				}
			}
			if count {
				n.countLoad(g.r, write, answered, g.cmds)
			}
		}
		if len(pending) > 0 {
			slices.Sort(pending)
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
}

// localReplicas returns the node's replicas by range id.
func (n *Node) localReplicas() []*store.Replica {
	reps := n.store.Replicas()
	slices.SortFunc(reps, func(a, b *store.Replica) int { return cmp.Compare(a.RangeID(), b.RangeID()) })
	return reps
}

// execFanOut runs a keyspace command on every range. A read (DBSIZE,
// KEYS, RANDOMKEY, SCAN) takes a read barrier on every range, then reads
// the node's state, which holds every range (slice 1): SCAN's cursor is a
// storage key, and user keys are stored slot first, so a SCAN goes from
// one range's span into the next as it fills COUNT. A write (FLUSHALL,
// FLUSHDB) is proposed to every range, each deleting its own slots: not
// atomic across ranges (as in Redis Cluster, where each node flushes its
// own slots); its reply is the first range's error, or range 1's reply.
// count: it counts once in the load of every local range.
func (n *Node) execFanOut(ctx context.Context, write, count bool, args [][]byte, out []reply.Reply) {
	reps := n.localReplicas()
	if count {
		for _, r := range reps {
			n.countLoad(r, write, 1, nil)
		}
	}
	outs := make([]reply.Reply, len(reps))
	errs := make([]*reply.Reply, len(reps))
	var wg sync.WaitGroup
	for i, r := range reps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if write {
				n.execWriteOn(ctx, r, [][][]byte{args}, outs[i:i+1])
			} else if !resp.StaleReadsOK(ctx) {
				errs[i] = n.readBarrierOn(ctx, r)
			}
		}()
	}
	wg.Wait()
	if write {
		out[0] = outs[0]
		for _, o := range outs {
			if o.Kind == reply.KindError {
				out[0] = o
				break
			}
		}
		return
	}
	for _, e := range errs {
		if e != nil {
			out[0] = *e
			return
		}
	}
	if _, holes := n.holeSlots(); holes > 0 {
		// Slots no local range owns (ranges_repair.go): what this node
		// holds of them is left over, not a range's state.
		out[0] = errRangeMoving
		return
	}
	n.readLocal(ctx, nil, [][][]byte{args}, out)
}

// barrierKeys takes a read barrier on each range keys belong to.
func (n *Node) barrierKeys(ctx context.Context, keys [][]byte) *reply.Reply {
	var done []*store.Replica
	for _, k := range keys {
		r := n.replicaForKey(k)
		if slices.Contains(done, r) {
			continue
		}
		done = append(done, r)
		if e := n.readBarrierOn(ctx, r); e != nil {
			return e
		}
	}
	if len(done) == 0 {
		return n.readBarrier(ctx)
	}
	return nil
}

// proposeKeysByRange proposes the internal command name with keys as its
// arguments: one command per range the keys belong to (best effort).
func (n *Node) proposeKeysByRange(ctx context.Context, name string, keys [][]byte) {
	if !n.multiRange() {
		cmd := append([][]byte{[]byte(name)}, keys...)
		n.execWriteOn(ctx, n.store.Replica(firstRange), [][][]byte{cmd}, make([]reply.Reply, 1))
		return
	}
	var reps []*store.Replica
	var cmds [][][]byte
	for _, k := range keys {
		r := n.replicaForKey(k)
		i := slices.Index(reps, r)
		if i < 0 {
			i = len(reps)
			reps = append(reps, r)
			cmds = append(cmds, [][]byte{[]byte(name)})
		}
		cmds[i] = append(cmds[i], k)
	}
	for i, r := range reps {
		n.execWriteOn(ctx, r, cmds[i:i+1], make([]reply.Reply, 1))
	}
}

// resolveScripts replaces EVALSHA and EVALSHA_RO in cmds bound for a range
// other than range 1 by EVAL and EVAL_RO of the body range 1 holds on this
// node: that range's replicas cannot read range 1's script cache (kv's
// systemState: they would read it as of different points of range 1's
// log). So are those a transaction queued (KVORUM.EXEC: EVALSHA inside
// MULTI/EXEC) and those the node wraps (KVORUM.AS for a user with ACL
// restrictions, KVORUM.OOM over maxmemory). A sha this node does not hold
// is looked up again after a read barrier on range 1 (a SCRIPT LOAD that
// replied through another node); still unknown, it is left as it is: the
// range answers NOSCRIPT (in EXEC's reply array, inside a transaction, as
// Redis does), and clients fall back to EVAL, as they do after SCRIPT
// FLUSH.
func (n *Node) resolveScripts(ctx context.Context, cmds [][][]byte) [][][]byte {
	var out [][][]byte
	barrier := false
	for i, c := range cmds {
		nc, ok := n.resolveScript(ctx, c, &barrier)
		if !ok {
			continue
		}
		if out == nil {
			out = slices.Clone(cmds)
		}
		out[i] = nc
	}
	if out == nil {
		return cmds
	}
	return out
}

// resolveScript is resolveScripts of one command: the command with its
// EVALSHA (or the ones it wraps) resolved, and whether any was. barrier:
// a read barrier on range 1 was taken already (one per run).
func (n *Node) resolveScript(ctx context.Context, c [][]byte, barrier *bool) ([][]byte, bool) {
	if len(c) < 2 {
		return c, false
	}
	// bytes.EqualFold, not a lower-cased copy: every command routed to a
	// range other than 1 passes here, and must not allocate to say no.
	var name string
	switch cmd := c[0]; {
	case bytes.EqualFold(cmd, []byte("evalsha")):
		name = "EVAL"
	case bytes.EqualFold(cmd, []byte("evalsha_ro")):
		name = "EVAL_RO"
	case bytes.EqualFold(cmd, []byte("kvorum.exec")):
		return kv.RewriteExec(c, func(q [][]byte) ([][]byte, bool) { return n.resolveScript(ctx, q, barrier) })
	case bytes.EqualFold(cmd, []byte("kvorum.as")):
		return n.resolveWrapped(ctx, c, 2, barrier)
	case bytes.EqualFold(cmd, []byte("kvorum.oom")):
		return n.resolveWrapped(ctx, c, 1, barrier)
	default:
		return c, false
	}
	body, ok, err := kv.ScriptBody(n.db, c[1])
	if err == nil && !ok && !*barrier {
		*barrier = true
		// Bounded: a range 1 with no leader costs a NOSCRIPT a second,
		// not the client's deadline.
		bctx, cancel := context.WithTimeout(ctx, time.Second)
		e := n.readBarrierOn(bctx, n.store.Replica(firstRange))
		cancel()
		if e == nil {
			body, ok, err = kv.ScriptBody(n.db, c[1])
		}
	}
	if err != nil || !ok {
		return c, false
	}
	nc := slices.Clone(c)
	nc[0], nc[1] = []byte(name), body
	return nc, true
}

// resolveWrapped resolves the command c wraps from its argument at on.
func (n *Node) resolveWrapped(ctx context.Context, c [][]byte, at int, barrier *bool) ([][]byte, bool) {
	if len(c) <= at {
		return c, false
	}
	inner, ok := n.resolveScript(ctx, c[at:], barrier)
	if !ok {
		return c, false
	}
	return append(slices.Clone(c[:at]), inner...), true
}

package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/kvorum/kvorum/internal/reply"
)

// Client calls in the datadriven harness (see TestDataDriven): Propose,
// ReadBarrier, TransferLeader, AddMember and RemoveMember block until the
// Ready loop, that is the harness, has done its part. Each runs on a
// goroutine of its own. The harness starts it and waits until it returned
// or waits inside the store (probeCtx); it then checks, after every step,
// whether the store has decided the call's outcome, and if so waits for
// the goroutine and prints the result.
//
// A call must never act on the replica concurrently with a step of the
// harness, or the trace would depend on timing. Propose and ReadBarrier
// act once, before they wait. TransferLeader and AddMember poll the
// replica on a wall-clock ticker and act when they see a certain state;
// their decided funcs, run after every step, wait for that action whenever
// the step produced that state.

// ddOp is a client call running on its own goroutine.
type ddOp struct {
	desc string
	res  chan string
	// cancel ends the call's context: only when the file ends.
	cancel context.CancelFunc
	// stopSafe: the call returns when its store stops. TransferLeader and
	// AddMember's catch-up loop do not watch the store; stop refuses to
	// stop a node with such a call pending.
	stopSafe bool
	// decided reports whether the call will return without any further
	// step of the harness. It may first wait for the call to act on what
	// the last step changed (see add-member), so that the call never acts
	// concurrently with a later step.
	decided func() bool
}

// settle prints the result of every pending call whose outcome is decided.
func (e *ddEnv) settle() {
	for _, n := range e.nodes {
		keep := n.ops[:0]
		for _, op := range n.ops {
			if !op.decided() {
				keep = append(keep, op)
				continue
			}
			e.printf("%s%d: %s -> %s\n", e.indent, n.id, op.desc, e.result(op))
		}
		n.ops = keep
	}
}

func (e *ddEnv) result(op *ddOp) string {
	select {
	case s := <-op.res:
		return s
	case <-time.After(10 * time.Second):
		e.t.Fatalf("%s: no result 10s after its outcome was decided", op.desc)
		return ""
	}
}

// probeCtx tells when a call begins to wait: the store's blocking calls
// select on ctx.Done() exactly where they wait for the Ready loop (or, in
// TransferLeader and AddMember, between two looks at the replica).
type probeCtx struct {
	context.Context
	once    sync.Once
	waiting chan struct{}
}

func (c *probeCtx) Done() <-chan struct{} {
	c.once.Do(func() { close(c.waiting) })
	return c.Context.Done()
}

// launch runs call on a goroutine and returns once the call returned (and
// its result is printed: op is nil) or waits inside the store.
func (e *ddEnv) launch(n *ddNode, desc string, call func(ctx context.Context) string) *ddOp {
	base, cancel := context.WithCancel(context.Background())
	ctx := &probeCtx{Context: base, waiting: make(chan struct{})}
	op := &ddOp{desc: desc, res: make(chan string, 1), cancel: cancel, stopSafe: true}
	go func() { op.res <- call(ctx) }()
	select {
	case out := <-op.res:
		cancel()
		e.printf("%d: %s -> %s\n", n.id, desc, out)
		return nil
	case <-ctx.waiting:
		return op
	case <-time.After(10 * time.Second):
		e.t.Fatalf("%s: neither returned nor waited within 10s", desc)
		return nil
	}
}

// pending registers op (if the call is waiting) with its decided func.
func (n *ddNode) pending(op *ddOp, decided func() bool) {
	if op != nil {
		op.decided = decided
		n.ops = append(n.ops, op)
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// proposalIDs returns the ids of r's pending proposals.
func proposalIDs(r *Replica) map[uint64]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := map[uint64]bool{}
	for id := range r.mu.proposals {
		ids[id] = true
	}
	return ids
}

// newProposal returns r's one pending proposal whose id is not in before.
func newProposal(r *Replica, before map[uint64]bool) *proposal {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, p := range r.mu.proposals {
		if !before[id] {
			return p
		}
	}
	return nil
}

// proposalOp registers a call that waits for the proposal it made.
func (e *ddEnv) proposalOp(n *ddNode, desc string, call func(ctx context.Context) string) {
	s, r := e.up(n), n.replica()
	before := proposalIDs(r)
	op := e.launch(n, desc, call)
	if op == nil {
		return
	}
	p := newProposal(r, before)
	if p == nil {
		e.t.Fatalf("%s: waiting but no proposal pending", desc)
	}
	n.pending(op, func() bool { return isClosed(p.done) || isClosed(s.stopper) })
}

// propose implements propose.
func (e *ddEnv) propose(d *datadriven.TestData) {
	n := e.nodeArg(d)
	var cmds [][][]byte
	var args [][]byte
	for _, a := range d.CmdArgs[1:] {
		if len(a.Vals) == 0 {
			args = append(args, []byte(a.Key))
		}
	}
	if len(args) > 0 {
		cmds = append(cmds, args)
	}
	for _, line := range strings.Split(d.Input, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			var args [][]byte
			for _, a := range f {
				args = append(args, []byte(a))
			}
			cmds = append(cmds, args)
		}
	}
	if len(cmds) == 0 {
		d.Fatalf(e.t, "propose: no command")
	}
	repeat := 1
	d.MaybeScanArgs(e.t, "repeat", &repeat)
	for i := 0; i < repeat; i++ {
		e.proposeOne(n, cmds)
	}
}

func (e *ddEnv) proposeOne(n *ddNode, cmds [][][]byte) {
	r := n.replica()
	e.proposalOp(n, "propose "+ddCmds(cmds), func(ctx context.Context) string {
		replies, err := r.Propose(ctx, cmds)
		if err != nil {
			return "error: " + err.Error()
		}
		var out []string
		for _, rep := range replies {
			out = append(out, ddReply(rep))
		}
		return strings.Join(out, ", ")
	})
}

func ddReply(r reply.Reply) string {
	switch r.Kind {
	case reply.KindStatus:
		return string(r.Str)
	case reply.KindError:
		return "(error) " + string(r.Str)
	case reply.KindInt:
		return fmt.Sprintf("(integer) %d", r.Int)
	case reply.KindBulk:
		return strconv.Quote(string(r.Str))
	case reply.KindNil:
		return "(nil)"
	}
	return fmt.Sprintf("%+v", r)
}

// read implements read: a linearizable read of key on n.
func (e *ddEnv) read(n *ddNode, key string) {
	s, r := e.up(n), n.replica()
	op := e.launch(n, "read "+key, func(ctx context.Context) string {
		if err := r.ReadBarrier(ctx); err != nil {
			return "error: " + err.Error()
		}
		if v, ok := readKey(s, key); ok {
			return strconv.Quote(v)
		}
		return "(nil)"
	})
	if op == nil {
		return
	}
	r.mu.Lock()
	var b *readBatch
	if n := len(r.mu.readQueue); n > 0 {
		b = r.mu.readQueue[n-1]
	} else {
		b = r.mu.readWait[len(r.mu.readWait)-1] // a lease read waiting for its index
	}
	r.mu.Unlock()
	n.pending(op, func() bool { return isClosed(b.done) || isClosed(s.stopper) })
}

// transferLeader implements transfer-leader. TransferLeader asks raft
// again whenever n leads and no transfer is under way; decided waits for
// that, so that it never happens during a later step.
func (e *ddEnv) transferLeader(n *ddNode, to uint64) {
	r := e.up(n).Replica(1)
	op := e.launch(n, fmt.Sprintf("transfer-leader to %d", to), func(ctx context.Context) string {
		if err := r.TransferLeader(ctx, to); err != nil {
			return "error: " + err.Error()
		}
		return "ok"
	})
	if op == nil {
		return
	}
	op.stopSafe = false
	n.pending(op, func() bool {
		e.waitFor(op.res, func() bool {
			st := r.Status()
			return st.Role != "leader" || st.LeadTransfer == to
		})
		st := r.Status()
		return st.Leader == to || (st.Role != "leader" && st.Leader != 0 && st.Leader != n.id)
	})
}

// waitFor polls cond until it holds or the call behind res returned (its
// result is put back).
func (e *ddEnv) waitFor(res chan string, cond func() bool) {
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		select {
		case s := <-res:
			res <- s
			return
		default:
		}
		if time.Now().After(deadline) {
			e.t.Fatal("a pending call did not act within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// addMember implements add-member. AddMember proposes the learner, polls
// the leader's progress until the learner caught up, then proposes the
// promotion; decided follows it through these phases and, when the
// learner has caught up, waits until the promotion is proposed.
func (e *ddEnv) addMember(n *ddNode, id uint64) {
	r := e.up(n).Replica(1)
	before := proposalIDs(r)
	op := e.launch(n, fmt.Sprintf("add-member %d", id), func(ctx context.Context) string {
		if err := r.AddMember(ctx, id, ddAddr(id)); err != nil {
			return "error: " + err.Error()
		}
		return "ok"
	})
	if op == nil {
		return
	}
	op.stopSafe = false
	p := newProposal(r, before) // nil if it resumed a learner's catch-up
	promoted := false
	n.pending(op, func() bool {
		if p != nil && !isClosed(p.done) {
			return false // a proposal in flight
		}
		if promoted {
			return true // the promotion is applied
		}
		if p != nil && p.err != nil {
			return true
		}
		st := r.Status()
		if st.Role != "leader" {
			return true
		}
		if pr, ok := st.Progress[id]; !ok || pr.Match < st.Commit {
			return false // catching up
		}
		// Caught up: AddMember proposes the promotion on its next look.
		before := proposalIDs(r)
		e.waitFor(op.res, func() bool { return newProposal(r, before) != nil })
		if p = newProposal(r, before); p == nil {
			return true // it returned
		}
		promoted = true
		return false
	})
}

// removeMember implements remove-member.
func (e *ddEnv) removeMember(n *ddNode, id uint64) {
	r := e.up(n).Replica(1)
	e.proposalOp(n, fmt.Sprintf("remove-member %d", id), func(ctx context.Context) string {
		if err := r.RemoveMember(ctx, id); err != nil {
			return "error: " + err.Error()
		}
		return "ok"
	})
}

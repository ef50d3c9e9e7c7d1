package server

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvorum/kvorum/internal/kv"
	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/resp"
)

// Blocking commands (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, XREADGROUP, ...).
//
// kv executes a blocking command as its non-blocking kernel: it pops if it
// can and otherwise replies with a null. The node turns that into
// blocking: it registers the client as a waiter on the command's keys,
// proposes the command through Raft, and if the reply is null waits until
// a write to one of the keys is applied on this node (any node's push is
// applied on every node), then proposes again (as KVORUM.BLOCK, a wait in
// its keys' FIFO queues: blockq.go). There is no polling: a waiter wakes
// only when one of its keys changed, when its timeout expires (or, having
// yielded to a waiter ahead, after a second), or when the client goes
// away.

// waiters maps keys to the channels of clients blocked on them.
type waiters struct {
	n  atomic.Int64 // registered waiters; notify is free when 0
	mu sync.Mutex
	m  map[string]map[*waiter]struct{}
}

type waiter struct {
	keys []string
	ch   chan struct{} // buffered(1): a write to one of keys happened
}

func (w *waiters) add(keys [][]byte) *waiter {
	wt := &waiter{ch: make(chan struct{}, 1)}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]map[*waiter]struct{}{}
	}
	for _, k := range keys {
		ks := string(k)
		if slices.Contains(wt.keys, ks) {
			continue
		}
		wt.keys = append(wt.keys, ks)
		if w.m[ks] == nil {
			w.m[ks] = map[*waiter]struct{}{}
		}
		w.m[ks][wt] = struct{}{}
	}
	w.n.Add(1)
	return wt
}

func (w *waiters) remove(wt *waiter) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range wt.keys {
		delete(w.m[k], wt)
		if len(w.m[k]) == 0 {
			delete(w.m, k)
		}
	}
	w.n.Add(-1)
}

// wake wakes the clients blocked on any of keys. The node calls it with
// the keys a committed round wrote (actOn), so a woken client reads what
// woke it.
func (w *waiters) wake(keys [][]byte) {
	if w.n.Load() == 0 || len(keys) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range keys {
		for wt := range w.m[string(k)] {
			select {
			case wt.ch <- struct{}{}:
			default:
			}
		}
	}
}

// blockingCommand reports whether args is a blocking command and returns
// its timeout (0: forever) and the keys whose writes can unblock it.
func blockingCommand(args [][]byte) (timeout time.Duration, keys [][]byte, ok bool) {
	if timeout, keys, ok = kv.BlockingTimeout(args); ok {
		return timeout, keys, ok
	}
	return kv.StreamBlocking(args) // XREAD BLOCK: a blocking read
}

// isNullReply reports whether a blocking kernel found nothing to pop.
func isNullReply(r reply.Reply) bool {
	return r.Kind == reply.KindNil || r.Kind == reply.KindNilArray
}

// execBlocking runs a blocking command for a client: parent is the
// connection's context (cancelled when the client disconnects).
func (n *Node) execBlocking(parent context.Context, args [][]byte, timeout time.Duration, keys [][]byte) reply.Reply {
	var deadline <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		deadline = t.C
		n.inTimeoutTable.Add(1)
		defer n.inTimeoutTable.Add(-1)
	}
	n.blockedClients.Add(1)
	defer n.blockedClients.Add(-1)
	if !kv.IsWrite(args) {
		return n.execBlockingRead(parent, args, deadline, keys)
	}
	// Every blocking write (the list and sorted-set pops, XREADGROUP
	// BLOCK) waits in its keys' queues: blockq.go.
	return n.execQueuedPop(parent, args, deadline, keys)
}

// awaitWrite waits, for a blocked client, until wt is signalled (a write
// to its keys) or retry fires (done is false: try again), the deadline
// passes (the reply is timedOut), the client goes away or the node stops.
func (n *Node) awaitWrite(parent context.Context, wt *waiter, deadline, retry <-chan time.Time, timedOut reply.Reply) (r reply.Reply, done bool) {
	select {
	case <-wt.ch:
		return reply.Reply{}, false
	case <-retry:
		return reply.Reply{}, false
	case <-deadline:
		return timedOut, true
	case why := <-resp.UnblockRequests(parent):
		if why == resp.ErrUnblockError {
			return resp.UnblockedReply, true
		}
		return timedOut, true
	case <-parent.Done():
		return reply.Error("ERR client disconnected or node stopping"), true
	case <-n.stopper:
		return reply.Error("ERR node is shutting down"), true
	}
}

// execBlockingRead serves a blocking read (XREAD BLOCK) through the read
// path: no Raft proposal, so it may run on any node. It resolves the
// command's "$" IDs once (one read behind a read barrier), then repeats
// the resolved, non-blocking read, behind a read barrier each time, until
// it returns something, the deadline passes or the client goes. As for
// blocking writes, the waiter is registered before each try so a write
// applied between the try and the wait wakes it.
func (n *Node) execBlockingRead(parent context.Context, args [][]byte, deadline <-chan time.Time, keys [][]byte) reply.Reply {
	wt := n.waiters.add(keys)
	defer n.waiters.remove(wt)
	ctx, cancel := context.WithTimeout(parent, n.cfg.RequestTimeout)
	r := n.readBarrier(ctx)
	cancel()
	if r != nil {
		return *r
	}
	cmd, retry := kv.XReadResolve(n.store.DB(), args, n.cfg.Now())
	out := make([]reply.Reply, 1)
	for {
		ctx, cancel := context.WithTimeout(parent, n.cfg.RequestTimeout)
		n.execRead(ctx, [][][]byte{cmd}, out)
		cancel()
		if !isNullReply(out[0]) {
			return out[0]
		}
		cmd = retry
		// wt stays registered: a later write signals it again.
		if r, done := n.awaitWrite(parent, wt, deadline, nil, out[0]); done {
			return r
		}
	}
}

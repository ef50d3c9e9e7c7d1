package server

import (
	"context"
	"sync"
	"time"

	"github.com/kvorum/kvorum/internal/kv"
	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/resp"
)

// Leases and locks: the node's half (package kv holds the state machine).
//
// Lease expiry is timed here, on the leader, with the monotonic clock:
// every node notes when it applied each lease's grant or last keep-alive
// (kv's Effects.Leases, once committed), and the leader expires a lease whose TTL has passed
// since then by proposing KVORUM.LEASEEXPIRE, which the apply honours only
// if no keep-alive was applied in between. Wall-clock jumps move neither
// side. When a node becomes leader it first extends every lease by one
// election timeout, so no holder loses its lease because of a failover.
//
// LOCK ACQUIRE parks its client like BLPOP: the node registers the client
// on the lock's wait key before it proposes, and the apply that grants the
// lock (a release, a cancel, an expiry, on any node) wakes it; it then reads
// its token from the applied state. No polling, no retry round.

// leaseTick is how often the leader looks for expired leases: it bounds how
// late an expiry is (the hand-off after a holder crash is TTL + this).
const leaseTick = 20 * time.Millisecond

// lockRecheck is how often a parked acquire rereads the local state even
// without a wake-up (a snapshot install replaces the state without
// reporting individual writes).
const lockRecheck = 500 * time.Millisecond

type leaseObs struct {
	renewIdx uint64
	ttl      time.Duration
	seen     time.Time // when this node applied the grant or last keep-alive
	floor    time.Time // a new leader's grace: no expiry before this
	proposed time.Time // an expiry proposal is in flight since
}

// leaseTracker is the node's view of lease renewals, fed by the effects loop.
type leaseTracker struct {
	mu sync.Mutex
	m  map[uint64]*leaseObs
}

// observe notes a lease event of a committed round (Node.actOn), in log order.
func (t *leaseTracker) observe(id, renewIdx uint64, ttlMs int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ttlMs <= 0 {
		delete(t.m, id)
		return
	}
	if t.m == nil {
		t.m = map[uint64]*leaseObs{}
	}
	o := t.m[id]
	if o == nil {
		o = &leaseObs{}
		t.m[id] = o
	}
	o.renewIdx, o.ttl, o.seen, o.proposed = renewIdx, time.Duration(ttlMs)*time.Millisecond, time.Now(), time.Time{}
}

// promote runs when this node becomes leader: it adds the leases it has
// not seen applied (restored from a snapshot or before a restart), forgets
// those that are gone, and extends every lease by one election timeout.
func (t *leaseTracker) promote(all []kv.LeaseInfo, now time.Time, election time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[uint64]*leaseObs{}
	}
	live := make(map[uint64]bool, len(all))
	for _, l := range all {
		live[l.ID] = true
		o := t.m[l.ID]
		if o == nil || o.renewIdx != l.RenewIdx {
			o = &leaseObs{renewIdx: l.RenewIdx, ttl: time.Duration(l.TTLMs) * time.Millisecond, seen: now}
			t.m[l.ID] = o
		}
		o.floor = maxTime(o.seen.Add(o.ttl), now).Add(election)
		o.proposed = time.Time{}
	}
	for id, o := range t.m {
		// Not in the state read just now and applied before it: gone.
		if !live[id] && o.seen.Before(now) {
			delete(t.m, id)
		}
	}
}

// expired returns the leases whose time is up and marks them proposed.
func (t *leaseTracker) expired(now time.Time) []kv.LeaseInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []kv.LeaseInfo
	for id, o := range t.m {
		deadline := maxTime(o.seen.Add(o.ttl), o.floor)
		if now.Before(deadline) || (!o.proposed.IsZero() && now.Sub(o.proposed) < time.Second) {
			continue
		}
		o.proposed = now
		out = append(out, kv.LeaseInfo{ID: id, RenewIdx: o.renewIdx})
		if len(out) == expiryBatch {
			break
		}
	}
	return out
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// leaseLoop runs on every node and acts while this node leads.
func (n *Node) leaseLoop() {
	defer n.bg.Done()
	base, cancelBase := n.untilStop()
	defer cancelBase()
	election := n.cfg.TickInterval * time.Duration(n.cfg.ElectionTicks)
	t := time.NewTicker(leaseTick)
	defer t.Stop()
	var ledTerm uint64 // the term this node last promoted its leases in
	for {
		select {
		case <-n.stopper:
			return
		case <-t.C:
		}
		r := n.store.Replica(firstRange)
		lead, term := r.LeaderTerm()
		if !lead {
			ledTerm = 0
			continue
		}
		if term != ledTerm {
			all, err := kv.Leases(n.store.DB())
			if err != nil {
				n.cfg.Logger.Warn("lease scan", "err", err)
				continue
			}
			n.leases.promote(all, time.Now(), election)
			ledTerm = term
			continue
		}
		exp := n.leases.expired(time.Now())
		if len(exp) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(base, n.cfg.RequestTimeout)
		_, err := r.Propose(ctx, [][][]byte{kv.LeaseExpireCommand(exp)})
		cancel()
		if err != nil {
			n.cfg.Logger.Debug("lease expiry proposal", "err", err)
		}
	}
}

// lockTimedOut ends a lock wait whose time is up: WAIT keeps the queued
// place (the grant may have come with the timer), an acquire gives it up;
// either returns the grant if it came, else none.
func (n *Node) lockTimedOut(parent context.Context, a kv.Acquire, queuedAt uint64, none reply.Reply) reply.Reply {
	if a.KeepQueued {
		if r, done := n.lockOutcome(parent, a.Name, a.Lease, queuedAt); done {
			return r
		}
		return none
	}
	if r := n.giveUpLock(parent, a.Name, a.Lease); !isNullReply(r) || none.Kind == reply.KindNil {
		return r
	}
	return none
}

// execLock runs LOCK ACQUIRE for a client: parent is the connection's
// context (cancelled when the client disconnects).
func (n *Node) execLock(parent context.Context, args [][]byte, a kv.Acquire) reply.Reply {
	name, lease := a.Name, a.Lease
	var deadline <-chan time.Time
	if a.Timeout > 0 {
		t := time.NewTimer(a.Timeout)
		defer t.Stop()
		deadline = t.C
		n.inTimeoutTable.Add(1)
		defer n.inTimeoutTable.Add(-1)
	}
	n.blockedClients.Add(1)
	defer n.blockedClients.Add(-1)
	// Register before proposing, so a grant applied before we wait is not missed.
	wt := n.waiters.add([][]byte{kv.LockWaitKey(name)})
	defer n.waiters.remove(wt)
	out := make([]reply.Reply, 1)
	ctx, cancel := context.WithTimeout(parent, n.cfg.RequestTimeout)
	n.execWrite(ctx, [][][]byte{args}, out)
	cancel()
	queuedAt, queued := kv.LockWaiting(out[0])
	if !queued {
		if parent.Err() != nil && !a.KeepQueued {
			// The client went away while the acquire was in flight (its
			// reply is lost): it may have been queued; leave the queue as
			// a waiter that disconnects does.
			n.giveUpLock(context.Background(), name, lease)
		}
		return out[0] // granted, or an error
	}
	recheck := time.NewTicker(lockRecheck)
	defer recheck.Stop()
	for {
		select {
		case <-wt.ch:
		case <-recheck.C:
		case <-deadline:
			return n.lockTimedOut(parent, a, queuedAt, reply.Nil)
		case why := <-resp.UnblockRequests(parent):
			// CLIENT UNBLOCK: as if the timeout had passed, answering
			// Redis's UNBLOCKED error for ERROR (a grant that came
			// meanwhile is still returned).
			if why == resp.ErrUnblockError {
				return n.lockTimedOut(parent, a, queuedAt, resp.UnblockedReply)
			}
			return n.lockTimedOut(parent, a, queuedAt, reply.Nil)
		case <-parent.Done():
			if !a.KeepQueued {
				n.giveUpLock(context.Background(), name, lease)
			}
			return reply.Error("ERR client disconnected or node stopping")
		case <-n.stopper:
			// The waiter keeps its place: the client may acquire again
			// through another node (acquire is idempotent per lease).
			return reply.Error("ERR node is shutting down; the lock wait stays queued, acquire again to resume it")
		}
		if r, done := n.lockOutcome(parent, name, lease, queuedAt); done {
			return r
		}
	}
}

// lockOutcome reads the local applied state after a wake-up: the token if
// the lease was granted after it queued (a token above queuedAt, the last
// token handed out when the acquire queued: kv.LockWaiting), an error if
// it no longer waits, else done=false. This node may lag behind the
// leader that answered the acquire: a holder entry with a token at or
// below queuedAt is the lease's previous grant, released since.
func (n *Node) lockOutcome(ctx context.Context, name []byte, lease, queuedAt uint64) (reply.Reply, bool) {
	for attempt := 0; ; attempt++ {
		tok, waiting, alive, err := kv.LockState(n.store.DB(), name, lease)
		switch {
		case err != nil:
			return reply.Error("ERR storage: " + err.Error()), true
		case tok > queuedAt:
			return reply.Int(int64(tok)), true
		case tok > 0 || waiting:
			return reply.Reply{}, false // stale, or still queued
		}
		// Neither holder nor waiter: this node may not have applied our
		// enqueue yet (the proposal went to another node). Confirm at a
		// linearizable read point before giving up.
		if attempt > 0 {
			if !alive {
				return reply.Error("NOLEASE lease expired or was revoked while waiting for the lock"), true
			}
			return reply.Error("ERR the lock wait was cancelled (LOCK CANCEL)"), true
		}
		bctx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout)
		r := n.readBarrier(bctx)
		cancel()
		if r != nil {
			return reply.Reply{}, false // no read point now: keep waiting
		}
	}
}

// giveUpLock leaves the queue after a timeout; the apply decides whether
// the grant came first (then the client gets its token).
func (n *Node) giveUpLock(parent context.Context, name []byte, lease uint64) reply.Reply {
	out := make([]reply.Reply, 1)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), n.cfg.RequestTimeout)
	defer cancel()
	n.execWrite(ctx, [][][]byte{kv.LockTimeoutCommand(name, lease)}, out)
	return out[0]
}

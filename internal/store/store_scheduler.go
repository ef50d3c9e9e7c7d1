package store

import "sync"

// The scheduler: the set of replicas with work for the Ready loop. See
// docs/ranges.md §3.3 and the package doc.
//
// Whatever can give a replica Ready work marks it (Replica.enqueue): Step,
// Propose, ReadBarrier and read rounds, Tick (awake replicas only), conf
// changes, TransferLeader, ReportUnreachable/ReportSnapshot, snapshot
// receive, the hold and read-round timers. processReady takes up to
// schedBatch marked replicas per round, instead of visiting every replica,
// and re-marks one that still has Ready after its round. A replica is
// marked at most once (its flag is cleared when the loop takes it, so that
// work arriving during its round marks it again); the FIFO keeps ranges
// fair. A missed mark would stall a range until the next mark: Tick's
// safety sweep (sweepEvery ticks) marks every replica that has work, and
// the tests run without it (TestSchedulerNoStall).

// schedBatch bounds the replicas one Ready round takes.
const schedBatch = 128

// defaultSweepTicks is how often (in ticks) Tick sweeps every replica for
// work that no mark announced.
const defaultSweepTicks = 50

type scheduler struct {
	// mu is a leaf: taken with Store.mu or Replica.mu held, and nothing is
	// taken under it.
	// queue holds the marked replicas, oldest first; a replica's
	// schedQueued is set while it is in queue (guarded by mu).
	mu    sync.Mutex
	queue []*Replica
}

// add marks r; it reports whether r was not marked yet.
func (q *scheduler) add(r *Replica) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if r.schedQueued {
		return false
	}
	r.schedQueued = true
	q.queue = append(q.queue, r)
	return true
}

// take removes up to n marked replicas, oldest first, and clears their marks.
func (q *scheduler) take(n int, out []*Replica) []*Replica {
	q.mu.Lock()
	defer q.mu.Unlock()
	n = min(n, len(q.queue))
	out = append(out, q.queue[:n]...)
	for _, r := range q.queue[:n] {
		r.schedQueued = false
	}
	rest := copy(q.queue, q.queue[n:])
	clear(q.queue[rest:])
	q.queue = q.queue[:rest]
	return out
}

// len is how many replicas are marked.
func (q *scheduler) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue)
}

// enqueue marks r for the Ready loop and wakes the loop.
func (r *Replica) enqueue() {
	r.store.sched.add(r)
	r.store.signal()
}

// hasWorkLocked reports whether r has anything for a Ready round (what the
// safety sweep looks for).
// REQUIRES: r.mu held.
func (r *Replica) hasWorkLocked() bool {
	return len(r.mu.pending) > 0 || len(r.mu.readQueue) > 0 || r.mu.lease.renew || r.mu.rn.HasReady()
}

// sweep marks every replica with work: the guard against a missed mark.
// It returns how many it marked.
func (s *Store) sweep() int {
	n := 0
	for _, r := range s.replicaList() {
		if r.broken.Load() {
			continue
		}
		r.mu.Lock()
		w := r.hasWorkLocked()
		r.mu.Unlock()
		if w && s.sched.add(r) {
			n++
		}
	}
	if n > 0 {
		s.cfg.Metrics.SweepMarks.Add(float64(n))
		s.signal()
	}
	return n
}

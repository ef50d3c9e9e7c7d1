package transport

import (
	"container/heap"
	"runtime"
	"sync"
	"time"

	"github.com/kvorum/kvorum/internal/storage"
)

const (
	// DefaultQueueSize bounds the messages waiting for one peer.
	DefaultQueueSize = 4096
	minBackoff       = 100 * time.Millisecond
	maxBackoff       = 2 * time.Second
)

type queued struct {
	m   storage.RaftMessage
	due time.Time // zero: send now; else held back (Interceptor delay)
}

// outbox is the bounded queue of raft messages for one destination and
// the loop that drains it. push never blocks.
type outbox struct {
	max    int
	mu     sync.Mutex
	q      []queued
	notify chan struct{} // capacity 1: "the queue is not empty"
}

func newOutbox(max int) *outbox {
	if max <= 0 {
		max = DefaultQueueSize
	}
	return &outbox{max: max, notify: make(chan struct{}, 1)}
}

// push enqueues m; false if the queue is full (m is dropped).
func (o *outbox) push(m storage.RaftMessage, due time.Time) bool {
	o.mu.Lock()
	if len(o.q) >= o.max {
		o.mu.Unlock()
		return false
	}
	o.q = append(o.q, queued{m: m, due: due})
	o.mu.Unlock()
	select {
	case o.notify <- struct{}{}:
	default:
	}
	return true
}

// take swaps out everything queued. spare is reused as the next queue.
func (o *outbox) take(spare []queued) []queued {
	o.mu.Lock()
	q := o.q
	o.q = spare[:0]
	o.mu.Unlock()
	return q
}

// run drains the outbox until stop is closed: every wake-up takes all
// queued messages that are due and hands them to deliver as one batch.
// deliver accounts for and reports whatever it could not send; if it
// returns an error, run waits (100ms doubling to 2s, reset by a success)
// before the next attempt. Messages queued meanwhile wait for it, or are
// dropped by push once the queue is full.
func (o *outbox) run(stop <-chan struct{}, deliver func([]storage.RaftMessage) error) {
	var (
		delayed delayHeap
		timer   = time.NewTimer(time.Hour)
		backoff = minBackoff
		batch   []storage.RaftMessage
		spare   []queued
	)
	timer.Stop()
	defer timer.Stop()
	for {
		var timerC <-chan time.Time
		if len(delayed) > 0 {
			timer.Reset(time.Until(delayed[0].due))
			timerC = timer.C
		}
		select {
		case <-stop:
			return
		case <-o.notify:
			runtime.Gosched() // let senders that are about to queue join this frame
		case <-timerC:
		}
		now := time.Now()
		q := o.take(spare)
		batch = batch[:0]
		for len(delayed) > 0 && !delayed[0].due.After(now) {
			batch = append(batch, heap.Pop(&delayed).(queued).m)
		}
		for _, e := range q {
			if e.due.After(now) {
				heap.Push(&delayed, e)
			} else {
				batch = append(batch, e.m)
			}
		}
		clear(q)
		spare = q
		if len(batch) == 0 {
			continue
		}
		err := deliver(batch)
		clear(batch)
		if err == nil {
			backoff = minBackoff
			continue
		}
		if !sleep(backoff, stop, nil) {
			return
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// sleep waits for d unless stop or stop2 (nil: never) is closed first; it
// reports whether d passed.
func sleep(d time.Duration, stop, stop2 <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop:
	case <-stop2:
	}
	return false
}

// delayHeap orders held-back messages by due time.
type delayHeap []queued

func (h delayHeap) Len() int           { return len(h) }
func (h delayHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h delayHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *delayHeap) Push(x any)        { *h = append(*h, x.(queued)) }
func (h *delayHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = queued{}
	*h = old[:len(old)-1]
	return x
}

// reporter delivers ReportUnreachable / ReportSnapshot to the Handler on
// its own goroutine, so that Send (called from the Raft loop) never calls
// back into the Handler. Unreachable reports are coalesced per peer.
type reporter struct {
	mu      sync.Mutex
	unreach map[uint64]struct{}
	snaps   []snapReport
	notify  chan struct{}
}

type snapReport struct {
	rangeID storage.RangeID
	to      uint64
	ok      bool
}

func newReporter() *reporter {
	return &reporter{unreach: map[uint64]struct{}{}, notify: make(chan struct{}, 1)}
}

func (r *reporter) unreachable(to uint64) {
	r.mu.Lock()
	r.unreach[to] = struct{}{}
	r.mu.Unlock()
	r.wake()
}

func (r *reporter) snapshot(rangeID storage.RangeID, to uint64, ok bool) {
	r.mu.Lock()
	r.snaps = append(r.snaps, snapReport{rangeID, to, ok})
	r.mu.Unlock()
	r.wake()
}

func (r *reporter) wake() {
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

func (r *reporter) run(stop <-chan struct{}, h Handler) {
	var ids []uint64
	for {
		select {
		case <-stop:
			return
		case <-r.notify:
		}
		r.mu.Lock()
		ids = ids[:0]
		for id := range r.unreach {
			ids = append(ids, id)
		}
		clear(r.unreach)
		snaps := r.snaps
		r.snaps = nil
		r.mu.Unlock()
		for _, id := range ids {
			h.ReportUnreachable(id)
		}
		for _, s := range snaps {
			h.ReportSnapshot(s.rangeID, s.to, s.ok)
		}
	}
}

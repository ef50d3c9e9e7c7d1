package store

import (
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/kvorum/kvorum/internal/storage"
)

// The append worker is raft's "local append thread" (AsyncStorageWrites):
// it persists the log writes the Ready loop hands it (MsgStorageAppend:
// entries and hard state) and, once they are durable, delivers the
// responses raft attached to them. Everything that queued while one sync
// was in flight goes into the next batch, with one fsync: group commit
// across rounds, ranges and clients, without holding up the Ready loop,
// which meanwhile sends, applies and answers.

// appendJob is one replica's MsgStorageAppend.
type appendJob struct {
	r *Replica
	m *raftpb.Message
}

// appender is the queue between the Ready loop and the append worker.
type appender struct {
	mu   sync.Mutex
	idle *sync.Cond // signalled when the queue is empty and no batch is in flight
	jobs []appendJob
	busy bool
	// done: the worker has ended (stopped or failed); nothing more is
	// persisted.
	done bool
	work chan struct{}
}

func newAppender() *appender {
	a := &appender{work: make(chan struct{}, 1)}
	a.idle = sync.NewCond(&a.mu)
	return a
}

// queueAppends hands jobs to the append worker, or, when none runs (the
// store's goroutines were not started: deterministic tests drive the
// Ready loop themselves), persists them now.
func (s *Store) queueAppends(jobs []appendJob) error {
	a := s.appender
	if a == nil {
		return s.persistAppends(jobs)
	}
	a.mu.Lock()
	if a.done {
		a.mu.Unlock()
		return ErrStopped
	}
	a.jobs = append(a.jobs, jobs...)
	a.mu.Unlock()
	select {
	case a.work <- struct{}{}:
	default:
	}
	return nil
}

// flushAppends waits until every queued log write is durable and its
// responses delivered.
func (s *Store) flushAppends() error {
	a := s.appender
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for (len(a.jobs) > 0 || a.busy) && !a.done {
		a.idle.Wait()
	}
	if len(a.jobs) > 0 || a.busy {
		return ErrStopped
	}
	return nil
}

// appendLoop is the append worker.
func (s *Store) appendLoop() {
	defer s.wg.Done()
	a := s.appender
	defer func() {
		a.mu.Lock()
		a.done, a.busy = true, false
		a.idle.Broadcast()
		a.mu.Unlock()
	}()
	for {
		select {
		case <-s.stopper:
			return
		case <-a.work:
		}
		for {
			a.mu.Lock()
			jobs := a.jobs
			a.jobs = nil
			a.busy = len(jobs) > 0
			if !a.busy {
				a.idle.Broadcast()
				a.mu.Unlock()
				break
			}
			a.mu.Unlock()
			if err := s.persistAppends(jobs); err != nil {
				s.failFatal(err)
				return
			}
		}
	}
}

// logWrite is what one batch writes to one replica's log: the entries of
// its queued appends merged (a later append replaces a conflicting tail
// of an earlier one) and the newest hard state.
type logWrite struct {
	r    *Replica
	ents []*raftpb.Entry
	hs   *raftpb.HardState
}

// persistAppends writes jobs' entries and hard states in one batch, synced
// if any of them must be (new entries, a new term or vote), updates the
// replicas' in-memory logs and then delivers each job's responses in
// order.
func (s *Store) persistAppends(jobs []appendJob) error {
	var writes []*logWrite
	for _, j := range jobs {
		var w *logWrite
		for _, x := range writes {
			if x.r == j.r {
				w = x
				break
			}
		}
		if w == nil {
			w = &logWrite{r: j.r}
			writes = append(writes, w)
		}
		if ents := j.m.GetEntries(); len(ents) > 0 {
			if n := len(w.ents); n > 0 {
				first, k := ents[0].GetIndex(), n
				for k > 0 && w.ents[k-1].GetIndex() >= first {
					k--
				}
				// A new slice: w.ents may be raft's own.
				w.ents = append(append(make([]*raftpb.Entry, 0, k+len(ents)), w.ents[:k]...), ents...)
			} else {
				w.ents = ents
			}
		}
		if j.m.Term != nil {
			w.hs = &raftpb.HardState{Term: j.m.Term, Vote: j.m.Vote, Commit: j.m.Commit}
		}
	}

	b := s.db.NewBatch()
	defer b.Close()
	mustSync := false
	for _, w := range writes {
		if err := w.r.log.StageAppend(b, w.ents); err != nil {
			return err
		}
		mustSync = mustSync || len(w.ents) > 0
		if w.hs != nil {
			if err := storage.SetHardState(b, w.r.id, w.hs); err != nil {
				return err
			}
			term, vote := w.r.log.TermVote()
			mustSync = mustSync || term != w.hs.GetTerm() || vote != w.hs.GetVote()
		}
	}
	if !b.Empty() {
		opts := pebble.NoSync
		if mustSync && !s.cfg.UnsafeNoSync {
			opts = pebble.Sync
		}
		t := time.Now()
		// storage.Commit: Pebble reports a failed WAL write or fsync
		// through Logger.Fatalf or a panic, never as a plain error (see
		// storage/fault.go). Nothing of these jobs was acknowledged: their
		// responses (to raft, and through it to clients) are delivered
		// only below.
		if err := storage.Commit(b, opts); err != nil {
			return &StorageError{Err: err}
		}
		if opts == pebble.Sync {
			s.cfg.Metrics.FsyncDuration.Observe(time.Since(t).Seconds())
		}
	}
	for _, w := range writes {
		w.r.log.Append(w.ents)
		if w.hs != nil {
			w.r.log.SetHardState(w.hs)
		}
	}
	for _, j := range jobs {
		j.r.stepLocal(j.m.GetResponses())
	}
	return nil
}

// persistSnapshot installs the snapshot of it's MsgStorageAppend, with the
// message's entries and hard state, in one synced batch on the Ready
// loop's goroutine (the state machine's data is replaced: only that
// goroutine touches it), after every earlier log write is durable; then
// delivers the message's responses.
func (s *Store) persistSnapshot(it *readyItem) error {
	if err := s.flushAppends(); err != nil {
		return err
	}
	r, m := it.r, it.appendMsg
	b := s.db.NewIndexedBatch()
	defer b.Close()
	if err := r.stageSnapshot(b, it); err != nil {
		return err
	}
	if err := r.log.StageAppend(b, m.GetEntries()); err != nil {
		return err
	}
	var hs *raftpb.HardState
	if m.Term != nil {
		hs = &raftpb.HardState{Term: m.Term, Vote: m.Vote, Commit: m.Commit}
		if err := storage.SetHardState(b, r.id, hs); err != nil {
			return err
		}
	}
	opts := pebble.Sync
	if s.cfg.UnsafeNoSync {
		opts = pebble.NoSync
	}
	if err := storage.Commit(b, opts); err != nil {
		return &StorageError{Err: err}
	}
	r.log.ApplySnapshot(m.GetSnapshot().GetMetadata(), it.applied)
	r.applied.Store(it.applied.Index)
	s.cfg.Metrics.SnapshotsRecv.Inc()
	r.log.Append(m.GetEntries())
	if hs != nil {
		r.log.SetHardState(hs)
	}
	r.stepLocal(m.GetResponses())
	return nil
}

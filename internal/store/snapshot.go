package store

import (
	"fmt"
	"io"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/storage"
)

// Incoming snapshots are staged in a file under Config.Dir/snapshots while
// the stream is verified; raft sees the MsgSnap only after that. When raft
// hands the snapshot back in a Ready, stageSnapshot copies the staged pairs
// into the round's batch, replacing the range's user data, log and applied
// state atomically.

var stageSeq atomic.Uint64

func (s *Store) snapDir() string { return filepath.Join(s.cfg.Dir, "snapshots") }

// CleanStaged removes staged snapshots left by an earlier process.
func (s *Store) CleanStaged() {
	names, err := s.cfg.FS.List(s.snapDir())
	if err != nil {
		return
	}
	for _, n := range names {
		_ = s.cfg.FS.Remove(filepath.Join(s.snapDir(), n))
	}
}

func (s *Store) removeStaged(path string) {
	if err := s.cfg.FS.Remove(path); err != nil {
		s.log.Warn("remove staged snapshot", "path", path, "err", err)
	}
}

// ReceiveSnapshot stages an incoming snapshot and steps its message into the
// range. It consumes data fully. The range the message came with must be
// the one its snapshot data names.
func (s *Store) ReceiveSnapshot(rm RaftMessage, data io.Reader) (err error) {
	m := rm.Msg
	defer func() {
		if err != nil {
			s.log.Warn("receiving snapshot failed", "range", uint64(rm.Range), "index", m.GetSnapshot().GetMetadata().GetIndex(), "from", m.GetFrom(), "err", err)
		}
	}()
	rangeID, err := storage.SnapshotRangeID(m.GetSnapshot().GetData())
	if err != nil {
		return err
	}
	if rangeID != rm.Range {
		_, _ = io.Copy(io.Discard, data)
		return fmt.Errorf("store: snapshot of range %d sent as range %d", rangeID, rm.Range)
	}
	r := s.Replica(rangeID)
	if err := s.cfg.FS.MkdirAll(s.snapDir(), 0o755); err != nil {
		return err
	}
	meta := m.GetSnapshot().GetMetadata()
	path := filepath.Join(s.snapDir(), fmt.Sprintf("r%d-i%d-%d.snap", rangeID, meta.GetIndex(), stageSeq.Add(1)))
	f, err := s.cfg.FS.Create(path, "")
	if err != nil {
		return err
	}
	tee := &copyingTee{r: data, w: f}
	desc, _, err := storage.ReadSnapshotStream(tee, func(k, v []byte) error { return nil })
	if err == nil {
		// The stream's reader buffers: a write error returned with the
		// last bytes a Read gave it can be left unread in its buffer
		// (then the file is short, and the snapshot would be staged).
		err = tee.werr
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_, _ = io.Copy(io.Discard, data)
		_ = s.cfg.FS.Remove(path)
		return fmt.Errorf("store: receive snapshot: %w", err)
	}
	if r, err = s.claimSnapshot(r, desc, meta.GetIndex()); err != nil {
		_ = s.cfg.FS.Remove(path)
		return err
	}
	r.mu.Lock()
	if old, ok := r.mu.staged[meta.GetIndex()]; ok {
		s.removeStaged(old)
	}
	r.mu.staged[meta.GetIndex()] = path
	r.mu.Unlock()
	r.step(m)
	r.enqueue()
	return nil
}

// stageSnapshot replaces the range's state with the snapshot raft accepted.
func (r *Replica) stageSnapshot(b *pebble.Batch, it *readyItem) error {
	meta := it.rd.Snapshot.GetMetadata()
	r.mu.Lock()
	path, ok := r.mu.staged[meta.GetIndex()]
	r.mu.Unlock()
	if !ok {
		return fmt.Errorf("snapshot at index %d accepted by raft but not staged", meta.GetIndex())
	}
	r.savedAt.Store(time.Now().UnixNano())
	f, err := r.store.cfg.FS.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	start, end := r.store.cfg.StateMachine.Span(r.Descriptor())
	if err := b.DeleteRange(start, end, nil); err != nil {
		return err
	}
	r.store.cfg.StateMachine.Replaced(start, end)
	// The range's replicated range-local keys (version counter, FLUSHALL
	// index, ...) are part of its state: the snapshot carries them
	// (storage.EmitRange).
	rs, re := storage.ReplicatedRangeSpan(r.id)
	if err := b.DeleteRange(rs, re, nil); err != nil {
		return err
	}
	desc, _, err := storage.ReadSnapshotStream(f, func(k, v []byte) error { return b.Set(k, v, nil) })
	if err != nil {
		return err
	}
	if err := storage.SetDescriptor(b, desc); err != nil {
		return err
	}
	if err := r.log.StageSnapshot(b, meta); err != nil {
		return err
	}
	it.applied = storage.AppliedState{Index: meta.GetIndex(), Term: meta.GetTerm(), ConfState: meta.GetConfState()}
	it.appliedSet, it.snapApplied, it.snapDesc = true, true, desc
	return storage.SetAppliedState(b, r.id, it.applied)
}

// copyingTee is io.TeeReader that hands the writer a copy: vfs.File.Write
// may use (and, in Pebble's invariant builds, scribbles on) the buffer it
// is given.
// The first write error is kept in werr: the caller must check it, since
// a buffering reader of the tee may never surface it.
type copyingTee struct {
	r    io.Reader
	w    io.Writer
	buf  []byte
	werr error
}

func (t *copyingTee) Read(p []byte) (int, error) {
	if t.werr != nil {
		return 0, t.werr
	}
	n, err := t.r.Read(p)
	if n > 0 {
		t.buf = append(t.buf[:0], p[:n]...)
		if _, werr := t.w.Write(t.buf); werr != nil {
			t.werr = werr
			return n, werr
		}
	}
	return n, err
}

// claimSnapshot decides whether a received snapshot of desc's range, at
// index, may be stepped into its replica r, and returns that replica: r,
// or for a range this store does not hold a new, uninitialized one. That
// is how a follower that missed a split (it caught up on the left-hand
// range by a snapshot taken after the split, so it never applied the
// split entry) gets the right-hand range (docs/ranges.md §3.5).
//
// Only if the snapshot's slots overlap no other local replica's, nor the
// slots of another range's snapshot received but not yet installed (a
// placeholder, as CockroachDB's): while they overlap, the other range has
// not narrowed yet (it is behind a split), and installing this snapshot
// would leave two replicas owning the same slots. The other one would
// then apply its entries from before the split to keys this snapshot
// already holds the result of (a right-hand snapshot includes every
// left-hand entry up to the split): those entries would be applied twice
// (an INCR counted twice). Two snapshots received at once, a wide one of
// a range from before its split and one of its right-hand range (a node
// joining while a split happens), would do the same whichever installed
// first: the placeholder makes the second wait. Refused, a snapshot is
// retried by raft later.
//
// A new replica has the snapshot's range id and replicas but an empty
// slot interval, and nothing in storage, until the snapshot installs.
func (s *Store) claimSnapshot(r *Replica, desc *storage.Descriptor, index uint64) (*Replica, error) {
	s.createMu.Lock()
	defer s.createMu.Unlock()
	overlaps := func(lo, hi uint16) bool { return lo < desc.EndSlot && desc.StartSlot < hi }
	for _, o := range s.Replicas() {
		if o.id == desc.RangeID {
			continue
		}
		if d := o.Descriptor(); overlaps(d.StartSlot, d.EndSlot) {
			return nil, fmt.Errorf("store: snapshot of range %d (slots [%d, %d)) overlaps local range %d (slots [%d, %d)): refused until that range catches up", desc.RangeID, desc.StartSlot, desc.EndSlot, d.RangeID, d.StartSlot, d.EndSlot)
		}
	}
	now := time.Now()
	for id, p := range s.placeholders {
		if now.Sub(p.at) > placeholderTTL {
			delete(s.placeholders, id)
			continue
		}
		if id != desc.RangeID && overlaps(p.start, p.end) {
			return nil, fmt.Errorf("store: snapshot of range %d (slots [%d, %d)) overlaps the snapshot of range %d (slots [%d, %d)) waiting to install: refused until it has", desc.RangeID, desc.StartSlot, desc.EndSlot, id, p.start, p.end)
		}
	}
	if r == nil {
		if _, ok, err := storage.LoadDescriptor(s.db, desc.RangeID); err != nil || ok {
			// State in storage with no replica: not created by this path.
			return nil, fmt.Errorf("store: snapshot for range %d, which has stored state but no replica here (err %v)", desc.RangeID, err)
		}
		s.log.Info("creating a replica for a snapshot of an unknown range", "range", desc.RangeID, "start_slot", desc.StartSlot, "end_slot", desc.EndSlot)
		var err error
		if r, err = s.AddReplica(&storage.Descriptor{RangeID: desc.RangeID, Replicas: desc.Replicas, Generation: 0}); err != nil {
			return nil, err
		}
	}
	if s.placeholders == nil {
		s.placeholders = map[storage.RangeID]placeholder{}
	}
	s.placeholders[desc.RangeID] = placeholder{start: desc.StartSlot, end: desc.EndSlot, index: index, at: now}
	s.nplaceholders.Store(int32(len(s.placeholders)))
	return r, nil
}

// placeholder holds the slots of a snapshot received and stepped into its
// replica until the replica has applied up to its index (it installed,
// or raft found it stale), or placeholderTTL passed (raft dropped it, and
// the replica may stay quiet for long).
type placeholder struct {
	start, end uint16
	index      uint64
	at         time.Time
}

const placeholderTTL = time.Minute

// releasePlaceholder drops range id's placeholder once its replica has
// applied index applied (afterCommit calls it).
func (s *Store) releasePlaceholder(id storage.RangeID, applied uint64) {
	if s.nplaceholders.Load() == 0 {
		return
	}
	s.createMu.Lock()
	defer s.createMu.Unlock()
	if p, ok := s.placeholders[id]; ok && applied >= p.index {
		delete(s.placeholders, id)
		s.nplaceholders.Store(int32(len(s.placeholders)))
	}
}

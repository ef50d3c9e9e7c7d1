package storage

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// RaftLog is one range's raft.Storage, backed by the node's Pebble.
//
// Writes are two-phase so that the store can put many ranges' changes into
// one synced batch: Stage* methods add operations to a batch; after the batch
// is committed the store calls the matching method without "Stage" to update
// the in-memory view. raft calls the raft.Storage methods from whichever
// goroutine holds the replica's lock, concurrently with the Ready loop, so
// the in-memory view has its own mutex.
//
// Invariants: trunc.Index <= applied.Index <= hs.Commit <= last, and the log
// holds exactly the entries (trunc.Index, last].
type RaftLog struct {
	db    *pebble.DB
	id    RangeID
	snaps *SnapshotRegistry

	mu struct {
		sync.Mutex
		hs      *raftpb.HardState
		applied AppliedState
		trunc   TruncatedState
		last    uint64
		// lastTerm is the term of entry last (trunc.Term when the log is empty).
		lastTerm uint64
		// cache holds the most recent entries, contiguous and ending at last.
		cache []*raftpb.Entry
		// cacheBytes is the size of the cached entries' data.
		cacheBytes int
	}
}

// maxCachedEntries and maxCachedBytes bound the in-memory tail of the log
// (an entry holds every proposal of a Ready round: its size varies).
const (
	maxCachedEntries = 4096
	maxCachedBytes   = 8 << 20
)

// recountLocked recomputes cacheBytes after entries left the cache.
func (l *RaftLog) recountLocked() {
	l.mu.cacheBytes = 0
	for _, e := range l.mu.cache {
		l.mu.cacheBytes += len(e.GetData())
	}
}

var _ raft.Storage = (*RaftLog)(nil)

// LoadRaftLog reads range id's raft state from db.
func LoadRaftLog(db *pebble.DB, id RangeID, snaps *SnapshotRegistry) (*RaftLog, error) {
	l := &RaftLog{db: db, id: id, snaps: snaps}
	hs, err := LoadHardState(db, id)
	if err != nil {
		return nil, err
	}
	applied, err := LoadAppliedState(db, id)
	if err != nil {
		return nil, err
	}
	trunc, err := LoadTruncatedState(db, id)
	if err != nil {
		return nil, err
	}
	l.mu.hs, l.mu.applied, l.mu.trunc = hs, applied, trunc
	l.mu.last, l.mu.lastTerm = trunc.Index, trunc.Term
	// Find the last entry.
	iter, err := db.NewIter(&pebble.IterOptions{
		LowerBound: LogKey(id, 0),
		UpperBound: LogKey(id, ^uint64(0)),
	})
	if err != nil {
		return nil, err
	}
	defer iter.Close()
	if iter.Last() {
		e := &raftpb.Entry{}
		if err := proto.Unmarshal(iter.Value(), e); err != nil {
			return nil, fmt.Errorf("%w: log entry: %v", ErrCorrupt, err)
		}
		l.mu.last, l.mu.lastTerm = e.GetIndex(), e.GetTerm()
	}
	if applied.Index < trunc.Index || applied.Index > l.mu.last {
		return nil, fmt.Errorf("%w: range %d: applied index %d outside log (%d, %d]",
			ErrCorrupt, id, applied.Index, trunc.Index, l.mu.last)
	}
	return l, nil
}

// InitialState implements raft.Storage.
func (l *RaftLog) InitialState() (*raftpb.HardState, *raftpb.ConfState, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cs := l.mu.applied.ConfState
	if cs == nil {
		cs = &raftpb.ConfState{}
	}
	return proto.Clone(l.mu.hs).(*raftpb.HardState), proto.Clone(cs).(*raftpb.ConfState), nil
}

// Entries implements raft.Storage.
func (l *RaftLog) Entries(lo, hi, maxSize uint64) ([]*raftpb.Entry, error) {
	l.mu.Lock()
	trunc, last := l.mu.trunc, l.mu.last
	if lo <= trunc.Index {
		l.mu.Unlock()
		return nil, raft.ErrCompacted
	}
	if hi > last+1 {
		l.mu.Unlock()
		return nil, raft.ErrUnavailable
	}
	if n := len(l.mu.cache); n > 0 && l.mu.cache[0].GetIndex() <= lo {
		first := l.mu.cache[0].GetIndex()
		out := limitSize(l.mu.cache[lo-first:hi-first], maxSize)
		out = append([]*raftpb.Entry(nil), out...)
		l.mu.Unlock()
		return out, nil
	}
	l.mu.Unlock()
	return l.readEntries(lo, hi, maxSize)
}

func limitSize(ents []*raftpb.Entry, maxSize uint64) []*raftpb.Entry {
	if len(ents) == 0 {
		return ents
	}
	size := uint64(proto.Size(ents[0]))
	for i := 1; i < len(ents); i++ {
		size += uint64(proto.Size(ents[i]))
		if size > maxSize {
			return ents[:i]
		}
	}
	return ents
}

func (l *RaftLog) readEntries(lo, hi, maxSize uint64) ([]*raftpb.Entry, error) {
	iter, err := l.db.NewIter(&pebble.IterOptions{
		LowerBound: LogKey(l.id, lo),
		UpperBound: LogKey(l.id, hi),
	})
	if err != nil {
		return nil, err
	}
	defer iter.Close()
	var out []*raftpb.Entry
	var size uint64
	want := lo
	limited := false
	for valid := iter.First(); valid; valid = iter.Next() {
		e := &raftpb.Entry{}
		if err := proto.Unmarshal(iter.Value(), e); err != nil {
			return nil, fmt.Errorf("%w: log entry: %v", ErrCorrupt, err)
		}
		if e.GetIndex() != want {
			// A gap: truncation raced with this read.
			return nil, raft.ErrCompacted
		}
		size += uint64(len(iter.Value()))
		if len(out) > 0 && size > maxSize {
			limited = true
			break
		}
		out = append(out, e)
		want++
	}
	if err := iter.Error(); err != nil {
		return nil, err
	}
	if len(out) == 0 || (want < hi && !limited) {
		return nil, raft.ErrCompacted
	}
	return out, nil
}

// Term implements raft.Storage.
func (l *RaftLog) Term(i uint64) (uint64, error) {
	l.mu.Lock()
	if i == l.mu.trunc.Index {
		t := l.mu.trunc.Term
		l.mu.Unlock()
		return t, nil
	}
	if i < l.mu.trunc.Index {
		l.mu.Unlock()
		return 0, raft.ErrCompacted
	}
	if i > l.mu.last {
		l.mu.Unlock()
		return 0, raft.ErrUnavailable
	}
	if i == l.mu.last {
		t := l.mu.lastTerm
		l.mu.Unlock()
		return t, nil
	}
	if n := len(l.mu.cache); n > 0 && l.mu.cache[0].GetIndex() <= i {
		t := l.mu.cache[i-l.mu.cache[0].GetIndex()].GetTerm()
		l.mu.Unlock()
		return t, nil
	}
	l.mu.Unlock()
	ents, err := l.readEntries(i, i+1, ^uint64(0))
	if err != nil {
		return 0, err
	}
	return ents[0].GetTerm(), nil
}

// LastIndex implements raft.Storage.
func (l *RaftLog) LastIndex() (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.last, nil
}

// FirstIndex implements raft.Storage.
func (l *RaftLog) FirstIndex() (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.trunc.Index + 1, nil
}

// Snapshot implements raft.Storage. The snapshot is the applied state
// itself: it pins a Pebble snapshot, registers it, and returns its metadata;
// the data is streamed by the transport through OpenSnapshot.
func (l *RaftLog) Snapshot() (*raftpb.Snapshot, error) {
	if l.snaps == nil {
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	return l.snaps.create(l.db, l.id)
}

// State returns copies of the in-memory state, for status reporting.
func (l *RaftLog) State() (hs *raftpb.HardState, applied AppliedState, trunc TruncatedState, last uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return proto.Clone(l.mu.hs).(*raftpb.HardState), l.mu.applied, l.mu.trunc, l.mu.last
}

// StageAppend writes ents to b, deleting any conflicting tail.
func (l *RaftLog) StageAppend(b Writer, ents []*raftpb.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	l.mu.Lock()
	last := l.mu.last
	l.mu.Unlock()
	var key []byte
	for _, e := range ents {
		v, err := proto.Marshal(e)
		if err != nil {
			return err
		}
		key = appendLogKey(key[:0], l.id, e.GetIndex())
		if err := b.Set(key, v, nil); err != nil {
			return err
		}
	}
	if end := ents[len(ents)-1].GetIndex(); end < last {
		return b.DeleteRange(LogKey(l.id, end+1), LogKey(l.id, last+1), nil)
	}
	return nil
}

// Append updates the in-memory view after StageAppend's batch committed.
func (l *RaftLog) Append(ents []*raftpb.Entry) {
	if len(ents) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	first := ents[0].GetIndex()
	if n := len(l.mu.cache); n > 0 {
		cfirst := l.mu.cache[0].GetIndex()
		switch {
		case first < cfirst:
			l.mu.cache = l.mu.cache[:0]
		case first <= cfirst+uint64(n):
			l.mu.cache = l.mu.cache[:first-cfirst]
		default:
			l.mu.cache = l.mu.cache[:0]
		}
		if len(l.mu.cache) < n { // a conflicting tail was replaced
			l.recountLocked()
		}
	}
	l.mu.cache = append(l.mu.cache, ents...)
	for _, e := range ents {
		l.mu.cacheBytes += len(e.GetData())
	}
	if n := len(l.mu.cache); n > maxCachedEntries || l.mu.cacheBytes > maxCachedBytes {
		// Keep the newest half (by count and by size), in a new array so
		// that the dropped entries can be collected.
		keep, size := 0, 0
		for keep < n && keep < maxCachedEntries/2 {
			d := len(l.mu.cache[n-1-keep].GetData())
			if keep > 0 && size+d > maxCachedBytes/2 {
				break
			}
			size += d
			keep++
		}
		l.mu.cache = append([]*raftpb.Entry(nil), l.mu.cache[n-keep:]...)
		l.mu.cacheBytes = size
	}
	e := ents[len(ents)-1]
	l.mu.last, l.mu.lastTerm = e.GetIndex(), e.GetTerm()
}

// SetHardState updates the in-memory hard state after it was persisted.
func (l *RaftLog) SetHardState(hs *raftpb.HardState) {
	l.mu.Lock()
	l.mu.hs = proto.Clone(hs).(*raftpb.HardState)
	l.mu.Unlock()
}

// SetApplied updates the in-memory applied state after it was persisted.
func (l *RaftLog) SetApplied(s AppliedState) {
	l.mu.Lock()
	l.mu.applied = s
	l.mu.Unlock()
}

// Applied returns the in-memory applied state.
func (l *RaftLog) Applied() AppliedState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.applied
}

// StageTruncate removes entries up to and including index from the log.
// REQUIRES: index <= applied index.
func (l *RaftLog) StageTruncate(b Writer, index uint64) (TruncatedState, error) {
	l.mu.Lock()
	trunc, applied := l.mu.trunc, l.mu.applied
	l.mu.Unlock()
	if index <= trunc.Index {
		return trunc, nil
	}
	if index > applied.Index {
		return trunc, fmt.Errorf("storage: truncate to %d beyond applied %d", index, applied.Index)
	}
	term, err := l.Term(index)
	if err != nil {
		return trunc, err
	}
	nt := TruncatedState{Index: index, Term: term}
	if err := b.DeleteRange(LogKey(l.id, trunc.Index+1), LogKey(l.id, index+1), nil); err != nil {
		return trunc, err
	}
	return nt, SetTruncatedState(b, l.id, nt)
}

// SetTruncated updates the in-memory truncated state after it was persisted.
func (l *RaftLog) SetTruncated(t TruncatedState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t.Index <= l.mu.trunc.Index {
		return
	}
	l.mu.trunc = t
	if n := len(l.mu.cache); n > 0 && l.mu.cache[0].GetIndex() <= t.Index {
		drop := t.Index - l.mu.cache[0].GetIndex() + 1
		if drop >= uint64(n) {
			l.mu.cache = l.mu.cache[:0]
		} else {
			l.mu.cache = l.mu.cache[drop:]
		}
		l.recountLocked()
	}
	if l.mu.last < t.Index {
		l.mu.last, l.mu.lastTerm = t.Index, t.Term
	}
}

// StageSnapshot records, in b, that the log now starts after the snapshot
// (all older entries are removed). The caller writes the data and applied
// state itself.
func (l *RaftLog) StageSnapshot(b Writer, meta *raftpb.SnapshotMetadata) error {
	l.mu.Lock()
	last := l.mu.last
	l.mu.Unlock()
	end := last
	if meta.GetIndex() > end {
		end = meta.GetIndex()
	}
	if err := b.DeleteRange(LogKey(l.id, 0), LogKey(l.id, end+1), nil); err != nil {
		return err
	}
	return SetTruncatedState(b, l.id, TruncatedState{Index: meta.GetIndex(), Term: meta.GetTerm()})
}

// ApplySnapshot updates the in-memory view after StageSnapshot's batch committed.
func (l *RaftLog) ApplySnapshot(meta *raftpb.SnapshotMetadata, applied AppliedState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.trunc = TruncatedState{Index: meta.GetIndex(), Term: meta.GetTerm()}
	l.mu.last, l.mu.lastTerm = meta.GetIndex(), meta.GetTerm()
	l.mu.cache, l.mu.cacheBytes = l.mu.cache[:0], 0
	l.mu.applied = applied
}

// ErrNoSnapshot is returned by OpenSnapshot for an unknown or expired snapshot.
var ErrNoSnapshot = errors.New("storage: snapshot not found or expired")

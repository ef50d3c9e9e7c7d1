package storage

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

func openMem(t *testing.T, fs vfs.FS) *pebble.DB {
	t.Helper()
	db, err := Open("/db", Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func ents(lo, hi, term uint64) []*raftpb.Entry {
	var out []*raftpb.Entry
	for i := lo; i < hi; i++ {
		out = append(out, &raftpb.Entry{Index: proto.Uint64(i), Term: proto.Uint64(term), Data: []byte{byte(i)}})
	}
	return out
}

func appendCommit(t *testing.T, db *pebble.DB, l *RaftLog, es []*raftpb.Entry) {
	t.Helper()
	b := db.NewBatch()
	if err := l.StageAppend(b, es); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	l.Append(es)
}

func TestRaftLogAppendConflictTruncateReload(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs)
	l, err := LoadRaftLog(db, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	appendCommit(t, db, l, ents(1, 11, 1))
	if last, _ := l.LastIndex(); last != 10 {
		t.Fatalf("last = %d", last)
	}
	// A conflicting suffix from a new leader replaces entries 6..10.
	appendCommit(t, db, l, ents(6, 8, 2))
	if last, _ := l.LastIndex(); last != 7 {
		t.Fatalf("last after conflict = %d", last)
	}
	if tm, _ := l.Term(7); tm != 2 {
		t.Fatalf("term(7) = %d", tm)
	}
	if _, err := l.Term(8); !errors.Is(err, raft.ErrUnavailable) {
		t.Fatalf("term(8): %v", err)
	}
	got, err := l.Entries(3, 8, 1<<30)
	if err != nil || len(got) != 5 || got[4].GetTerm() != 2 {
		t.Fatalf("entries = %v, %v", got, err)
	}
	// Size limit returns at least one entry.
	got, err = l.Entries(3, 8, 1)
	if err != nil || len(got) != 1 {
		t.Fatalf("limited entries = %d, %v", len(got), err)
	}
	// Apply up to 7, truncate through 5.
	b := db.NewBatch()
	l.SetApplied(AppliedState{Index: 7, Term: 2, ConfState: &raftpb.ConfState{Voters: []uint64{1}}})
	if err := SetAppliedState(b, 1, l.Applied()); err != nil {
		t.Fatal(err)
	}
	tr, err := l.StageTruncate(b, 5)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	l.SetTruncated(tr)
	if first, _ := l.FirstIndex(); first != 6 {
		t.Fatalf("first = %d", first)
	}
	if _, err := l.Entries(5, 7, 1<<30); !errors.Is(err, raft.ErrCompacted) {
		t.Fatalf("entries below first: %v", err)
	}
	if tm, err := l.Term(5); err != nil || tm != 1 {
		t.Fatalf("term of truncated index = %d, %v", tm, err)
	}
	// Reload from disk (cold cache) and compare.
	l2, err := LoadRaftLog(db, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if first, _ := l2.FirstIndex(); first != 6 {
		t.Fatalf("reloaded first = %d", first)
	}
	if last, _ := l2.LastIndex(); last != 7 {
		t.Fatalf("reloaded last = %d", last)
	}
	got, err = l2.Entries(6, 8, 1<<30)
	if err != nil || len(got) != 2 || got[1].GetTerm() != 2 {
		t.Fatalf("reloaded entries = %v, %v", got, err)
	}
	_, cs, _ := l2.InitialState()
	if len(cs.GetVoters()) != 1 {
		t.Fatalf("conf state = %v", cs)
	}
}

func TestRaftLogRejectsAppliedBeyondLog(t *testing.T) {
	db := openMem(t, vfs.NewMem())
	b := db.NewBatch()
	_ = SetAppliedState(b, 1, AppliedState{Index: 9, Term: 1, ConfState: &raftpb.ConfState{}})
	_ = b.Commit(pebble.Sync)
	if _, err := LoadRaftLog(db, 1, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("want ErrCorrupt, got %v", err)
	}
}

func TestSnapshotStreamRoundTripAndCorruption(t *testing.T) {
	desc := (&Descriptor{RangeID: 1, Replicas: []ReplicaDescriptor{{NodeID: 1, PeerAddr: "a:1"}}}).FullSlots()
	meta := &raftpb.SnapshotMetadata{Index: proto.Uint64(42), Term: proto.Uint64(3)}
	pairs := map[string]string{"\x10a": "1", "\x10b": string(bytes.Repeat([]byte("x"), 100000)), "\x10c": ""}
	var buf bytes.Buffer
	err := WriteSnapshotStream(&buf, desc, meta, func(emit func(k, v []byte) error) error {
		for _, k := range []string{"\x10a", "\x10b", "\x10c"} {
			if err := emit([]byte(k), []byte(pairs[k])); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	d, m, err := ReadSnapshotStream(bytes.NewReader(buf.Bytes()), func(k, v []byte) error {
		got[string(k)] = string(v)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if d.RangeID != 1 || m.GetIndex() != 42 || m.GetTerm() != 3 || len(got) != 3 || got["\x10b"] != pairs["\x10b"] {
		t.Fatalf("round trip: %+v %v %d", d, m, len(got))
	}
	// Flip one byte in the middle: the checksum must catch it.
	bad := append([]byte(nil), buf.Bytes()...)
	bad[len(bad)/2] ^= 0xff
	if _, _, err := ReadSnapshotStream(bytes.NewReader(bad), func(k, v []byte) error { return nil }); err == nil {
		t.Fatal("corrupted stream accepted")
	}
	// Truncated stream.
	if _, _, err := ReadSnapshotStream(io.LimitReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()-3)), func(k, v []byte) error { return nil }); err == nil {
		t.Fatal("truncated stream accepted")
	}
}

func TestSnapshotRegistryStreamsPinnedState(t *testing.T) {
	db := openMem(t, vfs.NewMem())
	reg := NewSnapshotRegistry(func(*Descriptor) ([]byte, []byte) { return []byte{0x10}, []byte{0x11} })
	l, err := LoadRaftLog(db, 1, reg)
	if err != nil {
		t.Fatal(err)
	}
	b := db.NewBatch()
	_ = SetDescriptor(b, (&Descriptor{RangeID: 1}).FullSlots())
	_ = b.Set([]byte("\x10k1"), []byte("v1"), nil)
	_ = b.Commit(pebble.Sync)
	snap, err := l.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// A write after the snapshot must not be in it.
	_ = db.Set([]byte("\x10k2"), []byte("v2"), pebble.Sync)
	rc, err := reg.Open(snap)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var keys []string
	if _, _, err := ReadSnapshotStream(rc, func(k, v []byte) error { keys = append(keys, string(k)); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0] != "\x10k1" {
		t.Fatalf("snapshot keys = %q", keys)
	}
	if _, err := reg.Open(snap); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("second open: %v", err)
	}
}

// The in-memory tail of the log is bounded by size as well as by count:
// an entry holds a whole Ready round of proposals. Entries that left the
// cache are read back from Pebble.
func TestRaftLogCacheBoundedBySize(t *testing.T) {
	db := openMem(t, vfs.NewMem())
	l, err := LoadRaftLog(db, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	big := func(lo, hi uint64) []*raftpb.Entry {
		es := ents(lo, hi, 1)
		for _, e := range es {
			e.Data = bytes.Repeat([]byte{byte(e.GetIndex())}, 1<<20)
		}
		return es
	}
	for i := uint64(1); i <= 40; i += 4 {
		appendCommit(t, db, l, big(i, i+4))
		l.mu.Lock()
		n, size := len(l.mu.cache), l.mu.cacheBytes
		want := 0
		for _, e := range l.mu.cache {
			want += len(e.GetData())
		}
		l.mu.Unlock()
		if size != want || size > maxCachedBytes {
			t.Fatalf("after %d entries: %d cached, cacheBytes %d (counted %d), bound %d", i+3, n, size, want, maxCachedBytes)
		}
	}
	got, err := l.Entries(1, 41, 1<<40)
	if err != nil || len(got) != 40 {
		t.Fatalf("Entries(1, 41) = %d entries, %v", len(got), err)
	}
	for _, e := range got {
		if len(e.GetData()) != 1<<20 || e.GetData()[0] != byte(e.GetIndex()) {
			t.Fatalf("entry %d read back wrong", e.GetIndex())
		}
	}
}

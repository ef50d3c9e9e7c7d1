package storage

import (
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestLoadDescriptors: every stored descriptor is found, whatever the gaps
// between range ids and whatever other range-local keys (logs, applied
// states, replicated keys) sit around them; a range with keys but no
// descriptor is not reported.
func TestLoadDescriptors(t *testing.T) {
	db := openMem(t, vfs.NewMem())
	defer db.Close()
	got, err := LoadDescriptors(db)
	if err != nil || len(got) != 0 {
		t.Fatalf("empty store: %v, %v", got, err)
	}
	b := db.NewBatch()
	ids := []RangeID{1, 2, 5, 1 << 40, ^RangeID(0)}
	for _, id := range ids {
		d := (&Descriptor{RangeID: id, Generation: uint64(id) % 97}).FullSlots()
		if err := SetDescriptor(b, d); err != nil {
			t.Fatal(err)
		}
		// Keys before and after the descriptor's within the range.
		if err := SetAppliedState(b, id, AppliedState{Index: 11}); err != nil {
			t.Fatal(err)
		}
		for i := uint64(1); i < 50; i++ {
			_ = b.Set(LogKey(id, i), []byte("entry"), nil)
		}
		_ = b.Set(ReplicatedRangeKey(id, []byte("v")), []byte{1}, nil)
	}
	// Range 3: a log and an applied state, no descriptor. Range 4: only
	// keys sorting after 'd'.
	_ = SetAppliedState(b, 3, AppliedState{Index: 5})
	_ = b.Set(LogKey(3, 7), []byte("x"), nil)
	_ = b.Set(LogKey(4, 7), []byte("x"), nil)
	// Keys outside the range-local prefix must not be read.
	_ = b.Set([]byte{prefixRange + 1, 'x'}, []byte("y"), nil)
	_ = SetIdent(b, 7, 9)
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	got, err = LoadDescriptors(db)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ids) {
		t.Fatalf("got %d descriptors, want %d: %+v", len(got), len(ids), got)
	}
	for i, d := range got {
		if d.RangeID != ids[i] || d.Generation != uint64(ids[i])%97 || !d.IsFull() {
			t.Errorf("descriptor %d = %+v, want range %d", i, d, ids[i])
		}
	}
	// A snapshot reads the same.
	snap := db.NewSnapshot()
	defer snap.Close()
	if again, err := LoadDescriptors(snap); err != nil || len(again) != len(ids) {
		t.Fatalf("from a snapshot: %d, %v", len(again), err)
	}
	// A corrupt descriptor is an error, not skipped.
	if err := db.Set(DescriptorKey(2), []byte("{"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadDescriptors(db); err == nil {
		t.Fatal("corrupt descriptor: no error")
	}
}

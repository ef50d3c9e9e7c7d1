package storage

import (
	"bytes"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// The replicated range-local keys of a range are inside its range-local
// span, apart from its Raft state and log, and from other ranges'.
func TestReplicatedRangeKeys(t *testing.T) {
	for _, id := range []RangeID{1, 2, 1 << 40} {
		k := ReplicatedRangeKey(id, []byte("v"))
		rs, re := ReplicatedRangeSpan(id)
		ls, le := RangeLocalSpan(id)
		if bytes.Compare(k, rs) < 0 || bytes.Compare(k, re) >= 0 {
			t.Fatalf("range %d: key %x outside its span [%x, %x)", id, k, rs, re)
		}
		if bytes.Compare(rs, ls) < 0 || bytes.Compare(re, le) > 0 {
			t.Fatalf("range %d: span [%x, %x) outside the range-local span", id, rs, re)
		}
		for _, other := range [][]byte{HardStateKey(id), AppliedStateKey(id), DescriptorKey(id), TruncatedStateKey(id), LogKey(id, 0), LogKey(id, ^uint64(0)), ReplicatedRangeKey(id+1, nil), ReplicatedRangeKey(id-1, []byte{0xFF})} {
			if bytes.Compare(other, rs) >= 0 && bytes.Compare(other, re) < 0 {
				t.Fatalf("range %d: %x inside the replicated span", id, other)
			}
		}
		gid, name, ok := ParseReplicatedRangeKey(k)
		if !ok || gid != id || string(name) != "v" {
			t.Fatalf("parse %x: %d %q %v", k, gid, name, ok)
		}
		if _, _, ok := ParseReplicatedRangeKey(LogKey(id, 7)); ok {
			t.Fatal("a log key parsed as replicated")
		}
	}
}

// A range's snapshot carries its replicated range-local keys and its user
// span, not another range's.
func TestSnapshotCarriesReplicatedRangeKeys(t *testing.T) {
	db, err := pebble.Open("/db", &pebble.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := db.NewBatch()
	d := &Descriptor{RangeID: 2, StartSlot: 8192, EndSlot: 16384}
	mustSet := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	mustSet(SetDescriptor(b, d))
	mustSet(SetAppliedState(b, 2, AppliedState{Index: 9, Term: 1}))
	mustSet(b.Set(ReplicatedRangeKey(2, []byte("v")), []byte("two"), nil))
	mustSet(b.Set(ReplicatedRangeKey(1, []byte("v")), []byte("one"), nil))
	mustSet(b.Set(LogKey(2, 3), []byte("entry"), nil))
	mustSet(b.Set([]byte{0x11, 0x20, 0x00, 'k'}, []byte("user"), nil))
	mustSet(b.Commit(nil))
	reg := NewSnapshotRegistry(func(*Descriptor) ([]byte, []byte) { return []byte{0x11}, []byte{0x12} })
	defer reg.Close()
	snap, err := reg.create(db, 2)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := reg.Open(snap)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var got []string
	if _, _, err := ReadSnapshotStream(rc, func(k, v []byte) error {
		got = append(got, string(k)+"="+string(v))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{string(ReplicatedRangeKey(2, []byte("v"))) + "=two", "\x11\x20\x00k=user"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("snapshot pairs %q, want %q", got, want)
	}
}

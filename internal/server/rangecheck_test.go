package server

import (
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/slot"
	"github.com/kvorum/kvorum/internal/storage"
	"github.com/kvorum/kvorum/internal/store"
)

// TestKVMachinePassesDescriptor: the state machine's adapter hands the
// descriptor the store gives it (ApplyEnv.Desc) to kv, which refuses a
// key outside its slot interval and applies one inside, and applies
// everything with no descriptor or the whole space.
func TestKVMachinePassesDescriptor(t *testing.T) {
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	m := newKVMachine(0, 0)
	half := &storage.Descriptor{RangeID: 1, StartSlot: 0, EndSlot: 8192, Generation: 9}
	full := (&storage.Descriptor{RangeID: 1, Generation: 9}).FullSlots()
	apply := func(desc *storage.Descriptor, args ...string) reply.Reply {
		b := db.NewIndexedBatch()
		defer b.Close()
		var a [][]byte
		for _, s := range args {
			a = append(a, []byte(s))
		}
		return m.Apply(b, a, store.ApplyEnv{Now: time.Now().UnixMilli(), Index: 10, Range: 1, Desc: desc})
	}
	// foo is in slot 12182, bar in 5061.
	if slot.Of([]byte("foo")) < 8192 || slot.Of([]byte("bar")) >= 8192 {
		t.Fatal("slots")
	}
	if r := apply(half, "SET", "foo", "1"); r.Kind != reply.KindError || string(r.Str) != "KVORUM RANGEKEYMISMATCH 9" {
		t.Fatalf("outside key: %+v", r)
	}
	if r := apply(half, "SET", "bar", "1"); r.Kind == reply.KindError {
		t.Fatalf("inside key: %s", r.Str)
	}
	for _, d := range []*storage.Descriptor{nil, full} {
		if r := apply(d, "MSET", "foo", "1", "bar", "2"); r.Kind == reply.KindError {
			t.Fatalf("desc %+v: %s", d, r.Str)
		}
	}
}

// TestNodeDescriptorOwnsEverySlot: a new node's range owns [0, 16384).
func TestNodeDescriptorOwnsEverySlot(t *testing.T) {
	c := newTestCluster(t, 1)
	c.waitLeader()
	d := c.node(1).store.Replica(firstRange).Descriptor()
	if d.StartSlot != 0 || d.EndSlot != slot.Count {
		t.Fatalf("descriptor %+v", d)
	}
}

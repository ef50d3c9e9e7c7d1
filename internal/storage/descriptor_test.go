package storage

import (
	"encoding/json"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvorum/kvorum/internal/slot"
)

// oldDescriptors are descriptors as kvorum wrote them before slot
// intervals (user-key bounds, always empty): the bytes in existing data
// directories, snapshots and backups.
var oldDescriptors = []string{
	`{"range_id":1,"start_key":null,"end_key":null,"replicas":[{"node_id":1,"peer_addr":"a:1"},{"node_id":2,"peer_addr":"b:1","learner":true}],"generation":3}`,
	`{"range_id":1,"start_key":"","end_key":"","replicas":[{"node_id":1,"peer_addr":"a:1"},{"node_id":2,"peer_addr":"b:1","learner":true}],"generation":3}`,
	`{"range_id":1,"replicas":[{"node_id":1,"peer_addr":"a:1"},{"node_id":2,"peer_addr":"b:1","learner":true}],"generation":3}`,
}

func checkOldDescriptor(t *testing.T, d *Descriptor) {
	t.Helper()
	if d.RangeID != 1 || d.Generation != 3 || len(d.Replicas) != 2 || d.Replicas[1].PeerAddr != "b:1" || !d.Replicas[1].Learner {
		t.Fatalf("decoded %+v", d)
	}
	if d.StartSlot != 0 || d.EndSlot != slot.Count || !d.IsFull() {
		t.Fatalf("an old descriptor decodes as [%d, %d), want the whole space [0, %d)", d.StartSlot, d.EndSlot, slot.Count)
	}
	for _, k := range []string{"", "foo", "bar", "{user1000}.following", "\x00\xff"} {
		if !d.ContainsKey([]byte(k)) {
			t.Fatalf("old descriptor does not contain %q", k)
		}
	}
}

func TestDescriptorDecodesOldFormatAsFullSpace(t *testing.T) {
	for _, js := range oldDescriptors {
		var d Descriptor
		if err := json.Unmarshal([]byte(js), &d); err != nil {
			t.Fatal(err)
		}
		checkOldDescriptor(t, &d)
	}
	// Persisted in a data directory before the change: LoadDescriptor.
	db := openMem(t, vfs.NewMem())
	for _, js := range oldDescriptors {
		if err := db.Set(DescriptorKey(1), []byte(js), pebble.Sync); err != nil {
			t.Fatal(err)
		}
		d, ok, err := LoadDescriptor(db, 1)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		checkOldDescriptor(t, d)
	}
}

func TestDescriptorSlotsRoundTrip(t *testing.T) {
	for _, iv := range [][2]uint16{{0, slot.Count}, {0, 8192}, {8192, slot.Count}, {5, 5}, {0, 0}, {100, 101}} {
		d := &Descriptor{RangeID: 7, StartSlot: iv[0], EndSlot: iv[1], Generation: 2}
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		if _, ok := m["start_slot"]; !ok {
			t.Fatalf("%s: no start_slot", b)
		}
		if _, ok := m["end_slot"]; !ok {
			t.Fatalf("%s: no end_slot", b)
		}
		if _, ok := m["start_key"]; ok {
			t.Fatalf("%s: a new descriptor still writes start_key", b)
		}
		var got Descriptor
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if got.StartSlot != iv[0] || got.EndSlot != iv[1] || got.RangeID != 7 || got.Generation != 2 {
			t.Fatalf("%v: round trip gives %+v", iv, got)
		}
	}
}

func TestDescriptorContainsSlot(t *testing.T) {
	full := (&Descriptor{}).FullSlots()
	low := &Descriptor{StartSlot: 0, EndSlot: 8192}
	high := &Descriptor{StartSlot: 8192, EndSlot: slot.Count}
	for _, tc := range []struct {
		d    *Descriptor
		s    uint16
		want bool
	}{
		{full, 0, true}, {full, 16383, true}, {full, 8192, true},
		{low, 0, true}, {low, 8191, true}, {low, 8192, false}, {low, 16383, false},
		{high, 0, false}, {high, 8191, false}, {high, 8192, true}, {high, 16383, true},
		{&Descriptor{StartSlot: 5, EndSlot: 5}, 5, false}, // lo == hi: empty
		{&Descriptor{StartSlot: 5, EndSlot: 5}, 4, false},
		{&Descriptor{StartSlot: 0, EndSlot: 0}, 0, false},
		{&Descriptor{StartSlot: 16383, EndSlot: slot.Count}, 16383, true},
		{&Descriptor{StartSlot: 16383, EndSlot: slot.Count}, 16382, false},
	} {
		if got := tc.d.ContainsSlot(tc.s); got != tc.want {
			t.Errorf("[%d, %d) contains %d = %v, want %v", tc.d.StartSlot, tc.d.EndSlot, tc.s, got, tc.want)
		}
	}
	// ContainsKey goes by the key's slot: foo is 12182, bar 5061.
	if !low.ContainsKey([]byte("bar")) || low.ContainsKey([]byte("foo")) || !high.ContainsKey([]byte("foo")) || high.ContainsKey([]byte("bar")) {
		t.Fatal("ContainsKey does not follow slot.Of")
	}
	if !low.ContainsKey([]byte("{bar}x")) || !full.ContainsKey([]byte("foo")) {
		t.Fatal("ContainsKey: hash tag or full space")
	}
	// Clone keeps the interval.
	if c := low.Clone(); c.StartSlot != 0 || c.EndSlot != 8192 {
		t.Fatalf("clone %+v", c)
	}
}

func TestDescriptorMissingSlotField(t *testing.T) {
	for js, want := range map[string][2]uint16{
		`{"range_id":3,"start_slot":8192}`:           {8192, slot.Count},
		`{"range_id":3,"end_slot":8192}`:             {0, 8192},
		`{"range_id":3,"start_slot":0,"end_slot":0}`: {0, 0},
	} {
		var d Descriptor
		if err := json.Unmarshal([]byte(js), &d); err != nil {
			t.Fatal(err)
		}
		if d.StartSlot != want[0] || d.EndSlot != want[1] || d.RangeID != 3 {
			t.Errorf("%s: [%d, %d), want [%d, %d)", js, d.StartSlot, d.EndSlot, want[0], want[1])
		}
	}
}

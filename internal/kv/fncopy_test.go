package kv

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/slot"
	"github.com/kvorum/kvorum/internal/storage"
)

// fnCopyArgs is the KVORUM.FNCOPY that db's range 1 libraries make.
func fnCopyArgs(t *testing.T, db *pebble.DB) []string { return copyCommand(t, db, FunctionCopy) }

// FCALL in range 2 runs range 2's copy of the libraries: none before the
// copy, the copied code after; FUNCTION writes apply in range 1 only; an
// older copy after a newer one changes nothing.
func TestFunctionCopyVersions(t *testing.T) {
	db := openMem(t)
	r1 := &storage.Descriptor{RangeID: 1, StartSlot: 0, EndSlot: 8192}
	r2 := &storage.Descriptor{RangeID: 2, StartSlot: 8192, EndSlot: slot.Count}
	k1, k2 := keysIn("f", 0, 8192, 1)[0], keysIn("f", 8192, slot.Count, 1)[0]

	if r := applyOne(t, db, nil, r2, 5, "FUNCTION", "LOAD", testLib); !strings.Contains(show(r), "range 1 only") {
		t.Fatalf("FUNCTION LOAD in range 2: %s", show(r))
	}
	if r := applyOne(t, db, nil, r1, 10, "FUNCTION", "LOAD", testLib); show(r) != "tlib" {
		t.Fatalf("FUNCTION LOAD: %s", show(r))
	}
	v10 := fnCopyArgs(t, db)
	if v10[1] != "10" || len(v10) < 4 {
		t.Fatalf("copy %q", v10)
	}
	if r := applyOne(t, db, nil, r1, 11, "FCALL", "tset", "1", k1, "a"); show(r) != "OK" {
		t.Fatalf("FCALL in range 1: %s", show(r))
	}
	if r := applyOne(t, db, nil, r2, 3, "FCALL", "tset", "1", k2, "a"); !strings.Contains(show(r), "Function not found") {
		t.Fatalf("FCALL in range 2 before its copy: %s", show(r))
	}
	if r := applyOne(t, db, nil, r2, 4, v10...); show(r) != "1" {
		t.Fatalf("copy: %s", show(r))
	}
	if r := applyOne(t, db, nil, r2, 5, "FCALL", "tset", "1", k2, "b"); show(r) != "OK" {
		t.Fatalf("FCALL in range 2 after its copy: %s", show(r))
	}
	if got := show(readInRange(db, r2, "FCALL_RO", "tget", "1", k2)); got != "b" {
		t.Fatalf("FCALL_RO in range 2: %s", got)
	}
	// FUNCTION FLUSH in range 1; its copy (version 12, no libraries)
	// empties range 2's; then the old copy (10) arrives late: ignored.
	if r := applyOne(t, db, nil, r1, 12, "FUNCTION", "FLUSH"); show(r) != "OK" {
		t.Fatalf("FUNCTION FLUSH: %s", show(r))
	}
	v12 := fnCopyArgs(t, db)
	if v12[1] != "12" || len(v12) != 2 {
		t.Fatalf("copy after FLUSH %q", v12)
	}
	if r := applyOne(t, db, nil, r2, 6, v12...); show(r) != "1" {
		t.Fatalf("copy: %s", show(r))
	}
	if r := applyOne(t, db, nil, r2, 7, v10...); show(r) != "0" {
		t.Fatalf("older copy after a newer one: %s, want 0", show(r))
	}
	if r := applyOne(t, db, nil, r2, 8, "FCALL", "tset", "1", k2, "c"); !strings.Contains(show(r), "Function not found") {
		t.Fatalf("FCALL in range 2 after the flush's copy: %s", show(r))
	}
	// Range 2 keeps only its copy's version after the flush's copy.
	start, end := storage.ReplicatedRangeSpan(2)
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for it.First(); it.Valid(); it.Next() {
		if bytes.HasPrefix(it.Key(), fnCopyKey(2, nil)) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("range 2 keeps %d function copy keys after the flush's copy, want 1 (the version)", n)
	}
	// The copies survive the format 1 keys of snapshot streams.
	k := fnCopyKey(3, []byte("ltlib"))
	if back, _ := appendV2KeyIn(nil, V1Key(k), 3); !bytes.Equal(back, k) || bytes.HasPrefix(V1Key(k), fnPrefix) {
		t.Fatalf("round trip %q -> %q -> %q", k, V1Key(k), back)
	}
}

// readInRange reads args in range desc's context.
func readInRange(db *pebble.DB, desc *storage.Descriptor, args ...string) Reply {
	r, _ := ReadIn(db, ReadEnv{Desc: desc}, toArgs(args...), 1_000_000)
	return r
}

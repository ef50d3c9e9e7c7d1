package kv

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/slot"
	"github.com/kvorum/kvorum/internal/storage"
)

// applyOne applies args in its own batch with settings s (one per range,
// as the state machine keeps them) and returns the reply.
func applyOne(t *testing.T, db *pebble.DB, s *Settings, desc *storage.Descriptor, index uint64, args ...string) Reply {
	t.Helper()
	b := db.NewIndexedBatch()
	defer b.Close()
	r := Apply(b, toArgs(args...), Env{Now: 1_000_000, Index: index, Settings: s, Desc: desc})
	if err := b.Commit(pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	return r
}

// copyArgs is the KVORUM.CONFIGCOPY that db's range 1 parameters make.
func copyArgs(t *testing.T, db *pebble.DB) []string { return copyCommand(t, db, ConfigCopy) }

// copyCommand is the copy command make builds from db's range 1, as
// strings.
func copyCommand(t *testing.T, db *pebble.DB, make func(pebble.Reader) ([][]byte, uint64, error)) []string {
	t.Helper()
	args, _, err := make(db)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range args {
		out = append(out, string(a))
	}
	return out
}

// A range applies with its own copy: range 1's CONFIG SET changes nothing
// in range 2 until range 2 applies the copy; an older copy (a lower
// version) arriving after a newer one changes nothing.
func TestConfigCopyVersions(t *testing.T) {
	db := openMem(t)
	r1 := &storage.Descriptor{RangeID: 1, StartSlot: 0, EndSlot: 8192}
	r2 := &storage.Descriptor{RangeID: 2, StartSlot: 8192, EndSlot: slot.Count}
	s1, s2 := new(Settings), new(Settings)
	k2 := keysIn("h", 8192, slot.Count, 3)

	if r := applyOne(t, db, s2, r2, 5, "KVORUM.CONFIG", "SET", "hash-max-listpack-entries", "1"); r.Kind != reply.KindError {
		t.Fatalf("KVORUM.CONFIG SET in range 2: %s, want an error", show(r))
	}
	if r := applyOne(t, db, s1, r1, 10, "KVORUM.CONFIG", "SET", "hash-max-listpack-entries", "2"); show(r) != "OK" {
		t.Fatalf("CONFIG SET: %s", show(r))
	}
	old := copyArgs(t, db) // version 10
	if old[1] != "10" {
		t.Fatalf("copy %q: version %s, want 10", old, old[1])
	}
	// Range 2 has no copy yet: the defaults (512), not range 1's 2.
	applyOne(t, db, s2, r2, 3, "HSET", k2[0], "a", "1", "b", "2", "c", "3")
	if got := show(Read(db, toArgs("OBJECT", "ENCODING", k2[0]), 1_000_000)); got != "listpack" {
		t.Fatalf("range 2 before its copy: %s", got)
	}
	if r := applyOne(t, db, s1, r1, 11, "KVORUM.CONFIG", "SET", "hash-max-listpack-entries", "4"); show(r) != "OK" {
		t.Fatalf("CONFIG SET: %s", show(r))
	}
	newer := copyArgs(t, db) // version 11
	if r := applyOne(t, db, s2, r2, 4, newer...); show(r) != "1" {
		t.Fatalf("newer copy: %s", show(r))
	}
	if r := applyOne(t, db, s2, r2, 5, old...); show(r) != "0" {
		t.Fatalf("older copy after a newer one: %s, want 0 (ignored)", show(r))
	}
	if r := applyOne(t, db, s2, r2, 6, newer...); show(r) != "0" {
		t.Fatalf("the same copy again: %s, want 0", show(r))
	}
	if v, ok, err := ConfigCopyVersion(db, 2); err != nil || !ok || v != 11 {
		t.Fatalf("range 2's copy version %d %v %v, want 11", v, ok, err)
	}
	// Range 2 applies with 4: 3 fields stay small, 5 do not.
	applyOne(t, db, s2, r2, 7, "HSET", k2[1], "a", "1", "b", "2", "c", "3")
	applyOne(t, db, s2, r2, 8, "HSET", k2[2], "a", "1", "b", "2", "c", "3", "d", "4", "e", "5")
	for k, want := range map[string]string{k2[1]: "listpack", k2[2]: "hashtable"} {
		if got := show(Read(db, toArgs("OBJECT", "ENCODING", k), 1_000_000)); got != want {
			t.Fatalf("OBJECT ENCODING %s in range 2: %s, want %s", k, got, want)
		}
	}
	// A fresh Settings (after a snapshot, a restart) reads the same copy.
	s2.Reset()
	k3 := keysIn("z", 8192, slot.Count, 1)[0]
	applyOne(t, db, s2, r2, 9, "HSET", k3, "a", "1", "b", "2", "c", "3", "d", "4", "e", "5")
	if got := show(Read(db, toArgs("OBJECT", "ENCODING", k3), 1_000_000)); got != "hashtable" {
		t.Fatalf("after Reset: %s", got)
	}
	// Range 1 ignores copies: it holds the parameters.
	if r := applyOne(t, db, s1, r1, 12, old...); show(r) != "0" {
		t.Fatalf("copy applied by range 1: %s", show(r))
	}
}

// Range 2's parameters depend only on range 2's log: applying range 1's
// CONFIG SETs and range 2's log (copies and HSETs) in any interleaving
// gives the same range-2 bytes. (Before the copies, range 2 read range
// 1's keys, and the encoding of its hashes depended on the interleaving.)
func TestConfigCopyInterleavings(t *testing.T) {
	r1 := &storage.Descriptor{RangeID: 1, StartSlot: 0, EndSlot: 8192}
	r2 := &storage.Descriptor{RangeID: 2, StartSlot: 8192, EndSlot: slot.Count}
	// Range 1's log: SETs at indexes 10.. of growing thresholds; range 2's
	// log: HSETs of 3 fields, with the copy of SET 1 proposed midway.
	var log1, log2 [][]string
	for i := 0; i < 4; i++ {
		log1 = append(log1, []string{"KVORUM.CONFIG", "SET", "hash-max-listpack-entries", strconv.Itoa(2 + i)})
	}
	copyAt10 := []string{"KVORUM.CONFIGCOPY", "10", "hash-max-listpack-entries", "2", "notify-keyspace-events", ""}
	ks := keysIn("i", 8192, slot.Count, 6)
	for i, k := range ks {
		if i == 3 {
			log2 = append(log2, copyAt10)
		}
		log2 = append(log2, []string{"HSET", k, "a", "1", "b", "2", "c", "3"})
	}
	run := func(pick func() bool) []byte {
		db := openMem(t)
		s1, s2 := new(Settings), new(Settings)
		i, j := 0, 0
		for i < len(log1) || j < len(log2) {
			if j >= len(log2) || (i < len(log1) && pick()) {
				applyOne(t, db, s1, r1, uint64(10+i), log1[i]...)
				i++
			} else {
				applyOne(t, db, s2, r2, uint64(10+j), log2[j]...)
				j++
			}
		}
		var out bytes.Buffer
		rs, re := storage.ReplicatedRangeSpan(2)
		if err := storage.EmitSpan(db, rs, re, func(k, v []byte) error { fmt.Fprintf(&out, "%x=%x\n", k, v); return nil }); err != nil {
			t.Fatal(err)
		}
		start, end := SlotSpan(8192, slot.Count)
		if err := storage.EmitSpan(db, start, end, func(k, v []byte) error { fmt.Fprintf(&out, "%x=%x\n", k, v); return nil }); err != nil {
			t.Fatal(err)
		}
		for _, k := range ks {
			fmt.Fprintf(&out, "%s %s\n", k, show(Read(db, toArgs("OBJECT", "ENCODING", k), 1_000_000)))
		}
		return out.Bytes()
	}
	ref := run(func() bool { return true })
	if !bytes.Contains(ref, []byte("hashtable")) || !bytes.Contains(ref, []byte("listpack")) {
		t.Fatalf("want both encodings (the copy took effect midway):\n%s", ref)
	}
	for seed := uint64(0); seed < 8; seed++ {
		rng := rand.New(rand.NewPCG(seed, 3))
		if got := run(func() bool { return rng.IntN(2) == 0 }); !bytes.Equal(got, ref) {
			t.Fatalf("seed %d: range 2's state differs:\n%s\nwant\n%s", seed, got, ref)
		}
	}
}

// A range's copy survives the format 1 keys of snapshot streams
// (V1Key, then the conversion back for that range), and does not land on
// range 1's parameter keys.
func TestConfigCopyLegacyKeys(t *testing.T) {
	k := configCopyKey(3, "hash-max-listpack-entries")
	v1 := V1Key(k)
	if bytes.HasPrefix(v1, configPrefix) {
		t.Fatalf("V1 form %q collides with range 1's parameters", v1)
	}
	back, drop := appendV2KeyIn(nil, v1, 3)
	if drop || !bytes.Equal(back, k) {
		t.Fatalf("round trip %q -> %q -> %q (drop %v)", k, v1, back, drop)
	}
	ver := configCopyKey(3, "")
	if back, _ := appendV2KeyIn(nil, V1Key(ver), 3); !bytes.Equal(back, ver) {
		t.Fatalf("version key round trip: %q", back)
	}
}

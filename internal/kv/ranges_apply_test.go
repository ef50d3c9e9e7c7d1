package kv

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/slot"
	"github.com/kvorum/kvorum/internal/storage"
)

// keysIn returns n keys whose hash slots are in [lo, hi), named after p.
func keysIn(p string, lo, hi uint16, n int) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		k := p + strconv.Itoa(i)
		if s := slot.Of([]byte(k)); s >= lo && s < hi {
			out = append(out, k)
		}
	}
	return out
}

// rangeEntry is one entry of a range's log: its command, index and time
// are the range's own, whatever the other ranges do.
type rangeEntry struct {
	desc  *storage.Descriptor
	index uint64
	now   int64
	args  [][]byte
}

// rangeLog builds the log of a range over keys of its own slots: writes
// that hand out collection versions, deletions (WATCH tombstones),
// registrations, FLUSHALL, the tombstone collection, TTLs (the expiry
// index) and a blocked pop's queue entry.
func rangeLog(desc *storage.Descriptor, seed uint64) []rangeEntry {
	ks := keysIn(fmt.Sprintf("r%d:", desc.RangeID), desc.StartSlot, desc.EndSlot, 6)
	cmds := [][]string{
		{"RPUSH", ks[0], "a", "b"},
		{"SADD", ks[1], "x", "y"},
		{"SET", ks[2], "v", "PX", "100000"},
		{"KVORUM.WATCHREG", ks[3], ks[2]},
		{"DEL", ks[0]},
		{"HSET", ks[4], "f", "v"},
		{"KVORUM.BLOCK", string(WaiterID(uint64(desc.RangeID), 7, 1)), "BLPOP", ks[5], "0"},
		{"FLUSHALL"},
		{"ZADD", ks[0], "1", "m"},
		{"RPUSH", ks[1], "c"},
		{"SET", ks[3], "w", "PX", "200000"},
		{"DEL", ks[3]},
		{"KVORUM.TOMBGC"},
		{"SADD", ks[2], "z"},
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	var out []rangeEntry
	now := int64(1_000_000)
	for i, c := range cmds {
		now += int64(rng.IntN(400_000)) // crosses tombstone epochs (10 minutes)
		out = append(out, rangeEntry{desc: desc, index: uint64(10 + i), now: now, args: toArgs(c...)})
	}
	return out
}

// applyInterleaved applies the entries of both logs into a new store in an
// order that keeps each log's own order, each entry in its own batch (as a
// round of the store would), and returns every pair of the store.
func applyInterleaved(t *testing.T, a, b []rangeEntry, pickA func(i, j int) bool) [][2][]byte {
	t.Helper()
	db := openMem(t)
	var replies [][2][]byte
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		var e rangeEntry
		if j >= len(b) || (i < len(a) && pickA(i, j)) {
			e, i = a[i], i+1
		} else {
			e, j = b[j], j+1
		}
		bt := db.NewIndexedBatch()
		var fx Effects
		r := Apply(bt, e.args, Env{Now: e.now, Index: e.index, Effects: &fx, Desc: e.desc})
		// The replies are part of what must not depend on the other
		// range: they go into the result, under a key of their own.
		replies = append(replies, [2][]byte{fmt.Appendf(nil, "reply %d/%d", e.desc.RangeID, e.index), []byte(show(r))})
		if err := bt.Commit(pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		bt.Close()
	}
	var pairs [][2][]byte
	if err := storage.EmitSpan(db, []byte{0x00}, []byte{0xFF}, func(k, v []byte) error {
		pairs = append(pairs, [2][]byte{bytes.Clone(k), bytes.Clone(v)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(replies, func(x, y [2][]byte) int { return bytes.Compare(x[0], y[0]) })
	return append(pairs, replies...)
}

// TestRangesApplyIndependently: two ranges (range 1 owns slots [0, 8192),
// range 2 [8192, 16384)) applying their own logs into one store reach the
// same bytes whatever the interleaving of the two logs, as the replicas of
// a node do, each range's at its own pace. With one global version
// counter, FLUSHALL index or tombstone floor, or a FLUSHALL deleting the
// other range's keys, they would not.
func TestRangesApplyIndependently(t *testing.T) {
	r1 := &storage.Descriptor{RangeID: 1, StartSlot: 0, EndSlot: 8192}
	r2 := &storage.Descriptor{RangeID: 2, StartSlot: 8192, EndSlot: slot.Count}
	a, b := rangeLog(r1, 1), rangeLog(r2, 2)
	ref := applyInterleaved(t, a, b, func(int, int) bool { return true }) // all of range 1 first
	if len(ref) < 10 {
		t.Fatalf("only %d pairs", len(ref))
	}
	for _, p := range ref {
		if bytes.HasPrefix(p[0], []byte("reply ")) && bytes.Contains(p[1], []byte("ERR")) {
			t.Fatalf("%s: %s", p[0], p[1])
		}
	}
	orders := map[string]func(i, j int) bool{
		"range 2 first": func(int, int) bool { return false },
		"alternating":   func(i, j int) bool { return i <= j },
	}
	for seed := uint64(0); seed < 4; seed++ {
		rng := rand.New(rand.NewPCG(seed, 9))
		orders["random "+strconv.FormatUint(seed, 10)] = func(int, int) bool { return rng.IntN(2) == 0 }
	}
	for name, pick := range orders {
		got := applyInterleaved(t, a, b, pick)
		if !slices.EqualFunc(got, ref, func(x, y [2][]byte) bool { return bytes.Equal(x[0], y[0]) && bytes.Equal(x[1], y[1]) }) {
			for i := range max(len(got), len(ref)) {
				var g, w [2][]byte
				if i < len(got) {
					g = got[i]
				}
				if i < len(ref) {
					w = ref[i]
				}
				if !bytes.Equal(g[0], w[0]) || !bytes.Equal(g[1], w[1]) {
					t.Fatalf("%s: the store differs from range 1 then range 2 (%d pairs, want %d); first at %d: %x=%x, want %x=%x", name, len(got), len(ref), i, g[0], g[1], w[0], w[1])
				}
			}
		}
	}
}

// ExpiredKeysIn gives the due keys of the range's slots only.
func TestExpiredKeysIn(t *testing.T) {
	l := newLockLog(t)
	a, b := keysIn("e", 0, 8192, 3), keysIn("e", 8192, slot.Count, 3)
	for _, k := range append(slices.Clone(a), b...) {
		l.want("OK", "SET", k, "v", "PX", "10")
	}
	r2 := &storage.Descriptor{RangeID: 2, StartSlot: 8192, EndSlot: slot.Count}
	got, err := ExpiredKeysIn(l.db, r2, 1<<40, 100)
	if err != nil {
		t.Fatal(err)
	}
	var gs []string
	for _, k := range got {
		gs = append(gs, string(k))
	}
	slices.Sort(gs)
	slices.Sort(b)
	if !slices.Equal(gs, b) {
		t.Fatalf("range 2's due keys %q, want %q", gs, b)
	}
	if all, _ := ExpiredKeysIn(l.db, nil, 1<<40, 100); len(all) != 6 {
		t.Fatalf("%d due keys in all", len(all))
	}
}

// KVORUM.WATCHREG declares no keys, and a registration lives in its key's
// slot: a range refuses to register a key of another range's slots, and
// writes nothing.
func TestWatchRegRangeCheck(t *testing.T) {
	db := openMem(t)
	r1 := &storage.Descriptor{RangeID: 1, StartSlot: 0, EndSlot: 8192, Generation: 3}
	in, out := keysIn("w", 0, 8192, 1)[0], keysIn("w", 8192, slot.Count, 1)[0]
	b := db.NewIndexedBatch()
	r := Apply(b, toArgs("KVORUM.WATCHREG", in, out), Env{Now: 1_000_000, Index: 5, Desc: r1})
	if gen, ok := IsRangeKeyMismatch(r); !ok || gen != 3 {
		t.Fatalf("reply %s", show(r))
	}
	if b.Count() != 0 {
		t.Fatalf("%d writes", b.Count())
	}
	b.Close()
}

package kv

import (
	"bytes"
	"slices"
	"strconv"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/slot"
	"github.com/kvorum/kvorum/internal/storage"
)

// applyDL applies args as an entry of range d at now, with the node's
// per-slot deadlines dl (nil: none), and commits the round.
func applyDL(t *testing.T, db *pebble.DB, d *storage.Descriptor, dl *Deadlines, now int64, s ...string) Reply {
	t.Helper()
	b := db.NewIndexedBatch()
	defer b.Close()
	r := Apply(b, toArgs(s...), Env{Now: now, Index: 1, Desc: d, Deadlines: dl})
	if r.IsError() {
		t.Fatalf("%q: %s", s, show(r))
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if dl != nil {
		dl.Publish()
	}
	return r
}

// A key's expiry index entry lives in its slot's span, so the snapshot of
// range 2 (storage.EmitSpan of its slot span, as the state machine's Span
// gives it) carries it: restored into a fresh store, the key is found due
// at its deadline and not before, and the sweep's DELEXPIRED deletes it.
// Range 1's keys, outside the span, come neither as keys nor as entries.
func TestExpiryIndexInRangeSnapshot(t *testing.T) {
	db := openMem(t)
	r1 := &storage.Descriptor{RangeID: 1, StartSlot: 0, EndSlot: 8192}
	r2 := &storage.Descriptor{RangeID: 2, StartSlot: 8192, EndSlot: slot.Count}
	k1, k2 := keysIn("a", 0, 8192, 1)[0], keysIn("b", 8192, slot.Count, 2)
	applyDL(t, db, r1, nil, 1000, "SET", k1, "v", "PX", "500")
	applyDL(t, db, r2, nil, 1000, "SET", k2[0], "v", "PX", "500")
	applyDL(t, db, r2, nil, 1000, "SET", k2[1], "v", "PX", "9000")

	fresh := openMem(t)
	start, end := SlotSpan(r2.StartSlot, r2.EndSlot)
	b := fresh.NewBatch()
	if err := storage.EmitSpan(db, start, end, func(k, v []byte) error { return b.Set(k, v, nil) }); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	checkExpiryIndex(t, fresh)
	dl := NewDeadlines()
	if keys, _, err := dl.Due(fresh, r2.StartSlot, r2.EndSlot, 1499, 100); err != nil || len(keys) != 0 {
		t.Fatalf("due at 1499: %q %v", keys, err)
	}
	keys, _, err := dl.Due(fresh, r2.StartSlot, r2.EndSlot, 1500, 100)
	if err != nil || len(keys) != 1 || string(keys[0]) != k2[0] {
		t.Fatalf("due at 1500: %q %v; want %s", keys, err, k2[0])
	}
	if all, _ := ExpiredKeys(fresh, 1<<40, 100); len(all) != 2 {
		t.Fatalf("entries restored: %q, want range 2's two", all)
	}
	if r := applyDL(t, fresh, r2, dl, 1500, "KVORUM.DELEXPIRED", k2[0]); r.Int != 1 {
		t.Fatalf("DELEXPIRED = %s", show(r))
	}
	checkExpiryIndex(t, fresh)
	if got := show(Read(fresh, toArgs("DBSIZE"), 1500)); got != "1" {
		t.Fatalf("DBSIZE %s after the sweep", got)
	}
}

// The per-slot minimum: the first sweep seeks every slot once (unknown
// at load), later sweeps only the slots whose earliest deadline is due; a
// key written with a shorter TTL lowers its slot's minimum (once the
// round is published); a sweep finding its slot's due keys deleted
// stores the next head; a replaced span makes its slots unknown again.
func TestDeadlinesPerSlotMinimum(t *testing.T) {
	db := openMem(t)
	dl := NewDeadlines()
	r2 := &storage.Descriptor{RangeID: 2, StartSlot: 100, EndSlot: 200}
	keys := keysIn("m", 100, 200, 40)
	slots := map[uint16]bool{}
	for i, k := range keys {
		applyDL(t, db, r2, dl, 1000, "SET", k, "v", "PX", strconv.Itoa(10_000+i))
		slots[slot.Of([]byte(k))] = true
	}
	// Nothing known yet: the entries were written to unknown slots.
	if m := dl.Min(slot.Of([]byte(keys[0]))); m != 0 {
		t.Fatalf("min of an unknown slot lowered to %d", m)
	}
	due, visited, err := dl.Due(db, 100, 200, 2000, 100)
	if err != nil || len(due) != 0 || visited != 100 {
		t.Fatalf("first sweep: %q, %d slots, %v; want none due, 100 slots sought", due, visited, err)
	}
	for s := uint16(100); s < 200; s++ {
		if m := dl.Min(s); slots[s] != (m != noDeadline) || m == 0 {
			t.Fatalf("slot %d: min %d after the first sweep (has keys: %v)", s, m, slots[s])
		}
	}
	if _, visited, _ := dl.Due(db, 100, 200, 2000, 100); visited != 0 {
		t.Fatalf("second sweep before any deadline sought %d slots", visited)
	}
	// A shorter TTL lowers its slot: the next sweep seeks that slot only.
	short := keys[7]
	s := slot.Of([]byte(short))
	applyDL(t, db, r2, dl, 1000, "PEXPIRE", short, "1500")
	if m := dl.Min(s); m != 2500 {
		t.Fatalf("slot %d min %d, want 2500", s, m)
	}
	due, visited, err = dl.Due(db, 100, 200, 3000, 100)
	if err != nil || visited != 1 || len(due) != 1 || string(due[0]) != short {
		t.Fatalf("sweep at 3000: %q, %d slots, %v; want %s in 1 slot", due, visited, err, short)
	}
	// Still due (not deleted yet): sought again; once deleted, the slot's
	// next head is stored and the slot not sought until then.
	if _, visited, _ := dl.Due(db, 100, 200, 3000, 100); visited != 1 {
		t.Fatalf("sweep with %s undeleted sought %d slots", short, visited)
	}
	applyDL(t, db, r2, dl, 3000, "KVORUM.DELEXPIRED", short)
	if _, visited, _ := dl.Due(db, 100, 200, 3000, 100); visited != 1 {
		t.Fatalf("sweep after the deletion sought %d slots, want 1 (to learn the new head)", visited)
	}
	if m := dl.Min(s); m != noDeadline && m < 10_000 {
		t.Fatalf("slot %d min %d after its due key went", s, m)
	}
	if _, visited, _ := dl.Due(db, 100, 200, 3000, 100); visited != 0 {
		t.Fatalf("sweep sought %d slots, none due", visited)
	}
	// Everything due at 12000: every slot with keys, in slot order.
	due, visited, _ = dl.Due(db, 100, 200, 12_000, 1000)
	if visited != len(slots) || len(due) != len(keys)-1 {
		t.Fatalf("sweep at 12000: %d keys in %d slots; want %d in %d", len(due), visited, len(keys)-1, len(slots))
	}
	if !slices.IsSortedFunc(due, func(a, b []byte) int { return int(slot.Of(a)) - int(slot.Of(b)) }) {
		t.Fatal("due keys not in slot order")
	}
	// A snapshot replacing slots [150, 200): unknown once published.
	start, end := SlotSpan(150, 200)
	dl.ResetSpan(start, end)
	if dl.Min(199) == 0 && slots[199] {
		t.Fatal("reset before Publish")
	}
	dl.Publish()
	for s := uint16(100); s < 200; s++ {
		if m := dl.Min(s); (s >= 150) != (m == 0) {
			t.Fatalf("slot %d min %d after resetting [150, 200)", s, m)
		}
	}
}

// FLUSHALL of a range deletes its slots' index entries and keeps their
// other hidden keys (a WATCH tombstone), and leaves other ranges' entries.
func TestFlushDeletesSlotIndex(t *testing.T) {
	db := openMem(t)
	r1 := &storage.Descriptor{RangeID: 1, StartSlot: 0, EndSlot: 8192}
	r2 := &storage.Descriptor{RangeID: 2, StartSlot: 8192, EndSlot: slot.Count}
	a, b := keysIn("f", 0, 8192, 30), keysIn("f", 8192, slot.Count, 30)
	for _, k := range a {
		applyDL(t, db, r1, nil, 1000, "SET", k, "v", "PX", "5000")
	}
	for _, k := range b {
		applyDL(t, db, r2, nil, 1000, "SET", k, "v", "PX", "5000")
	}
	applyDL(t, db, r2, nil, 1000, "SET", "gone{"+b[3]+"}", "v")
	applyDL(t, db, r2, nil, 1000, "DEL", "gone{"+b[3]+"}")
	tomb := tombKey(tombEpoch(1000), []byte("gone{"+b[3]+"}"))
	applyDL(t, db, r2, nil, 1000, "FLUSHALL")
	checkExpiryIndex(t, db)
	due, _ := ExpiredKeys(db, 1<<40, 100)
	if len(due) != len(a) {
		t.Fatalf("%d entries left, want range 1's %d", len(due), len(a))
	}
	for _, k := range due {
		if slot.Of(k) >= 8192 {
			t.Fatalf("range 2's entry of %s left", k)
		}
	}
	if has, err := hasKey(db, tomb); err != nil || !has {
		t.Fatalf("FLUSHALL dropped the tombstone %x: %v %v", tomb, has, err)
	}
	if !bytes.HasPrefix(tomb, []byte{slotPrefix}) {
		t.Fatal("tombstone not per slot")
	}
}

// A sweep that reads an unknown slot before a round writing an earlier
// entry there is committed, and stores the head it read after the round
// is published, must not hide that entry: the slot stays unknown (or
// lowered), never the later head.
func TestDeadlinesSweepRacesApply(t *testing.T) {
	db := openMem(t)
	dl := NewDeadlines()
	ks := keysIn("race", 300, 301, 2)
	s := slot.Of([]byte(ks[0]))
	applyDL(t, db, nil, dl, 1000, "SET", ks[0], "v", "PX", "9000") // 10000
	t.Cleanup(func() { dueHook = nil })
	dueHook = func() {
		dueHook = nil
		applyDL(t, db, nil, dl, 1000, "SET", ks[1], "v", "PX", "4000") // 5000
	}
	if keys, visited, err := dl.Due(db, s, s+1, 3000, 10); err != nil || len(keys) != 0 || visited != 1 {
		t.Fatalf("sweep: %q, %d, %v", keys, visited, err)
	}
	if m := dl.Min(s); m != 0 && m > 5000 {
		t.Fatalf("slot min %d after a racing write of deadline 5000", m)
	}
	keys, _, err := dl.Due(db, s, s+1, 5000, 10)
	if err != nil || len(keys) != 1 || string(keys[0]) != ks[1] {
		t.Fatalf("due at 5000: %q %v; want %s", keys, err, ks[1])
	}
	if m := dl.Min(s); m != 5000 {
		t.Fatalf("slot min %d, want 5000", m)
	}
}

// hiddenSlots (FLUSHALL's and TOMBGC's walk) does not count a slot whose
// only hidden keys are expiry index entries, even without a user key
// after them, and still finds the next slot's tombstone.
func TestHiddenSlotsSkipIndex(t *testing.T) {
	db := openMem(t)
	b := db.NewBatch()
	for _, k := range [][]byte{
		append(appendSlotHidden(nil, 5, slotTTL), 0, 0, 0, 0, 0, 0, 0, 9, 'x'),
		append(appendSlotHidden(nil, 6, slotTTL), 0, 0, 0, 0, 0, 0, 0, 9, 'y'),
		append(appendSlotHidden(nil, 7, slotTTL), 0, 0, 0, 0, 0, 0, 0, 9, 'z'),
		append(appendSlotHidden(nil, 7, slotWait), 1),
		append(appendSlotHidden(nil, 9, slotTomb), 1),
		append(appendSlotHidden(nil, 9, slotTTL), 1),
	} {
		if err := b.Set(k, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if got, err := hiddenSlots(db, 0, slot.Count); err != nil || !slices.Equal(got, []uint16{7, 9}) {
		t.Fatalf("hiddenSlots %v %v, want [7 9]", got, err)
	}
}

// BenchmarkDeadlinesDue: a sweep of the whole slot space over 20,000 keys
// with a TTL spread over every slot, none due: "first" from unknown (one
// seek per slot, as after a start), "known" afterwards (no seek at all).
func BenchmarkDeadlinesDue(b *testing.B) {
	db := openMem(b)
	bt := db.NewBatch()
	for i := 0; i < 20_000; i++ {
		if err := bt.Set(appendTTLKey(nil, 1_000_000+int64(i), []byte("k"+strconv.Itoa(i))), nil, nil); err != nil {
			b.Fatal(err)
		}
	}
	if err := bt.Commit(nil); err != nil {
		b.Fatal(err)
	}
	b.Run("first", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, v, err := NewDeadlines().Due(db, 0, slot.Count, 1000, 256); err != nil || v != slot.Count {
				b.Fatal(v, err)
			}
		}
	})
	b.Run("known", func(b *testing.B) {
		dl := NewDeadlines()
		dl.Due(db, 0, slot.Count, 1000, 256)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, v, err := dl.Due(db, 0, slot.Count, 1000, 256); err != nil || v != 0 {
				b.Fatal(v, err)
			}
		}
	})
}

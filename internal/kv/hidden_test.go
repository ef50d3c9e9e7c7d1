package kv

import (
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/slot"
)

// scanAll runs SCAN to the end with count and returns the keys it gave.
func scanAll(t *testing.T, db *pebble.DB, count int) []string {
	t.Helper()
	var out []string
	cur := "0"
	for {
		r := Read(db, toArgs("SCAN", cur, "COUNT", strconv.Itoa(count)), 1_000_000)
		if r.IsError() || len(r.Elems) != 2 {
			t.Fatalf("SCAN: %s", show(r))
		}
		for _, e := range r.Elems[1].Elems {
			out = append(out, string(e.Str))
		}
		if cur = string(r.Elems[0].Str); cur == "0" {
			return out
		}
	}
}

// keyView is what the iterators over user keys report.
func keyView(t *testing.T, db *pebble.DB, slots []uint16) string {
	t.Helper()
	keys := Read(db, toArgs("KEYS", "*"), 1_000_000)
	var ks []string
	for _, e := range keys.Elems {
		ks = append(ks, string(e.Str))
	}
	slices.Sort(ks)
	sc := scanAll(t, db, 3)
	slices.Sort(sc)
	out := fmt.Sprintf("keys %q\nscan %q\ndbsize %s\n", ks, sc, show(Read(db, toArgs("DBSIZE"), 1_000_000)))
	for _, s := range slots {
		got, n, err := KeysInSlot(db, s, -1, 1_000_000)
		if err != nil {
			t.Fatal(err)
		}
		out += fmt.Sprintf("slot %d: %d %q\n", s, n, got)
	}
	for i := 0; i < 20; i++ {
		if r := Read(db, toArgs("RANDOMKEY"), 1_000_000); !slices.Contains(ks, string(r.Str)) {
			t.Fatalf("RANDOMKEY gave %s, not a key", show(r))
		}
	}
	return out
}

// The per-slot hidden keys (WATCH tombstones and registrations, wait
// queues: 0x11 <slot> 0x00 0x00 …) are not keys: KEYS, SCAN, DBSIZE,
// RANDOMKEY and KeysInSlot (CLUSTER GETKEYSINSLOT/COUNTKEYSINSLOT) report
// the same with and without them, including the empty key, the first
// user key of its slot, right above the slot's hidden keys.
func TestIteratorsSkipSlotHidden(t *testing.T) {
	zero := keysIn("z", 0, 1, 2) // slot 0, the empty key's
	users := append([]string{"", "a", "b\x00c", zero[0]}, keysIn("k", 0, slot.Count, 40)...)
	build := func(hidden bool) *pebble.DB {
		l := newLockLog(t)
		for _, k := range users {
			l.want("OK", "SET", k, "v")
		}
		if hidden {
			// Hidden keys in the slots of the keys above, and in slots of
			// their own: tombstones, registrations, waits.
			for i, k := range append([]string{zero[1], "gone"}, keysIn("h", 0, slot.Count, 30)...) {
				l.want("OK", "SET", k, "v")
				l.want("1", "DEL", k)
				l.want("1", "KVORUM.WATCHREG", k)
				if r := l.do("KVORUM.BLOCK", string(WaiterID(1, 1, uint64(i))), "BLPOP", k, "0"); r.IsError() {
					t.Fatal(show(r))
				}
			}
			for i, k := range users {
				if r := l.do("KVORUM.BLOCK", string(WaiterID(2, 1, uint64(i))), "BZPOPMIN", k+"-z", "0"); r.IsError() {
					t.Fatal(show(r))
				}
			}
		}
		return l.db
	}
	plain, withHidden := build(false), build(true)
	slots, err := hiddenSlots(withHidden, 0, slot.Count)
	if err != nil {
		t.Fatal(err)
	}
	if len(slots) < 30 || slots[0] != 0 {
		t.Fatalf("hidden keys in slots %v", slots)
	}
	if got, want := keyView(t, withHidden, slots), keyView(t, plain, slots); got != want {
		t.Fatalf("with hidden keys:\n%s\nwithout:\n%s", got, want)
	}
	if n := show(Read(withHidden, toArgs("DBSIZE"), 1_000_000)); n != strconv.Itoa(len(users)) {
		t.Fatalf("DBSIZE %s, want %d", n, len(users))
	}
}

// BenchmarkHiddenSlots: the walk FLUSHALL and KVORUM.TOMBGC make to find
// the slots with hidden keys, over a store with keys in (nearly) every
// slot and tombstones in 1,000 of them: one seek per non-empty slot.
func BenchmarkHiddenSlots(b *testing.B) {
	db := openMem(b)
	bt := db.NewBatch()
	rec := record{typ: typeString, value: []byte("v")}
	for i := 0; i < 50_000; i++ {
		k := []byte("key:" + strconv.Itoa(i))
		if err := bt.Set(metaKey(k), rec.encode(), nil); err != nil {
			b.Fatal(err)
		}
		if i < 1000 {
			if err := bt.Set(tombKey(1, k), make([]byte, 8), nil); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := bt.Commit(nil); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if s, err := hiddenSlots(db, 0, slot.Count); err != nil || len(s) < 900 {
			b.Fatal(len(s), err)
		}
	}
}

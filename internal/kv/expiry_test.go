package kv

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/slot"
	"github.com/kvorum/kvorum/internal/storage"
)

// expiryIndexProblems compares the expiry index with the deadlines in the
// metadata records: every record with a deadline has exactly one index key
// (its deadline, its key) and the index holds nothing else.
func expiryIndexProblems(db pebble.Reader) ([]string, error) {
	want := map[string]bool{}
	err := iterKeys(db, nil, math.MinInt64, func(user, _ []byte, rec *record) bool {
		if rec.expire > 0 {
			want[fmt.Sprintf("%d %q", rec.expire, user)] = true
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	var problems []string
	err = walkTTL(db, 0, slot.Count, func(deadline int64, k []byte) bool {
		e := fmt.Sprintf("%d %q", deadline, k)
		if !want[e] {
			problems = append(problems, "index key without its record: "+e)
		}
		delete(want, e)
		return true
	})
	if err != nil {
		return nil, err
	}
	// Every entry is in its key's slot (walkTTL reads the slots in order
	// and cannot tell), and none is left in format 1's global index.
	err = walkRange(db, []byte{slotPrefix}, []byte{slotPrefix + 1}, nil, false, func(it *pebble.Iterator) (bool, error) {
		k := it.Key()
		if isSlotHidden(k) && len(k) >= ttlHeadLen && k[slotHiddenLen-1] == slotTTL && slot.Of(k[ttlHeadLen:]) != binary.BigEndian.Uint16(k[1:]) {
			problems = append(problems, fmt.Sprintf("index key in another slot: %x", k))
		}
		return true, nil
	})
	if has, _ := spanHasKeys(db, []byte{0x10, 0, 0, 'e'}, []byte{0x10, 0, 0, 'f'}); has {
		problems = append(problems, "entries in the global index")
	}
	for e := range want {
		problems = append(problems, "record missing from the index: "+e)
	}
	slices.Sort(problems)
	return problems, err
}

func checkExpiryIndex(t testing.TB, db pebble.Reader) {
	t.Helper()
	problems, err := expiryIndexProblems(db)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Fatalf("expiry index disagrees with the records:\n%v", problems)
	}
}

func applyInternal(t testing.TB, db *pebble.DB, now int64, s ...string) Reply {
	t.Helper()
	b := db.NewIndexedBatch()
	defer b.Close()
	r := Apply(b, toArgs(s...), Env{Now: now})
	if err := b.Commit(pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestExpiryIndexFollowsEveryWrite: every command that sets, changes or
// drops a deadline (or the key that has one) moves the key's index entry
// with it.
func TestExpiryIndexFollowsEveryWrite(t *testing.T) {
	db := openMem(t)
	steps := [][]string{
		{"SET", "a", "1", "PX", "500"},
		{"SET", "b", "1", "PX", "600"},
		{"PEXPIRE", "b", "900"}, // moved
		{"SET", "c", "1", "PX", "700"},
		{"SET", "c", "2"}, // overwrite drops the deadline
		{"SET", "d", "1", "PX", "100"},
		{"PERSIST", "d"},
		{"HSET", "h", "f", "v"},
		{"PEXPIRE", "h", "800"},
		{"HSET", "h", "g", "v"}, // a collection keeps its deadline
		{"RENAME", "h", "h2"},   // and takes it along
		{"SET", "e", "1", "PX", "50"},
		{"COPY", "a", "a2"},
		{"DEL", "a"},
		{"GETEX", "b", "PX", "1000"},
		{"SET", "\x00z\x00", "1", "PX", "300"}, // a key with NUL bytes
		{"SET", "f", "1", "KEEPTTL"},
		{"RPUSH", "l", "x"},
		{"PEXPIREAT", "l", "5000"},
		{"LPOP", "l"}, // emptied: deleted with its deadline
	}
	for i, s := range steps {
		if r := run(t, db, 1000, s...); r.Kind == reply.KindError {
			t.Fatalf("%v: %s", s, r.Str)
		}
		if problems, err := expiryIndexProblems(db); err != nil || len(problems) > 0 {
			t.Fatalf("after step %d %q: %v %v", i, s, problems, err)
		}
	}
	// e expired at 1050; a write replacing the expired record drops its entry.
	run(t, db, 2000, "SET", "e", "again")
	checkExpiryIndex(t, db)

	keys, err := ExpiredKeys(db, 1999, 100)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, k := range keys {
		got = append(got, string(k))
	}
	// Earliest deadline first: \x00z\x00 (1300), a2 (1500), h2 (1800); b
	// (2000) not yet, l gone.
	if want := []string{"\x00z\x00", "a2", "h2"}; !slices.Equal(got, want) {
		t.Fatalf("expired at 1999: %q, want %q", got, want)
	}
	if keys, _ := ExpiredKeys(db, 1999, 2); len(keys) != 2 {
		t.Fatalf("limit 2: %q", keys)
	}
	if r := applyInternal(t, db, 2000, append([]string{"KVORUM.DELEXPIRED"}, got...)...); r.Int != 3 {
		t.Fatalf("DELEXPIRED deleted %d, want 3", r.Int)
	}
	checkExpiryIndex(t, db)
	if keys, _ := ExpiredKeys(db, 1999, 100); len(keys) != 0 {
		t.Fatalf("after the sweep: %q", keys)
	}

	run(t, db, 2000, "FLUSHALL")
	checkExpiryIndex(t, db)
	if keys, _ := ExpiredKeys(db, math.MaxInt64-1, 100); len(keys) != 0 {
		t.Fatalf("after FLUSHALL: %q", keys)
	}
}

// TestExpiryIndexBuiltForAnOlderStore: a format 1 store written before
// the index existed has records with deadlines and no index (nor build
// state); the migration to format 2 builds the whole per-slot index from
// the records, and KVORUM.TTLINDEX, which built it in format 1, then
// finds nothing to do and writes nothing.
func TestExpiryIndexBuiltForAnOlderStore(t *testing.T) {
	src := openMem(t)
	const n = 4200
	for i := 0; i < n; i += 100 {
		args := []string{"MSET"}
		for j := i; j < i+100; j++ {
			args = append(args, fmt.Sprintf("k%05d", j), "v")
		}
		run(t, src, 1000, args...)
		for j := i; j < i+100; j += 3 {
			run(t, src, 1000, "PEXPIRE", fmt.Sprintf("k%05d", j), fmt.Sprint(1000+j))
		}
	}
	// Make it an older store: format 1 keys, without the index.
	var pairs [][2][]byte
	if err := storage.EmitSpan(src, []byte{0x10}, []byte{0x12}, func(k, v []byte) error {
		if !(isSlotHidden(k) && k[slotHiddenLen-1] == slotTTL) {
			pairs = append(pairs, [2][]byte{bytes.Clone(k), bytes.Clone(v)})
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	db := openMem(t)
	writePairs(t, db, toV1(pairs))
	if has, err := spanHasKeys(db, []byte{0x10, 0, 0, 'e'}, []byte{0x10, 0, 0, 'f'}); err != nil || has {
		t.Fatalf("the older store has an index: %v %v", has, err)
	}
	if err := MigrateV2(db, nil); err != nil {
		t.Fatal(err)
	}
	checkExpiryIndex(t, db)
	before := logicalDump(t, db)
	if r := applyInternal(t, db, 1000, "KVORUM.TTLINDEX"); r.Kind == reply.KindError || r.Int != 0 {
		t.Fatalf("KVORUM.TTLINDEX = %s, want 0 (nothing to build)", show(r))
	}
	sameDump(t, "after KVORUM.TTLINDEX", logicalDump(t, db), before)
	run(t, db, 1000, "PEXPIRE", "k00001", "777")
	run(t, db, 1000, "PERSIST", fmt.Sprintf("k%05d", n-1-n%3))
	checkExpiryIndex(t, db)
	keys, err := ExpiredKeys(db, 1999, 1000)
	if err != nil || len(keys) != 1 || string(keys[0]) != "k00001" {
		t.Fatalf("expired at 1999: %q, %v; want k00001 (1777), the others expire from 2000", keys, err)
	}
	want := 0 // the keys given a deadline, k00001 added, one persisted
	for j := 0; j < n; j++ {
		if j%100%3 == 0 || j == 1 {
			want++
		}
	}
	want--
	if keys, _ := ExpiredKeys(db, 2000+n, 10000); len(keys) != want {
		t.Fatalf("expired at the end: %d keys, want %d", len(keys), want)
	}
}

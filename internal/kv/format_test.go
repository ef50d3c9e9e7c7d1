package kv

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvorum/kvorum/internal/slot"
	"github.com/kvorum/kvorum/internal/storage"
)

// dumpNow is the clock of logical dumps: before every deadline set below.
const dumpNow = 1_000_000 + 10_000

// buildState fills a store through commands with every kind of user data
// (strings, every collection type, big and small encodings, TTLs, keys
// with 0x00 bytes and the empty key) and hidden state (the version
// counter, a lease, a lock, a script, the expiry index), and returns its
// pairs (format 2).
func buildState(t *testing.T) [][2][]byte {
	t.Helper()
	l := newLockLog(t)
	l.noLimits = true
	l.want("OK", "FLUSHALL") // the range's FLUSHALL index
	l.want("OK", "SET", "str", "hello")
	l.want("OK", "SET", "", "empty key")
	l.want("OK", "SET", "a\x00b", "zero byte")
	l.want("OK", "SET", "\x00", "zero")
	l.want("OK", "SET", "ttl", "v", "PX", "100000000")
	l.want("OK", "SET", "{tag}1", "x")
	l.want("OK", "SET", "{tag}2", "y")
	l.want("1", "PFADD", "hll", "a")
	l.want("0", "SETBIT", "bits", "100", "1")
	l.want("3", "RPUSH", "list", "a", "b", "c")
	l.want("2", "SADD", "set", "x", "y")
	l.want("3", "SADD", "intset", "3", "1", "2")
	l.want("2", "HSET", "hash", "f", "v", "g", "w")
	l.want("2", "ZADD", "zset", "1.5", "a", "-2", "b")
	l.want("1", "PEXPIRE", "zset", "200000000")
	big := []string{"HSET", "bighash"}
	bigSet := []string{"SADD", "bigset"}
	bigZ := []string{"ZADD", "bigzset"}
	bigL := []string{"RPUSH", "biglist"}
	for i := 0; i < 300; i++ {
		big = append(big, "f"+strconv.Itoa(i), strconv.Itoa(i))
		bigSet = append(bigSet, "m"+strconv.Itoa(i))
		bigZ = append(bigZ, strconv.Itoa(i%7), "m"+strconv.Itoa(i))
		bigL = append(bigL, strconv.Itoa(i))
	}
	l.want("300", big...)
	l.want("300", bigSet...)
	l.want("300", bigZ...)
	l.want("300", bigL...)
	for i := 0; i < 200; i++ {
		k := fmt.Sprintf("key:%d", i)
		if i%3 == 0 {
			l.want("OK", "SET", k, strings.Repeat("v", i), "PX", strconv.Itoa(50_000_000+i))
		} else {
			l.want("OK", "SET", k, strings.Repeat("v", i))
		}
	}
	if r := l.do("XADD", "stream", "1-1", "f", "v"); r.IsError() {
		t.Fatal(show(r))
	}
	l.want("OK", "XGROUP", "CREATE", "stream", "g", "0")
	lease := l.id("LEASE", "GRANT", "80000000")
	l.want("OK", "SET", "leased", "v", "LEASE", lease)
	l.id("LOCK", "ACQUIRE", "mylock", lease)
	if r := l.do("SCRIPT", "LOAD", "return 1"); r.IsError() {
		t.Fatal(show(r))
	}
	// The hidden keys that moved in format 2: a WATCH tombstone, a
	// registration, the tombstone floor, a blocked pop's queue entry.
	l.want("OK", "SET", "gone", "v")
	l.want("1", "DEL", "gone")
	l.want("1", "KVORUM.WATCHREG", "absent")
	l.want("0", "KVORUM.TOMBGC")
	if r := l.do("KVORUM.BLOCK", string(WaiterID(1, 2, 3)), "BLPOP", "emptyq", "0"); r.IsError() {
		t.Fatal(show(r))
	}
	var pairs [][2][]byte
	if err := storage.EmitSpan(l.db, []byte{0}, []byte{0xFF}, func(k, v []byte) error {
		pairs = append(pairs, [2][]byte{bytes.Clone(k), bytes.Clone(v)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return pairs
}

// toV1 is a format 1 encoder of its own (not V1Key): 0x10, then the
// storage key without its 0x11 <slot:2> head.
func toV1(pairs [][2][]byte) [][2][]byte {
	var out [][2][]byte
	for _, p := range pairs {
		k := p[0]
		if k[0] == 0x11 { // user keys, and per-slot hidden keys (0x11 <slot> 0x00 0x00 <tag>)
			k = append([]byte{0x10}, k[3:]...)
		}
		if _, name, ok := storage.ParseReplicatedRangeKey(k); ok { // range 1's counters
			k = append([]byte{0x10, 0x00, 0x00}, name...)
		}
		out = append(out, [2][]byte{k, p[1]})
	}
	slices.SortFunc(out, func(a, b [2][]byte) int { return bytes.Compare(a[0], b[0]) })
	return out
}

// v1Keys decodes the user keys of a format 1 store with a decoder of its
// own: user key, type and deadline of each metadata record.
func v1Keys(t *testing.T, r pebble.Reader) []string {
	t.Helper()
	var out []string
	if err := storage.EmitSpan(r, []byte{0x10, 0x00, 0x01}, []byte{0x11}, func(k, v []byte) error {
		var user []byte
		i := 1
		for ; i+1 < len(k); i++ {
			if k[i] == 0 && k[i+1] == 0xFF {
				user = append(user, 0)
				i++
			} else if k[i] == 0 && k[i+1] == 1 {
				break
			} else {
				user = append(user, k[i])
			}
		}
		if i+2 < len(k) && k[i+2] == 0 && i+3 == len(k) {
			out = append(out, fmt.Sprintf("%q type=%d expire=%d", user, v[0], int64(binary.BigEndian.Uint64(v[2:]))))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// logicalDump reads a store through commands: every key with its type,
// deadline and DUMP payload, and the hidden keys as they are.
func logicalDump(t *testing.T, db pebble.Reader) []string {
	t.Helper()
	do := func(s ...string) Reply { return Read(db, toArgs(s...), dumpNow) }
	var out []string
	for _, k := range do("KEYS", "*").Elems {
		key := string(k.Str)
		out = append(out, fmt.Sprintf("%q %s expire=%s dump=%x", key, show(do("TYPE", key)), show(do("PEXPIRETIME", key)), do("DUMP", key).Str))
	}
	slices.Sort(out)
	if err := storage.EmitSpan(db, []byte{0x10}, []byte{0x10, 0x00, 0x01}, func(k, v []byte) error {
		out = append(out, fmt.Sprintf("hidden %x=%x", k, v))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	out = append(out, "dbsize "+show(do("DBSIZE")))
	return out
}

func openOn(t *testing.T, fs vfs.FS) *pebble.DB {
	t.Helper()
	db, err := pebble.Open("/db", &pebble.Options{FS: fs, Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func writePairs(t *testing.T, db *pebble.DB, pairs [][2][]byte) {
	t.Helper()
	b := db.NewBatch()
	for _, p := range pairs {
		if err := b.Set(p[0], p[1], nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
}

func storeFormat(t *testing.T, r pebble.Reader) uint64 {
	t.Helper()
	f, err := storage.LoadStoreFormat(r)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func sameDump(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		for i := range max(len(got), len(want)) {
			var g, w string
			if i < len(got) {
				g = got[i]
			}
			if i < len(want) {
				w = want[i]
			}
			if g != w {
				t.Fatalf("%s: line %d: got %q, want %q (%d/%d lines)", what, i, g, w, len(got), len(want))
			}
		}
	}
}

func TestV2KeyRoundTrip(t *testing.T) {
	for _, k := range []string{"", "a", "\x00", "a\x00b", "{tag}x", "\xff\xff"} {
		mk := metaKey([]byte(k))
		v1 := V1Key(mk)
		if v1[0] != 0x10 || !bytes.Equal(v1[1:], mk[3:]) {
			t.Fatalf("V1Key(%x) = %x", mk, v1)
		}
		if got := V2Key(v1); !bytes.Equal(got, mk) {
			t.Fatalf("V2Key(%x) = %x, want %x", v1, got, mk)
		}
		ek := appendElemPrefix(nil, []byte(k), 7)
		if got := V2Key(V1Key(ek)); !bytes.Equal(got, ek) {
			t.Fatalf("element key %x: round trip %x", ek, got)
		}
	}
	for _, k := range [][]byte{scriptKey("x"), {0x01, 'i', 'n'}, {0x10}, {0x12}} {
		if !bytes.Equal(V2Key(k), k) || !bytes.Equal(V1Key(k), k) {
			t.Fatalf("%x is not a user key but was converted", k)
		}
	}
	if V2Key([]byte{0x10, 'a', 'b'}) != nil {
		t.Fatal("an undecodable format 1 key converted")
	}
	// The expiry index: format 1's global entry 0x10 0x00 0x00 'e'
	// <deadline> <key> and format 2's per-slot one map both ways; the
	// build state 'E' is dropped.
	for _, k := range []string{"k", "", "a\x00b", "{tag}x"} {
		e2 := appendTTLKey(nil, 123456789, []byte(k))
		e1 := append(append([]byte{0x10, 0x00, 0x00, 'e'}, 0, 0, 0, 0, 0x07, 0x5b, 0xcd, 0x15), k...)
		if got := V1Key(e2); !bytes.Equal(got, e1) {
			t.Fatalf("V1Key(%x) = %x, want %x", e2, got, e1)
		}
		if got := V2Key(e1); !bytes.Equal(got, e2) || binary.BigEndian.Uint16(got[1:]) != slot.Of([]byte(k)) {
			t.Fatalf("V2Key(%x) = %x, want %x", e1, got, e2)
		}
	}
	if V2Key([]byte{0x10, 0x00, 0x00, 'E'}) != nil || V2Key([]byte{0x10, 0x00, 0x00, 'e', 1}) != nil {
		t.Fatal("the build state kept, or a short index key converted")
	}
}

// TestMigrateV2KeepsState: a format 1 store (built with an encoder of the
// test's own) migrated by MigrateV2 reads the same through commands (every
// key's type, deadline and DUMP payload; the hidden keys byte for byte) as
// the store the same commands built in format 2, and holds exactly its
// pairs. With a crash injected at every step of the migration (keeping
// only what was synced, or a random part of what was not), the store
// reopened is either the untouched format 1 store (no marker, the same
// format 1 pairs), which the next MigrateV2 converts, or the format 2 one.
func TestMigrateV2KeepsState(t *testing.T) {
	v2pairs := buildState(t)
	checkHiddenHomes(t, v2pairs)
	// A format 1 store may still hold the hash buckets of deletions that
	// came before tombstones: format 2 drops them.
	v1pairs := toV1(append(slices.Clone(v2pairs), [2][]byte{{0x10, 0x00, 0x00, 't', 1, 2}, {9}}))
	if slices.EqualFunc(v1pairs, v2pairs, func(a, b [2][]byte) bool { return bytes.Equal(a[0], b[0]) }) {
		t.Fatal("the test's format 1 store is not format 1")
	}
	ref := openOn(t, vfs.NewMem())
	defer ref.Close()
	writePairs(t, ref, v2pairs)
	want := logicalDump(t, ref)
	if len(want) < 20 {
		t.Fatalf("dump too small: %q", want)
	}
	wantV1Keys := v1Keys(t, func() *pebble.DB {
		db := openOn(t, vfs.NewMem())
		t.Cleanup(func() { db.Close() })
		writePairs(t, db, v1pairs)
		return db
	}())
	if len(wantV1Keys) < 200 {
		t.Fatalf("format 1 decoder found %d keys", len(wantV1Keys))
	}

	batch, every := migrateBatchBytes, migrateProgressEvery
	t.Cleanup(func() { migrateBatchBytes, migrateProgressEvery, migrateStep = batch, every, nil })
	migrateBatchBytes, migrateProgressEvery = 2048, 0

	checkV2 := func(what string, db *pebble.DB) {
		t.Helper()
		if f := storeFormat(t, db); f != 2 {
			t.Fatalf("%s: format %d", what, f)
		}
		sameDump(t, what, logicalDump(t, db), want)
		var got [][2][]byte
		rs, re := storage.ReplicatedRangeSpan(1)
		for _, span := range [][2][]byte{{rs, re}, {{0x10}, {0x12}}} {
			if err := storage.EmitSpan(db, span[0], span[1], func(k, v []byte) error {
				got = append(got, [2][]byte{bytes.Clone(k), bytes.Clone(v)})
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		checkHiddenHomes(t, got)
		// The keys with a TTL: one index entry each, in its slot, and
		// the same due keys as the store converted from.
		checkExpiryIndex(t, db)
		dueGot, err := ExpiredKeys(db, 1<<62, 1000)
		if err != nil {
			t.Fatal(err)
		}
		dueWant, _ := ExpiredKeys(ref, 1<<62, 1000)
		if len(dueWant) < 69 || !slices.EqualFunc(dueGot, dueWant, bytes.Equal) {
			t.Fatalf("%s: due keys %q, want %q", what, dueGot, dueWant)
		}
		var wantPairs [][2][]byte
		for _, p := range v2pairs {
			if _, _, ok := storage.ParseReplicatedRangeKey(p[0]); ok || p[0][0] >= 0x10 {
				wantPairs = append(wantPairs, p)
			}
		}
		if !slices.EqualFunc(got, wantPairs, func(a, b [2][]byte) bool { return bytes.Equal(a[0], b[0]) && bytes.Equal(a[1], b[1]) }) {
			t.Fatalf("%s: %d pairs, want the %d of the format 2 store", what, len(got), len(wantPairs))
		}
	}

	errCrash := errors.New("injected crash")
	rng := rand.New(rand.NewPCG(1, 2))
	sawV1, sawV2 := false, false
	for target := 1; ; target++ {
		for _, unsynced := range []int{0, 50, 100} {
			what := fmt.Sprintf("crash at step %d (%d%% of unsynced writes kept)", target, unsynced)
			fs := vfs.NewCrashableMem()
			db := openOn(t, fs)
			writePairs(t, db, v1pairs)
			var crashed *vfs.MemFS
			n := 0
			migrateStep = func(step string) error {
				if n++; n == target {
					cfg := vfs.CrashCloneCfg{UnsyncedDataPercent: unsynced}
					if unsynced > 0 {
						cfg.RNG = rand.New(rand.NewPCG(rng.Uint64(), 0))
					}
					crashed = fs.CrashClone(cfg)
					return errCrash
				}
				return nil
			}
			var logged bytes.Buffer
			err := MigrateV2(db, slog.New(slog.NewTextHandler(&logged, nil)))
			migrateStep = nil
			if crashed == nil {
				// Fewer steps than target: the migration ran to the end.
				if err != nil {
					t.Fatal(err)
				}
				if n := strings.Count(logged.String(), "converting the store to storage format 2"); n < 3 || !strings.Contains(logged.String(), "converted the store") {
					t.Fatalf("progress not logged: %s", logged.String())
				}
				checkV2("no crash", db)
				db.Close()
				if !sawV1 || !sawV2 {
					t.Fatalf("crashes left format 1 %v, format 2 %v: the steps were not all tried", sawV1, sawV2)
				}
				return
			}
			if !errors.Is(err, errCrash) {
				t.Fatalf("%s: %v", what, err)
			}
			_ = db.Close()
			db = openOn(t, crashed)
			switch f := storeFormat(t, db); f {
			case 1:
				sawV1 = true
				var got [][2][]byte
				if err := storage.EmitSpan(db, []byte{0x10}, []byte{0x11}, func(k, v []byte) error {
					got = append(got, [2][]byte{bytes.Clone(k), bytes.Clone(v)})
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				if !slices.EqualFunc(got, v1pairs, func(a, b [2][]byte) bool { return bytes.Equal(a[0], b[0]) && bytes.Equal(a[1], b[1]) }) {
					t.Fatalf("%s: format 1 store changed: %d pairs, want %d", what, len(got), len(v1pairs))
				}
				sameDump(t, what+": format 1 keys", v1Keys(t, db), wantV1Keys)
				if err := MigrateV2(db, nil); err != nil {
					t.Fatalf("%s: migration after restart: %v", what, err)
				}
				checkV2(what+", migrated after restart", db)
			case 2:
				sawV2 = true
				checkV2(what, db)
			default:
				t.Fatalf("%s: format %d", what, f)
			}
			// Once more: a format 2 store stays as it is.
			if err := MigrateV2(db, nil); err != nil {
				t.Fatal(err)
			}
			checkV2(what+", opened again", db)
			db.Close()
		}
	}
}

// checkHiddenHomes checks that pairs (a format 2 store's) hold the hidden
// keys of format 2 where §2.3 of docs/ranges.md puts them: the version
// counter, FLUSHALL index and tombstone floor in range 1's replicated
// range-local span; the WATCH tombstone of "gone", the registration of
// "absent" and the wait on "emptyq" in their keys' slots; none of them,
// nor a legacy bucket, left at 0x10 0x00 0x00.
func checkHiddenHomes(t *testing.T, pairs [][2][]byte) {
	t.Helper()
	has := func(k []byte) bool {
		return slices.ContainsFunc(pairs, func(p [2][]byte) bool { return bytes.Equal(p[0], k) })
	}
	hasPrefix := func(k []byte) bool {
		return slices.ContainsFunc(pairs, func(p [2][]byte) bool { return bytes.HasPrefix(p[0], k) })
	}
	for _, name := range []byte{'v', 'f', 'D'} {
		if !has(storage.ReplicatedRangeKey(1, []byte{name})) {
			t.Errorf("no range-local %q", name)
		}
	}
	for _, c := range []struct {
		tag byte
		key string
	}{{'d', "gone"}, {'r', "absent"}, {'w', "emptyq"}, {'e', "ttl"}, {'e', "zset"}, {'e', "key:99"}} {
		p := appendSlotHidden(nil, slot.Of([]byte(c.key)), c.tag)
		if !hasPrefix(p) || !slices.ContainsFunc(pairs, func(q [2][]byte) bool {
			return bytes.HasPrefix(q[0], p) && bytes.Contains(q[0], []byte(c.key))
		}) {
			t.Errorf("no per-slot %q of %q", c.tag, c.key)
		}
	}
	for _, tag := range legacyHidden {
		if hasPrefix([]byte{0x10, 0x00, 0x00, tag}) {
			t.Errorf("hidden %q left at 0x10 0x00 0x00", tag)
		}
	}
}

// A new store gets the marker, and keys already in format 2 beside no
// format 1 keys (written by this release before the marker existed, such
// as a test that opens a store directly) are kept.
func TestMigrateV2NewStore(t *testing.T) {
	db := openMem(t)
	if f := storeFormat(t, db); f != 1 {
		t.Fatalf("format %d before", f)
	}
	run(t, db, 0, "SET", "k", "v")
	if err := MigrateV2(db, nil); err != nil {
		t.Fatal(err)
	}
	if f := storeFormat(t, db); f != 2 {
		t.Fatalf("format %d after", f)
	}
	if got := show(run(t, db, 0, "GET", "k")); got != "v" {
		t.Fatalf("GET k = %s", got)
	}
}

// A store whose TTL index was being built (KVORUM.TTLINDEX's cursor is a
// position in format 1's key order) has it written whole by the
// migration, per slot, and the build state dropped.
func TestMigrateV2CompletesTTLIndex(t *testing.T) {
	l := newLockLog(t)
	for i := 0; i < 50; i++ {
		l.want("OK", "SET", fmt.Sprintf("k%d", i), "v", "PX", strconv.Itoa(100_000+i))
	}
	var pairs [][2][]byte
	if err := storage.EmitSpan(l.db, []byte{0x10}, []byte{0x12}, func(k, v []byte) error {
		// Half an index: the entries of the first keys only.
		if isSlotHidden(k) && k[slotHiddenLen-1] == slotTTL && !bytes.HasSuffix(k, []byte("k1")) {
			return nil
		}
		pairs = append(pairs, [2][]byte{bytes.Clone(k), bytes.Clone(v)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	db := openMem(t)
	writePairs(t, db, toV1(pairs))
	// Format 1's global entries (0x10 0x00 0x00 'e' <deadline> <key>): k1's.
	if has, err := spanHasKeys(db, []byte{0x10, 0, 0, 'e'}, []byte{0x10, 0, 0, 'f'}); err != nil || !has {
		t.Fatalf("no format 1 entry of k1: %v %v", has, err)
	}
	writePairs(t, db, [][2][]byte{{[]byte{0x10, 0, 0, legacyTTLBuild}, []byte("ck25")}})
	if err := MigrateV2(db, nil); err != nil {
		t.Fatal(err)
	}
	checkExpiryIndex(t, db)
	if has, err := spanHasKeys(db, []byte{0x10, 0, 0, legacyTTLBuild}, []byte{0x10, 0, 0, legacyTTLBuild + 1}); err != nil || has {
		t.Fatalf("build state kept: %v %v", has, err)
	}
}

// snapStream builds a snapshot stream the way a node of the release before
// format 2 wrote it (KVSNAP1, format 1 keys in key order), with an encoder
// of the test's own.
func snapStream(t *testing.T, magic string, desc *storage.Descriptor, index, term uint64, pairs [][2][]byte) []byte {
	t.Helper()
	dj, err := json.Marshal(desc)
	if err != nil {
		t.Fatal(err)
	}
	b := []byte(magic)
	b = binary.AppendUvarint(b, uint64(len(dj)))
	b = append(b, dj...)
	b = binary.AppendUvarint(b, index)
	b = binary.AppendUvarint(b, term)
	for _, p := range pairs {
		b = binary.AppendUvarint(b, uint64(len(p[0])))
		b = append(b, p[0]...)
		b = binary.AppendUvarint(b, uint64(len(p[1])))
		b = append(b, p[1]...)
	}
	b = append(b, 0)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
}

// Snapshots and backups of a node of the release before format 2 restore
// to a format 2 store with the same logical content; a snapshot this
// release writes is KVSNAP1 with format 1 keys (what that release reads)
// and reads back to the same store.
func TestOldSnapshotsAndBackupsRestore(t *testing.T) {
	v2pairs := buildState(t)
	var user [][2][]byte
	for _, p := range v2pairs {
		if p[0][0] >= 0x10 {
			user = append(user, p)
		}
	}
	v1pairs := toV1(user)
	ref := openMem(t)
	writePairs(t, ref, user)
	want := logicalDump(t, ref)
	desc := &storage.Descriptor{RangeID: 1}

	restore := func(what string, read func(fn func(k, v []byte) error) error) {
		t.Helper()
		db := openMem(t)
		b := db.NewBatch()
		if err := read(func(k, v []byte) error { return b.Set(k, v, nil) }); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if err := b.Commit(pebble.Sync); err != nil {
			t.Fatal(err)
		}
		sameDump(t, what, logicalDump(t, db), want)
	}

	old := snapStream(t, "KVSNAP1\n", desc, 7, 2, v1pairs)
	restore("old snapshot", func(fn func(k, v []byte) error) error {
		_, meta, err := storage.ReadSnapshotStream(bytes.NewReader(old), fn)
		if err == nil && (meta.GetIndex() != 7 || meta.GetTerm() != 2) {
			err = fmt.Errorf("index %d term %d", meta.GetIndex(), meta.GetTerm())
		}
		return err
	})

	hj, _ := json.Marshal(storage.BackupHeader{Format: 1, ClusterID: 9, NodeID: 1, RangeID: 1, Index: 7, Term: 2, Version: "old"})
	backup := append(binary.AppendUvarint([]byte("KVBACKUP1\n"), uint64(len(hj))), hj...)
	backup = append(backup, old...)
	sum := sha256.Sum256(backup)
	backup = append(backup, sum[:]...)
	restore("old backup", func(fn func(k, v []byte) error) error {
		info, err := storage.ReadBackup(bytes.NewReader(backup), fn)
		if err == nil && info.Pairs != int64(len(v1pairs)) {
			err = fmt.Errorf("%d pairs, want %d", info.Pairs, len(v1pairs))
		}
		return err
	})

	// A KVSNAP2 stream (a later release's) is read as it is.
	restore("KVSNAP2 snapshot", func(fn func(k, v []byte) error) error {
		_, _, err := storage.ReadSnapshotStream(bytes.NewReader(snapStream(t, "KVSNAP2\n", desc, 7, 2, user)), fn)
		return err
	})

	// What this release sends: KVSNAP1, every user key in format 1.
	var buf bytes.Buffer
	start, end := UserSpan()
	if err := storage.WriteSnapshotStream(&buf, desc, nil, func(emit func(k, v []byte) error) error {
		return storage.EmitSpan(ref, start, end, emit)
	}); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(buf.Bytes(), []byte("KVSNAP1\n")) {
		t.Fatalf("stream starts %q", buf.Bytes()[:8])
	}
	for _, p := range v1pairs {
		if !bytes.Contains(buf.Bytes(), p[0]) {
			t.Fatalf("format 1 key %x not in the stream", p[0])
		}
	}
	for _, p := range user {
		if p[0][0] == 0x11 && bytes.Contains(buf.Bytes(), p[0]) {
			t.Fatalf("format 2 key %x in the stream", p[0])
		}
	}
	restore("this release's snapshot", func(fn func(k, v []byte) error) error {
		_, _, err := storage.ReadSnapshotStream(bytes.NewReader(buf.Bytes()), fn)
		return err
	})

	// A corrupt format 1 user key rejects the stream.
	bad := snapStream(t, "KVSNAP1\n", desc, 7, 2, [][2][]byte{{[]byte{0x10, 'x'}, []byte("v")}})
	if _, _, err := storage.ReadSnapshotStream(bytes.NewReader(bad), func(k, v []byte) error { return nil }); !errors.Is(err, storage.ErrCorrupt) {
		t.Fatalf("undecodable key: %v", err)
	}
	_ = slot.Count
}

// A snapshot this release writes carries the range's replicated
// range-local keys (storage.EmitRange) in format 1's form (0x10 0x00 0x00
// <name>) and its per-slot hidden keys without their slot; reading it
// back puts them in the receiving range's span and the slots again, so
// the store reads back byte for byte. A KVSNAP1 stream of range 2 puts the
// counters under range 2.
func TestSnapshotCarriesHiddenKeys(t *testing.T) {
	v2pairs := buildState(t)
	src := openMem(t)
	writePairs(t, src, v2pairs)
	span := func(*storage.Descriptor) ([]byte, []byte) { return UserSpan() }
	for _, id := range []storage.RangeID{1, 2} {
		var buf bytes.Buffer
		if err := storage.WriteSnapshotStream(&buf, &storage.Descriptor{RangeID: 1}, nil, func(emit func(k, v []byte) error) error {
			return storage.EmitRange(src, &storage.Descriptor{RangeID: 1}, span, emit)
		}); err != nil {
			t.Fatal(err)
		}
		data := buf.Bytes()
		if bytes.Contains(data, storage.ReplicatedRangeKey(1, []byte{'v'})) {
			t.Fatal("a range-local key in format 2's form in a KVSNAP1 stream")
		}
		if id == 2 { // the same stream, as range 2's
			var b2 bytes.Buffer
			_ = storage.WriteSnapshotStream(&b2, &storage.Descriptor{RangeID: 2}, nil, func(emit func(k, v []byte) error) error {
				return storage.EmitRange(src, &storage.Descriptor{RangeID: 1}, span, emit)
			})
			data = b2.Bytes()
		}
		var got [][2][]byte
		if _, _, err := storage.ReadSnapshotStream(bytes.NewReader(data), func(k, v []byte) error {
			got = append(got, [2][]byte{bytes.Clone(k), bytes.Clone(v)})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(got, func(a, b [2][]byte) int { return bytes.Compare(a[0], b[0]) })
		var want [][2][]byte
		for _, p := range v2pairs {
			if rid, name, ok := storage.ParseReplicatedRangeKey(p[0]); ok && rid == 1 {
				want = append(want, [2][]byte{storage.ReplicatedRangeKey(id, name), p[1]})
			} else if p[0][0] >= 0x10 {
				want = append(want, p)
			}
		}
		slices.SortFunc(want, func(a, b [2][]byte) int { return bytes.Compare(a[0], b[0]) })
		if !slices.EqualFunc(got, want, func(a, b [2][]byte) bool { return bytes.Equal(a[0], b[0]) && bytes.Equal(a[1], b[1]) }) {
			t.Fatalf("range %d: %d pairs read back, want %d", id, len(got), len(want))
		}
	}
}

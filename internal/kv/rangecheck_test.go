package kv

import (
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/slot"
	"github.com/kvorum/kvorum/internal/storage"
)

// Keys for the range check tests: slot.Of("bar") = 5061, in [0, 8192);
// slot.Of("foo") = 12182, outside it.
func TestRangeCheckKeysOfTestSlots(t *testing.T) {
	if slot.Of([]byte("{bar}a")) >= 8192 || slot.Of([]byte("{foo}a")) < 8192 {
		t.Fatal("test keys are not in the halves they are meant to be")
	}
}

// lowHalf is a range owning [0, 8192) at generation 7.
func lowHalf() *storage.Descriptor {
	return &storage.Descriptor{RangeID: 2, StartSlot: 0, EndSlot: 8192, Generation: 7}
}

const mismatch7 = "KVORUM RANGEKEYMISMATCH 7"

// rangeFixture is a store with keys in both halves, written with no range
// check: strings {bar}s1 {foo}s1, sets {bar}set {bar}set2 {foo}set, a list
// {bar}list of 3 2 1 and weights {bar}w_* and {foo}w_*.
func rangeFixture(t *testing.T) *pebble.DB {
	db := openMem(t)
	for _, c := range [][]string{
		{"MSET", "{bar}s1", "b1", "{foo}s1", "f1"},
		{"SADD", "{bar}set", "a", "b"}, {"SADD", "{bar}set2", "c"}, {"SADD", "{foo}set", "z"},
		{"RPUSH", "{bar}list", "3", "2", "1"},
		{"MSET", "{bar}w_1", "3", "{bar}w_2", "2", "{bar}w_3", "1", "{foo}w_1", "3", "{foo}w_2", "2", "{foo}w_3", "1"},
	} {
		if r := run(t, db, 1000, c...); r.Kind == reply.KindError {
			t.Fatalf("%v: %s", c, r.Str)
		}
	}
	return db
}

// applyIn applies args in a new batch with desc as the range's descriptor
// and returns the reply and the uncommitted batch (closed at the end of
// the test).
func applyIn(t *testing.T, db *pebble.DB, desc *storage.Descriptor, args ...string) (Reply, *pebble.Batch) {
	t.Helper()
	b := db.NewIndexedBatch()
	t.Cleanup(func() { b.Close() })
	return Apply(b, toArgs(args...), Env{Now: 1000, Index: 100, Desc: desc}), b
}

// readIn reads args from r with desc as the range's descriptor.
func readIn(r pebble.Reader, desc *storage.Descriptor, args ...string) Reply {
	rep, _ := ReadIn(r, ReadEnv{Desc: desc}, toArgs(args...), 1000)
	return rep
}

// outsideCmds each touch a key outside [0, 8192), in any position.
var outsideCmds = [][]string{
	{"SET", "{foo}x", "1"},
	{"MSET", "{bar}x", "1", "{foo}x", "2"}, // the 2nd key
	{"MSET", "{foo}x", "1", "{bar}x", "2"},
	{"DEL", "{bar}s1", "{foo}s1"},
	{"RENAME", "{bar}s1", "{foo}new"},
	{"RENAME", "{foo}s1", "{bar}new"},
	{"SUNIONSTORE", "{bar}dst", "{bar}set", "{foo}set"},
	{"SUNIONSTORE", "{foo}dst", "{bar}set", "{bar}set2"},
	{"ZUNIONSTORE", "{bar}z", "2", "{bar}set", "{foo}set"},
	{"EVAL", "redis.call('SET', KEYS[1], 'x') return redis.call('SET', KEYS[2], 'y')", "2", "{bar}x", "{foo}x"},
	{"EVAL", "return redis.call('SET', KEYS[1], 'x')", "1", "{foo}x"},
	{"SORT", "{bar}list", "STORE", "{foo}sorted"},
	{"GETDEL", "{foo}s1"},
	{"KVORUM.EXEC", "0", "3", "SET", "{bar}x", "1", "3", "SET", "{foo}x", "2"},              // a transaction's 2nd command
	{"KVORUM.EXEC", "1", "{foo}s1", "1", "3", "SET", "{bar}x", "1"},                         // a watched key
	{"KVORUM.AS", "default", "MSET", "{bar}x", "1", "{foo}x", "2"},                          // a user's command
	{"KVORUM.DELEXPIRED", "{bar}s1", "{foo}s1"},                                             // the expiry sweep
	{"LOCK", "FENCED", "l", "1", "SET", "{foo}x", "1"},                                      // a fenced write
	{"KVORUM.EXEC", "0", "4", "EVAL", "return 1", "1", "{foo}x", "3", "SET", "{bar}y", "1"}, // EVAL in MULTI
}

// TestRangeCheckRefusesOutsideKeys: a command with a key outside the
// range's slot interval replies -KVORUM RANGEKEYMISMATCH <generation> and
// writes nothing, whatever the key's position, in a transaction, a
// script's KEYS or a wrapper.
func TestRangeCheckRefusesOutsideKeys(t *testing.T) {
	db := rangeFixture(t)
	for _, c := range outsideCmds {
		r, b := applyIn(t, db, lowHalf(), c...)
		if r.Kind != reply.KindError || string(r.Str) != mismatch7 {
			t.Errorf("%q: reply %s, want %s", c, fmtScriptReply(r), mismatch7)
			continue
		}
		if gen, ok := IsRangeKeyMismatch(r); !ok || gen != 7 {
			t.Errorf("%q: IsRangeKeyMismatch = %d, %v", c, gen, ok)
		}
		if !b.Empty() {
			t.Errorf("%q: refused, but the batch holds %d writes", c, b.Count())
		}
	}
}

// TestRangeCheckAllowsInsideKeys: the same commands on keys of the range
// run and write.
func TestRangeCheckAllowsInsideKeys(t *testing.T) {
	db := rangeFixture(t)
	for _, c := range outsideCmds {
		in := make([]string, len(c))
		for i, a := range c {
			in[i] = strings.ReplaceAll(a, "{foo}", "{bar}")
		}
		r, b := applyIn(t, db, lowHalf(), in...)
		if r.Kind == reply.KindError {
			if in[0] == "LOCK" && strings.HasPrefix(string(r.Str), "CROSSRANGE") && lowHalf().RangeID != 1 {
				continue // the lock lives in range 1: LOCK FENCED of another range's key is refused (systemState)
			}
			t.Errorf("%q: %q", in, r.Str)
			continue
		}
		if in[0] != "KVORUM.EXEC" && in[0] != "KVORUM.DELEXPIRED" && b.Empty() { // (no key has expired)
			t.Errorf("%q: wrote nothing", in)
		}
	}
}

// TestRangeCheckFullIntervalUnchanged: with the full interval, or no
// descriptor, the commands that touch both halves run as they did before
// the range check, with the same replies and the same writes.
func TestRangeCheckFullIntervalUnchanged(t *testing.T) {
	full := (&storage.Descriptor{RangeID: 1, Generation: 3}).FullSlots()
	for _, c := range outsideCmds {
		db1, db2 := rangeFixture(t), rangeFixture(t)
		r1, b1 := applyIn(t, db1, nil, c...)
		r2, b2 := applyIn(t, db2, full, c...)
		if fmtScriptReply(r1) != fmtScriptReply(r2) {
			t.Errorf("%q: no descriptor %s, full interval %s", c, fmtScriptReply(r1), fmtScriptReply(r2))
		}
		if _, ok := IsRangeKeyMismatch(r2); ok {
			t.Errorf("%q: refused on the full interval", c)
		}
		if string(b1.Repr()) != string(b2.Repr()) {
			t.Errorf("%q: the writes differ", c)
		}
	}
	// Reads too.
	db := rangeFixture(t)
	if r := readIn(db, full, "MGET", "{bar}s1", "{foo}s1"); fmtScriptReply(r) != fmtScriptReply(readIn(db, nil, "MGET", "{bar}s1", "{foo}s1")) || len(r.Elems) != 2 || string(r.Elems[1].Str) != "f1" {
		t.Fatalf("MGET on the full interval: %s", fmtScriptReply(r))
	}
}

// TestRangeCheckReads: a read of a key outside the range (GET, MGET of an
// inside and an outside key, a read-only script, SORT_RO) is refused; a
// read of inside keys is served.
func TestRangeCheckReads(t *testing.T) {
	db := rangeFixture(t)
	for _, c := range [][]string{
		{"GET", "{foo}s1"},
		{"MGET", "{bar}s1", "{foo}s1"},
		{"EVAL_RO", "return redis.call('GET', KEYS[1])", "1", "{foo}s1"},
		{"SUNION", "{bar}set", "{foo}set"},
	} {
		if r := readIn(db, lowHalf(), c...); string(r.Str) != mismatch7 {
			t.Errorf("%q: %s, want %s", c, fmtScriptReply(r), mismatch7)
		}
	}
	if r := readIn(db, lowHalf(), "GET", "{bar}s1"); string(r.Str) != "b1" {
		t.Fatalf("GET of an inside key: %s", fmtScriptReply(r))
	}
	// A read inside a transaction, at apply.
	if r, _ := applyIn(t, db, lowHalf(), "KVORUM.EXEC", "0", "2", "GET", "{foo}s1"); string(r.Str) != mismatch7 {
		t.Fatalf("GET in EXEC: %s", fmtScriptReply(r))
	}
}

// TestRangeCheckScriptUndeclaredKey: a script that reaches a key outside
// the range without declaring it in KEYS gets Redis Cluster's error from
// that call, before the call writes anything; what its earlier calls wrote
// stays (as in Redis: no rollback); redis.pcall returns the error.
func TestRangeCheckScriptUndeclaredKey(t *testing.T) {
	db := rangeFixture(t)
	const nonLocal = "Script attempted to access a non local key in a cluster node"
	get := func(b *pebble.Batch, k string) string {
		r, _ := ReadIn(b, ReadEnv{}, toArgs("GET", k), 1000)
		return string(r.Str)
	}

	// The call's declared key is outside: refused before it runs.
	r, b := applyIn(t, db, lowHalf(), "EVAL", "redis.call('SET', KEYS[1], 'x') redis.call('SET', '{foo}u', 'y') return 1", "1", "{bar}x")
	if r.Kind != reply.KindError || !strings.Contains(string(r.Str), nonLocal) {
		t.Fatalf("reply %s", fmtScriptReply(r))
	}
	if get(b, "{bar}x") != "x" || get(b, "{foo}u") != "" {
		t.Fatalf("writes: {bar}x=%q {foo}u=%q; want the first call's write only", get(b, "{bar}x"), get(b, "{foo}u"))
	}

	// A multi-key call with one key outside writes none of its keys (the
	// batch holds EVAL's write of the script to the script cache).
	r, b = applyIn(t, db, lowHalf(), "EVAL", "return redis.call('MSET', '{bar}m', '1', '{foo}m', '2')", "0")
	if r.Kind != reply.KindError || !strings.Contains(string(r.Str), nonLocal) || get(b, "{bar}m") != "" || get(b, "{foo}m") != "" {
		t.Fatalf("MSET from a script: %s, {bar}m=%q", fmtScriptReply(r), get(b, "{bar}m"))
	}

	// redis.pcall gets the error as a value and the script goes on.
	r, b = applyIn(t, db, lowHalf(), "EVAL", "local e = redis.pcall('GET', '{foo}s1') redis.call('SET', KEYS[1], 'after') return e", "1", "{bar}x")
	if r.Kind != reply.KindError || !strings.Contains(string(r.Str), nonLocal) || get(b, "{bar}x") != "after" {
		t.Fatalf("pcall: %s, {bar}x=%q", fmtScriptReply(r), get(b, "{bar}x"))
	}

	// The backstop: a key a command reaches without declaring it (SORT's
	// BY pattern), from a script and at the top level.
	r, b = applyIn(t, db, lowHalf(), "EVAL", "return redis.call('SORT', KEYS[1], 'BY', '{foo}w_*', 'STORE', KEYS[2])", "2", "{bar}list", "{bar}out")
	if r.Kind != reply.KindError || !strings.Contains(string(r.Str), nonLocal) || readIn(b, nil, "EXISTS", "{bar}out").Int != 0 {
		t.Fatalf("SORT BY from a script: %s", fmtScriptReply(r))
	}
	r, b = applyIn(t, db, lowHalf(), "SORT", "{bar}list", "BY", "{foo}w_*", "STORE", "{bar}out")
	if string(r.Str) != mismatch7 || !b.Empty() {
		t.Fatalf("SORT BY: %s, %d writes", fmtScriptReply(r), b.Count())
	}
	if r := readIn(db, lowHalf(), "SORT_RO", "{bar}list", "BY", "{foo}w_*"); string(r.Str) != mismatch7 {
		t.Fatalf("SORT_RO BY: %s", fmtScriptReply(r))
	}
	// Inside the range, the same SORT runs.
	r, _ = applyIn(t, db, lowHalf(), "SORT", "{bar}list", "BY", "{bar}w_*", "STORE", "{bar}out")
	if r.Kind != reply.KindInt || r.Int != 3 {
		t.Fatalf("SORT BY inside: %s", fmtScriptReply(r))
	}
}

// BenchmarkApplySetRanged is BenchmarkApplySet on a range that owns only
// the key's slot: the cost of the range check when it runs (with the full
// interval or no descriptor, it is one branch).
func BenchmarkApplySetRanged(b *testing.B) {
	s := slot.Of([]byte("key:000001"))
	desc := &storage.Descriptor{RangeID: 2, StartSlot: s, EndSlot: s + 1, Generation: 1}
	benchApplyEnv(b, openMem(b), Env{Now: 1000, Desc: desc}, toArgs("SET", "key:000001", strings.Repeat("v", 1024)))
}

// TestRangeCheckExecUndeclaredKey pins what the backstop guarantees in a
// transaction: a queued command that reaches an outside key it does not
// declare (SORT's BY pattern) gets -KVORUM RANGEKEYMISMATCH in EXEC's
// array and writes nothing; the other commands run, as after any error
// inside EXEC (Redis keeps them too).
func TestRangeCheckExecUndeclaredKey(t *testing.T) {
	db := rangeFixture(t)
	r, b := applyIn(t, db, lowHalf(), "KVORUM.EXEC", "0", "3", "SET", "{bar}x", "1",
		"6", "SORT", "{bar}list", "BY", "{foo}w_*", "STORE", "{bar}o", "3", "SET", "{bar}y", "2")
	if r.Kind != reply.KindArray || len(r.Elems) != 3 || string(r.Elems[1].Str) != mismatch7 ||
		r.Elems[0].Kind == reply.KindError || r.Elems[2].Kind == reply.KindError {
		t.Fatalf("EXEC: %s", fmtScriptReply(r))
	}
	if readIn(b, nil, "EXISTS", "{bar}x", "{bar}y").Int != 2 || readIn(b, nil, "EXISTS", "{bar}o").Int != 0 {
		t.Fatal("writes")
	}
}

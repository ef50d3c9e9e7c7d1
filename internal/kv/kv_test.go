package kv

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/cmdspec"
	"github.com/kvorum/kvorum/internal/redisnum"
	"github.com/kvorum/kvorum/internal/reply"
)

func toArgs(s ...string) [][]byte {
	out := make([][]byte, len(s))
	for i, a := range s {
		out[i] = []byte(a)
	}
	return out
}

// run executes one command the way the node does: Check, then Apply in a
// committed batch (writes) or Read.
func run(t testing.TB, db *pebble.DB, now int64, s ...string) Reply {
	t.Helper()
	args := toArgs(s...)
	if r, ok := Check(args, Limits{MaxKeySize: 64, MaxValueSize: 1024}); !ok {
		return r
	}
	if Lookup(args[0]).Write {
		b := db.NewIndexedBatch()
		defer b.Close()
		r := Apply(b, args, Env{Now: now})
		if err := b.Commit(pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		return r
	}
	return Read(db, args, now)
}

func show(r Reply) string {
	switch r.Kind {
	case reply.KindNil:
		return "(nil)"
	case reply.KindInt:
		return fmt.Sprint(r.Int)
	case reply.KindDouble:
		return string(redisnum.AppendDouble(nil, r.Float)) // as RESP2 carries it
	case reply.KindArray, reply.KindMap, reply.KindPairs:
		var parts []string
		for _, e := range r.Elems {
			parts = append(parts, show(e))
		}
		return "[" + strings.Join(parts, " ") + "]"
	case reply.KindError:
		return "ERR<" + string(r.Str) + ">"
	}
	return string(r.Str)
}

func TestExpiryFollowsTheLogClock(t *testing.T) {
	db := openMem(t)
	steps := []struct {
		now  int64
		cmd  []string
		want string
	}{
		{1000, []string{"SET", "k", "v", "PX", "100"}, "OK"},
		{1099, []string{"GET", "k"}, "v"},
		{1099, []string{"PTTL", "k"}, "1"},
		{1100, []string{"GET", "k"}, "(nil)"},
		{1100, []string{"EXISTS", "k"}, "0"},
		{1100, []string{"TTL", "k"}, "-2"},
		{1100, []string{"DBSIZE"}, "1"}, // expired but not yet deleted, as Redis counts
		{1100, []string{"SET", "k", "w", "XX"}, "(nil)"},
		{1100, []string{"SETNX", "k", "w"}, "1"},
		{1100, []string{"PTTL", "k"}, "-1"},
		{2000, []string{"EXPIRE", "k", "10"}, "1"},
		{2000, []string{"PEXPIRETIME", "k"}, "12000"},
		{2000, []string{"INCR", "n"}, "1"},
		{2000, []string{"PEXPIRE", "n", "50"}, "1"},
		{2010, []string{"INCR", "n"}, "2"}, // INCR keeps the TTL
		{2010, []string{"PTTL", "n"}, "40"},
		{2050, []string{"INCR", "n"}, "1"}, // expired: starts over, no TTL
		{2050, []string{"PTTL", "n"}, "-1"},
		{3000, []string{"SET", "t", "v", "EX", "5"}, "OK"},
		{3000, []string{"SET", "t", "w", "KEEPTTL"}, "OK"},
		{3000, []string{"PTTL", "t"}, "5000"},
		{3000, []string{"SET", "t", "x"}, "OK"},
		{3000, []string{"PTTL", "t"}, "-1"},
	}
	for i, s := range steps {
		if got := show(run(t, db, s.now, s.cmd...)); got != s.want {
			t.Fatalf("step %d at %d: %v = %s, want %s", i, s.now, s.cmd, got, s.want)
		}
	}
}

func TestExpiredKeysAndDelExpired(t *testing.T) {
	db := openMem(t)
	for i := 0; i < 50; i++ {
		run(t, db, 1000, "SET", fmt.Sprintf("k%02d", i), "v", "PX", fmt.Sprint(10+i%2*1000))
	}
	keys, err := ExpiredKeys(db, 1500, 10)
	if err != nil || len(keys) != 10 {
		t.Fatalf("first page: %d keys, %v", len(keys), err)
	}
	all, err := ExpiredKeys(db, 1500, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 25 {
		t.Fatalf("expired keys: %d, want 25", len(all))
	}
	// The TTL of one key was extended meanwhile: DELEXPIRED must spare it.
	run(t, db, 1005, "PEXPIRE", string(all[0]), "100000")
	b := db.NewIndexedBatch()
	r := Apply(b, append(toArgs("KVORUM.DELEXPIRED"), all...), Env{Now: 1500})
	if err := b.Commit(pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	if r.Int != 24 {
		t.Fatalf("deleted %d, want 24", r.Int)
	}
	if got := show(run(t, db, 1500, "DBSIZE")); got != "26" {
		t.Fatalf("dbsize after sweep = %s", got)
	}
	// Clients cannot call the internal command.
	if r, ok := Check(toArgs("KVORUM.DELEXPIRED", "x"), Limits{}); ok || !strings.Contains(string(r.Str), "unknown command") {
		t.Fatalf("internal command accepted from a client: %v", show(r))
	}
}

func TestLimitsAndUnknownCommands(t *testing.T) {
	db := openMem(t)
	big := strings.Repeat("x", 65)
	if got := show(run(t, db, 0, "SET", big, "v")); !strings.Contains(got, "key too large (65 bytes, limit 64)") {
		t.Fatalf("big key: %s", got)
	}
	if got := show(run(t, db, 0, "SET", "k", strings.Repeat("v", 1025))); !strings.Contains(got, "value too large (1025 bytes, limit 1024)") {
		t.Fatalf("big value: %s", got)
	}
	if got := show(run(t, db, 0, "MSET", "a", "1", big, "2")); !strings.Contains(got, "key too large") {
		t.Fatalf("big key in MSET: %s", got)
	}
	if got := show(run(t, db, 0, "DBSIZE")); got != "0" {
		t.Fatalf("refused commands changed state: dbsize %s", got)
	}
	want := "ERR<ERR unknown command 'nope', with args beginning with: 'a' 'b' >"
	if got := show(run(t, db, 0, "nope", "a", "b")); got != want {
		t.Fatalf("unknown: %s", got)
	}
}

func TestScanReturnsEveryKeyOnceUnderConcurrentChanges(t *testing.T) {
	db := openMem(t)
	for i := 0; i < 500; i++ {
		run(t, db, 0, "SET", fmt.Sprintf("stable:%03d", i), "v")
	}
	seen := map[string]int{}
	cursor := "0"
	for round := 0; ; round++ {
		// Churn keys that are not part of the guarantee.
		run(t, db, 0, "SET", fmt.Sprintf("churn:%d", round), "v")
		run(t, db, 0, "DEL", fmt.Sprintf("churn:%d", round-1))
		r := run(t, db, 0, "SCAN", cursor, "COUNT", "37", "MATCH", "stable:*")
		for _, k := range r.Elems[1].Elems {
			seen[string(k.Str)]++
		}
		cursor = string(r.Elems[0].Str)
		if cursor == "0" {
			break
		}
		if round > 1000 {
			t.Fatal("scan does not terminate")
		}
	}
	if len(seen) != 500 {
		t.Fatalf("scan saw %d of 500 keys", len(seen))
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("%s returned %d times", k, n)
		}
	}
	r := run(t, db, 0, "SCAN", "0", "TYPE", "hash", "COUNT", "1000")
	if len(r.Elems[1].Elems) != 0 {
		t.Fatalf("TYPE hash matched strings")
	}
}

// --- fuzzing the command layer ---

// fuzzNames is every client-visible command, the internal ones and an
// unknown name.
var fuzzNames = func() []string {
	var names []string
	for _, s := range Commands() {
		names = append(names, strings.ToUpper(s.Name))
	}
	sort.Strings(names) // Commands() order is init order; keep inputs stable
	return append(names, "NOPE", "KVORUM.DELEXPIRED", "KVORUM.EXEC", "KVORUM.LEASEEXPIRE", "KVORUM.LOCKTIMEOUT")
}()

var fuzzWords = []string{"k", "k2", "", "0", "-1", "1", "100", "9223372036854775807", "-9223372036854775808", "1.5",
	"inf", "nan", "abc", "NX", "XX", "GT", "LT", "GET", "EX", "PX", "EXAT", "PXAT", "KEEPTTL", "PERSIST", "MATCH",
	"COUNT", "TYPE", "*", "[", "\\", "\x00", "536870912", "0x1p3", "1e4933", "-inf", "k*", "[^a-z]", "h?llo", "PERSIST",
	"18446744073709551615", "-9223372036854775807", "9223372036854775",
	// collections
	"f", "2", "3", "-2", "BEFORE", "AFTER", "LEFT", "RIGHT", "RANK", "MAXLEN", "WITHSCORES", "WITHVALUES", "BYSCORE",
	"BYLEX", "REV", "LIMIT", "WEIGHTS", "AGGREGATE", "SUM", "MIN", "MAX", "CH", "INCR", "(1", "[a", "(a", "-", "+",
	"+inf", "0.01", "ENCODING", "LOAD", "EXISTS", "FLUSH",
	// leases and locks
	"GRANT", "KEEPALIVE", "REVOKE", "LIST", "ACQUIRE", "TRYACQUIRE", "RELEASE", "CANCEL", "INFO", "FENCED", "SHARED",
	"TIMEOUT", "LEASE", "SET",
	// scripts and transactions
	"return 1", "return redis.call('set', KEYS[1], ARGV[1])", "return redis.call('lpush', KEYS[1], 'x')",
	"return {1, 'a', {ok='x'}, {err='e'}}", "error('x')", "return redis.pcall('nope')", "return math.random()",
	"redis.call('hset', KEYS[1], 'f', 'v') return redis.call('hgetall', KEYS[1])",
}

// FuzzCommands: random argument vectors never panic, and a command that
// returns an error changes nothing.
func FuzzCommands(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3})
	f.Add([]byte{12, 0, 17, 4, 5})
	f.Add([]byte("SET k v EX 10"))
	f.Fuzz(func(t *testing.T, data []byte) {
		db := openMem(t)
		run(t, db, 1000, "SET", "k", "10")
		run(t, db, 1000, "SET", "k2", "hello", "PX", "500")
		for len(data) > 0 {
			n := int(data[0]) % 6
			data = data[1:]
			args := []string{fuzzNames[int(popByte(&data))%len(fuzzNames)]}
			for i := 0; i < n; i++ {
				b := popByte(&data)
				if b >= 240 && len(data) > 0 {
					l := int(popByte(&data)) % 16
					if l > len(data) {
						l = len(data)
					}
					args = append(args, string(data[:l]))
					data = data[l:]
				} else {
					args = append(args, fuzzWords[int(b)%len(fuzzWords)])
				}
			}
			now := 1000 + int64(popByte(&data))*8 // the log clock, from the input
			if hugeOffset(args) {
				continue // valid but huge values only make the fuzzer slow
			}
			a := toArgs(args...)
			// Apply and Read must survive unchecked input too (a corrupt or
			// hostile log entry) and must not write when they fail.
			{
				b := db.NewIndexedBatch()
				count, size := b.Count(), b.Len()
				r := Apply(b, a, Env{Now: now})
				if strings.Contains(string(r.Str), "internal error") {
					t.Fatalf("unchecked Apply %q panicked: %s", args, r.Str)
				}
				if r.IsError() && !partialOnError(args[0]) && (b.Count() != count || b.Len() != size) {
					t.Fatalf("unchecked %q returned %s but wrote to the batch", args, show(r))
				}
				b.Close()
				if r := Read(db, a, now); strings.Contains(string(r.Str), "internal error") {
					t.Fatalf("unchecked Read %q panicked: %s", args, r.Str)
				}
			}
			if r, ok := Check(a, Limits{MaxKeySize: 64, MaxValueSize: 1 << 20}); !ok {
				if r.Kind != reply.KindError {
					t.Fatalf("Check refused %q without an error reply", args)
				}
				continue
			}
			if Lookup(a[0]).Write {
				b := db.NewIndexedBatch()
				count, size := b.Count(), b.Len()
				r := Apply(b, a, Env{Now: now})
				if r.IsError() && !partialOnError(args[0]) && (b.Count() != count || b.Len() != size) {
					t.Fatalf("%q returned %s but wrote to the batch", args, show(r))
				}
				if strings.Contains(string(r.Str), "internal error") {
					t.Fatalf("%q panicked: %s", args, r.Str)
				}
				if err := b.Commit(pebble.NoSync); err != nil {
					t.Fatal(err)
				}
				b.Close()
			} else if r := Read(db, a, now); strings.Contains(string(r.Str), "internal error") {
				t.Fatalf("%q panicked: %s", args, r.Str)
			}
		}
	})
}

// partialOnError: scripts and transactions keep the writes that ran
// before an error, as in Redis.
func partialOnError(name string) bool {
	switch strings.ToUpper(name) {
	case "EVAL", "EVALSHA", "KVORUM.EXEC":
		return true
	}
	return false
}

func popByte(b *[]byte) byte {
	if len(*b) == 0 {
		return 0
	}
	c := (*b)[0]
	*b = (*b)[1:]
	return c
}

// benchApply applies cmds[i%len(cmds)] for i < b.N into indexed batches of
// a thousand commands each, as Ready rounds would, recording effects in fx
// (reset every round) unless it is nil.
func benchApply(b *testing.B, db *pebble.DB, fx *Effects, cmds ...[][]byte) {
	benchApplyEnv(b, db, Env{Now: 1000, Effects: fx}, cmds...)
}

// benchApplyEnv is benchApply with env (env.Effects: fx).
func benchApplyEnv(b *testing.B, db *pebble.DB, env Env, cmds ...[][]byte) {
	fx := env.Effects
	batch := db.NewIndexedBatch()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if i%1000 == 0 {
			batch.Close()
			batch = db.NewIndexedBatch()
			if fx != nil {
				fx.Reset()
			}
		}
		Apply(batch, cmds[i%len(cmds)], env)
	}
}

func BenchmarkApplySet(b *testing.B) {
	benchApply(b, openMem(b), nil, toArgs("SET", "key:000001", strings.Repeat("v", 1024)))
}

// BenchmarkApplyZAdd: ZADD of one member into one of many small sorted
// sets already in the store, the write path through score parsing, the
// listpack encoding and the score index.
func BenchmarkApplyZAdd(b *testing.B) {
	const keys = 1000
	db := openMem(b)
	for k := 0; k < keys; k++ {
		key := fmt.Sprintf("zkey:%06d", k)
		run(b, db, 0, "ZADD", key, "1", "a", "2.5", "b", "3", "c", "-4", "d")
	}
	args := make([][][]byte, keys)
	for k := range args {
		args[k] = toArgs("ZADD", fmt.Sprintf("zkey:%06d", k), strconv.Itoa(k%97)+".25", fmt.Sprintf("m%d", k%16))
	}
	benchApply(b, db, nil, args...)
}

func BenchmarkReadGet(b *testing.B) {
	db := openMem(b)
	run(b, db, 0, "SET", "key:000001", strings.Repeat("v", 1024))
	args := toArgs("GET", "key:000001")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		Read(db, args, 1000)
	}
}

// hugeOffset reports whether args is a command that takes a byte or bit
// offset and one of its arguments is a number large enough to build a
// value of megabytes.
func hugeOffset(args []string) bool {
	switch strings.ToUpper(args[0]) {
	case "SETRANGE", "GETRANGE", "SETBIT", "BITFIELD", "BITFIELD_RO":
		for _, a := range args[2:] {
			if len(a) > 6 {
				return true
			}
		}
	}
	return false
}

// TestUnsupportedListIsCurrent: a command kvorum implements must not stay
// in the list of commands it does not.
func TestUnsupportedListIsCurrent(t *testing.T) {
	for _, name := range cmdspec.UnsupportedNames() {
		if lookup([]byte(name)) != nil {
			t.Errorf("%s is implemented but still listed as unsupported", name)
		}
	}
}

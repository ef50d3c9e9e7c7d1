package kv

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/kvdiff"
	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/script"
)

// applyAt runs a write command in an indexed batch at a fixed log position
// and clock, as a replica applies it.
func applyAt(t testing.TB, db *pebble.DB, env Env, args ...string) Reply {
	t.Helper()
	bargs := toArgs(args...)
	if r, ok := Check(bargs, Limits{}); !ok {
		return r
	}
	b := db.NewIndexedBatch()
	defer b.Close()
	r := Apply(b, bargs, env)
	if err := b.Commit(pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	return r
}

func readAt(t testing.TB, db *pebble.DB, args ...string) Reply {
	t.Helper()
	bargs := toArgs(args...)
	if r, ok := Check(bargs, Limits{}); !ok {
		return r
	}
	return Read(db, bargs, time.Now().UnixMilli())
}

func evalKV(t testing.TB, db *pebble.DB, script string, keysAndArgs ...string) Reply {
	t.Helper()
	return runKV(db, append([]string{"EVAL", script}, keysAndArgs...))
}

func wantReply(t *testing.T, what string, got Reply, want any) {
	t.Helper()
	if g := kvdiff.NormalizeReply("", got); fmt.Sprint(g) != fmt.Sprint(want) {
		t.Errorf("%s: got %#v, want %#v", what, g, want)
	}
}

func wantErrorPrefix(t *testing.T, what string, got Reply, prefix string) {
	t.Helper()
	if got.Kind != reply.KindError || !strings.HasPrefix(string(got.Str), prefix) {
		t.Errorf("%s: got %s, want an error starting with %q", what, fmtScriptReply(got), prefix)
	}
}

func fmtScriptReply(r Reply) string { return fmt.Sprintf("%#v", kvdiff.NormalizeReply("", r)) }

// budgetErr is the error of a script that exceeds its budget.
var budgetErr = fmt.Sprintf("ERR script exceeded its budget of %d Lua instructions; kvorum runs scripts at apply time on every replica, see README", script.Budget)

// TestScriptBudget: a script that exceeds its budget fails with the
// budget error, and the writes it made before stay (no rollback), through
// Apply. Logs the cost of a budget-exhausting script. The runtime's side
// (which loops, pcall, coroutines) is tested in package script.
func TestScriptBudget(t *testing.T) {
	db := openMem(t)
	start := time.Now()
	r := evalKV(t, db, "redis.call('set', 'before', '1') local ok = pcall(function() while true do end end) redis.call('set', 'after', '1')", "0")
	d := time.Since(start)
	wantReply(t, "budget", r, "ERR:"+budgetErr)
	t.Logf("a script that exhausts its budget: %v (%.1f ns per budget unit)", d, float64(d.Nanoseconds())/script.Budget)
	wantReply(t, "before", readAt(t, db, "GET", "before"), "1")
	wantReply(t, "after", readAt(t, db, "GET", "after"), "<nil>")
}

// BenchmarkScriptBudget measures one script that exhausts its budget with
// a typical loop body (arithmetic and a table store).
func BenchmarkScriptBudget(b *testing.B) {
	db := openMem(b)
	for i := 0; i < b.N; i++ {
		r := evalKV(b, db, "local t = {} local i = 0 while true do i = i + 1 t[i % 100 + 1] = i end", "0")
		if string(r.Str) != budgetErr {
			b.Fatal(fmtScriptReply(r))
		}
	}
}

// BenchmarkScriptBudgetMonitored is BenchmarkScriptBudget with the run
// recorded in a script.Monitor, as on a node: the kill flag is read at
// every instruction.
func BenchmarkScriptBudgetMonitored(b *testing.B) {
	db := openMem(b)
	var m script.Monitor
	env := Env{Now: 1, Index: 1, Scripts: &m}
	for i := 0; i < b.N; i++ {
		r := applyAt(b, db, env, "EVAL", "local t = {} local i = 0 while true do i = i + 1 t[i % 100 + 1] = i end", "0")
		if string(r.Str) != budgetErr {
			b.Fatal(fmtScriptReply(r))
		}
	}
}

// TestScriptDeterminism applies the same entries to two fresh databases:
// identical replies and identical storage, for scripts that draw random
// numbers, read the time, iterate tables and call SPOP.
func TestScriptDeterminism(t *testing.T) {
	scripts := [][]string{
		{"SADD", "s", "a", "b", "c", "d", "e", "f", "g", "h"},
		{"EVAL", `
			local out = {}
			for i = 1, 5 do out[#out+1] = math.random(1000000) end
			out[#out+1] = tostring(math.random())
			local t = redis.call('TIME')
			out[#out+1] = t[1] .. '.' .. t[2]
			local m = {}
			for i = 1, 50 do m['k' .. math.random(100)] = i end
			m.x, m.y, m[3.5], m[true] = 1, 2, 3, 4
			for k, v in pairs(m) do out[#out+1] = tostring(k) .. '=' .. v end
			out[#out+1] = tostring({}) .. tostring(tostring) .. tostring(coroutine.create(function() end))
			out[#out+1] = redis.call('SPOP', KEYS[1])
			out[#out+1] = redis.call('SRANDMEMBER', KEYS[1])
			redis.call('SET', KEYS[2], table.concat(out, ','))
			redis.call('HSET', KEYS[3], 'r', math.random(), 't', t[1])
			return out`, "3", "s", "str", "h"},
		{"EVAL", "local r = {} for i = 1, 3 do r[i] = redis.call('SPOP', KEYS[1]) end return r", "1", "s"},
		{"EVAL", "math.randomseed(42) return {math.random(100), math.random(100)}", "0"},
	}
	run := func() ([]Reply, string) {
		db := openMem(t)
		var replies []Reply
		for i, s := range scripts {
			env := Env{Now: 1700000000123 + int64(i), Index: uint64(1000 + i), Seq: 0}
			replies = append(replies, applyAt(t, db, env, s...))
		}
		var dump strings.Builder
		it, err := db.NewIter(nil)
		if err != nil {
			t.Fatal(err)
		}
		for ok := it.First(); ok; ok = it.Next() {
			fmt.Fprintf(&dump, "%q=%q\n", it.Key(), it.Value())
		}
		it.Close()
		return replies, dump.String()
	}
	r1, d1 := run()
	r2, d2 := run()
	for i := range r1 {
		if fmtScriptReply(r1[i]) != fmtScriptReply(r2[i]) {
			t.Errorf("entry %d: %s vs %s", i, fmtScriptReply(r1[i]), fmtScriptReply(r2[i]))
		}
		if r1[i].IsError() {
			t.Errorf("entry %d: %s", i, r1[i].Str)
		}
	}
	if d1 != d2 {
		t.Errorf("storage differs:\n%s\nvs\n%s", d1, d2)
	}
	if !strings.Contains(fmtScriptReply(r1[1]), "1700000000.124000") {
		t.Errorf("TIME does not come from Env.Now: %s", fmtScriptReply(r1[1]))
	}
	// Another log position draws other numbers.
	db := openMem(t)
	other := applyAt(t, db, Env{Now: 1, Index: 7}, "EVAL", "return math.random(1000000000)", "0")
	again := applyAt(t, db, Env{Now: 1, Index: 8}, "EVAL", "return math.random(1000000000)", "0")
	if other.Int == again.Int {
		t.Errorf("math.random gives %d at two log positions", other.Int)
	}
}

// TestScriptCache: EVALSHA after SCRIPT LOAD and EVAL, SCRIPT FLUSH,
// FLUSHALL keeps scripts, the store and not the node-local compile cache
// decides what exists.
func TestScriptCache(t *testing.T) {
	db := openMem(t)
	body := "return {KEYS[1], ARGV[1], 'cached'}"
	sha := script.SHA1Hex([]byte(body))
	wantReply(t, "evalsha before", runKV(db, []string{"EVALSHA", sha, "0"}), "ERR:NOSCRIPT No matching script. Please use EVAL.")
	wantReply(t, "load", runKV(db, []string{"SCRIPT", "LOAD", body}), sha)
	wantReply(t, "evalsha", runKV(db, []string{"EVALSHA", sha, "1", "k", "a"}), []any{"k", "a", "cached"})
	wantReply(t, "evalsha upper", runKV(db, []string{"EVALSHA", strings.ToUpper(sha), "1", "k", "a"}), []any{"k", "a", "cached"})
	wantReply(t, "evalsha_ro", readAt(t, db, "EVALSHA_RO", sha, "1", "k", "a"), []any{"k", "a", "cached"})
	wantReply(t, "exists", runKV(db, []string{"SCRIPT", "EXISTS", sha, strings.ToUpper(sha), "nope"}), []any{int64(1), int64(1), int64(0)})
	wantReply(t, "flushall", runKV(db, []string{"FLUSHALL"}), "OK")
	wantReply(t, "exists after flushall", runKV(db, []string{"SCRIPT", "EXISTS", sha}), []any{int64(1)})
	wantReply(t, "dbsize", runKV(db, []string{"DBSIZE"}), int64(0))
	wantReply(t, "script flush", runKV(db, []string{"SCRIPT", "FLUSH"}), "OK")
	// The compile cache still has it, but the store decides.
	wantReply(t, "evalsha after flush", runKV(db, []string{"EVALSHA", sha, "0"}), "ERR:NOSCRIPT No matching script. Please use EVAL.")
	wantReply(t, "evalsha_ro after flush", readAt(t, db, "EVALSHA_RO", sha, "0"), "ERR:NOSCRIPT No matching script. Please use EVAL.")
	// EVAL stores the script (replicated), even if it fails at run time.
	failing := "redis.call('incr', 'str')"
	runKV(db, []string{"SET", "str", "x"})
	wantErrorPrefix(t, "failing eval", evalKV(t, db, failing, "0"), "ERR value is not an integer")
	wantReply(t, "failing cached", runKV(db, []string{"SCRIPT", "EXISTS", script.SHA1Hex([]byte(failing))}), []any{int64(1)})
	// A script that does not compile is not stored.
	bad := "return +"
	wantErrorPrefix(t, "compile", evalKV(t, db, bad, "0"), "ERR Error compiling script (new function): user_script")
	wantReply(t, "bad not cached", runKV(db, []string{"SCRIPT", "EXISTS", script.SHA1Hex([]byte(bad))}), []any{int64(0)})
	// EVAL_RO is a read: it stores nothing (Redis would cache it).
	ro := "return 'ro only'"
	wantReply(t, "eval_ro", readAt(t, db, "EVAL_RO", ro, "0"), "ro only")
	wantReply(t, "ro not stored", runKV(db, []string{"SCRIPT", "EXISTS", script.SHA1Hex([]byte(ro))}), []any{int64(0)})
	// Scripts live in the hidden span, not in the keyspace.
	runKV(db, []string{"SCRIPT", "LOAD", "return 1"})
	wantReply(t, "keys", runKV(db, []string{"KEYS", "*"}), []any{"str"})
	v, c, err := db.Get(scriptKey(script.SHA1Hex([]byte("return 1"))))
	if err != nil || string(v) != "return 1" {
		t.Fatalf("stored body: %q %v", v, err)
	}
	c.Close()
	if !bytes.HasPrefix(scriptKey("x"), hiddenPrefix) {
		t.Fatal("script keys are not hidden keys")
	}
}

// TestScriptReadOnly: EVAL_RO refuses writes as Redis 7.0 does, and runs
// through Read (no batch).
func TestScriptReadOnly(t *testing.T) {
	db := openMem(t)
	runKV(db, []string{"SET", "k", "v"})
	if Lookup([]byte("eval_ro")).Write || Lookup([]byte("evalsha_ro")).Write {
		t.Fatal("EVAL_RO must be a read")
	}
	if !Lookup([]byte("eval")).Write || !Lookup([]byte("evalsha")).Write || !Lookup([]byte("script")).Write {
		t.Fatal("EVAL, EVALSHA and SCRIPT must be replicated")
	}
	src := "return redis.call('set', 'k', 'changed')"
	wantReply(t, "write in eval_ro", readAt(t, db, "EVAL_RO", src, "0"),
		"ERR:ERR Write commands are not allowed from read-only scripts. script: "+script.SHA1Hex([]byte(src))+", on @user_script:1.")
	wantReply(t, "pcall write in eval_ro", readAt(t, db, "EVAL_RO", "local r = redis.pcall('del', 'k') return r.err", "0"),
		"ERR Write commands are not allowed from read-only scripts.")
	wantReply(t, "read in eval_ro", readAt(t, db, "EVAL_RO", "return redis.call('get', KEYS[1])", "1", "k"), "v")
	wantReply(t, "unchanged", readAt(t, db, "GET", "k"), "v")
	// no-writes scripts refuse writes in EVAL too; write scripts refuse EVAL_RO.
	wantErrorPrefix(t, "no-writes", evalKV(t, db, "#!lua flags=no-writes\nreturn redis.call('set', 'k', 'x')", "0"),
		"ERR Write commands are not allowed from read-only scripts.")
	wantReply(t, "shebang write via ro", readAt(t, db, "EVAL_RO", "#!lua\nreturn 1", "0"),
		"ERR:ERR Can not execute a script with write flag using *_ro command.")
	// A read-only script inside a transaction (KVORUM.EXEC applies it).
	b := db.NewIndexedBatch()
	r := Apply(b, EncodeExec(nil, nil, [][][]byte{
		{[]byte("EVAL_RO"), []byte("return redis.call('set', 'k', 'x')"), []byte("0")},
		{[]byte("EVAL"), []byte("return redis.call('set', 'k', 'in exec')"), []byte("0")},
		{[]byte("EVAL"), []byte("return redis.call('get', 'k')"), []byte("0")},
	}), Env{Now: 1, Index: 5000})
	if err := b.Commit(pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if len(r.Elems) != 3 || !r.Elems[0].IsError() || string(r.Elems[1].Str) != "OK" || string(r.Elems[2].Str) != "in exec" {
		t.Fatalf("exec: %s", fmtScriptReply(r))
	}
}

// redis-py 4.3's Lock scripts (redis/lock.py).
const (
	luaLockRelease = `
        local token = redis.call('get', KEYS[1])
        if not token or token ~= ARGV[1] then
            return 0
        end
        redis.call('del', KEYS[1])
        return 1
    `
	luaLockExtend = `
        local token = redis.call('get', KEYS[1])
        if not token or token ~= ARGV[1] then
            return 0
        end
        local expiration = redis.call('pttl', KEYS[1])
        if not expiration then
            expiration = 0
        end
        if expiration < 0 then
            return 0
        end

        local newttl = ARGV[2]
        if ARGV[3] == "0" then
            newttl = ARGV[2] + expiration
        end
        redis.call('pexpire', KEYS[1], newttl)
        return 1
    `
	luaLockReacquire = `
        local token = redis.call('get', KEYS[1])
        if not token or token ~= ARGV[1] then
            return 0
        end
        redis.call('pexpire', KEYS[1], ARGV[2])
        return 1
    `
)

func TestScriptRedisPyLock(t *testing.T) {
	db := openMem(t)
	now := int64(1_700_000_000_000)
	idx := uint64(10)
	do := func(args ...string) Reply {
		idx++
		return applyAt(t, db, Env{Now: now, Index: idx}, args...)
	}
	wantReply(t, "acquire", do("SET", "lock", "tok1", "NX", "PX", "10000"), "OK")
	wantReply(t, "acquire again", do("SET", "lock", "tok2", "NX", "PX", "10000"), "<nil>")
	wantReply(t, "extend wrong token", do("EVAL", luaLockExtend, "1", "lock", "tok2", "5000", "0"), int64(0))
	wantReply(t, "extend additive", do("EVAL", luaLockExtend, "1", "lock", "tok1", "5000", "0"), int64(1))
	wantReply(t, "pttl after extend", do("EVAL", "return redis.call('pttl', KEYS[1])", "1", "lock"), int64(15000))
	wantReply(t, "extend replace", do("EVAL", luaLockExtend, "1", "lock", "tok1", "3000", "1"), int64(1))
	wantReply(t, "pttl after replace", do("EVAL", "return redis.call('pttl', KEYS[1])", "1", "lock"), int64(3000))
	wantReply(t, "reacquire wrong", do("EVAL", luaLockReacquire, "1", "lock", "nope", "9000"), int64(0))
	wantReply(t, "reacquire", do("EVAL", luaLockReacquire, "1", "lock", "tok1", "9000"), int64(1))
	wantReply(t, "pttl after reacquire", do("EVAL", "return redis.call('pttl', KEYS[1])", "1", "lock"), int64(9000))
	wantReply(t, "release wrong", do("EVAL", luaLockRelease, "1", "lock", "tok2"), int64(0))
	wantReply(t, "release", do("EVAL", luaLockRelease, "1", "lock", "tok1"), int64(1))
	wantReply(t, "released", do("EVAL", "return redis.call('exists', KEYS[1])", "1", "lock"), int64(0))
	wantReply(t, "release unlocked", do("EVAL", luaLockRelease, "1", "lock", "tok1"), int64(0))
	wantReply(t, "extend unlocked", do("EVAL", luaLockExtend, "1", "lock", "tok1", "1000", "0"), int64(0))
	// Without an expiry, extend refuses (pttl -1).
	do("SET", "lock", "tok3")
	wantReply(t, "extend persistent", do("EVAL", luaLockExtend, "1", "lock", "tok3", "1000", "0"), int64(0))
	// The lock expires on the entry clock.
	do("SET", "lock", "tok4", "PX", "100")
	now += 200
	wantReply(t, "expired", do("EVAL", luaLockRelease, "1", "lock", "tok4"), int64(0))
	// Through EVALSHA, as redis-py calls them.
	sha := string(do("SCRIPT", "LOAD", luaLockRelease).Str)
	do("SET", "lock", "tok5")
	wantReply(t, "evalsha release", do("EVALSHA", sha, "1", "lock", "tok5"), int64(1))
}

// TestScriptErrorsAndConversions covers what the differential file cannot:
// kvorum-specific behaviour of redis.call (scriptCaller) and RESP3 replies
// of real commands. The conversions themselves are tested in package
// script.
func TestScriptErrorsAndConversions(t *testing.T) {
	db := openMem(t)
	runKV(db, []string{"HSET", "h", "a", "1"})
	// A RESP3 map reply converts to {map = {...}} and back to a map.
	r := evalKV(t, db, "redis.setresp(3) local m = redis.call('hgetall', 'h') return m", "0")
	if r.Kind != reply.KindMap || len(r.Elems) != 2 || string(r.Elems[0].Str) != "a" {
		t.Errorf("resp3 map: %s", fmtScriptReply(r))
	}
	// Unknown Redis commands kvorum does not implement say why.
	wantErrorPrefix(t, "unsupported", evalKV(t, db, "return redis.call('migrate', 'h', '1', 'k', '0', '1')", "0"), "ERR 'MIGRATE' is not supported by kvorum")
	wantErrorPrefix(t, "noscript", evalKV(t, db, "return redis.call('client', 'list')", "0"), "ERR This Redis command is not allowed from script")
	wantErrorPrefix(t, "internal", evalKV(t, db, "return redis.call('kvorum.exec', '0')", "0"), "ERR Unknown Redis command called from script")
	wantErrorPrefix(t, "nested eval", evalKV(t, db, "return redis.call('eval', 'return 1', '0')", "0"), "ERR This Redis command is not allowed from script")
	wantErrorPrefix(t, "arity", evalKV(t, db, "return redis.call('get')", "0"), "ERR Wrong number of args calling Redis command from script")
	wantReply(t, "time", evalKV(t, db, "return #redis.call('time')", "0"), int64(2))
	wantReply(t, "acl_check_cmd", evalKV(t, db, "return {redis.acl_check_cmd('get', 'k'), redis.pcall('eval', 'return 1', '0').err}", "0"),
		[]any{int64(1), "ERR This Redis command is not allowed from script"})
	wantErrorPrefix(t, "acl_check_cmd internal", evalKV(t, db, "return redis.acl_check_cmd('kvorum.exec')", "0"), "ERR Invalid command passed to redis.acl_check_cmd()")
	// Arguments are formatted as Redis does (%.17g).
	runKV(db, []string{"DEL", "n"})
	evalKV(t, db, "redis.call('set', 'n', 1/3)", "0")
	wantReply(t, "17g", runKV(db, []string{"GET", "n"}), "0.33333333333333331")
	// Error positions in nested functions.
	wantReply(t, "nested position", evalKV(t, db, "local function f()\n  redis.call('nosuch')\nend\nf()", "0"),
		"ERR:ERR Unknown Redis command called from script script: "+script.SHA1Hex([]byte("local function f()\n  redis.call('nosuch')\nend\nf()"))+", on @user_script:2.")
}

// TestScriptConcurrentReads runs read-only scripts from many goroutines
// (states come from the pool) while writes apply.
func TestScriptConcurrentReads(t *testing.T) {
	db := openMem(t)
	runKV(db, []string{"SET", "k", "v"})
	done := make(chan error, 8)
	for g := 0; g < 8; g++ {
		go func() {
			for i := 0; i < 200; i++ {
				r := Read(db, [][]byte{[]byte("EVAL_RO"), []byte("local t = {} for i = 1, 100 do t[i] = i end return {redis.call('get', 'k'), #t, tostring({})}"), []byte("0")}, 1)
				if fmtScriptReply(r) != `[]interface {}{"v", 100, "table: 0x00000001"}` {
					done <- fmt.Errorf("%s", fmtScriptReply(r))
					return
				}
			}
			done <- nil
		}()
	}
	for i := 0; i < 50; i++ {
		evalKV(t, db, "redis.call('set', 'w', ARGV[1])", "0", fmt.Sprint(i))
	}
	for g := 0; g < 8; g++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkScriptLockRelease is a typical short script (redis-py's lock
// release), applied as a replica does.
func BenchmarkScriptLockRelease(b *testing.B) {
	db := openMem(b)
	sha := string(runKV(db, []string{"SCRIPT", "LOAD", luaLockRelease}).Str)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		key := "lock" + strconv.Itoa(i)
		runKV(db, []string{"SET", key, "tok"})
		if r := runKV(db, []string{"EVALSHA", sha, "1", key, "tok"}); r.Int != 1 {
			b.Fatal(fmtScriptReply(r))
		}
	}
}

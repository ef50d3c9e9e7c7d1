package kv

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/kvorum/kvorum/internal/script"
)

// applyAt runs a write command in an indexed batch at a fixed log position
// and clock, as a replica applies it.
func applyAt(t testing.TB, db *pebble.DB, env Env, args ...string) Reply {
	t.Helper()
	bargs := make([][]byte, len(args))
	for i, a := range args {
		bargs[i] = []byte(a)
	}
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
	bargs := make([][]byte, len(args))
	for i, a := range args {
		bargs[i] = []byte(a)
	}
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
	if g := normalizeKV("", got); fmt.Sprint(g) != fmt.Sprint(want) {
		t.Errorf("%s: got %#v, want %#v", what, g, want)
	}
}

func wantErrorPrefix(t *testing.T, what string, got Reply, prefix string) {
	t.Helper()
	if got.Kind != KindError || !strings.HasPrefix(string(got.Str), prefix) {
		t.Errorf("%s: got %s, want an error starting with %q", what, fmtScriptReply(got), prefix)
	}
}

func fmtScriptReply(r Reply) string { return fmt.Sprintf("%#v", normalizeKV("", r)) }

// budgetErr is the error of a script that exceeds its budget.
var budgetErr = fmt.Sprintf("ERR script exceeded its budget of %d Lua instructions; kvorum runs scripts at apply time on every replica, see README", script.Budget)

// TestScriptBudget: an endless loop fails with the budget error, the same
// way every time (and whatever it does inside pcall); a loop of half the
// budget succeeds. Logs the cost of a budget-exhausting script.
func TestScriptBudget(t *testing.T) {
	db := openMem(t)
	for _, src := range []string{
		"while true do end",
		"local i = 0 while true do i = i + 1 end",
		"local t = {} local i = 0 while true do i = i + 1 t[i % 100 + 1] = i end",
		"local function f() while true do end end while true do pcall(f) end",
		"redis.call('set', 'before', '1') local ok = pcall(function() while true do end end) redis.call('set', 'after', '1')",
		"local co = coroutine.wrap(function() while true do end end) co()",
		"local s = string.rep('a', 1000) while true do s:find('b') end",
	} {
		for i := 0; i < 2; i++ {
			start := time.Now()
			r := evalKV(t, db, src, "0")
			d := time.Since(start)
			if string(r.Str) != budgetErr {
				t.Fatalf("%q: got %s", src, fmtScriptReply(r))
			}
			t.Logf("%-70q %v (%.1f ns per budget unit)", src, d, float64(d.Nanoseconds())/script.Budget)
		}
	}
	// Writes before the budget ran out stay; nothing after it ran.
	wantReply(t, "before", readAt(t, db, "GET", "before"), "1")
	wantReply(t, "after", readAt(t, db, "GET", "after"), "<nil>")

	// A numeric for loop costs one instruction per iteration (FORLOOP).
	r := evalKV(t, db, fmt.Sprintf("local n = 0 for i = 1, %d do end return 1", script.Budget/2), "0")
	wantReply(t, "half the budget", r, int64(1))
	r = evalKV(t, db, fmt.Sprintf("for i = 1, %d do end return 1", script.Budget+10), "0")
	wantReply(t, "the budget and a bit", r, "ERR:"+budgetErr)
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

// TestScriptGlobals: scripts cannot create or change globals or library
// tables, so a pooled state carries nothing from one run to the next.
func TestScriptGlobals(t *testing.T) {
	db := openMem(t)
	for _, src := range []string{
		"x = 1", "_G.x = 1", "rawset(_G, 'x', 1)", "setmetatable(_G, nil)", "string.upper = nil",
		"rawset(string, 'upper', nil)", "table.insert(math, 1)", "table.sort(redis)", "getmetatable('').__index = {}",
		"rawset(getmetatable(''), '__index', {})", "setmetatable(getmetatable(''), {})", "redis.call = nil",
		"cjson.null = 1", "bit.band = nil", "coroutine.wrap = nil", "_G._G = nil", "KEYS = nil",
	} {
		for i := 0; i < 3; i++ {
			r := evalKV(t, db, src, "0")
			if r.Kind != KindError || !strings.Contains(string(r.Str), "Attempt to modify a readonly table") {
				t.Fatalf("%q: %s", src, fmtScriptReply(r))
			}
		}
	}
	wantReply(t, "undefined global", evalKV(t, db, "return x", "0"),
		"ERR:ERR user_script:1: Script attempted to access nonexistent global variable 'x' script: "+script.SHA1Hex([]byte("return x"))+", on @user_script:1.")
	// What one run does to its own tables is gone in the next.
	for i := 0; i < 20; i++ {
		r := evalKV(t, db, "local t = getmetatable('') mine = 1 return 1", "0")
		wantErrorPrefix(t, "create global", r, "ERR user_script:1: Attempt to modify a readonly table")
		r = evalKV(t, db, "return {type(rawget(_G, 'mine')), ('a'):upper(), string.upper('b'), type(math.random), #KEYS, ARGV[1]}", "1", "k", fmt.Sprint(i))
		wantReply(t, "fresh state", r, []any{"nil", "A", "B", "function", int64(1), fmt.Sprint(i)})
	}
	// The state of a run is per run: KEYS and ARGV of the last run are gone.
	wantReply(t, "keys", evalKV(t, db, "return {#KEYS, #ARGV}", "0"), []any{int64(0), int64(0)})
	// Library functions still work after all that.
	wantReply(t, "libs", evalKV(t, db, "return {('a'):upper(), string.rep('x', 2), math.floor(1.5), table.concat({1, 2})}", "0"),
		[]any{"A", "xx", int64(1), "12"})
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
	r := Apply(b, EncodeExec(nil, [][][]byte{
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

// TestScriptLimits: what would exhaust memory, stack or time fails with a
// Lua error, never crashes the process.
func TestScriptLimits(t *testing.T) {
	db := openMem(t)
	for _, c := range []struct{ src, want string }{
		{"return string.rep('x', 1024*1024*1024)", "ERR user_script:1: resulting string too large"},
		{"return string.rep('abc', 2^31 - 1)", "ERR user_script:1: resulting string too large"},
		{"for i = 1, 1e6 do local s = string.rep('x', 2^16) end", budgetErr},
		{"local s = 'x' for i = 1, 1e6 do s = ('x'):rep(100) .. s end", budgetErr},
		{"local s = string.rep('x', 2^27) return #(s .. s .. s .. s .. s)", "ERR user_script:1: string length overflow"},
		{"local t = {} for i = 1, 40 do t[i] = string.rep('y', 2^20) end return #table.concat(t, '', 1, 40)", "41943040"},
		{"local t = {} t[60000000] = 1 return 1", budgetErr},
		{"local t = {} for i = 1, 1000 do t[i] = {} t[i][50000] = 1 end return 1", budgetErr},
		{"local t = {[60000000] = 1} return 1", budgetErr},
		{"local t = {} rawset(t, 60000000, 1) return 1", budgetErr},
		{"local t = {} table.insert(t, 60000000, 1) return 1", budgetErr},
		{"local t = {1} table.insert(t, -2000000000, 1) return 1", budgetErr},
		{"local function f(n) return f(n + 1) + 1 end return f(1)", "ERR user_script:1: stack overflow script: 66b14d7ca4c1fbcfbdf5034480320b86fda4c2f3, on @user_script:1."},
		{"local function f() pcall(f) end f() return 'survived'", "survived"},
		{"local t = {} t[1] = t return t", "ERR reached lua stack limit"},
		{"local t = {} t[1] = t t[2] = t return t", budgetErr},
		{"return unpack({}, 1, 1e6)", "ERR user_script:1: too many results to unpack"},
		{"return string.byte(string.rep('x', 100000), 1, -1)", "ERR user_script:1: string slice too long"},
		{"return string.find(string.rep('a', 30), string.rep('a*', 30) .. 'b')", budgetErr},
		// Lua 5.1: the trailing ')' closes no capture.
		{"return string.match(string.rep('(', 100), string.rep('%(', 100) .. ')')", "ERR user_script:1: invalid pattern capture"},
		{"local n = 0 while true do n = n + 1 coroutine.create(function() end) end", "ERR user_script:1: too many coroutines"},
		{"local s = '(' local f = loadstring('return ' .. string.rep('(', 5000) .. '1' .. string.rep(')', 5000)) return f", "<nil>"},
		// gopher-lua's parser folds parentheses (no recursion); nested
		// constructors hit the syntax-level limit instead.
		{"return " + strings.Repeat("(", 5000) + "1" + strings.Repeat(")", 5000), "1"},
		{"return " + strings.Repeat("{", 100000) + strings.Repeat("}", 100000), "ERR Error compiling script (new function): chunk has too many syntax levels"},
		{"local t = {} for i = 1, 200000 do t[#t + 1] = i end for i = 1, 200000 do t[#t] = nil end return #t", "0"},
		{"local t = {} for i = 1, 3000 do table.insert(t, 1, i) end return #t", "3000"},
		{"return cjson.encode(setmetatable({}, {__index = function() return 1 end}))", "{}"},
		{"local t = {} t[1] = t return cjson.encode(t)", "ERR user_script:1: Cannot serialise, excessive nesting (1001)"},
		{"local function f(...) return f(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, ...) end return f()", budgetErr},
		{"local function f(...) return f(..., ...) end return f(1)", budgetErr},
		{"local function g(...) return select('#', ...) end local function f(...) local n = 0 for i = 1, 1e6 do n = n + g(...) end return n end return f(unpack({}, 1, 8000))", budgetErr},
		{"return string.gsub(string.rep('a', 1000), 'a', string.rep('b', 1000000))", "ERR user_script:1: resulting string too large"},
		{"return #string.gsub(string.rep('ab', 1e6), 'a', '%0%0')", "3000000"},
		{"return #cjson.encode(cjson.decode('[' .. string.rep('1,', 100000) .. '1]'))", "200003"},
		{"return cjson.decode(string.rep('[', 2000))", "ERR user_script:1: Found too many nested data structures (1001) at character 1001"},
	} {
		r := evalKV(t, db, c.src, "0")
		got := fmt.Sprint(normalizeKV("", r))
		if r.IsError() {
			got = string(r.Str)
		}
		if !strings.HasPrefix(got, c.want) {
			t.Errorf("%.80q:\n  got  %.300s\n  want %s", c.src, got, c.want)
		}
	}
}

// TestScriptErrorsAndConversions covers what the differential file cannot:
// kvorum-specific behaviour and RESP3 replies.
func TestScriptErrorsAndConversions(t *testing.T) {
	db := openMem(t)
	runKV(db, []string{"HSET", "h", "a", "1"})
	// A RESP3 map reply converts to {map = {...}} and back to a map.
	r := evalKV(t, db, "redis.setresp(3) local m = redis.call('hgetall', 'h') return m", "0")
	if r.Kind != KindMap || len(r.Elems) != 2 || string(r.Elems[0].Str) != "a" {
		t.Errorf("resp3 map: %s", fmtScriptReply(r))
	}
	r = evalKV(t, db, "redis.setresp(3) return {true, false}", "0")
	if len(r.Elems) != 2 || r.Elems[0].Kind != KindBool || r.Elems[0].Int != 1 || r.Elems[1].Kind != KindBool {
		t.Errorf("resp3 booleans: %s", fmtScriptReply(r))
	}
	r = evalKV(t, db, "return {double = 1.5}", "0")
	if r.Kind != KindDouble || r.Float != 1.5 {
		t.Errorf("double: %+v", r)
	}
	r = evalKV(t, db, "return {set = {a = true, b = true}}", "0")
	if r.Kind != KindSet || len(r.Elems) != 2 {
		t.Errorf("set: %+v", r)
	}
	// Unknown Redis commands kvorum does not implement say why.
	wantErrorPrefix(t, "unsupported", evalKV(t, db, "return redis.call('dump', 'x')", "0"), "ERR 'DUMP' is not supported by kvorum")
	wantErrorPrefix(t, "noscript", evalKV(t, db, "return redis.call('client', 'list')", "0"), "ERR This Redis command is not allowed from script")
	wantErrorPrefix(t, "internal", evalKV(t, db, "return redis.call('kvorum.exec', '0')", "0"), "ERR Unknown Redis command called from script")
	// tostring never prints an address.
	wantReply(t, "tostring", evalKV(t, db, "local a, b = {}, {} return {tostring(a), tostring(b), tostring(a), tostring(tostring)}", "0"),
		[]any{"table: 0x00000001", "table: 0x00000002", "table: 0x00000001", "function: 0x00000003"})
	wantReply(t, "cjson.null", evalKV(t, db, "return tostring(cjson.null)", "0"), "userdata: (nil)")
	wantReply(t, "cjson", evalKV(t, db, `return cjson.encode({1, 'a/b', {x = true}, cjson.null, 0.5, 1e100, "\1"})`, "0"),
		`[1,"a\/b",{"x":true},null,0.5,1e+100,"\u0001"]`)
	wantReply(t, "cjson decode", evalKV(t, db, `local v = cjson.decode('{"a":[1,2,{"b":null}],"c":"\\u00e9\\ud83d\\ude00"}') return {v.a[2], v.a[3].b == cjson.null, v.c}`, "0"),
		[]any{int64(2), int64(1), "é😀"})
	wantErrorPrefix(t, "cjson sparse", evalKV(t, db, "return cjson.encode({[1] = 1, [100] = 2})", "0"), "ERR user_script:1: Cannot serialise table: excessively sparse array")
	wantErrorPrefix(t, "cjson function", evalKV(t, db, "return cjson.encode({tostring})", "0"), "ERR user_script:1: Cannot serialise function: type not supported")
	wantErrorPrefix(t, "cjson bad", evalKV(t, db, "return cjson.decode('{1}')", "0"), "ERR user_script:1: Expected object key string but found invalid token at character 2")
	wantReply(t, "bit", evalKV(t, db, "return {bit.tobit(2^32 + 5), bit.bnot(0), bit.bor(1, 2, 4), bit.bxor(5, 1), bit.lshift(1, 31), bit.rshift(-1, 28), bit.arshift(-16, 2), bit.rol(1, 33), bit.ror(1, 1), bit.bswap(0x12345678), bit.tohex(255), bit.tohex(-1, -4)}", "0"),
		[]any{int64(5), int64(-1), int64(7), int64(4), int64(-2147483648), int64(15), int64(-4), int64(2), int64(-2147483648), int64(0x78563412), "000000ff", "FFFF"})
	// Arguments are formatted as Redis does (%.17g).
	runKV(db, []string{"DEL", "n"})
	evalKV(t, db, "redis.call('set', 'n', 1/3)", "0")
	wantReply(t, "17g", runKV(db, []string{"GET", "n"}), "0.33333333333333331")
	// Error positions in nested functions and loadstring chunks.
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

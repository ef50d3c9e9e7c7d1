package script

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kvorum/kvorum/internal/reply"
)

// TestGlobals: scripts cannot create or change globals or library
// tables, so a pooled state carries nothing from one run to the next.
func TestGlobals(t *testing.T) {
	for _, src := range []string{
		"x = 1", "_G.x = 1", "rawset(_G, 'x', 1)", "setmetatable(_G, nil)", "string.upper = nil",
		"rawset(string, 'upper', nil)", "table.insert(math, 1)", "table.sort(redis)", "getmetatable('').__index = {}",
		"rawset(getmetatable(''), '__index', {})", "setmetatable(getmetatable(''), {})", "redis.call = nil",
		"cjson.null = 1", "bit.band = nil", "coroutine.wrap = nil", "_G._G = nil", "KEYS = nil",
	} {
		for i := 0; i < 3; i++ {
			r := eval0(t, src)
			if r.Kind != reply.KindError || !strings.Contains(string(r.Str), "Attempt to modify a readonly table") {
				t.Fatalf("%q: %s", src, show(r))
			}
		}
	}
	wantReply(t, "undefined global", eval0(t, "return x"),
		"ERR:ERR user_script:1: Script attempted to access nonexistent global variable 'x' script: "+SHA1Hex([]byte("return x"))+", on @user_script:1.")
	// What one run does to its own tables is gone in the next.
	for i := 0; i < 20; i++ {
		r := eval0(t, "local t = getmetatable('') mine = 1 return 1")
		wantErrorPrefix(t, "create global", r, "ERR user_script:1: Attempt to modify a readonly table")
		r = eval(t, &fakeCaller{}, "return {type(rawget(_G, 'mine')), ('a'):upper(), string.upper('b'), type(math.random), #KEYS, ARGV[1]}", []string{"k"}, []string{fmt.Sprint(i)})
		wantReply(t, "fresh state", r, []any{"nil", "A", "B", "function", int64(1), fmt.Sprint(i)})
	}
	// The state of a run is per run: KEYS and ARGV of the last run are gone.
	wantReply(t, "keys", eval0(t, "return {#KEYS, #ARGV}"), []any{int64(0), int64(0)})
	// Library functions still work after all that.
	wantReply(t, "libs", eval0(t, "return {('a'):upper(), string.rep('x', 2), math.floor(1.5), table.concat({1, 2})}"),
		[]any{"A", "xx", int64(1), "12"})
}

// TestLimits: what would exhaust memory, stack or time fails with a
// Lua error, never crashes the process.
func TestLimits(t *testing.T) {
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
		r := eval0(t, c.src)
		got := fmt.Sprint(norm(r))
		if r.IsError() {
			got = string(r.Str)
		}
		if !strings.HasPrefix(got, c.want) {
			t.Errorf("%.80q:\n  got  %.300s\n  want %s", c.src, got, c.want)
		}
	}
}

// TestConversions covers what kv's differential file cannot: RESP3
// replies, tostring without addresses, cjson and bit.
func TestConversions(t *testing.T) {
	r := eval0(t, "redis.setresp(3) return {true, false}")
	if len(r.Elems) != 2 || r.Elems[0].Kind != reply.KindBool || r.Elems[0].Int != 1 || r.Elems[1].Kind != reply.KindBool {
		t.Errorf("resp3 booleans: %s", show(r))
	}
	// Error and status texts become one line; other bytes stay as they are.
	wantReply(t, "error reply", eval0(t, `return redis.error_reply("bad\255\r\nline")`), "ERR:ERR bad\xff  line")
	wantReply(t, "status reply", eval0(t, `return {ok = "s\255\ns"}`), "s\xff s")
	r = eval0(t, "return {double = 1.5}")
	if r.Kind != reply.KindDouble || r.Float != 1.5 {
		t.Errorf("double: %+v", r)
	}
	r = eval0(t, "return {set = {a = true, b = true}}")
	if r.Kind != reply.KindSet || len(r.Elems) != 2 {
		t.Errorf("set: %+v", r)
	}
	// tostring never prints an address.
	wantReply(t, "tostring", eval0(t, "local a, b = {}, {} return {tostring(a), tostring(b), tostring(a), tostring(tostring)}"),
		[]any{"table: 0x00000001", "table: 0x00000002", "table: 0x00000001", "function: 0x00000003"})
	wantReply(t, "cjson.null", eval0(t, "return tostring(cjson.null)"), "userdata: (nil)")
	wantReply(t, "cjson", eval0(t, `return cjson.encode({1, 'a/b', {x = true}, cjson.null, 0.5, 1e100, "\1"})`),
		`[1,"a\/b",{"x":true},null,0.5,1e+100,"\u0001"]`)
	wantReply(t, "cjson decode", eval0(t, `local v = cjson.decode('{"a":[1,2,{"b":null}],"c":"\\u00e9\\ud83d\\ude00"}') return {v.a[2], v.a[3].b == cjson.null, v.c}`),
		[]any{int64(2), int64(1), "é😀"})
	wantErrorPrefix(t, "cjson sparse", eval0(t, "return cjson.encode({[1] = 1, [100] = 2})"), "ERR user_script:1: Cannot serialise table: excessively sparse array")
	wantErrorPrefix(t, "cjson function", eval0(t, "return cjson.encode({tostring})"), "ERR user_script:1: Cannot serialise function: type not supported")
	wantErrorPrefix(t, "cjson bad", eval0(t, "return cjson.decode('{1}')"), "ERR user_script:1: Expected object key string but found invalid token at character 2")
	wantReply(t, "bit", eval0(t, "return {bit.tobit(2^32 + 5), bit.bnot(0), bit.bor(1, 2, 4), bit.bxor(5, 1), bit.lshift(1, 31), bit.rshift(-1, 28), bit.arshift(-16, 2), bit.rol(1, 33), bit.ror(1, 1), bit.bswap(0x12345678), bit.tohex(255), bit.tohex(-1, -4)}"),
		[]any{int64(5), int64(-1), int64(7), int64(4), int64(-2147483648), int64(15), int64(-4), int64(2), int64(-2147483648), int64(0x78563412), "000000ff", "FFFF"})
}

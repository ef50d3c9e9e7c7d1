package script

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/kvdiff"
	"github.com/kvorum/kvorum/internal/reply"
)

// fakeCaller stands in for the state machine: it records the commands a
// script calls and answers them from a table. Commands it does not know
// get Redis's unknown-command error; with readOnly set it refuses the
// commands listed in writes, as kv does for EVAL_RO.
type fakeCaller struct {
	calls    []string               // each call's arguments, joined by spaces
	replies  map[string]reply.Reply // by lower-case command name
	readOnly bool
}

var writes = map[string]bool{"set": true, "del": true, "incr": true}

func (f *fakeCaller) Call(args [][]byte) reply.Reply {
	parts := make([]string, len(args))
	for i, a := range args {
		parts[i] = string(a)
	}
	f.calls = append(f.calls, strings.Join(parts, " "))
	name := strings.ToLower(parts[0])
	if f.readOnly && writes[name] {
		return reply.Error("ERR Write commands are not allowed from read-only scripts.")
	}
	if r, ok := f.replies[name]; ok {
		return r
	}
	if writes[name] {
		return reply.OK
	}
	return reply.Error("ERR Unknown Redis command called from script")
}

func (f *fakeCaller) IsCommand(name []byte) bool {
	n := strings.ToLower(string(name))
	_, ok := f.replies[n]
	return ok || writes[n]
}

// eval compiles and runs src as EVAL would, with a fixed seed.
func eval(t testing.TB, c Caller, src string, keys, argv []string) reply.Reply {
	t.Helper()
	s, r := Compile(SHA1Hex([]byte(src)), []byte(src))
	if s == nil {
		return r
	}
	return Run(c, s, bytesOf(keys), bytesOf(argv), 42, nil)
}

// eval0 runs src without keys or arguments and with a caller that knows
// nothing.
func eval0(t testing.TB, src string) reply.Reply {
	t.Helper()
	return eval(t, &fakeCaller{}, src, nil, nil)
}

func bytesOf(ss []string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

// norm is a reply as a RESP2 client reads it: "<nil>", int64, string,
// "ERR:<text>", []any.
func norm(r reply.Reply) any { return kvdiff.NormalizeReply("", r) }

func show(r reply.Reply) string { return fmt.Sprintf("%#v", norm(r)) }

func wantReply(t *testing.T, what string, got reply.Reply, want any) {
	t.Helper()
	if g := norm(got); fmt.Sprint(g) != fmt.Sprint(want) {
		t.Errorf("%s: got %#v, want %#v", what, g, want)
	}
}

func wantErrorPrefix(t *testing.T, what string, got reply.Reply, prefix string) {
	t.Helper()
	if got.Kind != reply.KindError || !strings.HasPrefix(string(got.Str), prefix) {
		t.Errorf("%s: got %s, want an error starting with %q", what, show(got), prefix)
	}
}

var budgetErr = fmt.Sprintf("ERR script exceeded its budget of %d Lua instructions; kvorum runs scripts at apply time on every replica, see README", Budget)

// TestCallReachesCaller: redis.call hands the caller the arguments as
// Redis converts them (numbers as %.17g), KEYS and ARGV are the run's, and
// the caller's reply comes back converted to Lua.
func TestCallReachesCaller(t *testing.T) {
	c := &fakeCaller{replies: map[string]reply.Reply{
		"get":     reply.BulkString("v"),
		"hgetall": reply.Map(reply.BulkString("f"), reply.BulkString("x")),
		"exists":  reply.Int(1),
		"ping":    reply.Status("PONG"),
		"nothing": reply.Nil,
	}}
	r := eval(t, c, `
		redis.call('SET', KEYS[1], ARGV[1], 'PX', 1/3)
		local v = redis.call('get', KEYS[1])
		local h = redis.call('hgetall', 'h')
		return {v, h[1], h[2], redis.call('exists', KEYS[2]), redis.call('ping').ok, tostring(redis.call('nothing')), 2.9, #KEYS + #ARGV}`,
		[]string{"k1", "k2"}, []string{"a1"})
	wantReply(t, "reply", r, []any{"v", "f", "x", int64(1), "PONG", "false", int64(2), int64(3)})
	want := []string{"SET k1 a1 PX 0.33333333333333331", "get k1", "hgetall h", "exists k2", "ping", "nothing"}
	if fmt.Sprint(c.calls) != fmt.Sprint(want) {
		t.Errorf("calls: got %q, want %q", c.calls, want)
	}
	// RESP3: the same map reply becomes a {map = ...} table and goes back
	// to the client as a map.
	c.calls = nil
	r = eval(t, c, "redis.setresp(3) local m = redis.call('hgetall', 'h') return m", nil, nil)
	if r.Kind != reply.KindMap || len(r.Elems) != 2 || string(r.Elems[0].Str) != "f" || string(r.Elems[1].Str) != "x" {
		t.Errorf("resp3 map: %s", show(r))
	}
	// Argument errors never reach the caller.
	c.calls = nil
	wantReply(t, "no args", eval(t, c, "return redis.pcall()", nil, nil), "ERR:ERR Please specify at least one argument for this redis lib call")
	wantErrorPrefix(t, "table arg", eval(t, c, "return redis.call('get', {})", nil, nil),
		"ERR Lua redis lib command arguments must be strings or integers script: ")
	if len(c.calls) != 0 {
		t.Errorf("bad arguments reached the caller: %q", c.calls)
	}
	// redis.acl_check_cmd asks the caller whether the command exists.
	wantReply(t, "acl known", eval(t, c, "return redis.acl_check_cmd('get', 'k')", nil, nil), int64(1))
	wantErrorPrefix(t, "acl unknown", eval(t, c, "return redis.acl_check_cmd('nosuch')", nil, nil),
		"ERR Invalid command passed to redis.acl_check_cmd()")
}

// TestCallerRefusal: a command the caller refuses (here: a write in a
// read-only run) raises an error at the script's position and stops it;
// redis.pcall returns the error as a table instead.
func TestCallerRefusal(t *testing.T) {
	c := &fakeCaller{readOnly: true, replies: map[string]reply.Reply{"get": reply.BulkString("v")}}
	src := "redis.call('get', 'k')\nredis.call('set', 'k', 'x')\nredis.call('get', 'after')"
	wantReply(t, "call", eval(t, c, src, nil, nil),
		"ERR:ERR Write commands are not allowed from read-only scripts. script: "+SHA1Hex([]byte(src))+", on @user_script:2.")
	if want := []string{"get k", "set k x"}; fmt.Sprint(c.calls) != fmt.Sprint(want) {
		t.Errorf("calls: got %q, want %q", c.calls, want)
	}
	wantReply(t, "pcall", eval(t, c, "local r = redis.pcall('del', 'k') return {r.err, redis.call('get', 'k')}", nil, nil),
		[]any{"ERR Write commands are not allowed from read-only scripts.", "v"})
	// An error with its own code keeps it.
	c.replies["busy"] = reply.Error("BUSYKEY Target key name already exists.")
	wantReply(t, "code", eval(t, c, "return redis.pcall('busy').err", nil, nil), "BUSYKEY Target key name already exists.")
}

// TestBudgetStopsLoops: endless loops fail with the budget error, the same
// way every time, whatever they do inside pcall or a coroutine; a loop of
// half the budget succeeds.
func TestBudgetStopsLoops(t *testing.T) {
	for _, src := range []string{
		"while true do end",
		"local i = 0 while true do i = i + 1 end",
		"local t = {} local i = 0 while true do i = i + 1 t[i % 100 + 1] = i end",
		"local function f() while true do end end while true do pcall(f) end",
		"local co = coroutine.wrap(function() while true do end end) co()",
		"local s = string.rep('a', 1000) while true do s:find('b') end",
		"while true do redis.pcall('get', 'k') end",
	} {
		for i := 0; i < 2; i++ {
			start := time.Now()
			r := eval0(t, src)
			d := time.Since(start)
			if string(r.Str) != budgetErr {
				t.Fatalf("%q: got %s", src, show(r))
			}
			t.Logf("%-70q %v (%.1f ns per budget unit)", src, d, float64(d.Nanoseconds())/Budget)
		}
	}
	// Commands before the budget ran out were called; none after.
	c := &fakeCaller{}
	r := eval(t, c, "redis.call('set', 'before', '1') local ok = pcall(function() while true do end end) redis.call('set', 'after', '1')", nil, nil)
	if string(r.Str) != budgetErr || fmt.Sprint(c.calls) != "[set before 1]" {
		t.Errorf("got %s after calls %q", show(r), c.calls)
	}
	// A numeric for loop costs one instruction per iteration (FORLOOP).
	wantReply(t, "half the budget", eval0(t, fmt.Sprintf("local n = 0 for i = 1, %d do end return 1", Budget/2)), int64(1))
	wantReply(t, "the budget and a bit", eval0(t, fmt.Sprintf("for i = 1, %d do end return 1", Budget+10)), "ERR:"+budgetErr)
}

// TestSeed: math.random draws from the run's seed: the same seed, the same
// numbers; math.randomseed restarts the sequence as Redis does.
func TestSeed(t *testing.T) {
	s, _ := Compile(SHA1Hex([]byte("x")), []byte("return {math.random(1000000000), math.random(1000000000)}"))
	a := Run(&fakeCaller{}, s, nil, nil, 1, nil)
	b := Run(&fakeCaller{}, s, nil, nil, 1, nil)
	c := Run(&fakeCaller{}, s, nil, nil, 2, nil)
	if show(a) != show(b) {
		t.Errorf("same seed: %s vs %s", show(a), show(b))
	}
	if show(a) == show(c) {
		t.Errorf("seeds 1 and 2 draw the same numbers: %s", show(a))
	}
	// redis-server 7.0 after math.randomseed(42).
	wantReply(t, "randomseed", eval0(t, "math.randomseed(42) return {math.random(100), math.random(100)}"), []any{int64(75), int64(35)})
}

// TestCompileCacheBounded: the node-local compile cache stays bounded, and
// an evicted script compiles again.
func TestCompileCacheBounded(t *testing.T) {
	for i := 0; i < cacheSize+50; i++ {
		eval0(t, fmt.Sprintf("return %d", i))
	}
	compileCache.Lock()
	n := len(compileCache.m)
	compileCache.Unlock()
	if n > cacheSize {
		t.Fatalf("compile cache holds %d scripts", n)
	}
	if cachedScript(SHA1Hex([]byte("return 0"))) != nil {
		t.Fatal("the oldest script was not evicted")
	}
	wantReply(t, "evicted still runs", eval0(t, "return 0"), int64(0))
}

// TestConcurrentRuns: scripts compile and run on many goroutines at once
// (EVAL_RO is served on the read path, one connection goroutine each):
// the compiled-script cache and the VM pool are shared, and every run
// still sees only its own KEYS, ARGV and caller. Run under -race.
func TestConcurrentRuns(t *testing.T) {
	const workers, runs = 4, 50
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func() {
			for i := 0; i < runs; i++ {
				c := &fakeCaller{replies: map[string]reply.Reply{"get": reply.BulkString(fmt.Sprint(w))}}
				// One body shared by all workers (the cache) and one per run.
				shared := eval(t, c, "return {KEYS[1], ARGV[1], redis.call('get', KEYS[1])}", []string{"k"}, []string{fmt.Sprint(i)})
				own := eval(t, c, fmt.Sprintf("return %d + %d", w, i), nil, nil)
				want := reply.Array(reply.BulkString("k"), reply.BulkString(fmt.Sprint(i)), reply.BulkString(fmt.Sprint(w)))
				if fmt.Sprint(shared) != fmt.Sprint(want) || own.Kind != reply.KindInt || own.Int != int64(w+i) {
					errs <- fmt.Errorf("worker %d run %d: got %v and %v", w, i, shared, own)
					return
				}
			}
			errs <- nil
		}()
	}
	for w := 0; w < workers; w++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

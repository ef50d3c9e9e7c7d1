package kv

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/kvorum/kvorum/internal/redisnum"
	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/ast"
	"github.com/yuin/gopher-lua/parse"
)

// Lua scripting: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT, on the
// embedded Lua 5.1 VM github.com/yuin/gopher-lua.
//
// # Where scripts run
//
// EVAL, EVALSHA and SCRIPT are write commands for kvorum (Redis flags them
// only may-replicate): each is one Raft log entry, and the script runs at
// apply time, on every replica, against the round's batch; redis.call runs
// nested commands in the same context (ctx.call). So a script is atomic and
// every replica must compute exactly the same thing. EVAL_RO and
// EVALSHA_RO are reads (Read, no batch): a write command inside one fails
// with Redis 7.0's "Write commands are not allowed from read-only scripts."
//
// # Determinism
//
//   - No clock but the entry's: redis.call('TIME') answers from ctx.now
//     (the leader's timestamp in the log entry). No os, io, debug,
//     require, dofile, loadfile, print, getfenv, setfenv (Redis 7.0.15 has
//     none of them either); loadstring and load compile through the same
//     pipeline as scripts.
//   - math.random is Redis's redisLrand48 generator, seeded at the start of
//     every run from ctx.rand() (derived from the log position), so every
//     replica draws the same numbers; math.randomseed(n) reseeds it exactly
//     as Redis does (the same sequence as redis-server after the same seed).
//   - Table iteration (pairs, next) in gopher-lua is deterministic: the
//     array part in index order, then the hash part in insertion order
//     (LTable keeps a keys slice and a key->index map, table.go Next), so
//     the same program visits keys in the same order on every replica.
//     Library tables are built in sorted key order, and scripts only see
//     read-only views of them anyway.
//   - tostring() of tables, functions, threads and userdata prints a
//     per-run sequence number instead of a memory address; collectgarbage
//     and gcinfo return 0.
//   - Numbers are float64 as in Lua 5.1. Conversions of out-of-range floats
//     to integers follow x86-64 (math.MinInt64), whatever the machine; the
//     math library is Go's, so replicas should run on the same
//     architecture (Go's math functions may differ in the last bit between
//     amd64 and arm64, and gopher-lua converts floats to ints internally).
//
// # Isolation between scripts
//
// Lua states are pooled. Scripts see a global table that is an empty,
// read-only view (metatable __index/__newindex) of the real globals, so, as
// in Redis 7, creating or assigning a global fails with "Attempt to modify
// a readonly table" and reading an undefined one with "Script attempted to
// access nonexistent global variable"; every library table (string, math,
// table, redis, ...) is a read-only view as well, and rawset,
// setmetatable, table.insert/remove/sort refuse them, so nothing a script
// does can reach the next script run on the same state. After each run the
// state is checked (views still empty, metatables and environment
// unchanged) and discarded if anything differs.
//
// # Budget
//
// Wall time would differ between replicas, so a script's cost is counted
// in Lua VM instructions: gopher-lua's main loop calls ctx.Done() on the
// LState's context once per instruction (mainLoopWithContext, vm.go), and
// budgetCtx.Done counts the calls and returns a closed channel once the
// budget is spent, which raises an error at the next instruction (also
// inside pcall, so a script cannot catch it for long). What costs more
// than one instruction charges the same budget: one unit per 64 bytes a
// library function or a reply allocates (string.rep, string.format,
// string.gsub, table.concat, concatenation, cjson, redis.call replies,
// ...), per nil slot appended to a table, per 16 steps of pattern
// matching, per 8 table elements moved or compared by the table library,
// per 4 values passed to or returned by a Go function beyond 8, four per
// element of the script's reply. A script that exceeds scriptBudget
// fails, identically on every replica, with
//
//	ERR script exceeded its budget of N Lua instructions; kvorum runs scripts at apply time on every replica, see README
//
// Writes it made before stay (as for any script error in Redis, there is
// no rollback).
//
// To keep costs honest, scripts are compiled from a rewritten syntax tree
// (scriptRewriter): a .. b .. c becomes one call of a helper that checks
// and charges the result's size (strings are limited to 512 MB,
// proto-max-bulk-len), #x a call that finds a border in O(log n)
// (gopher-lua's Len scans trailing nils), t[k] = v charges the nil slots
// gopher-lua would append when k is far beyond the array part (it has no
// hash part for such keys), and ..., {...} and {f()} charge the values they
// copy. A store with a computed key therefore costs about six units
// instead of one. Memory is bounded by the budget too: at most about 64
// bytes per unit of charged allocations (some 1 GB for a whole budget)
// plus what single instructions allocate (a table, a closure: tens of
// bytes each). What remains O(length) in one instruction, uncharged, is
// comparing or hashing long strings (==, <, t[s]) in the VM.
//
// # Script cache
//
// SCRIPT LOAD and EVAL store the script's body, replicated, under the
// hidden key scriptPrefix + sha1 hex (keys.go: in the snapshot span, kept by
// FLUSHALL); EVALSHA reads it back; SCRIPT FLUSH deletes the prefix.
// Compiled code is cached in memory by sha (compileCache; compilation is a
// pure function of the body). EVAL_RO and EVALSHA_RO, being reads, do not
// store anything: after EVAL_RO of a new script SCRIPT EXISTS says 0 (Redis
// says 1).
//
// # Differences from Redis 7.0
//
// Lua runtime error texts are gopher-lua's for errors raised by the VM
// itself (indexing or calling nil, arithmetic on a non-number, comparing
// tables), without Lua 5.1's variable names; Lua 5.1's for concatenation,
// length, global access, read-only tables, stack overflow and the library
// functions kvorum implements itself (string, table, math.random,
// tonumber, tostring, error, pcall, unpack, ...). Compile errors are
// gopher-lua's ("Error compiling script (new function): ..." as in Redis,
// then gopher-lua's text); syntax nesting deeper than 1000 levels does
// not compile. # of a table with holes may give another (valid) border
// than Lua 5.1: gopher-lua keeps integer keys below 2^26 in the array
// part. struct and cmsgpack are not available; cjson and bit are.
// collectgarbage('count') is 0. redis.log writes nothing,
// redis.set_repl and redis.replicate_commands are accepted and do nothing
// (kvorum always replicates the whole script), SCRIPT KILL always answers
// NOTBUSY (a script cannot run longer than its budget) and SCRIPT DEBUG is
// not supported. RESP3 (redis.setresp(3)) is supported except big numbers,
// which become bulk strings.

// scriptBudget is a script's instruction budget. Measured on the
// development machine (2 cores, go1.26, amd64; TestScriptBudget,
// BenchmarkScriptBudget): an empty loop runs at 5.5 ns per instruction
// (0.08 s for the whole budget), an arithmetic loop at 11 ns (0.16 s), a
// loop with arithmetic and a table store at 26 ns (0.39 s), pattern
// matching at 17 ns per unit (0.26 s). So a script that exhausts the
// budget costs about 0.1-0.4 s, on every replica, during which the
// replica applies nothing else.
const scriptBudget = 15_000_000

const (
	scriptBytesPerUnit = 64            // allocation charged as one instruction
	scriptMaxString    = maxStringSize // longest string a script can build
	scriptFreeGap      = 8             // nil slots a table store may append uncharged
	scriptMaxResults   = 8000          // unpack, string.byte (Lua 5.1's LUAI_MAXCSTACK)
	scriptMaxDepth     = 1000          // nesting of replies and syntax
	scriptMaxThreads   = 200           // coroutines per run
	scriptCallStack    = 2000          // Lua call frames (80 bytes each, allocated up front)
	scriptRegistryMax  = 256 << 10     // Lua stack slots
	scriptPoolSize     = 16            // idle Lua states kept
	scriptCacheSize    = 1000          // compiled scripts kept
	scriptSourceName   = "user_script"
)

var (
	errNoScript = Error("NOSCRIPT No matching script. Please use EVAL.")
	errTooDeep  = Error("ERR reached lua stack limit")
)

func errBudget() Reply {
	return Error(fmt.Sprintf("ERR script exceeded its budget of %d Lua instructions; kvorum runs scripts at apply time on every replica, see README", scriptBudget))
}

func init() {
	const fl = "noscript stale skip_monitor no_mandatory_keys movablekeys"
	def("eval", -3, fl, 0, 0, 0, "scripting", "Executes a server-side Lua script.", cmdEval, checkEval)
	def("evalsha", -3, fl, 0, 0, 0, "scripting", "Executes a server-side Lua script by SHA1 digest.", cmdEvalSha, checkEvalSha)
	def("eval_ro", -3, "readonly "+fl, 0, 0, 0, "scripting", "Executes a read-only server-side Lua script.", cmdEval, checkEval)
	def("evalsha_ro", -3, "readonly "+fl, 0, 0, 0, "scripting", "Executes a read-only server-side Lua script by SHA1 digest.", cmdEvalSha, checkEvalSha)
	def("script", -2, "", 0, 0, 0, "scripting", "A container for Lua scripts management commands.", cmdScript, checkScript)
	// Scripts and the script cache are replicated through Raft: a script
	// runs at apply time on every replica.
	table["eval"].spec.Write = true
	table["evalsha"].spec.Write = true
	table["script"].spec.Write = true
}

// checkNumKeys validates EVAL's numkeys as Redis does before anything else.
func checkNumKeys(args [][]byte) (Reply, bool) {
	n, ok := redisnum.ParseInt(args[2])
	if !ok {
		return errNotInt, false
	}
	if n > int64(len(args)-3) {
		return Error("ERR Number of keys can't be greater than number of args"), false
	}
	if n < 0 {
		return Error("ERR Number of keys can't be negative"), false
	}
	return Reply{}, true
}

func checkEval(args [][]byte) (Reply, bool) { return checkNumKeys(args) }

func checkEvalSha(args [][]byte) (Reply, bool) {
	if len(args[1]) != 40 {
		return errNoScript, false
	}
	return checkNumKeys(args)
}

var scriptSubArity = map[string]int{"debug": 3, "exists": -3, "flush": -2, "help": 2, "kill": 2, "load": 3}

func checkScript(args [][]byte) (Reply, bool) {
	sub := strings.ToLower(string(args[1]))
	ar, ok := scriptSubArity[sub]
	if !ok {
		b := appendCString([]byte("ERR unknown subcommand '"), args[1], 128)
		return Error(string(sanitizeError(append(b, "'. Try SCRIPT HELP."...)))), false
	}
	if (ar > 0 && len(args) != ar) || (ar < 0 && len(args) < -ar) {
		return wrongArity("script|" + sub), false
	}
	return Reply{}, true
}

func scriptKey(sha string) []byte { return append(append([]byte(nil), scriptPrefix...), sha...) }

func sha1Hex(b []byte) string {
	h := sha1.Sum(b)
	return hex.EncodeToString(h[:])
}

// loadScript returns the stored body of script sha (lower case hex).
func (x *ctx) loadScript(sha string) ([]byte, bool, error) {
	v, c, err := x.r.Get(scriptKey(sha))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	body := append([]byte(nil), v...)
	_ = c.Close()
	return body, true, nil
}

// storeScript adds body to the replicated script cache (if absent).
func (x *ctx) storeScript(sha string, body []byte) error {
	if x.w == nil {
		return nil
	}
	_, c, err := x.w.Get(scriptKey(sha))
	if err == nil {
		return c.Close()
	}
	if !errors.Is(err, pebble.ErrNotFound) {
		return err
	}
	return x.w.Set(scriptKey(sha), body, nil)
}

func cmdEval(x *ctx, args [][]byte) Reply {
	body := args[1]
	sha := sha1Hex(body)
	cs, r := compileScript(sha, body)
	if cs == nil {
		return r
	}
	if err := x.storeScript(sha, body); err != nil {
		return errStorage(err)
	}
	return runEval(x, cs, args)
}

func cmdEvalSha(x *ctx, args [][]byte) Reply {
	// The replicated store decides whether the script exists (SCRIPT FLUSH
	// removes it on every replica); the compile cache only saves work.
	sha := strings.ToLower(string(args[1]))
	body, ok, err := x.loadScript(sha)
	if err != nil {
		return errStorage(err)
	}
	if !ok {
		return errNoScript
	}
	cs, r := compileScript(sha, body)
	if cs == nil {
		return r
	}
	return runEval(x, cs, args)
}

func runEval(x *ctx, cs *compiledScript, args [][]byte) Reply {
	nk, _ := redisnum.ParseInt(args[2])
	keys, argv := args[3:3+nk], args[3+nk:]
	ro := eq(args[0], "eval_ro") || eq(args[0], "evalsha_ro")
	if ro && cs.shebang && !cs.noWrites {
		return Error("ERR Can not execute a script with write flag using *_ro command.")
	}
	vm := getLuaVM()
	r, clean := vm.exec(x, cs, keys, argv, ro || (cs.shebang && cs.noWrites))
	putLuaVM(vm, clean)
	return r
}

var scriptHelp = []string{
	"SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"DEBUG (YES|SYNC|NO)",
	"    Set the debug mode for subsequent scripts executed.",
	"EXISTS <sha1> [<sha1> ...]",
	"    Return information about the existence of the scripts in the script cache.",
	"FLUSH [ASYNC|SYNC]",
	"    Flush the Lua scripts cache. Very dangerous on replicas.",
	"    When called without the optional mode argument, the behavior is determined by the",
	"    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
	"    * ASYNC: Asynchronously flush the scripts cache.",
	"    * SYNC: Synchronously flush the scripts cache.",
	"KILL",
	"    Kill the currently executing Lua script.",
	"LOAD <script>",
	"    Load a script into the scripts cache without executing it.",
	"HELP",
	"    Prints this help.",
}

func cmdScript(x *ctx, args [][]byte) Reply {
	switch strings.ToLower(string(args[1])) {
	case "help":
		out := make([]Reply, len(scriptHelp))
		for i, l := range scriptHelp {
			out[i] = Status(l)
		}
		return Array(out...)
	case "flush":
		if len(args) == 3 && !eq(args[2], "sync") && !eq(args[2], "async") || len(args) > 3 {
			return Error("ERR SCRIPT FLUSH only support SYNC|ASYNC option")
		}
		if x.w == nil {
			return Error("ERR internal: SCRIPT FLUSH sent to Read")
		}
		end := append(append([]byte(nil), scriptPrefix[:len(scriptPrefix)-1]...), scriptPrefix[len(scriptPrefix)-1]+1)
		if err := x.w.DeleteRange(scriptPrefix, end, nil); err != nil {
			return errStorage(err)
		}
		return OK
	case "exists":
		out := make([]Reply, len(args)-2)
		for i, a := range args[2:] {
			out[i] = Int(0)
			if len(a) != 40 {
				continue
			}
			_, ok, err := x.loadScript(strings.ToLower(string(a)))
			if err != nil {
				return errStorage(err)
			}
			if ok {
				out[i] = Int(1)
			}
		}
		return Array(out...)
	case "load":
		body := args[2]
		sha := sha1Hex(body)
		cs, r := compileScript(sha, body)
		if cs == nil {
			return r
		}
		if err := x.storeScript(sha, body); err != nil {
			return errStorage(err)
		}
		return BulkString(sha)
	case "kill":
		return Error("NOTBUSY No scripts in execution right now.")
	case "debug":
		if !eq(args[2], "yes") && !eq(args[2], "sync") && !eq(args[2], "no") {
			return Error("ERR Use SCRIPT DEBUG YES/SYNC/NO")
		}
		return Error("ERR 'SCRIPT DEBUG' is not supported by kvorum: scripts run at apply time on every replica")
	}
	return Error("ERR internal: unknown SCRIPT subcommand")
}

// compiledScript is a script compiled to gopher-lua bytecode; immutable,
// shared by every state.
type compiledScript struct {
	sha      string
	proto    *lua.FunctionProto
	shebang  bool // the script declared flags ("#!lua ...")
	noWrites bool // ... and no-writes among them
}

// compileCache maps sha -> *compiledScript. Bounded: when full, the oldest
// entry goes. Compilation is a pure function of the body, so what the
// cache holds changes speed only, never results.
var compileCache struct {
	sync.Mutex
	m     map[string]*compiledScript
	order []string
}

func cachedScript(sha string) *compiledScript {
	compileCache.Lock()
	defer compileCache.Unlock()
	return compileCache.m[sha]
}

// compileScript compiles body (whose sha1 is sha); on error it returns nil
// and Redis's error reply.
func compileScript(sha string, body []byte) (*compiledScript, Reply) {
	if cs := cachedScript(sha); cs != nil {
		return cs, Reply{}
	}
	cs := &compiledScript{sha: sha}
	src := body
	if len(body) >= 2 && body[0] == '#' && body[1] == '!' {
		n, msg := parseShebang(body, cs)
		if msg != "" {
			return nil, Error("ERR " + msg)
		}
		src = body[n:] // keep the line feed: line numbers stay right
	}
	proto, err := compileLua(string(src), scriptSourceName)
	if err != nil {
		return nil, Error(string(sanitizeError([]byte("ERR Error compiling script (new function): " + err.Error()))))
	}
	cs.proto = proto
	return cacheScript(cs), Reply{}
}

// cacheScript adds cs to compileCache under cs.sha; it returns the entry
// already there if any.
func cacheScript(cs *compiledScript) *compiledScript {
	compileCache.Lock()
	defer compileCache.Unlock()
	if compileCache.m == nil {
		compileCache.m = map[string]*compiledScript{}
	}
	if old, ok := compileCache.m[cs.sha]; ok {
		return old
	}
	if len(compileCache.order) >= scriptCacheSize {
		delete(compileCache.m, compileCache.order[0])
		compileCache.order = compileCache.order[1:]
	}
	compileCache.m[cs.sha] = cs
	compileCache.order = append(compileCache.order, cs.sha)
	return cs
}

// parseShebang parses Redis 7's "#!lua flags=..." first line; it returns
// the line's length or an error text.
func parseShebang(body []byte, cs *compiledScript) (int, string) {
	nl := strings.IndexByte(string(body), '\n')
	if nl < 0 {
		return 0, "Invalid script shebang"
	}
	parts := strings.Fields(string(body[:nl]))
	if len(parts) == 0 {
		return 0, "Invalid engine in script shebang"
	}
	if parts[0] != "#!lua" {
		return 0, "Unexpected engine in script shebang: " + parts[0]
	}
	cs.shebang = true
	for _, p := range parts[1:] {
		if !strings.HasPrefix(p, "flags=") {
			return 0, "Unknown lua shebang option: " + p
		}
		if p == "flags=" {
			continue
		}
		for _, f := range strings.Split(p[len("flags="):], ",") {
			switch f {
			case "no-writes":
				cs.noWrites = true
			case "allow-oom", "allow-stale", "no-cluster", "allow-cross-slot-keys":
			default:
				return 0, "Unexpected flag in script shebang: " + f
			}
		}
	}
	return nl, ""
}

// compileLua parses src, rewrites its syntax tree (see scriptRewriter) and
// compiles it.
func compileLua(src, name string) (proto *lua.FunctionProto, err error) {
	defer func() {
		if p := recover(); p != nil {
			proto, err = nil, fmt.Errorf("%v", p)
		}
	}()
	chunk, err := parse.Parse(strings.NewReader(src), name)
	if err != nil {
		return nil, err
	}
	rw := &scriptRewriter{}
	if chunk, err = rw.chunk(chunk); err != nil {
		return nil, err
	}
	return lua.Compile(chunk, name)
}

// ---------------------------------------------------------------------------
// The budget.

// budgetCtx is the LState's context: its Done is called once per VM
// instruction, so it counts them; library functions spend from the same
// counter (luaVM.charge).
type budgetCtx struct {
	left      int64
	exhausted bool
}

var closedDone = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

var errBudgetExceeded = errors.New("script budget exceeded")

func (b *budgetCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (b *budgetCtx) Err() error                  { return errBudgetExceeded }
func (b *budgetCtx) Value(any) any               { return nil }

func (b *budgetCtx) Done() <-chan struct{} {
	b.left--
	if b.left < 0 {
		b.exhausted = true
		return closedDone
	}
	return nil
}

var _ context.Context = (*budgetCtx)(nil)

// ---------------------------------------------------------------------------
// Lua states.

// luaVM is one pooled Lua state with its sandbox.
type luaVM struct {
	L         *lua.LState
	env       *lua.LTable                 // read-only view of globals: what scripts see as _G
	globals   *lua.LTable                 // the real globals
	globalsMT *lua.LTable                 // globals' metatable (nonexistent global errors)
	strMT     *lua.LTable                 // the metatable of strings
	views     map[*lua.LTable]*lua.LTable // read-only view -> its metatable
	viewOf    map[*lua.LTable]*lua.LTable // table -> its read-only view
	protected map[*lua.LTable]bool        // tables scripts may not modify
	hiddenMT  map[*lua.LTable]lua.LValue  // internal metatable -> what getmetatable shows
	handler   *lua.LFunction              // the error handler of a run
	resume    *lua.LFunction              // coroutine.resume
	coCreateG lua.LGFunction              // gopher-lua's coroutine.create
	null      *lua.LUserData              // cjson.null
	budget    budgetCtx
	run       scriptRun
	fnAPI     *fnAPI // the load-time environment of functions (function.go), built on first use
}

// scriptRun is the state of one script execution.
type scriptRun struct {
	x         *ctx
	sha       string // the script's sha, or the function's name
	source    string // chunk name of the code: scriptSourceName or functionSourceName
	readOnly  bool
	resp      int // protocol of redis.call replies: 2 or 3 (redis.setresp)
	rng       uint64
	ids       map[lua.LValue]int // tostring ids
	chunks    map[string]string  // loadstring chunks: message name -> chunk name
	threads   int
	allocated int64 // bytes charged
	steps     int64 // cjson work, charged by 16
	err       *scriptErr
	cjson     cjsonConfig
	tooDeep   bool    // the result nests deeper than scriptMaxDepth
	fnLoad    *fnLoad // FUNCTION LOAD in progress: what register_function collects
}

type scriptErr struct{ msg, source, line string }

var luaPool struct {
	sync.Mutex
	free []*luaVM
}

func getLuaVM() *luaVM {
	luaPool.Lock()
	if n := len(luaPool.free); n > 0 {
		vm := luaPool.free[n-1]
		luaPool.free = luaPool.free[:n-1]
		luaPool.Unlock()
		return vm
	}
	luaPool.Unlock()
	return newLuaVM()
}

func putLuaVM(vm *luaVM, clean bool) {
	if clean {
		luaPool.Lock()
		if len(luaPool.free) < scriptPoolSize {
			luaPool.free = append(luaPool.free, vm)
			luaPool.Unlock()
			return
		}
		luaPool.Unlock()
	}
	vm.L.Close()
}

// gopherLibs holds the gopher-lua library functions kvorum reuses, taken
// from a scratch state (so that no function of a script's state has ever
// had gopher-lua's full global table, with dofile and require, as its
// environment).
var gopherLibs = sync.OnceValue(func() map[string]lua.LGFunction {
	L := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer L.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.CoroutineLibName, lua.OpenCoroutine}} {
		L.Push(L.NewFunction(lib.open))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	out := map[string]lua.LGFunction{}
	g := func(prefix string, t *lua.LTable) {
		t.ForEach(func(k, v lua.LValue) {
			if f, ok := v.(*lua.LFunction); ok && f.IsG && len(f.Upvalues) == 0 {
				out[prefix+k.String()] = f.GFunction
			}
		})
	}
	g("", L.G.Global)
	g("coroutine.", L.GetGlobal("coroutine").(*lua.LTable))
	return out
})

// ltableArray is the index of LTable's array field: its length is the
// array part's size, which gopher-lua does not export (see arrayLen).
var ltableArray = func() int {
	f, ok := reflect.TypeOf(lua.LTable{}).FieldByName("array")
	if !ok || f.Type != reflect.TypeOf([]lua.LValue(nil)) {
		panic("kv: gopher-lua's LTable has no array field")
	}
	return f.Index[0]
}()

// arrayLen returns the size of t's array part (gopher-lua appends nil slots
// up to an integer key stored beyond it).
func arrayLen(t *lua.LTable) int { return reflect.ValueOf(t).Elem().Field(ltableArray).Len() }

func newLuaVM() *luaVM {
	L := lua.NewState(lua.Options{
		SkipOpenLibs:     true,
		CallStackSize:    scriptCallStack,
		RegistrySize:     1024,
		RegistryMaxSize:  scriptRegistryMax,
		RegistryGrowStep: 4096,
		// A fixed call stack: gopher-lua's growing one panics without a
		// position when full, the fixed one raises "stack overflow".
		MinimizeStackMemory: false,
	})
	vm := &luaVM{L: L, views: map[*lua.LTable]*lua.LTable{}, viewOf: map[*lua.LTable]*lua.LTable{}, protected: map[*lua.LTable]bool{},
		hiddenMT: map[*lua.LTable]lua.LValue{}}
	vm.env = L.CreateTable(0, 0)
	vm.globals = L.CreateTable(0, 64)
	// Every function created from now on has the read-only view as its
	// environment (LState.NewFunction uses L.Env).
	L.G.Global = vm.env
	L.Env = vm.env
	libs := gopherLibs()
	fn := func(f lua.LGFunction) *lua.LFunction { return L.NewFunction(vm.metered(f)) }

	lib := func(name string, fns map[string]lua.LGFunction, extra map[string]lua.LValue) *lua.LTable {
		t := L.CreateTable(0, len(fns)+len(extra))
		names := make([]string, 0, len(fns)+len(extra))
		for n := range fns {
			names = append(names, n)
		}
		for n := range extra {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if f, ok := fns[n]; ok {
				t.RawSetString(n, fn(f))
			} else {
				t.RawSetString(n, extra[n])
			}
		}
		if name != "" {
			vm.globals.RawSetString(name, vm.view(t))
		}
		return t
	}

	// Base library: what Redis 7.0.15 has (no print, dofile, loadfile,
	// require, module, newproxy, getfenv, setfenv).
	base := map[string]lua.LGFunction{
		"assert": libs["assert"], "rawequal": libs["rawequal"], "rawget": libs["rawget"],
		"select": libs["select"], "type": libs["type"], "xpcall": libs["xpcall"], "next": libs["next"],
		"collectgarbage": luaZero, "gcinfo": luaZero,
		"error": vm.luaErrorFn, "pcall": vm.pcall, "tostring": vm.tostringFn,
		"tonumber": luaTonumber, "unpack": vm.unpack, "rawset": vm.rawset,
		"getmetatable": vm.getmetatable, "setmetatable": vm.setmetatable,
		"loadstring": vm.loadstring, "load": vm.load, "pairs": vm.pairs, "ipairs": vm.ipairs,
		// Helpers of the rewritten syntax tree (names no script can write).
		"\x00cc": vm.concatFn, "\x00ik": vm.indexKey, "\x00ikn": vm.indexKeyNew,
		"\x00va": vm.chargeValues, "\x00ln": vm.lengthFn,
	}
	names := make([]string, 0, len(base))
	for n := range base {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		vm.globals.RawSetString(n, fn(base[n]))
	}
	vm.globals.RawSetString("_G", vm.env)
	vm.globals.RawSetString("_VERSION", lua.LString("Lua 5.1"))

	strLib := lib("string", vm.stringLib(), nil)
	lib("table", vm.tableLib(), nil)
	mathFns := map[string]lua.LGFunction{"random": vm.mathRandom, "randomseed": vm.mathRandomSeed}
	for n, f := range mathLib {
		mathFns[n] = f
	}
	lib("math", mathFns, map[string]lua.LValue{"pi": lua.LNumber(math.Pi), "huge": lua.LNumber(math.Inf(1))})
	co := map[string]lua.LGFunction{"create": vm.coCreate, "wrap": vm.coWrap}
	for _, n := range []string{"resume", "running", "status", "yield"} {
		co[n] = libs["coroutine."+n]
	}
	coLib := lib("coroutine", co, nil)
	vm.resume = coLib.RawGetString("resume").(*lua.LFunction)
	vm.coCreateG = libs["coroutine.create"]
	lib("bit", bitLib, nil)
	vm.null = L.NewUserData()
	lib("cjson", vm.cjsonLib(), map[string]lua.LValue{"null": vm.null})
	lib("redis", vm.redisLib(), map[string]lua.LValue{
		"LOG_DEBUG": lua.LNumber(0), "LOG_VERBOSE": lua.LNumber(1), "LOG_NOTICE": lua.LNumber(2), "LOG_WARNING": lua.LNumber(3),
		"REPL_NONE": lua.LNumber(0), "REPL_AOF": lua.LNumber(1), "REPL_SLAVE": lua.LNumber(2), "REPL_REPLICA": lua.LNumber(2), "REPL_ALL": lua.LNumber(3),
		// What kvorum reports as its Redis version (resp.RedisVersion).
		"REDIS_VERSION": lua.LString("7.2.0"), "REDIS_VERSION_NUM": lua.LNumber(0x070200),
	})

	// The globals: reading an undefined one is an error; scripts see them
	// through the read-only view vm.env.
	vm.globalsMT = L.CreateTable(0, 1)
	vm.globalsMT.RawSetString("__index", fn(luaNoGlobal))
	vm.globals.Metatable = vm.globalsMT
	envMT := L.CreateTable(0, 2)
	envMT.RawSetString("__index", vm.globals)
	envMT.RawSetString("__newindex", fn(luaReadonly))
	vm.env.Metatable = envMT
	vm.views[vm.env] = envMT
	vm.hiddenMT[envMT] = lua.LNil
	vm.hiddenMT[vm.globalsMT] = lua.LNil
	vm.protected[vm.env], vm.protected[vm.globals], vm.protected[envMT], vm.protected[vm.globalsMT] = true, true, true, true

	// Strings' metatable: __index is the string library's view.
	vm.strMT = L.CreateTable(0, 1)
	vm.strMT.RawSetString("__index", vm.view(strLib))
	vm.protected[vm.strMT] = true
	vm.hiddenMT[vm.strMT] = vm.view(vm.strMT)
	L.SetMetatable(lua.LString(""), vm.strMT)

	vm.handler = fn(vm.errHandler)
	return vm
}

// metered charges a Go function for the values it receives and returns
// beyond a few (one unit per four): the VM copies them, and some functions
// walk them (math.max, select, string.char, ...).
func (vm *luaVM) metered(f lua.LGFunction) lua.LGFunction {
	return func(L *lua.LState) int {
		if n := L.GetTop(); n >= 8 {
			vm.charge(L, int64(n/4))
		}
		r := f(L)
		if r >= 8 {
			vm.charge(L, int64(r/4))
		}
		return r
	}
}

// view returns the read-only view of t (one per table): an empty table
// whose metatable reads from t and refuses writes.
func (vm *luaVM) view(t *lua.LTable) *lua.LTable {
	if v, ok := vm.viewOf[t]; ok {
		return v
	}
	L := vm.L
	v := L.CreateTable(0, 0)
	mt := L.CreateTable(0, 2)
	mt.RawSetString("__index", t)
	mt.RawSetString("__newindex", L.NewFunction(luaReadonly))
	v.Metatable = mt
	vm.viewOf[t] = v
	vm.views[v] = mt
	vm.protected[v], vm.protected[mt], vm.protected[t] = true, true, true
	vm.hiddenMT[mt] = lua.LNil
	return v
}

func luaReadonly(L *lua.LState) int {
	L.RaiseError("Attempt to modify a readonly table")
	return 0
}

func luaNoGlobal(L *lua.LState) int {
	L.RaiseError("Script attempted to access nonexistent global variable '%s'", luaToStringPlain(L.Get(2)))
	return 0
}

func luaZero(L *lua.LState) int {
	L.Push(lua.LNumber(0))
	return 1
}

// clean reports whether the state is as a fresh one (a script cannot
// change it; this double-checks) and worth keeping.
func (vm *luaVM) clean() bool {
	L := vm.L
	if L.Env != vm.env || L.G.Global != vm.env || L.GetTop() != 0 || vm.run.allocated > 64<<20 {
		return false
	}
	for v, mt := range vm.views {
		if v.Metatable != mt {
			return false
		}
		if k, _ := v.Next(lua.LNil); k != lua.LNil {
			return false
		}
	}
	return vm.globals.Metatable == vm.globalsMT && L.GetMetatable(lua.LString("")) == vm.strMT
}

// exec runs a script. It returns the reply and whether the state may be
// reused.
func (vm *luaVM) exec(x *ctx, cs *compiledScript, keys, argv [][]byte, readOnly bool) (Reply, bool) {
	L := vm.L
	vm.start(x, cs.sha, scriptSourceName, readOnly)
	vm.globals.RawSetString("KEYS", stringArray(L, keys))
	vm.globals.RawSetString("ARGV", stringArray(L, argv))
	L.Push(L.NewFunctionFromProto(cs.proto))
	return vm.finish(vm.pcall1(0))
}

// start prepares a run: name is the script's sha or the function's name
// (for error messages), source the chunk name the code was compiled with.
func (vm *luaVM) start(x *ctx, name, source string, readOnly bool) {
	vm.run = scriptRun{x: x, sha: name, source: source, readOnly: readOnly, resp: 2, rng: x.rand().Uint64() & (1<<48 - 1)}
	vm.run.cjson = defaultCjson
	vm.budget = budgetCtx{left: scriptBudget}
}

// pcall1 calls the function below the nargs arguments on the stack, with
// the budget and the run's error handler, for one result.
func (vm *luaVM) pcall1(nargs int) error {
	L := vm.L
	L.SetContext(&vm.budget)
	err := L.PCall(nargs, 1, vm.handler)
	L.RemoveContext()
	return err
}

// finish converts the outcome of a run's pcall1 (err, or the result on the
// stack) to a reply and resets the state. It returns the reply and whether
// the state may be reused.
func (vm *luaVM) finish(err error) (Reply, bool) {
	L := vm.L
	var ae *lua.ApiError
	panicked := errors.As(err, &ae) && ae.Type == lua.ApiErrorPanic
	var r Reply
	switch {
	case vm.budget.exhausted:
		r = errBudget()
	case err != nil:
		r = vm.errorReply(err)
	default:
		r = vm.toReply(L.Get(-1), 0)
		switch {
		case vm.budget.exhausted:
			r = errBudget()
		case vm.run.tooDeep:
			r = errTooDeep
		}
	}
	L.SetTop(0)
	vm.globals.RawSetString("KEYS", lua.LNil)
	vm.globals.RawSetString("ARGV", lua.LNil)
	clean := !panicked && vm.clean() // a Go panic inside gopher-lua: drop the state
	vm.run = scriptRun{}
	return r, clean
}

func stringArray(L *lua.LState, a [][]byte) *lua.LTable {
	t := L.CreateTable(len(a), 0)
	for i, s := range a {
		t.RawSetInt(i+1, lua.LString(s))
	}
	return t
}

// charge spends n units of the budget from inside Lua; it raises an error
// when the budget is exhausted.
func (vm *luaVM) charge(L *lua.LState, n int64) {
	vm.budget.left -= n
	if vm.budget.left < 0 {
		vm.budget.exhausted = true
		L.RaiseError("script budget exceeded")
	}
}

// chargeBytes charges an allocation of n bytes, which must not exceed
// scriptMaxString.
func (vm *luaVM) chargeBytes(L *lua.LState, n int) {
	if n > scriptMaxString || n < 0 {
		L.RaiseError("resulting string too large")
	}
	vm.run.allocated += int64(n)
	vm.charge(L, int64(n/scriptBytesPerUnit))
}

// outBuf builds a long string from small appends and large pieces: the
// budget is charged as it grows, and no byte is copied more than twice
// (slices grown by append would copy the whole result many times).
type outBuf struct {
	vm    *luaVM
	L     *lua.LState
	parts []string
	cur   []byte
	size  int
}

func (o *outBuf) grow(n int) {
	if o.size+n > scriptMaxString || o.size+n < 0 {
		o.L.RaiseError("resulting string too large")
	}
	o.size += n
}

func (o *outBuf) writeByte(c byte) {
	o.grow(1)
	o.cur = append(o.cur, c)
	if len(o.cur) >= 64<<10 {
		o.flush()
	}
}

func (o *outBuf) writeString(s string) {
	o.grow(len(s))
	if len(s) >= 4096 {
		o.flush()
		o.vm.chargeBytes(o.L, len(s))
		o.parts = append(o.parts, s)
		return
	}
	o.cur = append(o.cur, s...)
	if len(o.cur) >= 64<<10 {
		o.flush()
	}
}

func (o *outBuf) flush() {
	if len(o.cur) > 0 {
		o.vm.chargeBytes(o.L, len(o.cur))
		o.parts = append(o.parts, string(o.cur))
		o.cur = o.cur[:0]
	}
}

func (o *outBuf) String() string {
	if len(o.parts) == 0 {
		return string(o.cur)
	}
	o.flush()
	return strings.Join(o.parts, "")
}

// spend is charge outside Lua: it reports false when exhausted.
func (vm *luaVM) spend(n int64) bool {
	vm.budget.left -= n
	if vm.budget.left < 0 {
		vm.budget.exhausted = true
	}
	return !vm.budget.exhausted
}

// chargeGap charges the nil slots gopher-lua appends when t[key] is set
// beyond t's array part.
func (vm *luaVM) chargeGap(L *lua.LState, alen int, key lua.LValue) {
	k, ok := key.(lua.LNumber)
	if !ok || k < 1 || k >= lua.LNumber(lua.MaxArrayIndex) || k != lua.LNumber(int64(k)) {
		return
	}
	if gap := int(k) - alen - 1; gap > scriptFreeGap {
		// One unit per slot: appending each nil costs about what an
		// instruction does, and it bounds the table's memory.
		vm.run.allocated += int64(gap) * 16
		vm.charge(L, int64(gap))
	}
}

// errHandler is the message handler of a run, Redis's
// __redis__err__handler: it records the error and where it happened.
func (vm *luaVM) errHandler(L *lua.LState) int {
	obj := L.Get(1)
	e := &scriptErr{}
	if t, ok := obj.(*lua.LTable); ok {
		switch v := t.RawGetString("err").(type) {
		case lua.LString:
			e.msg = string(v)
		case lua.LNumber:
			e.msg = fmtNum14(float64(v))
		default:
			e.msg = "ERR unknown error"
		}
	} else {
		e.msg = "ERR " + luaToStringPlain(vm.tostring(L, obj))
	}
	// Level 1 is the function that raised; if it is a Go function, its
	// caller.
	dbg, ok := L.GetStack(1)
	if ok {
		_, _ = L.GetInfo("Sl", dbg, lua.LNil)
		if dbg.What == "G" {
			if dbg, ok = L.GetStack(2); ok {
				_, _ = L.GetInfo("Sl", dbg, lua.LNil)
			}
		}
	}
	if ok {
		e.source, e.line = "=[C]", "-1"
		if dbg.What != "G" {
			e.source, e.line = dbg.Source, strconv.Itoa(dbg.CurrentLine)
			if dbg.Source == vm.run.source {
				e.source = "@" + vm.run.source
			} else if name, ok := vm.run.chunks[dbg.Source]; ok {
				e.source = name
			}
		}
	}
	vm.run.err = e
	L.Push(obj)
	return 1
}

func (vm *luaVM) errorReply(err error) Reply {
	e := vm.run.err
	if e == nil {
		// The handler could not run (the call stack was full): take the
		// position from the message.
		msg := err.Error()
		var ae *lua.ApiError
		if errors.As(err, &ae) && ae.Object != nil {
			msg = luaToStringPlain(ae.Object)
		}
		e = &scriptErr{msg: "ERR " + msg}
		if rest, ok := strings.CutPrefix(msg, vm.run.source+":"); ok && vm.run.source != "" {
			if i := strings.IndexByte(rest, ':'); i > 0 {
				if _, err := strconv.Atoi(rest[:i]); err == nil {
					e.source, e.line = "@"+vm.run.source, rest[:i]
				}
			}
		}
	}
	msg := e.msg
	if e.source != "" && e.line != "" {
		msg += " script: " + vm.run.sha + ", on " + e.source + ":" + e.line + "."
	}
	return Error(string(sanitizeError([]byte(msg))))
}

// toReply converts a script's result to a reply, as Redis's
// luaReplyToRedisReply.
func (vm *luaVM) toReply(v lua.LValue, depth int) Reply {
	// A reply element costs about as much as four instructions (a Reply is
	// some 80 bytes), which also bounds replies that repeat a table.
	if !vm.spend(4) {
		return Nil
	}
	switch v := v.(type) {
	case lua.LString:
		if !vm.spend(int64(len(v) / scriptBytesPerUnit)) {
			return Nil
		}
		return Bulk([]byte(v))
	case lua.LBool:
		if vm.run.resp == 3 {
			return Bool(bool(v))
		}
		if v {
			return Int(1)
		}
		return Nil
	case lua.LNumber:
		return Int(luaToInt64(float64(v)))
	case *lua.LTable:
		if depth >= scriptMaxDepth {
			vm.run.tooDeep = true
			return errTooDeep
		}
		if s, ok := v.RawGetString("err").(lua.LString); ok {
			return Error(string(sanitizeError([]byte(s))))
		}
		if s, ok := v.RawGetString("ok").(lua.LString); ok {
			return Reply{Kind: KindStatus, Str: sanitizeError([]byte(s))}
		}
		if n, ok := v.RawGetString("double").(lua.LNumber); ok {
			return Double(float64(n))
		}
		if s, ok := v.RawGetString("big_number").(lua.LString); ok {
			return Bulk(sanitizeError([]byte(s)))
		}
		if t, ok := v.RawGetString("verbatim_string").(*lua.LTable); ok {
			if _, ok := t.RawGetString("format").(lua.LString); ok {
				if s, ok := t.RawGetString("string").(lua.LString); ok {
					return Reply{Kind: KindVerbatim, Str: []byte(s)}
				}
			}
		}
		if t, ok := v.RawGetString("map").(*lua.LTable); ok {
			var out []Reply
			for k, e := t.Next(lua.LNil); k != lua.LNil && !vm.budget.exhausted; k, e = t.Next(k) {
				out = append(out, vm.toReply(k, depth+1), vm.toReply(e, depth+1))
			}
			return Map(out...)
		}
		if t, ok := v.RawGetString("set").(*lua.LTable); ok {
			var out []Reply
			for k, _ := t.Next(lua.LNil); k != lua.LNil && !vm.budget.exhausted; k, _ = t.Next(k) {
				out = append(out, vm.toReply(k, depth+1))
			}
			return Reply{Kind: KindSet, Elems: out}
		}
		out := make([]Reply, 0, min(arrayLen(v), 1024))
		for j := 1; !vm.budget.exhausted; j++ {
			e := v.RawGetInt(j)
			if e == lua.LNil {
				break
			}
			out = append(out, vm.toReply(e, depth+1))
		}
		return Array(out...)
	}
	return Nil
}

// ---------------------------------------------------------------------------
// The redis library.

func (vm *luaVM) redisLib() map[string]lua.LGFunction {
	return map[string]lua.LGFunction{
		"call":               func(L *lua.LState) int { return vm.redisCall(L, true) },
		"pcall":              func(L *lua.LState) int { return vm.redisCall(L, false) },
		"sha1hex":            redisSha1hex,
		"error_reply":        redisErrorReply,
		"status_reply":       redisStatusReply,
		"log":                redisLog,
		"setresp":            vm.redisSetResp,
		"set_repl":           redisSetRepl,
		"replicate_commands": func(L *lua.LState) int { L.Push(lua.LTrue); return 1 },
		"breakpoint":         func(L *lua.LState) int { L.Push(lua.LFalse); return 1 },
		"debug":              func(L *lua.LState) int { return 0 },
		"acl_check_cmd":      vm.redisACLCheck,
	}
}

// errorText is Redis's luaPushErrorBuff: "-CODE msg" keeps its code, any
// other text gets "ERR".
func errorText(s string) string {
	code, msg := "ERR", s
	if strings.HasPrefix(s, "-") {
		if i := strings.IndexByte(s, ' '); i < 0 {
			msg = s[1:]
		} else {
			code, msg = s[1:i], s[i+1:]
		}
	}
	return code + " " + strings.Trim(msg, "\r\n")
}

func errTable(L *lua.LState, text string) *lua.LTable {
	t := L.CreateTable(0, 1)
	t.RawSetString("err", lua.LString(errorText(text)))
	return t
}

// raiseTable raises a Redis error table (no position, as Redis's luaError).
func raiseTable(L *lua.LState, text string) {
	L.Error(errTable(L, text), 0)
}

// callArgs converts redis.call's arguments (Redis's luaArgsToRedisArgv).
func callArgs(L *lua.LState) ([][]byte, string) {
	n := L.GetTop()
	if n == 0 {
		return nil, "Please specify at least one argument for this redis lib call"
	}
	args := make([][]byte, n)
	for i := range args {
		switch v := L.Get(i + 1).(type) {
		case lua.LString:
			args[i] = []byte(v)
		case lua.LNumber:
			args[i] = []byte(cFormatG(float64(v), 17))
		default:
			return nil, "Lua redis lib command arguments must be strings or integers"
		}
	}
	return args, ""
}

func (vm *luaVM) redisCall(L *lua.LState, raise bool) int {
	args, msg := callArgs(L)
	var r Reply
	if msg != "" {
		r = Error(msg)
	} else {
		r = vm.dispatch(args)
	}
	if r.Kind == KindError {
		t := errTable(L, msg) // an argument error: "ERR " + msg
		if msg == "" {
			t = errTable(L, "-"+string(r.Str))
		}
		if raise {
			L.Error(t, 0)
		}
		L.Push(t)
		return 1
	}
	L.Push(vm.fromReply(L, r))
	return 1
}

// scriptDenied are Redis commands kv does not implement that Redis refuses
// in scripts (flag noscript); the containers are refused whole.
var scriptDenied = map[string]bool{}

func init() {
	for _, n := range strings.Fields(`auth bgrewriteaof bgsave debug discard exec failover fcall fcall_ro
		hello monitor multi psubscribe psync punsubscribe quit replconf replicaof reset role save shutdown
		slaveof ssubscribe subscribe sunsubscribe sync unsubscribe unwatch wait watch
		acl client config function latency module`) {
		scriptDenied[n] = true
	}
}

// dispatch runs one command for redis.call, with Redis's checks in Redis's
// order: known command, arity, allowed in scripts, write in a read-only
// script.
func (vm *luaVM) dispatch(args [][]byte) Reply {
	x := vm.run.x
	name := strings.ToLower(string(args[0]))
	d := lookup(args[0])
	if d == nil || d.internal {
		switch name {
		case "time":
			if len(args) != 1 {
				break
			}
			return Array(BulkString(strconv.FormatInt(x.now/1000, 10)), BulkString(strconv.FormatInt(x.now%1000*1000, 10)))
		case "ping":
			if len(args) == 1 {
				return Status("PONG")
			}
			if len(args) == 2 {
				return Bulk(args[1])
			}
		case "echo":
			if len(args) == 2 {
				return Bulk(args[1])
			}
		default:
			if scriptDenied[name] || (name == "cluster" && len(args) > 1 && eq(args[1], "reset")) {
				return Error("ERR This Redis command is not allowed from script")
			}
			if r, ok := Unsupported(args[0]); ok {
				return r
			}
			return Error("ERR Unknown Redis command called from script")
		}
		return Error("ERR Wrong number of args calling Redis command from script")
	}
	if !arityOK(&d.spec, args) {
		return Error("ERR Wrong number of args calling Redis command from script")
	}
	if name == "script" || name == "function" {
		subs := scriptSubArity
		if name == "function" {
			subs = functionSubArity
		}
		if ar := subs[strings.ToLower(string(args[1]))]; ar != 0 && ((ar > 0 && len(args) != ar) || (ar < 0 && len(args) < -ar)) {
			return Error("ERR Wrong number of args calling Redis command from script")
		}
		if !eq(args[1], "help") {
			return Error("ERR This Redis command is not allowed from script")
		}
	}
	for _, f := range d.spec.Flags {
		if f == "noscript" {
			return Error("ERR This Redis command is not allowed from script")
		}
	}
	if vm.run.readOnly && d.spec.Write {
		return Error("ERR Write commands are not allowed from read-only scripts.")
	}
	return x.call(args)
}

// fromReply converts a command's reply to Lua (Redis's
// redisProtocolToLuaType), as RESP2 or RESP3 would carry it.
func (vm *luaVM) fromReply(L *lua.LState, r Reply) lua.LValue {
	vm.charge(L, 1)
	resp3 := vm.run.resp == 3
	switch r.Kind {
	case KindStatus:
		t := L.CreateTable(0, 1)
		t.RawSetString("ok", lua.LString(r.Str))
		return t
	case KindError:
		return errTable(L, "-"+string(r.Str))
	case KindInt:
		return lua.LNumber(r.Int)
	case KindBulk:
		vm.chargeBytes(L, len(r.Str))
		return lua.LString(r.Str)
	case KindVerbatim:
		vm.chargeBytes(L, len(r.Str))
		if resp3 {
			v := L.CreateTable(0, 2)
			v.RawSetString("format", lua.LString("txt"))
			v.RawSetString("string", lua.LString(r.Str))
			t := L.CreateTable(0, 1)
			t.RawSetString("verbatim_string", v)
			return t
		}
		return lua.LString(r.Str)
	case KindNil, KindNilArray:
		if resp3 {
			return lua.LNil
		}
		return lua.LFalse
	case KindDouble:
		if resp3 {
			t := L.CreateTable(0, 1)
			t.RawSetString("double", lua.LNumber(r.Float))
			return t
		}
		if len(r.Str) > 0 {
			return lua.LString(r.Str)
		}
		return lua.LString(cFormatG(r.Float, 17))
	case KindBool:
		if resp3 {
			return lua.LBool(r.Int != 0)
		}
		return lua.LNumber(r.Int)
	case KindMap, KindNestedMap:
		if !resp3 && r.Kind == KindNestedMap {
			return vm.pairTables(L, r.Elems)
		}
		if resp3 {
			m := L.CreateTable(0, len(r.Elems)/2)
			for i := 0; i+1 < len(r.Elems); i += 2 {
				k := vm.fromReply(L, r.Elems[i])
				v := vm.fromReply(L, r.Elems[i+1])
				vm.setField(L, m, k, v)
			}
			t := L.CreateTable(0, 1)
			t.RawSetString("map", m)
			return t
		}
	case KindPairs:
		if resp3 {
			return vm.pairTables(L, r.Elems)
		}
	case KindSet:
		if resp3 {
			s := L.CreateTable(0, len(r.Elems))
			for _, e := range r.Elems {
				vm.setField(L, s, vm.fromReply(L, e), lua.LTrue)
			}
			t := L.CreateTable(0, 1)
			t.RawSetString("set", s)
			return t
		}
	}
	// Arrays (and RESP2 maps, sets and pairs).
	vm.chargeBytes(L, 16*len(r.Elems))
	t := L.CreateTable(len(r.Elems), 0)
	for i, e := range r.Elems {
		t.RawSetInt(i+1, vm.fromReply(L, e))
	}
	return t
}

// pairTables converts a, b, a, b, ... to an array of {a, b} tables.
func (vm *luaVM) pairTables(L *lua.LState, elems []Reply) *lua.LTable {
	vm.chargeBytes(L, 48*len(elems))
	t := L.CreateTable(len(elems)/2, 0)
	for i := 0; i+1 < len(elems); i += 2 {
		p := L.CreateTable(2, 0)
		p.RawSetInt(1, vm.fromReply(L, elems[i]))
		p.RawSetInt(2, vm.fromReply(L, elems[i+1]))
		t.RawSetInt(i/2+1, p)
	}
	return t
}

// setField is a raw set that charges a sparse integer key; nil and NaN keys
// are skipped.
func (vm *luaVM) setField(L *lua.LState, t *lua.LTable, k, v lua.LValue) {
	if k == lua.LNil {
		return
	}
	if n, ok := k.(lua.LNumber); ok && n != n {
		return
	}
	vm.chargeGap(L, arrayLen(t), k)
	t.RawSet(k, v)
}

func redisSha1hex(L *lua.LState) int {
	if L.GetTop() != 1 {
		raiseTable(L, "wrong number of arguments")
	}
	var s string
	switch v := L.Get(1).(type) {
	case lua.LString:
		s = string(v)
	case lua.LNumber:
		s = fmtNum14(float64(v))
	}
	L.Push(lua.LString(sha1Hex([]byte(s))))
	return 1
}

func redisErrorReply(L *lua.LState) int {
	s, ok := L.Get(1).(lua.LString)
	if L.GetTop() != 1 || !ok {
		L.Push(errTable(L, "wrong number or type of arguments"))
		return 1
	}
	msg := string(s)
	if !strings.HasPrefix(msg, "-") {
		msg = "-" + msg
	}
	L.Push(errTable(L, msg))
	return 1
}

func redisStatusReply(L *lua.LState) int {
	s, ok := L.Get(1).(lua.LString)
	if L.GetTop() != 1 || !ok {
		L.Push(errTable(L, "wrong number or type of arguments"))
		return 1
	}
	t := L.CreateTable(0, 1)
	t.RawSetString("ok", s)
	L.Push(t)
	return 1
}

// redisLog checks its arguments as Redis does and logs nothing: it would
// run on every replica at apply time.
func redisLog(L *lua.LState) int {
	n := L.GetTop()
	if n < 2 {
		raiseTable(L, "redis.log() requires two arguments or more.")
	}
	lv, ok := luaToNumber(L.Get(1))
	if !ok {
		raiseTable(L, "First argument must be a number (log level).")
	}
	if level := luaToInt64(lv); level < 0 || level > 3 {
		raiseTable(L, "Invalid debug level.")
	}
	return 0
}

func (vm *luaVM) redisSetResp(L *lua.LState) int {
	if L.GetTop() != 1 {
		raiseTable(L, "redis.setresp() requires one argument.")
	}
	n, _ := luaToNumber(L.Get(1))
	resp := int32(luaToInt64(n))
	if resp != 2 && resp != 3 {
		raiseTable(L, "RESP version must be 2 or 3.")
	}
	vm.run.resp = int(resp)
	return 0
}

func redisSetRepl(L *lua.LState) int {
	if L.GetTop() != 1 {
		raiseTable(L, "redis.set_repl() requires two arguments.")
	}
	n, _ := luaToNumber(L.Get(1))
	if int32(luaToInt64(n))&^3 != 0 {
		raiseTable(L, "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.")
	}
	return 0
}

func (vm *luaVM) redisACLCheck(L *lua.LState) int {
	args, msg := callArgs(L)
	if msg != "" {
		raiseTable(L, msg)
	}
	if d := lookup(args[0]); d == nil || d.internal {
		raiseTable(L, "Invalid command passed to redis.acl_check_cmd()")
	}
	L.Push(lua.LTrue)
	return 1
}

// ---------------------------------------------------------------------------
// Argument helpers with Lua 5.1's messages.

func luaTypeName(L *lua.LState, n int) string {
	if n > L.GetTop() {
		return "no value"
	}
	return L.Get(n).Type().String()
}

func argError(L *lua.LState, n int, fname, msg string) {
	L.RaiseError("bad argument #%d to '%s' (%s)", n, fname, msg)
}

func typeError(L *lua.LState, n int, fname, want string) {
	argError(L, n, fname, want+" expected, got "+luaTypeName(L, n))
}

func checkAny(L *lua.LState, n int, fname string) lua.LValue {
	if n > L.GetTop() {
		argError(L, n, fname, "value expected")
	}
	return L.Get(n)
}

func checkNumber(L *lua.LState, n int, fname string) float64 {
	f, ok := luaToNumber(L.Get(n))
	if !ok {
		typeError(L, n, fname, "number")
	}
	return f
}

// checkInteger is luaL_checkinteger: a 64-bit integer, truncated.
func checkInteger(L *lua.LState, n int, fname string) int64 {
	return luaToInt64(checkNumber(L, n, fname))
}

// checkInt is luaL_checkint: a C int (32 bits).
func checkInt(L *lua.LState, n int, fname string) int { return int(int32(checkInteger(L, n, fname))) }

func optInteger(L *lua.LState, n int, fname string, def int64) int64 {
	if L.Get(n) == lua.LNil {
		return def
	}
	return checkInteger(L, n, fname)
}

func optInt(L *lua.LState, n int, fname string, def int) int {
	if L.Get(n) == lua.LNil {
		return def
	}
	return checkInt(L, n, fname)
}

func checkString(L *lua.LState, n int, fname string) string {
	switch v := L.Get(n).(type) {
	case lua.LString:
		return string(v)
	case lua.LNumber:
		return fmtNum14(float64(v))
	}
	typeError(L, n, fname, "string")
	return ""
}

func optString(L *lua.LState, n int, fname, def string) string {
	if L.Get(n) == lua.LNil {
		return def
	}
	return checkString(L, n, fname)
}

func checkTable(L *lua.LState, n int, fname string) *lua.LTable {
	t, ok := L.Get(n).(*lua.LTable)
	if !ok {
		typeError(L, n, fname, "table")
	}
	return t
}

// luaToNumber is lua_tonumber: numbers and numeric strings.
func luaToNumber(v lua.LValue) (float64, bool) {
	switch v := v.(type) {
	case lua.LNumber:
		return float64(v), true
	case lua.LString:
		return str2number(string(v))
	}
	return 0, false
}

// luaToStringPlain converts strings and numbers (Lua 5.1's format) and
// names other values by type.
func luaToStringPlain(v lua.LValue) string {
	switch v := v.(type) {
	case lua.LString:
		return string(v)
	case lua.LNumber:
		return fmtNum14(float64(v))
	case nil:
		return "nil"
	}
	return v.String()
}

func isStringOrNumber(v lua.LValue) bool {
	switch v.(type) {
	case lua.LString, lua.LNumber:
		return true
	}
	return false
}

// where is luaL_where(L, level): "source:line: " of the function at that
// level, or "" for a Go function.
func where(L *lua.LState, level int) string {
	dbg, ok := L.GetStack(level)
	if !ok {
		return ""
	}
	if _, err := L.GetInfo("Sl", dbg, lua.LNil); err != nil || dbg.What == "G" || dbg.CurrentLine <= 0 {
		return ""
	}
	return dbg.Source + ":" + strconv.Itoa(dbg.CurrentLine) + ": "
}

// ---------------------------------------------------------------------------
// Base library.

func (vm *luaVM) luaErrorFn(L *lua.LState) int {
	obj := L.Get(1)
	level := optInt(L, 2, "error", 1)
	if level > 0 && isStringOrNumber(obj) {
		obj = lua.LString(where(L, level) + luaToStringPlain(obj))
	}
	L.Error(obj, 0)
	return 0
}

// pcall is Redis's: an error table with an err field is returned as its
// string, as before Redis 7.
func (vm *luaVM) pcall(L *lua.LState) int {
	if L.GetTop() == 0 {
		// Redis's pcall calls its own placeholder: Lua reports a boolean.
		L.Push(lua.LFalse)
		L.Push(lua.LString("attempt to call a boolean value"))
		return 2
	}
	if err := L.PCall(L.GetTop()-1, lua.MultRet, nil); err != nil {
		var obj lua.LValue = lua.LString(err.Error())
		var ae *lua.ApiError
		if errors.As(err, &ae) && ae.Object != nil {
			obj = ae.Object
		}
		if t, ok := obj.(*lua.LTable); ok {
			if e := t.RawGetString("err"); isStringOrNumber(e) {
				obj = e
			}
		}
		L.SetTop(0)
		L.Push(lua.LFalse)
		L.Push(obj)
		return 2
	}
	L.Insert(lua.LTrue, 1)
	return L.GetTop()
}

// tostring is Lua's, with a per-run number instead of an address for
// tables, functions, threads and userdata, so that every replica prints
// the same.
func (vm *luaVM) tostring(L *lua.LState, v lua.LValue) lua.LValue {
	switch x := v.(type) {
	case lua.LString:
		return x
	case lua.LNumber:
		return lua.LString(fmtNum14(float64(x)))
	case lua.LBool:
		if x {
			return lua.LString("true")
		}
		return lua.LString("false")
	case *lua.LNilType:
		return lua.LString("nil")
	}
	if mm := L.GetMetaField(v, "__tostring"); mm != lua.LNil {
		L.Push(mm)
		L.Push(v)
		L.Call(1, 1)
		r := L.Get(-1)
		L.Pop(1)
		return r
	}
	if v == lua.LValue(vm.null) {
		return lua.LString("userdata: (nil)")
	}
	if vm.run.ids == nil {
		vm.run.ids = map[lua.LValue]int{}
	}
	id, ok := vm.run.ids[v]
	if !ok {
		id = len(vm.run.ids) + 1
		vm.run.ids[v] = id
	}
	return lua.LString(fmt.Sprintf("%s: 0x%08x", v.Type().String(), id))
}

func (vm *luaVM) tostringFn(L *lua.LState) int {
	L.Push(vm.tostring(L, checkAny(L, 1, "tostring")))
	return 1
}

func luaTonumber(L *lua.LState) int {
	base := optInt(L, 2, "tonumber", 10)
	if base == 10 {
		checkAny(L, 1, "tonumber")
		if f, ok := luaToNumber(L.Get(1)); ok {
			L.Push(lua.LNumber(f))
			return 1
		}
	} else {
		s := checkString(L, 1, "tonumber")
		if base < 2 || base > 36 {
			argError(L, 2, "tonumber", "base out of range")
		}
		if n, rest, ok := strtoul(s, base); ok && strings.TrimLeft(rest, " \t\n\v\f\r") == "" {
			L.Push(lua.LNumber(n))
			return 1
		}
	}
	L.Push(lua.LNil)
	return 1
}

func (vm *luaVM) unpack(L *lua.LState) int {
	t := checkTable(L, 1, "unpack")
	i := optInt(L, 2, "unpack", 1)
	var e int
	if L.Get(3) == lua.LNil {
		e = border(t)
	} else {
		e = checkInt(L, 3, "unpack")
	}
	if i > e {
		return 0
	}
	n := int64(e) - int64(i) + 1
	if n <= 0 || n > scriptMaxResults {
		L.RaiseError("too many results to unpack")
	}
	vm.charge(L, n/4)
	for k := i; k <= e; k++ {
		L.Push(t.RawGetInt(k))
	}
	return int(n)
}

func (vm *luaVM) rawset(L *lua.LState) int {
	t := checkTable(L, 1, "rawset")
	k := checkAny(L, 2, "rawset")
	v := checkAny(L, 3, "rawset")
	vm.writable(L, t)
	checkKey(L, k, false)
	vm.chargeGap(L, arrayLen(t), k)
	t.RawSet(k, v)
	L.SetTop(1)
	return 1
}

// checkKey refuses nil and NaN keys, with the position of the Lua code
// (pos) or without, as from inside a C function.
func checkKey(L *lua.LState, k lua.LValue, pos bool) {
	msg := ""
	if k == lua.LNil {
		msg = "table index is nil"
	} else if n, ok := k.(lua.LNumber); ok && n != n {
		msg = "table index is NaN"
	}
	if msg == "" {
		return
	}
	if pos {
		L.RaiseError("%s", msg)
	}
	L.Error(lua.LString(msg), 0)
}

func (vm *luaVM) getmetatable(L *lua.LState) int {
	mt := L.GetMetatable(checkAny(L, 1, "getmetatable"))
	if t, ok := mt.(*lua.LTable); ok {
		if pub, hidden := vm.hiddenMT[t]; hidden {
			L.Push(pub)
			return 1
		}
		if f := t.RawGetString("__metatable"); f != lua.LNil {
			L.Push(f)
			return 1
		}
	}
	L.Push(mt)
	return 1
}

func (vm *luaVM) setmetatable(L *lua.LState) int {
	t := checkTable(L, 1, "setmetatable")
	mt := L.Get(2)
	if mt != lua.LNil && mt.Type() != lua.LTTable {
		argError(L, 2, "setmetatable", "nil or table expected")
	}
	vm.writable(L, t)
	if cur, ok := t.Metatable.(*lua.LTable); ok && cur.RawGetString("__metatable") != lua.LNil {
		L.RaiseError("cannot change a protected metatable")
	}
	t.Metatable = mt
	L.SetTop(1)
	return 1
}

// loadstring compiles through the script pipeline (rewritten syntax tree),
// in the read-only global environment.
func (vm *luaVM) loadstring(L *lua.LState) int {
	s := checkString(L, 1, "loadstring")
	return vm.loadChunk(L, s, optString(L, 2, "loadstring", s))
}

func (vm *luaVM) load(L *lua.LState) int {
	f, ok := L.Get(1).(*lua.LFunction)
	if !ok {
		typeError(L, 1, "load", "function")
	}
	name := optString(L, 2, "load", "=(load)")
	var b strings.Builder
	for {
		L.Push(f)
		L.Call(0, 1)
		piece := L.Get(-1)
		L.Pop(1)
		if piece == lua.LNil {
			break
		}
		s, ok := piece.(lua.LString)
		if !ok {
			L.Push(lua.LNil)
			L.Push(lua.LString("reader function must return a string"))
			return 2
		}
		if len(s) == 0 {
			break
		}
		vm.chargeBytes(L, b.Len()+len(s))
		b.WriteString(string(s))
	}
	return vm.loadChunk(L, b.String(), name)
}

func (vm *luaVM) loadChunk(L *lua.LState, src, chunkname string) int {
	vm.chargeBytes(L, len(src)*4)
	id := chunkID(chunkname)
	if vm.run.chunks == nil {
		vm.run.chunks = map[string]string{}
	}
	vm.run.chunks[id] = chunkname
	proto, err := compileLua(src, id)
	if err != nil {
		L.Push(lua.LNil)
		L.Push(lua.LString(err.Error()))
		return 2
	}
	L.Push(L.NewFunctionFromProto(proto))
	return 1
}

// chunkID is Lua 5.1's luaO_chunkid: how a chunk name appears in messages.
func chunkID(name string) string {
	if strings.HasPrefix(name, "=") || strings.HasPrefix(name, "@") {
		return name[1:]
	}
	l := strings.IndexAny(name, "\r\n")
	if l < 0 {
		l = len(name)
	}
	if l > 43 {
		l = 43
	}
	if l < len(name) {
		return `[string "` + name[:l] + `..."]`
	}
	return `[string "` + name + `"]`
}

func (vm *luaVM) pairs(L *lua.LState) int {
	t := checkTable(L, 1, "pairs")
	L.Push(vm.globals.RawGetString("next"))
	L.Push(t)
	L.Push(lua.LNil)
	return 3
}

func ipairsAux(L *lua.LState) int {
	t := checkTable(L, 1, "ipairs")
	i := checkInteger(L, 2, "ipairs") + 1
	v := t.RawGetInt(int(i))
	if v == lua.LNil {
		return 0
	}
	L.Push(lua.LNumber(i))
	L.Push(v)
	return 2
}

var ipairsAuxFn = lua.LGFunction(ipairsAux)

func (vm *luaVM) ipairs(L *lua.LState) int {
	t := checkTable(L, 1, "ipairs")
	L.Push(L.NewFunction(ipairsAuxFn))
	L.Push(t)
	L.Push(lua.LNumber(0))
	return 3
}

// ---------------------------------------------------------------------------
// Helpers of rewritten scripts (see scriptRewriter).

// concatFn(descs, v1, ..., vn) is v1 .. ... .. vn: Lua 5.1's luaV_concat,
// with the result's size checked and charged. descs names the operands
// ("local 'x'", ...) for error messages, one per line.
func (vm *luaVM) concatFn(L *lua.LState) int {
	descs := strings.Split(string(L.Get(1).(lua.LString)), "\n")
	vals := make([]lua.LValue, L.GetTop()-1)
	for i := range vals {
		vals[i] = L.Get(i + 2)
	}
	for len(descs) < len(vals) {
		descs = append(descs, "")
	}
	top := len(vals)
	for top > 1 {
		a, b := vals[top-2], vals[top-1]
		if !isStringOrNumber(a) || !isStringOrNumber(b) {
			mm := L.GetMetaField(a, "__concat")
			if mm == lua.LNil {
				mm = L.GetMetaField(b, "__concat")
			}
			if mm == lua.LNil {
				bad, desc := a, descs[top-2]
				if isStringOrNumber(a) {
					bad, desc = b, descs[top-1]
				}
				L.RaiseError("attempt to concatenate %s", describe(desc, bad))
			}
			L.Push(mm)
			L.Push(a)
			L.Push(b)
			L.Call(2, 1)
			vals[top-2], descs[top-2] = L.Get(-1), ""
			L.Pop(1)
			top--
			continue
		}
		// Collect as many strings as possible.
		n, size := 1, len(luaToStringPlain(b))
		for n < top && isStringOrNumber(vals[top-n-1]) {
			size += len(luaToStringPlain(vals[top-n-1]))
			n++
		}
		if size > scriptMaxString {
			L.RaiseError("string length overflow")
		}
		vm.chargeBytes(L, size)
		var sb strings.Builder
		sb.Grow(size)
		for i := top - n; i < top; i++ {
			sb.WriteString(luaToStringPlain(vals[i]))
		}
		vals[top-n], descs[top-n] = lua.LString(sb.String()), ""
		top -= n - 1
	}
	L.Push(vals[0])
	return 1
}

// describe is how Lua 5.1 names a value in a type error.
func describe(desc string, v lua.LValue) string {
	if desc != "" {
		return desc + " (a " + v.Type().String() + " value)"
	}
	return "a " + v.Type().String() + " value"
}

// lengthFn(desc, v) is #v: for tables a border found in O(log n).
func (vm *luaVM) lengthFn(L *lua.LState) int {
	switch v := L.Get(2).(type) {
	case lua.LString:
		L.Push(lua.LNumber(len(v)))
		return 1
	case *lua.LTable:
		L.Push(lua.LNumber(border(v)))
		return 1
	default:
		if mm := L.GetMetaField(v, "__len"); mm != lua.LNil {
			L.Push(mm)
			L.Push(v)
			L.Call(1, 1)
			return 1
		}
		L.RaiseError("attempt to get length of %s", describe(string(L.Get(1).(lua.LString)), v))
	}
	return 0
}

// border returns a border of t (n with t[n] ~= nil and t[n+1] == nil, or 0
// if t[1] is nil), as Lua 5.1's luaH_getn, in O(log n).
func border(t *lua.LTable) int {
	j := arrayLen(t)
	if j > 0 && t.RawGetInt(j) == lua.LNil {
		i := 0
		for j-i > 1 {
			m := (i + j) / 2
			if t.RawGetInt(m) == lua.LNil {
				j = m
			} else {
				i = m
			}
		}
		return i
	}
	if t.RawGetInt(j+1) == lua.LNil {
		return j
	}
	i := j + 1
	j = 2 * i
	for t.RawGetInt(j) != lua.LNil {
		i = j
		if j > math.MaxInt32 {
			// A pathological table: fall back to a linear search.
			k := 1
			for t.RawGetInt(k) != lua.LNil {
				k++
			}
			return k - 1
		}
		j *= 2
	}
	for j-i > 1 {
		m := (i + j) / 2
		if t.RawGetInt(m) == lua.LNil {
			j = m
		} else {
			i = m
		}
	}
	return i
}

// indexKey(t, k) returns k, for t[k] = v: it charges the nil slots
// gopher-lua would append before k and refuses nil and NaN keys.
func (vm *luaVM) indexKey(L *lua.LState) int {
	k := L.Get(2)
	if t, ok := L.Get(1).(*lua.LTable); ok {
		if mt, ok := t.Metatable.(*lua.LTable); !ok || mt.RawGetString("__newindex") == lua.LNil {
			checkKey(L, k, true)
		}
		vm.chargeGap(L, arrayLen(t), k)
	}
	L.SetTop(2)
	return 1
}

// indexKeyNew(k, n) is indexKey for a key of a table constructor that has
// stored n positional values so far.
func (vm *luaVM) indexKeyNew(L *lua.LState) int {
	k := L.Get(1)
	checkKey(L, k, true)
	vm.chargeGap(L, int(L.Get(2).(lua.LNumber)), k)
	L.SetTop(1)
	return 1
}

// chargeValues(...) returns its arguments, charging for the table slots
// they will fill ({...}, {f()}).
func (vm *luaVM) chargeValues(L *lua.LState) int {
	n := L.GetTop()
	vm.chargeBytes(L, n*16)
	return n
}

// ---------------------------------------------------------------------------
// Coroutines: a new thread must count instructions on the same budget
// (gopher-lua would give it a child context of its own), and a run may
// create a limited number.

func (vm *luaVM) coCreate(L *lua.LState) int { return vm.newThread(L, "create") }

func (vm *luaVM) newThread(L *lua.LState, fname string) int {
	if f, ok := L.Get(1).(*lua.LFunction); !ok || f.IsG {
		argError(L, 1, fname, "Lua function expected")
	}
	vm.run.threads++
	if vm.run.threads > scriptMaxThreads {
		L.RaiseError("too many coroutines (more than %d in one script)", scriptMaxThreads)
	}
	vm.chargeBytes(L, scriptCallStack*80+1024*16) // its call stack and registry
	L.SetTop(1)
	ctx := L.RemoveContext()
	defer func() {
		if ctx != nil {
			L.SetContext(ctx)
		}
	}()
	n := vm.coCreateG(L)
	if th, ok := L.Get(-1).(*lua.LState); ok && ctx != nil {
		th.SetContext(ctx)
	}
	return n
}

func (vm *luaVM) coWrap(L *lua.LState) int {
	vm.newThread(L, "wrap")
	th := L.Get(-1)
	L.Pop(1)
	L.Push(L.NewClosure(vm.metered(vm.wrapAux), th))
	return 1
}

func (vm *luaVM) wrapAux(L *lua.LState) int {
	n := L.GetTop()
	L.Push(vm.resume)
	L.Push(L.Get(lua.UpvalueIndex(1)))
	for i := 1; i <= n; i++ {
		L.Push(L.Get(i))
	}
	L.Call(n+1, lua.MultRet)
	if L.Get(n+1) != lua.LTrue {
		msg := L.Get(n + 2)
		if isStringOrNumber(msg) {
			msg = lua.LString(where(L, 1) + luaToStringPlain(msg))
		}
		L.Error(msg, 0)
	}
	L.Remove(n + 1)
	return L.GetTop() - n
}

// ---------------------------------------------------------------------------
// math.random and math.randomseed: Redis's, on redisLrand48 (a 48-bit
// linear congruential generator, as lrand48), seeded per run.

func (vm *luaVM) lrand48() int32 {
	vm.run.rng = (0x5DEECE66D*vm.run.rng + 0xB) & (1<<48 - 1)
	return int32(vm.run.rng >> 17)
}

func (vm *luaVM) mathRandom(L *lua.LState) int {
	const max = math.MaxInt32
	r := float64(vm.lrand48()%max) / max
	switch L.GetTop() {
	case 0:
		L.Push(lua.LNumber(r))
	case 1:
		u := checkInt(L, 1, "random")
		if u < 1 {
			argError(L, 1, "random", "interval is empty")
		}
		L.Push(lua.LNumber(math.Floor(r*float64(u)) + 1))
	case 2:
		l := checkInt(L, 1, "random")
		u := checkInt(L, 2, "random")
		if l > u {
			argError(L, 2, "random", "interval is empty")
		}
		L.Push(lua.LNumber(math.Floor(r*(float64(u)-float64(l)+1)) + float64(l)))
	default:
		L.RaiseError("wrong number of arguments")
	}
	return 1
}

func (vm *luaVM) mathRandomSeed(L *lua.LState) int {
	seed := int32(checkInt(L, 1, "randomseed"))
	vm.run.rng = uint64(uint16(seed>>16))<<32 | uint64(uint16(seed))<<16 | 0x330E
	return 0
}

// mathLib is Lua 5.1's math library (but random) on Go's math package.
var mathLib = func() map[string]lua.LGFunction {
	f1 := func(name string, f func(float64) float64) lua.LGFunction {
		return func(L *lua.LState) int {
			L.Push(lua.LNumber(f(checkNumber(L, 1, name))))
			return 1
		}
	}
	f2 := func(name string, f func(a, b float64) float64) lua.LGFunction {
		return func(L *lua.LState) int {
			L.Push(lua.LNumber(f(checkNumber(L, 1, name), checkNumber(L, 2, name))))
			return 1
		}
	}
	fold := func(name string, better func(a, b float64) bool) lua.LGFunction {
		return func(L *lua.LState) int {
			m := checkNumber(L, 1, name)
			for i := 2; i <= L.GetTop(); i++ {
				if d := checkNumber(L, i, name); better(d, m) {
					m = d
				}
			}
			L.Push(lua.LNumber(m))
			return 1
		}
	}
	return map[string]lua.LGFunction{
		"abs": f1("abs", math.Abs), "acos": f1("acos", math.Acos), "asin": f1("asin", math.Asin),
		"atan": f1("atan", math.Atan), "atan2": f2("atan2", math.Atan2), "ceil": f1("ceil", math.Ceil),
		"cos": f1("cos", math.Cos), "cosh": f1("cosh", math.Cosh),
		"deg": f1("deg", func(x float64) float64 { return x * (180 / math.Pi) }),
		"exp": f1("exp", math.Exp), "floor": f1("floor", math.Floor), "fmod": f2("fmod", math.Mod),
		"log": f1("log", math.Log), "log10": f1("log10", math.Log10), "mod": f2("mod", math.Mod),
		"pow": f2("pow", math.Pow), "rad": f1("rad", func(x float64) float64 { return x * (math.Pi / 180) }),
		"sin": f1("sin", math.Sin), "sinh": f1("sinh", math.Sinh), "sqrt": f1("sqrt", math.Sqrt),
		"tan": f1("tan", math.Tan), "tanh": f1("tanh", math.Tanh),
		"max": fold("max", func(a, b float64) bool { return a > b }),
		"min": fold("min", func(a, b float64) bool { return a < b }),
		"frexp": func(L *lua.LState) int {
			m, e := math.Frexp(checkNumber(L, 1, "frexp"))
			L.Push(lua.LNumber(m))
			L.Push(lua.LNumber(e))
			return 2
		},
		"ldexp": func(L *lua.LState) int {
			L.Push(lua.LNumber(math.Ldexp(checkNumber(L, 1, "ldexp"), checkInt(L, 2, "ldexp"))))
			return 1
		},
		"modf": func(L *lua.LState) int {
			ip, fp := math.Modf(checkNumber(L, 1, "modf"))
			L.Push(lua.LNumber(ip))
			L.Push(lua.LNumber(fp))
			return 2
		},
	}
}()

// ---------------------------------------------------------------------------
// bit: LuaBitOp, as in Redis.

func bitArg(L *lua.LState, n int, fname string) uint32 {
	f := checkNumber(L, n, fname)
	return uint32(math.Float64bits(f + 6755399441055744.0))
}

func bitRet(L *lua.LState, b uint32) int {
	L.Push(lua.LNumber(int32(b)))
	return 1
}

var bitLib = map[string]lua.LGFunction{
	"tobit":   func(L *lua.LState) int { return bitRet(L, bitArg(L, 1, "tobit")) },
	"bnot":    func(L *lua.LState) int { return bitRet(L, ^bitArg(L, 1, "bnot")) },
	"band":    bitFold("band", func(a, b uint32) uint32 { return a & b }),
	"bor":     bitFold("bor", func(a, b uint32) uint32 { return a | b }),
	"bxor":    bitFold("bxor", func(a, b uint32) uint32 { return a ^ b }),
	"lshift":  bitShift("lshift", func(b, n uint32) uint32 { return b << n }),
	"rshift":  bitShift("rshift", func(b, n uint32) uint32 { return b >> n }),
	"arshift": bitShift("arshift", func(b, n uint32) uint32 { return uint32(int32(b) >> n) }),
	"rol":     bitShift("rol", func(b, n uint32) uint32 { return b<<n | b>>((32-n)&31) }),
	"ror":     bitShift("ror", func(b, n uint32) uint32 { return b>>n | b<<((32-n)&31) }),
	"bswap": func(L *lua.LState) int {
		b := bitArg(L, 1, "bswap")
		return bitRet(L, b>>24|(b>>8)&0xff00|(b&0xff00)<<8|b<<24)
	},
	"tohex": func(L *lua.LState) int {
		b := bitArg(L, 1, "tohex")
		n := int32(8)
		if L.GetTop() >= 2 {
			n = int32(bitArg(L, 2, "tohex"))
		}
		digits := "0123456789abcdef"
		if n < 0 {
			n, digits = -n, "0123456789ABCDEF"
		}
		if n > 8 {
			n = 8
		}
		buf := make([]byte, n)
		for i := n - 1; i >= 0; i-- {
			buf[i] = digits[b&15]
			b >>= 4
		}
		L.Push(lua.LString(buf))
		return 1
	},
}

func bitFold(name string, op func(a, b uint32) uint32) lua.LGFunction {
	return func(L *lua.LState) int {
		b := bitArg(L, 1, name)
		for i := L.GetTop(); i > 1; i-- {
			b = op(b, bitArg(L, i, name))
		}
		return bitRet(L, b)
	}
}

func bitShift(name string, op func(b, n uint32) uint32) lua.LGFunction {
	return func(L *lua.LState) int {
		b := bitArg(L, 1, name)
		n := bitArg(L, 2, name) & 31
		return bitRet(L, op(b, n))
	}
}

// ---------------------------------------------------------------------------
// string: Lua 5.1.5's string library (Redis's), with sizes checked and
// charged and pattern matching on the budget.

func (vm *luaVM) stringLib() map[string]lua.LGFunction {
	return map[string]lua.LGFunction{
		"byte": strByte, "char": vm.strChar, "dump": strDump, "find": vm.strFind,
		"format": vm.strFormat, "gmatch": vm.strGmatch, "gfind": vm.strGmatch, "gsub": vm.strGsub,
		"len": strLen, "lower": vm.strLower, "match": vm.strMatch, "rep": vm.strRep,
		"reverse": vm.strReverse, "sub": strSub, "upper": vm.strUpper,
	}
}

func posrelat(pos, l int64) int64 {
	if pos < 0 {
		pos += l + 1
	}
	if pos < 0 {
		return 0
	}
	return pos
}

func strLen(L *lua.LState) int {
	L.Push(lua.LNumber(len(checkString(L, 1, "len"))))
	return 1
}

func strSub(L *lua.LState) int {
	s := checkString(L, 1, "sub")
	l := int64(len(s))
	start := posrelat(checkInteger(L, 2, "sub"), l)
	end := posrelat(optInteger(L, 3, "sub", -1), l)
	if start < 1 {
		start = 1
	}
	if end > l {
		end = l
	}
	if start <= end {
		L.Push(lua.LString(s[start-1 : end]))
	} else {
		L.Push(lua.LString(""))
	}
	return 1
}

func strByte(L *lua.LState) int {
	s := checkString(L, 1, "byte")
	l := int64(len(s))
	posi := posrelat(optInteger(L, 2, "byte", 1), l)
	pose := posrelat(optInteger(L, 3, "byte", posi), l)
	if posi <= 0 {
		posi = 1
	}
	if pose > l {
		pose = l
	}
	if posi > pose {
		return 0
	}
	n := pose - posi + 1
	if n > scriptMaxResults {
		L.RaiseError("string slice too long")
	}
	for i := posi; i <= pose; i++ {
		L.Push(lua.LNumber(s[i-1]))
	}
	return int(n)
}

func (vm *luaVM) strChar(L *lua.LState) int {
	n := L.GetTop()
	b := make([]byte, n)
	for i := 1; i <= n; i++ {
		c := checkInt(L, i, "char")
		if c < 0 || c > 255 {
			argError(L, i, "char", "invalid value")
		}
		b[i-1] = byte(c)
	}
	L.Push(lua.LString(b))
	return 1
}

func strDump(L *lua.LState) int {
	L.RaiseError("unable to dump given function")
	return 0
}

func (vm *luaVM) strRep(L *lua.LState) int {
	s := checkString(L, 1, "rep")
	n := checkInt(L, 2, "rep")
	if n <= 0 || len(s) == 0 {
		L.Push(lua.LString(""))
		return 1
	}
	if int64(len(s))*int64(n) > scriptMaxString {
		L.RaiseError("resulting string too large")
	}
	vm.chargeBytes(L, len(s)*n)
	L.Push(lua.LString(strings.Repeat(s, n)))
	return 1
}

func (vm *luaVM) strReverse(L *lua.LState) int {
	s := checkString(L, 1, "reverse")
	vm.chargeBytes(L, len(s))
	b := make([]byte, len(s))
	for i := range b {
		b[i] = s[len(s)-1-i]
	}
	L.Push(lua.LString(b))
	return 1
}

// strLower and strUpper are C's tolower/toupper in the C locale: ASCII only,
// byte by byte.
func (vm *luaVM) strLower(L *lua.LState) int { return vm.strMap(L, "lower", 'A', 'Z', 'a'-'A') }
func (vm *luaVM) strUpper(L *lua.LState) int { return vm.strMap(L, "upper", 'a', 'z', 'A'-'a') }

func (vm *luaVM) strMap(L *lua.LState, fname string, lo, hi byte, delta int) int {
	s := checkString(L, 1, fname)
	vm.chargeBytes(L, len(s))
	b := []byte(s)
	for i, c := range b {
		if c >= lo && c <= hi {
			b[i] = byte(int(c) + delta)
		}
	}
	L.Push(lua.LString(b))
	return 1
}

func cIsDigit(c byte) bool { return c >= '0' && c <= '9' }

// strFormat is Lua 5.1's string.format: C's printf conversions, widths and
// precisions of at most two digits.
func (vm *luaVM) strFormat(L *lua.LState) int {
	top := L.GetTop()
	arg := 1
	fs := checkString(L, 1, "format")
	at := func(i int) byte {
		if i < len(fs) {
			return fs[i]
		}
		return 0
	}
	out := &outBuf{vm: vm, L: L}
	add := out.writeString
	for i := 0; i < len(fs); {
		if fs[i] != '%' {
			out.writeByte(fs[i])
			i++
			continue
		}
		i++
		if at(i) == '%' {
			out.writeByte('%')
			i++
			continue
		}
		arg++
		if arg > top {
			argError(L, arg, "format", "no value")
		}
		start := i
		for at(i) != 0 && strings.IndexByte("-+ #0", at(i)) >= 0 {
			i++
		}
		if i-start >= 6 {
			L.RaiseError("invalid format (repeated flags)")
		}
		if cIsDigit(at(i)) {
			i++
		}
		if cIsDigit(at(i)) {
			i++
		}
		if at(i) == '.' {
			i++
			if cIsDigit(at(i)) {
				i++
			}
			if cIsDigit(at(i)) {
				i++
			}
		}
		if cIsDigit(at(i)) {
			L.RaiseError("invalid format (width or precision too long)")
		}
		spec := parseCSpec(fs[start:i])
		conv := at(i)
		i++
		switch conv {
		case 'c':
			c := byte(int32(luaToInt64(checkNumber(L, arg, "format"))))
			add(cString(spec.pad(string([]byte{c}), false)))
		case 'd', 'i':
			add(spec.formatInt(luaToInt64(checkNumber(L, arg, "format"))))
		case 'o', 'u', 'x', 'X':
			add(spec.formatUint(luaToUint64(checkNumber(L, arg, "format")), conv))
		case 'e', 'E', 'f', 'g', 'G':
			add(spec.formatFloat(checkNumber(L, arg, "format"), conv))
		case 'q':
			add(luaQuote(checkString(L, arg, "format")))
		case 's':
			s := checkString(L, arg, "format")
			if spec.prec < 0 && len(s) >= 100 {
				add(s)
			} else {
				add(spec.formatString(cString(s)))
			}
		default:
			L.RaiseError("invalid option '%%%c' to 'format'", conv)
		}
	}
	L.Push(lua.LString(out.String()))
	return 1
}

// cString is s as C sees it: up to the first NUL.
func cString(s string) string {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return s[:i]
	}
	return s
}

// cSpec is a printf conversion's flags, width and precision (-1: none).
type cSpec struct {
	flags       string
	width, prec int
}

func parseCSpec(s string) cSpec {
	sp := cSpec{width: -1, prec: -1}
	i := 0
	for i < len(s) && strings.IndexByte("-+ #0", s[i]) >= 0 {
		i++
	}
	sp.flags = s[:i]
	if j := strings.IndexByte(s, '.'); j >= 0 {
		sp.prec, _ = strconv.Atoi(s[j+1:]) // "%.f": precision 0
		s = s[:j]
	}
	if i < len(s) {
		sp.width, _ = strconv.Atoi(s[i:])
	}
	return sp
}

func (sp cSpec) has(f byte) bool { return strings.IndexByte(sp.flags, f) >= 0 }

// verb rebuilds the spec for Go's fmt, without the flags in drop.
func (sp cSpec) verb(verb byte, drop string, defPrec int) string {
	b := []byte{'%'}
	for i := 0; i < len(sp.flags); i++ {
		if strings.IndexByte(drop, sp.flags[i]) < 0 {
			b = append(b, sp.flags[i])
		}
	}
	if sp.width >= 0 {
		b = strconv.AppendInt(b, int64(sp.width), 10)
	}
	if sp.prec >= 0 {
		b = append(b, '.')
		b = strconv.AppendInt(b, int64(sp.prec), 10)
	} else if defPrec >= 0 {
		b = append(b, '.')
		b = strconv.AppendInt(b, int64(defPrec), 10)
	}
	return string(append(b, verb))
}

// pad pads s to the width with spaces (zeros only where C would).
func (sp cSpec) pad(s string, zeros bool) string {
	if len(s) >= sp.width {
		return s
	}
	fill := strings.Repeat(" ", sp.width-len(s))
	if sp.has('-') {
		return s + fill
	}
	if zeros && sp.has('0') {
		return strings.Repeat("0", sp.width-len(s)) + s
	}
	return fill + s
}

func (sp cSpec) formatInt(n int64) string { return fmt.Sprintf(sp.verb('d', "#", -1), n) }

func (sp cSpec) formatUint(n uint64, conv byte) string {
	drop := "+ "
	if n == 0 && (conv == 'x' || conv == 'X') {
		drop += "#"
	}
	if conv == 'u' {
		conv = 'd'
		drop += "#"
	}
	return fmt.Sprintf(sp.verb(conv, drop, -1), n)
}

func (sp cSpec) formatFloat(f float64, conv byte) string {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		s := "inf"
		if math.IsNaN(f) {
			s = "nan"
		}
		if conv == 'E' || conv == 'G' {
			s = strings.ToUpper(s)
		}
		switch {
		case math.Signbit(f):
			s = "-" + s
		case sp.has('+'):
			s = "+" + s
		case sp.has(' '):
			s = " " + s
		}
		return sp.pad(s, false)
	}
	return fmt.Sprintf(sp.verb(conv, "", 6), f)
}

func (sp cSpec) formatString(s string) string {
	if sp.prec >= 0 && len(s) > sp.prec {
		s = s[:sp.prec]
	}
	return sp.pad(s, false)
}

// luaQuote is string.format's %q.
func luaQuote(s string) string {
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\', '\n':
			b = append(b, '\\', c)
		case '\r':
			b = append(b, `\r`...)
		case 0:
			b = append(b, `\000`...)
		default:
			b = append(b, c)
		}
	}
	return string(append(b, '"'))
}

// strFind, strMatch, strGmatch and strGsub are Lua 5.1's str_find_aux,
// gmatch and str_gsub on luaMatcher.

func (vm *luaVM) strFind(L *lua.LState) int  { return vm.strFindAux(L, true) }
func (vm *luaVM) strMatch(L *lua.LState) int { return vm.strFindAux(L, false) }

func (vm *luaVM) strFindAux(L *lua.LState, find bool) int {
	fname := "match"
	if find {
		fname = "find"
	}
	s := checkString(L, 1, fname)
	p := checkString(L, 2, fname)
	l := int64(len(s))
	init := posrelat(optInteger(L, 3, fname, 1), l) - 1
	if init < 0 {
		init = 0
	} else if init > l {
		init = l
	}
	if find && (L.ToBool(4) || !strings.ContainsAny(cString(p), "^$*+?.([%-")) {
		// Plain search.
		vm.charge(L, (l-init)/256)
		if i := strings.Index(s[init:], p); i >= 0 {
			L.Push(lua.LNumber(init + int64(i) + 1))
			L.Push(lua.LNumber(init + int64(i) + int64(len(p))))
			return 2
		}
		L.Push(lua.LNil)
		return 1
	}
	m := &luaMatcher{vm: vm, L: L, src: s, pat: p}
	pi := 0
	anchor := m.p(0) == '^'
	if anchor {
		pi = 1
	}
	for s1 := int(init); ; s1++ {
		m.level = 0
		if e := m.match(s1, pi, 0); e >= 0 {
			if find {
				L.Push(lua.LNumber(s1 + 1))
				L.Push(lua.LNumber(e))
				return m.pushCaptures(-1, 0) + 2
			}
			return m.pushCaptures(s1, e)
		}
		if s1 >= len(s) || anchor {
			break
		}
	}
	L.Push(lua.LNil)
	return 1
}

func (vm *luaVM) strGmatch(L *lua.LState) int {
	s := checkString(L, 1, "gmatch")
	p := checkString(L, 2, "gmatch")
	pos := 0
	L.Push(L.NewFunction(func(L *lua.LState) int {
		m := &luaMatcher{vm: vm, L: L, src: s, pat: p}
		for src := pos; src <= len(s); src++ {
			m.level = 0
			if e := m.match(src, 0, 0); e >= 0 {
				pos = e
				if e == src {
					pos++
				}
				return m.pushCaptures(src, e)
			}
		}
		pos = len(s) + 1
		return 0
	}))
	return 1
}

func (vm *luaVM) strGsub(L *lua.LState) int {
	src := checkString(L, 1, "gsub")
	p := checkString(L, 2, "gsub")
	repl := L.Get(3)
	switch repl.(type) {
	case lua.LNumber, lua.LString, *lua.LFunction, *lua.LTable:
	default:
		argError(L, 3, "gsub", "string/function/table expected")
	}
	maxS := optInteger(L, 4, "gsub", int64(len(src))+1)
	m := &luaMatcher{vm: vm, L: L, src: src, pat: p}
	pi := 0
	anchor := m.p(0) == '^'
	if anchor {
		pi = 1
	}
	// The result is built from pieces (most of them slices of src or the
	// replacement itself) and joined once.
	var parts []string
	size := 0
	add := func(s string) {
		if size+len(s) > scriptMaxString {
			L.RaiseError("resulting string too large")
		}
		if s == "" {
			return
		}
		vm.chargeBytes(L, len(s)+scriptBytesPerUnit) // the piece and its header
		parts = append(parts, s)
		size += len(s)
	}
	n := int64(0)
	s, pend := 0, 0 // src[pend:s] is copied as is
	for n < maxS {
		m.level = 0
		e := m.match(s, pi, 0)
		if e >= 0 {
			n++
			add(src[pend:s])
			add(vm.gsubValue(m, repl, s, e))
			pend = s
		}
		if e >= 0 && e > s {
			s, pend = e, e
		} else if s < len(src) {
			s++
		} else {
			break
		}
		if anchor {
			break
		}
	}
	add(src[pend:])
	L.Push(lua.LString(strings.Join(parts, "")))
	L.Push(lua.LNumber(n))
	return 2
}

// gsubValue is the replacement of one match (Lua 5.1's add_value).
func (vm *luaVM) gsubValue(m *luaMatcher, repl lua.LValue, s, e int) string {
	L := m.L
	switch r := repl.(type) {
	case lua.LNumber, lua.LString:
		news := luaToStringPlain(r)
		if strings.IndexByte(news, '%') < 0 {
			return news
		}
		var b []byte
		for i := 0; i < len(news); i++ {
			if j := strings.IndexByte(news[i:], '%'); j != 0 {
				if j < 0 {
					j = len(news) - i
				}
				b = append(b, news[i:i+j]...)
				i += j - 1
				continue
			}
			i++
			var d byte
			if i < len(news) {
				d = news[i]
			}
			switch {
			case !cIsDigit(d):
				b = append(b, d)
			case d == '0':
				b = append(b, m.src[s:e]...)
			default:
				b = append(b, luaToStringPlain(m.capture(int(d-'1'), s, e))...)
			}
			if len(b) > scriptMaxString {
				L.RaiseError("resulting string too large")
			}
		}
		return string(b)
	case *lua.LFunction:
		top := L.GetTop()
		L.Push(r)
		n := m.pushCaptures(s, e)
		L.Call(n, 1)
		v := L.Get(-1)
		L.SetTop(top)
		return gsubResult(L, v, m.src[s:e])
	case *lua.LTable:
		v := L.GetTable(r, m.capture(0, s, e))
		return gsubResult(L, v, m.src[s:e])
	}
	return ""
}

func gsubResult(L *lua.LState, v lua.LValue, orig string) string {
	if v == lua.LNil || v == lua.LFalse {
		return orig
	}
	if !isStringOrNumber(v) {
		L.RaiseError("invalid replacement value (a %s)", v.Type().String())
	}
	return luaToStringPlain(v)
}

// luaMatcher is Lua 5.1's pattern matcher (lstrlib.c), counting its steps
// against the budget: backtracking patterns can take exponential time.
type luaMatcher struct {
	vm       *luaVM
	L        *lua.LState
	src, pat string
	level    int
	caps     [32]struct{ init, len int }
	steps    int
}

const (
	capUnfinished = -1
	capPosition   = -2
)

// p returns the pattern byte at i, 0 past the end (C's terminator).
func (m *luaMatcher) p(i int) byte {
	if i < len(m.pat) {
		return m.pat[i]
	}
	return 0
}

func (m *luaMatcher) s(i int) byte {
	if i < len(m.src) {
		return m.src[i]
	}
	return 0
}

func (m *luaMatcher) step() {
	m.steps++
	if m.steps&15 == 0 {
		m.vm.charge(m.L, 1)
	}
}

func (m *luaMatcher) classEnd(p int) int {
	c := m.p(p)
	p++
	switch c {
	case '%':
		if m.p(p) == 0 {
			m.L.RaiseError("%s", "malformed pattern (ends with '%')")
		}
		return p + 1
	case '[':
		if m.p(p) == '^' {
			p++
		}
		for {
			if m.p(p) == 0 {
				m.L.RaiseError("malformed pattern (missing ']')")
			}
			c := m.p(p)
			p++
			if c == '%' && m.p(p) != 0 {
				p++
			}
			if m.p(p) == ']' {
				return p + 1
			}
		}
	}
	return p
}

func matchClass(c, cl byte) bool {
	var res bool
	switch cl | 0x20 {
	case 'a':
		res = cIsAlpha(c)
	case 'c':
		res = c < 32 || c == 127
	case 'd':
		res = cIsDigit(c)
	case 'l':
		res = c >= 'a' && c <= 'z'
	case 'p':
		res = c > 32 && c < 127 && !cIsAlpha(c) && !cIsDigit(c)
	case 's':
		res = c == ' ' || (c >= '\t' && c <= '\r')
	case 'u':
		res = c >= 'A' && c <= 'Z'
	case 'w':
		res = cIsAlpha(c) || cIsDigit(c)
	case 'x':
		res = cIsDigit(c) || (c|0x20 >= 'a' && c|0x20 <= 'f')
	case 'z':
		res = c == 0
	default:
		return cl == c
	}
	if cl >= 'A' && cl <= 'Z' {
		return !res
	}
	return res
}

func cIsAlpha(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

func (m *luaMatcher) matchBracketClass(c byte, p, ec int) bool {
	sig := true
	if m.p(p+1) == '^' {
		sig = false
		p++
	}
	for p++; p < ec; p++ {
		switch {
		case m.p(p) == '%':
			p++
			if matchClass(c, m.p(p)) {
				return sig
			}
		case m.p(p+1) == '-' && p+2 < ec:
			p += 2
			if m.p(p-2) <= c && c <= m.p(p) {
				return sig
			}
		case m.p(p) == c:
			return sig
		}
	}
	return !sig
}

func (m *luaMatcher) singleMatch(c byte, p, ep int) bool {
	switch m.p(p) {
	case '.':
		return true
	case '%':
		return matchClass(c, m.p(p+1))
	case '[':
		return m.matchBracketClass(c, p, ep-1)
	}
	return m.p(p) == c
}

// match returns the end of the match of pattern position p at source
// position s, or -1.
func (m *luaMatcher) match(s, p, depth int) int {
	if depth > scriptMaxDepth {
		m.L.RaiseError("pattern too complex")
	}
	depth++
	for {
		m.step()
		switch m.p(p) {
		case '(':
			if m.p(p+1) == ')' {
				return m.startCapture(s, p+2, capPosition, depth)
			}
			return m.startCapture(s, p+1, capUnfinished, depth)
		case ')':
			return m.endCapture(s, p+1, depth)
		case 0:
			return s
		case '$':
			if m.p(p+1) == 0 {
				if s == len(m.src) {
					return s
				}
				return -1
			}
		case '%':
			switch d := m.p(p + 1); {
			case d == 'b':
				if s = m.matchBalance(s, p+2); s < 0 {
					return -1
				}
				p += 4
				continue
			case d == 'f':
				p += 2
				if m.p(p) != '[' {
					m.L.RaiseError("%s", "missing '[' after '%f' in pattern")
				}
				ep := m.classEnd(p)
				var prev byte
				if s > 0 {
					prev = m.src[s-1]
				}
				if m.matchBracketClass(prev, p, ep-1) || !m.matchBracketClass(m.s(s), p, ep-1) {
					return -1
				}
				p = ep
				continue
			case cIsDigit(d):
				if s = m.matchCapture(s, d); s < 0 {
					return -1
				}
				p += 2
				continue
			}
		}
		// default: a single char class, maybe with a quantifier
		ep := m.classEnd(p)
		ok := s < len(m.src) && m.singleMatch(m.src[s], p, ep)
		switch m.p(ep) {
		case '?':
			if ok {
				if r := m.match(s+1, ep+1, depth); r >= 0 {
					return r
				}
			}
			p = ep + 1
			continue
		case '*':
			return m.maxExpand(s, p, ep, depth)
		case '+':
			if !ok {
				return -1
			}
			return m.maxExpand(s+1, p, ep, depth)
		case '-':
			return m.minExpand(s, p, ep, depth)
		}
		if !ok {
			return -1
		}
		s++
		p = ep
	}
}

func (m *luaMatcher) maxExpand(s, p, ep, depth int) int {
	i := 0
	for s+i < len(m.src) && m.singleMatch(m.src[s+i], p, ep) {
		m.step()
		i++
	}
	for ; i >= 0; i-- {
		if r := m.match(s+i, ep+1, depth); r >= 0 {
			return r
		}
	}
	return -1
}

func (m *luaMatcher) minExpand(s, p, ep, depth int) int {
	for {
		if r := m.match(s, ep+1, depth); r >= 0 {
			return r
		}
		if s < len(m.src) && m.singleMatch(m.src[s], p, ep) {
			s++
		} else {
			return -1
		}
	}
}

func (m *luaMatcher) startCapture(s, p, what, depth int) int {
	if m.level >= len(m.caps) {
		m.L.RaiseError("too many captures")
	}
	m.caps[m.level].init = s
	m.caps[m.level].len = what
	m.level++
	r := m.match(s, p, depth)
	if r < 0 {
		m.level--
	}
	return r
}

func (m *luaMatcher) endCapture(s, p, depth int) int {
	l := -1
	for k := m.level - 1; k >= 0; k-- {
		if m.caps[k].len == capUnfinished {
			l = k
			break
		}
	}
	if l < 0 {
		m.L.RaiseError("invalid pattern capture")
	}
	m.caps[l].len = s - m.caps[l].init
	r := m.match(s, p, depth)
	if r < 0 {
		m.caps[l].len = capUnfinished
	}
	return r
}

func (m *luaMatcher) matchBalance(s, p int) int {
	if m.p(p) == 0 || m.p(p+1) == 0 {
		m.L.RaiseError("unbalanced pattern")
	}
	if s >= len(m.src) || m.src[s] != m.p(p) {
		return -1
	}
	b, e, cont := m.p(p), m.p(p+1), 1
	for s++; s < len(m.src); s++ {
		m.step()
		switch m.src[s] {
		case e:
			cont--
			if cont == 0 {
				return s + 1
			}
		case b:
			cont++
		}
	}
	return -1
}

func (m *luaMatcher) matchCapture(s int, d byte) int {
	l := int(d) - '1'
	if l < 0 || l >= m.level || m.caps[l].len == capUnfinished {
		m.L.RaiseError("invalid capture index")
	}
	c := m.caps[l]
	if len(m.src)-s >= c.len && m.src[c.init:c.init+c.len] == m.src[s:s+c.len] {
		m.vm.charge(m.L, int64(c.len/16))
		return s + c.len
	}
	return -1
}

// capture returns capture i of a match [s, e) (the whole match if there
// are no captures and i is 0).
func (m *luaMatcher) capture(i, s, e int) lua.LValue {
	if i >= m.level {
		if i == 0 {
			return lua.LString(m.src[s:e])
		}
		m.L.RaiseError("invalid capture index")
	}
	c := m.caps[i]
	switch c.len {
	case capUnfinished:
		m.L.RaiseError("unfinished capture")
	case capPosition:
		return lua.LNumber(c.init + 1)
	}
	return lua.LString(m.src[c.init : c.init+c.len])
}

// pushCaptures pushes the captures (or the whole match [s, e) if none and
// s >= 0) and returns their number.
func (m *luaMatcher) pushCaptures(s, e int) int {
	n := m.level
	if n == 0 && s >= 0 {
		n = 1
	}
	for i := 0; i < n; i++ {
		m.L.Push(m.capture(i, s, e))
	}
	return n
}

// ---------------------------------------------------------------------------
// table: Lua 5.1.5's table library; the functions that write refuse the
// library tables, moves are charged.

func (vm *luaVM) tableLib() map[string]lua.LGFunction {
	return map[string]lua.LGFunction{
		"concat": vm.tConcat, "foreach": tForeach, "foreachi": tForeachi, "getn": tGetn,
		"insert": vm.tInsert, "maxn": vm.tMaxn, "remove": vm.tRemove, "setn": vm.tSetn, "sort": vm.tSort,
	}
}

// writable refuses the library tables, as Redis's read-only tables do
// (raised without a position, as from inside a C function).
func (vm *luaVM) writable(L *lua.LState, t *lua.LTable) {
	if vm.protected[t] {
		L.Error(lua.LString("Attempt to modify a readonly table"), 0)
	}
}

func tGetn(L *lua.LState) int {
	L.Push(lua.LNumber(border(checkTable(L, 1, "getn"))))
	return 1
}

func (vm *luaVM) tSetn(L *lua.LState) int {
	checkTable(L, 1, "setn")
	L.RaiseError("'setn' is obsolete")
	return 0
}

func (vm *luaVM) tMaxn(L *lua.LState) int {
	t := checkTable(L, 1, "maxn")
	max := 0.0
	n := int64(0)
	for k, _ := t.Next(lua.LNil); k != lua.LNil; k, _ = t.Next(k) {
		if f, ok := k.(lua.LNumber); ok && float64(f) > max {
			max = float64(f)
		}
		n++
	}
	vm.charge(L, n/8)
	L.Push(lua.LNumber(max))
	return 1
}

func tForeach(L *lua.LState) int {
	t := checkTable(L, 1, "foreach")
	f, ok := L.Get(2).(*lua.LFunction)
	if !ok {
		typeError(L, 2, "foreach", "function")
	}
	for k, v := t.Next(lua.LNil); k != lua.LNil; k, v = t.Next(k) {
		L.Push(f)
		L.Push(k)
		L.Push(v)
		L.Call(2, 1)
		if r := L.Get(-1); r != lua.LNil {
			return 1
		}
		L.Pop(1)
	}
	return 0
}

func tForeachi(L *lua.LState) int {
	t := checkTable(L, 1, "foreachi")
	n := border(t)
	f, ok := L.Get(2).(*lua.LFunction)
	if !ok {
		typeError(L, 2, "foreachi", "function")
	}
	for i := 1; i <= n; i++ {
		L.Push(f)
		L.Push(lua.LNumber(i))
		L.Push(t.RawGetInt(i))
		L.Call(2, 1)
		if r := L.Get(-1); r != lua.LNil {
			return 1
		}
		L.Pop(1)
	}
	return 0
}

func (vm *luaVM) tInsert(L *lua.LState) int {
	t := checkTable(L, 1, "insert")
	e := border(t) + 1
	var pos int
	switch L.GetTop() {
	case 2:
		pos = e
	case 3:
		pos = checkInt(L, 2, "insert")
		if pos > e {
			e = pos
		}
		vm.writable(L, t)
		if moves := int64(e) - int64(pos); moves > 0 {
			vm.charge(L, moves/8)
			for i := e; i > pos; i-- {
				t.RawSetInt(i, t.RawGetInt(i-1))
			}
		}
	default:
		L.RaiseError("wrong number of arguments to 'insert'")
	}
	vm.writable(L, t)
	vm.chargeGap(L, arrayLen(t), lua.LNumber(pos))
	t.RawSetInt(pos, L.Get(L.GetTop()))
	return 0
}

func (vm *luaVM) tRemove(L *lua.LState) int {
	t := checkTable(L, 1, "remove")
	e := border(t)
	pos := optInt(L, 2, "remove", e)
	if pos < 1 || pos > e {
		return 0
	}
	vm.writable(L, t)
	vm.charge(L, int64(e-pos)/8)
	v := t.RawGetInt(pos)
	for ; pos < e; pos++ {
		t.RawSetInt(pos, t.RawGetInt(pos+1))
	}
	t.RawSetInt(e, lua.LNil)
	L.Push(v)
	return 1
}

func (vm *luaVM) tConcat(L *lua.LState) int {
	sep := optString(L, 2, "concat", "")
	t := checkTable(L, 1, "concat")
	i := optInt(L, 3, "concat", 1)
	var last int
	if L.Get(4) == lua.LNil {
		last = border(t)
	} else {
		last = checkInt(L, 4, "concat")
	}
	size := int64(0)
	for k := i; k <= last; k++ {
		v := t.RawGetInt(k)
		if !isStringOrNumber(v) {
			L.RaiseError("invalid value (%s) at index %d in table for 'concat'", v.Type().String(), k)
		}
		size += int64(len(luaToStringPlain(v)))
		if k < last {
			size += int64(len(sep))
		}
		if size > scriptMaxString {
			L.RaiseError("resulting string too large")
		}
		if k == math.MaxInt32 {
			break
		}
	}
	vm.chargeBytes(L, int(size))
	var b strings.Builder
	b.Grow(int(size))
	for k := i; k <= last; k++ {
		b.WriteString(luaToStringPlain(t.RawGetInt(k)))
		if k < last {
			b.WriteString(sep)
		}
		if k == math.MaxInt32 {
			break
		}
	}
	L.Push(lua.LString(b.String()))
	return 1
}

// tSort is Lua 5.1's quicksort (so that elements that compare equal end
// up where Redis puts them), in place on the table.
func (vm *luaVM) tSort(L *lua.LState) int {
	t := checkTable(L, 1, "sort")
	n := border(t)
	var f *lua.LFunction
	if v := L.Get(2); v != lua.LNil {
		var ok bool
		if f, ok = v.(*lua.LFunction); !ok {
			typeError(L, 2, "sort", "function")
		}
	}
	vm.writable(L, t)
	less := func(a, b lua.LValue) bool {
		if f == nil {
			vm.charge(L, 1)
			return luaLess(L, a, b)
		}
		L.Push(f)
		L.Push(a)
		L.Push(b)
		L.Call(2, 1)
		r := lua.LVAsBool(L.Get(-1))
		L.Pop(1)
		return r
	}
	get := func(i int) lua.LValue { return t.RawGetInt(i) }
	set := func(i int, v lua.LValue) { t.RawSetInt(i, v) }
	var auxsort func(l, u int)
	auxsort = func(l, u int) {
		for l < u {
			if less(get(u), get(l)) {
				a, b := get(l), get(u)
				set(l, b)
				set(u, a)
			}
			if u-l == 1 {
				break
			}
			i := (l + u) / 2
			if less(get(i), get(l)) {
				a, b := get(i), get(l)
				set(i, b)
				set(l, a)
			} else if less(get(u), get(i)) {
				a, b := get(i), get(u)
				set(i, b)
				set(u, a)
			}
			if u-l == 2 {
				break
			}
			pivot := get(i)
			a, b := get(i), get(u-1)
			set(i, b)
			set(u-1, a)
			i, j := l, u-1
			for {
				for i++; less(get(i), pivot); i++ {
					if i > u {
						L.RaiseError("invalid order function for sorting")
					}
				}
				for j--; less(pivot, get(j)); j-- {
					if j < l {
						L.RaiseError("invalid order function for sorting")
					}
				}
				if j < i {
					break
				}
				a, b := get(i), get(j)
				set(i, b)
				set(j, a)
			}
			a, b = get(u-1), get(i)
			set(u-1, b)
			set(i, a)
			if i-l < u-i {
				j, i, l = l, i-1, i+1
			} else {
				j, i, u = i+1, u, i-1
			}
			auxsort(j, i)
		}
	}
	auxsort(1, n)
	return 0
}

// luaLess is Lua 5.1's lua_lessthan as called from a C function: errors
// carry no position.
func luaLess(L *lua.LState, a, b lua.LValue) bool {
	switch x := a.(type) {
	case lua.LNumber:
		if y, ok := b.(lua.LNumber); ok {
			return x < y
		}
	case lua.LString:
		if y, ok := b.(lua.LString); ok {
			return x < y
		}
	}
	if a.Type() == b.Type() {
		if mm := L.GetMetaField(a, "__lt"); mm != lua.LNil && L.RawEqual(mm, L.GetMetaField(b, "__lt")) {
			L.Push(mm)
			L.Push(a)
			L.Push(b)
			L.Call(2, 1)
			r := lua.LVAsBool(L.Get(-1))
			L.Pop(1)
			return r
		}
	}
	t1, t2 := a.Type().String(), b.Type().String()
	if t1 == t2 {
		L.Error(lua.LString("attempt to compare two "+t1+" values"), 0)
	}
	L.Error(lua.LString("attempt to compare "+t1+" with "+t2), 0)
	return false
}

// ---------------------------------------------------------------------------
// Numbers.

// luaToInt64 converts like a C cast on x86-64 (cvttsd2si): NaN and values
// out of range become math.MinInt64, on every architecture.
func luaToInt64(f float64) int64 {
	if f != f || f >= 9223372036854775808.0 || f < -9223372036854775808.0 {
		return math.MinInt64
	}
	return int64(f)
}

// luaToUint64 is C's (unsigned long) cast as gcc compiles it on x86-64.
func luaToUint64(f float64) uint64 {
	if f >= 9223372036854775808.0 {
		if f >= 18446744073709551616.0 {
			return 0
		}
		return uint64(f)
	}
	return uint64(luaToInt64(f))
}

// cFormatG is C's "%.<prec>g" (glibc's inf and nan spellings).
func cFormatG(f float64, prec int) string {
	switch {
	case math.IsNaN(f):
		if math.Signbit(f) {
			return "-nan"
		}
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return strconv.FormatFloat(f, 'g', prec, 64)
}

// fmtNum14 is how Lua 5.1 turns a number into a string ("%.14g").
func fmtNum14(f float64) string { return cFormatG(f, 14) }

func cIsSpace(c byte) bool { return c == ' ' || (c >= '\t' && c <= '\r') }

// str2number is Lua 5.1's luaO_str2d on glibc's strtod: leading and
// trailing spaces, decimal, hexadecimal, inf and nan.
func str2number(s string) (float64, bool) {
	i := 0
	for i < len(s) && cIsSpace(s[i]) {
		i++
	}
	f, n := strtod(s[i:])
	if n == 0 {
		return 0, false
	}
	i += n
	for i < len(s) && cIsSpace(s[i]) {
		i++
	}
	return f, i == len(s)
}

// strtod parses the longest prefix of s that glibc's strtod accepts and
// returns its value and length (0: none).
func strtod(s string) (float64, int) {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	neg := i > 0 && s[0] == '-'
	rest := s[i:]
	if len(rest) > 9 {
		rest = rest[:9]
	}
	rest = strings.ToLower(rest)
	switch {
	case strings.HasPrefix(rest, "inf"):
		n := 3
		if strings.HasPrefix(rest, "infinity") {
			n = 8
		}
		if neg {
			return math.Inf(-1), i + n
		}
		return math.Inf(1), i + n
	case strings.HasPrefix(rest, "nan"):
		n := 3
		if len(rest) > 3 && rest[3] == '(' {
			if j := strings.IndexByte(rest[4:], ')'); j >= 0 {
				ok := true
				for _, c := range rest[4 : 4+j] {
					if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
						ok = false
					}
				}
				if ok {
					n = 5 + j
				}
			}
		}
		nan := math.NaN()
		if neg {
			nan = math.Copysign(nan, -1)
		}
		return nan, i + n
	case len(rest) >= 2 && rest[0] == '0' && rest[1] == 'x':
		j := i + 2
		mant := j
		for j < len(s) && isHex(s[j]) {
			j++
		}
		digits := j - mant
		if j < len(s) && s[j] == '.' {
			j++
			k := j
			for j < len(s) && isHex(s[j]) {
				j++
			}
			digits += j - k
		}
		if digits == 0 {
			return 0, i + 1 // just the "0"
		}
		end := j
		if j < len(s) && (s[j] == 'p' || s[j] == 'P') {
			k := j + 1
			if k < len(s) && (s[k] == '+' || s[k] == '-') {
				k++
			}
			if k < len(s) && cIsDigit(s[k]) {
				for k < len(s) && cIsDigit(s[k]) {
					k++
				}
				end = k
			}
		}
		lit := s[:end]
		if end == j {
			lit += "p0"
		}
		f, _ := strconv.ParseFloat(lit, 64)
		return f, end
	}
	j := i
	for j < len(s) && cIsDigit(s[j]) {
		j++
	}
	digits := j - i
	if j < len(s) && s[j] == '.' {
		j++
		k := j
		for j < len(s) && cIsDigit(s[j]) {
			j++
		}
		digits += j - k
	}
	if digits == 0 {
		return 0, 0
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		k := j + 1
		if k < len(s) && (s[k] == '+' || s[k] == '-') {
			k++
		}
		if k < len(s) && cIsDigit(s[k]) {
			for k < len(s) && cIsDigit(s[k]) {
				k++
			}
			j = k
		}
	}
	f, _ := strconv.ParseFloat(s[:j], 64) // out of range: ±Inf or 0, as strtod
	return f, j
}

func isHex(c byte) bool { return cIsDigit(c) || (c|0x20 >= 'a' && c|0x20 <= 'f') }

// strtoul is C's strtoul(s, &end, base) (2 <= base <= 36): it returns the
// value (saturated), the rest of s and whether a digit was read.
func strtoul(s string, base int) (float64, string, bool) {
	i := 0
	for i < len(s) && cIsSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	if base == 16 && i+2 < len(s) && s[i] == '0' && s[i+1]|0x20 == 'x' && digitVal(s[i+2]) < 16 {
		i += 2
	}
	var n uint64
	over := false
	start := i
	for i < len(s) {
		d := digitVal(s[i])
		if d >= base {
			break
		}
		if n > (math.MaxUint64-uint64(d))/uint64(base) {
			over = true
		}
		n = n*uint64(base) + uint64(d)
		i++
	}
	if i == start {
		return 0, s, false
	}
	if over {
		n = math.MaxUint64
	} else if neg {
		n = -n
	}
	return float64(n), s[i:], true
}

func digitVal(c byte) int {
	switch {
	case cIsDigit(c):
		return int(c - '0')
	case c|0x20 >= 'a' && c|0x20 <= 'z':
		return int(c|0x20-'a') + 10
	}
	return 99
}

// ---------------------------------------------------------------------------
// cjson: lua-cjson 2.1 as shipped with Redis (encode, decode, null and the
// configuration functions, whose settings last for one run).

type cjsonConfig struct {
	encodeMaxDepth, decodeMaxDepth int
	sparseConvert                  bool
	sparseRatio, sparseSafe        int
	numberPrecision                int
	encodeInvalid, decodeInvalid   bool
}

var defaultCjson = cjsonConfig{encodeMaxDepth: 1000, decodeMaxDepth: 1000, sparseRatio: 2, sparseSafe: 10,
	numberPrecision: 14, decodeInvalid: true}

func (vm *luaVM) cjsonLib() map[string]lua.LGFunction {
	cfg := func(L *lua.LState) *cjsonConfig { return &vm.run.cjson }
	intOpt := func(name string, get func(c *cjsonConfig) *int, lo, hi int) lua.LGFunction {
		return func(L *lua.LState) int {
			c := cfg(L)
			if L.GetTop() >= 1 && L.Get(1) != lua.LNil {
				v := checkInt(L, 1, name)
				if v < lo || v > hi {
					argError(L, 1, name, fmt.Sprintf("expected integer between %d and %d", lo, hi))
				}
				*get(c) = v
			}
			L.Push(lua.LNumber(*get(c)))
			return 1
		}
	}
	boolOpt := func(name string, get func(c *cjsonConfig) *bool) lua.LGFunction {
		return func(L *lua.LState) int {
			c := cfg(L)
			if L.GetTop() >= 1 && L.Get(1) != lua.LNil {
				switch v := L.Get(1).(type) {
				case lua.LBool:
					*get(c) = bool(v)
				case lua.LString:
					if v != "on" && v != "off" {
						argError(L, 1, name, "invalid option '"+string(v)+"'")
					}
					*get(c) = v == "on"
				default:
					*get(c) = lua.LVAsBool(v)
				}
			}
			L.Push(lua.LBool(*get(c)))
			return 1
		}
	}
	return map[string]lua.LGFunction{
		"encode":                  vm.cjsonEncode,
		"decode":                  vm.cjsonDecode,
		"encode_max_depth":        intOpt("encode_max_depth", func(c *cjsonConfig) *int { return &c.encodeMaxDepth }, 1, math.MaxInt32),
		"decode_max_depth":        intOpt("decode_max_depth", func(c *cjsonConfig) *int { return &c.decodeMaxDepth }, 1, math.MaxInt32),
		"encode_number_precision": intOpt("encode_number_precision", func(c *cjsonConfig) *int { return &c.numberPrecision }, 1, 14),
		"encode_keep_buffer":      func(L *lua.LState) int { L.Push(lua.LTrue); return 1 },
		"encode_invalid_numbers":  boolOpt("encode_invalid_numbers", func(c *cjsonConfig) *bool { return &c.encodeInvalid }),
		"decode_invalid_numbers":  boolOpt("decode_invalid_numbers", func(c *cjsonConfig) *bool { return &c.decodeInvalid }),
		"encode_sparse_array": func(L *lua.LState) int {
			c := cfg(L)
			if L.GetTop() >= 1 && L.Get(1) != lua.LNil {
				c.sparseConvert = lua.LVAsBool(L.Get(1))
			}
			if L.GetTop() >= 2 && L.Get(2) != lua.LNil {
				c.sparseRatio = checkInt(L, 2, "encode_sparse_array")
			}
			if L.GetTop() >= 3 && L.Get(3) != lua.LNil {
				c.sparseSafe = checkInt(L, 3, "encode_sparse_array")
			}
			L.Push(lua.LBool(c.sparseConvert))
			L.Push(lua.LNumber(c.sparseRatio))
			L.Push(lua.LNumber(c.sparseSafe))
			return 3
		},
	}
}

var cjsonEscape = func() (t [256]string) {
	for c := 0; c < 32; c++ {
		t[c] = fmt.Sprintf(`\u%04x`, c)
	}
	t['\b'], t['\t'], t['\n'], t['\f'], t['\r'] = `\b`, `\t`, `\n`, `\f`, `\r`
	t['"'], t['\\'], t['/'], t[127] = `\"`, `\\`, `\/`, `\u007f`
	return
}()

func (vm *luaVM) cjsonEncode(L *lua.LState) int {
	if L.GetTop() != 1 {
		argError(L, 1, "encode", "expected 1 argument")
	}
	out := &outBuf{vm: vm, L: L}
	vm.jsonValue(L, out, L.Get(1), 0)
	L.Push(lua.LString(out.String()))
	return 1
}

func (vm *luaVM) jsonFail(L *lua.LState, v lua.LValue, reason string) {
	L.RaiseError("Cannot serialise %s: %s", v.Type().String(), reason)
}

func (vm *luaVM) jsonValue(L *lua.LState, b *outBuf, v lua.LValue, depth int) {
	vm.step(L)
	cfg := &vm.run.cjson
	switch x := v.(type) {
	case lua.LString:
		b.writeByte('"')
		run := 0 // x[run:i] needs no escape
		for i := 0; i < len(x); i++ {
			if e := cjsonEscape[x[i]]; e != "" {
				b.writeString(string(x[run:i]))
				b.writeString(e)
				run = i + 1
			}
		}
		b.writeString(string(x[run:]))
		b.writeByte('"')
	case lua.LNumber:
		f := float64(x)
		if math.IsInf(f, 0) || math.IsNaN(f) {
			if !cfg.encodeInvalid {
				vm.jsonFail(L, v, "must not be NaN or Inf")
			}
			b.writeString(cFormatG(f, cfg.numberPrecision))
			return
		}
		b.writeString(cFormatG(f, cfg.numberPrecision))
	case lua.LBool:
		if x {
			b.writeString("true")
		} else {
			b.writeString("false")
		}
	case *lua.LNilType:
		b.writeString("null")
	case *lua.LUserData:
		if x != vm.null {
			vm.jsonFail(L, v, "type not supported")
		}
		b.writeString("null")
	case *lua.LTable:
		depth++
		if depth > cfg.encodeMaxDepth {
			L.RaiseError("Cannot serialise, excessive nesting (%d)", depth)
		}
		n := vm.jsonArrayLength(L, x)
		if n > 0 {
			b.writeByte('[')
			for i := 1; i <= n; i++ {
				if i > 1 {
					b.writeByte(',')
				}
				vm.jsonValue(L, b, x.RawGetInt(i), depth)
			}
			b.writeByte(']')
			return
		}
		b.writeByte('{')
		first := true
		for k, e := x.Next(lua.LNil); k != lua.LNil; k, e = x.Next(k) {
			if !first {
				b.writeByte(',')
			}
			first = false
			switch kk := k.(type) {
			case lua.LString:
				vm.jsonValue(L, b, kk, depth)
			case lua.LNumber:
				b.writeByte('"')
				b.writeString(cFormatG(float64(kk), cfg.numberPrecision))
				b.writeByte('"')
			default:
				vm.jsonFail(L, k, "table key must be a number or string")
			}
			b.writeByte(':')
			vm.jsonValue(L, b, e, depth)
		}
		b.writeByte('}')
	default:
		vm.jsonFail(L, v, "type not supported")
	}
}

// jsonArrayLength is lua-cjson's lua_array_length: the array's length if
// every key is a positive integer (0 for an empty table), -1 if not.
func (vm *luaVM) jsonArrayLength(L *lua.LState, t *lua.LTable) int {
	max, items := 0, 0
	for k, _ := t.Next(lua.LNil); k != lua.LNil; k, _ = t.Next(k) {
		vm.step(L)
		n, ok := k.(lua.LNumber)
		if !ok || n < 1 || float64(n) != math.Floor(float64(n)) {
			return -1
		}
		if int(n) > max {
			max = int(n)
		}
		items++
	}
	cfg := &vm.run.cjson
	if cfg.sparseRatio > 0 && max > items*cfg.sparseRatio && max > cfg.sparseSafe {
		if !cfg.sparseConvert {
			vm.jsonFail(L, t, "excessively sparse array")
		}
		return -1
	}
	return max
}

// step charges one unit per 16 calls.
func (vm *luaVM) step(L *lua.LState) {
	vm.run.steps++
	if vm.run.steps&15 == 0 {
		vm.charge(L, 1)
	}
}

type jsonDecoder struct {
	vm    *luaVM
	L     *lua.LState
	s     string
	i     int
	depth int
}

func (vm *luaVM) cjsonDecode(L *lua.LState) int {
	if L.GetTop() != 1 {
		argError(L, 1, "decode", "expected 1 argument")
	}
	s := checkString(L, 1, "decode")
	if len(s) >= 2 && (s[0] == 0 || s[1] == 0) {
		L.RaiseError("JSON parser does not support UTF-16 or UTF-32")
	}
	d := &jsonDecoder{vm: vm, L: L, s: s}
	v := d.value()
	d.space()
	if d.i < len(d.s) {
		d.fail("the end")
	}
	L.Push(v)
	return 1
}

func (d *jsonDecoder) space() {
	for d.i < len(d.s) && (d.s[d.i] == ' ' || d.s[d.i] == '\t' || d.s[d.i] == '\n' || d.s[d.i] == '\r') {
		d.i++
	}
}

// fail raises lua-cjson's "Expected X but found Y at character N".
func (d *jsonDecoder) fail(want string) {
	found := "invalid token"
	if d.i >= len(d.s) {
		found = "T_END"
	} else {
		switch d.s[d.i] {
		case '{':
			found = "T_OBJ_BEGIN"
		case '}':
			found = "T_OBJ_END"
		case '[':
			found = "T_ARR_BEGIN"
		case ']':
			found = "T_ARR_END"
		case ',':
			found = "T_COMMA"
		case ':':
			found = "T_COLON"
		case '"':
			found = "T_STRING"
		}
	}
	d.L.RaiseError("Expected %s but found %s at character %d", want, found, d.i+1)
}

func (d *jsonDecoder) value() lua.LValue {
	d.vm.step(d.L)
	d.space()
	if d.i >= len(d.s) {
		d.fail("value")
	}
	switch c := d.s[d.i]; {
	case c == '{' || c == '[':
		d.depth++
		if d.depth > d.vm.run.cjson.decodeMaxDepth {
			d.L.RaiseError("Found too many nested data structures (%d) at character %d", d.depth, d.i+1)
		}
		d.i++
		var v lua.LValue
		if c == '{' {
			v = d.object()
		} else {
			v = d.array()
		}
		d.depth--
		return v
	case c == '"':
		return d.str("value")
	case c == '-' || cIsDigit(c):
		f, n := strtod(d.s[d.i:])
		if n == 0 {
			d.fail("value")
		}
		d.i += n
		return lua.LNumber(f)
	case strings.HasPrefix(d.s[d.i:], "true"):
		d.i += 4
		return lua.LTrue
	case strings.HasPrefix(d.s[d.i:], "false"):
		d.i += 5
		return lua.LFalse
	case strings.HasPrefix(d.s[d.i:], "null"):
		d.i += 4
		return d.vm.null
	}
	d.fail("value")
	return lua.LNil
}

func (d *jsonDecoder) object() lua.LValue {
	t := d.L.CreateTable(0, 0)
	d.space()
	if d.i < len(d.s) && d.s[d.i] == '}' {
		d.i++
		return t
	}
	for {
		d.space()
		if d.i >= len(d.s) || d.s[d.i] != '"' {
			d.fail("object key string")
		}
		k := d.str("object key string")
		d.space()
		if d.i >= len(d.s) || d.s[d.i] != ':' {
			d.fail("colon")
		}
		d.i++
		v := d.value()
		d.vm.chargeBytes(d.L, 32)
		t.RawSet(k, v)
		d.space()
		if d.i < len(d.s) && d.s[d.i] == '}' {
			d.i++
			return t
		}
		if d.i >= len(d.s) || d.s[d.i] != ',' {
			d.fail("comma or object end")
		}
		d.i++
	}
}

func (d *jsonDecoder) array() lua.LValue {
	t := d.L.CreateTable(0, 0)
	d.space()
	if d.i < len(d.s) && d.s[d.i] == ']' {
		d.i++
		return t
	}
	for n := 1; ; n++ {
		v := d.value()
		d.vm.chargeBytes(d.L, 16)
		t.RawSetInt(n, v)
		d.space()
		if d.i < len(d.s) && d.s[d.i] == ']' {
			d.i++
			return t
		}
		if d.i >= len(d.s) || d.s[d.i] != ',' {
			d.fail("comma or array end")
		}
		d.i++
	}
}

// str decodes a string token; want is what the parser expects there (for
// lua-cjson's error message).
func (d *jsonDecoder) str(want string) lua.LString {
	d.i++ // the quote
	var b []byte
	fail := func(at int, what string) {
		d.L.RaiseError("Expected %s but found %s at character %d", want, what, at+1)
	}
	for {
		if d.i >= len(d.s) || d.s[d.i] == 0 {
			fail(d.i, "unexpected end of string")
		}
		c := d.s[d.i]
		switch {
		case c == '"':
			d.i++
			d.vm.chargeBytes(d.L, len(b))
			return lua.LString(b)
		case c == '\\':
			bs := d.i
			var e byte
			if d.i+1 < len(d.s) {
				e = d.s[d.i+1]
			}
			d.i += 2
			switch e {
			case '"', '\\', '/':
				b = append(b, e)
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r, ok := d.hex4()
				if ok && r >= 0xD800 && r <= 0xDBFF {
					ok = false
					if strings.HasPrefix(d.s[d.i:], `\u`) {
						d.i += 2
						if lo, ok2 := d.hex4(); ok2 && lo >= 0xDC00 && lo <= 0xDFFF {
							r, ok = 0x10000+(r-0xD800)<<10+(lo-0xDC00), true
						}
					}
				} else if r >= 0xDC00 && r <= 0xDFFF {
					ok = false
				}
				if !ok {
					fail(bs, "invalid unicode escape code")
				}
				b = append(b, string(rune(r))...)
			default:
				fail(bs, "invalid escape code")
			}
		default:
			b = append(b, c)
			d.i++
		}
	}
}

func (d *jsonDecoder) hex4() (int, bool) {
	if d.i+4 > len(d.s) {
		return 0, false
	}
	n, err := strconv.ParseUint(d.s[d.i:d.i+4], 16, 32)
	d.i += 4
	return int(n), err == nil
}

// ---------------------------------------------------------------------------
// The syntax tree rewriter.

// Helpers the rewritten code calls; no Lua identifier can name them, and
// the chunk copies them into locals first (upvalues of nested functions).
const (
	hConcat      = "\x00cc"
	hIndexKey    = "\x00ik"
	hIndexKeyNew = "\x00ikn"
	hValues      = "\x00va"
	hLen         = "\x00ln"
)

// scriptRewriter rewrites a chunk so that what gopher-lua does in one
// instruction at a cost proportional to the data goes through a helper
// that charges the budget:
//
//	a .. b .. c      -> \0cc(descs, a, b, c)
//	#x               -> \0ln(desc, x)
//	t[k] = v         -> do local o = t; local key = \0ik(o, k); o[key] = v end
//	{[k] = v}        -> {[\0ikn(k, n)] = v}
//	{..., f()}       -> {..., \0va(f())}       (also for ...)
//	f(a, ...)        -> f(a, \0va(...))        (also return ...)
//
// String keys and small integer constants are left alone. descs name the
// operands for Lua 5.1's error messages ("local 'x'"). It also bounds the
// nesting of the syntax tree, which gopher-lua's compiler walks
// recursively.
type scriptRewriter struct {
	funcs []*rwFunc
	depth int
	tmp   int
}

type rwFunc struct{ blocks []map[string]bool }

type rwError string

func (e rwError) Error() string { return string(e) }

func (rw *scriptRewriter) chunk(stmts []ast.Stmt) (out []ast.Stmt, err error) {
	defer func() {
		if p := recover(); p != nil {
			e, ok := p.(rwError)
			if !ok {
				panic(p)
			}
			out, err = nil, e
		}
	}()
	rw.funcs = []*rwFunc{{blocks: []map[string]bool{{}}}}
	names := []string{hConcat, hIndexKey, hIndexKeyNew, hValues, hLen}
	exprs := make([]ast.Expr, len(names))
	for i, n := range names {
		exprs[i] = &ast.IdentExpr{Value: n}
	}
	rw.declare(names...)
	body := rw.stmts(stmts)
	return append([]ast.Stmt{&ast.LocalAssignStmt{Names: names, Exprs: exprs}}, body...), nil
}

func (rw *scriptRewriter) fn() *rwFunc { return rw.funcs[len(rw.funcs)-1] }

func (rw *scriptRewriter) declare(names ...string) {
	f := rw.fn()
	b := f.blocks[len(f.blocks)-1]
	for _, n := range names {
		b[n] = true
	}
}

func (rw *scriptRewriter) push() { f := rw.fn(); f.blocks = append(f.blocks, map[string]bool{}) }
func (rw *scriptRewriter) pop()  { f := rw.fn(); f.blocks = f.blocks[:len(f.blocks)-1] }

// kind says whether a name is a local, an upvalue or a global here.
func (rw *scriptRewriter) kind(name string) string {
	for i := len(rw.funcs) - 1; i >= 0; i-- {
		bl := rw.funcs[i].blocks
		for j := len(bl) - 1; j >= 0; j-- {
			if bl[j][name] {
				if i == len(rw.funcs)-1 {
					return "local"
				}
				return "upvalue"
			}
		}
	}
	return "global"
}

// desc names an operand as Lua 5.1's error messages do.
func (rw *scriptRewriter) desc(e ast.Expr) string {
	var d string
	switch e := e.(type) {
	case *ast.IdentExpr:
		d = rw.kind(e.Value) + " '" + e.Value + "'"
	case *ast.AttrGetExpr:
		if k, ok := e.Key.(*ast.StringExpr); ok {
			d = "field '" + k.Value + "'"
		}
	}
	if strings.ContainsAny(d, "\n\x00") {
		return ""
	}
	return d
}

func (rw *scriptRewriter) block(stmts []ast.Stmt) []ast.Stmt {
	rw.push()
	defer rw.pop()
	return rw.stmts(stmts)
}

func (rw *scriptRewriter) stmts(stmts []ast.Stmt) []ast.Stmt {
	out := stmts[:0:0]
	for _, s := range stmts {
		out = append(out, rw.stmt(s))
	}
	return out
}

func (rw *scriptRewriter) enter() {
	rw.depth++
	if rw.depth > scriptMaxDepth {
		panic(rwError("chunk has too many syntax levels"))
	}
}

func (rw *scriptRewriter) stmt(s ast.Stmt) ast.Stmt {
	rw.enter()
	defer func() { rw.depth-- }()
	switch s := s.(type) {
	case *ast.AssignStmt:
		return rw.assign(s)
	case *ast.LocalAssignStmt:
		if len(s.Names) == 1 && len(s.Exprs) == 1 {
			if _, ok := s.Exprs[0].(*ast.FunctionExpr); ok {
				rw.declare(s.Names...) // as gopher-lua compiles it
			}
		}
		for i, e := range s.Exprs {
			s.Exprs[i] = rw.expr(e)
		}
		rw.declare(s.Names...)
	case *ast.FuncCallStmt:
		s.Expr = rw.expr(s.Expr)
	case *ast.DoBlockStmt:
		s.Stmts = rw.block(s.Stmts)
	case *ast.WhileStmt:
		s.Condition = rw.expr(s.Condition)
		s.Stmts = rw.block(s.Stmts)
	case *ast.RepeatStmt:
		rw.push() // the condition sees the block's locals
		s.Stmts = rw.stmts(s.Stmts)
		s.Condition = rw.expr(s.Condition)
		rw.pop()
	case *ast.IfStmt:
		s.Condition = rw.expr(s.Condition)
		s.Then = rw.block(s.Then)
		s.Else = rw.block(s.Else)
	case *ast.NumberForStmt:
		s.Init = rw.expr(s.Init)
		s.Limit = rw.expr(s.Limit)
		if s.Step != nil {
			s.Step = rw.expr(s.Step)
		}
		rw.push()
		rw.declare(s.Name)
		s.Stmts = rw.stmts(s.Stmts)
		rw.pop()
	case *ast.GenericForStmt:
		for i, e := range s.Exprs {
			s.Exprs[i] = rw.expr(e)
		}
		rw.push()
		rw.declare(s.Names...)
		s.Stmts = rw.stmts(s.Stmts)
		rw.pop()
	case *ast.FuncDefStmt:
		if s.Name.Receiver != nil {
			s.Name.Receiver = rw.expr(s.Name.Receiver)
		}
		rw.function(s.Func, s.Name.Func == nil)
	case *ast.ReturnStmt:
		for i, e := range s.Exprs {
			s.Exprs[i] = rw.expr(e)
		}
		rw.chargeVarargs(s.Exprs)
	}
	return s
}

func (rw *scriptRewriter) function(f *ast.FunctionExpr, method bool) {
	rw.funcs = append(rw.funcs, &rwFunc{blocks: []map[string]bool{{}}})
	if method {
		rw.declare("self")
	}
	rw.declare(f.ParList.Names...)
	f.Stmts = rw.stmts(f.Stmts)
	rw.funcs = rw.funcs[:len(rw.funcs)-1]
}

// needsKeyCheck reports whether storing at key k can append many nil
// slots to a table (or store at nil).
func needsKeyCheck(k ast.Expr) bool {
	switch k := k.(type) {
	case *ast.StringExpr, *ast.TrueExpr, *ast.FalseExpr:
		return false
	case *ast.NumberExpr:
		n, err := strconv.ParseFloat(k.Value, 64)
		return err != nil || n > scriptFreeGap+1
	}
	return true
}

func (rw *scriptRewriter) tempName() string {
	rw.tmp++
	return "\x00t" + strconv.Itoa(rw.tmp)
}

func ident(name string, line int) *ast.IdentExpr {
	e := &ast.IdentExpr{Value: name}
	e.SetLine(line)
	e.SetLastLine(line)
	return e
}

func localStmt(name string, e ast.Expr, line int) *ast.LocalAssignStmt {
	s := &ast.LocalAssignStmt{Names: []string{name}, Exprs: []ast.Expr{e}}
	s.SetLine(line)
	s.SetLastLine(line)
	return s
}

// helperCall builds a call of helper h; single: adjusted to one value (and
// never a tail call, so error positions stay right).
func helperCall(h string, line int, single bool, args ...ast.Expr) *ast.FuncCallExpr {
	c := &ast.FuncCallExpr{Func: ident(h, line), Args: args, AdjustRet: single}
	c.SetLine(line)
	c.SetLastLine(line)
	return c
}

func (rw *scriptRewriter) assign(s *ast.AssignStmt) ast.Stmt {
	checked := false
	for _, l := range s.Lhs {
		if a, ok := l.(*ast.AttrGetExpr); ok && needsKeyCheck(a.Key) {
			checked = true
		}
	}
	if !checked {
		for i, l := range s.Lhs {
			s.Lhs[i] = rw.expr(l)
		}
		for i, r := range s.Rhs {
			s.Rhs[i] = rw.expr(r)
		}
		return s
	}
	// Evaluate each target's table and key, in order, into fresh locals
	// (so that the table checked is the table written), then assign.
	line := s.Line()
	var pre []ast.Stmt
	for i, l := range s.Lhs {
		a, ok := l.(*ast.AttrGetExpr)
		if !ok {
			continue
		}
		o := rw.tempName()
		pre = append(pre, localStmt(o, rw.expr(a.Object), line))
		key := a.Key
		if needsKeyCheck(a.Key) {
			k := rw.tempName()
			pre = append(pre, localStmt(k, helperCall(hIndexKey, a.Line(), true, ident(o, line), rw.expr(a.Key)), a.Line()))
			key = ident(k, line)
		}
		t := &ast.AttrGetExpr{Object: ident(o, line), Key: key}
		t.SetLine(a.Line())
		t.SetLastLine(a.LastLine())
		s.Lhs[i] = t
	}
	for i, r := range s.Rhs {
		s.Rhs[i] = rw.expr(r)
	}
	d := &ast.DoBlockStmt{Stmts: append(pre, s)}
	d.SetLine(line)
	d.SetLastLine(s.LastLine())
	return d
}

// chargeVarargs wraps a trailing ... (all the varargs, copied by the VM)
// into a call that charges for them.
func (rw *scriptRewriter) chargeVarargs(list []ast.Expr) {
	if n := len(list); n > 0 {
		if v, ok := list[n-1].(*ast.Comma3Expr); ok && !v.AdjustRet {
			list[n-1] = helperCall(hValues, v.Line(), false, v)
		}
	}
}

func isMultRet(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.FuncCallExpr:
		return !e.AdjustRet
	case *ast.Comma3Expr:
		return !e.AdjustRet
	}
	return false
}

func (rw *scriptRewriter) expr(e ast.Expr) ast.Expr {
	rw.enter()
	defer func() { rw.depth-- }()
	switch e := e.(type) {
	case *ast.StringConcatOpExpr:
		var ops []ast.Expr
		for cur := e; ; {
			ops = append(ops, cur.Lhs)
			next, ok := cur.Rhs.(*ast.StringConcatOpExpr)
			if !ok {
				ops = append(ops, cur.Rhs)
				break
			}
			cur = next
		}
		descs := make([]string, len(ops))
		args := make([]ast.Expr, len(ops)+1)
		for i, op := range ops {
			descs[i] = rw.desc(op)
			args[i+1] = rw.expr(op)
		}
		ds := &ast.StringExpr{Value: strings.Join(descs, "\n")}
		ds.SetLine(e.Line())
		args[0] = ds
		return helperCall(hConcat, e.Line(), true, args...)
	case *ast.UnaryLenOpExpr:
		ds := &ast.StringExpr{Value: rw.desc(e.Expr)}
		ds.SetLine(e.Line())
		return helperCall(hLen, e.Line(), true, ds, rw.expr(e.Expr))
	case *ast.AttrGetExpr:
		e.Object = rw.expr(e.Object)
		e.Key = rw.expr(e.Key)
	case *ast.TableExpr:
		npos := 0
		for i, f := range e.Fields {
			if f.Key == nil {
				f.Value = rw.expr(f.Value)
				if i == len(e.Fields)-1 && isMultRet(f.Value) {
					f.Value = helperCall(hValues, f.Value.Line(), false, f.Value)
				} else {
					npos++
				}
				continue
			}
			check := needsKeyCheck(f.Key)
			f.Key = rw.expr(f.Key)
			if check {
				n := &ast.NumberExpr{Value: strconv.Itoa(npos - npos%lua.FieldsPerFlush)}
				n.SetLine(f.Key.Line())
				f.Key = helperCall(hIndexKeyNew, f.Key.Line(), true, f.Key, n)
			}
			f.Value = rw.expr(f.Value)
		}
	case *ast.FuncCallExpr:
		if e.Func != nil {
			e.Func = rw.expr(e.Func)
		}
		if e.Receiver != nil {
			e.Receiver = rw.expr(e.Receiver)
		}
		for i, a := range e.Args {
			e.Args[i] = rw.expr(a)
		}
		rw.chargeVarargs(e.Args)
	case *ast.LogicalOpExpr:
		e.Lhs = rw.expr(e.Lhs)
		e.Rhs = rw.expr(e.Rhs)
	case *ast.RelationalOpExpr:
		e.Lhs = rw.expr(e.Lhs)
		e.Rhs = rw.expr(e.Rhs)
	case *ast.ArithmeticOpExpr:
		e.Lhs = rw.expr(e.Lhs)
		e.Rhs = rw.expr(e.Rhs)
	case *ast.UnaryMinusOpExpr:
		e.Expr = rw.expr(e.Expr)
	case *ast.UnaryNotOpExpr:
		e.Expr = rw.expr(e.Expr)
	case *ast.FunctionExpr:
		rw.function(e, false)
	}
	return e
}

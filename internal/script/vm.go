package script

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvorum/kvorum/internal/reply"
	lua "github.com/yuin/gopher-lua"
)

// Caller runs the Redis commands of a script: kv implements it over the
// state machine's context of the command that runs the script.
type Caller interface {
	// Call runs one command of redis.call or redis.pcall (args[0] is the
	// name as the script wrote it) in the script's context and returns
	// its reply. It makes the checks Redis makes for a command called from
	// a script, in Redis's order (known command, arity, allowed in
	// scripts, no write from a read-only script), and answers a refused
	// command with the error reply Redis gives; the script raises it (call)
	// or returns it (pcall).
	Call(args [][]byte) reply.Reply
	// IsCommand reports whether name is a command the server has
	// (redis.acl_check_cmd; kvorum has no ACLs).
	IsCommand(name []byte) bool
}

// Run runs s with the given KEYS and ARGV on a pooled Lua state and
// returns its reply. c runs the commands it calls; seed seeds math.random
// (the same seed draws the same numbers on every replica). run, if not
// nil, is the run's record in the node's Monitor: Monitor.Kill stops the
// run at its next instruction.
func Run(c Caller, s *Script, keys, argv [][]byte, seed uint64, run *Running) reply.Reply {
	vm := getLuaVM()
	r, clean := vm.exec(c, s, keys, argv, seed, run.killFlag())
	putLuaVM(vm, clean)
	return r
}

// Budget is a run's instruction budget. Measured on the development
// machine (2 cores, go1.26, amd64; TestBudgetStopsLoops, kv's
// BenchmarkScriptBudget): an empty loop runs at 5.5 ns per instruction
// (0.08 s for the whole budget), an arithmetic loop at 11 ns (0.16 s), a
// loop with arithmetic and a table store at 26 ns (0.39 s), pattern
// matching at 17 ns per unit (0.26 s). So a script that exhausts the
// budget costs about 0.1-0.4 s, on every replica, during which the
// replica applies nothing else.
const Budget = 15_000_000

const (
	bytesPerUnit  = 64        // allocation charged as one instruction
	maxString     = 512 << 20 // longest string a script can build (proto-max-bulk-len)
	freeGap       = 8         // nil slots a table store may append uncharged
	maxResults    = 8000      // unpack, string.byte (Lua 5.1's LUAI_MAXCSTACK)
	maxDepth      = 1000      // nesting of replies and syntax
	maxThreads    = 200       // coroutines per run
	callStackSize = 2000      // Lua call frames (80 bytes each, allocated up front)
	registryMax   = 256 << 10 // Lua stack slots
	poolSize      = 16        // idle Lua states kept
	cacheSize     = 1000      // compiled scripts kept

	scriptSourceName   = "user_script"   // the chunk name of EVAL scripts
	functionSourceName = "user_function" // ... and of function libraries
)

var errTooDeep = reply.Error("ERR reached lua stack limit")

func errBudget() reply.Reply {
	return reply.Error(fmt.Sprintf("ERR script exceeded its budget of %d Lua instructions; kvorum runs scripts at apply time on every replica, see README", Budget))
}

// The budget.

// budgetCtx is the LState's context: its Done is called once per VM
// instruction, so it counts them; library functions spend from the same
// counter (luaVM.charge). Done also reads kill, the run's SCRIPT KILL
// flag (nil: the run cannot be killed): a plain load on amd64 and arm64,
// next to the count.
type budgetCtx struct {
	left      int64
	exhausted bool
	kill      *atomic.Bool
	killed    bool // kill was seen: every later instruction raises
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
	if b.kill != nil && (b.killed || b.kill.Load()) {
		b.killed = true
		return closedDone
	}
	return nil
}

var _ context.Context = (*budgetCtx)(nil)

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
	caller    Caller // nil while a library loads
	sha       string // the script's sha, or the function's name
	source    string // chunk name of the code: scriptSourceName or functionSourceName
	resp      int    // protocol of redis.call replies: 2 or 3 (redis.setresp)
	rng       uint64
	ids       map[lua.LValue]int // tostring ids
	chunks    map[string]string  // loadstring chunks: message name -> chunk name
	threads   int
	allocated int64 // bytes charged
	steps     int64 // cjson work, charged by 16
	err       *scriptErr
	cjson     cjsonConfig
	tooDeep   bool    // the result nests deeper than maxDepth
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
		if len(luaPool.free) < poolSize {
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
		panic("script: gopher-lua's LTable has no array field")
	}
	return f.Index[0]
}()

// arrayLen returns the size of t's array part (gopher-lua appends nil slots
// up to an integer key stored beyond it).
func arrayLen(t *lua.LTable) int { return reflect.ValueOf(t).Elem().Field(ltableArray).Len() }

func newLuaVM() *luaVM {
	L := lua.NewState(lua.Options{
		SkipOpenLibs:     true,
		CallStackSize:    callStackSize,
		RegistrySize:     1024,
		RegistryMaxSize:  registryMax,
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
		"assert": libs["assert"], "rawequal": libs["rawequal"], "rawget": vm.rawget,
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
	lib("cmsgpack", vm.cmsgpackLib(), cmsgpackInfo)
	lib("struct", vm.structLib(), nil)
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
	// What getmetatable(_G) shows: Redis's read-only metatable of the
	// globals, whose __index raises the nonexistent global error.
	pubMT := L.CreateTable(0, 1)
	pubMT.RawSetString("__index", fn(luaNoGlobal))
	vm.hiddenMT[envMT] = vm.view(pubMT)
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
func (vm *luaVM) exec(c Caller, cs *Script, keys, argv [][]byte, seed uint64, kill *atomic.Bool) (reply.Reply, bool) {
	L := vm.L
	vm.start(c, cs.sha, scriptSourceName, seed)
	vm.budget.kill = kill
	vm.globals.RawSetString("KEYS", stringArray(L, keys))
	vm.globals.RawSetString("ARGV", stringArray(L, argv))
	L.Push(L.NewFunctionFromProto(cs.proto))
	return vm.finish(vm.pcall1(0))
}

// start prepares a run: name is the script's sha or the function's name
// (for error messages), source the chunk name the code was compiled with,
// seed math.random's seed.
func (vm *luaVM) start(c Caller, name, source string, seed uint64) {
	vm.run = scriptRun{caller: c, sha: name, source: source, resp: 2, rng: seed & (1<<48 - 1)}
	vm.run.cjson = defaultCjson
	vm.budget = budgetCtx{left: Budget}
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
func (vm *luaVM) finish(err error) (reply.Reply, bool) {
	L := vm.L
	var ae *lua.ApiError
	panicked := errors.As(err, &ae) && ae.Type == lua.ApiErrorPanic
	var r reply.Reply
	switch {
	case vm.budget.killed:
		r = vm.killedReply()
	case vm.budget.exhausted:
		r = errBudget()
	case err != nil:
		r = vm.errorReply(err)
	default:
		r = vm.toReply(L.Get(-1), 0)
		switch {
		case vm.budget.killed:
			r = vm.killedReply()
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
// maxString.
func (vm *luaVM) chargeBytes(L *lua.LState, n int) {
	if n > maxString || n < 0 {
		L.RaiseError("resulting string too large")
	}
	vm.run.allocated += int64(n)
	vm.charge(L, int64(n/bytesPerUnit))
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
	if o.size+n > maxString || o.size+n < 0 {
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
	if gap := int(k) - alen - 1; gap > freeGap {
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
	if ok && dbg.What != "G" && strings.HasSuffix(e.msg, gopherCallErr) {
		e.msg = callError(L, dbg, e.msg)
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

// killedReply is Redis 7.0's reply to a run that SCRIPT KILL or FUNCTION
// KILL stopped, with where it stopped.
func (vm *luaVM) killedReply() reply.Reply {
	msg := "ERR Script killed by user with SCRIPT KILL..."
	if e := vm.run.err; e != nil && e.source != "" && e.line != "" {
		line := e.line
		if line == "0" {
			line = "1" // the instructions the rewriter puts before the script's first line
		}
		msg += " script: " + vm.run.sha + ", on " + e.source + ":" + line + "."
	}
	return reply.Error(msg)
}

func (vm *luaVM) errorReply(err error) reply.Reply {
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
	return reply.Error(oneLine(msg))
}

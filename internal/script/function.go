package script

import (
	"errors"
	"strings"
	"sync/atomic"

	"github.com/kvorum/kvorum/internal/reply"
	lua "github.com/yuin/gopher-lua"
)

// Functions (Redis 7.0): a library's body runs in the load environment,
// where it can only call redis.register_function and redis.log and read
// redis.LOG_* and redis.REDIS_VERSION*; what it registers is the library's
// functions. Loading runs no command and draws no random number, so what
// a body registers is a pure function of its code.

// Function is a function a library's body registered
// (redis.register_function).
type Function struct {
	Name           string
	Description    string
	HasDescription bool   // a description was given (else FUNCTION LIST shows nil)
	Flags          uint64 // bit i: the flag functionFlagNames[i] (stored by kv: do not renumber)
}

// Function flags, in Redis's scripts_flags_def order (FUNCTION LIST).
var functionFlagNames = []string{"no-writes", "allow-oom", "allow-stale", "no-cluster", "allow-cross-slot-keys"}

const (
	flagNoWrites = 1 // bit of "no-writes"
	flagAllowOOM = 2 // bit of "allow-oom"
)

// NoWrites reports whether f has the no-writes flag.
func (f Function) NoWrites() bool { return f.Flags&flagNoWrites != 0 }

// AllowOOM reports whether f has the allow-oom flag.
func (f Function) AllowOOM() bool { return f.Flags&flagAllowOOM != 0 }

// FlagNames returns the names of f's flags in Redis's order.
func (f Function) FlagNames() []string {
	var out []string
	for b, n := range functionFlagNames {
		if f.Flags&(1<<b) != 0 {
			out = append(out, n)
		}
	}
	return out
}

var errFunctionNotFound = reply.Error("ERR Function not found")

// compile compiles l's body (cached like scripts, under a key of its own).
func (l *Library) compile() (*Script, reply.Reply) {
	key := "function:" + SHA1Hex(l.body)
	if cs := cachedScript(key); cs != nil {
		return cs, reply.Reply{}
	}
	proto, err := compileLua(string(l.body), functionSourceName)
	if err != nil {
		return nil, reply.Error(oneLine("ERR Error compiling function: " + err.Error()))
	}
	return cacheScript(&Script{sha: key, proto: proto}), reply.Reply{}
}

// Load compiles l and runs its body to see what it registers: FUNCTION
// LOAD's checks that do not depend on the stored libraries. On failure it
// returns Redis's error reply and false.
func (l *Library) Load() ([]Function, reply.Reply, bool) {
	cs, r := l.compile()
	if cs == nil {
		return nil, r, false
	}
	vm := getLuaVM()
	vm.start(nil, l.Name, functionSourceName, 0)
	ld, r, err := vm.loadFunctions(cs)
	var out []Function
	if ld != nil {
		for _, f := range ld.funcs {
			out = append(out, f.Function)
		}
	}
	_, clean := vm.abort(reply.Reply{}, err)
	putLuaVM(vm, clean)
	if ld == nil {
		return nil, r, false
	}
	if len(out) == 0 {
		return nil, reply.Error("ERR No functions registered"), false
	}
	return out, reply.Reply{}, true
}

// Call runs function name of l with KEYS and ARGV, as Run runs a script:
// c runs the commands it calls, seed seeds math.random. The body runs
// again first, in the load environment, to rebuild the function's
// closure, so state kept in a library's upvalues does not survive between
// calls. Loading and the call have a budget each. run, if not nil, is the
// call's record in the node's Monitor (see Run).
func (l *Library) Call(c Caller, name string, keys, argv [][]byte, seed uint64, run *Running) reply.Reply {
	cs, r := l.compile()
	if cs == nil {
		return r
	}
	vm := getLuaVM()
	r, clean := vm.callFunction(c, cs, name, keys, argv, seed, run.killFlag())
	putLuaVM(vm, clean)
	return r
}

// fnLoad collects what redis.register_function registers during a load.
type fnLoad struct{ funcs []*fnLoaded }

type fnLoaded struct {
	Function
	fn *lua.LFunction
}

// fnAPI is the load-time environment: the globals a library's body sees
// are only redis, with register_function, log and constants (Redis 7.0's
// LIBRARY_API); anything else is a nonexistent global.
type fnAPI struct{ env *lua.LTable }

func (vm *luaVM) functionAPI() *fnAPI {
	if vm.fnAPI != nil {
		return vm.fnAPI
	}
	L := vm.L
	noGlobal := L.NewFunction(luaNoGlobal)
	strict := func(t *lua.LTable) {
		mt := L.CreateTable(0, 1)
		mt.RawSetString("__index", noGlobal)
		t.Metatable = mt
		vm.protected[t], vm.protected[mt] = true, true
		vm.hiddenMT[mt] = lua.LNil
	}
	redis := L.CreateTable(0, 10)
	// In sorted order (deterministic iteration).
	redis.RawSetString("LOG_DEBUG", lua.LNumber(0))
	redis.RawSetString("LOG_NOTICE", lua.LNumber(2))
	redis.RawSetString("LOG_VERBOSE", lua.LNumber(1))
	redis.RawSetString("LOG_WARNING", lua.LNumber(3))
	redis.RawSetString("REDIS_VERSION", lua.LString("7.2.0"))
	redis.RawSetString("REDIS_VERSION_NUM", lua.LNumber(0x070200))
	redis.RawSetString("log", L.NewFunction(vm.metered(redisLog)))
	redis.RawSetString("register_function", L.NewFunction(vm.metered(vm.registerFunction)))
	strict(redis)
	env := L.CreateTable(0, 6)
	// The helpers of the rewritten syntax tree, which every chunk reads.
	for _, h := range []string{hConcat, hIndexKey, hIndexKeyNew, hValues, hLen} {
		env.RawSetString(h, vm.globals.RawGetString(h))
	}
	env.RawSetString("redis", vm.view(redis))
	strict(env)
	vm.fnAPI = &fnAPI{env: env}
	return vm.fnAPI
}

// loadFunctions runs a library's body in the load environment (the run
// must have been started). ld == nil: the load failed with reply r (err:
// the pcall's error, for abort).
func (vm *luaVM) loadFunctions(cs *Script) (ld *fnLoad, r reply.Reply, err error) {
	L := vm.L
	api := vm.functionAPI()
	envMT := vm.views[vm.env]
	envMT.RawSetString("__index", api.env)
	defer envMT.RawSetString("__index", vm.globals)
	ld = &fnLoad{}
	vm.run.fnLoad = ld
	defer func() { vm.run.fnLoad = nil }()
	L.Push(L.NewFunctionFromProto(cs.proto))
	err = vm.pcall1(0)
	L.SetTop(0)
	switch {
	case vm.budget.killed:
		return nil, vm.killedReply(), err
	case vm.budget.exhausted:
		return nil, errBudget(), err
	case err != nil:
		msg := "ERR " + err.Error()
		if vm.run.err != nil {
			msg = vm.run.err.msg
		}
		vm.run.err = nil
		return nil, reply.Error(oneLine("ERR Error registering functions: " + msg)), err
	}
	return ld, reply.Reply{}, nil
}

// abort ends a run without a result; it returns r and whether the state
// may be reused.
func (vm *luaVM) abort(r reply.Reply, err error) (reply.Reply, bool) {
	var ae *lua.ApiError
	panicked := errors.As(err, &ae) && ae.Type == lua.ApiErrorPanic
	vm.L.SetTop(0)
	clean := !panicked && vm.clean()
	vm.run = scriptRun{}
	return r, clean
}

// registerFunction is redis.register_function(name, fn) and
// redis.register_function{function_name=, callback=, description=, flags=}.
func (vm *luaVM) registerFunction(L *lua.LState) int {
	ld := vm.run.fnLoad
	if ld == nil {
		raiseTable(L, "redis.register_function can only be called on FUNCTION LOAD command")
	}
	n := L.GetTop()
	if n < 1 || n > 2 {
		raiseTable(L, "wrong number of arguments to redis.register_function")
	}
	f := &fnLoaded{}
	if n == 2 {
		if !isStringOrNumber(L.Get(1)) {
			raiseTable(L, "first argument to redis.register_function must be a string")
		}
		f.Name = luaToStringPlain(L.Get(1))
		fn, ok := L.Get(2).(*lua.LFunction)
		if !ok {
			raiseTable(L, "second argument to redis.register_function must be a function")
		}
		f.fn = fn
	} else {
		t, ok := L.Get(1).(*lua.LTable)
		if !ok {
			raiseTable(L, "calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).")
		}
		hasName := false
		for k, v := t.Next(lua.LNil); k != lua.LNil; k, v = t.Next(k) {
			vm.charge(L, 1)
			if !isStringOrNumber(k) {
				raiseTable(L, "named argument key given to redis.register_function is not a string")
			}
			switch strings.ToLower(luaToStringPlain(k)) {
			case "function_name":
				if !isStringOrNumber(v) {
					raiseTable(L, "function_name argument given to redis.register_function must be a string")
				}
				f.Name, hasName = luaToStringPlain(v), true
			case "description":
				if !isStringOrNumber(v) {
					raiseTable(L, "description argument given to redis.register_function must be a string")
				}
				f.Description, f.HasDescription = luaToStringPlain(v), true
			case "callback":
				fn, ok := v.(*lua.LFunction)
				if !ok {
					raiseTable(L, "callback argument given to redis.register_function must be a function")
				}
				f.fn = fn
			case "flags":
				ft, ok := v.(*lua.LTable)
				if !ok {
					raiseTable(L, "flags argument to redis.register_function must be a table representing function flags")
				}
				f.Flags = 0
				for j := 1; ; j++ {
					vm.charge(L, 1)
					e := ft.RawGetInt(j)
					if e == lua.LNil {
						break
					}
					bit := -1
					if isStringOrNumber(e) {
						for i, name := range functionFlagNames {
							if strings.EqualFold(name, luaToStringPlain(e)) {
								bit = i
							}
						}
					}
					if bit < 0 {
						raiseTable(L, "unknown flag given")
					}
					f.Flags |= 1 << bit
				}
			default:
				raiseTable(L, "unknown argument given to redis.register_function")
			}
		}
		if !hasName {
			raiseTable(L, "redis.register_function must get a function name argument")
		}
		if f.fn == nil {
			raiseTable(L, "redis.register_function must get a callback argument")
		}
	}
	// functionLibCreateFunction (its text says "Library" in Redis 7.0).
	if !validFunctionName(f.Name) {
		raiseTable(L, "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long")
	}
	for _, g := range ld.funcs {
		if strings.EqualFold(g.Name, f.Name) {
			raiseTable(L, "Function already exists in the library")
		}
	}
	vm.chargeBytes(L, len(f.Name)+len(f.Description))
	ld.funcs = append(ld.funcs, f)
	return 0
}

// callFunction rebuilds the library's closures and runs function name.
func (vm *luaVM) callFunction(c Caller, cs *Script, name string, keys, argv [][]byte, seed uint64, kill *atomic.Bool) (reply.Reply, bool) {
	L := vm.L
	vm.start(c, name, functionSourceName, seed)
	vm.budget.kill = kill
	ld, r, err := vm.loadFunctions(cs)
	if ld == nil {
		return vm.abort(r, err)
	}
	var fn *lua.LFunction
	for _, f := range ld.funcs {
		if strings.EqualFold(f.Name, name) {
			fn = f.fn
		}
	}
	if fn == nil {
		return vm.abort(errFunctionNotFound, nil)
	}
	vm.budget = budgetCtx{left: Budget, kill: vm.budget.kill}
	vm.run.allocated = 0
	L.Push(fn)
	L.Push(stringArray(L, keys))
	L.Push(stringArray(L, argv))
	return vm.finish(vm.pcall1(2))
}

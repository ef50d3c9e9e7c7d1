package kv

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/kvorum/kvorum/internal/glob"
	"github.com/kvorum/kvorum/internal/redisnum"
	lua "github.com/yuin/gopher-lua"
)

// Redis 7.0 functions: FUNCTION LOAD/DELETE/FLUSH/LIST/STATS/KILL/HELP,
// FCALL and FCALL_RO, on the Lua VM of script.go (sandbox, budget, RESP
// conversions, redis.call are shared with EVAL).
//
// # Storage
//
// Libraries are replicated: FUNCTION LOAD, DELETE and FLUSH are write
// commands (one Raft entry each, applied on every replica). Each library
// is stored under the hidden key fnLibPrefix + library name (in the
// snapshot span, kept by FLUSHALL as Redis 7 keeps its functions), as its
// code plus what its load registered (function names, descriptions,
// flags: see encodeLibrary); each function has an index key fnNamePrefix +
// lower-case function name holding its library's name (function names are
// case-insensitive in Redis). FUNCTION FLUSH deletes the whole fnPrefix
// span. So every node can FCALL a function loaded through any node, and
// libraries survive restarts and snapshots.
//
// # Running a function
//
// FCALL is replicated like EVAL (the function runs at apply time on every
// replica); FCALL_RO is a read, like EVAL_RO. A function runs on a pooled
// Lua state: kvorum runs the library's body again (in the load
// environment, deterministic: it can only call redis.register_function,
// redis.log and read redis.LOG_* and redis.REDIS_VERSION*), takes the
// closure registered under the function's name and calls it with the
// KEYS and ARGV tables as arguments, under the script budget. Library
// loading and each call have their own budget.
//
// # Differences from Redis 7.0
//
//   - State kept in a library's upvalues does not survive between calls:
//     Redis keeps the closures of a loaded library for the process's
//     lifetime (a "local n = 0 ... n = n + 1" counter counts up until a
//     restart, and differently on each replica); kvorum rebuilds them for
//     every call, so such a counter always starts from its initial value.
//   - FUNCTION LIST lists libraries in name order (Redis: its dict order,
//     unspecified), and a library's functions in registration order.
//   - Registering two functions whose names differ only in case in one
//     library fails with "Function already exists in the library" (Redis
//     7.0.15 accepts it and corrupts its function table).
//   - FUNCTION DUMP and FUNCTION RESTORE are not supported (RDB format).
//   - FUNCTION LOAD with REPLACE of code that does not compile or fails to
//     register is refused before it reaches the Raft log; without REPLACE
//     the same errors come at apply time, after the "already exists" check,
//     as in Redis.
//   - FUNCTION KILL always answers NOTBUSY and FUNCTION STATS never shows a
//     running script: a function cannot run longer than its budget.
//   - A load that exceeds the budget fails with kvorum's budget error
//     (Redis: a 500 ms "FUNCTION LOAD timeout").

var (
	fnPrefix     = []byte{userPrefix, 0x00, 0x00, 'F'}      // every function record
	fnLibPrefix  = []byte{userPrefix, 0x00, 0x00, 'F', 'l'} // + library name: encodeLibrary
	fnNamePrefix = []byte{userPrefix, 0x00, 0x00, 'F', 'n'} // + lower-case function name: its library's name
)

const functionSourceName = "user_function"

// Function flags, in Redis's scripts_flags_def order (FUNCTION LIST).
var functionFlagNames = []string{"no-writes", "allow-oom", "allow-stale", "no-cluster", "allow-cross-slot-keys"}

const fnNoWrites = 1 // bit of "no-writes"

var (
	errFunctionNotFound = Error("ERR Function not found")
	errLibraryNotFound  = Error("ERR Library not found")
)

func init() {
	const fl = "noscript stale skip_monitor no_mandatory_keys movablekeys"
	def("fcall", -3, fl, 0, 0, 0, "scripting", "Invokes a function.", cmdFcall, nil)
	def("fcall_ro", -3, "readonly "+fl, 0, 0, 0, "scripting", "Invokes a read-only function.", cmdFcall, nil)
	def("function", -2, "", 0, 0, 0, "scripting", "A container for function commands.", cmdFunction, checkFunction)
	// Like EVAL: FCALL runs at apply time on every replica, and FUNCTION
	// LOAD/DELETE/FLUSH change the replicated libraries. FUNCTION's other
	// subcommands are reads.
	table["fcall"].spec.Write = true
	table["function"].spec.Write = true
	table["function"].readOnly = func(args [][]byte) bool {
		return len(args) > 1 && !eq(args[1], "load") && !eq(args[1], "delete") && !eq(args[1], "flush")
	}
}

var functionSubArity = map[string]int{"load": -3, "delete": 3, "flush": -2, "list": -2, "stats": 2, "kill": 2, "help": 2,
	"dump": 2, "restore": -3}

func checkFunction(args [][]byte) (Reply, bool) {
	sub := strings.ToLower(string(args[1]))
	ar, ok := functionSubArity[sub]
	if !ok {
		b := appendCString([]byte("ERR unknown subcommand '"), args[1], 128)
		return Error(string(sanitizeError(append(b, "'. Try FUNCTION HELP."...)))), false
	}
	if (ar > 0 && len(args) != ar) || (ar < 0 && len(args) < -ar) {
		return wrongArity("function|" + sub), false
	}
	switch sub {
	case "flush":
		if r, ok := checkFunctionFlush(args); !ok {
			return r, false
		}
	case "list":
		if _, _, r, ok := parseFunctionList(args); !ok {
			return r, false
		}
	case "dump", "restore":
		return errFunctionRDB(sub), false
	case "load":
		replace, code, r, ok := parseFunctionLoad(args)
		if !ok {
			return r, false
		}
		md, msg := parseLibMeta(code)
		if msg != "" {
			return Error("ERR " + msg), false
		}
		if replace {
			// Nothing of the stored data can change the outcome of the
			// compilation and the load: refuse bad code before the log.
			if _, r, ok := loadLibraryCode(&ctx{}, md); !ok {
				return r, false
			}
		}
	}
	return Reply{}, true
}

func errFunctionRDB(sub string) Reply {
	return Error("ERR 'FUNCTION " + strings.ToUpper(sub) + "' is not supported by kvorum: libraries are not kept in Redis's RDB serialization format; copy them with FUNCTION LIST WITHCODE and FUNCTION LOAD instead")
}

func checkFunctionFlush(args [][]byte) (Reply, bool) {
	if len(args) > 3 {
		b := appendCString([]byte("ERR unknown subcommand or wrong number of arguments for '"), args[1], 128)
		return Error(string(sanitizeError(append(b, "'. Try FUNCTION HELP."...)))), false
	}
	if len(args) == 3 && !eq(args[2], "sync") && !eq(args[2], "async") {
		return Error("ERR FUNCTION FLUSH only supports SYNC|ASYNC option"), false
	}
	return Reply{}, true
}

// parseFunctionList parses FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE].
func parseFunctionList(args [][]byte) (pattern []byte, withCode bool, r Reply, ok bool) {
	for i := 2; i < len(args); i++ {
		a := args[i]
		if !withCode && eq(a, "withcode") {
			withCode = true
			continue
		}
		if pattern == nil && eq(a, "libraryname") {
			if i >= len(args)-1 {
				return nil, false, Error("ERR library name argument was not given"), false
			}
			i++
			pattern = append([]byte{}, args[i]...)
			continue
		}
		b := appendCString([]byte("ERR Unknown argument "), a, len(a))
		return nil, false, Error(string(sanitizeError(b))), false
	}
	return pattern, withCode, Reply{}, true
}

// parseFunctionLoad parses FUNCTION LOAD [REPLACE] code.
func parseFunctionLoad(args [][]byte) (replace bool, code []byte, r Reply, ok bool) {
	i := 2
	for ; i < len(args)-1; i++ {
		if !eq(args[i], "replace") {
			b := appendCString([]byte("ERR Unknown option given: "), args[i], len(args[i]))
			return false, nil, Error(string(sanitizeError(b))), false
		}
		replace = true
	}
	return replace, args[i], Reply{}, true
}

// libMeta is a library's shebang, parsed (functionExtractLibMetaData).
type libMeta struct {
	name string
	code []byte // the full payload, as FUNCTION LIST WITHCODE shows it
	body []byte // what is compiled: from the shebang's line feed on
}

// parseLibMeta parses "#!lua name=<lib>"; it returns Redis's error text
// (without "ERR ") on failure, including the name and engine checks that
// Redis makes before looking at the stored libraries.
func parseLibMeta(code []byte) (libMeta, string) {
	if len(code) < 2 || code[0] != '#' || code[1] != '!' {
		return libMeta{}, "Missing library metadata"
	}
	nl := strings.IndexByte(string(code), '\n')
	if nl < 0 {
		return libMeta{}, "Invalid library metadata"
	}
	parts, ok := splitArgs(code[:nl])
	if !ok || len(parts) == 0 {
		return libMeta{}, "Invalid library metadata"
	}
	engine := parts[0][2:]
	var name *string
	for _, p := range parts[1:] {
		if len(p) >= 5 && strings.EqualFold(p[:5], "name=") {
			if name != nil {
				return libMeta{}, "Invalid metadata value, name argument was given multiple times"
			}
			n := p[5:]
			name = &n
			continue
		}
		return libMeta{}, "Invalid metadata value given: " + cStr(p)
	}
	if name == nil {
		return libMeta{}, "Library name was not given"
	}
	if !validFunctionName(*name) {
		return libMeta{}, "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long"
	}
	if !strings.EqualFold(engine, "lua") {
		return libMeta{}, "Engine '" + engine + "' not found"
	}
	return libMeta{name: *name, code: code, body: code[nl:]}, ""
}

// cStr cuts s at its first NUL byte, as C's %s does.
func cStr(s string) string {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return s[:i]
	}
	return s
}

// splitArgs is Redis's sdssplitargs: blank-separated words, with double
// quotes (escapes \xHH \n \r \t \b \a \c) and single quotes (\'); ok=false
// for unbalanced quotes or a closing quote followed by a non-blank.
func splitArgs(line []byte) ([]string, bool) {
	at := func(i int) byte {
		if i < len(line) {
			return line[i]
		}
		return 0
	}
	isSpace := func(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\v' || c == '\f' }
	var out []string
	p := 0
	for {
		for p < len(line) && isSpace(line[p]) {
			p++
		}
		if at(p) == 0 {
			return out, true
		}
		inq, insq, done := false, false, false
		var cur []byte
		for !done {
			c := at(p)
			switch {
			case inq:
				switch {
				case c == '\\' && at(p+1) == 'x' && isHex(at(p+2)) && isHex(at(p+3)):
					cur = append(cur, byte(digitVal(at(p+2))<<4|digitVal(at(p+3))))
					p += 3
				case c == '\\' && at(p+1) != 0:
					p++
					e := at(p)
					switch e {
					case 'n':
						e = '\n'
					case 'r':
						e = '\r'
					case 't':
						e = '\t'
					case 'b':
						e = '\b'
					case 'a':
						e = '\a'
					}
					cur = append(cur, e)
				case c == '"':
					if n := at(p + 1); n != 0 && !isSpace(n) {
						return nil, false
					}
					done = true
				case c == 0:
					return nil, false
				default:
					cur = append(cur, c)
				}
			case insq:
				switch {
				case c == '\\' && at(p+1) == '\'':
					p++
					cur = append(cur, '\'')
				case c == '\'':
					if n := at(p + 1); n != 0 && !isSpace(n) {
						return nil, false
					}
					done = true
				case c == 0:
					return nil, false
				default:
					cur = append(cur, c)
				}
			default:
				switch c {
				case ' ', '\n', '\r', '\t', 0:
					done = true
				case '"':
					inq = true
				case '\'':
					insq = true
				default:
					cur = append(cur, c)
				}
			}
			if at(p) != 0 {
				p++
			}
		}
		out = append(out, string(cur))
	}
}

// validFunctionName is Redis's functionsVerifyName.
func validFunctionName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || cIsDigit(c) || cIsAlpha(c)) {
			return false
		}
	}
	return true
}

// ---------------------------------------------------------------------------
// Stored libraries.

type fnInfo struct {
	name    string
	desc    string
	hasDesc bool
	flags   uint64
}

type library struct {
	code  []byte
	funcs []fnInfo
}

func fnLibKey(name string) []byte { return append(append([]byte(nil), fnLibPrefix...), name...) }

func fnNameKey(name string) []byte {
	return append(append([]byte(nil), fnNamePrefix...), strings.ToLower(name)...)
}

func encodeLibrary(l *library) []byte {
	b := binary.AppendUvarint(nil, uint64(len(l.code)))
	b = append(b, l.code...)
	b = binary.AppendUvarint(b, uint64(len(l.funcs)))
	for _, f := range l.funcs {
		b = binary.AppendUvarint(b, uint64(len(f.name)))
		b = append(b, f.name...)
		if f.hasDesc {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
		b = binary.AppendUvarint(b, uint64(len(f.desc)))
		b = append(b, f.desc...)
		b = binary.AppendUvarint(b, f.flags)
	}
	return b
}

var errBadLibrary = errors.New("corrupt function library record")

func decodeLibrary(b []byte) (*library, error) {
	bytesField := func() ([]byte, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return nil, false
		}
		v := b[k : k+int(n)]
		b = b[k+int(n):]
		return v, true
	}
	l := &library{}
	code, ok := bytesField()
	if !ok {
		return nil, errBadLibrary
	}
	l.code = append([]byte(nil), code...)
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, errBadLibrary
	}
	b = b[k:]
	for i := uint64(0); i < n; i++ {
		name, ok := bytesField()
		if !ok || len(b) == 0 {
			return nil, errBadLibrary
		}
		f := fnInfo{name: string(name), hasDesc: b[0] == 1}
		b = b[1:]
		desc, ok := bytesField()
		if !ok {
			return nil, errBadLibrary
		}
		f.desc = string(desc)
		fl, k := binary.Uvarint(b)
		if k <= 0 {
			return nil, errBadLibrary
		}
		b = b[k:]
		f.flags = fl
		l.funcs = append(l.funcs, f)
	}
	return l, nil
}

// getHidden reads a hidden key; nil, nil if absent.
func (x *ctx) getHidden(key []byte) ([]byte, error) {
	v, c, err := x.r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := append([]byte{}, v...)
	_ = c.Close()
	return out, nil
}

func (x *ctx) loadLibrary(name string) (*library, error) {
	v, err := x.getHidden(fnLibKey(name))
	if v == nil || err != nil {
		return nil, err
	}
	return decodeLibrary(v)
}

// eachLibrary calls f for every stored library, in name order.
func (x *ctx) eachLibrary(f func(name string, l *library) error) error {
	it, err := x.r.NewIter(&pebble.IterOptions{LowerBound: fnLibPrefix, UpperBound: prefixEnd(fnLibPrefix)})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		l, err := decodeLibrary(v)
		if err != nil {
			return err
		}
		if err := f(string(it.Key()[len(fnLibPrefix):]), l); err != nil {
			return err
		}
	}
	return it.Error()
}

// ---------------------------------------------------------------------------
// Loading a library.

// compileFunctionBody compiles a library's body (cached like scripts, under
// a key of its own).
func compileFunctionBody(body []byte) (*compiledScript, Reply) {
	key := "function:" + sha1Hex(body)
	if cs := cachedScript(key); cs != nil {
		return cs, Reply{}
	}
	proto, err := compileLua(string(body), functionSourceName)
	if err != nil {
		return nil, Error(string(sanitizeError([]byte("ERR Error compiling function: " + err.Error()))))
	}
	return cacheScript(&compiledScript{sha: key, proto: proto}), Reply{}
}

// loadLibraryCode compiles md's body and runs it to see what it registers:
// FUNCTION LOAD's checks that do not depend on the stored libraries.
func loadLibraryCode(x *ctx, md libMeta) ([]fnInfo, Reply, bool) {
	cs, r := compileFunctionBody(md.body)
	if cs == nil {
		return nil, r, false
	}
	vm := getLuaVM()
	vm.start(x, md.name, functionSourceName, true)
	ld, r, err := vm.loadFunctions(cs)
	var out []fnInfo
	if ld != nil {
		for _, f := range ld.funcs {
			out = append(out, f.fnInfo)
		}
	}
	_, clean := vm.abort(Reply{}, err)
	putLuaVM(vm, clean)
	if ld == nil {
		return nil, r, false
	}
	if len(out) == 0 {
		return nil, Error("ERR No functions registered"), false
	}
	return out, Reply{}, true
}

// fnLoad collects what redis.register_function registers during a load.
type fnLoad struct{ funcs []*fnLoaded }

type fnLoaded struct {
	fnInfo
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
func (vm *luaVM) loadFunctions(cs *compiledScript) (ld *fnLoad, r Reply, err error) {
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
	case vm.budget.exhausted:
		return nil, errBudget(), err
	case err != nil:
		msg := "ERR " + err.Error()
		if vm.run.err != nil {
			msg = vm.run.err.msg
		}
		vm.run.err = nil
		return nil, Error(string(sanitizeError([]byte("ERR Error registering functions: " + msg)))), err
	}
	return ld, Reply{}, nil
}

// abort ends a run without a result; it returns r and whether the state
// may be reused.
func (vm *luaVM) abort(r Reply, err error) (Reply, bool) {
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
		f.name = luaToStringPlain(L.Get(1))
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
				f.name, hasName = luaToStringPlain(v), true
			case "description":
				if !isStringOrNumber(v) {
					raiseTable(L, "description argument given to redis.register_function must be a string")
				}
				f.desc, f.hasDesc = luaToStringPlain(v), true
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
				f.flags = 0
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
					f.flags |= 1 << bit
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
	if !validFunctionName(f.name) {
		raiseTable(L, "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long")
	}
	for _, g := range ld.funcs {
		if strings.EqualFold(g.name, f.name) {
			raiseTable(L, "Function already exists in the library")
		}
	}
	vm.chargeBytes(L, len(f.name)+len(f.desc))
	ld.funcs = append(ld.funcs, f)
	return 0
}

// ---------------------------------------------------------------------------
// Commands.

var functionHelp = []string{
	"FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"LOAD [REPLACE] <FUNCTION CODE>",
	"    Create a new library with the given library name and code.",
	"DELETE <LIBRARY NAME>",
	"    Delete the given library.",
	"LIST [LIBRARYNAME PATTERN] [WITHCODE]",
	"    Return general information on all the libraries:",
	"    * Library name",
	"    * The engine used to run the Library",
	"    * Library description",
	"    * Functions list",
	"    * Library code (if WITHCODE is given)",
	"    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
	"STATS",
	"    Return information about the current function running:",
	"    * Function name",
	"    * Command used to run the function",
	"    * Duration in MS that the function is running",
	"    If no function is running, return nil",
	"    In addition, returns a list of available engines.",
	"KILL",
	"    Kill the current running function.",
	"FLUSH [ASYNC|SYNC]",
	"    Delete all the libraries.",
	"    When called without the optional mode argument, the behavior is determined by the",
	"    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
	"    * ASYNC: Asynchronously flush the libraries.",
	"    * SYNC: Synchronously flush the libraries.",
	"DUMP",
	"    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
	"RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
	"    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
	"    control how to handle existing libraries (default APPEND):",
	"    * FLUSH: delete all existing libraries.",
	"    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
	"    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
	"      libraries with the new libraries (notice that even on this option there is a chance of failure",
	"      in case of functions name collision with another library).",
	"HELP",
	"    Prints this help.",
}

func cmdFunction(x *ctx, args [][]byte) Reply {
	sub := strings.ToLower(string(args[1]))
	switch sub {
	case "help":
		out := make([]Reply, len(functionHelp))
		for i, l := range functionHelp {
			out[i] = Status(l)
		}
		return Array(out...)
	case "kill":
		return Error("NOTBUSY No scripts in execution right now.")
	case "dump", "restore":
		return errFunctionRDB(sub)
	case "stats":
		return functionStats(x)
	case "list":
		return functionList(x, args)
	}
	if x.w == nil {
		return Error("ERR internal: FUNCTION " + strings.ToUpper(sub) + " sent to Read")
	}
	switch sub {
	case "load":
		return functionLoad(x, args)
	case "delete":
		name := string(args[2])
		l, err := x.loadLibrary(name)
		if err != nil {
			return errStorage(err)
		}
		if l == nil {
			return errLibraryNotFound
		}
		if err := x.unlinkLibrary(name, l); err != nil {
			return errStorage(err)
		}
		return OK
	case "flush":
		if r, ok := checkFunctionFlush(args); !ok {
			return r
		}
		if err := x.w.DeleteRange(fnPrefix, prefixEnd(fnPrefix), nil); err != nil {
			return errStorage(err)
		}
		return OK
	}
	return Error("ERR internal: unknown FUNCTION subcommand")
}

func (x *ctx) unlinkLibrary(name string, l *library) error {
	for _, f := range l.funcs {
		if err := x.w.Delete(fnNameKey(f.name), nil); err != nil {
			return err
		}
	}
	return x.w.Delete(fnLibKey(name), nil)
}

func functionLoad(x *ctx, args [][]byte) Reply {
	replace, code, r, ok := parseFunctionLoad(args)
	if !ok {
		return r
	}
	md, msg := parseLibMeta(code)
	if msg != "" {
		return Error("ERR " + msg)
	}
	old, err := x.loadLibrary(md.name)
	if err != nil {
		return errStorage(err)
	}
	if old != nil && !replace {
		return Error("ERR Library '" + md.name + "' already exists")
	}
	funcs, r, ok := loadLibraryCode(x, md)
	if !ok {
		return r
	}
	for _, f := range funcs {
		owner, err := x.getHidden(fnNameKey(f.name))
		if err != nil {
			return errStorage(err)
		}
		if owner != nil && (old == nil || string(owner) != md.name) {
			return Error(string(sanitizeError([]byte("ERR Function " + cStr(f.name) + " already exists"))))
		}
	}
	if old != nil {
		if err := x.unlinkLibrary(md.name, old); err != nil {
			return errStorage(err)
		}
	}
	if err := x.w.Set(fnLibKey(md.name), encodeLibrary(&library{code: md.code, funcs: funcs}), nil); err != nil {
		return errStorage(err)
	}
	for _, f := range funcs {
		if err := x.w.Set(fnNameKey(f.name), []byte(md.name), nil); err != nil {
			return errStorage(err)
		}
	}
	return BulkString(md.name)
}

func functionList(x *ctx, args [][]byte) Reply {
	pattern, withCode, r, ok := parseFunctionList(args)
	if !ok {
		return r
	}
	var out []Reply
	err := x.eachLibrary(func(name string, l *library) error {
		if pattern != nil && !glob.Match(pattern, []byte(name), true) {
			return nil
		}
		fns := make([]Reply, len(l.funcs))
		for i, f := range l.funcs {
			desc := Nil
			if f.hasDesc {
				desc = BulkString(f.desc)
			}
			var flags []Reply
			for b, n := range functionFlagNames {
				if f.flags&(1<<b) != 0 {
					flags = append(flags, Status(n))
				}
			}
			fns[i] = Map(BulkString("name"), BulkString(f.name), BulkString("description"), desc,
				BulkString("flags"), Reply{Kind: KindSet, Elems: flags})
		}
		lib := []Reply{BulkString("library_name"), BulkString(name), BulkString("engine"), BulkString("LUA"),
			BulkString("functions"), Array(fns...)}
		if withCode {
			lib = append(lib, BulkString("library_code"), Bulk(l.code))
		}
		out = append(out, Map(lib...))
		return nil
	})
	if err != nil {
		return errStorage(err)
	}
	return Array(out...)
}

func functionStats(x *ctx) Reply {
	var libs, fns int64
	err := x.eachLibrary(func(_ string, l *library) error {
		libs++
		fns += int64(len(l.funcs))
		return nil
	})
	if err != nil {
		return errStorage(err)
	}
	return Map(BulkString("running_script"), Nil,
		BulkString("engines"), Map(BulkString("LUA"),
			Map(BulkString("libraries_count"), Int(libs), BulkString("functions_count"), Int(fns))))
}

func cmdFcall(x *ctx, args [][]byte) Reply {
	owner, err := x.getHidden(fnNameKey(string(args[1])))
	if err != nil {
		return errStorage(err)
	}
	if owner == nil {
		return errFunctionNotFound
	}
	nk, ok := redisnum.ParseInt(args[2])
	if !ok {
		return Error("ERR Bad number of keys provided")
	}
	if nk > int64(len(args)-3) {
		return Error("ERR Number of keys can't be greater than number of args")
	}
	if nk < 0 {
		return Error("ERR Number of keys can't be negative")
	}
	l, err := x.loadLibrary(string(owner))
	if err != nil {
		return errStorage(err)
	}
	if l == nil {
		return errStorage(fmt.Errorf("library %q of function %q is missing", owner, args[1]))
	}
	var fi *fnInfo
	for i := range l.funcs {
		if strings.EqualFold(l.funcs[i].name, string(args[1])) {
			fi = &l.funcs[i]
		}
	}
	if fi == nil {
		return errFunctionNotFound
	}
	noWrites := fi.flags&fnNoWrites != 0
	ro := eq(args[0], "fcall_ro")
	if ro && !noWrites {
		return Error("ERR Can not execute a script with write flag using *_ro command.")
	}
	md, msg := parseLibMeta(l.code)
	if msg != "" {
		return Error("ERR " + msg)
	}
	cs, r := compileFunctionBody(md.body)
	if cs == nil {
		return r
	}
	vm := getLuaVM()
	r, clean := vm.callFunction(x, cs, fi.name, args[3:3+nk], args[3+nk:], ro || noWrites)
	putLuaVM(vm, clean)
	return r
}

// callFunction rebuilds the library's closures and runs function name.
func (vm *luaVM) callFunction(x *ctx, cs *compiledScript, name string, keys, argv [][]byte, readOnly bool) (Reply, bool) {
	L := vm.L
	vm.start(x, name, functionSourceName, readOnly)
	ld, r, err := vm.loadFunctions(cs)
	if ld == nil {
		return vm.abort(r, err)
	}
	var fn *lua.LFunction
	for _, f := range ld.funcs {
		if strings.EqualFold(f.name, name) {
			fn = f.fn
		}
	}
	if fn == nil {
		return vm.abort(errFunctionNotFound, nil)
	}
	vm.budget = budgetCtx{left: scriptBudget}
	vm.run.allocated = 0
	L.Push(fn)
	L.Push(stringArray(L, keys))
	L.Push(stringArray(L, argv))
	return vm.finish(vm.pcall1(2))
}

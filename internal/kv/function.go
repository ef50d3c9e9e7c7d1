package kv

import (
	"fmt"
	"strings"

	"github.com/kvorum/kvorum/internal/glob"
	"github.com/kvorum/kvorum/internal/redisnum"
	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/script"
)

// Redis 7.0 functions: FUNCTION LOAD/DELETE/FLUSH/LIST/STATS/KILL/HELP,
// FCALL and FCALL_RO. Parsing a library's metadata, loading it (what its
// body registers) and calling a function are package internal/script's
// (script.Library: the sandbox, budget, RESP conversions and redis.call are
// shared with EVAL); this file holds the commands and the replicated
// library records.
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
// Lua state (script.Library.Call): the library's body runs again (in the
// load environment, deterministic: it can only call
// redis.register_function, redis.log and read redis.LOG_* and
// redis.REDIS_VERSION*), and the closure registered under the function's
// name is called with the KEYS and ARGV tables as arguments, under the
// script budget. Library loading and each call have their own budget.
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
//   - FUNCTION DUMP writes each library's code verbatim (Redis LZF-compresses
//     codes longer than 20 bytes when that saves space), so its payload
//     can differ from Redis's in bytes; each restores the other's.
//     Libraries are dumped in name order (Redis: its dict order).
//   - FUNCTION RESTORE checks what depends on the payload alone (version,
//     checksum, format, each library's code) before the Raft log, and the
//     collisions with the stored libraries at apply time. With several
//     colliding libraries or functions, the one named in the error can
//     differ from Redis's (its dict order).
//   - FUNCTION LOAD with REPLACE of code that does not compile or fails to
//     register is refused before it reaches the Raft log; without REPLACE
//     the same errors come at apply time, after the "already exists" check,
//     as in Redis.
//   - FUNCTION KILL, SCRIPT KILL, the BUSY reply and FUNCTION STATS's
//     running_script: see script.Monitor and the README. FUNCTION STATS
//     shows the oldest function running on the node that answers.
//   - A load that exceeds the budget fails with kvorum's budget error
//     (Redis: a 500 ms "FUNCTION LOAD timeout").

var (
	fnPrefix     = []byte{userPrefix, 0x00, 0x00, 'F'}      // every function record
	fnLibPrefix  = []byte{userPrefix, 0x00, 0x00, 'F', 'l'} // + library name: encodeLibrary
	fnNamePrefix = []byte{userPrefix, 0x00, 0x00, 'F', 'n'} // + lower-case function name: its library's name
)

var (
	errFunctionNotFound = Error("ERR Function not found")
	errLibraryNotFound  = Error("ERR Library not found")
)

func init() {
	const fl = "noscript stale skip_monitor no_mandatory_keys movablekeys"
	def("fcall", -3, fl, 0, 0, 0, "scripting", "Invokes a function.", cmdFcall, nil)
	def("fcall_ro", -3, "readonly "+fl, 0, 0, 0, "scripting", "Invokes a read-only function.", cmdFcall, nil)
	defParsed("function", -2, "", 0, 0, 0, "scripting", "A container for function commands.", parseFunction, cmdFunction)
	// Like EVAL: FCALL runs at apply time on every replica, and FUNCTION
	// LOAD/DELETE/FLUSH change the replicated libraries. FUNCTION's other
	// subcommands are reads.
	table["fcall"].spec.Write = true
	table["function"].spec.Write = true
	table["function"].readOnly = func(args [][]byte) bool {
		return len(args) > 1 && !eq(args[1], "load") && !eq(args[1], "delete") && !eq(args[1], "flush") && !eq(args[1], "restore")
	}
}

var functionSubArity = map[string]int{"load": -3, "delete": 3, "flush": -2, "list": -2, "stats": 2, "kill": 2, "help": 2,
	"dump": 2, "restore": -3}

// functionArgs is a parsed FUNCTION command.
type functionArgs struct {
	sub      string // lower case
	pattern  []byte // LIST LIBRARYNAME
	withCode bool   // LIST WITHCODE
	replace  bool   // LOAD REPLACE
	code     []byte // LOAD
	lib      *script.Library
	// LOAD REPLACE: what loading lib registered, which no stored data can
	// change, so that bad code is refused before the log.
	funcs []script.Function
	// RESTORE: the payload's libraries, loaded (what depends on the payload
	// alone is checked before the log), and the policy.
	restored []script.Restored
	policy   string // "append", "replace" or "flush"
}

func parseFunction(args [][]byte) (functionArgs, Reply, bool) {
	sub, r, ok := parseSub(args, "FUNCTION", functionSubArity)
	a := functionArgs{sub: sub}
	switch {
	case !ok:
		return a, r, false
	case sub == "flush" && len(args) > 3:
		b := reply.AppendCString([]byte("ERR unknown subcommand or wrong number of arguments for '"), args[1], 128)
		return a, reply.ErrorText(append(b, "'. Try FUNCTION HELP."...)), false
	case sub == "flush" && len(args) == 3 && !eq(args[2], "sync") && !eq(args[2], "async"):
		return a, Error("ERR FUNCTION FLUSH only supports SYNC|ASYNC option"), false
	case sub == "list":
		a.pattern, a.withCode, r, ok = parseFunctionList(args)
		return a, r, ok
	case sub == "restore" && len(args) > 4:
		b := reply.AppendCString([]byte("ERR unknown subcommand or wrong number of arguments for '"), args[1], 128)
		return a, reply.ErrorText(append(b, "'. Try FUNCTION HELP."...)), false
	case sub == "restore":
		a.policy = "append"
		if len(args) == 4 {
			a.policy = strings.ToLower(string(args[3]))
			if a.policy != "append" && a.policy != "replace" && a.policy != "flush" {
				return a, Error("ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE."), false
			}
		}
		if a.restored, r = script.RestoreLibraries(args[2]); r.IsError() {
			return a, r, false
		}
	case sub == "load":
		if a.replace, a.code, r, ok = parseFunctionLoad(args); !ok {
			return a, r, false
		}
		if a.lib, r = script.ParseLibrary(a.code); a.lib == nil {
			return a, r, false
		}
		if a.replace {
			if a.funcs, r, ok = a.lib.Load(); !ok {
				return a, r, false
			}
		}
	}
	return a, Reply{}, true
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
		b := reply.AppendCString([]byte("ERR Unknown argument "), a, len(a))
		return nil, false, reply.ErrorText(b), false
	}
	return pattern, withCode, Reply{}, true
}

// parseFunctionLoad parses FUNCTION LOAD [REPLACE] code.
func parseFunctionLoad(args [][]byte) (replace bool, code []byte, r Reply, ok bool) {
	i := 2
	for ; i < len(args)-1; i++ {
		if !eq(args[i], "replace") {
			b := reply.AppendCString([]byte("ERR Unknown option given: "), args[i], len(args[i]))
			return false, nil, reply.ErrorText(b), false
		}
		replace = true
	}
	return replace, args[i], Reply{}, true
}

// ---------------------------------------------------------------------------
// Stored libraries.

func fnLibKey(name string) []byte { return append(append([]byte(nil), fnLibPrefix...), name...) }

func fnNameKey(name string) []byte {
	return append(append([]byte(nil), fnNamePrefix...), strings.ToLower(name)...)
}

// loadLibrary reads library name as the entry's range holds it (range
// 1's, or the range's copy: fncopy.go).
func (x *ctx) loadLibrary(name string) (*script.Stored, error) {
	v, ok, err := getCopy(x.r, x.fnKey(fnLibKey(name)))
	if !ok || err != nil {
		return nil, err
	}
	return script.DecodeStored(v)
}

// eachLibrary calls f for every stored library, in name order.
func (x *ctx) eachLibrary(f func(name string, l *script.Stored) error) error {
	return iterPrefix(x.r, fnLibPrefix, func(k, v []byte) error {
		l, err := script.DecodeStored(v)
		if err != nil {
			return err
		}
		return f(string(k[len(fnLibPrefix):]), l)
	})
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

func cmdFunction(x *ctx, args [][]byte, a functionArgs) Reply {
	switch a.sub {
	case "help":
		out := make([]Reply, len(functionHelp))
		for i, l := range functionHelp {
			out[i] = Status(l)
		}
		return Array(out...)
	case "kill":
		return Error("NOTBUSY No scripts in execution right now.")
	case "stats":
		return functionStats(x)
	case "list":
		return functionList(x, a.pattern, a.withCode)
	case "dump":
		var codes [][]byte
		err := x.eachLibrary(func(_ string, l *script.Stored) error {
			codes = append(codes, l.Code)
			return nil
		})
		if err != nil {
			return errReply(err)
		}
		return Bulk(script.DumpLibraries(codes))
	}
	if x.w == nil {
		return Error("ERR internal: FUNCTION " + strings.ToUpper(a.sub) + " sent to Read")
	}
	if !authoritative(x.desc) {
		// Only range 1 holds the libraries; the others copy them (fncopy.go).
		return Error("ERR FUNCTION " + strings.ToUpper(a.sub) + " is applied by range 1 only")
	}
	r := functionWrite(x, args, a)
	if r.Kind != reply.KindError {
		if err := writeFunctionVersion(x); err != nil {
			return errReply(err)
		}
	}
	return r
}

// functionWrite runs FUNCTION LOAD, DELETE, FLUSH or RESTORE in range 1.
func functionWrite(x *ctx, args [][]byte, a functionArgs) Reply {
	switch a.sub {
	case "load":
		return functionLoad(x, a)
	case "delete":
		name := string(args[2])
		l, err := x.loadLibrary(name)
		if err != nil {
			return errReply(err)
		}
		if l == nil {
			return errLibraryNotFound
		}
		if err := x.unlinkLibrary(name, l); err != nil {
			return errReply(err)
		}
		return OK
	case "flush":
		if err := x.w.DeleteRange(fnPrefix, prefixEnd(fnPrefix), nil); err != nil {
			return errReply(err)
		}
		return OK
	case "restore":
		return functionRestore(x, a)
	}
	return Error("ERR internal: unknown FUNCTION subcommand")
}

func (x *ctx) unlinkLibrary(name string, l *script.Stored) error {
	for _, f := range l.Funcs {
		if err := x.w.Delete(fnNameKey(f.Name), nil); err != nil {
			return err
		}
	}
	return x.w.Delete(fnLibKey(name), nil)
}

func functionLoad(x *ctx, a functionArgs) Reply {
	lib := a.lib
	old, err := x.loadLibrary(lib.Name)
	if err != nil {
		return errReply(err)
	}
	if old != nil && !a.replace {
		return Error("ERR Library '" + lib.Name + "' already exists")
	}
	funcs := a.funcs
	if !a.replace {
		var r Reply
		var ok bool
		if funcs, r, ok = lib.Load(); !ok {
			return r
		}
	}
	for _, f := range funcs {
		owner, taken, err := getCopy(x.r, fnNameKey(f.Name))
		if err != nil {
			return errReply(err)
		}
		if taken && (old == nil || string(owner) != lib.Name) {
			return reply.ErrorText([]byte("ERR Function " + cStr(f.Name) + " already exists"))
		}
	}
	if old != nil {
		if err := x.unlinkLibrary(lib.Name, old); err != nil {
			return errReply(err)
		}
	}
	if err := x.linkLibrary(lib.Name, a.code, funcs); err != nil {
		return errReply(err)
	}
	return BulkString(lib.Name)
}

// functionRestore links the libraries of a FUNCTION RESTORE payload
// (Redis's libraryJoin): with APPEND a library that exists fails the
// restore, with REPLACE it is replaced, with FLUSH every library goes
// first; then a function that another library has fails it. Nothing
// changes on failure.
func functionRestore(x *ctx, a functionArgs) Reply {
	if a.policy == "flush" {
		if err := x.w.DeleteRange(fnPrefix, prefixEnd(fnPrefix), nil); err != nil {
			return errReply(err)
		}
	} else {
		replaced := map[string]*script.Stored{}
		for _, rl := range a.restored {
			old, err := x.loadLibrary(rl.Name)
			if err != nil {
				return errReply(err)
			}
			if old != nil && a.policy != "replace" {
				return reply.ErrorText([]byte("ERR Library " + cStr(rl.Name) + " already exists"))
			}
			if old != nil {
				replaced[rl.Name] = old
			}
		}
		for _, rl := range a.restored {
			for _, f := range rl.Funcs {
				owner, taken, err := getCopy(x.r, fnNameKey(f.Name))
				if err != nil {
					return errReply(err)
				}
				if _, gone := replaced[string(owner)]; taken && !gone {
					return reply.ErrorText([]byte("ERR Function " + cStr(f.Name) + " already exists"))
				}
			}
		}
		for name, old := range replaced {
			if err := x.unlinkLibrary(name, old); err != nil {
				return errReply(err)
			}
		}
	}
	for _, rl := range a.restored {
		if err := x.linkLibrary(rl.Name, rl.Code, rl.Funcs); err != nil {
			return errReply(err)
		}
	}
	return OK
}

func (x *ctx) linkLibrary(name string, code []byte, funcs []script.Function) error {
	if err := x.w.Set(fnLibKey(name), (&script.Stored{Code: code, Funcs: funcs}).Encode(), nil); err != nil {
		return err
	}
	for _, f := range funcs {
		if err := x.w.Set(fnNameKey(f.Name), []byte(name), nil); err != nil {
			return err
		}
	}
	return nil
}

func functionList(x *ctx, pattern []byte, withCode bool) Reply {
	var out []Reply
	err := x.eachLibrary(func(name string, l *script.Stored) error {
		if pattern != nil && !glob.Match(pattern, []byte(name), true) {
			return nil
		}
		fns := make([]Reply, len(l.Funcs))
		for i, f := range l.Funcs {
			desc := Nil
			if f.HasDescription {
				desc = BulkString(f.Description)
			}
			var flags []Reply
			for _, n := range f.FlagNames() {
				flags = append(flags, Status(n))
			}
			fns[i] = Map(BulkString("name"), BulkString(f.Name), BulkString("description"), desc,
				BulkString("flags"), Reply{Kind: reply.KindSet, Elems: flags})
		}
		lib := []Reply{BulkString("library_name"), BulkString(name), BulkString("engine"), BulkString("LUA"),
			BulkString("functions"), Array(fns...)}
		if withCode {
			lib = append(lib, BulkString("library_code"), Bulk(l.Code))
		}
		out = append(out, Map(lib...))
		return nil
	})
	if err != nil {
		return errReply(err)
	}
	return Array(out...)
}

func functionStats(x *ctx) Reply {
	var libs, fns int64
	err := x.eachLibrary(func(_ string, l *script.Stored) error {
		libs++
		fns += int64(len(l.Funcs))
		return nil
	})
	if err != nil {
		return errReply(err)
	}
	running := Nil
	if name, cmd, d, ok := x.scripts.RunningFunction(); ok && x.showRunning {
		args := make([]Reply, len(cmd))
		for i, a := range cmd {
			args[i] = Bulk(a)
		}
		running = Map(BulkString("name"), BulkString(name), BulkString("command"), Array(args...),
			BulkString("duration_ms"), Int(d.Milliseconds()))
	}
	return Map(BulkString("running_script"), running,
		BulkString("engines"), Map(BulkString("LUA"),
			Map(BulkString("libraries_count"), Int(libs), BulkString("functions_count"), Int(fns))))
}

func cmdFcall(x *ctx, args [][]byte) Reply {
	owner, ok, err := getCopy(x.r, x.fnKey(fnNameKey(string(args[1]))))
	if err != nil || !ok {
		return errOr(err, errFunctionNotFound)
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
		return errReply(err)
	}
	if l == nil {
		return errReply(fmt.Errorf("library %q of function %q is missing", owner, args[1]))
	}
	var fi *script.Function
	for i := range l.Funcs {
		if strings.EqualFold(l.Funcs[i].Name, string(args[1])) {
			fi = &l.Funcs[i]
		}
	}
	if fi == nil {
		return errFunctionNotFound
	}
	ro := eq(args[0], "fcall_ro")
	if ro && !fi.NoWrites() {
		return Error("ERR Can not execute a script with write flag using *_ro command.")
	}
	if x.oom && !fi.NoWrites() && !fi.AllowOOM() {
		return errOOM // maxmemory.go: a function that may write
	}
	x.oom = x.oom && !fi.AllowOOM()
	lib, r := script.ParseLibrary(l.Code)
	if lib == nil {
		return r
	}
	c := newScriptCaller(x, ro || fi.NoWrites())
	run := x.beginRun(fi.Name, args, true, ro || fi.NoWrites())
	defer x.scripts.End(run)
	return lib.Call(c, fi.Name, args[3:3+nk], args[3+nk:], x.rand().Uint64(), run)
}

// cStr cuts s at its first NUL byte, as C's %s does.
func cStr(s string) string {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return s[:i]
	}
	return s
}

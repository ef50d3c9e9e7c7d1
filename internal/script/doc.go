// Package script is kvorum's Lua runtime: Redis 7.0's scripting
// environment (EVAL scripts and FUNCTION libraries) on the embedded Lua 5.1
// VM github.com/yuin/gopher-lua. It compiles scripts, runs them on pooled,
// sandboxed Lua states under an instruction budget, and provides Redis's
// Lua libraries: the base library, string (with Lua patterns and format),
// table, math, coroutine, bit, cjson and redis.
//
// It knows nothing of storage or the keyspace. The state machine (package
// kv) owns the commands (EVAL, EVALSHA, SCRIPT, FUNCTION, FCALL, ...), stores
// script bodies and libraries, and hands each run a Caller, through which
// redis.call and redis.pcall run commands in the context of the command
// that runs the script.
//
// # Using it
//
//	s, r := script.Compile(script.SHA1Hex(body), body) // cached by sha
//	if s == nil {
//		return r // Redis's compile error
//	}
//	return script.Run(caller, s, keys, argv, seed)
//
// and for functions:
//
//	lib, r := script.ParseLibrary(code) // "#!lua name=<lib>"
//	funcs, r, ok := lib.Load()          // FUNCTION LOAD: what the body registers
//	r = lib.Call(caller, name, keys, argv, seed) // FCALL
//
// Run, Call and Load may be called from any goroutine; each run takes a
// Lua state from the pool for its duration. The Caller is called
// synchronously on the run's goroutine, from inside redis.call (kv's runs
// the command with ctx.call, in the batch of the command that runs the
// script).
//
// What the Caller does decides which commands a script may call: it makes
// Redis's checks (unknown command, arity, commands not allowed in scripts,
// writes from a read-only script) and answers refused commands with Redis's
// error replies. So read-only runs (EVAL_RO, FCALL_RO, the no-writes flag)
// are the Caller's business; the runtime only reports the flags a script
// declares (Script.Shebang, Script.NoWrites, Function.NoWrites).
//
// # Determinism
//
// kvorum runs write scripts at apply time on every replica, and all of
// them must compute the same thing. So a run depends on nothing but its
// code, its arguments, its seed and what the Caller answers:
//
//   - No clock: Redis's TIME is a command, answered by the Caller (kv
//     answers from the log entry's timestamp). No os, io, debug, require,
//     dofile, loadfile, print, getfenv, setfenv (Redis 7.0.15 has none of
//     them either); loadstring and load compile through the same pipeline
//     as scripts.
//   - math.random is Redis's redisLrand48 generator, seeded at the start of
//     every run from the seed Run and Call are given (kv derives it from
//     the log position), so every replica draws the same numbers;
//     math.randomseed(n) reseeds it exactly as Redis does (the same
//     sequence as redis-server after the same seed).
//   - Table iteration (pairs, next) in gopher-lua is deterministic: the
//     array part in index order, then the hash part in insertion order
//     (LTable keeps a keys slice and a key->index map, gopher-lua's
//     table.go Next), so the same program visits keys in the same order on
//     every replica. Library tables are built in sorted key order, and
//     scripts only see read-only views of them anyway.
//   - tostring() of tables, functions, threads and userdata prints a
//     per-run sequence number instead of a memory address; collectgarbage
//     and gcinfo return 0.
//   - Numbers are float64 as in Lua 5.1. Conversions of out-of-range floats
//     to integers follow x86-64 (math.MinInt64), whatever the machine; the
//     math library is Go's, so replicas should run on the same
//     architecture (Go's math functions may differ in the last bit between
//     amd64 and arm64, and gopher-lua converts floats to ints internally).
//   - A library's body runs at load time in an environment that has only
//     redis.register_function, redis.log and constants, without a Caller
//     and without math.random: what it registers is a pure function of its
//     code.
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
// Wall time would differ between replicas, so a run's cost is counted in
// Lua VM instructions: gopher-lua's main loop calls Done() on the LState's
// context once per instruction (mainLoopWithContext in gopher-lua's
// vm.go), and budgetCtx.Done counts the calls and returns a closed channel
// once the budget is spent, which raises an error at the next instruction
// (also inside pcall, so a script cannot catch it for long). What costs
// more than one instruction charges the same budget: one unit per 64 bytes
// a library function or a reply allocates (string.rep, string.format,
// string.gsub, table.concat, concatenation, cjson, redis.call replies,
// ...), per nil slot appended to a table, per 16 steps of pattern
// matching, per 8 table elements moved or compared by the table library,
// per 4 values passed to or returned by a Go function beyond 8, four per
// element of the script's reply. A run that exceeds Budget fails,
// identically on every replica, with
//
//	ERR script exceeded its budget of N Lua instructions; kvorum runs scripts at apply time on every replica, see README
//
// Commands it called before stay done (as for any script error in Redis,
// there is no rollback). Loading a library and each call of a function
// have a budget each.
//
// # Killing a run
//
// The node's Monitor (monitor.go) records the runs in progress (Run and
// Library.Call take a *Running). Monitor.Kill sets a run's atomic kill
// flag, which budgetCtx.Done reads next to the count: the run raises at
// its next instruction, pcall cannot hold it, and it answers Redis's
// "ERR Script killed by user with SCRIPT KILL... script: <name>, on
// <source>:<line>.". Whether a run may be killed (it cannot write) is the
// caller's to say (Running.Killable).
//
// To keep costs honest, scripts are compiled from a rewritten syntax tree
// (rewriter, rewrite.go): a .. b .. c becomes one call of a helper that
// checks and charges the result's size (strings are limited to 512 MB,
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
// # Compile cache
//
// Compiled code is cached in memory by sha (compileCache, at most
// cacheSize scripts; library bodies under a key of their own). Compilation
// is a pure function of the body, so the cache changes speed only: whether
// a script exists is for the caller's storage to say.
//
// # Files
//
// vm.go: Caller, Run, the pool, the budget and a run's life; monitor.go:
// the running scripts of a node; callerr.go: Lua 5.1's text for a call of
// a non-function, rebuilt from the bytecode; compile.go:
// Compile and the cache; reply.go: Lua values to replies and back;
// redislib.go: the redis library; baselib.go, strlib.go, format.go,
// pattern.go, tablelib.go, mathlib.go, bitlib.go, cjson.go: the other
// libraries; args.go: argument checks with Lua 5.1's messages; strtod.go:
// C's number parsing and formatting; rewrite.go: the syntax rewriter and
// the helpers rewritten code calls; libmeta.go and function.go: function
// libraries.
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
// (kvorum always replicates the whole script). RESP3 (redis.setresp(3)) is
// supported except big numbers, which become bulk strings. State kept in a
// library's upvalues does not survive between calls (Library.Call runs the
// body again), where Redis keeps a loaded library's closures for the
// process's lifetime.
package script

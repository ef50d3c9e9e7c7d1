package kv

import (
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/script"
)

// Lua scripting commands: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT.
// The Lua runtime (sandbox, budget, libraries, determinism) is package
// internal/script; this file holds the commands, the replicated script
// cache and scriptCaller, through which a script's redis.call reaches the
// state machine.
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
// What the runtime gets from kv is deterministic: redis.call('TIME')
// answers from ctx.now (the leader's timestamp in the log entry), and
// math.random is seeded from ctx.rand() (derived from the log position),
// so every replica draws the same numbers. A script that exceeds
// script.Budget fails, identically on every replica; writes it made
// before stay (as for any script error in Redis, there is no rollback).
//
// # Script cache
//
// SCRIPT LOAD and EVAL store the script's body, replicated, under the
// hidden key scriptPrefix + sha1 hex (keys.go: in the snapshot span, kept by
// FLUSHALL); EVALSHA reads it back; SCRIPT FLUSH deletes the prefix.
// Compiled code is cached in memory by sha (script.Compile; compilation is
// a pure function of the body). EVAL_RO and EVALSHA_RO, being reads, do not
// store anything: after EVAL_RO of a new script SCRIPT EXISTS says 0 (Redis
// says 1).
//
// # Differences from Redis 7.0
//
// Those of the runtime are listed in package script's documentation.
// SCRIPT DEBUG is not supported. SCRIPT KILL and FUNCTION KILL are
// answered by the node's script.Monitor (package resp intercepts them):
// the kv commands answer NOTBUSY only inside MULTI. The runs are recorded
// there by beginRun.

var errNoScript = Error("NOSCRIPT No matching script. Please use EVAL.")

func init() {
	const fl = "noscript stale skip_monitor no_mandatory_keys movablekeys"
	defParsed("eval", -3, fl, 0, 0, 0, "scripting", "Executes a server-side Lua script.", parseNumKeys, cmdEval)
	defParsed("evalsha", -3, fl, 0, 0, 0, "scripting", "Executes a server-side Lua script by SHA1 digest.", parseEvalSha, cmdEvalSha)
	defParsed("eval_ro", -3, "readonly "+fl, 0, 0, 0, "scripting", "Executes a read-only server-side Lua script.", parseNumKeys, cmdEval)
	defParsed("evalsha_ro", -3, "readonly "+fl, 0, 0, 0, "scripting", "Executes a read-only server-side Lua script by SHA1 digest.", parseEvalSha, cmdEvalSha)
	defParsed("script", -2, "", 0, 0, 0, "scripting", "A container for Lua scripts management commands.", parseScript, cmdScript)
	// Scripts and the script cache are replicated through Raft: a script
	// runs at apply time on every replica.
	table["eval"].spec.Write = true
	table["evalsha"].spec.Write = true
	table["script"].spec.Write = true
}

// parseNumKeys reads EVAL's numkeys as Redis does before anything else.
func parseNumKeys(args [][]byte) (int, Reply, bool) {
	n, r, ok := parseIntArg(args[2])
	switch {
	case !ok:
		return 0, r, false
	case n > int64(len(args)-3):
		return 0, Error("ERR Number of keys can't be greater than number of args"), false
	case n < 0:
		return 0, Error("ERR Number of keys can't be negative"), false
	}
	return int(n), Reply{}, true
}

func parseEvalSha(args [][]byte) (int, Reply, bool) {
	if len(args[1]) != 40 {
		return 0, errNoScript, false
	}
	return parseNumKeys(args)
}

var scriptSubArity = map[string]int{"debug": 3, "exists": -3, "flush": -2, "help": 2, "kill": 2, "load": 3}

// subArityOK reports whether a container's subcommand of arity ar (Redis's
// convention: -n is at least n) may have len(args) arguments.
func subArityOK(ar int, args [][]byte) bool {
	return (ar > 0 && len(args) == ar) || (ar < 0 && len(args) >= -ar)
}

// parseSub finds the subcommand args[1] of container (SCRIPT, FUNCTION)
// among arities (lower case name: Redis's arity) and checks its arity, with
// Redis's errors. It returns the name in lower case.
func parseSub(args [][]byte, container string, arities map[string]int) (string, Reply, bool) {
	sub := strings.ToLower(string(args[1]))
	ar, ok := arities[sub]
	if !ok {
		b := reply.AppendCString([]byte("ERR unknown subcommand '"), args[1], 128)
		return "", reply.ErrorText(append(b, "'. Try "+container+" HELP."...)), false
	}
	if !subArityOK(ar, args) {
		return "", wrongArity(strings.ToLower(container) + "|" + sub), false
	}
	return sub, Reply{}, true
}

func parseScript(args [][]byte) (string, Reply, bool) {
	return parseSub(args, "SCRIPT", scriptSubArity)
}

func scriptKey(sha string) []byte { return append(append([]byte(nil), scriptPrefix...), sha...) }

// loadScript returns the stored body of script sha (lower case hex).
func (x *ctx) loadScript(sha string) ([]byte, bool, error) {
	if !x.systemState() {
		return nil, false, nil // range 1 keeps the cache (systemState)
	}
	return getCopy(x.r, scriptKey(sha))
}

// ScriptBody returns the body of the cached script sha as range 1 holds
// it in r: the node resolves EVALSHA with it before proposing the
// command to another range, whose replicas cannot read the cache.
func ScriptBody(r pebble.Reader, sha []byte) ([]byte, bool, error) {
	return getCopy(r, scriptKey(strings.ToLower(string(sha))))
}

// storeScript compiles body and adds it to the replicated script cache (if
// absent; a read stores nothing). On failure, the script is nil and r the
// reply.
func (x *ctx) storeScript(body []byte) (sha string, s *script.Script, r Reply) {
	sha = script.SHA1Hex(body)
	s, r = script.Compile(sha, body)
	if s == nil || x.w == nil || !x.systemState() {
		return sha, s, r
	}
	if ok, err := hasKey(x.w, scriptKey(sha)); err != nil {
		return sha, nil, errReply(err)
	} else if !ok {
		if err := x.w.Set(scriptKey(sha), body, nil); err != nil {
			return sha, nil, errReply(err)
		}
	}
	return sha, s, r
}

func cmdEval(x *ctx, args [][]byte, numKeys int) Reply {
	_, cs, r := x.storeScript(args[1])
	if cs == nil {
		return r
	}
	return runEval(x, cs, args, numKeys)
}

func cmdEvalSha(x *ctx, args [][]byte, numKeys int) Reply {
	// The replicated store decides whether the script exists (SCRIPT FLUSH
	// removes it on every replica); the compile cache only saves work.
	sha := strings.ToLower(string(args[1]))
	body, ok, err := x.loadScript(sha)
	if err != nil || !ok {
		return errOr(err, errNoScript)
	}
	cs, r := script.Compile(sha, body)
	if cs == nil {
		return r
	}
	return runEval(x, cs, args, numKeys)
}

func runEval(x *ctx, s *script.Script, args [][]byte, numKeys int) Reply {
	keys, argv := args[3:3+numKeys], args[3+numKeys:]
	ro := eq(args[0], "eval_ro") || eq(args[0], "evalsha_ro")
	if ro && s.Shebang() && !s.NoWrites() {
		return Error("ERR Can not execute a script with write flag using *_ro command.")
	}
	if x.oom && s.Shebang() && !s.NoWrites() && !s.AllowOOM() {
		return errOOM // maxmemory.go: a script that declares it may write
	}
	x.oom = x.oom && !s.AllowOOM()
	readOnly := ro || (s.Shebang() && s.NoWrites())
	c := newScriptCaller(x, readOnly)
	run := x.beginRun(s.SHA(), args, false, readOnly)
	defer x.scripts.End(run)
	return script.Run(c, s, keys, argv, x.rand().Uint64(), run)
}

// beginRun records a run of the script or function name, by the command
// args, in the node's Monitor (nil if the node keeps none; x.scripts.End
// ends it). A run that cannot write (read-only: EVAL_RO, FCALL_RO, a
// no-writes script or function) can be killed: on the read path it
// changes nothing, and at apply time it changes nothing either, so
// stopping it on some replicas leaves every replica's state the same. A
// run at apply time that may write cannot be killed.
func (x *ctx) beginRun(name string, args [][]byte, function, readOnly bool) *script.Running {
	if x.scripts == nil {
		return nil
	}
	run := &script.Running{Name: name, Command: args, Function: function, Killable: readOnly || x.w == nil}
	x.scripts.Begin(run)
	return run
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

func cmdScript(x *ctx, args [][]byte, sub string) Reply {
	switch sub {
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
			return errReply(err)
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
				return errReply(err)
			}
			if ok {
				out[i] = Int(1)
			}
		}
		return Array(out...)
	case "load":
		sha, cs, r := x.storeScript(args[2])
		if cs == nil {
			return r
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

// scriptCaller is script.Caller over the context of the command that runs
// a script (EVAL, FCALL, ...): redis.call runs its commands with ctx.call,
// in the same batch. readOnlyCaller is the same for read-only runs (EVAL_RO,
// FCALL_RO, scripts and functions flagged no-writes). Both are the ctx
// itself, so that handing one to a run allocates nothing.
type (
	scriptCaller   ctx
	readOnlyCaller ctx
)

// newScriptCaller returns the caller of a run in x.
func newScriptCaller(x *ctx, readOnly bool) script.Caller {
	if readOnly {
		return (*readOnlyCaller)(x)
	}
	return (*scriptCaller)(x)
}

func (c *scriptCaller) Call(args [][]byte) Reply     { return scriptCall((*ctx)(c), args, false) }
func (c *scriptCaller) IsCommand(name []byte) bool   { return isScriptCommand(name) }
func (c *readOnlyCaller) Call(args [][]byte) Reply   { return scriptCall((*ctx)(c), args, true) }
func (c *readOnlyCaller) IsCommand(name []byte) bool { return isScriptCommand(name) }

// scriptCall runs one command for redis.call, with Redis's checks in
// Redis's order: known command, arity, allowed in scripts, write in a
// read-only script.
func scriptCall(x *ctx, args [][]byte, readOnly bool) Reply {
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
		if ar := subs[strings.ToLower(string(args[1]))]; ar != 0 && !subArityOK(ar, args) {
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
	if r, denied := x.scriptPermission(args); denied {
		return r // acl.go
	}
	if _, _, block := StreamBlocking(args); block || name == "xreadgroup" && Blocks(args) {
		return Error("ERR " + name + " command is not allowed with BLOCK option from scripts")
	}
	if readOnly && d.spec.Write {
		return Error("ERR Write commands are not allowed from read-only scripts.")
	}
	if x.oom && !x.wrote && d.denyOOM() {
		return errOOM // maxmemory.go: only before the run's first write
	}
	if d.spec.Write {
		x.wrote = true
	}
	if x.ranged { // rangecheck.go, Redis's scriptVerifyClusterState
		if !keysInRange(x.desc, d, args) {
			return errNonLocal
		}
		r := x.call(args)
		if x.outside {
			x.outside = false
			return errNonLocal
		}
		return r
	}
	return x.call(args)
}

// isScriptCommand reports whether name is a command of the table
// (redis.acl_check_cmd).
func isScriptCommand(name []byte) bool {
	d := lookup(name)
	return d != nil && !d.internal
}

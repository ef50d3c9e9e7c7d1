package script

import (
	"strings"

	"github.com/kvorum/kvorum/internal/reply"
	lua "github.com/yuin/gopher-lua"
)

// The redis library: redis.call and redis.pcall reach the run's Caller.

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
	var r reply.Reply
	if msg != "" {
		r = reply.Error(msg)
	} else {
		r = vm.run.caller.Call(args)
	}
	if r.Kind == reply.KindError {
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
	L.Push(lua.LString(SHA1Hex([]byte(s))))
	return 1
}

func redisErrorReply(L *lua.LState) int {
	s, ok := replyArg(L)
	if !ok {
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
	s, ok := replyArg(L)
	if !ok {
		return 1
	}
	t := L.CreateTable(0, 1)
	t.RawSetString("ok", s)
	L.Push(t)
	return 1
}

// replyArg is the one string argument of redis.error_reply and
// redis.status_reply. Without it, it pushes their result for that case
// (an error table) and returns false.
func replyArg(L *lua.LState) (lua.LString, bool) {
	s, ok := L.Get(1).(lua.LString)
	if L.GetTop() != 1 || !ok {
		L.Push(errTable(L, "wrong number or type of arguments"))
		return "", false
	}
	return s, true
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
	if !vm.run.caller.IsCommand(args[0]) {
		raiseTable(L, "Invalid command passed to redis.acl_check_cmd()")
	}
	L.Push(lua.LTrue)
	return 1
}

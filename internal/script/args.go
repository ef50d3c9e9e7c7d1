package script

import (
	"strconv"

	lua "github.com/yuin/gopher-lua"
)

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

// optBorder is luaL_opt(L, luaL_checkint, n, luaL_getn(L, 1)): argument n,
// or t's border (its length) when the argument is absent.
func optBorder(L *lua.LState, n int, fname string, t *lua.LTable) int {
	if L.Get(n) == lua.LNil {
		return border(t)
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

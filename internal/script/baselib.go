package script

import (
	"errors"
	"fmt"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// The base library (the set Redis 7.0.15 has, see newLuaVM): what kvorum
// implements itself, and coroutines.

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
		return call1(L, mm, v)
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
	e := optBorder(L, 3, "unpack", t)
	if i > e {
		return 0
	}
	n := int64(e) - int64(i) + 1
	if n <= 0 || n > maxResults {
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

// rawget reads a read-only view's table (the globals, the libraries): in
// Redis those are the tables themselves, made read-only.
func (vm *luaVM) rawget(L *lua.LState) int {
	t := checkTable(L, 1, "rawget")
	checkAny(L, 2, "rawget")
	L.Push(vm.unview(t).RawGet(L.Get(2)))
	return 1
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
		piece := call1(L, f)
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

// Coroutines: a new thread must count instructions on the same budget
// (gopher-lua would give it a child context of its own), and a run may
// create a limited number.

func (vm *luaVM) coCreate(L *lua.LState) int { return vm.newThread(L, "create") }

func (vm *luaVM) newThread(L *lua.LState, fname string) int {
	if f, ok := L.Get(1).(*lua.LFunction); !ok || f.IsG {
		argError(L, 1, fname, "Lua function expected")
	}
	vm.run.threads++
	if vm.run.threads > maxThreads {
		L.RaiseError("too many coroutines (more than %d in one script)", maxThreads)
	}
	vm.chargeBytes(L, callStackSize*80+1024*16) // its call stack and registry
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

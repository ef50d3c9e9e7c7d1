package script

import (
	"math"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

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
		if r := call1(L, f, k, v); r != lua.LNil {
			L.Push(r)
			return 1
		}
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
		if r := call1(L, f, lua.LNumber(i), t.RawGetInt(i)); r != lua.LNil {
			L.Push(r)
			return 1
		}
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
	last := optBorder(L, 4, "concat", t)
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
		if size > maxString {
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
		return lua.LVAsBool(call1(L, f, a, b))
	}
	get := func(i int) lua.LValue { return t.RawGetInt(i) }
	swap := func(i, j int) {
		a, b := t.RawGetInt(i), t.RawGetInt(j)
		t.RawSetInt(i, b)
		t.RawSetInt(j, a)
	}
	var auxsort func(l, u int)
	auxsort = func(l, u int) {
		for l < u {
			if less(get(u), get(l)) {
				swap(l, u)
			}
			if u-l == 1 {
				break
			}
			i := (l + u) / 2
			if less(get(i), get(l)) {
				swap(i, l)
			} else if less(get(u), get(i)) {
				swap(i, u)
			}
			if u-l == 2 {
				break
			}
			pivot := get(i)
			swap(i, u-1)
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
				swap(i, j)
			}
			swap(u-1, i)
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
			return lua.LVAsBool(call1(L, mm, a, b))
		}
	}
	t1, t2 := a.Type().String(), b.Type().String()
	if t1 == t2 {
		L.Error(lua.LString("attempt to compare two "+t1+" values"), 0)
	}
	L.Error(lua.LString("attempt to compare "+t1+" with "+t2), 0)
	return false
}

// call1 calls f(args...) for one result and returns it, leaving the stack
// as it found it (a metamethod or a callback called from a C function).
func call1(L *lua.LState, f lua.LValue, args ...lua.LValue) lua.LValue {
	L.Push(f)
	for _, a := range args {
		L.Push(a)
	}
	L.Call(len(args), 1)
	r := L.Get(-1)
	L.Pop(1)
	return r
}

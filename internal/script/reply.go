package script

import (
	"github.com/kvorum/kvorum/internal/reply"
	lua "github.com/yuin/gopher-lua"
)

// toReply converts a script's result to a reply, as Redis's
// luaReplyToRedisReply.
func (vm *luaVM) toReply(v lua.LValue, depth int) reply.Reply {
	// A reply element costs about as much as four instructions (a Reply is
	// some 80 bytes), which also bounds replies that repeat a table.
	if !vm.spend(4) {
		return reply.Nil
	}
	switch v := v.(type) {
	case lua.LString:
		if !vm.spend(int64(len(v) / bytesPerUnit)) {
			return reply.Nil
		}
		return reply.Bulk([]byte(v))
	case lua.LBool:
		if vm.run.resp == 3 {
			return reply.Bool(bool(v))
		}
		if v {
			return reply.Int(1)
		}
		return reply.Nil
	case lua.LNumber:
		return reply.Int(luaToInt64(float64(v)))
	case *lua.LTable:
		if depth >= maxDepth {
			vm.run.tooDeep = true
			return errTooDeep
		}
		if s, ok := v.RawGetString("err").(lua.LString); ok {
			return reply.Error(oneLine(string(s)))
		}
		if s, ok := v.RawGetString("ok").(lua.LString); ok {
			return reply.Reply{Kind: reply.KindStatus, Str: []byte(oneLine(string(s)))}
		}
		if n, ok := v.RawGetString("double").(lua.LNumber); ok {
			return reply.Double(float64(n))
		}
		if s, ok := v.RawGetString("big_number").(lua.LString); ok {
			return reply.Bulk([]byte(oneLine(string(s))))
		}
		if t, ok := v.RawGetString("verbatim_string").(*lua.LTable); ok {
			if _, ok := t.RawGetString("format").(lua.LString); ok {
				if s, ok := t.RawGetString("string").(lua.LString); ok {
					return reply.Reply{Kind: reply.KindVerbatim, Str: []byte(s)}
				}
			}
		}
		if t, ok := v.RawGetString("map").(*lua.LTable); ok {
			var out []reply.Reply
			for k, e := t.Next(lua.LNil); k != lua.LNil && !vm.budget.exhausted; k, e = t.Next(k) {
				out = append(out, vm.toReply(k, depth+1), vm.toReply(e, depth+1))
			}
			return reply.Map(out...)
		}
		if t, ok := v.RawGetString("set").(*lua.LTable); ok {
			var out []reply.Reply
			for k, _ := t.Next(lua.LNil); k != lua.LNil && !vm.budget.exhausted; k, _ = t.Next(k) {
				out = append(out, vm.toReply(k, depth+1))
			}
			return reply.Reply{Kind: reply.KindSet, Elems: out}
		}
		out := make([]reply.Reply, 0, min(arrayLen(v), 1024))
		for j := 1; !vm.budget.exhausted; j++ {
			e := v.RawGetInt(j)
			if e == lua.LNil {
				break
			}
			out = append(out, vm.toReply(e, depth+1))
		}
		return reply.Array(out...)
	}
	return reply.Nil
}

// fromReply converts a command's reply to Lua (Redis's
// redisProtocolToLuaType), as RESP2 or RESP3 would carry it.
func (vm *luaVM) fromReply(L *lua.LState, r reply.Reply) lua.LValue {
	vm.charge(L, 1)
	resp3 := vm.run.resp == 3
	switch r.Kind {
	case reply.KindStatus:
		t := L.CreateTable(0, 1)
		t.RawSetString("ok", lua.LString(r.Str))
		return t
	case reply.KindError:
		return errTable(L, "-"+string(r.Str))
	case reply.KindInt:
		return lua.LNumber(r.Int)
	case reply.KindBulk:
		vm.chargeBytes(L, len(r.Str))
		return lua.LString(r.Str)
	case reply.KindVerbatim:
		vm.chargeBytes(L, len(r.Str))
		if resp3 {
			v := L.CreateTable(0, 2)
			v.RawSetString("format", lua.LString("txt"))
			v.RawSetString("string", lua.LString(r.Str))
			t := L.CreateTable(0, 1)
			t.RawSetString("verbatim_string", v)
			return t
		}
		return lua.LString(r.Str)
	case reply.KindNil, reply.KindNilArray:
		if resp3 {
			return lua.LNil
		}
		return lua.LFalse
	case reply.KindDouble:
		if resp3 {
			t := L.CreateTable(0, 1)
			t.RawSetString("double", lua.LNumber(r.Float))
			return t
		}
		if len(r.Str) > 0 {
			return lua.LString(r.Str)
		}
		return lua.LString(cFormatG(r.Float, 17))
	case reply.KindBool:
		if resp3 {
			return lua.LBool(r.Int != 0)
		}
		return lua.LNumber(r.Int)
	case reply.KindMap, reply.KindNestedMap:
		if !resp3 && r.Kind == reply.KindNestedMap {
			return vm.pairTables(L, r.Elems)
		}
		if resp3 {
			m := L.CreateTable(0, len(r.Elems)/2)
			for i := 0; i+1 < len(r.Elems); i += 2 {
				k := vm.fromReply(L, r.Elems[i])
				v := vm.fromReply(L, r.Elems[i+1])
				vm.setField(L, m, k, v)
			}
			t := L.CreateTable(0, 1)
			t.RawSetString("map", m)
			return t
		}
	case reply.KindPairs:
		if resp3 {
			return vm.pairTables(L, r.Elems)
		}
	case reply.KindSet:
		if resp3 {
			s := L.CreateTable(0, len(r.Elems))
			for _, e := range r.Elems {
				vm.setField(L, s, vm.fromReply(L, e), lua.LTrue)
			}
			t := L.CreateTable(0, 1)
			t.RawSetString("set", s)
			return t
		}
	}
	// Arrays (and RESP2 maps, sets and pairs).
	vm.chargeBytes(L, 16*len(r.Elems))
	t := L.CreateTable(len(r.Elems), 0)
	for i, e := range r.Elems {
		t.RawSetInt(i+1, vm.fromReply(L, e))
	}
	return t
}

// pairTables converts a, b, a, b, ... to an array of {a, b} tables.
func (vm *luaVM) pairTables(L *lua.LState, elems []reply.Reply) *lua.LTable {
	vm.chargeBytes(L, 48*len(elems))
	t := L.CreateTable(len(elems)/2, 0)
	for i := 0; i+1 < len(elems); i += 2 {
		p := L.CreateTable(2, 0)
		p.RawSetInt(1, vm.fromReply(L, elems[i]))
		p.RawSetInt(2, vm.fromReply(L, elems[i+1]))
		t.RawSetInt(i/2+1, p)
	}
	return t
}

// setField is a raw set that charges a sparse integer key; nil and NaN keys
// are skipped.
func (vm *luaVM) setField(L *lua.LState, t *lua.LTable, k, v lua.LValue) {
	if k == lua.LNil {
		return
	}
	if n, ok := k.(lua.LNumber); ok && n != n {
		return
	}
	vm.chargeGap(L, arrayLen(t), k)
	t.RawSet(k, v)
}

package script

import (
	"encoding/binary"
	"math"
	"strconv"

	lua "github.com/yuin/gopher-lua"
)

// cmsgpack: Redis's lua_cmsgpack 0.4.0 (pack, unpack, unpack_one,
// unpack_limit), byte for byte. Written here rather than on a Go
// MessagePack library: those choose an encoding from a Go type, while
// cmsgpack chooses it from a Lua number's value (an integral double is an
// integer of the smallest size class, another one a float 32 if that is
// exact, else a float 64), tells arrays from maps by their keys, nests at
// most 16 tables (deeper ones pack as nil), rejects bin and ext types on
// unpack, and has error texts of its own.

const (
	msgpackMaxNesting = 16   // LUACMSGPACK_MAX_NESTING
	luaMaxCStack      = 8000 // LUAI_MAXCSTACK: stack slots a Go function may use
)

var cmsgpackInfo = map[string]lua.LValue{
	"_NAME":        lua.LString("cmsgpack"),
	"_VERSION":     lua.LString("lua-cmsgpack 0.4.0"),
	"_COPYRIGHT":   lua.LString("Copyright (C) 2012, Salvatore Sanfilippo"),
	"_DESCRIPTION": lua.LString("MessagePack C implementation for Lua"),
}

func (vm *luaVM) cmsgpackLib() map[string]lua.LGFunction {
	return map[string]lua.LGFunction{
		"pack":   vm.msgpackPack,
		"unpack": func(L *lua.LState) int { return vm.msgpackUnpack(L, "unpack", 0, 0) },
		"unpack_one": func(L *lua.LState) int {
			off := cInt(optInteger(L, 2, "unpack_one", 0))
			L.SetTop(1)
			return vm.msgpackUnpack(L, "unpack_one", 1, off)
		},
		"unpack_limit": func(L *lua.LState) int {
			limit := cInt(checkInteger(L, 2, "unpack_limit"))
			off := cInt(optInteger(L, 3, "unpack_limit", 0))
			L.SetTop(1)
			return vm.msgpackUnpack(L, "unpack_limit", limit, off)
		},
	}
}

// cInt is a lua_Integer stored in a C int.
func cInt(n int64) int { return int(int32(n)) }

// libArgError is luaL_argerror from a library function: "bad argument #n
// to 'name' (msg)", the name "?" when a Go function (pcall) called it, and
// the caller's position when Lua code did.
func libArgError(L *lua.LState, n int, fname, msg string) {
	if !calledFromLua(L) {
		fname = "?"
	}
	libError(L, "bad argument #"+strconv.Itoa(n)+" to '"+fname+"' ("+msg+")")
}

// libError is luaL_error from a library function: msg after the
// position of the calling Lua code, if Lua code called it.
func libError(L *lua.LState, msg string) {
	L.Error(lua.LString(where(L, 1)+msg), 0)
}

func calledFromLua(L *lua.LState) bool {
	dbg, ok := L.GetStack(1)
	if !ok {
		return false
	}
	if _, err := L.GetInfo("S", dbg, lua.LNil); err != nil {
		return false
	}
	return dbg.What != "G"
}

func (vm *luaVM) msgpackPack(L *lua.LState) int {
	n := L.GetTop()
	if n == 0 {
		libArgError(L, 0, "pack", "MessagePack pack needs input.")
	}
	o := &outBuf{vm: vm, L: L}
	for i := 1; i <= n; i++ {
		vm.msgpackEncode(L, o, L.Get(i), 0)
	}
	L.Push(lua.LString(o.String()))
	return 1
}

func (vm *luaVM) msgpackEncode(L *lua.LState, o *outBuf, v lua.LValue, level int) {
	vm.charge(L, 1)
	switch v := v.(type) {
	case lua.LString:
		n := len(v)
		switch {
		case n < 32:
			o.writeByte(0xa0 | byte(n))
		case n <= 0xff:
			o.writeByte(0xd9)
			o.writeByte(byte(n))
		case n <= 0xffff:
			o.writeByte(0xda)
			o.writeString(string(binary.BigEndian.AppendUint16(nil, uint16(n))))
		default:
			o.writeByte(0xdb)
			o.writeString(string(binary.BigEndian.AppendUint32(nil, uint32(n))))
		}
		o.writeString(string(v))
	case lua.LBool:
		if v {
			o.writeByte(0xc3)
		} else {
			o.writeByte(0xc2)
		}
	case lua.LNumber:
		f := float64(v)
		if i, ok := int64Equivalent(f); ok {
			o.writeString(string(msgpackInt(i)))
			return
		}
		if f32 := float32(f); float64(f32) == f {
			o.writeByte(0xca)
			o.writeString(string(binary.BigEndian.AppendUint32(nil, math.Float32bits(f32))))
		} else {
			o.writeByte(0xcb)
			o.writeString(string(binary.BigEndian.AppendUint64(nil, math.Float64bits(f))))
		}
	case *lua.LTable:
		if level == msgpackMaxNesting {
			o.writeByte(0xc0)
			return
		}
		t := vm.unview(v)
		if count, ok := vm.msgpackIsArray(L, t); ok {
			msgpackHeader(o, count, 0x90, 0xdc, 0xdd)
			for j := 1; j <= count; j++ {
				vm.msgpackEncode(L, o, t.RawGetInt(j), level+1)
			}
			return
		}
		count := 0
		for k, _ := t.Next(lua.LNil); k != lua.LNil; k, _ = t.Next(k) {
			vm.charge(L, 1)
			count++
		}
		msgpackHeader(o, count, 0x80, 0xde, 0xdf)
		for k, e := t.Next(lua.LNil); k != lua.LNil; k, e = t.Next(k) {
			vm.msgpackEncode(L, o, k, level+1)
			vm.msgpackEncode(L, o, e, level+1)
		}
	default:
		o.writeByte(0xc0)
	}
}

// unview returns the table a read-only view shows (the libraries scripts
// see), else t.
func (vm *luaVM) unview(t *lua.LTable) *lua.LTable {
	if mt, ok := vm.views[t]; ok {
		if real, ok := mt.RawGetString("__index").(*lua.LTable); ok {
			return real
		}
	}
	return t
}

// msgpackIsArray is table_is_an_array: every key a positive integer (a C
// int) and the largest one equal to their count.
func (vm *luaVM) msgpackIsArray(L *lua.LState, t *lua.LTable) (int, bool) {
	count, max := 0, 0
	for k, _ := t.Next(lua.LNil); k != lua.LNil; k, _ = t.Next(k) {
		vm.charge(L, 1)
		n, ok := k.(lua.LNumber)
		if !ok || n <= 0 || float64(int32(n)) != float64(n) {
			return 0, false
		}
		if int(n) > max {
			max = int(n)
		}
		count++
	}
	return count, max == count
}

func msgpackHeader(o *outBuf, n int, fix, b16, b32 byte) {
	switch {
	case n <= 15:
		o.writeByte(fix | byte(n))
	case n <= 0xffff:
		o.writeByte(b16)
		o.writeString(string(binary.BigEndian.AppendUint16(nil, uint16(n))))
	default:
		o.writeByte(b32)
		o.writeString(string(binary.BigEndian.AppendUint32(nil, uint32(n))))
	}
}

// int64Equivalent is IS_INT64_EQUIVALENT: f is finite and an int64
// converts back to it.
func int64Equivalent(f float64) (int64, bool) {
	if math.IsInf(f, 0) || f != f || f < -9.223372036854775808e18 || f >= 9.223372036854775808e18 {
		return 0, false
	}
	i := int64(f)
	return i, float64(i) == f
}

func msgpackInt(n int64) []byte {
	b := []byte{}
	switch {
	case n >= 0 && n <= 127:
		return append(b, byte(n))
	case n >= 0 && n <= 0xff:
		return append(b, 0xcc, byte(n))
	case n >= 0 && n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(n))
	case n >= 0 && n <= 0xffffffff:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(n))
	case n >= 0:
		return binary.BigEndian.AppendUint64(append(b, 0xcf), uint64(n))
	case n >= -32:
		return append(b, byte(int8(n)))
	case n >= -128:
		return append(b, 0xd0, byte(int8(n)))
	case n >= -32768:
		return binary.BigEndian.AppendUint16(append(b, 0xd1), uint16(int16(n)))
	case n >= -2147483648:
		return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(int32(n)))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(n))
}

// Unpacking.

type msgpackErr int

const (
	msgpackOK msgpackErr = iota
	msgpackEOF
	msgpackBadFmt
)

type msgpackCur struct {
	vm    *luaVM
	L     *lua.LState
	p     string
	err   msgpackErr
	slots int // Lua stack slots mp_unpack would use (LUAI_MAXCSTACK)
}

// msgpackUnpack is mp_unpack_full.
func (vm *luaVM) msgpackUnpack(L *lua.LState, fname string, limit, offset int) int {
	var s string
	switch v := L.Get(1).(type) {
	case lua.LString:
		s = string(v)
	case lua.LNumber:
		s = fmtNum14(float64(v))
	default:
		libArgError(L, 1, fname, "string expected, got "+luaTypeName(L, 1))
	}
	decodeAll := limit == 0 && offset == 0
	switch {
	case offset < 0 || limit < 0:
		libError(L, "Invalid request to unpack with offset of "+strconv.Itoa(offset)+" and limit of "+strconv.Itoa(int(int32(len(s))))+".")
	case offset > len(s):
		libError(L, "Start offset "+strconv.Itoa(offset)+" greater than input length "+strconv.Itoa(int(int32(len(s))))+".")
	}
	if decodeAll {
		limit = math.MaxInt32
	}
	c := &msgpackCur{vm: vm, L: L, p: s[offset:], slots: 1}
	var out []lua.LValue
	for len(c.p) > 0 && len(out) < limit {
		c.checkStack(1, "too many return values at once; use unpack_one or unpack_limit instead.")
		v := c.decode()
		switch c.err {
		case msgpackEOF:
			libError(L, "Missing bytes in input.")
		case msgpackBadFmt:
			libError(L, "Bad data format in input.")
		}
		out = append(out, v)
		c.slots++
	}
	if !decodeAll {
		next := len(s) - len(c.p)
		if len(c.p) == 0 {
			next = -1
		}
		L.Push(lua.LNumber(next))
	}
	for _, v := range out {
		L.Push(v)
	}
	if !decodeAll {
		return len(out) + 1
	}
	return len(out)
}

// checkStack is luaL_checkstack(L, n, msg) at the slots in use.
func (c *msgpackCur) checkStack(n int, msg string) {
	if c.slots+n > luaMaxCStack {
		libError(c.L, "stack overflow ("+msg+")")
	}
}

func (c *msgpackCur) need(n int) bool {
	if len(c.p) < n {
		c.err = msgpackEOF
		return false
	}
	return true
}

func (c *msgpackCur) take(n int) string {
	s := c.p[:n]
	c.p = c.p[n:]
	return s
}

func (c *msgpackCur) be(n int) uint64 {
	var u uint64
	for i := 0; i < n; i++ {
		u = u<<8 | uint64(c.p[1+i])
	}
	return u
}

// decode is mp_decode_to_lua_type: on error it sets c.err.
func (c *msgpackCur) decode() lua.LValue {
	c.vm.charge(c.L, 1)
	if !c.need(1) {
		return lua.LNil
	}
	fixed := func(n int, v lua.LValue) lua.LValue {
		if !c.need(n) {
			return lua.LNil
		}
		c.take(n)
		return v
	}
	str := func(hdr, n int) lua.LValue {
		if !c.need(hdr) {
			return lua.LNil
		}
		l := int(c.be(hdr - 1))
		if !c.need(hdr + l) {
			return lua.LNil
		}
		c.vm.chargeBytes(c.L, l)
		return lua.LString(c.take(hdr + l)[hdr:])
	}
	coll := func(hdr int, hash bool) lua.LValue {
		if !c.need(hdr) {
			return lua.LNil
		}
		l := int(c.be(hdr - 1))
		c.take(hdr)
		return c.collection(l, hash)
	}
	b := c.p[0]
	switch b {
	case 0xcc:
		if !c.need(2) {
			return lua.LNil
		}
		return fixed(2, lua.LNumber(c.p[1]))
	case 0xd0:
		if !c.need(2) {
			return lua.LNil
		}
		return fixed(2, lua.LNumber(int8(c.p[1])))
	case 0xcd:
		if !c.need(3) {
			return lua.LNil
		}
		return fixed(3, lua.LNumber(uint16(c.be(2))))
	case 0xd1:
		if !c.need(3) {
			return lua.LNil
		}
		return fixed(3, lua.LNumber(int16(c.be(2))))
	case 0xce:
		if !c.need(5) {
			return lua.LNil
		}
		return fixed(5, lua.LNumber(uint32(c.be(4))))
	case 0xd2:
		if !c.need(5) {
			return lua.LNil
		}
		return fixed(5, lua.LNumber(int32(c.be(4))))
	case 0xcf:
		if !c.need(9) {
			return lua.LNil
		}
		return fixed(9, lua.LNumber(int64(c.be(8)))) // lua_pushunsigned is lua_pushinteger
	case 0xd3:
		if !c.need(9) {
			return lua.LNil
		}
		return fixed(9, lua.LNumber(int64(c.be(8))))
	case 0xc0:
		return fixed(1, lua.LNil)
	case 0xc3:
		return fixed(1, lua.LTrue)
	case 0xc2:
		return fixed(1, lua.LFalse)
	case 0xca:
		if !c.need(5) {
			return lua.LNil
		}
		return fixed(5, lua.LNumber(math.Float32frombits(uint32(c.be(4)))))
	case 0xcb:
		if !c.need(9) {
			return lua.LNil
		}
		return fixed(9, lua.LNumber(math.Float64frombits(c.be(8))))
	case 0xd9:
		return str(2, 1)
	case 0xda:
		return str(3, 2)
	case 0xdb:
		return str(5, 4)
	case 0xdc:
		return coll(3, false)
	case 0xdd:
		return coll(5, false)
	case 0xde:
		return coll(3, true)
	case 0xdf:
		return coll(5, true)
	}
	switch {
	case b&0x80 == 0:
		return fixed(1, lua.LNumber(b))
	case b&0xe0 == 0xe0:
		return fixed(1, lua.LNumber(int8(b)))
	case b&0xe0 == 0xa0:
		l := int(b & 0x1f)
		if !c.need(1 + l) {
			return lua.LNil
		}
		return lua.LString(c.take(1 + l)[1:])
	case b&0xf0 == 0x90:
		c.take(1)
		return c.collection(int(b&0xf), false)
	case b&0xf0 == 0x80:
		c.take(1)
		return c.collection(int(b&0xf), true)
	}
	c.err = msgpackBadFmt
	return lua.LNil
}

// collection is mp_decode_to_lua_array and mp_decode_to_lua_hash: n
// elements (pairs for a hash) into a new table.
func (c *msgpackCur) collection(n int, hash bool) lua.LValue {
	L := c.L
	t := L.CreateTable(0, 0)
	c.slots++ // the table
	defer func() { c.slots-- }()
	if !hash {
		c.checkStack(1, "in function mp_decode_to_lua_array")
	}
	for i := 1; i <= n; i++ {
		c.vm.charge(L, 1)
		if !hash {
			c.checkStack(1, "too many return values at once; use unpack_one or unpack_limit instead.")
			c.slots++ // the index
			v := c.decode()
			c.slots--
			if c.err != msgpackOK {
				return lua.LNil
			}
			c.vm.chargeGap(L, arrayLen(t), lua.LNumber(i))
			t.RawSetInt(i, v)
			continue
		}
		c.checkStack(1, "too many return values at once; use unpack_one or unpack_limit instead.")
		k := c.decode()
		if c.err != msgpackOK {
			return lua.LNil
		}
		c.slots++
		c.checkStack(1, "too many return values at once; use unpack_one or unpack_limit instead.")
		v := c.decode()
		c.slots--
		if c.err != msgpackOK {
			return lua.LNil
		}
		switch kk := k.(type) {
		case *lua.LNilType:
			L.Error(lua.LString("table index is nil"), 0)
		case lua.LNumber:
			if kk != kk {
				L.Error(lua.LString("table index is NaN"), 0)
			}
		}
		c.vm.chargeGap(L, arrayLen(t), k)
		t.RawSet(k, v)
	}
	return t
}

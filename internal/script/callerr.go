package script

import (
	"reflect"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// Lua 5.1's error for a call of something that is not a function names
// what was called and its type ("attempt to call field 'x' (a nil
// value)", as Redis answers, e.g., redis.register_function called from
// EVAL); gopher-lua says "attempt to call a non-function object". The
// message handler rebuilds Lua's text from the failing frame: its pc and
// the register called (gopher-lua's callFrame, read by reflection as
// arrayLen reads LTable's array), and Lua's getobjname over the
// function's bytecode. If gopher-lua's layout is not the expected one,
// gopher-lua's text stays.

const gopherCallErr = "attempt to call a non-function object"

// The gopher-lua opcodes getobjname looks at (gopher-lua's order).
const (
	opMove       = lua.OP_MOVE
	opGetUpval   = lua.OP_GETUPVAL
	opGetGlobal  = lua.OP_GETGLOBAL
	opGetTable   = lua.OP_GETTABLE
	opGetTableKS = lua.OP_GETTABLEKS
	opSelf       = lua.OP_SELF
	opCall       = lua.OP_CALL
	opTailCall   = lua.OP_TAILCALL
	opBitRK      = 1 << 8
)

// callFrameLayout holds the reflection paths to a Debug's frame (its Pc
// and LocalBase) and to the LState's registers; ok false if gopher-lua's
// structs are not as expected.
var callFrameLayout = func() (l struct {
	frame, pc, localBase, reg, array int
	ok                               bool
}) {
	dt := reflect.TypeOf(lua.Debug{})
	f, ok := dt.FieldByName("frame")
	if !ok || f.Type.Kind() != reflect.Pointer {
		return l
	}
	ft := f.Type.Elem()
	pc, ok1 := ft.FieldByName("Pc")
	lb, ok2 := ft.FieldByName("LocalBase")
	st := reflect.TypeOf(lua.LState{})
	reg, ok3 := st.FieldByName("reg")
	if !ok1 || !ok2 || !ok3 || pc.Type.Kind() != reflect.Int || lb.Type.Kind() != reflect.Int || reg.Type.Kind() != reflect.Pointer {
		return l
	}
	arr, ok4 := reg.Type.Elem().FieldByName("array")
	if !ok4 || arr.Type != reflect.TypeOf([]lua.LValue(nil)) {
		return l
	}
	l.frame, l.pc, l.localBase, l.reg, l.array = f.Index[0], pc.Index[0], lb.Index[0], reg.Index[0], arr.Index[0]
	l.ok = true
	return l
}()

// luaTypeNames maps gopher-lua's value types to Lua's type names.
var luaTypeNames = map[reflect.Type]string{
	reflect.TypeOf(lua.LNil):              "nil",
	reflect.TypeOf(lua.LTrue):             "boolean",
	reflect.TypeOf(lua.LNumber(0)):        "number",
	reflect.TypeOf(lua.LString("")):       "string",
	reflect.TypeOf(&lua.LTable{}):         "table",
	reflect.TypeOf(&lua.LUserData{}):      "userdata",
	reflect.TypeOf(&lua.LState{}):         "thread",
	reflect.TypeOf(lua.LChannel(nil)):     "channel",
	reflect.TypeOf((*lua.LFunction)(nil)): "function",
}

// callError rewrites msg, gopher-lua's error for a call of a
// non-function, as Lua 5.1's, for the call that failed in dbg's frame.
func callError(L *lua.LState, dbg *lua.Debug, msg string) string {
	pos, ok := strings.CutSuffix(msg, gopherCallErr)
	lay := callFrameLayout
	if !ok || !lay.ok || dbg == nil {
		return msg
	}
	fr := reflect.ValueOf(dbg).Elem().Field(lay.frame)
	if fr.IsNil() {
		return msg
	}
	pc := int(fr.Elem().Field(lay.pc).Int())
	base := int(fr.Elem().Field(lay.localBase).Int())
	fv, err := L.GetInfo("f", dbg, lua.LNil)
	fn, isFn := fv.(*lua.LFunction)
	if err != nil || !isFn || fn.Proto == nil || pc < 1 || pc > len(fn.Proto.Code) {
		return msg
	}
	p := fn.Proto
	inst := p.Code[pc-1]
	if op := int(inst >> 26); op != opCall && op != opTailCall {
		return msg
	}
	a := int(inst>>18) & 0xff
	regs := reflect.ValueOf(L).Elem().Field(lay.reg)
	if regs.IsNil() {
		return msg
	}
	arr := regs.Elem().Field(lay.array)
	if base+a >= arr.Len() {
		return msg
	}
	typ := "nil"
	if v := arr.Index(base + a); !v.IsNil() {
		if n, ok := luaTypeNames[v.Elem().Type()]; ok {
			typ = n
		}
	}
	if kind, name := objName(p, pc-1, a); kind != "" {
		return pos + "attempt to call " + kind + " '" + name + "' (a " + typ + " value)"
	}
	return pos + "attempt to call a " + typ + " value"
}

// objName is Lua 5.1's getobjname: what register reg holds at instruction
// pc of p, as "local", "global", "field", "upvalue" or "method" and a
// name; "" if it cannot say.
func objName(p *lua.FunctionProto, pc, reg int) (kind, name string) {
	if n := localName(p, reg+1, pc); n != "" {
		return "local", n
	}
	// The last instruction before pc that sets reg (Lua's symbexec, without
	// its jump analysis).
	for i := pc - 1; i >= 0; i-- {
		inst := p.Code[i]
		op, a := int(inst>>26), int(inst>>18)&0xff
		b, c, bx := int(inst&0x1ff), int(inst>>9)&0x1ff, int(inst&0x3ffff)
		if a != reg {
			continue
		}
		switch op {
		case opGetGlobal:
			if s, ok := constString(p, bx); ok {
				return "global", s
			}
		case opMove:
			if b < a {
				return objName(p, i, b)
			}
		case opGetTable, opGetTableKS:
			return "field", keyName(p, c)
		case opGetUpval:
			if b < len(p.DbgUpvalues) {
				return "upvalue", p.DbgUpvalues[b]
			}
		case opSelf:
			return "method", keyName(p, c)
		}
		return "", ""
	}
	return "", ""
}

// keyName is Lua 5.1's kname: the constant string RK(c), or "?".
func keyName(p *lua.FunctionProto, c int) string {
	if c&opBitRK != 0 {
		if s, ok := constString(p, c&^opBitRK); ok {
			return s
		}
	}
	return "?"
}

func constString(p *lua.FunctionProto, i int) (string, bool) {
	if i < 0 || i >= len(p.Constants) {
		return "", false
	}
	s, ok := p.Constants[i].(lua.LString)
	return string(s), ok
}

// localName is Lua 5.1's luaF_getlocalname: the n-th local variable
// active at pc.
func localName(p *lua.FunctionProto, n, pc int) string {
	for _, l := range p.DbgLocals {
		if l.StartPc > pc {
			break
		}
		if pc < l.EndPc {
			n--
			if n == 0 {
				return l.Name
			}
		}
	}
	return ""
}

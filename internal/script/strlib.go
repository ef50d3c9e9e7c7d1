package script

import (
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// string: Lua 5.1.5's string library (Redis's), with sizes checked and
// charged and pattern matching on the budget.

func (vm *luaVM) stringLib() map[string]lua.LGFunction {
	return map[string]lua.LGFunction{
		"byte": strByte, "char": vm.strChar, "dump": strDump, "find": vm.strFind,
		"format": vm.strFormat, "gmatch": vm.strGmatch, "gfind": vm.strGmatch, "gsub": vm.strGsub,
		"len": strLen, "lower": vm.strLower, "match": vm.strMatch, "rep": vm.strRep,
		"reverse": vm.strReverse, "sub": strSub, "upper": vm.strUpper,
	}
}

func posrelat(pos, l int64) int64 {
	if pos < 0 {
		pos += l + 1
	}
	if pos < 0 {
		return 0
	}
	return pos
}

func strLen(L *lua.LState) int {
	L.Push(lua.LNumber(len(checkString(L, 1, "len"))))
	return 1
}

func strSub(L *lua.LState) int {
	s := checkString(L, 1, "sub")
	l := int64(len(s))
	start := posrelat(checkInteger(L, 2, "sub"), l)
	end := posrelat(optInteger(L, 3, "sub", -1), l)
	if start < 1 {
		start = 1
	}
	if end > l {
		end = l
	}
	if start <= end {
		L.Push(lua.LString(s[start-1 : end]))
	} else {
		L.Push(lua.LString(""))
	}
	return 1
}

func strByte(L *lua.LState) int {
	s := checkString(L, 1, "byte")
	l := int64(len(s))
	posi := posrelat(optInteger(L, 2, "byte", 1), l)
	pose := posrelat(optInteger(L, 3, "byte", posi), l)
	if posi <= 0 {
		posi = 1
	}
	if pose > l {
		pose = l
	}
	if posi > pose {
		return 0
	}
	n := pose - posi + 1
	if n > maxResults {
		L.RaiseError("string slice too long")
	}
	for i := posi; i <= pose; i++ {
		L.Push(lua.LNumber(s[i-1]))
	}
	return int(n)
}

func (vm *luaVM) strChar(L *lua.LState) int {
	n := L.GetTop()
	b := make([]byte, n)
	for i := 1; i <= n; i++ {
		c := checkInt(L, i, "char")
		if c < 0 || c > 255 {
			argError(L, i, "char", "invalid value")
		}
		b[i-1] = byte(c)
	}
	L.Push(lua.LString(b))
	return 1
}

func strDump(L *lua.LState) int {
	L.RaiseError("unable to dump given function")
	return 0
}

func (vm *luaVM) strRep(L *lua.LState) int {
	s := checkString(L, 1, "rep")
	n := checkInt(L, 2, "rep")
	if n <= 0 || len(s) == 0 {
		L.Push(lua.LString(""))
		return 1
	}
	if int64(len(s))*int64(n) > maxString {
		L.RaiseError("resulting string too large")
	}
	vm.chargeBytes(L, len(s)*n)
	L.Push(lua.LString(strings.Repeat(s, n)))
	return 1
}

func (vm *luaVM) strReverse(L *lua.LState) int {
	s := checkString(L, 1, "reverse")
	vm.chargeBytes(L, len(s))
	b := make([]byte, len(s))
	for i := range b {
		b[i] = s[len(s)-1-i]
	}
	L.Push(lua.LString(b))
	return 1
}

// strLower and strUpper are C's tolower/toupper in the C locale: ASCII only,
// byte by byte.
func (vm *luaVM) strLower(L *lua.LState) int { return vm.strMap(L, "lower", 'A', 'Z', 'a'-'A') }
func (vm *luaVM) strUpper(L *lua.LState) int { return vm.strMap(L, "upper", 'a', 'z', 'A'-'a') }

func (vm *luaVM) strMap(L *lua.LState, fname string, lo, hi byte, delta int) int {
	s := checkString(L, 1, fname)
	vm.chargeBytes(L, len(s))
	b := []byte(s)
	for i, c := range b {
		if c >= lo && c <= hi {
			b[i] = byte(int(c) + delta)
		}
	}
	L.Push(lua.LString(b))
	return 1
}

// strFind, strMatch, strGmatch and strGsub are Lua 5.1's str_find_aux,
// gmatch and str_gsub on luaMatcher.

func (vm *luaVM) strFind(L *lua.LState) int  { return vm.strFindAux(L, true) }
func (vm *luaVM) strMatch(L *lua.LState) int { return vm.strFindAux(L, false) }

func (vm *luaVM) strFindAux(L *lua.LState, find bool) int {
	fname := "match"
	if find {
		fname = "find"
	}
	s := checkString(L, 1, fname)
	p := checkString(L, 2, fname)
	l := int64(len(s))
	init := posrelat(optInteger(L, 3, fname, 1), l) - 1
	if init < 0 {
		init = 0
	} else if init > l {
		init = l
	}
	if find && (L.ToBool(4) || !strings.ContainsAny(cString(p), "^$*+?.([%-")) {
		// Plain search.
		vm.charge(L, (l-init)/256)
		if i := strings.Index(s[init:], p); i >= 0 {
			L.Push(lua.LNumber(init + int64(i) + 1))
			L.Push(lua.LNumber(init + int64(i) + int64(len(p))))
			return 2
		}
		L.Push(lua.LNil)
		return 1
	}
	m := &luaMatcher{vm: vm, L: L, src: s, pat: p}
	pi := 0
	anchor := m.p(0) == '^'
	if anchor {
		pi = 1
	}
	for s1 := int(init); ; s1++ {
		m.level = 0
		if e := m.match(s1, pi, 0); e >= 0 {
			if find {
				L.Push(lua.LNumber(s1 + 1))
				L.Push(lua.LNumber(e))
				return m.pushCaptures(-1, 0) + 2
			}
			return m.pushCaptures(s1, e)
		}
		if s1 >= len(s) || anchor {
			break
		}
	}
	L.Push(lua.LNil)
	return 1
}

func (vm *luaVM) strGmatch(L *lua.LState) int {
	s := checkString(L, 1, "gmatch")
	p := checkString(L, 2, "gmatch")
	pos := 0
	L.Push(L.NewFunction(func(L *lua.LState) int {
		m := &luaMatcher{vm: vm, L: L, src: s, pat: p}
		for src := pos; src <= len(s); src++ {
			m.level = 0
			if e := m.match(src, 0, 0); e >= 0 {
				pos = e
				if e == src {
					pos++
				}
				return m.pushCaptures(src, e)
			}
		}
		pos = len(s) + 1
		return 0
	}))
	return 1
}

func (vm *luaVM) strGsub(L *lua.LState) int {
	src := checkString(L, 1, "gsub")
	p := checkString(L, 2, "gsub")
	repl := L.Get(3)
	switch repl.(type) {
	case lua.LNumber, lua.LString, *lua.LFunction, *lua.LTable:
	default:
		argError(L, 3, "gsub", "string/function/table expected")
	}
	maxS := optInteger(L, 4, "gsub", int64(len(src))+1)
	m := &luaMatcher{vm: vm, L: L, src: src, pat: p}
	pi := 0
	anchor := m.p(0) == '^'
	if anchor {
		pi = 1
	}
	// The result is built from pieces (most of them slices of src or the
	// replacement itself) and joined once.
	var parts []string
	size := 0
	add := func(s string) {
		if size+len(s) > maxString {
			L.RaiseError("resulting string too large")
		}
		if s == "" {
			return
		}
		vm.chargeBytes(L, len(s)+bytesPerUnit) // the piece and its header
		parts = append(parts, s)
		size += len(s)
	}
	n := int64(0)
	s, pend := 0, 0 // src[pend:s] is copied as is
	for n < maxS {
		m.level = 0
		e := m.match(s, pi, 0)
		if e >= 0 {
			n++
			add(src[pend:s])
			add(vm.gsubValue(m, repl, s, e))
			pend = s
		}
		if e >= 0 && e > s {
			s, pend = e, e
		} else if s < len(src) {
			s++
		} else {
			break
		}
		if anchor {
			break
		}
	}
	add(src[pend:])
	L.Push(lua.LString(strings.Join(parts, "")))
	L.Push(lua.LNumber(n))
	return 2
}

// gsubValue is the replacement of one match (Lua 5.1's add_value).
func (vm *luaVM) gsubValue(m *luaMatcher, repl lua.LValue, s, e int) string {
	L := m.L
	switch r := repl.(type) {
	case lua.LNumber, lua.LString:
		news := luaToStringPlain(r)
		if strings.IndexByte(news, '%') < 0 {
			return news
		}
		var b []byte
		for i := 0; i < len(news); i++ {
			if j := strings.IndexByte(news[i:], '%'); j != 0 {
				if j < 0 {
					j = len(news) - i
				}
				b = append(b, news[i:i+j]...)
				i += j - 1
				continue
			}
			i++
			var d byte
			if i < len(news) {
				d = news[i]
			}
			switch {
			case !cIsDigit(d):
				b = append(b, d)
			case d == '0':
				b = append(b, m.src[s:e]...)
			default:
				b = append(b, luaToStringPlain(m.capture(int(d-'1'), s, e))...)
			}
			if len(b) > maxString {
				L.RaiseError("resulting string too large")
			}
		}
		return string(b)
	case *lua.LFunction:
		top := L.GetTop()
		L.Push(r)
		n := m.pushCaptures(s, e)
		L.Call(n, 1)
		v := L.Get(-1)
		L.SetTop(top)
		return gsubResult(L, v, m.src[s:e])
	case *lua.LTable:
		v := L.GetTable(r, m.capture(0, s, e))
		return gsubResult(L, v, m.src[s:e])
	}
	return ""
}

func gsubResult(L *lua.LState, v lua.LValue, orig string) string {
	if v == lua.LNil || v == lua.LFalse {
		return orig
	}
	if !isStringOrNumber(v) {
		L.RaiseError("invalid replacement value (a %s)", v.Type().String())
	}
	return luaToStringPlain(v)
}

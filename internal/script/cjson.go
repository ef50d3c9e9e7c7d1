package script

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// cjson: lua-cjson 2.1 as shipped with Redis (encode, decode, null and the
// configuration functions, whose settings last for one run).

type cjsonConfig struct {
	encodeMaxDepth, decodeMaxDepth int
	sparseConvert                  bool
	sparseRatio, sparseSafe        int
	numberPrecision                int
	encodeInvalid, decodeInvalid   bool
}

var defaultCjson = cjsonConfig{encodeMaxDepth: 1000, decodeMaxDepth: 1000, sparseRatio: 2, sparseSafe: 10,
	numberPrecision: 14, decodeInvalid: true}

func (vm *luaVM) cjsonLib() map[string]lua.LGFunction {
	cfg := func(L *lua.LState) *cjsonConfig { return &vm.run.cjson }
	intOpt := func(name string, get func(c *cjsonConfig) *int, lo, hi int) lua.LGFunction {
		return func(L *lua.LState) int {
			c := cfg(L)
			if L.GetTop() >= 1 && L.Get(1) != lua.LNil {
				v := checkInt(L, 1, name)
				if v < lo || v > hi {
					argError(L, 1, name, fmt.Sprintf("expected integer between %d and %d", lo, hi))
				}
				*get(c) = v
			}
			L.Push(lua.LNumber(*get(c)))
			return 1
		}
	}
	boolOpt := func(name string, get func(c *cjsonConfig) *bool) lua.LGFunction {
		return func(L *lua.LState) int {
			c := cfg(L)
			if L.GetTop() >= 1 && L.Get(1) != lua.LNil {
				switch v := L.Get(1).(type) {
				case lua.LBool:
					*get(c) = bool(v)
				case lua.LString:
					if v != "on" && v != "off" {
						argError(L, 1, name, "invalid option '"+string(v)+"'")
					}
					*get(c) = v == "on"
				default:
					*get(c) = lua.LVAsBool(v)
				}
			}
			L.Push(lua.LBool(*get(c)))
			return 1
		}
	}
	return map[string]lua.LGFunction{
		"encode":                  vm.cjsonEncode,
		"decode":                  vm.cjsonDecode,
		"encode_max_depth":        intOpt("encode_max_depth", func(c *cjsonConfig) *int { return &c.encodeMaxDepth }, 1, math.MaxInt32),
		"decode_max_depth":        intOpt("decode_max_depth", func(c *cjsonConfig) *int { return &c.decodeMaxDepth }, 1, math.MaxInt32),
		"encode_number_precision": intOpt("encode_number_precision", func(c *cjsonConfig) *int { return &c.numberPrecision }, 1, 14),
		"encode_keep_buffer":      func(L *lua.LState) int { L.Push(lua.LTrue); return 1 },
		"encode_invalid_numbers":  boolOpt("encode_invalid_numbers", func(c *cjsonConfig) *bool { return &c.encodeInvalid }),
		"decode_invalid_numbers":  boolOpt("decode_invalid_numbers", func(c *cjsonConfig) *bool { return &c.decodeInvalid }),
		"encode_sparse_array": func(L *lua.LState) int {
			c := cfg(L)
			if L.GetTop() >= 1 && L.Get(1) != lua.LNil {
				c.sparseConvert = lua.LVAsBool(L.Get(1))
			}
			if L.GetTop() >= 2 && L.Get(2) != lua.LNil {
				c.sparseRatio = checkInt(L, 2, "encode_sparse_array")
			}
			if L.GetTop() >= 3 && L.Get(3) != lua.LNil {
				c.sparseSafe = checkInt(L, 3, "encode_sparse_array")
			}
			L.Push(lua.LBool(c.sparseConvert))
			L.Push(lua.LNumber(c.sparseRatio))
			L.Push(lua.LNumber(c.sparseSafe))
			return 3
		},
	}
}

var cjsonEscape = func() (t [256]string) {
	for c := 0; c < 32; c++ {
		t[c] = fmt.Sprintf(`\u%04x`, c)
	}
	t['\b'], t['\t'], t['\n'], t['\f'], t['\r'] = `\b`, `\t`, `\n`, `\f`, `\r`
	t['"'], t['\\'], t['/'], t[127] = `\"`, `\\`, `\/`, `\u007f`
	return
}()

func (vm *luaVM) cjsonEncode(L *lua.LState) int {
	if L.GetTop() != 1 {
		argError(L, 1, "encode", "expected 1 argument")
	}
	out := &outBuf{vm: vm, L: L}
	vm.jsonValue(L, out, L.Get(1), 0)
	L.Push(lua.LString(out.String()))
	return 1
}

func (vm *luaVM) jsonFail(L *lua.LState, v lua.LValue, reason string) {
	L.RaiseError("Cannot serialise %s: %s", v.Type().String(), reason)
}

func (vm *luaVM) jsonValue(L *lua.LState, b *outBuf, v lua.LValue, depth int) {
	vm.step(L)
	cfg := &vm.run.cjson
	switch x := v.(type) {
	case lua.LString:
		b.writeByte('"')
		run := 0 // x[run:i] needs no escape
		for i := 0; i < len(x); i++ {
			if e := cjsonEscape[x[i]]; e != "" {
				b.writeString(string(x[run:i]))
				b.writeString(e)
				run = i + 1
			}
		}
		b.writeString(string(x[run:]))
		b.writeByte('"')
	case lua.LNumber:
		f := float64(x)
		if math.IsInf(f, 0) || math.IsNaN(f) {
			if !cfg.encodeInvalid {
				vm.jsonFail(L, v, "must not be NaN or Inf")
			}
			b.writeString(cFormatG(f, cfg.numberPrecision))
			return
		}
		b.writeString(cFormatG(f, cfg.numberPrecision))
	case lua.LBool:
		if x {
			b.writeString("true")
		} else {
			b.writeString("false")
		}
	case *lua.LNilType:
		b.writeString("null")
	case *lua.LUserData:
		if x != vm.null {
			vm.jsonFail(L, v, "type not supported")
		}
		b.writeString("null")
	case *lua.LTable:
		depth++
		if depth > cfg.encodeMaxDepth {
			L.RaiseError("Cannot serialise, excessive nesting (%d)", depth)
		}
		n := vm.jsonArrayLength(L, x)
		if n > 0 {
			b.writeByte('[')
			for i := 1; i <= n; i++ {
				if i > 1 {
					b.writeByte(',')
				}
				vm.jsonValue(L, b, x.RawGetInt(i), depth)
			}
			b.writeByte(']')
			return
		}
		b.writeByte('{')
		first := true
		for k, e := x.Next(lua.LNil); k != lua.LNil; k, e = x.Next(k) {
			if !first {
				b.writeByte(',')
			}
			first = false
			switch kk := k.(type) {
			case lua.LString:
				vm.jsonValue(L, b, kk, depth)
			case lua.LNumber:
				b.writeByte('"')
				b.writeString(cFormatG(float64(kk), cfg.numberPrecision))
				b.writeByte('"')
			default:
				vm.jsonFail(L, k, "table key must be a number or string")
			}
			b.writeByte(':')
			vm.jsonValue(L, b, e, depth)
		}
		b.writeByte('}')
	default:
		vm.jsonFail(L, v, "type not supported")
	}
}

// jsonArrayLength is lua-cjson's lua_array_length: the array's length if
// every key is a positive integer (0 for an empty table), -1 if not.
func (vm *luaVM) jsonArrayLength(L *lua.LState, t *lua.LTable) int {
	max, items := 0, 0
	for k, _ := t.Next(lua.LNil); k != lua.LNil; k, _ = t.Next(k) {
		vm.step(L)
		n, ok := k.(lua.LNumber)
		if !ok || n < 1 || float64(n) != math.Floor(float64(n)) {
			return -1
		}
		if int(n) > max {
			max = int(n)
		}
		items++
	}
	cfg := &vm.run.cjson
	if cfg.sparseRatio > 0 && max > items*cfg.sparseRatio && max > cfg.sparseSafe {
		if !cfg.sparseConvert {
			vm.jsonFail(L, t, "excessively sparse array")
		}
		return -1
	}
	return max
}

// step charges one unit per 16 calls.
func (vm *luaVM) step(L *lua.LState) {
	vm.run.steps++
	if vm.run.steps&15 == 0 {
		vm.charge(L, 1)
	}
}

type jsonDecoder struct {
	vm    *luaVM
	L     *lua.LState
	s     string
	i     int
	depth int
}

func (vm *luaVM) cjsonDecode(L *lua.LState) int {
	if L.GetTop() != 1 {
		argError(L, 1, "decode", "expected 1 argument")
	}
	s := checkString(L, 1, "decode")
	if len(s) >= 2 && (s[0] == 0 || s[1] == 0) {
		L.RaiseError("JSON parser does not support UTF-16 or UTF-32")
	}
	d := &jsonDecoder{vm: vm, L: L, s: s}
	v := d.value()
	d.space()
	if d.i < len(d.s) {
		d.fail("the end")
	}
	L.Push(v)
	return 1
}

func (d *jsonDecoder) space() {
	for d.i < len(d.s) && (d.s[d.i] == ' ' || d.s[d.i] == '\t' || d.s[d.i] == '\n' || d.s[d.i] == '\r') {
		d.i++
	}
}

// fail raises lua-cjson's "Expected X but found Y at character N".
func (d *jsonDecoder) fail(want string) {
	found := "invalid token"
	if d.i >= len(d.s) {
		found = "T_END"
	} else {
		switch d.s[d.i] {
		case '{':
			found = "T_OBJ_BEGIN"
		case '}':
			found = "T_OBJ_END"
		case '[':
			found = "T_ARR_BEGIN"
		case ']':
			found = "T_ARR_END"
		case ',':
			found = "T_COMMA"
		case ':':
			found = "T_COLON"
		case '"':
			found = "T_STRING"
		}
	}
	d.L.RaiseError("Expected %s but found %s at character %d", want, found, d.i+1)
}

func (d *jsonDecoder) value() lua.LValue {
	d.vm.step(d.L)
	d.space()
	if d.i >= len(d.s) {
		d.fail("value")
	}
	switch c := d.s[d.i]; {
	case c == '{' || c == '[':
		d.depth++
		if d.depth > d.vm.run.cjson.decodeMaxDepth {
			d.L.RaiseError("Found too many nested data structures (%d) at character %d", d.depth, d.i+1)
		}
		d.i++
		var v lua.LValue
		if c == '{' {
			v = d.object()
		} else {
			v = d.array()
		}
		d.depth--
		return v
	case c == '"':
		return d.str("value")
	case c == '-' || cIsDigit(c):
		f, n := strtod(d.s[d.i:])
		if n == 0 {
			d.fail("value")
		}
		d.i += n
		return lua.LNumber(f)
	case strings.HasPrefix(d.s[d.i:], "true"):
		d.i += 4
		return lua.LTrue
	case strings.HasPrefix(d.s[d.i:], "false"):
		d.i += 5
		return lua.LFalse
	case strings.HasPrefix(d.s[d.i:], "null"):
		d.i += 4
		return d.vm.null
	}
	d.fail("value")
	return lua.LNil
}

func (d *jsonDecoder) object() lua.LValue {
	t := d.L.CreateTable(0, 0)
	d.space()
	if d.skip('}') {
		return t
	}
	for {
		d.space()
		if d.i >= len(d.s) || d.s[d.i] != '"' {
			d.fail("object key string")
		}
		k := d.str("object key string")
		d.space()
		if !d.skip(':') {
			d.fail("colon")
		}
		v := d.value()
		d.vm.chargeBytes(d.L, 32)
		t.RawSet(k, v)
		if !d.more('}', "comma or object end") {
			return t
		}
	}
}

func (d *jsonDecoder) array() lua.LValue {
	t := d.L.CreateTable(0, 0)
	d.space()
	if d.skip(']') {
		return t
	}
	for n := 1; ; n++ {
		v := d.value()
		d.vm.chargeBytes(d.L, 16)
		t.RawSetInt(n, v)
		if !d.more(']', "comma or array end") {
			return t
		}
	}
}

// skip consumes the next byte if it is c.
func (d *jsonDecoder) skip(c byte) bool {
	if d.i < len(d.s) && d.s[d.i] == c {
		d.i++
		return true
	}
	return false
}

// more reads what follows an element of an object or array: false for the
// closing byte end, true for a comma (another element follows); anything
// else fails, expecting want.
func (d *jsonDecoder) more(end byte, want string) bool {
	d.space()
	if d.skip(end) {
		return false
	}
	if !d.skip(',') {
		d.fail(want)
	}
	return true
}

// str decodes a string token; want is what the parser expects there (for
// lua-cjson's error message).
func (d *jsonDecoder) str(want string) lua.LString {
	d.i++ // the quote
	var b []byte
	fail := func(at int, what string) {
		d.L.RaiseError("Expected %s but found %s at character %d", want, what, at+1)
	}
	for {
		if d.i >= len(d.s) || d.s[d.i] == 0 {
			fail(d.i, "unexpected end of string")
		}
		c := d.s[d.i]
		switch {
		case c == '"':
			d.i++
			d.vm.chargeBytes(d.L, len(b))
			return lua.LString(b)
		case c == '\\':
			bs := d.i
			var e byte
			if d.i+1 < len(d.s) {
				e = d.s[d.i+1]
			}
			d.i += 2
			switch e {
			case '"', '\\', '/':
				b = append(b, e)
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r, ok := d.hex4()
				if ok && r >= 0xD800 && r <= 0xDBFF {
					ok = false
					if strings.HasPrefix(d.s[d.i:], `\u`) {
						d.i += 2
						if lo, ok2 := d.hex4(); ok2 && lo >= 0xDC00 && lo <= 0xDFFF {
							r, ok = 0x10000+(r-0xD800)<<10+(lo-0xDC00), true
						}
					}
				} else if r >= 0xDC00 && r <= 0xDFFF {
					ok = false
				}
				if !ok {
					fail(bs, "invalid unicode escape code")
				}
				b = append(b, string(rune(r))...)
			default:
				fail(bs, "invalid escape code")
			}
		default:
			b = append(b, c)
			d.i++
		}
	}
}

func (d *jsonDecoder) hex4() (int, bool) {
	if d.i+4 > len(d.s) {
		return 0, false
	}
	n, err := strconv.ParseUint(d.s[d.i:d.i+4], 16, 32)
	d.i += 4
	return int(n), err == nil
}

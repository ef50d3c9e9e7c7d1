package script

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// string.format and %q: C's printf conversions as glibc formats them.

// strFormat is Lua 5.1's string.format: C's printf conversions, widths and
// precisions of at most two digits.
func (vm *luaVM) strFormat(L *lua.LState) int {
	top := L.GetTop()
	arg := 1
	fs := checkString(L, 1, "format")
	at := func(i int) byte {
		if i < len(fs) {
			return fs[i]
		}
		return 0
	}
	out := &outBuf{vm: vm, L: L}
	add := out.writeString
	for i := 0; i < len(fs); {
		if fs[i] != '%' {
			out.writeByte(fs[i])
			i++
			continue
		}
		i++
		if at(i) == '%' {
			out.writeByte('%')
			i++
			continue
		}
		arg++
		if arg > top {
			argError(L, arg, "format", "no value")
		}
		start := i
		for at(i) != 0 && strings.IndexByte("-+ #0", at(i)) >= 0 {
			i++
		}
		if i-start >= 6 {
			L.RaiseError("invalid format (repeated flags)")
		}
		if cIsDigit(at(i)) {
			i++
		}
		if cIsDigit(at(i)) {
			i++
		}
		if at(i) == '.' {
			i++
			if cIsDigit(at(i)) {
				i++
			}
			if cIsDigit(at(i)) {
				i++
			}
		}
		if cIsDigit(at(i)) {
			L.RaiseError("invalid format (width or precision too long)")
		}
		spec := parseCSpec(fs[start:i])
		conv := at(i)
		i++
		switch conv {
		case 'c':
			c := byte(int32(luaToInt64(checkNumber(L, arg, "format"))))
			add(cString(spec.pad(string([]byte{c}), false)))
		case 'd', 'i':
			add(spec.formatInt(luaToInt64(checkNumber(L, arg, "format"))))
		case 'o', 'u', 'x', 'X':
			add(spec.formatUint(luaToUint64(checkNumber(L, arg, "format")), conv))
		case 'e', 'E', 'f', 'g', 'G':
			add(spec.formatFloat(checkNumber(L, arg, "format"), conv))
		case 'q':
			add(luaQuote(checkString(L, arg, "format")))
		case 's':
			s := checkString(L, arg, "format")
			if spec.prec < 0 && len(s) >= 100 {
				add(s)
			} else {
				add(spec.formatString(cString(s)))
			}
		default:
			L.RaiseError("invalid option '%%%c' to 'format'", conv)
		}
	}
	L.Push(lua.LString(out.String()))
	return 1
}

// cString is s as C sees it: up to the first NUL.
func cString(s string) string {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return s[:i]
	}
	return s
}

// cSpec is a printf conversion's flags, width and precision (-1: none).
type cSpec struct {
	flags       string
	width, prec int
}

func parseCSpec(s string) cSpec {
	sp := cSpec{width: -1, prec: -1}
	i := 0
	for i < len(s) && strings.IndexByte("-+ #0", s[i]) >= 0 {
		i++
	}
	sp.flags = s[:i]
	if j := strings.IndexByte(s, '.'); j >= 0 {
		sp.prec, _ = strconv.Atoi(s[j+1:]) // "%.f": precision 0
		s = s[:j]
	}
	if i < len(s) {
		sp.width, _ = strconv.Atoi(s[i:])
	}
	return sp
}

func (sp cSpec) has(f byte) bool { return strings.IndexByte(sp.flags, f) >= 0 }

// verb rebuilds the spec for Go's fmt, without the flags in drop.
func (sp cSpec) verb(verb byte, drop string, defPrec int) string {
	b := []byte{'%'}
	for i := 0; i < len(sp.flags); i++ {
		if strings.IndexByte(drop, sp.flags[i]) < 0 {
			b = append(b, sp.flags[i])
		}
	}
	if sp.width >= 0 {
		b = strconv.AppendInt(b, int64(sp.width), 10)
	}
	if sp.prec >= 0 {
		b = append(b, '.')
		b = strconv.AppendInt(b, int64(sp.prec), 10)
	} else if defPrec >= 0 {
		b = append(b, '.')
		b = strconv.AppendInt(b, int64(defPrec), 10)
	}
	return string(append(b, verb))
}

// pad pads s to the width with spaces (zeros only where C would).
func (sp cSpec) pad(s string, zeros bool) string {
	if len(s) >= sp.width {
		return s
	}
	fill := strings.Repeat(" ", sp.width-len(s))
	if sp.has('-') {
		return s + fill
	}
	if zeros && sp.has('0') {
		return strings.Repeat("0", sp.width-len(s)) + s
	}
	return fill + s
}

func (sp cSpec) formatInt(n int64) string { return fmt.Sprintf(sp.verb('d', "#", -1), n) }

func (sp cSpec) formatUint(n uint64, conv byte) string {
	drop := "+ "
	if n == 0 && (conv == 'x' || conv == 'X') {
		drop += "#"
	}
	if conv == 'u' {
		conv = 'd'
		drop += "#"
	}
	return fmt.Sprintf(sp.verb(conv, drop, -1), n)
}

func (sp cSpec) formatFloat(f float64, conv byte) string {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		s := "inf"
		if math.IsNaN(f) {
			s = "nan"
		}
		if conv == 'E' || conv == 'G' {
			s = strings.ToUpper(s)
		}
		switch {
		case math.Signbit(f):
			s = "-" + s
		case sp.has('+'):
			s = "+" + s
		case sp.has(' '):
			s = " " + s
		}
		return sp.pad(s, false)
	}
	return fmt.Sprintf(sp.verb(conv, "", 6), f)
}

func (sp cSpec) formatString(s string) string {
	if sp.prec >= 0 && len(s) > sp.prec {
		s = s[:sp.prec]
	}
	return sp.pad(s, false)
}

// luaQuote is string.format's %q.
func luaQuote(s string) string {
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\', '\n':
			b = append(b, '\\', c)
		case '\r':
			b = append(b, `\r`...)
		case 0:
			b = append(b, `\000`...)
		default:
			b = append(b, c)
		}
	}
	return string(append(b, '"'))
}

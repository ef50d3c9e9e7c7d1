package script

import (
	"math"
	"strconv"
	"strings"
)

// Numbers as C and Lua 5.1 convert, print and parse them: casts, %g,
// strtod, strtoul.

// luaToInt64 converts like a C cast on x86-64 (cvttsd2si): NaN and values
// out of range become math.MinInt64, on every architecture.
func luaToInt64(f float64) int64 {
	if f != f || f >= 9223372036854775808.0 || f < -9223372036854775808.0 {
		return math.MinInt64
	}
	return int64(f)
}

// luaToUint64 is C's (unsigned long) cast as gcc compiles it on x86-64.
func luaToUint64(f float64) uint64 {
	if f >= 9223372036854775808.0 {
		if f >= 18446744073709551616.0 {
			return 0
		}
		return uint64(f)
	}
	return uint64(luaToInt64(f))
}

// cFormatG is C's "%.<prec>g" (glibc's inf and nan spellings).
func cFormatG(f float64, prec int) string {
	switch {
	case math.IsNaN(f):
		if math.Signbit(f) {
			return "-nan"
		}
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return strconv.FormatFloat(f, 'g', prec, 64)
}

// fmtNum14 is how Lua 5.1 turns a number into a string ("%.14g").
func fmtNum14(f float64) string { return cFormatG(f, 14) }

func cIsSpace(c byte) bool { return c == ' ' || (c >= '\t' && c <= '\r') }

func cIsDigit(c byte) bool { return c >= '0' && c <= '9' }

// str2number is Lua 5.1's luaO_str2d on glibc's strtod: leading and
// trailing spaces, decimal, hexadecimal, inf and nan.
func str2number(s string) (float64, bool) {
	i := 0
	for i < len(s) && cIsSpace(s[i]) {
		i++
	}
	f, n := strtod(s[i:])
	if n == 0 {
		return 0, false
	}
	i += n
	for i < len(s) && cIsSpace(s[i]) {
		i++
	}
	return f, i == len(s)
}

// strtod parses the longest prefix of s that glibc's strtod accepts and
// returns its value and length (0: none).
func strtod(s string) (float64, int) {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	neg := i > 0 && s[0] == '-'
	rest := s[i:]
	if len(rest) > 9 {
		rest = rest[:9]
	}
	rest = strings.ToLower(rest)
	switch {
	case strings.HasPrefix(rest, "inf"):
		n := 3
		if strings.HasPrefix(rest, "infinity") {
			n = 8
		}
		if neg {
			return math.Inf(-1), i + n
		}
		return math.Inf(1), i + n
	case strings.HasPrefix(rest, "nan"):
		n := 3
		if len(rest) > 3 && rest[3] == '(' {
			if j := strings.IndexByte(rest[4:], ')'); j >= 0 {
				ok := true
				for _, c := range rest[4 : 4+j] {
					if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
						ok = false
					}
				}
				if ok {
					n = 5 + j
				}
			}
		}
		nan := math.NaN()
		if neg {
			nan = math.Copysign(nan, -1)
		}
		return nan, i + n
	case len(rest) >= 2 && rest[0] == '0' && rest[1] == 'x':
		j, digits := scanMantissa(s, i+2, isHex)
		if digits == 0 {
			return 0, i + 1 // just the "0"
		}
		end := scanExponent(s, j, 'p')
		lit := s[:end]
		if end == j {
			lit += "p0"
		}
		f, _ := strconv.ParseFloat(lit, 64)
		return f, end
	}
	j, digits := scanMantissa(s, i, cIsDigit)
	if digits == 0 {
		return 0, 0
	}
	j = scanExponent(s, j, 'e')
	f, _ := strconv.ParseFloat(s[:j], 64) // out of range: ±Inf or 0, as strtod
	return f, j
}

// scanMantissa reads the digits of a number's mantissa in s from i on: an
// integer part, then a point and a fraction, either possibly empty. It
// returns where they end and how many digits it read.
func scanMantissa(s string, i int, isDigit func(byte) bool) (end, digits int) {
	j := i
	for j < len(s) && isDigit(s[j]) {
		j++
	}
	digits = j - i
	if j < len(s) && s[j] == '.' {
		j++
		k := j
		for j < len(s) && isDigit(s[j]) {
			j++
		}
		digits += j - k
	}
	return j, digits
}

// scanExponent reads the exponent at s[i:]: the letter mark (lower case,
// either case accepted), an optional sign and decimal digits. It returns
// where the exponent ends, or i if there is no complete one.
func scanExponent(s string, i int, mark byte) int {
	if i >= len(s) || s[i]|0x20 != mark {
		return i
	}
	k := i + 1
	if k < len(s) && (s[k] == '+' || s[k] == '-') {
		k++
	}
	if k >= len(s) || !cIsDigit(s[k]) {
		return i
	}
	for k < len(s) && cIsDigit(s[k]) {
		k++
	}
	return k
}

func isHex(c byte) bool { return cIsDigit(c) || (c|0x20 >= 'a' && c|0x20 <= 'f') }

// strtoul is C's strtoul(s, &end, base) (2 <= base <= 36): it returns the
// value (saturated), the rest of s and whether a digit was read.
func strtoul(s string, base int) (float64, string, bool) {
	i := 0
	for i < len(s) && cIsSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	if base == 16 && i+2 < len(s) && s[i] == '0' && s[i+1]|0x20 == 'x' && digitVal(s[i+2]) < 16 {
		i += 2
	}
	var n uint64
	over := false
	start := i
	for i < len(s) {
		d := digitVal(s[i])
		if d >= base {
			break
		}
		if n > (math.MaxUint64-uint64(d))/uint64(base) {
			over = true
		}
		n = n*uint64(base) + uint64(d)
		i++
	}
	if i == start {
		return 0, s, false
	}
	if over {
		n = math.MaxUint64
	} else if neg {
		n = -n
	}
	return float64(n), s[i:], true
}

func digitVal(c byte) int {
	switch {
	case cIsDigit(c):
		return int(c - '0')
	case c|0x20 >= 'a' && c|0x20 <= 'z':
		return int(c|0x20-'a') + 10
	}
	return 99
}

package redisnum

import (
	"bytes"
	"math"
	"math/big"
	"strconv"
	"strings"
)

func isSpace(c byte) bool { return c == ' ' || (c >= '\t' && c <= '\r') }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isHex(c byte) bool {
	return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func hasPrefixFold(b []byte, p string) bool {
	return len(b) >= len(p) && strings.EqualFold(string(b[:len(p)]), p)
}

// Strtod parses the longest prefix of s that C's strtod accepts (C
// locale, as glibc does: leading spaces, a sign, decimal or hexadecimal
// notation, inf, infinity, nan, nan(chars)). It returns the value, how many
// bytes it used (0: no number, the value is 0) and whether strtod would set
// ERANGE with a zero or infinite result (overflow, or underflow to zero).
func Strtod(s []byte) (f float64, n int, erange bool) {
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	signed := func(f float64) float64 {
		if neg {
			return -f
		}
		return f
	}
	r := s[i:]
	switch {
	case hasPrefixFold(r, "inf"):
		n := 3
		if hasPrefixFold(r, "infinity") {
			n = 8
		}
		return signed(math.Inf(1)), i + n, false
	case hasPrefixFold(r, "nan"):
		n := 3
		if len(r) > 3 && r[3] == '(' {
			j := 4
			for j < len(r) && (isDigit(r[j]) || r[j] == '_' || (r[j]|0x20 >= 'a' && r[j]|0x20 <= 'z')) {
				j++
			}
			if j < len(r) && r[j] == ')' {
				n = j + 1
			}
		}
		return math.NaN(), i + n, false
	}
	hex := len(r) >= 2 && r[0] == '0' && (r[1] == 'x' || r[1] == 'X')
	isDigit, expChar, j := isDigit, byte('e'), 0
	if hex {
		isDigit, expChar, j = isHex, 'p', 2
	}
	digits, nonzero := 0, false
	for pass := 0; pass < 2; pass++ {
		for j < len(r) && isDigit(r[j]) {
			nonzero = nonzero || r[j] != '0'
			j++
			digits++
		}
		if pass == 0 && j < len(r) && r[j] == '.' {
			j++
		} else {
			break
		}
	}
	if digits == 0 {
		if hex {
			return signed(0), i + 1, false // "0x" with no digits: just the 0
		}
		return 0, 0, false
	}
	num := string(r[:j])
	exp := ""
	if j < len(r) && r[j]|0x20 == expChar {
		k := j + 1
		if k < len(r) && (r[k] == '+' || r[k] == '-') {
			k++
		}
		if k < len(r) && isDigit(r[k]) {
			for k < len(r) && isDigit(r[k]) {
				k++
			}
			exp = string(r[j:k])
			j = k
		}
	}
	if hex && exp == "" {
		exp = "p0" // Go wants the binary exponent
	}
	v, err := strconv.ParseFloat(num+exp, 64)
	if err != nil && !math.IsInf(v, 0) {
		// Cannot happen for the syntax accepted above.
		return 0, 0, false
	}
	erange = math.IsInf(v, 0) || (v == 0 && nonzero)
	return signed(v), i + j, erange
}

// ParseDouble parses a score (ZADD, ZINCRBY, WEIGHTS) like Redis's
// getDoubleFromObject: the whole string, no leading space, no NaN, no
// overflow or underflow to zero.
func ParseDouble(b []byte) (float64, bool) {
	if len(b) == 0 || isSpace(b[0]) {
		return 0, false
	}
	f, n, erange := Strtod(b)
	if n != len(b) || math.IsNaN(f) || erange {
		return 0, false
	}
	return f, true
}

// AppendDouble appends f as Redis 7.0 replies a double: "%.17g", with inf
// and -inf spelled out.
func AppendDouble(b []byte, f float64) []byte {
	switch {
	case math.IsInf(f, 1):
		return append(b, "inf"...)
	case math.IsInf(f, -1):
		return append(b, "-inf"...)
	case math.IsNaN(f):
		return append(b, "nan"...)
	}
	return strconv.AppendFloat(b, f, 'g', 17, 64)
}

// AppendListpackDouble appends f as a Redis listpack stores a score and
// ZSCAN returns it (d2string): integers up to 2^62 without a fraction.
func AppendListpackDouble(b []byte, f float64) []byte {
	if f == 0 {
		return append(b, '0')
	}
	if f >= -(1<<62) && f <= 1<<62 && f == math.Trunc(f) {
		return strconv.AppendInt(b, int64(f), 10)
	}
	return AppendDouble(b, f)
}

// minNormal is the smallest positive normal double (DBL_MIN).
var minNormal = math.Float64frombits(1 << 52)

// ParseStrtod reads a score the way SORT does: strtod over the C string (up
// to the first NUL), which must take all of it (the empty string is 0,
// leading spaces are skipped); NaN is refused, and so is whatever makes
// glibc's strtod set ERANGE: overflow, and underflow (an inexact result
// below DBL_MIN).
func ParseStrtod(b []byte) (float64, bool) {
	s := b
	if i := bytes.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	f, n, erange := Strtod(s)
	if n != len(s) || erange || math.IsNaN(f) {
		return 0, false
	}
	if a := math.Abs(f); a > 0 && a <= minNormal && !exactTiny(s) {
		return 0, false
	}
	return f, true
}

// exactTiny reports whether glibc's strtod leaves errno alone for s,
// a number in strtod's syntax whose double is at most DBL_MIN: it sets
// ERANGE when the result is inexact and the exact value is below DBL_MIN
// (tininess is detected before rounding).
func exactTiny(s []byte) bool {
	t := bytes.TrimLeft(s, " \t\n\v\f\r")
	r, ok := new(big.Rat).SetString(string(t))
	if !ok {
		return false
	}
	if _, exact := r.Float64(); exact {
		return true
	}
	r.Abs(r)
	return r.Cmp(new(big.Rat).SetFloat64(minNormal)) >= 0
}

// FormatFixed4 is addReplyDoubleDistance (fixedpoint_d2string with 4
// decimals): the value times 10^4 rounded to an integer (llrint: to
// nearest, ties to even), written with a dot before its last 4 digits.
func FormatFixed4(d float64) []byte {
	if d == 0 {
		return []byte("0.0000")
	}
	v := math.RoundToEven(float64(d * 10000))
	var b []byte
	if v < 0 {
		b = append(b, '-')
		v = -v
	}
	var digits []byte
	if v >= 1<<63 {
		digits = strconv.AppendUint(nil, 1<<63, 10) // llrint's overflow value
	} else {
		digits = strconv.AppendUint(nil, uint64(v), 10)
	}
	for len(digits) < 5 {
		digits = append([]byte{'0'}, digits...)
	}
	b = append(b, digits[:len(digits)-4]...)
	b = append(b, '.')
	return append(b, digits[len(digits)-4:]...)
}

// FormatHuman is Redis's ld2string(LD_STR_HUMAN) of a double (exactly
// representable as a long double): "%.17Lf" without trailing zeros.
func FormatHuman(f float64) []byte {
	switch {
	case math.IsInf(f, 1):
		return []byte("inf")
	case math.IsInf(f, -1):
		return []byte("-inf")
	}
	b := strconv.AppendFloat(nil, f, 'f', 17, 64)
	if bytes.IndexByte(b, '.') >= 0 {
		b = bytes.TrimRight(b, "0")
		b = bytes.TrimSuffix(b, []byte("."))
	}
	if string(b) == "-0" {
		b = b[1:]
	}
	return b
}

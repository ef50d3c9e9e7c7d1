package redisnum

import (
	"math/big"
	"strings"
)

// ParseLongDouble parses like Redis's string2ld (strtold, then its own
// checks), at x87 extended precision (64-bit mantissa), which is what Redis
// computes in: decimal or hexadecimal (0x1p3) notation, optional sign,
// "inf"/"infinity"; no spaces, no NaN, nothing left over; a value that
// overflows or underflows to zero is refused.
func ParseLongDouble(b []byte) (*big.Float, bool) {
	if len(b) == 0 || len(b) >= 5*1024 {
		return nil, false
	}
	s := string(b)
	lower := strings.ToLower(s)
	unsigned := strings.TrimPrefix(strings.TrimPrefix(lower, "+"), "-")
	if len(unsigned) != len(lower) && len(lower)-len(unsigned) > 1 {
		return nil, false // two signs
	}
	switch unsigned {
	case "inf", "infinity":
		// strtold accepts infinities; INCRBYFLOAT then refuses the sum.
		return new(big.Float).SetInf(lower[0] == '-'), true
	}
	base := 10
	if strings.HasPrefix(unsigned, "0x") {
		base = 0 // hexadecimal mantissa, optional binary 'p' exponent
	}
	if unsigned == "" || strings.ContainsAny(unsigned, "_+-") && !validExpSigns(unsigned) {
		return nil, false
	}
	for _, c := range unsigned {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c == '.' || c == 'x' || c == 'p' || c == '+' || c == '-') {
			return nil, false
		}
	}
	f, _, err := big.ParseFloat(s, base, 64, big.ToNearestEven)
	if err != nil {
		return nil, false
	}
	if f.Sign() != 0 && !LongDoubleInRange(f) {
		return nil, false
	}
	return f, true
}

// validExpSigns reports whether every '+' or '-' in s directly follows an
// exponent letter (strtold allows a sign only there and at the start).
func validExpSigns(s string) bool {
	hex := strings.HasPrefix(s, "0x")
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '_':
			return false
		case '+', '-':
			if i == 0 {
				return false
			}
			if p := s[i-1]; !(p == 'p' || (!hex && p == 'e')) {
				return false
			}
		}
	}
	return true
}

// LongDoubleInRange reports whether a non-zero f neither overflows the x87
// extended format (max just under 2^16384) nor rounds to zero (the smallest
// subnormal is 2^-16445; half of it rounds to zero).
func LongDoubleInRange(f *big.Float) bool {
	if f.IsInf() {
		return true
	}
	mant := new(big.Float)
	exp := f.MantExp(mant) // |f| = |mant| * 2^exp, 0.5 <= |mant| < 1
	if exp > 16384 {
		return false
	}
	if exp < -16445 {
		return false
	}
	if exp == -16445 && mant.Abs(mant).Cmp(big.NewFloat(0.5)) == 0 {
		return false
	}
	return true
}

// FormatLongDouble formats like Redis's ld2string(LD_STR_HUMAN): %.17Lf
// with trailing zeros (and a trailing dot) removed.
func FormatLongDouble(f *big.Float) string {
	s := f.Text('f', 17)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(s, "0")
		s = strings.TrimSuffix(s, ".")
	}
	if s == "-0" {
		s = "0"
	}
	return s
}

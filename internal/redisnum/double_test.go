package redisnum

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// Sortable keeps the numeric order and round-trips every double but NaN
// (-0 comes back as +0).
func TestSortableOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	vals := []float64{math.Inf(-1), -math.MaxFloat64, -1e300, -1, -0.5, -math.SmallestNonzeroFloat64, 0,
		math.Copysign(0, -1), math.SmallestNonzeroFloat64, 1e-300, 0.5, 1, 1e300, math.MaxFloat64, math.Inf(1)}
	for i := 0; i < 2000; i++ {
		vals = append(vals, math.Float64frombits(rng.Uint64()), rng.NormFloat64()*1e6, float64(rng.IntN(20)-10))
	}
	for _, a := range vals {
		if math.IsNaN(a) {
			continue
		}
		if back := Unsortable(Sortable(a)); back != a || math.Signbit(back) != (math.Signbit(a) && a != 0) {
			t.Fatalf("round trip of %v gave %v", a, back)
		}
		for _, b := range vals[:40] {
			if math.IsNaN(b) {
				continue
			}
			ua, ub := Sortable(a), Sortable(b)
			if (a < b) != (ua < ub) || (a == b) != (ua == ub) {
				t.Fatalf("order of %v, %v: sortable %x, %x", a, b, ua, ub)
			}
		}
	}
}

// ParseDouble is getDoubleFromObject (ZADD's score).
func TestParseDouble(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string // "" = refused
	}{
		{"1", "1"}, {"+1.5", "1.5"}, {"-0", "-0"}, {".5", "0.5"}, {"5.", "5"}, {"1e3", "1000"}, {"1E+3", "1000"},
		{"0x10", "16"}, {"0X1P-2", "0.25"}, {"0x.8", "0.5"}, {"-0x1.8p1", "-3"}, {"inf", "inf"}, {"-INFINITY", "-inf"},
		{"+Inf", "inf"}, {"00012", "12"}, {"4e-324", "4.9406564584124654e-324"}, {"1e308", "1e+308"},
		{"", ""}, {" 1", ""}, {"1 ", ""}, {"nan", ""}, {"-nan", ""}, {"nan(1)", ""}, {"1e400", ""}, {"-1e400", ""},
		{"1e-400", ""}, {"0x1p-1080", ""}, {"2e-324", ""}, {"0x", ""}, {"1e", ""}, {"1e+", ""}, {"infx", ""},
		{"--1", ""}, {"1\x00", ""}, {"abc", ""}, {"0b1", ""}, {"1_0", ""}, {"0x1_0", ""}, {".", ""}, {"+", ""},
		{"0e99999", "0"}, {"0.000", "0"},
	} {
		f, ok := ParseDouble([]byte(c.in))
		got := ""
		if ok {
			got = string(AppendDouble(nil, f))
		}
		if got != c.want {
			t.Errorf("ParseDouble(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// ParseStrtod is SORT's reading; the answers are redis-server 7.0's
// (SORT of a list holding the value: sorted, or "One or more scores can't
// be converted into double").
func TestParseStrtodLikeSort(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
	}{
		{"1e-310", false}, {"0x1p-1074", true}, {" 2", true}, {"", true}, {"2 ", false}, {"1e400", false},
		{"nan", false}, {"inf", true}, {"-0", true}, {"2.2250738585072014e-308", true},
		{"2.2250738585072011e-308", false}, {"1e-320", false}, {"0x1p-1022", true},
		{"4.9406564584124654e-324", false}, {"4.9e-324", false}, {"abc", false}, {".5e1", true}, {"0x", false},
		{"2\x00x", true},
	} {
		if _, ok := ParseStrtod([]byte(c.in)); ok != c.ok {
			t.Errorf("ParseStrtod(%q) ok = %v, want %v", c.in, ok, c.ok)
		}
	}
}

// ParseInt is string2ll; the answers are redis-server 7.0's (INCRBY).
func TestParseIntLikeString2ll(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"-1", -1, true}, {"9223372036854775807", math.MaxInt64, true},
		{"-9223372036854775808", math.MinInt64, true}, {"-0", 0, false}, {"007", 0, false}, {"00", 0, false},
		{"+1", 0, false}, {" 1", 0, false}, {"1 ", 0, false}, {"9223372036854775808", 0, false},
		{"-9223372036854775809", 0, false}, {"", 0, false}, {"-", 0, false}, {"1e3", 0, false},
		{"1_000", 0, false}, {"0x10", 0, false}, {"123456789012345678901", 0, false},
	} {
		got, ok := ParseInt([]byte(c.in))
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("ParseInt(%q) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// The reply formats of a double, at the edges: negative zero, infinities,
// the first power of ten %.17g writes with an exponent, an integer beyond
// a listpack's 2^62, and a sum that is not the decimal it looks like.
func TestFormats(t *testing.T) {
	sum := 0.1
	sum += 0.2
	negZero := math.Copysign(0, -1)
	for _, c := range []struct {
		f                       float64
		double, listpack, human string
	}{
		{negZero, "-0", "0", "0"},
		{0, "0", "0", "0"},
		{math.Inf(1), "inf", "inf", "inf"},
		{math.Inf(-1), "-inf", "-inf", "-inf"},
		{1e17, "1e+17", "100000000000000000", "100000000000000000"},
		{sum, "0.30000000000000004", "0.30000000000000004", "0.30000000000000004"},
		{1.5, "1.5", "1.5", "1.5"},
		{-3, "-3", "-3", "-3"},
		{1 << 62, "4.6116860184273879e+18", "4611686018427387904", "4611686018427387904"},
		{1 << 63, "9.2233720368547758e+18", "9.2233720368547758e+18", "9223372036854775808"},
		{2.6822090148925781e-06, "2.6822090148925781e-06", "2.6822090148925781e-06", "0.00000268220901489"},
		{1e-20, "9.9999999999999995e-21", "9.9999999999999995e-21", "0"},
	} {
		if got := string(AppendDouble(nil, c.f)); got != c.double {
			t.Errorf("AppendDouble(%v) = %s, want %s", c.f, got, c.double)
		}
		if got := string(AppendListpackDouble(nil, c.f)); got != c.listpack {
			t.Errorf("AppendListpackDouble(%v) = %s, want %s", c.f, got, c.listpack)
		}
		if got := string(FormatHuman(c.f)); got != c.human {
			t.Errorf("FormatHuman(%v) = %s, want %s", c.f, got, c.human)
		}
	}
	if got := string(AppendDouble([]byte("x="), math.NaN())); got != "x=nan" {
		t.Errorf("AppendDouble(NaN) = %s", got)
	}
}

// FormatFixed4 is GEODIST's fixedpoint_d2string: ties to even, "-0"
// never appears, and leading zeros up to one before the dot.
func TestFormatFixed4(t *testing.T) {
	for _, c := range []struct {
		in   float64
		want string
	}{
		{0, "0.0000"}, {math.Copysign(0, -1), "0.0000"}, {1e-9, "0.0000"}, {0.00005, "0.0000"}, {0.00015, "0.0001"},
		{0.0005, "0.0005"}, {0.7750, "0.7750"}, {1.5, "1.5000"}, {0.00025, "0.0002"}, {166274.1516, "166274.1516"},
		{-2.5, "-2.5000"}, {99999.99999, "100000.0000"}, {-0.00001, "0.0000"},
	} {
		if got := string(FormatFixed4(c.in)); got != c.want {
			t.Errorf("FormatFixed4(%v) = %s, want %s", c.in, got, c.want)
		}
	}
}

// Strtod reports how much of its input it read, as strtod's endptr.
func TestStrtodPrefix(t *testing.T) {
	for _, c := range []struct {
		in     string
		n      int
		erange bool
	}{
		{"12abc", 2, false}, {"  -1.5e3x", 8, false}, {"0x", 1, false}, {"0x1p", 3, false}, {"1e", 1, false},
		{"infinityx", 8, false}, {"infin", 3, false}, {"nan(abc)", 8, false}, {"nan(ab", 3, false},
		{"1e999", 5, true}, {"1e-999", 6, true}, {"0e-999", 6, false}, {"x", 0, false}, {"", 0, false},
		{strings.Repeat("9", 400), 400, true},
	} {
		_, n, erange := Strtod([]byte(c.in))
		if n != c.n || erange != c.erange {
			t.Errorf("Strtod(%q) used %d (erange %v), want %d (%v)", c.in, n, erange, c.n, c.erange)
		}
	}
}

package zrange

import (
	"math"
	"strconv"
	"testing"
)

func TestParseScore(t *testing.T) {
	for _, c := range []struct {
		min, max string
		want     Score
		ok       bool
	}{
		{"1", "2", Score{Min: 1, Max: 2}, true},
		{"(1", "(2.5", Score{Min: 1, Max: 2.5, MinEx: true, MaxEx: true}, true},
		{"-inf", "+inf", Score{Min: math.Inf(-1), Max: math.Inf(1)}, true},
		{"", " 3", Score{Min: 0, Max: 3}, true},         // strtod: empty is 0, leading spaces
		{"(", "1", Score{MinEx: true, Max: 1}, true},    // "(" then the empty string
		{"1\x00junk", "2", Score{Min: 1, Max: 2}, true}, // a C string ends at NUL
		{"0x10", "1e1", Score{Min: 16, Max: 10}, true},
		{"nan", "1", Score{}, false},
		{"1", "(nan", Score{}, false},
		{"1 ", "2", Score{}, false},
		{"a", "2", Score{}, false},
		{"[1", "2", Score{}, false},
	} {
		got, ok := ParseScore([]byte(c.min), []byte(c.max))
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("ParseScore(%q, %q) = %+v, %v; want %+v, %v", c.min, c.max, got, ok, c.want, c.ok)
		}
	}
}

// One bound: strtod on the C string, leading spaces and the empty string
// allowed, overflow is infinity.
func TestParseScoreItem(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string
	}{
		{"1", "1"}, {"(1", "(1"}, {"", "0"}, {"(", "(0"}, {" 2", "2"}, {"2\x00x", "2"}, {"1e400", "+Inf"},
		{"(-1e400", "(-Inf"}, {"1e-400", "0"}, {"2 ", ""}, {"x", ""}, {"nan", ""}, {"((1", ""}, {"-", ""},
	} {
		f, ex, ok := parseScoreItem([]byte(c.in))
		got := ""
		if ok {
			got = strconv.FormatFloat(f, 'g', -1, 64)
			if ex {
				got = "(" + got
			}
		}
		if got != c.want {
			t.Errorf("parseScoreItem(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestScoreBounds(t *testing.T) {
	s := Score{Min: 1, Max: 2, MinEx: true}
	for _, c := range []struct {
		f        float64
		gte, lte bool
	}{{1, false, true}, {1.5, true, true}, {2, true, true}, {2.5, true, false}, {0, false, true}} {
		if s.GteMin(c.f) != c.gte || s.LteMax(c.f) != c.lte {
			t.Errorf("%v: GteMin %v LteMax %v; want %v %v", c.f, s.GteMin(c.f), s.LteMax(c.f), c.gte, c.lte)
		}
	}
	for _, c := range []struct {
		s     Score
		empty bool
	}{
		{Score{Min: 1, Max: 1}, false},
		{Score{Min: 1, Max: 1, MaxEx: true}, true},
		{Score{Min: 2, Max: 1}, true},
		{Score{Min: math.Inf(-1), Max: math.Inf(1)}, false},
	} {
		if c.s.Empty() != c.empty {
			t.Errorf("%+v.Empty() = %v", c.s, !c.empty)
		}
	}
}

func TestParseLex(t *testing.T) {
	for _, c := range []struct {
		b     string
		bound Bound
		ex    bool
		ok    bool
	}{
		{"-", Bound{Inf: -1}, true, true},
		{"+", Bound{Inf: 1}, true, true},
		{"+\x00x", Bound{Inf: 1}, true, true},
		{"(a", Bound{V: []byte("a")}, true, true},
		{"[a", Bound{V: []byte("a")}, false, true},
		{"[", Bound{V: []byte{}}, false, true},
		{"+a", Bound{}, false, false},
		{"a", Bound{}, false, false},
		{"", Bound{}, false, false},
	} {
		s, ok := ParseLex([]byte(c.b), []byte("+"))
		if ok != c.ok || (ok && (Compare(s.Min, c.bound) != 0 || s.Min.Inf != c.bound.Inf || s.MinEx != c.ex)) {
			t.Errorf("ParseLex(%q) = %+v, %v; want %+v ex=%v, %v", c.b, s.Min, ok, c.bound, c.ex, c.ok)
		}
	}
}

func TestLexCompare(t *testing.T) {
	minus, plus := Bound{Inf: -1}, Bound{Inf: 1}
	a, b := Bound{V: []byte("a")}, Bound{V: []byte("b")}
	for _, c := range []struct {
		x, y Bound
		want int
	}{
		{minus, minus, 0}, {plus, plus, 0}, {minus, plus, -1}, {plus, minus, 1},
		{minus, a, -1}, {a, minus, 1}, {plus, a, 1}, {a, plus, -1},
		{a, b, -1}, {b, a, 1}, {a, a, 0},
	} {
		if got := Compare(c.x, c.y); got != c.want {
			t.Errorf("Compare(%+v, %+v) = %d; want %d", c.x, c.y, got, c.want)
		}
	}
	s, _ := ParseLex([]byte("(a"), []byte("[b"))
	if s.GteMin([]byte("a")) || !s.GteMin([]byte("aa")) || !s.LteMax([]byte("b")) || s.LteMax([]byte("ba")) {
		t.Errorf("bounds of (a [b wrong")
	}
	if s.Empty() {
		t.Errorf("(a [b is not empty")
	}
	if e, _ := ParseLex([]byte("[a"), []byte("(a")); !e.Empty() {
		t.Errorf("[a (a is empty")
	}
	if e, _ := ParseLex([]byte("+"), []byte("-")); !e.Empty() {
		t.Errorf("+ - is empty")
	}
}

package streamid

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

func TestOrderAndNeighbours(t *testing.T) {
	ids := []ID{{0, 0}, {0, 1}, {0, math.MaxUint64}, {1, 0}, {1, 5}, {math.MaxUint64, 0}, Max}
	for i, a := range ids {
		for j, b := range ids {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := a.Cmp(b); got != want {
				t.Errorf("%v.Cmp(%v) = %d, want %d", a, b, got, want)
			}
			// The binary form sorts as the IDs do.
			var ka, kb [Size]byte
			a.Put(ka[:])
			b.Put(kb[:])
			if got := bytes.Compare(ka[:], kb[:]); got != want {
				t.Errorf("binary %v vs %v = %d, want %d", a, b, got, want)
			}
		}
		if got := Get(a.Append(nil)); got != a {
			t.Errorf("Get(Append(%v)) = %v", a, got)
		}
	}
	for _, c := range []struct {
		id, next ID
		ok       bool
	}{{ID{0, 0}, ID{0, 1}, true}, {ID{0, math.MaxUint64}, ID{1, 0}, true}, {Max, ID{}, false}} {
		if next, ok := c.id.Incr(); next != c.next || ok != c.ok {
			t.Errorf("%v.Incr() = %v, %v", c.id, next, ok)
		}
		if c.ok {
			if prev, ok := c.next.Decr(); prev != c.id || !ok {
				t.Errorf("%v.Decr() = %v, %v", c.next, prev, ok)
			}
		}
	}
	if prev, ok := (ID{}).Decr(); prev != Max || ok {
		t.Errorf("0-0.Decr() = %v, %v", prev, ok)
	}
	if !(ID{}).IsZero() || (ID{0, 1}).IsZero() {
		t.Error("IsZero")
	}
	if got := (ID{1526919030474, 55}).String(); got != "1526919030474-55" {
		t.Errorf("String = %q", got)
	}
}

// ParseU64 is string2ull: strict string2ll first, then strtoull.
func TestParseU64(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"0", 0, true}, {"12", 12, true}, {"18446744073709551615", math.MaxUint64, true},
		{"18446744073709551616", 0, false}, {"", 0, false}, {"-1", 0, false},
		{" 7", 7, true}, {"+7", 7, true}, {"007", 7, true}, {"-01", math.MaxUint64, true},
		{"1 ", 0, false}, {"x", 0, false}, {"+", 0, false}, {" ", 0, false},
	} {
		got, ok := ParseU64([]byte(c.in))
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("ParseU64(%q) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in           string
		missing      uint64
		strict, star bool
		want         ID
		seqGiven, ok bool
	}{
		{"-", 0, false, false, ID{}, true, true},
		{"+", 0, false, false, Max, true, true},
		{"-", 0, true, false, ID{}, false, false},
		{"5", 0, true, false, ID{5, 0}, true, true},
		{"5", math.MaxUint64, false, false, ID{5, math.MaxUint64}, true, true},
		{"5-3", 0, true, false, ID{5, 3}, true, true},
		{"5-*", 0, true, true, ID{5, 0}, false, true},
		{"5-*", 0, true, false, ID{}, false, false},
		{"5-3\x00junk", 0, true, false, ID{5, 3}, true, true},
		{"1-2-3", 0, true, false, ID{}, false, false},
		{"-5", 0, true, false, ID{}, false, false},
		{"", 0, false, false, ID{}, false, false},
		{strings.Repeat("0", 127), 0, true, false, ID{}, true, true},
		{strings.Repeat("0", 128), 0, true, false, ID{}, false, false},
	} {
		id, seqGiven, ok := Parse([]byte(c.in), c.missing, c.strict, c.star)
		if id != c.want || seqGiven != c.seqGiven || ok != c.ok {
			t.Errorf("Parse(%q, %d, %v, %v) = %v, %v, %v; want %v, %v, %v", c.in, c.missing, c.strict, c.star, id, seqGiven, ok, c.want, c.seqGiven, c.ok)
		}
	}
	if id, ok := ParseStrict([]byte("7-1")); id != (ID{7, 1}) || !ok {
		t.Errorf("ParseStrict(7-1) = %v, %v", id, ok)
	}
}

func TestParseInterval(t *testing.T) {
	for _, c := range []struct {
		in       string
		missing  uint64
		want     ID
		excl, ok bool
	}{
		{"-", 0, ID{}, false, true},
		{"+", math.MaxUint64, Max, false, true},
		{"(5", 0, ID{5, 0}, true, true},
		{"(5", math.MaxUint64, ID{5, math.MaxUint64}, true, true},
		{"(-", 0, ID{}, true, false}, // exclusive bounds are strict
		{"(", 0, ID{}, false, false},
		{"5-1", 0, ID{5, 1}, false, true},
	} {
		id, excl, ok := ParseInterval([]byte(c.in), c.missing)
		if ok != c.ok || (ok && (id != c.want || excl != c.excl)) {
			t.Errorf("ParseInterval(%q, %d) = %v, %v, %v; want %v, %v, %v", c.in, c.missing, id, excl, ok, c.want, c.excl, c.ok)
		}
	}
}

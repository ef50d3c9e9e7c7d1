package redisnum

import "testing"

func TestParseLongDoubleLikeStrtold(t *testing.T) {
	cases := []struct {
		in   string
		want string // "" = refused
	}{
		{"1", "1"}, {"+5", "5"}, {".5", "0.5"}, {"5.", "5"}, {"1.0e+2", "100"}, {"-0", "0"},
		{"00012", "12"}, {"0x1p3", "8"}, {"0X10", "16"}, {"-0x10", "-16"}, {"1e-4950", "0"},
		{"1e", ""}, {"1e+", ""}, {"0x", ""}, {"1_0", ""}, {" 1", ""}, {"1 ", ""}, {"nan", ""},
		{"1e4933", ""}, {"1e-4960", ""}, {"--1", ""}, {"+-1", ""}, {"1-1", ""}, {"0b1", ""},
		{"abc", ""}, {"", ""}, {"1e5", "100000"}, {"0x1p-2", "0.25"}, {"0e-99999", "0"},
	}
	for _, c := range cases {
		f, ok := ParseLongDouble([]byte(c.in))
		got := ""
		if ok {
			got = FormatLongDouble(f)
		}
		if got != c.want {
			t.Errorf("ParseLongDouble(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if f, ok := ParseLongDouble([]byte("-inf")); !ok || !f.IsInf() || f.Sign() >= 0 {
		t.Errorf("-inf not parsed as -Inf")
	}
}

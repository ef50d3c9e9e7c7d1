package script

import (
	"strings"
	"testing"
)

func TestSplitArgs(t *testing.T) {
	for in, want := range map[string]string{
		`#!lua name=x`:            "#!lua|name=x",
		`  a   "b c" 'd e'  `:     "a|b c|d e",
		`"\x41\n" 'it\'s'`:        "A\n|it's",
		`a"b c"d`:                 "",
		`"unterminated`:           "",
		`'x'y`:                    "",
		`#!"lua name=x`:           "",
		`#!lua "name=with space"`: "#!lua|name=with space",
	} {
		parts, ok := splitArgs([]byte(in))
		got := strings.Join(parts, "|")
		if !ok {
			got = ""
		}
		if got != want {
			t.Errorf("splitArgs(%q) = %q, want %q", in, got, want)
		}
	}
}

package glob

import (
	"strings"
	"testing"
	"time"
)

// Redis's answers (KEYS against redis-server 7.0 for the cases without
// NUL bytes). Note: "*" does not match "" (see the package comment).
func TestMatchLikeRedisStringmatch(t *testing.T) {
	cases := []struct {
		pat, s string
		want   bool
	}{
		{"*", "", false}, {"**", "", false}, {"*", "abc", true}, {"a*c", "abbbc", true}, {"a*c", "abcd", false},
		{"h?llo", "hello", true}, {"h?llo", "hllo", false}, {"h[ae]llo", "hallo", true},
		{"h[^e]llo", "hello", false}, {"h[^e]llo", "hallo", true}, {"h[a-b]llo", "hbllo", true},
		{"h[b-a]llo", "hallo", true}, {"h\\*llo", "h*llo", true}, {"h\\*llo", "hello", false},
		{"a[", "a[", false}, {"**a", "xa", true}, {"[\\]]", "]", true},
		{"", "", true}, {"", "a", false}, {"a", "", false}, {"?", "", false}, {"a*", "a", true},
		{"a[bc", "ab", true}, {"a[bc", "ac", true}, {"a[bc", "ad", false}, {"a\\", "a\\", true},
		{"[a-]", "-", false}, {"[^a-c]", "d", true}, {"[^a-c]", "b", false}, {"a\x00*", "a\x00b", true},
		{"*.log", "x.log", true}, {"*.log", "x.logs", false}, {"user:*:name", "user:42:name", true},
	}
	for _, c := range cases {
		if got := Match([]byte(c.pat), []byte(c.s), false); got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.pat, c.s, got, c.want)
		}
	}
}

func TestMatchNoCase(t *testing.T) {
	cases := []struct {
		pat, s        string
		exact, folded bool
	}{
		{"HELLO", "hello", false, true}, {"h[A-C]llo", "hbllo", false, true}, {"h[a-c]llo", "HBLLO", false, true},
		{"[^A]", "a", true, false}, {"MyLib*", "mylibrary", false, true}, {"x?Z", "xyz", false, true},
		{"\\A", "a", false, true}, {"a", "B", false, false},
	}
	for _, c := range cases {
		if got := Match([]byte(c.pat), []byte(c.s), false); got != c.exact {
			t.Errorf("Match(%q, %q, false) = %v", c.pat, c.s, got)
		}
		if got := Match([]byte(c.pat), []byte(c.s), true); got != c.folded {
			t.Errorf("Match(%q, %q, true) = %v", c.pat, c.s, got)
		}
	}
}

// Many stars against a long non-matching subject must stay fast (Redis's
// skipLongerMatches), and deep nesting must give up rather than overflow.
func TestMatchPathological(t *testing.T) {
	start := time.Now()
	pat := []byte(strings.Repeat("*a", 30) + "*b")
	s := []byte(strings.Repeat("a", 4000))
	if Match(pat, s, false) {
		t.Fatal("matched")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("took %v", d)
	}
	deep := []byte(strings.Repeat("*x", 2000))
	if Match(deep, []byte(strings.Repeat("x", 3000)), false) {
		t.Fatal("nesting beyond 1000 levels matched")
	}
}

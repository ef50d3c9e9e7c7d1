package stringargs

import (
	"math"
	"testing"

	"github.com/kvorum/kvorum/internal/argtest"
)

var args = argtest.Fields

var errText = argtest.ErrText

func TestParseSet(t *testing.T) {
	for _, c := range []struct {
		in    string
		err   string
		flags int
		ms    int64
		lease uint64
	}{
		{"set k v", "", 0, 0, 0},
		{"set k v nx get", "", NX | Get, 0, 0},
		{"SET k v XX KEEPTTL", "", XX | KeepTTL, 0, 0},
		{"set k v ex 10", "", EX, 10000, 0},
		{"set k v px 10 px 20", "", PX, 20, 0},
		{"set k v pxat 5", "", PXAT, 5, 0},
		{"set k v exat 5 lease 7", "", EXAT | Lease, 5000, 7},
		{"set k v nx xx", "ERR syntax error", 0, 0, 0},
		{"set k v ex 1 px 1", "ERR syntax error", 0, 0, 0},
		{"set k v keepttl ex 1", "ERR syntax error", 0, 0, 0},
		{"set k v ex", "ERR syntax error", 0, 0, 0},
		{"set k v persist", "ERR syntax error", 0, 0, 0},
		{"set k v ex abc", "ERR value is not an integer or out of range", 0, 0, 0},
		{"set k v ex 0", "ERR invalid expire time in 'set' command", 0, 0, 0},
		{"set k v px -1", "ERR invalid expire time in 'set' command", 0, 0, 0},
		{"set k v ex 9223372036854776", "ERR invalid expire time in 'set' command", 0, 0, 0},
		{"set k v lease 0 ex abc", "ERR invalid lease id", 0, 0, 0},
	} {
		a, r, ok := ParseSet(args(c.in))
		if got := errText(ok, r.Str); got != c.err {
			t.Errorf("%s: error %q, want %q", c.in, got, c.err)
			continue
		}
		if ok && (a.Flags != c.flags || a.Expiry.Ms != c.ms || a.Lease != c.lease) {
			t.Errorf("%s: %+v", c.in, a)
		}
	}
}

func TestDeadline(t *testing.T) {
	ex, _, _ := ParseExpiry(EX, []byte("2"), "set")
	if d, _, ok := ex.Deadline("set", 1000); !ok || d != 3000 {
		t.Fatalf("EX: %d %v", d, ok)
	}
	at, _, _ := ParseExpiry(PXAT, []byte("7"), "set")
	if d, _, ok := at.Deadline("set", 1000); !ok || d != 7 {
		t.Fatalf("PXAT: %d %v", d, ok)
	}
	if d, _, ok := (Expiration{}).Deadline("set", 1000); !ok || d != 0 {
		t.Fatalf("none: %d %v", d, ok)
	}
	big := Expiration{Flags: PX, Ms: math.MaxInt64 - 10}
	if _, r, ok := big.Deadline("getex", 11); errText(ok, r.Str) != "ERR invalid expire time in 'getex' command" {
		t.Fatalf("overflow: %q", r.Str)
	}
}

func TestParseGetExAndSetEX(t *testing.T) {
	o, _, ok := ParseGetEx(args("getex k ex abc"))
	if !ok || o.Flags != EX || string(o.Expire) != "abc" {
		t.Fatalf("GETEX EX abc: the number is not looked at yet: %+v %v", o, ok)
	}
	if o, _, ok := ParseGetEx(args("getex k persist")); !ok || o.Flags != Persist {
		t.Fatalf("PERSIST: %+v", o)
	}
	for _, in := range []string{"getex k nx", "getex k get", "getex k persist ex 1", "getex k keepttl"} {
		if _, r, ok := ParseGetEx(args(in)); errText(ok, r.Str) != "ERR syntax error" {
			t.Errorf("%s: %q", in, r.Str)
		}
	}
	if ex, _, ok := ParseSetEX(args("setex k 3 v")); !ok || ex.Flags != EX || ex.Ms != 3000 {
		t.Fatalf("SETEX: %+v", ex)
	}
	if ex, _, ok := ParseSetEX(args("PSETEX k 3 v")); !ok || ex.Flags != PX || ex.Ms != 3 {
		t.Fatalf("PSETEX: %+v", ex)
	}
	if _, r, ok := ParseSetEX(args("psetex k 0 v")); errText(ok, r.Str) != "ERR invalid expire time in 'psetex' command" {
		t.Fatalf("PSETEX 0: %q", r.Str)
	}
}

func TestParseDeltaAndSetRange(t *testing.T) {
	for _, c := range []struct {
		in  string
		n   int64
		err string
	}{
		{"incr k", 1, ""},
		{"DECR k", -1, ""},
		{"incrby k 5", 5, ""},
		{"decrby k 5", -5, ""},
		{"decrby k -9223372036854775808", 0, "ERR decrement would overflow"},
		{"incrby k -9223372036854775808", math.MinInt64, ""},
		{"incrby k x", 0, "ERR value is not an integer or out of range"},
	} {
		n, r, ok := ParseDelta(args(c.in))
		if got := errText(ok, r.Str); got != c.err || (ok && n != c.n) {
			t.Errorf("%s: %d %q", c.in, n, got)
		}
	}
	if n, _, ok := ParseSetRange(args("setrange k 4 v")); !ok || n != 4 {
		t.Fatalf("offset: %d", n)
	}
	if _, r, ok := ParseSetRange(args("setrange k -1 v")); errText(ok, r.Str) != "ERR offset is out of range" {
		t.Fatalf("negative: %q", r.Str)
	}
	if _, r, ok := ParseSetRange(args("setrange k x v")); errText(ok, r.Str) != "ERR value is not an integer or out of range" {
		t.Fatalf("not a number: %q", r.Str)
	}
}

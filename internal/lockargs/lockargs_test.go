package lockargs

import (
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/argtest"
)

var args = argtest.Fields

var errText = argtest.ErrText

func TestParseID(t *testing.T) {
	for in, want := range map[string]bool{"1": true, "42": true, "0": false, "-3": false, "x": false, "": false} {
		if _, ok := ParseID([]byte(in)); ok != want {
			t.Errorf("%q: %v", in, ok)
		}
	}
}

func TestParseLease(t *testing.T) {
	if a, _, ok := ParseLease(args("lease GRANT 5000")); !ok || a.Sub != "grant" || a.TTL != 5000 {
		t.Fatalf("grant: %+v", a)
	}
	if a, _, ok := ParseLease(args("lease keepalive 9")); !ok || a.Sub != "keepalive" || a.ID != 9 {
		t.Fatalf("keepalive: %+v", a)
	}
	for in, want := range map[string]string{
		"lease list":           "",
		"lease list x":         "ERR wrong number of arguments for 'lease|list' command",
		"lease ttl":            "ERR wrong number of arguments for 'lease|ttl' command",
		"lease grant 0":        "ERR invalid lease TTL: want milliseconds in 1..86400000",
		"lease grant 86400001": "ERR invalid lease TTL: want milliseconds in 1..86400000",
		"lease revoke 0":       "ERR invalid lease id",
		"lease bogus":          "ERR unknown subcommand 'bogus'. Try LEASE GRANT|KEEPALIVE|REVOKE|TTL|LIST.",
	} {
		if _, r, ok := ParseLease(args(in)); errText(ok, r.Str) != want {
			t.Errorf("%s: %q, want %q", in, r.Str, want)
		}
	}
}

func TestParseLock(t *testing.T) {
	a, _, ok := ParseLock(args("lock acquire n 3 TIMEOUT 250 shared"))
	if !ok || a.Sub != "acquire" || a.ID != 3 || a.Opts != (LockOpts{Timeout: 250 * time.Millisecond, Shared: true}) {
		t.Fatalf("acquire: %+v", a)
	}
	if a, _, ok := ParseLock(args("lock acquire n 3 wait 5")); !ok || !a.Opts.Keep || a.Opts.Timeout != 5*time.Millisecond {
		t.Fatalf("wait: %+v", a)
	}
	if a, _, ok := ParseLock(args("lock fenced n 4 set k v")); !ok || a.Sub != "fenced" || a.ID != 4 {
		t.Fatalf("fenced: the command is left to the caller: %+v", a)
	}
	for in, want := range map[string]string{
		"lock info n":                   "",
		"lock info n x":                 "ERR wrong number of arguments for 'lock|info' command",
		"lock release n":                "ERR wrong number of arguments for 'lock|release' command",
		"lock release n 0":              "ERR invalid fencing token",
		"lock fenced n x get k":         "ERR invalid fencing token",
		"lock cancel n 0":               "ERR invalid lease id",
		"lock tryacquire n 1 timeout 5": "ERR syntax error",
		"lock acquire n 1 timeout":      "ERR syntax error",
		"lock acquire n 1 wait -1":      "ERR invalid WAIT: want milliseconds >= 0",
		"lock grab n":                   "ERR unknown subcommand 'grab'. Try LOCK ACQUIRE|TRYACQUIRE|RELEASE|CANCEL|INFO|FENCED.",
	} {
		if _, r, ok := ParseLock(args(in)); errText(ok, r.Str) != want {
			t.Errorf("%s: %q, want %q", in, r.Str, want)
		}
	}
}

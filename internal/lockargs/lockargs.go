// Package lockargs is the arguments of kvorum's LOCK and LEASE commands
// (docs/design-locks.md), with their error replies: lease ids and fencing
// tokens, LEASE's subcommands, LOCK's subcommands and ACQUIRE's and
// TRYACQUIRE's options. Package kv runs the commands over the keyspace
// and checks the command LOCK FENCED runs; the parsers here read nothing
// but their arguments.
package lockargs

import (
	"strconv"
	"strings"
	"time"

	"github.com/kvorum/kvorum/internal/redisnum"
	"github.com/kvorum/kvorum/internal/reply"
)

// Error texts of a bad lease id and a bad fencing token.
var (
	ErrLeaseID  = reply.Error("ERR invalid lease id")
	ErrBadToken = reply.Error("ERR invalid fencing token")
)

// MaxLeaseTTL bounds LEASE GRANT's TTL (one day, in ms).
const MaxLeaseTTL = 24 * 3600 * 1000

// eq compares an argument with a keyword, ignoring case.
func eq(b []byte, s string) bool { return strings.EqualFold(string(b), s) }

// wrongArity is Redis's error for a wrong number of arguments of name.
func wrongArity(name string) reply.Reply {
	return reply.Error("ERR wrong number of arguments for '" + name + "' command")
}

// ParseID parses a lease id or fencing token: a positive integer.
func ParseID(b []byte) (uint64, bool) {
	n, ok := redisnum.ParseInt(b)
	return uint64(n), ok && n > 0
}

// Lease is a parsed LEASE command.
type Lease struct {
	Sub string // the subcommand, lower case
	TTL int64  // GRANT: ms
	ID  uint64 // KEEPALIVE, REVOKE, TTL
}

// ParseLease parses a LEASE command: its subcommand, arity, and TTL or id.
func ParseLease(args [][]byte) (Lease, reply.Reply, bool) {
	var a Lease
	switch sub := args[1]; {
	case eq(sub, "GRANT"):
		a.Sub = "grant"
	case eq(sub, "KEEPALIVE"):
		a.Sub = "keepalive"
	case eq(sub, "REVOKE"):
		a.Sub = "revoke"
	case eq(sub, "TTL"):
		a.Sub = "ttl"
	case eq(sub, "LIST"):
		a.Sub = "list"
	default:
		return a, reply.ErrorText([]byte("ERR unknown subcommand '" + string(sub) + "'. Try LEASE GRANT|KEEPALIVE|REVOKE|TTL|LIST.")), false
	}
	want := 3
	if a.Sub == "list" {
		want = 2
	}
	if len(args) != want {
		return a, wrongArity("lease|" + a.Sub), false
	}
	var ok bool
	switch a.Sub {
	case "grant":
		if a.TTL, ok = redisnum.ParseInt(args[2]); !ok || a.TTL < 1 || a.TTL > MaxLeaseTTL {
			return a, reply.Error("ERR invalid lease TTL: want milliseconds in 1.." + strconv.Itoa(MaxLeaseTTL)), false
		}
	case "keepalive", "revoke", "ttl":
		if a.ID, ok = ParseID(args[2]); !ok {
			return a, ErrLeaseID, false
		}
	}
	return a, reply.Reply{}, true
}

// LockOpts is ACQUIRE's and TRYACQUIRE's options.
type LockOpts struct {
	Timeout time.Duration
	Shared  bool
	Keep    bool // WAIT: at the timeout, reply null but stay queued
}

// parseLockOpts parses ACQUIRE's and TRYACQUIRE's options from args[from:].
func parseLockOpts(args [][]byte, from int, timeoutOK bool) (LockOpts, reply.Reply, bool) {
	var o LockOpts
	for i := from; i < len(args); i++ {
		switch {
		case eq(args[i], "SHARED"):
			o.Shared = true
		case (eq(args[i], "TIMEOUT") || eq(args[i], "WAIT")) && timeoutOK && i+1 < len(args):
			ms, ok := redisnum.ParseInt(args[i+1])
			if !ok || ms < 0 {
				return o, reply.Error("ERR invalid " + strings.ToUpper(string(args[i])) + ": want milliseconds >= 0"), false
			}
			o.Timeout = time.Duration(ms) * time.Millisecond
			o.Keep = eq(args[i], "WAIT")
			i++
		default:
			return o, reply.ErrSyntax, false
		}
	}
	return o, reply.Reply{}, true
}

// Lock is a parsed LOCK command.
type Lock struct {
	Sub  string   // the subcommand, lower case
	ID   uint64   // the lease (ACQUIRE, TRYACQUIRE, CANCEL) or the token (RELEASE, FENCED)
	Opts LockOpts // ACQUIRE, TRYACQUIRE
}

// ParseLock parses a LOCK command, all but the command FENCED runs
// (args[4:]), which the caller checks after it, as Check checks a command.
func ParseLock(args [][]byte) (Lock, reply.Reply, bool) {
	var a Lock
	var minArgs, maxArgs int
	switch sub := args[1]; {
	case eq(sub, "ACQUIRE"):
		a.Sub, minArgs = "acquire", 4
	case eq(sub, "TRYACQUIRE"):
		a.Sub, minArgs = "tryacquire", 4
	case eq(sub, "RELEASE"):
		a.Sub, minArgs, maxArgs = "release", 4, 4
	case eq(sub, "CANCEL"):
		a.Sub, minArgs, maxArgs = "cancel", 4, 4
	case eq(sub, "INFO"):
		a.Sub, minArgs, maxArgs = "info", 3, 3
	case eq(sub, "FENCED"):
		a.Sub, minArgs = "fenced", 5
	default:
		return a, reply.ErrorText([]byte("ERR unknown subcommand '" + string(sub) + "'. Try LOCK ACQUIRE|TRYACQUIRE|RELEASE|CANCEL|INFO|FENCED.")), false
	}
	if len(args) < minArgs || (maxArgs > 0 && len(args) > maxArgs) {
		return a, wrongArity("lock|" + a.Sub), false
	}
	if a.Sub == "info" {
		return a, reply.Reply{}, true
	}
	var ok bool
	if a.ID, ok = ParseID(args[3]); !ok {
		if a.Sub == "release" || a.Sub == "fenced" {
			return a, ErrBadToken, false
		}
		return a, ErrLeaseID, false
	}
	if a.Sub == "acquire" || a.Sub == "tryacquire" {
		var r reply.Reply
		if a.Opts, r, ok = parseLockOpts(args, 4, a.Sub == "acquire"); !ok {
			return a, r, false
		}
	}
	return a, reply.Reply{}, true
}

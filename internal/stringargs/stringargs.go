// Package stringargs is the string commands' arguments, parsed as Redis
// 7.0 parses them, with Redis's error replies: SET's and GETEX's options
// (parseExtendedStringArgumentsOrReply), their expiry (the part of
// getExpireMillisecondsOrReply that does not depend on the time, and the
// rest at a given time), SETEX and PSETEX, the INCR family's delta and
// SETRANGE's offset. Package kv runs the commands over the keyspace; the
// parsers here read nothing but their arguments.
package stringargs

import (
	"math"
	"strings"

	"github.com/kvorum/kvorum/internal/lockargs"
	"github.com/kvorum/kvorum/internal/redisnum"
	"github.com/kvorum/kvorum/internal/reply"
)

// Error texts of the string commands' syntax (Redis 7.0).
var (
	errSyntax   = reply.ErrSyntax
	errNotInt   = reply.ErrNotInt
	errOffset   = reply.Error("ERR offset is out of range")
	errDecrOver = reply.Error("ERR decrement would overflow")
)

// InvalidExpire is Redis's error for an expiry out of range in command
// cmd (SET, GETEX, SETEX, PSETEX, and the EXPIRE family).
func InvalidExpire(cmd string) reply.Reply {
	return reply.Error("ERR invalid expire time in '" + cmd + "' command")
}

// eq compares an argument with a keyword, ignoring case.
func eq(b []byte, s string) bool { return strings.EqualFold(string(b), s) }

// Flags of SET and GETEX options, as Redis's
// parseExtendedStringArgumentsOrReply sets them.
const (
	NX = 1 << iota
	XX
	Get
	KeepTTL
	Persist
	EX
	PX
	EXAT
	PXAT
	Lease // kvorum: SET ... LEASE id

	Expiry = EX | PX | EXAT | PXAT
)

// expiryOpt returns the flag of an expiry option (EX, PX, EXAT, PXAT), 0
// for any other word.
func expiryOpt(a []byte) int {
	switch {
	case eq(a, "EX"):
		return EX
	case eq(a, "PX"):
		return PX
	case eq(a, "EXAT"):
		return EXAT
	case eq(a, "PXAT"):
		return PXAT
	}
	return 0
}

// Opts is the parsed tail of SET (from args[3]) or GETEX (from args[2]).
type Opts struct {
	Flags  int
	Expire []byte // the last expiry argument, as given (see ParseExpiry)
	Lease  []byte // SET ... LEASE id (kvorum)
}

// parseOpts is a port of Redis 7's parseExtendedStringArgumentsOrReply:
// an option may repeat (the last expiry wins), conflicting ones are a
// syntax error, and the expiry number is not looked at yet.
func parseOpts(args [][]byte, from int, isSet bool) (Opts, reply.Reply, bool) {
	var o Opts
	for j := from; j < len(args); j++ {
		a := args[j]
		hasNext := j+1 < len(args)
		f := o.Flags
		switch ex := expiryOpt(a); {
		case eq(a, "NX") && f&XX == 0 && isSet:
			o.Flags |= NX
		case eq(a, "XX") && f&NX == 0 && isSet:
			o.Flags |= XX
		case eq(a, "GET") && isSet:
			o.Flags |= Get
		case eq(a, "KEEPTTL") && f&(Persist|Expiry) == 0 && isSet:
			o.Flags |= KeepTTL
		case eq(a, "PERSIST") && f&(Expiry|KeepTTL) == 0 && !isSet:
			o.Flags |= Persist
		case ex != 0 && f&(KeepTTL|Persist|Expiry&^ex) == 0 && hasNext:
			o.Flags |= ex
			o.Expire = args[j+1]
			j++
		case eq(a, "LEASE") && isSet && hasNext:
			o.Flags |= Lease
			o.Lease = args[j+1]
			j++
		default:
			return o, errSyntax, false
		}
	}
	return o, reply.Reply{}, true
}

// Expiration is a parsed expiry option: the number of milliseconds,
// relative to the command's time for EX and PX.
type Expiration struct {
	Flags int // EX, PX, EXAT or PXAT; 0: no expiry
	Ms    int64
}

// ParseExpiry is the part of Redis's getExpireMillisecondsOrReply that
// does not depend on the time: b must be a positive number, of seconds
// that fit in milliseconds for EX and EXAT.
func ParseExpiry(flags int, b []byte, cmd string) (Expiration, reply.Reply, bool) {
	n, ok := redisnum.ParseInt(b)
	if !ok {
		return Expiration{}, errNotInt, false
	}
	seconds := flags&(EX|EXAT) != 0
	if n <= 0 || (seconds && n > math.MaxInt64/1000) {
		return Expiration{}, InvalidExpire(cmd), false
	}
	if seconds {
		n *= 1000
	}
	return Expiration{Flags: flags & Expiry, Ms: n}, reply.Reply{}, true
}

// Deadline is the rest of getExpireMillisecondsOrReply: the absolute
// deadline in Unix ms at now (0 without an expiry).
func (ex Expiration) Deadline(cmd string, now int64) (int64, reply.Reply, bool) {
	if ex.Flags&(EX|PX) == 0 {
		return ex.Ms, reply.Reply{}, true
	}
	if ex.Ms > math.MaxInt64-now {
		// Redis overflows into a negative number and refuses it.
		return 0, InvalidExpire(cmd), false
	}
	return ex.Ms + now, reply.Reply{}, true
}

// Set is a parsed SET.
type Set struct {
	Flags  int
	Expiry Expiration
	Lease  uint64 // SET ... LEASE id; 0: none
}

// ParseSet parses SET's options and, since Redis does so before it looks
// at the key, its lease id and expiry number (a relative expiry's
// overflow is left to the command, which has the time: see Deadline).
func ParseSet(args [][]byte) (Set, reply.Reply, bool) {
	o, r, ok := parseOpts(args, 3, true)
	if !ok {
		return Set{}, r, false
	}
	a := Set{Flags: o.Flags}
	if o.Flags&Lease != 0 {
		if a.Lease, ok = lockargs.ParseID(o.Lease); !ok {
			return Set{}, lockargs.ErrLeaseID, false
		}
	}
	if o.Flags&Expiry != 0 {
		if a.Expiry, r, ok = ParseExpiry(o.Flags, o.Expire, "set"); !ok {
			return Set{}, r, false
		}
	}
	return a, reply.Reply{}, true
}

// SetexName is SETEX's or PSETEX's name, as Redis writes it in errors.
func SetexName(args [][]byte) string {
	if len(args[0]) == len("setex") {
		return "setex"
	}
	return "psetex"
}

// ParseSetEX reads SETEX/PSETEX's expiry the way Redis does (as SET EX/PX).
func ParseSetEX(args [][]byte) (Expiration, reply.Reply, bool) {
	name := SetexName(args)
	if name == "setex" {
		return ParseExpiry(EX, args[2], name)
	}
	return ParseExpiry(PX, args[2], name)
}

// ParseGetEx parses GETEX's syntax only: Redis looks at the expiry number
// after the key (GETEX missing EX abc is a nil reply), with ParseExpiry.
func ParseGetEx(args [][]byte) (Opts, reply.Reply, bool) { return parseOpts(args, 2, false) }

// ParseDelta is what INCR, DECR, INCRBY and DECRBY add, read as Redis
// does before it looks at the key.
func ParseDelta(args [][]byte) (int64, reply.Reply, bool) {
	decr := args[0][0] == 'd' || args[0][0] == 'D'
	if len(args) == 2 { // INCR, DECR
		if decr {
			return -1, reply.Reply{}, true
		}
		return 1, reply.Reply{}, true
	}
	n, ok := redisnum.ParseInt(args[2])
	switch {
	case !ok:
		return 0, errNotInt, false
	case !decr:
		return n, reply.Reply{}, true
	case n == math.MinInt64:
		return 0, errDecrOver, false
	}
	return -n, reply.Reply{}, true
}

// ParseSetRange reads SETRANGE's offset, which Redis checks (a number,
// not negative) before it looks at the key.
func ParseSetRange(args [][]byte) (int64, reply.Reply, bool) {
	off, ok := redisnum.ParseInt(args[2])
	if !ok {
		return 0, errNotInt, false
	}
	if off < 0 {
		return 0, errOffset, false
	}
	return off, reply.Reply{}, true
}

package kv

import (
	"github.com/kvorum/kvorum/internal/reply"

	"github.com/kvorum/kvorum/internal/notify"

	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/redisnum"
	"github.com/kvorum/kvorum/internal/stringargs"
)

type readerI = pebble.Reader

// Redis error texts.
var (
	errSyntax      = reply.ErrSyntax
	errNotInt      = reply.ErrNotInt
	errOverflow    = Error("ERR increment or decrement would overflow")
	errNotFloat    = Error("ERR value is not a valid float")
	errNaN         = Error("ERR increment would produce NaN or Infinity")
	errWrongType   = Error("WRONGTYPE Operation against a key holding the wrong kind of value")
	errNoSuchKey   = Error("ERR no such key")
	errTooBig      = Error("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
	errInvalidCurs = Error("ERR invalid cursor")
)

// maxStringSize is Redis's proto-max-bulk-len default (512 MB).
const maxStringSize = 512 << 20

func eq(b []byte, s string) bool { return strings.EqualFold(string(b), s) }

// getString loads k as a string: ok=false if absent; a non-nil error is
// errTypeMismatch or a storage error (see errReply).
func getString(x *ctx, k []byte) (record, bool, error) {
	rec, ok, err := x.load(k)
	if err != nil {
		return rec, false, err
	}
	if ok && rec.typ != typeString {
		return rec, false, errTypeMismatch
	}
	return rec, ok, nil
}

// putString stores string v at k and emits keyspace event (class $),
// followed by "expire" for a "set" with a deadline (SETEX, PSETEX).
func putString(x *ctx, event string, k, v []byte, expire int64) Reply {
	if err := x.store(k, &record{typ: typeString, expire: expire, value: v}); err != nil {
		return errReply(err)
	}
	x.stringEvent(event, k, event == "set" && expire != 0)
	return OK
}

// stringEvent emits event (class $) on k, and "expire" after it if asked.
func (x *ctx) stringEvent(event string, k []byte, expire bool) {
	x.event(notify.String, event, k)
	if expire {
		x.event(notify.Generic, "expire", k)
	}
}

func init() {
	def("get", 2, "readonly fast", 1, 1, 1, "string", "Returns the string value of a key.", cmdGet, nil)
	defParsed("set", -3, "write denyoom", 1, 1, 1, "string", "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist.", stringargs.ParseSet, cmdSet)
	def("setnx", 3, "write denyoom fast", 1, 1, 1, "string", "Set the string value of a key only when the key doesn't exist.", cmdSetNX, nil)
	defParsed("setex", 4, "write denyoom", 1, 1, 1, "string", "Sets the string value and expiration time of a key.", stringargs.ParseSetEX, cmdSetEX)
	defParsed("psetex", 4, "write denyoom", 1, 1, 1, "string", "Sets both string value and expiration time in milliseconds of a key.", stringargs.ParseSetEX, cmdSetEX)
	def("getset", 3, "write denyoom fast", 1, 1, 1, "string", "Returns the previous string value of a key after setting it to a new value.", cmdGetSet, nil)
	def("getdel", 2, "write fast", 1, 1, 1, "string", "Returns the string value of a key after deleting the key.", cmdGetDel, nil)
	defParsed("getex", -2, "write fast", 1, 1, 1, "string", "Returns the string value of a key after setting its expiration time.", stringargs.ParseGetEx, cmdGetEx)
	def("mget", -2, "readonly fast", 1, -1, 1, "string", "Atomically returns the string values of one or more keys.", cmdMGet, nil)
	// MSET and MSETNX take key/value pairs: a check of the arity, nothing
	// to parse.
	def("mset", -3, "write denyoom", 1, -1, 2, "string", "Atomically creates or modifies the string values of one or more keys.", cmdMSet, checkPairs("mset", 1))
	def("msetnx", -3, "write denyoom", 1, -1, 2, "string", "Atomically modifies the string values of one or more keys only when all keys don't exist.", cmdMSetNX, checkPairs("msetnx", 1))
	defParsed("incr", 2, "write denyoom fast", 1, 1, 1, "string", "Increments the integer value of a key by one.", stringargs.ParseDelta, cmdIncrBy)
	defParsed("decr", 2, "write denyoom fast", 1, 1, 1, "string", "Decrements the integer value of a key by one.", stringargs.ParseDelta, cmdIncrBy)
	defParsed("incrby", 3, "write denyoom fast", 1, 1, 1, "string", "Increments the integer value of a key by a number.", stringargs.ParseDelta, cmdIncrBy)
	defParsed("decrby", 3, "write denyoom fast", 1, 1, 1, "string", "Decrements a number from the integer value of a key.", stringargs.ParseDelta, cmdIncrBy)
	def("incrbyfloat", 3, "write denyoom fast", 1, 1, 1, "string", "Increment the floating point value of a key by a number.", cmdIncrByFloat, nil)
	def("append", 3, "write denyoom fast", 1, 1, 1, "string", "Appends a string to the value of a key. Creates the key if it doesn't exist.", cmdAppend, nil)
	def("strlen", 2, "readonly fast", 1, 1, 1, "string", "Returns the length of a string value.", cmdStrlen, nil)
	defParsed("getrange", 4, "readonly", 1, 1, 1, "string", "Returns a substring of the string stored at a key.", parseRange, cmdGetRange)
	defParsed("setrange", 4, "write denyoom", 1, 1, 1, "string", "Overwrites a part of a string value with another by an offset. Creates the key if it doesn't exist.", stringargs.ParseSetRange, cmdSetRange)
}

// ---------------------------------------------------------------------------
// Parsers of numeric arguments that several commands share.

// parseIntArg reads an integer argument as Redis's
// getLongLongFromObjectOrReply does.
func parseIntArg(b []byte) (int64, Reply, bool) {
	n, ok := redisnum.ParseInt(b)
	if !ok {
		return 0, errNotInt, false
	}
	return n, Reply{}, true
}

// intArg returns the parser of a command whose one parsed argument is the
// integer args[i] (which Redis reads before it looks at the key).
func intArg(i int) func(args [][]byte) (int64, Reply, bool) {
	return func(args [][]byte) (int64, Reply, bool) { return parseIntArg(args[i]) }
}

// floatArg returns the parser of args[i] as a long double (Redis's
// getLongDoubleFromObjectOrReply).
func floatArg(i int) func(args [][]byte) (*big.Float, Reply, bool) {
	return func(args [][]byte) (*big.Float, Reply, bool) {
		f, ok := redisnum.ParseLongDouble(args[i])
		if !ok {
			return nil, errNotFloat, false
		}
		return f, Reply{}, true
	}
}

// indexRange is a start and an end index as given (GETRANGE, LRANGE...):
// negative ones count from the end.
type indexRange struct{ start, end int64 }

// parseRange parses args[2] and args[3] as the start and the end index.
func parseRange(args [][]byte) (indexRange, Reply, bool) {
	start, r, ok := parseIntArg(args[2])
	if !ok {
		return indexRange{}, r, false
	}
	end, r, ok := parseIntArg(args[3])
	if !ok {
		return indexRange{}, r, false
	}
	return indexRange{start, end}, Reply{}, true
}

// clamp is the range of a string of n units (bytes, or bits for BITCOUNT
// and BITPOS with BIT) that start and end select, as Redis's GETRANGE,
// BITCOUNT and BITPOS compute it: negative indexes count from the end,
// then both are clamped to the string. Empty (from > to) if nothing is.
func (q indexRange) clamp(n int64) (from, to int64) {
	start, end := q.start, q.end
	if start < 0 {
		start += n
	}
	if end < 0 {
		end += n
	}
	start, end = max(start, 0), min(max(end, 0), n-1)
	if start > end {
		return 0, -1
	}
	return start, end
}

// checkPairs returns the check of command name whose arguments from
// args[from] on are pairs (MSET's keys and values, HSET's fields and
// values): an odd number of them is a wrong arity.
func checkPairs(name string, from int) func([][]byte) (Reply, bool) {
	return func(args [][]byte) (Reply, bool) {
		if (len(args)-from)%2 != 0 {
			return wrongArity(name), false
		}
		return Reply{}, true
	}
}

// ---------------------------------------------------------------------------
// GET, SET and its variants.

func cmdGet(x *ctx, args [][]byte) Reply {
	rec, ok, err := getString(x, args[1])
	if err != nil || !ok {
		return errOr(err, Nil)
	}
	return Bulk(rec.value)
}

func cmdSet(x *ctx, args [][]byte, a stringargs.Set) Reply {
	expire, r, ok := a.Expiry.Deadline("set", x.now)
	if !ok {
		return r
	}
	if a.Lease != 0 && !x.systemState() {
		return errSystemState
	}
	if a.Lease != 0 {
		if _, ok, err := x.getLease(a.Lease); err != nil {
			return errReply(err)
		} else if !ok {
			return errNoLease(a.Lease)
		}
	}
	get := a.Flags&stringargs.Get != 0
	// One lookup of the key serves both the command (exists, type, TTL,
	// the old value for GET) and the write (the incarnation it replaces).
	raw, had, err := x.raw(args[1], get) // the old value only for GET
	if err != nil {
		return errReply(err)
	}
	rec, exists := raw, had && !raw.expired(x.now)
	if get && exists && rec.typ != typeString {
		return errWrongType
	}
	var old Reply = Nil
	if get && exists {
		old = Bulk(rec.value)
	}
	if (a.Flags&stringargs.NX != 0 && exists) || (a.Flags&stringargs.XX != 0 && !exists) {
		return old // nil unless GET
	}
	if a.Flags&stringargs.KeepTTL != 0 && exists {
		expire = rec.expire
	}
	if expire != 0 && expire <= x.now {
		// An absolute deadline in the past: the key is set and expires at once.
		// Redis sets it, emits set and expire, and later expired.
		if exists {
			if err := x.remove(args[1]); err != nil {
				return errReply(err)
			}
		}
		x.stringEvent("set", args[1], true)
		x.event(notify.Expired, "expired", args[1])
	} else if err := x.replace(args[1], raw, had, &record{typ: typeString, expire: expire, value: args[2]}); err != nil {
		return errReply(err)
	} else if x.stringEvent("set", args[1], a.Flags&stringargs.Expiry != 0); a.Lease != 0 {
		if err := x.attachKey(a.Lease, args[1]); err != nil {
			return errReply(err)
		}
	}
	if get {
		return old
	}
	return OK
}

func cmdSetNX(x *ctx, args [][]byte) Reply {
	_, exists, err := x.loadHeader(args[1])
	if err != nil {
		return errReply(err)
	}
	if exists {
		return Int(0)
	}
	if r := putString(x, "set", args[1], args[2], 0); r.IsError() {
		return r
	}
	return Int(1)
}

func cmdSetEX(x *ctx, args [][]byte, ex stringargs.Expiration) Reply {
	d, r, ok := ex.Deadline(stringargs.SetexName(args), x.now)
	if !ok {
		return r
	}
	return putString(x, "set", args[1], args[3], d)
}

func cmdGetSet(x *ctx, args [][]byte) Reply {
	rec, ok, err := getString(x, args[1])
	if err != nil {
		return errReply(err)
	}
	if r := putString(x, "set", args[1], args[2], 0); r.IsError() {
		return r
	}
	if !ok {
		return Nil
	}
	return Bulk(rec.value)
}

func cmdGetDel(x *ctx, args [][]byte) Reply {
	rec, ok, err := getString(x, args[1])
	if err != nil || !ok {
		return errOr(err, Nil)
	}
	if err := x.del(args[1]); err != nil {
		return errReply(err)
	}
	return Bulk(rec.value)
}

func cmdGetEx(x *ctx, args [][]byte, o stringargs.Opts) Reply {
	rec, exists, err := getString(x, args[1])
	if err != nil || !exists {
		return errOr(err, Nil)
	}
	switch {
	case o.Flags&stringargs.Expiry != 0:
		ex, r, ok := stringargs.ParseExpiry(o.Flags, o.Expire, "getex")
		if !ok {
			return r
		}
		d, r, ok := ex.Deadline("getex", x.now)
		if !ok {
			return r
		}
		if d <= x.now {
			if err := x.del(args[1]); err != nil {
				return errReply(err)
			}
		} else {
			rec.expire = d
			if err := x.store(args[1], &rec); err != nil {
				return errReply(err)
			}
			x.event(notify.Generic, "expire", args[1])
		}
	case o.Flags&stringargs.Persist != 0 && rec.expire != 0:
		rec.expire = 0
		if err := x.store(args[1], &rec); err != nil {
			return errReply(err)
		}
		x.event(notify.Generic, "persist", args[1])
	}
	return Bulk(rec.value)
}

func cmdMGet(x *ctx, args [][]byte) Reply {
	out := make([]Reply, 0, len(args)-1)
	for _, k := range args[1:] {
		rec, ok, err := x.load(k)
		if err != nil {
			return errReply(err)
		}
		if !ok || rec.typ != typeString {
			out = append(out, Nil)
		} else {
			out = append(out, Bulk(rec.value))
		}
	}
	return Array(out...)
}

func cmdMSet(x *ctx, args [][]byte) Reply {
	for i := 1; i+1 < len(args); i += 2 {
		if r := putString(x, "set", args[i], args[i+1], 0); r.IsError() {
			return r
		}
	}
	return OK
}

func cmdMSetNX(x *ctx, args [][]byte) Reply {
	for i := 1; i+1 < len(args); i += 2 {
		_, ok, err := x.loadHeader(args[i])
		if err != nil {
			return errReply(err)
		}
		if ok {
			return Int(0)
		}
	}
	cmdMSet(x, args)
	return Int(1)
}

// ---------------------------------------------------------------------------
// Numbers.

func cmdIncrBy(x *ctx, args [][]byte, delta int64) Reply {
	rec, ok, err := getString(x, args[1])
	if err != nil {
		return errReply(err)
	}
	var cur int64
	if ok {
		v, good := redisnum.ParseInt(rec.value)
		if !good {
			return errNotInt
		}
		cur = v
	}
	if (delta > 0 && cur > math.MaxInt64-delta) || (delta < 0 && cur < math.MinInt64-delta) {
		return errOverflow
	}
	cur += delta
	if r := putString(x, "incrby", args[1], strconv.AppendInt(nil, cur, 10), rec.expire); r.IsError() {
		return r
	}
	return Int(cur)
}

// addLongDouble is INCRBYFLOAT's and HINCRBYFLOAT's addition: at x87
// extended precision, as Redis's long double, formatted as its
// ld2string(LD_STR_HUMAN). ok=false: the sum is beyond the extended range
// (~1.19e4932), where Redis gets Infinity.
func addLongDouble(cur, incr *big.Float) ([]byte, bool) {
	sum := new(big.Float).SetPrec(64).SetMode(big.ToNearestEven).Add(cur, incr)
	if sum.Sign() != 0 && sum.MantExp(nil) > 16384 {
		return nil, false
	}
	return []byte(redisnum.FormatLongDouble(sum)), true
}

// cmdIncrByFloat checks, as Redis does, the key's type, then its value,
// then the increment: a bad increment is only looked at after the key.
func cmdIncrByFloat(x *ctx, args [][]byte) Reply {
	rec, exists, err := getString(x, args[1])
	if err != nil {
		return errReply(err)
	}
	cur := new(big.Float).SetPrec(64)
	if exists {
		v, good := redisnum.ParseLongDouble(rec.value)
		if !good {
			return errNotFloat
		}
		cur = v
	}
	incr, r, ok := floatArg(2)(args)
	if !ok {
		return r
	}
	if incr.IsInf() || cur.IsInf() {
		return errNaN
	}
	out, ok := addLongDouble(cur, incr)
	if !ok {
		return errNaN
	}
	if r := putString(x, "incrbyfloat", args[1], out, rec.expire); r.IsError() {
		return r
	}
	return Bulk(out)
}

// ---------------------------------------------------------------------------
// APPEND, STRLEN, GETRANGE (SUBSTR), SETRANGE.

func cmdAppend(x *ctx, args [][]byte) Reply {
	rec, _, err := getString(x, args[1])
	if err != nil {
		return errReply(err)
	}
	if len(rec.value)+len(args[2]) > maxStringSize {
		return errTooBig
	}
	v := append(rec.value, args[2]...)
	if r := putString(x, "append", args[1], v, rec.expire); r.IsError() {
		return r
	}
	return Int(int64(len(v)))
}

func cmdStrlen(x *ctx, args [][]byte) Reply {
	rec, _, err := getString(x, args[1])
	if err != nil {
		return errReply(err)
	}
	return Int(int64(len(rec.value)))
}

// cmdGetRange serves GETRANGE and SUBSTR.
func cmdGetRange(x *ctx, args [][]byte, q indexRange) Reply {
	rec, _, err := getString(x, args[1])
	if err != nil {
		return errReply(err)
	}
	if q.start < 0 && q.end < 0 && q.start > q.end {
		return Bulk([]byte{})
	}
	from, to := q.clamp(int64(len(rec.value)))
	if from > to {
		return Bulk([]byte{})
	}
	return Bulk(rec.value[from : to+1])
}

func cmdSetRange(x *ctx, args [][]byte, off int64) Reply {
	val := args[3]
	rec, _, err := getString(x, args[1])
	if err != nil {
		return errReply(err)
	}
	if len(val) == 0 {
		return Int(int64(len(rec.value)))
	}
	if off > maxStringSize-int64(len(val)) {
		return errTooBig
	}
	end := int(off) + len(val)
	v := rec.value
	if len(v) < end {
		v = append(v, make([]byte, end-len(v))...)
	}
	copy(v[off:], val)
	if r := putString(x, "setrange", args[1], v, rec.expire); r.IsError() {
		return r
	}
	return Int(int64(len(v)))
}

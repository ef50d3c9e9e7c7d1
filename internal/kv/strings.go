package kv

import (
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/kvorum/kvorum/internal/redisnum"
)

type readerI = pebble.Reader

// Redis error texts.
var (
	errSyntax      = Error("ERR syntax error")
	errNotInt      = Error("ERR value is not an integer or out of range")
	errOverflow    = Error("ERR increment or decrement would overflow")
	errNotFloat    = Error("ERR value is not a valid float")
	errNaN         = Error("ERR increment would produce NaN or Infinity")
	errWrongType   = Error("WRONGTYPE Operation against a key holding the wrong kind of value")
	errNoSuchKey   = Error("ERR no such key")
	errOffset      = Error("ERR offset is out of range")
	errTooBig      = Error("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
	errInvalidCurs = Error("ERR invalid cursor")
)

func invalidExpire(cmd string) Reply {
	return Error("ERR invalid expire time in '" + cmd + "' command")
}

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

func putString(x *ctx, k, v []byte, expire int64) Reply {
	if err := x.store(k, &record{typ: typeString, expire: expire, value: v}); err != nil {
		return errReply(err)
	}
	return OK
}

func init() {
	def("get", 2, "readonly fast", 1, 1, 1, "string", "Returns the string value of a key.", cmdGet, nil)
	def("set", -3, "write denyoom", 1, 1, 1, "string", "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist.", cmdSet, checkSet)
	def("setnx", 3, "write denyoom fast", 1, 1, 1, "string", "Set the string value of a key only when the key doesn't exist.", cmdSetNX, nil)
	def("setex", 4, "write denyoom", 1, 1, 1, "string", "Sets the string value and expiration time of a key.", cmdSetEX, checkSetEX)
	def("psetex", 4, "write denyoom", 1, 1, 1, "string", "Sets both string value and expiration time in milliseconds of a key.", cmdSetEX, checkSetEX)
	def("getset", 3, "write denyoom fast", 1, 1, 1, "string", "Returns the previous string value of a key after setting it to a new value.", cmdGetSet, nil)
	def("getdel", 2, "write fast", 1, 1, 1, "string", "Returns the string value of a key after deleting the key.", cmdGetDel, nil)
	def("getex", -2, "write fast", 1, 1, 1, "string", "Returns the string value of a key after setting its expiration time.", cmdGetEx, checkGetEx)
	def("mget", -2, "readonly fast", 1, -1, 1, "string", "Atomically returns the string values of one or more keys.", cmdMGet, nil)
	def("mset", -3, "write denyoom", 1, -1, 2, "string", "Atomically creates or modifies the string values of one or more keys.", cmdMSet, checkPairs("mset"))
	def("msetnx", -3, "write denyoom", 1, -1, 2, "string", "Atomically modifies the string values of one or more keys only when all keys don't exist.", cmdMSetNX, checkPairs("msetnx"))
	def("incr", 2, "write denyoom fast", 1, 1, 1, "string", "Increments the integer value of a key by one.", cmdIncrBy, nil)
	def("decr", 2, "write denyoom fast", 1, 1, 1, "string", "Decrements the integer value of a key by one.", cmdIncrBy, nil)
	def("incrby", 3, "write denyoom fast", 1, 1, 1, "string", "Increments the integer value of a key by a number.", cmdIncrBy, checkIntArg(2))
	def("decrby", 3, "write denyoom fast", 1, 1, 1, "string", "Decrements a number from the integer value of a key.", cmdIncrBy, checkIntArg(2))
	def("incrbyfloat", 3, "write denyoom fast", 1, 1, 1, "string", "Increment the floating point value of a key by a number.", cmdIncrByFloat, checkFloatArg(2))
	def("append", 3, "write denyoom fast", 1, 1, 1, "string", "Appends a string to the value of a key. Creates the key if it doesn't exist.", cmdAppend, nil)
	def("strlen", 2, "readonly fast", 1, 1, 1, "string", "Returns the length of a string value.", cmdStrlen, nil)
	def("getrange", 4, "readonly", 1, 1, 1, "string", "Returns a substring of the string stored at a key.", cmdGetRange, checkIntArgs(2, 3))
	def("setrange", 4, "write denyoom", 1, 1, 1, "string", "Overwrites a part of a string value with another by an offset. Creates the key if it doesn't exist.", cmdSetRange, checkIntArg(2))
}

func cmdGet(x *ctx, args [][]byte) Reply {
	rec, ok, e := getString(x, args[1])
	if e != nil {
		return errReply(e)
	}
	if !ok {
		return Nil
	}
	return Bulk(rec.value)
}

// Flags of SET and GETEX options, as Redis's
// parseExtendedStringArgumentsOrReply sets them.
const (
	optNX = 1 << iota
	optXX
	optGet
	optKeepTTL
	optPersist
	optEX
	optPX
	optEXAT
	optPXAT
	optLease // kvorum: SET ... LEASE id

	optExpiry = optEX | optPX | optEXAT | optPXAT
)

// strOpts is the parsed tail of SET (from args[3]) or GETEX (from args[2]).
type strOpts struct {
	flags  int
	expire []byte // the last expiry argument; parsed by expiryMs
	lease  []byte // SET ... LEASE id (kvorum)
}

// parseStrOpts is a port of Redis 7's parseExtendedStringArgumentsOrReply:
// an option may repeat (the last expiry wins), conflicting ones are a
// syntax error, and the expiry number is not looked at yet.
func parseStrOpts(args [][]byte, from int, isSet bool) (strOpts, Reply, bool) {
	var o strOpts
	for j := from; j < len(args); j++ {
		a := args[j]
		hasNext := j+1 < len(args)
		f := o.flags
		switch {
		case eq(a, "NX") && f&optXX == 0 && isSet:
			o.flags |= optNX
		case eq(a, "XX") && f&optNX == 0 && isSet:
			o.flags |= optXX
		case eq(a, "GET") && isSet:
			o.flags |= optGet
		case eq(a, "KEEPTTL") && f&(optPersist|optExpiry) == 0 && isSet:
			o.flags |= optKeepTTL
		case eq(a, "PERSIST") && f&(optExpiry|optKeepTTL) == 0 && !isSet:
			o.flags |= optPersist
		case eq(a, "EX") && f&(optKeepTTL|optPersist|optEXAT|optPX|optPXAT) == 0 && hasNext:
			o.flags |= optEX
			o.expire = args[j+1]
			j++
		case eq(a, "PX") && f&(optKeepTTL|optPersist|optEX|optEXAT|optPXAT) == 0 && hasNext:
			o.flags |= optPX
			o.expire = args[j+1]
			j++
		case eq(a, "EXAT") && f&(optKeepTTL|optPersist|optEX|optPX|optPXAT) == 0 && hasNext:
			o.flags |= optEXAT
			o.expire = args[j+1]
			j++
		case eq(a, "PXAT") && f&(optKeepTTL|optPersist|optEX|optEXAT|optPX) == 0 && hasNext:
			o.flags |= optPXAT
			o.expire = args[j+1]
			j++
		case eq(a, "LEASE") && isSet && hasNext:
			o.flags |= optLease
			o.lease = args[j+1]
			j++
		default:
			return o, errSyntax, false
		}
	}
	return o, Reply{}, true
}

// expiryMs is Redis's getExpireMillisecondsOrReply: the absolute deadline
// in Unix ms of o's expiry, or an error reply.
func (o *strOpts) expiryMs(cmd string, now int64) (int64, Reply, bool) {
	n, ok := redisnum.ParseInt(o.expire)
	if !ok {
		return 0, errNotInt, false
	}
	seconds := o.flags&(optEX|optEXAT) != 0
	if n <= 0 || (seconds && n > math.MaxInt64/1000) {
		return 0, invalidExpire(cmd), false
	}
	if seconds {
		n *= 1000
	}
	if o.flags&(optEX|optPX) != 0 {
		if n > math.MaxInt64-now {
			// Redis overflows into a negative number and refuses it.
			return 0, invalidExpire(cmd), false
		}
		n += now
	}
	return n, Reply{}, true
}

// checkSet validates SET's options and, since Redis does so before looking
// at the key, its expiry number (relative overflow is left to Apply).
func checkSet(args [][]byte) (Reply, bool) {
	o, r, ok := parseStrOpts(args, 3, true)
	if ok && o.flags&optLease != 0 {
		if _, valid := parseID(o.lease); !valid {
			return errLeaseID, false
		}
	}
	if !ok || o.flags&optExpiry == 0 {
		return r, ok
	}
	if _, r, ok := o.expiryMs("set", 0); !ok {
		return r, false
	}
	return Reply{}, true
}

func cmdSet(x *ctx, args [][]byte) Reply {
	o, r, ok := parseStrOpts(args, 3, true)
	if !ok {
		return r
	}
	var expire int64
	if o.flags&optExpiry != 0 {
		if expire, r, ok = o.expiryMs("set", x.now); !ok {
			return r
		}
	}
	var leaseID uint64
	if o.flags&optLease != 0 {
		var valid bool
		if leaseID, valid = parseID(o.lease); !valid {
			return errLeaseID
		}
		if _, ok, err := x.getLease(leaseID); err != nil {
			return errReply(err)
		} else if !ok {
			return errNoLease(leaseID)
		}
	}
	get := o.flags&optGet != 0
	var rec record
	var exists bool
	var err error
	if get {
		rec, exists, err = x.load(args[1])
	} else {
		rec, exists, err = x.loadHeader(args[1]) // the old value is not needed
	}
	if err != nil {
		return errReply(err)
	}
	if get && exists && rec.typ != typeString {
		return errWrongType
	}
	var old Reply = Nil
	if get && exists {
		old = Bulk(rec.value)
	}
	if (o.flags&optNX != 0 && exists) || (o.flags&optXX != 0 && !exists) {
		return old // nil unless GET
	}
	if o.flags&optKeepTTL != 0 && exists {
		expire = rec.expire
	}
	if expire != 0 && expire <= x.now {
		// An absolute deadline in the past: the key is set and expires at once.
		if exists {
			if err := x.remove(args[1]); err != nil {
				return errReply(err)
			}
		}
	} else if r := putString(x, args[1], args[2], expire); r.IsError() {
		return r
	} else if leaseID != 0 {
		if err := x.attachKey(leaseID, args[1]); err != nil {
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
	if r := putString(x, args[1], args[2], 0); r.IsError() {
		return r
	}
	return Int(1)
}

// setexOpts reads SETEX/PSETEX's expiry the way Redis does (as SET EX/PX).
func setexOpts(args [][]byte) (strOpts, string) {
	if len(args[0]) == len("setex") {
		return strOpts{flags: optEX, expire: args[2]}, "setex"
	}
	return strOpts{flags: optPX, expire: args[2]}, "psetex"
}

func checkSetEX(args [][]byte) (Reply, bool) {
	o, name := setexOpts(args)
	if _, r, ok := o.expiryMs(name, 0); !ok {
		return r, false
	}
	return Reply{}, true
}

func cmdSetEX(x *ctx, args [][]byte) Reply {
	o, name := setexOpts(args)
	d, r, ok := o.expiryMs(name, x.now)
	if !ok {
		return r
	}
	return putString(x, args[1], args[3], d)
}

func cmdGetSet(x *ctx, args [][]byte) Reply {
	rec, ok, e := getString(x, args[1])
	if e != nil {
		return errReply(e)
	}
	if r := putString(x, args[1], args[2], 0); r.IsError() {
		return r
	}
	if !ok {
		return Nil
	}
	return Bulk(rec.value)
}

func cmdGetDel(x *ctx, args [][]byte) Reply {
	rec, ok, e := getString(x, args[1])
	if e != nil {
		return errReply(e)
	}
	if !ok {
		return Nil
	}
	if err := x.remove(args[1]); err != nil {
		return errReply(err)
	}
	return Bulk(rec.value)
}

// checkGetEx validates GETEX's syntax only: Redis looks at the expiry
// number after the key (GETEX missing EX abc is a nil reply).
func checkGetEx(args [][]byte) (Reply, bool) {
	_, r, ok := parseStrOpts(args, 2, false)
	return r, ok
}

func cmdGetEx(x *ctx, args [][]byte) Reply {
	o, r, ok := parseStrOpts(args, 2, false)
	if !ok {
		return r
	}
	rec, exists, e := getString(x, args[1])
	if e != nil {
		return errReply(e)
	}
	if !exists {
		return Nil
	}
	switch {
	case o.flags&optExpiry != 0:
		d, r, ok := o.expiryMs("getex", x.now)
		if !ok {
			return r
		}
		if d <= x.now {
			if err := x.remove(args[1]); err != nil {
				return errReply(err)
			}
		} else {
			rec.expire = d
			if err := x.store(args[1], &rec); err != nil {
				return errReply(err)
			}
		}
	case o.flags&optPersist != 0 && rec.expire != 0:
		rec.expire = 0
		if err := x.store(args[1], &rec); err != nil {
			return errReply(err)
		}
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

func checkPairs(name string) func([][]byte) (Reply, bool) {
	return func(args [][]byte) (Reply, bool) {
		if len(args)%2 != 1 {
			return wrongArity(name), false
		}
		return Reply{}, true
	}
}

func cmdMSet(x *ctx, args [][]byte) Reply {
	for i := 1; i+1 < len(args); i += 2 {
		if r := putString(x, args[i], args[i+1], 0); r.IsError() {
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

func checkIntArg(i int) func([][]byte) (Reply, bool) {
	return func(args [][]byte) (Reply, bool) {
		if _, ok := redisnum.ParseInt(args[i]); !ok {
			return errNotInt, false
		}
		return Reply{}, true
	}
}

func checkIntArgs(is ...int) func([][]byte) (Reply, bool) {
	return func(args [][]byte) (Reply, bool) {
		for _, i := range is {
			if _, ok := redisnum.ParseInt(args[i]); !ok {
				return errNotInt, false
			}
		}
		return Reply{}, true
	}
}

func cmdIncrBy(x *ctx, args [][]byte) Reply {
	var delta int64
	switch strings.ToLower(string(args[0])) {
	case "incr":
		delta = 1
	case "decr":
		delta = -1
	case "incrby":
		delta, _ = redisnum.ParseInt(args[2])
	case "decrby":
		d, _ := redisnum.ParseInt(args[2])
		if d == math.MinInt64 {
			return Error("ERR decrement would overflow")
		}
		delta = -d
	}
	rec, ok, e := getString(x, args[1])
	if e != nil {
		return errReply(e)
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
	var expire int64
	if ok {
		expire = rec.expire
	}
	if r := putString(x, args[1], strconv.AppendInt(nil, cur, 10), expire); r.IsError() {
		return r
	}
	return Int(cur)
}

func checkFloatArg(i int) func([][]byte) (Reply, bool) {
	return func(args [][]byte) (Reply, bool) {
		if _, ok := redisnum.ParseLongDouble(args[i]); !ok {
			return errNotFloat, false
		}
		return Reply{}, true
	}
}

func cmdIncrByFloat(x *ctx, args [][]byte) Reply {
	incr, ok := redisnum.ParseLongDouble(args[2])
	if !ok {
		return errNotFloat
	}
	rec, exists, e := getString(x, args[1])
	if e != nil {
		return errReply(e)
	}
	cur := new(big.Float).SetPrec(64)
	if exists {
		v, good := redisnum.ParseLongDouble(rec.value)
		if !good {
			return errNotFloat
		}
		cur = v
	}
	if incr.IsInf() || cur.IsInf() {
		return errNaN
	}
	sum := new(big.Float).SetPrec(64).SetMode(big.ToNearestEven).Add(cur, incr)
	// x87 extended range: beyond ~1.19e4932 Redis gets Infinity.
	if sum.Sign() != 0 && sum.MantExp(nil) > 16384 {
		return errNaN
	}
	out := []byte(redisnum.FormatLongDouble(sum))
	var expire int64
	if exists {
		expire = rec.expire
	}
	if r := putString(x, args[1], out, expire); r.IsError() {
		return r
	}
	return Bulk(out)
}

func cmdAppend(x *ctx, args [][]byte) Reply {
	rec, ok, e := getString(x, args[1])
	if e != nil {
		return errReply(e)
	}
	if len(rec.value)+len(args[2]) > maxStringSize {
		return errTooBig
	}
	v := append(rec.value, args[2]...)
	var expire int64
	if ok {
		expire = rec.expire
	}
	if r := putString(x, args[1], v, expire); r.IsError() {
		return r
	}
	return Int(int64(len(v)))
}

func cmdStrlen(x *ctx, args [][]byte) Reply {
	rec, _, e := getString(x, args[1])
	if e != nil {
		return errReply(e)
	}
	return Int(int64(len(rec.value)))
}

func cmdGetRange(x *ctx, args [][]byte) Reply {
	start, _ := redisnum.ParseInt(args[2])
	end, _ := redisnum.ParseInt(args[3])
	rec, _, e := getString(x, args[1])
	if e != nil {
		return errReply(e)
	}
	n := int64(len(rec.value))
	if start < 0 && end < 0 && start > end {
		return Bulk([]byte{})
	}
	if start < 0 {
		start += n
	}
	if end < 0 {
		end += n
	}
	if start < 0 {
		start = 0
	}
	if end < 0 {
		end = 0
	}
	if end >= n {
		end = n - 1
	}
	if n == 0 || start > end {
		return Bulk([]byte{})
	}
	return Bulk(rec.value[start : end+1])
}

func cmdSetRange(x *ctx, args [][]byte) Reply {
	off, _ := redisnum.ParseInt(args[2])
	if off < 0 {
		return errOffset
	}
	val := args[3]
	rec, ok, e := getString(x, args[1])
	if e != nil {
		return errReply(e)
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
	var expire int64
	if ok {
		expire = rec.expire
	}
	if r := putString(x, args[1], v, expire); r.IsError() {
		return r
	}
	return Int(int64(len(v)))
}

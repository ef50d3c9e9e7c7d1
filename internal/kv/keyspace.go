package kv

import (
	"github.com/kvorum/kvorum/internal/notify"

	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/cursor"
	"github.com/kvorum/kvorum/internal/glob"
	"github.com/kvorum/kvorum/internal/redisnum"
	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/stringargs"
)

func init() {
	def("del", -2, "write", 1, -1, 1, "generic", "Deletes one or more keys.", cmdDel, nil)
	def("unlink", -2, "write fast", 1, -1, 1, "generic", "Asynchronously deletes one or more keys.", cmdDel, nil)
	def("exists", -2, "readonly fast", 1, -1, 1, "generic", "Determines whether one or more keys exist.", cmdExists, nil)
	def("type", 2, "readonly fast", 1, 1, 1, "generic", "Determines the type of value stored at a key.", cmdType, nil)
	def("ttl", 2, "readonly fast", 1, 1, 1, "generic", "Returns the expiration time in seconds of a key.", cmdTTL, nil)
	def("pttl", 2, "readonly fast", 1, 1, 1, "generic", "Returns the expiration time in milliseconds of a key.", cmdTTL, nil)
	def("expiretime", 2, "readonly fast", 1, 1, 1, "generic", "Returns the expiration time of a key as a Unix timestamp.", cmdTTL, nil)
	def("pexpiretime", 2, "readonly fast", 1, 1, 1, "generic", "Returns the expiration time of a key as a Unix milliseconds timestamp.", cmdTTL, nil)
	defParsed("expire", -3, "write fast", 1, 1, 1, "generic", "Sets the expiration time of a key in seconds.", parseExpire, cmdExpire)
	defParsed("pexpire", -3, "write fast", 1, 1, 1, "generic", "Sets the expiration time of a key in milliseconds.", parseExpire, cmdExpire)
	defParsed("expireat", -3, "write fast", 1, 1, 1, "generic", "Sets the expiration time of a key to a Unix timestamp.", parseExpire, cmdExpire)
	defParsed("pexpireat", -3, "write fast", 1, 1, 1, "generic", "Sets the expiration time of a key to a Unix milliseconds timestamp.", parseExpire, cmdExpire)
	def("persist", 2, "write fast", 1, 1, 1, "generic", "Removes the expiration time of a key.", cmdPersist, nil)
	def("rename", 3, "write", 1, 2, 1, "generic", "Renames a key and overwrites the destination.", cmdRename, nil)
	def("renamenx", 3, "write fast", 1, 2, 1, "generic", "Renames a key only when the target key name doesn't exist.", cmdRename, nil)
	def("keys", 2, "readonly", 0, 0, 0, "generic", "Returns all key names that match a pattern.", cmdKeys, nil)
	defParsed("scan", -2, "readonly", 0, 0, 0, "generic", "Iterates over the key names in the database.", parseScan, cmdScan)
	def("randomkey", 1, "readonly", 0, 0, 0, "generic", "Returns a random key name from the database.", cmdRandomKey, nil)
	def("dbsize", 1, "readonly fast", 0, 0, 0, "server", "Returns the number of keys in the database.", cmdDBSize, nil)
	// FLUSHDB and FLUSHALL's option only needs checking.
	def("flushdb", -1, "write", 0, 0, 0, "server", "Removes all keys from the current database.", cmdFlush, checkFlush)
	def("flushall", -1, "write", 0, 0, 0, "server", "Removes all keys from all databases.", cmdFlush, checkFlush)
	def("kvorum.delexpired", -2, "write", 1, -1, 1, "generic", "Internal: deletes keys whose deadline has passed.", cmdDelExpired, nil)
	table["kvorum.delexpired"].internal = true
	def("kvorum.ttlindex", 1, "write", 0, 0, 0, "generic", "Internal: indexes the deadlines of the next keys written before the expiry index existed.", cmdTTLIndex, nil)
	table["kvorum.ttlindex"].internal = true
	specList = specList[:len(specList)-2]
}

func cmdDel(x *ctx, args [][]byte) Reply { return countKeys(x, args[1:], true) }

// cmdExists serves EXISTS and TOUCH (kvorum does not track access).
func cmdExists(x *ctx, args [][]byte) Reply { return countKeys(x, args[1:], false) }

// countKeys replies how many of keys exist (a key named twice counts
// twice) and, if del, deletes each of them, expired leftovers too. A
// collection's elements go with one range deletion, so DEL is O(1)
// whatever the size.
func countKeys(x *ctx, keys [][]byte, del bool) Reply {
	var n int64
	for _, k := range keys {
		_, ok, err := x.loadHeader(k)
		if err != nil {
			return errReply(err)
		}
		if ok {
			n++
		}
		if del {
			if err := x.remove(k); err != nil {
				return errReply(err)
			}
			if ok {
				x.event(notify.Generic, "del", k)
			}
		}
	}
	return Int(n)
}

func cmdType(x *ctx, args [][]byte) Reply {
	rec, ok, err := x.loadHeader(args[1])
	if err != nil || !ok {
		return errOr(err, Status("none"))
	}
	return Status(typeName(rec.typ))
}

func cmdTTL(x *ctx, args [][]byte) Reply {
	rec, ok, err := x.loadHeader(args[1])
	if err != nil || !ok {
		return errOr(err, Int(-2))
	}
	if rec.expire == 0 {
		return Int(-1)
	}
	switch strings.ToLower(string(args[0])) {
	case "ttl":
		return Int((rec.expire - x.now + 500) / 1000)
	case "pttl":
		return Int(rec.expire - x.now)
	case "expiretime":
		return Int((rec.expire + 500) / 1000)
	default:
		return Int(rec.expire)
	}
}

// expireArgs is a parsed EXPIRE, PEXPIRE, EXPIREAT or PEXPIREAT.
type expireArgs struct {
	cmd            string // the command's name, for errors
	when           int64  // ms: a deadline, or relative to the command's time
	relative       bool   // EXPIRE, PEXPIRE
	nx, xx, gt, lt bool
}

// parseExpire parses EXPIRE's options, then its number, in Redis's order,
// and converts the number to milliseconds: Redis refuses one that
// overflows then, before it looks at the key (the overflow of adding the
// command's time is left to cmdExpire).
func parseExpire(args [][]byte) (expireArgs, Reply, bool) {
	var a expireArgs
	for _, o := range args[3:] {
		switch {
		case eq(o, "NX"):
			a.nx = true
		case eq(o, "XX"):
			a.xx = true
		case eq(o, "GT"):
			a.gt = true
		case eq(o, "LT"):
			a.lt = true
		default:
			b := reply.AppendCString([]byte("ERR Unsupported option "), o, len(o))
			return a, reply.ErrorText(b), false
		}
	}
	if a.nx && (a.xx || a.gt || a.lt) {
		return a, Error("ERR NX and XX, GT or LT options at the same time are not compatible"), false
	}
	if a.gt && a.lt {
		return a, Error("ERR GT and LT options at the same time are not compatible"), false
	}
	n, r, ok := parseIntArg(args[2])
	if !ok {
		return a, r, false
	}
	var seconds bool
	switch {
	case eq(args[0], "expire"):
		a.cmd, seconds, a.relative = "expire", true, true
	case eq(args[0], "pexpire"):
		a.cmd, a.relative = "pexpire", true
	case eq(args[0], "expireat"):
		a.cmd, seconds = "expireat", true
	default:
		a.cmd = "pexpireat"
	}
	if seconds {
		if n > math.MaxInt64/1000 || n < math.MinInt64/1000 {
			return a, stringargs.InvalidExpire(a.cmd), false
		}
		n *= 1000
	}
	a.when = n
	return a, Reply{}, true
}

func cmdExpire(x *ctx, args [][]byte, a expireArgs) Reply {
	when := a.when
	if a.relative {
		if (when > 0 && x.now > math.MaxInt64-when) || (when < 0 && x.now < math.MinInt64-when) {
			return stringargs.InvalidExpire(a.cmd)
		}
		when += x.now
	}
	rec, exists, err := x.load(args[1])
	if err != nil || !exists {
		return errOr(err, Int(0))
	}
	cur := rec.expire
	switch {
	case a.nx && cur != 0, a.xx && cur == 0:
		return Int(0)
	case a.gt && (cur == 0 || when <= cur):
		return Int(0)
	case a.lt && cur != 0 && when >= cur:
		return Int(0)
	}
	if when <= x.now {
		if err := x.del(args[1]); err != nil {
			return errReply(err)
		}
		return Int(1)
	}
	rec.expire = when
	if err := x.store(args[1], &rec); err != nil {
		return errReply(err)
	}
	x.event(notify.Generic, "expire", args[1])
	return Int(1)
}

func cmdPersist(x *ctx, args [][]byte) Reply {
	rec, ok, err := x.load(args[1])
	if err != nil {
		return errReply(err)
	}
	if !ok || rec.expire == 0 {
		return Int(0)
	}
	rec.expire = 0
	if err := x.store(args[1], &rec); err != nil {
		return errReply(err)
	}
	x.event(notify.Generic, "persist", args[1])
	return Int(1)
}

// cmdRename moves the metadata record (value and TTL included). A
// collection's elements are copied to a new incarnation under the new name
// (O(N), unlike Redis's O(1)) and the old ones dropped with one range
// deletion.
func cmdRename(x *ctx, args [][]byte) Reply {
	nx := strings.EqualFold(string(args[0]), "renamenx")
	rec, ok, err := x.load(args[1])
	if err != nil || !ok {
		return errOr(err, errNoSuchKey)
	}
	if string(args[1]) == string(args[2]) {
		if nx {
			return Int(0)
		}
		return OK
	}
	if nx {
		_, exists, err := x.loadHeader(args[2])
		if err != nil {
			return errReply(err)
		}
		if exists {
			return Int(0)
		}
	}
	if isCollection(rec.typ) {
		if rec, err = x.copyColl(args[1], args[2], rec); err != nil {
			return errReply(err)
		}
	}
	if err := x.newOver(args[2]); err != nil {
		return errReply(err)
	}
	if err := x.remove(args[1]); err != nil {
		return errReply(err)
	}
	if err := x.store(args[2], &rec); err != nil {
		return errReply(err)
	}
	x.event(notify.Generic, "rename_from", args[1])
	x.event(notify.Generic, "rename_to", args[2])
	if nx {
		return Int(1)
	}
	return OK
}

func cmdKeys(x *ctx, args [][]byte) Reply {
	var out []Reply
	pat := args[1]
	all := len(pat) == 1 && pat[0] == '*'
	err := iterKeys(x.r, nil, x.now, func(user, _ []byte, _ *record) bool {
		if all || glob.Match(pat, user, false) {
			out = append(out, Bulk(append([]byte(nil), user...)))
		}
		return true
	})
	if err != nil {
		return errReply(err)
	}
	return Array(out...)
}

// SCAN cursors (package cursor has the design): a position is the
// storage key of the last key a call visited (metaKey: slot-ordered); its
// head is the 0x11 prefix, so a cursor's P is the slot (2 bytes) and the
// first 2 bytes of the escaped key.
// HSCAN, SSCAN and ZSCAN cursors are kept in the same table with the
// collection's key and incarnation (scanPage).
var cursors cursor.Table

// parseCursor reads a cursor like Redis's strtoul-based
// parseScanCursorOrReply: optional sign (a minus wraps), digits, nothing
// else; the empty string is 0.
func parseCursor(b []byte) (uint64, bool) {
	if len(b) > 0 && (b[0] == ' ' || (b[0] >= '\t' && b[0] <= '\r')) {
		return 0, false
	}
	neg := false
	digits := b
	if len(digits) > 0 && (digits[0] == '+' || digits[0] == '-') {
		neg = digits[0] == '-'
		digits = digits[1:]
	}
	if len(digits) == 0 {
		// strtoul parsed nothing: the cursor is 0 if nothing else is there.
		return 0, len(b) == 0
	}
	n, err := strconv.ParseUint(string(digits), 10, 64)
	if err != nil {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

type scanOpts struct {
	cursor uint64
	match  []byte
	count  int64
	typ    []byte
}

func parseScan(args [][]byte) (scanOpts, Reply, bool) {
	o := scanOpts{count: 10}
	c, ok := parseCursor(args[1])
	if !ok {
		return o, errInvalidCurs, false
	}
	o.cursor = c
	for i := 2; i < len(args); i += 2 {
		if i+1 >= len(args) {
			return o, errSyntax, false
		}
		switch {
		case eq(args[i], "COUNT"):
			n, ok := redisnum.ParseInt(args[i+1])
			if !ok {
				return o, errNotInt, false
			}
			if n < 1 {
				return o, errSyntax, false
			}
			o.count = n
		case eq(args[i], "MATCH"):
			o.match = args[i+1]
			if len(o.match) == 1 && o.match[0] == '*' {
				o.match = nil
			}
		case eq(args[i], "TYPE"):
			o.typ = args[i+1]
		default:
			return o, errSyntax, false
		}
	}
	return o, Reply{}, true
}

func cmdScan(x *ctx, args [][]byte, o scanOpts) Reply {
	var after, from []byte
	if o.cursor != 0 {
		var ok bool
		if after, ok = cursors.Resume(o.cursor, nil, 0); !ok {
			from = append([]byte{slotPrefix}, cursor.Fallback(o.cursor)...)
		}
	}
	var keys []Reply
	var seen int64
	var last []byte
	more := false
	visit := func(user, sk []byte, rec *record) bool {
		if seen >= o.count {
			more = true
			return false
		}
		seen++
		last = append(last[:0], sk...)
		if o.match != nil && !glob.Match(o.match, user, false) {
			return true
		}
		if o.typ != nil && !eq(o.typ, typeName(rec.typ)) {
			return true
		}
		keys = append(keys, Bulk(append([]byte(nil), user...)))
		return true
	}
	var err error
	if after != nil {
		err = iterKeys(x.r, after, x.now, visit)
	} else {
		err = iterKeysFrom(x.r, from, x.now, visit)
	}
	if err != nil {
		return errReply(err)
	}
	next := uint64(0)
	if more {
		next = cursors.Remember(cursor.Prefix(last[1:]), nil, 0, last)
	}
	if keys == nil {
		keys = []Reply{}
	}
	return Array(BulkString(strconv.FormatUint(next, 10)), Array(keys...))
}

// cmdRandomKey returns a random live key. A database of up to
// randomKeyExact keys is sampled exactly uniformly (one pass, reservoir
// sampling). A larger one is sampled approximately: seek to a uniformly
// random point between the first and the last key (interpolating on the 8
// bytes after their common prefix) and pick uniformly among the next
// randomKeyWindow keys. Reads may use randomness; RANDOMKEY is never
// replicated.
func cmdRandomKey(x *ctx, _ [][]byte) Reply {
	const randomKeyExact, randomKeyWindow = 1024, 64
	found := make([]byte, 0, 64) // never nil: "" is a valid key
	n := 0
	sample := func(limit int) func(user, _ []byte, _ *record) bool {
		return func(user, _ []byte, _ *record) bool {
			n++
			if rand.IntN(n) == 0 {
				found = append(found[:0], user...)
			}
			return n < limit
		}
	}
	if err := iterKeysFrom(x.r, nil, x.now, sample(randomKeyExact+1)); err != nil {
		return errReply(err)
	}
	if n <= randomKeyExact {
		if n == 0 {
			return Nil
		}
		return Bulk(found)
	}
	start, end := userKeySpan()
	it, err := x.r.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return errReply(err)
	}
	var first, last []byte
	if it.First() {
		first = append(first, it.Key()...)
		if it.Last() {
			last = append(last, it.Key()...)
		}
	}
	if err := it.Close(); err != nil {
		return errReply(err)
	}
	c := 0
	for c < len(first) && c < len(last) && first[c] == last[c] {
		c++
	}
	lo, hi := be8(first[c:]), be8(last[c:])
	if hi < lo {
		hi = lo
	}
	seek := binary.BigEndian.AppendUint64(append([]byte(nil), first[:c]...), lo+rand.Uint64N(hi-lo+1))
	n = 0
	if err := iterKeysFrom(x.r, seek, x.now, sample(randomKeyWindow)); err != nil {
		return errReply(err)
	}
	if n < randomKeyWindow {
		// Near the end: the window continues at the beginning.
		if err := iterKeysFrom(x.r, nil, x.now, sample(randomKeyWindow)); err != nil {
			return errReply(err)
		}
	}
	if n == 0 {
		return Nil
	}
	return Bulk(found)
}

// be8 reads up to 8 bytes of b as a big-endian number, zero padded.
func be8(b []byte) uint64 {
	var p [8]byte
	copy(p[:], b)
	return binary.BigEndian.Uint64(p[:])
}

func cmdDBSize(x *ctx, _ [][]byte) Reply {
	var n int64
	// Like Redis, keys that expired but were not deleted yet still count.
	err := iterKeys(x.r, nil, math.MinInt64, func(_, _ []byte, _ *record) bool {
		n++
		return true
	})
	if err != nil {
		return errReply(err)
	}
	return Int(n)
}

func checkFlush(args [][]byte) (Reply, bool) {
	if len(args) > 2 {
		return errSyntax, false
	}
	if len(args) == 2 && !eq(args[1], "ASYNC") && !eq(args[1], "SYNC") {
		return errSyntax, false
	}
	return Reply{}, true
}

func cmdFlush(x *ctx, _ [][]byte) Reply {
	// Every user key, element and expiry index entry of the range's
	// slots (flushUserKeys); the other hidden keys
	// (version counter, script cache, and each slot's WATCH tombstones,
	// registrations and wait queues) stay, as Redis keeps its script
	// cache and its blocked clients on FLUSHALL. The watched keys it
	// deletes get their tombstone first (tomb.go).
	if err := x.tombFlushed(); err != nil {
		return errReply(err)
	}
	if err := x.flushUserKeys(); err != nil {
		return errReply(err)
	}
	if x.cache != nil {
		x.cache.Clear()
	}
	if err := x.setIndexKey(x.rangeKey(rangeFlush)); err != nil {
		return errReply(err)
	}
	return OK
}

func cmdDelExpired(x *ctx, args [][]byte) Reply {
	var n int64
	for _, k := range args[1:] {
		// x.get hides expired records, so read the header directly.
		v, c, err := x.r.Get(x.metaKey(k))
		if errors.Is(err, pebble.ErrNotFound) {
			continue
		}
		if err != nil {
			return errReply(err)
		}
		rec, derr := decodeHeader(v)
		_ = c.Close()
		if derr != nil || !rec.expired(x.now) {
			continue
		}
		if err := x.remove(k); err != nil {
			return errReply(err)
		}
		x.event(notify.Expired, "expired", k)
		n++
	}
	if x.fx != nil {
		x.fx.Expired += int(n)
	}
	return Int(n)
}

package kv

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"
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
	def("expire", -3, "write fast", 1, 1, 1, "generic", "Sets the expiration time of a key in seconds.", cmdExpire, checkExpire)
	def("pexpire", -3, "write fast", 1, 1, 1, "generic", "Sets the expiration time of a key in milliseconds.", cmdExpire, checkExpire)
	def("expireat", -3, "write fast", 1, 1, 1, "generic", "Sets the expiration time of a key to a Unix timestamp.", cmdExpire, checkExpire)
	def("pexpireat", -3, "write fast", 1, 1, 1, "generic", "Sets the expiration time of a key to a Unix milliseconds timestamp.", cmdExpire, checkExpire)
	def("persist", 2, "write fast", 1, 1, 1, "generic", "Removes the expiration time of a key.", cmdPersist, nil)
	def("rename", 3, "write", 1, 2, 1, "generic", "Renames a key and overwrites the destination.", cmdRename, nil)
	def("renamenx", 3, "write fast", 1, 2, 1, "generic", "Renames a key only when the target key name doesn't exist.", cmdRename, nil)
	def("keys", 2, "readonly", 0, 0, 0, "generic", "Returns all key names that match a pattern.", cmdKeys, nil)
	def("scan", -2, "readonly", 0, 0, 0, "generic", "Iterates over the key names in the database.", cmdScan, checkScan)
	def("randomkey", 1, "readonly", 0, 0, 0, "generic", "Returns a random key name from the database.", cmdRandomKey, nil)
	def("dbsize", 1, "readonly fast", 0, 0, 0, "server", "Returns the number of keys in the database.", cmdDBSize, nil)
	def("flushdb", -1, "write", 0, 0, 0, "server", "Removes all keys from the current database.", cmdFlush, checkFlush)
	def("flushall", -1, "write", 0, 0, 0, "server", "Removes all keys from all databases.", cmdFlush, checkFlush)
	def("kvorum.delexpired", -2, "write", 1, -1, 1, "generic", "Internal: deletes keys whose deadline has passed.", cmdDelExpired, nil)
	table["kvorum.delexpired"].internal = true
	specList = specList[:len(specList)-1]
}

func cmdDel(x *ctx, args [][]byte) Reply {
	var n int64
	for _, k := range args[1:] {
		_, ok, err := load(x.r, k, x.now)
		if err != nil {
			return errStorage(err)
		}
		if ok {
			n++
		}
		// Delete expired leftovers too.
		if err := remove(x.w, k); err != nil {
			return errStorage(err)
		}
	}
	return Int(n)
}

func cmdExists(x *ctx, args [][]byte) Reply {
	var n int64
	for _, k := range args[1:] {
		_, ok, err := load(x.r, k, x.now)
		if err != nil {
			return errStorage(err)
		}
		if ok {
			n++
		}
	}
	return Int(n)
}

func cmdType(x *ctx, args [][]byte) Reply {
	rec, ok, err := load(x.r, args[1], x.now)
	if err != nil {
		return errStorage(err)
	}
	if !ok {
		return Status("none")
	}
	return Status(typeName(rec.typ))
}

func cmdTTL(x *ctx, args [][]byte) Reply {
	rec, ok, err := load(x.r, args[1], x.now)
	if err != nil {
		return errStorage(err)
	}
	if !ok {
		return Int(-2)
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
		return Int(rec.expire / 1000)
	default:
		return Int(rec.expire)
	}
}

type expireOpts struct{ nx, xx, gt, lt bool }

func parseExpire(args [][]byte) (int64, expireOpts, Reply, bool) {
	var o expireOpts
	n, ok := parseInt(args[2])
	if !ok {
		return 0, o, errNotInt, false
	}
	for _, a := range args[3:] {
		switch strings.ToUpper(string(a)) {
		case "NX":
			o.nx = true
		case "XX":
			o.xx = true
		case "GT":
			o.gt = true
		case "LT":
			o.lt = true
		default:
			return 0, o, Error("ERR Unsupported option " + string(a)), false
		}
	}
	if o.nx && (o.xx || o.gt || o.lt) {
		return 0, o, Error("ERR NX and XX, GT or LT options at the same time are not compatible"), false
	}
	if o.gt && o.lt {
		return 0, o, Error("ERR GT and LT options at the same time are not compatible"), false
	}
	return n, o, Reply{}, true
}

func checkExpire(args [][]byte) (Reply, bool) {
	_, _, r, ok := parseExpire(args)
	return r, ok
}

func cmdExpire(x *ctx, args [][]byte) Reply {
	n, o, r, ok := parseExpire(args)
	if !ok {
		return r
	}
	name := strings.ToLower(string(args[0]))
	var when int64
	overflow := false
	switch name {
	case "expire":
		if n > math.MaxInt64/1000 || n < math.MinInt64/1000 {
			overflow = true
		} else {
			n *= 1000
		}
		fallthrough
	case "pexpire":
		if !overflow && ((n > 0 && x.now > math.MaxInt64-n) || (n < 0 && x.now < math.MinInt64-n)) {
			overflow = true
		}
		when = x.now + n
	case "expireat":
		if n > math.MaxInt64/1000 || n < math.MinInt64/1000 {
			overflow = true
		}
		when = n * 1000
	case "pexpireat":
		when = n
	}
	if overflow {
		return invalidExpire(name)
	}
	rec, exists, err := load(x.r, args[1], x.now)
	if err != nil {
		return errStorage(err)
	}
	if !exists {
		return Int(0)
	}
	cur := rec.expire
	switch {
	case o.nx && cur != 0, o.xx && cur == 0:
		return Int(0)
	case o.gt && (cur == 0 || when <= cur):
		return Int(0)
	case o.lt && cur != 0 && when >= cur:
		return Int(0)
	}
	if when <= x.now {
		if err := remove(x.w, args[1]); err != nil {
			return errStorage(err)
		}
		return Int(1)
	}
	rec.expire = when
	if err := store(x.w, args[1], &rec); err != nil {
		return errStorage(err)
	}
	return Int(1)
}

func cmdPersist(x *ctx, args [][]byte) Reply {
	rec, ok, err := load(x.r, args[1], x.now)
	if err != nil {
		return errStorage(err)
	}
	if !ok || rec.expire == 0 {
		return Int(0)
	}
	rec.expire = 0
	if err := store(x.w, args[1], &rec); err != nil {
		return errStorage(err)
	}
	return Int(1)
}

func cmdRename(x *ctx, args [][]byte) Reply {
	nx := strings.EqualFold(string(args[0]), "renamenx")
	rec, ok, err := load(x.r, args[1], x.now)
	if err != nil {
		return errStorage(err)
	}
	if !ok {
		return errNoSuchKey
	}
	if string(args[1]) == string(args[2]) {
		if nx {
			return Int(0)
		}
		return OK
	}
	if nx {
		_, exists, err := load(x.r, args[2], x.now)
		if err != nil {
			return errStorage(err)
		}
		if exists {
			return Int(0)
		}
	}
	if err := remove(x.w, args[1]); err != nil {
		return errStorage(err)
	}
	if err := store(x.w, args[2], &rec); err != nil {
		return errStorage(err)
	}
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
		if all || globMatch(pat, user, false) {
			out = append(out, Bulk(user))
		}
		return true
	})
	if err != nil {
		return errStorage(err)
	}
	return Array(out...)
}

// SCAN cursors. A cursor is a number; the node remembers, for a while, the
// storage key each cursor it handed out stopped at, so a scan resumes
// exactly there (every key present for the whole scan is returned once; a
// key added or removed meanwhile may or may not be). A cursor this node does
// not remember (another node issued it, or it expired after cursorTTL) is
// read as a position in key order: still complete if nothing before the
// position was deleted meanwhile.
var cursors struct {
	sync.Mutex
	m    map[uint64]cursorState
	last time.Time
}

type cursorState struct {
	after []byte
	pos   uint64
	at    time.Time
}

const (
	cursorTTL   = 10 * time.Minute
	cursorLimit = 100000
)

func rememberCursor(after []byte, pos uint64) uint64 {
	cursors.Lock()
	defer cursors.Unlock()
	if cursors.m == nil {
		cursors.m = map[uint64]cursorState{}
	}
	now := time.Now()
	if len(cursors.m) >= cursorLimit || now.Sub(cursors.last) > time.Minute {
		for k, v := range cursors.m {
			if now.Sub(v.at) > cursorTTL || len(cursors.m) >= cursorLimit {
				delete(cursors.m, k)
			}
		}
		cursors.last = now
	}
	// The low 32 bits carry the position so that an unknown cursor still
	// means something; the high bits make it unique.
	id := rand.Uint64()&^0xFFFFFFFF | pos&0xFFFFFFFF
	if id == 0 {
		id = 1 << 32
	}
	cursors.m[id] = cursorState{after: after, pos: pos, at: now}
	return id
}

func recallCursor(id uint64) (cursorState, bool) {
	cursors.Lock()
	defer cursors.Unlock()
	c, ok := cursors.m[id]
	return c, ok
}

type scanOpts struct {
	cursor uint64
	match  []byte
	count  int64
	typ    string
}

func parseScan(args [][]byte) (scanOpts, Reply, bool) {
	o := scanOpts{count: 10}
	c, err := strconv.ParseUint(string(args[1]), 10, 64)
	if err != nil {
		return o, errInvalidCurs, false
	}
	o.cursor = c
	for i := 2; i < len(args); i++ {
		a := strings.ToUpper(string(args[i]))
		if i+1 >= len(args) {
			return o, errSyntax, false
		}
		switch a {
		case "MATCH":
			o.match = args[i+1]
		case "COUNT":
			n, ok := parseInt(args[i+1])
			if !ok {
				return o, errNotInt, false
			}
			if n < 1 {
				return o, errSyntax, false
			}
			o.count = n
		case "TYPE":
			o.typ = strings.ToLower(string(args[i+1]))
		default:
			return o, errSyntax, false
		}
		i++
	}
	return o, Reply{}, true
}

func checkScan(args [][]byte) (Reply, bool) {
	_, r, ok := parseScan(args)
	return r, ok
}

func cmdScan(x *ctx, args [][]byte) Reply {
	o, r, ok := parseScan(args)
	if !ok {
		return r
	}
	var after []byte
	var pos uint64
	skip := uint64(0)
	if o.cursor != 0 {
		if st, ok := recallCursor(o.cursor); ok {
			after, pos = st.after, st.pos
		} else {
			skip = o.cursor & 0xFFFFFFFF
			pos = skip
		}
	}
	var keys []Reply
	var seen int64
	var last []byte
	more := false
	err := iterKeys(x.r, after, x.now, func(user, sk []byte, rec *record) bool {
		if skip > 0 {
			skip--
			return true
		}
		if seen >= o.count {
			more = true
			return false
		}
		seen++
		pos++
		last = sk
		if o.match != nil && !globMatch(o.match, user, false) {
			return true
		}
		if o.typ != "" && typeName(rec.typ) != o.typ {
			return true
		}
		keys = append(keys, Bulk(user))
		return true
	})
	if err != nil {
		return errStorage(err)
	}
	next := uint64(0)
	if more {
		next = rememberCursor(last, pos)
	}
	if keys == nil {
		keys = []Reply{}
	}
	return Array(BulkString(strconv.FormatUint(next, 10)), Array(keys...))
}

func cmdRandomKey(x *ctx, _ [][]byte) Reply {
	var seek [9]byte
	seek[0] = userPrefix
	for i := 1; i < len(seek); i++ {
		seek[i] = byte(rand.IntN(256))
	}
	var found []byte
	pick := func(from []byte) {
		_ = iterKeys(x.r, from, x.now, func(user, _ []byte, _ *record) bool {
			found = user
			return false
		})
	}
	pick(seek[:])
	if found == nil {
		pick(nil)
	}
	if found == nil {
		return Nil
	}
	return Bulk(found)
}

func cmdDBSize(x *ctx, _ [][]byte) Reply {
	var n int64
	// Like Redis, keys that expired but were not deleted yet still count.
	err := iterKeys(x.r, nil, math.MinInt64, func(_, _ []byte, _ *record) bool {
		n++
		return true
	})
	if err != nil {
		return errStorage(err)
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
	start, end := UserSpan()
	if err := x.w.DeleteRange(start, end, nil); err != nil {
		return errStorage(err)
	}
	return OK
}

func cmdDelExpired(x *ctx, args [][]byte) Reply {
	var n int64
	for _, k := range args[1:] {
		v, c, err := x.r.Get(metaKey(k))
		if err != nil {
			continue
		}
		rec, derr := decodeRecord(v)
		_ = c.Close()
		if derr != nil || !rec.expired(x.now) {
			continue
		}
		if err := remove(x.w, k); err != nil {
			return errStorage(err)
		}
		n++
	}
	return Int(n)
}

// ExpiredKeys returns up to limit user keys whose deadline is <= nowMs,
// scanning after user key `after` (nil: from the start), and the cursor to
// continue from (nil once the scan reached the end).
func ExpiredKeys(r readerI, after []byte, nowMs int64, limit int) (keys [][]byte, next []byte, err error) {
	var from []byte
	if after != nil {
		from = metaKey(after)
	}
	scanned := 0
	var lastUser []byte
	done := true
	err = iterKeys(r, from, math.MinInt64, func(user, _ []byte, rec *record) bool {
		scanned++
		lastUser = user
		if rec.expired(nowMs) {
			keys = append(keys, user)
		}
		if len(keys) >= limit || scanned >= limit*64 {
			done = false
			return false
		}
		return true
	})
	if err != nil || done {
		return keys, nil, err
	}
	return keys, lastUser, nil
}

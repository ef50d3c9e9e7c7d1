package kv

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/kvorum/kvorum/internal/glob"
	"github.com/kvorum/kvorum/internal/redisnum"
)

// Sorted set sampling (see zset.go for the encoding): ZSCAN and
// ZRANDMEMBER.

// ---------------------------------------------------------------------------
// ZSCAN

func checkZScan(args [][]byte) (Reply, bool) {
	if _, ok := parseCursor(args[2]); !ok {
		return errInvalidCurs, false
	}
	return Reply{}, true
}

// ZSCAN cursors follow the design of SCAN's (keyspace.go): a cursor is
// P<<32 | S, P the first 4 bytes of the sortable score of the last entry
// returned and S a random salt (never 0). The node remembers for cursorTTL
// the exact entry (with the key and its incarnation) and resumes strictly
// after it; a cursor it does not remember resumes at the first entry whose
// sortable score starts with P or more, which is never after the exact
// position, so the scan stays complete (it may repeat members). A sorted
// set of up to zscanWhole members is returned whole in one call (cursor 0),
// as Redis does for its small (listpack) sorted sets.
var zscanCursors struct {
	sync.Mutex
	m    map[uint64]zscanPos
	last time.Time
}

type zscanPos struct {
	key     string
	version uint64
	after   []byte // index element of the last entry returned
	at      time.Time
}

const zscanWhole = 128

func zscanRemember(key []byte, version uint64, after []byte) uint64 {
	zscanCursors.Lock()
	defer zscanCursors.Unlock()
	if zscanCursors.m == nil {
		zscanCursors.m = map[uint64]zscanPos{}
	}
	now := time.Now()
	if len(zscanCursors.m) >= cursorLimit || now.Sub(zscanCursors.last) > time.Minute {
		for k, v := range zscanCursors.m {
			if now.Sub(v.at) > cursorTTL || len(zscanCursors.m) >= cursorLimit {
				delete(zscanCursors.m, k)
			}
		}
		zscanCursors.last = now
	}
	p := uint64(binary.BigEndian.Uint32(after[1:5]))
	pos := zscanPos{key: string(key), version: version, after: after, at: now}
	for {
		id := p<<32 | (1 + rand.Uint64N(1<<32-1))
		if old, ok := zscanCursors.m[id]; ok && (old.key != pos.key || old.version != version || !bytes.Equal(old.after, after)) {
			continue
		}
		zscanCursors.m[id] = pos
		return id
	}
}

// zscanResume returns the walk start of cursor id (not 0) on key's
// incarnation version.
func zscanResume(id uint64, key []byte, version uint64) []byte {
	zscanCursors.Lock()
	p, ok := zscanCursors.m[id]
	zscanCursors.Unlock()
	if ok && p.key == string(key) && p.version == version {
		return append(bytes.Clone(p.after), 0)
	}
	return binary.BigEndian.AppendUint32([]byte{'s'}, uint32(id>>32))
}

func cmdZScan(x *ctx, args [][]byte) Reply {
	cursor, ok := parseCursor(args[2])
	if !ok {
		return errInvalidCurs
	}
	c, ok, e := x.loadColl(args[1], typeZSet)
	if e != nil {
		return errReply(e)
	}
	if !ok {
		return Array(BulkString("0"), Array())
	}
	count := int64(10)
	var match []byte
	for i := 3; i < len(args); {
		left := len(args) - i
		switch {
		case eq(args[i], "count") && left >= 2:
			n, ok := redisnum.ParseInt(args[i+1])
			if !ok {
				return errNotInt
			}
			if n < 1 {
				return errSyntax
			}
			count = n
			i += 2
		case eq(args[i], "match") && left >= 2:
			match = args[i+1]
			if len(match) == 1 && match[0] == '*' {
				match = nil
			}
			i += 2
		default:
			return errSyntax
		}
	}
	z := x.zview(c)
	var start []byte
	if c.length() <= zscanWhole {
		count = math.MaxInt64
	} else if cursor != 0 {
		start = zscanResume(cursor, c.key, c.rec.version)
	}
	var out []Reply
	var seen int64
	var last []byte
	more := false
	err := z.walk(start, false, func(u uint64, m []byte) bool {
		if seen >= count {
			more = true
			return false
		}
		seen++
		last = zIndexElem(last[:0], u, m)
		if match != nil && !glob.Match(match, m, false) {
			return true
		}
		out = append(out, Bulk(bytes.Clone(m)), Bulk(redisnum.AppendListpackDouble(nil, redisnum.Unsortable(u))))
		return true
	})
	if err != nil {
		return errReply(err)
	}
	next := uint64(0)
	if more {
		next = zscanRemember(c.key, c.rec.version, last)
	}
	return Array(BulkString(strconv.FormatUint(next, 10)), Array(out...))
}

// ---------------------------------------------------------------------------
// ZRANDMEMBER

func parseZRandMember(args [][]byte) (count int64, has, withScores bool, r Reply, ok bool) {
	return parseRandArgs(args, "withscores")
}

func checkZRandMember(args [][]byte) (Reply, bool) {
	_, _, _, r, ok := parseZRandMember(args)
	return r, ok
}

// cmdZRandMember picks random ranks and reads them in one walk of the
// index (O(N) at worst). A count of at least the size returns the whole
// set (highest score first, as Redis does); a negative count may repeat
// members.
func cmdZRandMember(x *ctx, args [][]byte) Reply {
	l, has, withScores, r, ok := parseZRandMember(args)
	if !ok {
		return r
	}
	c, ok, e := x.loadColl(args[1], typeZSet)
	if e != nil {
		return errReply(e)
	}
	if !ok {
		if has {
			return Array()
		}
		return Nil
	}
	z := x.zview(c)
	n := c.length()
	rng := x.rand()
	if !has {
		p := rng.Int64N(n)
		ents, err := z.byRank(p, p, false)
		if err != nil {
			return errReply(err)
		}
		if len(ents) == 0 {
			return Nil
		}
		return Bulk(ents[0].member)
	}
	if l == 0 {
		return Array()
	}
	if l >= n {
		// The whole set, from the highest score down, as Redis's iterator
		// (zuiInitIterator) walks a sorted set.
		ents, err := z.byRank(0, n-1, true)
		if err != nil {
			return errReply(err)
		}
		return zReply(ents, withScores)
	}
	var picks []int64 // ranks in reply order
	if l > 0 {
		// l distinct ranks (Floyd's algorithm), then in random order.
		chosen := make(map[int64]struct{}, l)
		for j := n - l; j < n; j++ {
			t := rng.Int64N(j + 1)
			if _, dup := chosen[t]; dup {
				t = j
			}
			chosen[t] = struct{}{}
			picks = append(picks, t)
		}
		rng.Shuffle(len(picks), func(a, b int) { picks[a], picks[b] = picks[b], picks[a] })
	} else {
		if -l > zRandMemberMax {
			return errZRandTooMany
		}
		picks = make([]int64, -l)
		for i := range picks {
			picks[i] = rng.Int64N(n)
		}
	}
	sorted := slices.Clone(picks)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	got := make(map[int64]zent, len(sorted))
	var rank int64
	next := 0
	err := z.walk(nil, false, func(u uint64, m []byte) bool {
		if rank == sorted[next] {
			got[rank] = zent{member: bytes.Clone(m), score: redisnum.Unsortable(u)}
			next++
		}
		rank++
		return next < len(sorted)
	})
	if err != nil {
		return errReply(err)
	}
	ents := make([]zent, 0, len(picks))
	for _, p := range picks {
		if en, ok := got[p]; ok {
			ents = append(ents, en)
		}
	}
	return zReply(ents, withScores)
}

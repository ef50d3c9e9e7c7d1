package kv

import (
	"encoding/binary"
	"math"

	"github.com/cockroachdb/pebble/v2"
)

// The expiry index (Redis keeps the keys with a TTL in a dict of their
// own, `expires`): one hidden key per user key that has a deadline,
//
//	0x10 0x00 0x00 'e' <deadline ms:8 BE> <user key>
//
// with an empty value. Ordered by deadline, so the keys expired at t are
// exactly the index keys below 'e' <t+1>: the leader's sweeper reads
// those and nothing else, where it used to read every record of the
// keyspace (values included) looking for deadlines. replace and remove
// keep it, at apply, on every replica, as part of the replicated state.
var (
	ttlPrefix = []byte{userPrefix, 0x00, 0x00, 'e'}
	// Progress of building the index over the keys written before it
	// existed (a store from an older kvorum): absent, not started;
	// ttlBuilt, built; 'c' + user key, built up to and including that key.
	ttlStateKey = []byte{userPrefix, 0x00, 0x00, 'E'}
)

const ttlBuilt = "d"

// ttlBuildChunk is the number of keys one KVORUM.TTLINDEX entry indexes.
const ttlBuildChunk = 2048

func appendTTLKey(b []byte, deadline int64, k []byte) []byte {
	b = append(b, ttlPrefix...)
	b = binary.BigEndian.AppendUint64(b, uint64(deadline))
	return append(b, k...)
}

// indexTTL moves k's index key from deadline old to deadline now (either
// 0: none).
func (x *ctx) indexTTL(k []byte, old, now int64) error {
	if old == now {
		return nil
	}
	if old > 0 {
		x.tbuf = appendTTLKey(x.tbuf[:0], old, k)
		if err := x.w.Delete(x.tbuf, nil); err != nil {
			return err
		}
	}
	if now > 0 {
		x.tbuf = appendTTLKey(x.tbuf[:0], now, k)
		return x.w.Set(x.tbuf, nil, nil)
	}
	return nil
}

// ExpiryIndexBuilt reports whether the expiry index covers every key. Until
// it does, the leader proposes KVORUM.TTLINDEX (see server.expiryLoop),
// and keys written before the index existed are not swept: they stay
// invisible to reads, only their space waits.
func ExpiryIndexBuilt(r pebble.Reader) (bool, error) {
	v, ok, err := getCopy(r, ttlStateKey)
	return ok && string(v) == ttlBuilt, err
}

// ExpiredKeys returns up to limit user keys whose deadline is <= nowMs,
// earliest deadline first, from the expiry index.
func ExpiredKeys(r pebble.Reader, nowMs int64, limit int) (keys [][]byte, err error) {
	if nowMs <= 0 {
		return nil, nil
	}
	hi := appendTTLKey(nil, nowMs+1, nil)
	err = walkRange(r, ttlPrefix, hi, nil, false, func(it *pebble.Iterator) (bool, error) {
		keys = append(keys, append([]byte(nil), it.Key()[len(ttlPrefix)+8:]...))
		return len(keys) < limit, nil
	})
	return keys, err
}

// cmdTTLIndex is KVORUM.TTLINDEX: it indexes the deadlines of the next
// ttlBuildChunk keys after the build's cursor and moves the cursor on, or
// marks the index built at the end of the keyspace. It reads its cursor
// from the replicated state, so every replica indexes the same keys. Its
// reply is the number of keys it looked at (0: the index is built).
func cmdTTLIndex(x *ctx, _ [][]byte) Reply {
	state, ok, err := getCopy(x.r, ttlStateKey)
	if err != nil {
		return errReply(err)
	}
	if ok && string(state) == ttlBuilt {
		return Int(0)
	}
	var after []byte
	if ok && len(state) > 0 && state[0] == 'c' {
		after = metaKey(state[1:])
	}
	var n int64
	last := []byte{'c'}
	err = iterKeys(x.r, after, math.MinInt64, func(user, _ []byte, rec *record) bool {
		n++
		last = append(last[:1], user...)
		if rec.expire > 0 {
			if err = x.w.Set(appendTTLKey(nil, rec.expire, user), nil, nil); err != nil {
				return false
			}
		}
		return n < ttlBuildChunk
	})
	if err != nil {
		return errReply(err)
	}
	if n < ttlBuildChunk {
		last = []byte(ttlBuilt)
	}
	if err := x.w.Set(ttlStateKey, last, nil); err != nil {
		return errReply(err)
	}
	return Int(n)
}

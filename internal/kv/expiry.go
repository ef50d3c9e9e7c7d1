package kv

import (
	"encoding/binary"
	"math"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/slot"
	"github.com/kvorum/kvorum/internal/storage"
)

// The expiry index (Redis keeps the keys with a TTL in a dict of their
// own, `expires`): one hidden key per user key that has a deadline,
//
//	0x10 0x00 0x00 'e' <deadline ms:8 BE> <user key>
//
// with an empty value.
//
// It is still global (docs/ranges.md §2.3 puts it per slot, with a
// per-slot minimum deadline in memory: the next step). That stays
// deterministic with many ranges because each entry belongs to one user
// key and is written (Set, Delete) only by the commands of the range that
// owns the key: writes of two ranges touch different Pebble keys, so they
// commute, and the entries of a range's keys depend on its log alone. The
// two places that touch entries of many keys read only the range's own:
// FLUSHALL of a range that does not own every slot deletes the entries of
// its slots one by one (flushTTLIndex, hidden.go), and KVORUM.TTLINDEX
// (the build over keys written before the index existed, which reads the
// whole keyspace and a global cursor) does nothing in such a range: the
// index must be built (ExpiryIndexBuilt) before the first split. What it
// does not give yet: a snapshot of a range other than range 1 does not
// carry its keys' entries (they sit in 0x10, range 1's span), and a
// split does not move them; ExpiredKeys returns the due keys of every
// range (ExpiredKeysIn filters one range's). Ordered by deadline, so the keys expired at t are
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

// ExpiredKeysIn is ExpiredKeys for the keys of range d's slots only (all
// of them: d nil or owning every slot).
func ExpiredKeysIn(r pebble.Reader, d *storage.Descriptor, nowMs int64, limit int) (keys [][]byte, err error) {
	if !ranged(d) {
		return ExpiredKeys(r, nowMs, limit)
	}
	if nowMs <= 0 {
		return nil, nil
	}
	hi := appendTTLKey(nil, nowMs+1, nil)
	err = walkRange(r, ttlPrefix, hi, nil, false, func(it *pebble.Iterator) (bool, error) {
		if k := it.Key()[len(ttlPrefix)+8:]; d.ContainsSlot(slot.Of(k)) {
			keys = append(keys, append([]byte(nil), k...))
		}
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
	if x.ranged {
		// It reads every key and a global cursor: not deterministic in a
		// range that owns some slots only (see the top of this file). A
		// store has such a range only once its index is built: splits
		// require it, and a store bootstrapped with several ranges starts
		// empty. So the index is marked built, which the sweeper waits for
		// (it is a global key of range 1, the only range TTLINDEX is
		// proposed to).
		if err := x.w.Set(ttlStateKey, []byte(ttlBuilt), nil); err != nil {
			return errReply(err)
		}
		return Int(0)
	}
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

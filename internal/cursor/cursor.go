// Package cursor gives scans over ordered byte strings (Redis's SCAN,
// HSCAN, SSCAN and ZSCAN in kvorum) the numeric cursors their clients
// expect. A client parses a cursor as an unsigned 64-bit integer, but a
// position among keys of any length is a byte string, so a cursor cannot
// name an arbitrary position exactly. The design:
//
//   - A position is a byte string with a fixed head (a storage key's
//     prefix byte, a sorted set index's 's', or nothing) followed by the
//     bytes that order it.
//   - A cursor is P<<32 | S: P is the first 4 bytes (zero padded) after the
//     head of the position where the previous call stopped (Prefix), and S
//     is a random 32-bit salt, never 0.
//   - The node that hands out a cursor remembers, for TTL, that exact
//     position (Table.Remember), with the collection it is a position of;
//     a remembered cursor resumes strictly after it (Table.Resume). A new
//     cursor never takes the number of a different remembered position
//     (another salt is drawn).
//   - A cursor the node does not remember (another node issued it, the node
//     restarted, the collection was re-created, the entry expired or was
//     evicted) resumes at the head followed by P with trailing zero bytes
//     removed (Fallback). That position is never after the exact one, so
//     the scan is still complete; it may return elements it already
//     returned, which the SCAN family allows.
//
// Either way, every element present for the whole scan is returned at
// least once; elements added or removed meanwhile may or may not be. The
// one way to miss some: a client keeps a cursor longer than TTL (or past
// eviction) and the node meanwhile hands out the same number (same 4-byte
// prefix and the same 32-bit salt) for a later position.
//
// The fallback's granularity is the 4-byte prefix: a scan whose every call
// lands on a node that does not remember its cursor (a load balancer
// rotating nodes) re-reads all the elements sharing that prefix each time,
// and makes no progress if more than a page of them share it. Keep a scan
// on one node.
//
// A Table is node-local memory, never replicated; its methods may be
// called from any goroutine.
package cursor

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"time"
)

const (
	// TTL is how long a Table remembers a position.
	TTL = 10 * time.Minute
	// Limit bounds the positions a Table remembers: beyond it, it forgets
	// all of them.
	Limit = 100000
)

// Table remembers where scans stopped. The zero value is ready to use.
type Table struct {
	mu struct {
		sync.Mutex
		m     map[uint64]position
		swept time.Time // the last sweep of expired positions
	}
}

// position is where a scan of the collection key (incarnation version)
// stopped: after `after`.
type position struct {
	key     string
	version uint64
	after   []byte
	at      time.Time
}

// Prefix is P of a position whose bytes after its head are b.
func Prefix(b []byte) uint32 {
	var p [4]byte
	copy(p[:], b)
	return binary.BigEndian.Uint32(p[:])
}

// Fallback is where a scan with cursor id resumes when the node does not
// remember it, after the position's head: P with trailing zero bytes
// removed.
func Fallback(id uint64) []byte {
	p := binary.BigEndian.AppendUint32(nil, uint32(id>>32))
	for len(p) > 0 && p[len(p)-1] == 0 {
		p = p[:len(p)-1]
	}
	return p
}

// Remember returns a new cursor with P prefix for a scan of key's
// incarnation version (any fixed key and version for a scan of the whole
// keyspace) that stopped at after, which the Table keeps.
func (t *Table) Remember(prefix uint32, key []byte, version uint64, after []byte) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.m == nil {
		t.mu.m = map[uint64]position{}
	}
	now := time.Now()
	if len(t.mu.m) >= Limit || now.Sub(t.mu.swept) > time.Minute {
		for k, v := range t.mu.m {
			if now.Sub(v.at) > TTL || len(t.mu.m) >= Limit {
				delete(t.mu.m, k)
			}
		}
		t.mu.swept = now
	}
	pos := position{key: string(key), version: version, after: after, at: now}
	for {
		id := uint64(prefix)<<32 | (1 + rand.Uint64N(1<<32-1))
		if old, ok := t.mu.m[id]; ok && (old.key != pos.key || old.version != version || !bytes.Equal(old.after, after)) {
			continue
		}
		t.mu.m[id] = pos
		return id
	}
}

// Resume returns (a copy of) the position cursor id stopped at, if the
// Table remembers it for key's incarnation version.
func (t *Table) Resume(id uint64, key []byte, version uint64) ([]byte, bool) {
	t.mu.Lock()
	p, ok := t.mu.m[id]
	t.mu.Unlock()
	if !ok || p.key != string(key) || p.version != version {
		return nil, false
	}
	return bytes.Clone(p.after), true
}

// Forget drops every position, as a restart would.
func (t *Table) Forget() {
	t.mu.Lock()
	clear(t.mu.m)
	t.mu.Unlock()
}

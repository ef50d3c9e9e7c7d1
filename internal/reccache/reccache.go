// Package reccache is the apply path's cache of metadata records: for a
// storage key, what the store plus the batch being applied hold there
// (absent, or the encoded record's header, with its value if that is
// small), so that a write to a hot key does not search the LSM for the
// record it replaces. Every write command looks its key's record up first
// (the type, the deadline, a collection's incarnation); in Pebble that
// lookup cost more than the write itself: a search through the memtables
// and every level, and a data-block read when the block is not cached
// (server's BenchmarkStoreZipfian/SET: 70 % of a SET was Batch.Get).
//
// The cache is exact, not a hint, only as long as its user keeps it so:
// package kv updates it on every metadata write (ctx.storeOver,
// ctx.remove) and clears it on a range deletion of user keys (FLUSHALL),
// and the state machine clears it when a snapshot replaces the data. The
// batches it is filled from always commit (a failed commit stops the
// node), so it never holds a write the store lost.
//
// Only the apply path uses it, on the Ready loop's goroutine: it is not
// safe for concurrent use, and reads never see it, so a reader cannot
// observe a round's writes before the round commits.
package reccache

import "github.com/hashicorp/golang-lru/v2/simplelru"

const (
	// SmallValue is the largest value kept with its header.
	SmallValue = 128
	// MaxKey is the longest storage key cached: with SmallValue, an entry
	// stays under ~550 bytes.
	MaxKey = 256
)

// Cache holds at most a fixed number of keys, the least recently used
// dropped first (hashicorp/golang-lru's simplelru: a well-kept LRU with no
// locking, as the apply path needs none).
type Cache struct {
	lru *simplelru.LRU[string, entry]
	// shared, if set, is the read path's cache, told of every write
	// journalled here (Wrote, Deleted, Clear) at Publish.
	shared *Shared
	j      journal
}

type entry struct {
	enc  []byte // header, plus the value if full; nil: absent
	full bool
}

// New returns a cache of at most entries keys.
func New(entries int) *Cache {
	lru, err := simplelru.NewLRU[string, entry](max(entries, 1), nil)
	if err != nil {
		panic(err) // only for a size < 1
	}
	return &Cache{lru: lru}
}

// Share makes c journal the writes it hears of for s (see Shared); nil
// stops it.
func (c *Cache) Share(s *Shared) { c.shared = s }

// Clear forgets everything: the data it described was replaced.
func (c *Cache) Clear() {
	c.lru.Purge()
	if c.shared != nil {
		c.j.add(nil, nil, jClear)
	}
}

// Len is the number of keys held.
func (c *Cache) Len() int { return c.lru.Len() }

// Get returns what key holds: ok=false if not cached; else enc (nil:
// absent), the cached encoding, whole if full, else its header only. enc
// belongs to the cache: decode, do not keep.
func (c *Cache) Get(key []byte) (enc []byte, full, ok bool) {
	e, ok := c.lru.Get(string(key))
	return e.enc, e.full, ok
}

// Put records that key holds enc, an encoded record whose first header
// bytes are its header; the value is kept if it is at most SmallValue
// bytes. enc is copied.
func (c *Cache) Put(key, enc []byte, header int) {
	full := len(enc)-header <= SmallValue
	if !full {
		enc = enc[:header]
	}
	c.put(key, entry{enc: append(make([]byte, 0, len(enc)), enc...), full: full})
}

// Wrote is Put for a write of key's record, to be published to the shared
// cache.
func (c *Cache) Wrote(key, enc []byte, header int) {
	c.Put(key, enc, header)
	if c.shared != nil {
		if len(key)+len(enc) > c.shared.maxEntry {
			c.j.add(key, nil, jBig)
		} else {
			c.j.add(key, enc, jWrote)
		}
	}
}

// Deleted is PutAbsent for a deletion of key, to be published to the
// shared cache.
func (c *Cache) Deleted(key []byte) {
	c.PutAbsent(key)
	if c.shared != nil {
		c.j.add(key, nil, jAbsent)
	}
}

// Publish hands the writes journalled since the last call to the shared
// cache: call it once they are committed to the store, before any reader
// may read at their index.
func (c *Cache) Publish() {
	if c.shared != nil && len(c.j.entries) > 0 {
		c.j.publish(c.shared)
	}
}

// PutAbsent records that key holds nothing.
func (c *Cache) PutAbsent(key []byte) { c.put(key, entry{full: true}) }

// Forget drops what is cached for key.
func (c *Cache) Forget(key []byte) { c.lru.Remove(string(key)) }

func (c *Cache) put(key []byte, e entry) {
	if len(key) > MaxKey {
		c.lru.Remove(string(key)) // an older entry must not outlive this write
		return
	}
	c.lru.Add(string(key), e)
}

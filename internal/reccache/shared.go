package reccache

import (
	"hash/maphash"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Shared is the read path's cache of metadata records: for a storage key,
// its whole encoded record (or that it is absent), as the store held it
// after some committed round. Reads look a key up here before Pebble (a
// point lookup in Pebble walks the memtables and every level and, for a
// value in a blob file, reads a second block: a third of a node's CPU
// under a read-only load, most of it for the same hot keys); Pebble has no
// row cache of its own.
//
// It stays exact because it hears of every write after the write is in
// the store and before anyone may read at the write's index: the apply
// path journals each metadata write in its Cache (Wrote, Deleted, Clear),
// and Publish hands the journal over once the round's batch is committed,
// before the round's applied index is published. A journalled write
// replaces the key's cached record, or drops it when the new one is not
// cacheable; a key not cached stays uncached (a write does not allocate).
//
// A reader that misses fills the cache from the store (Fill), but a write
// published between its look-up and its fill may make what it read stale:
// every shard has a generation that each published write to one of its
// keys (and Clear) advances, and a fill is kept only if its shard's
// generation is still the one the look-up saw. A fill can therefore only
// ever add what the store held after the newest write published for the
// key.
//
// Entries are never changed in place, only replaced, so an entry returned
// by Get stays valid (and unchanged) for as long as its holder keeps it.
// Memory is bounded in bytes (keys and records); the least recently used
// entries of a shard go first.
type Shared struct {
	shards [sharedShards]sharedShard
	seed   maphash.Seed
	// maxEntry is the largest key plus record cached: a shard's budget
	// holds at least sharedMinEntries of them, and none is bigger than
	// sharedMaxEntry.
	maxEntry int
}

const (
	sharedShards     = 64
	sharedMinEntries = 8
	sharedMaxEntry   = 64 << 10
	// entryOverhead approximates a cached entry's memory beyond its key
	// and record: the LRU's list element and map slot, the slice header.
	entryOverhead = 96
)

type sharedShard struct {
	mu     sync.Mutex
	gen    uint64
	bytes  int
	budget int
	lru    *simplelru.LRU[string, []byte] // nil value: absent
	hits   uint64
	misses uint64
	_      [24]byte // keep shards' locks on separate cache lines
}

// NewShared returns a cache of at most about bytes bytes; nil if bytes is
// too small to be of use (callers treat nil as no cache).
func NewShared(bytes int64) *Shared {
	per := int(bytes / sharedShards)
	if per < 1024 {
		return nil
	}
	s := &Shared{seed: maphash.MakeSeed(), maxEntry: min(per/sharedMinEntries, sharedMaxEntry)}
	for i := range s.shards {
		lru, err := simplelru.NewLRU[string, []byte](1<<30, nil) // bounded by bytes, not count
		if err != nil {
			panic(err)
		}
		s.shards[i].lru, s.shards[i].budget = lru, per
	}
	return s
}

func (s *Shared) shard(key []byte) *sharedShard {
	return &s.shards[maphash.Bytes(s.seed, key)%sharedShards]
}

// Get returns key's cached record (enc nil: absent) if ok; else gen, the
// generation a Fill of key must present. enc belongs to the cache and
// never changes: decode it, do not modify it.
func (s *Shared) Get(key []byte) (enc []byte, ok bool, gen uint64) {
	sh := s.shard(key)
	sh.mu.Lock()
	enc, ok = sh.lru.Get(string(key))
	gen = sh.gen
	if ok {
		sh.hits++
	} else {
		sh.misses++
	}
	sh.mu.Unlock()
	return enc, ok, gen
}

// Fill caches enc (nil: absent) as key's record, read from the store after
// a Get that missed with gen, unless a write to the shard was published
// since. enc is copied.
func (s *Shared) Fill(key, enc []byte, gen uint64) {
	if len(key)+len(enc) > s.maxEntry {
		return
	}
	v := clone(enc, enc == nil)
	sh := s.shard(key)
	sh.mu.Lock()
	if sh.gen == gen {
		sh.set(string(key), v)
	}
	sh.mu.Unlock()
}

// clone returns a copy of enc, nil if absent.
func clone(enc []byte, absent bool) []byte {
	if absent {
		return nil
	}
	return append(make([]byte, 0, len(enc)), enc...)
}

// set stores v under key and evicts down to the budget.
// REQUIRES: sh.mu held.
func (sh *sharedShard) set(key string, v []byte) {
	if old, ok := sh.lru.Peek(key); ok {
		sh.bytes -= entrySize(key, old)
	}
	sh.lru.Add(key, v)
	sh.bytes += entrySize(key, v)
	for sh.bytes > sh.budget {
		k, old, ok := sh.lru.RemoveOldest()
		if !ok {
			break
		}
		sh.bytes -= entrySize(k, old)
	}
}

func entrySize(key string, v []byte) int { return len(key) + len(v) + entryOverhead }

// wrote publishes a write of key: its cached record, if it has one, is
// replaced by enc (absent: key was deleted), or dropped if the new record
// is too big to cache (big: Cache.Wrote decided, and journalled no enc).
func (s *Shared) wrote(key, enc []byte, absent, big bool) {
	sh := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.gen++
	old, ok := sh.lru.Peek(string(key))
	switch {
	case !ok:
	case big:
		sh.lru.Remove(string(key))
		sh.bytes -= entrySize(string(key), old)
	default:
		sh.set(string(key), clone(enc, absent))
	}
}

// clear publishes a replacement of every key (FLUSHALL, a snapshot).
func (s *Shared) clear() {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.gen++
		sh.lru.Purge()
		sh.bytes = 0
		sh.mu.Unlock()
	}
}

// SharedStats is what a Shared holds and how often it answered.
type SharedStats struct {
	Keys, Bytes  int
	Hits, Misses uint64
}

// Stats adds up the shards' figures.
func (s *Shared) Stats() SharedStats {
	var st SharedStats
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		st.Keys += sh.lru.Len()
		st.Bytes += sh.bytes
		st.Hits += sh.hits
		st.Misses += sh.misses
		sh.mu.Unlock()
	}
	return st
}

// journal is a round's metadata writes, in order, for Shared.
type journal struct {
	buf     []byte // keys and records, back to back
	entries []journalEntry
}

type journalEntry struct {
	key, enc [2]int // [start, end) in buf
	kind     uint8
}

const (
	jWrote  uint8 = iota // enc is the key's new record
	jAbsent              // the key was deleted
	jBig                 // the new record is too big to cache
	jClear               // every key was replaced
)

func (j *journal) add(key, enc []byte, kind uint8) {
	e := journalEntry{kind: kind, key: [2]int{len(j.buf), len(j.buf) + len(key)}}
	j.buf = append(j.buf, key...)
	if kind == jWrote {
		e.enc = [2]int{len(j.buf), len(j.buf) + len(enc)}
		j.buf = append(j.buf, enc...)
	}
	j.entries = append(j.entries, e)
}

// publish applies the journal to s, in order, and empties it.
func (j *journal) publish(s *Shared) {
	for _, e := range j.entries {
		if e.kind == jClear {
			s.clear()
			continue
		}
		s.wrote(j.buf[e.key[0]:e.key[1]], j.buf[e.enc[0]:e.enc[1]], e.kind == jAbsent, e.kind == jBig)
	}
	j.entries = j.entries[:0]
	if cap(j.buf) > 1<<20 {
		j.buf = nil // one big round's buffer is not kept for ever
	}
	j.buf = j.buf[:0]
}

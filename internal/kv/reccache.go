package kv

// RecordCache keeps the metadata records that the apply path looked up or
// wrote, so that a write to a hot key does not search the LSM for the
// record it replaces. Every write command looks its key's record up first
// (the type, the deadline, a collection's incarnation); in Pebble that
// lookup cost more than the write itself: a search through the memtables
// and every level, and a data-block read when the block is not cached
// (BenchmarkStoreZipfian/SET: 70 % of a SET was Batch.Get).
//
// The cache holds, per key, what the store plus the batch being applied
// hold: absent, or the record's header, with its value if that is small
// (counters, a collection's state). It is exact, not a hint: every write of
// a metadata record in package kv goes through ctx.storeOver or ctx.remove,
// which update it, and a range deletion of user keys (FLUSHALL) or a
// snapshot replacing the data (Clear) empties it. The batches it was filled
// from always commit (a failed commit stops the node), so it never holds a
// write the store lost.
//
// Only Apply uses it, on the Ready loop's goroutine: it is not safe for
// concurrent use, and reads (Read) never see it, so a reader cannot observe
// a round's writes before the round commits.
type RecordCache struct {
	m     map[string]cachedRecord
	bytes int
	max   int
}

// cachedRecord is a key's record as the store plus the current batch have
// it.
type cachedRecord struct {
	rec     record // value set only if full
	present bool   // false: the key has no record
	full    bool   // rec.value is the whole value
}

const (
	// recCacheSmallValue is the largest value kept with its header.
	recCacheSmallValue = 128
	// recCacheOverhead approximates the bytes of an entry besides its key
	// and value: the map slot (string header and cachedRecord, 80 bytes,
	// in a table kept at most 7/8 full and grown by doubling), the key's
	// own allocation. Measured: a heap profile after 100,000 inserts
	// showed ~200 bytes per entry with 20-byte keys.
	recCacheOverhead = 176
)

// NewRecordCache returns a cache of about maxBytes (keys, small values and
// overhead counted).
func NewRecordCache(maxBytes int) *RecordCache {
	return &RecordCache{m: make(map[string]cachedRecord), max: maxBytes}
}

// Clear forgets everything: the data it described was replaced.
func (c *RecordCache) Clear() {
	clear(c.m)
	c.bytes = 0
}

// Len is the number of keys held.
func (c *RecordCache) Len() int { return len(c.m) }

func (c *RecordCache) lookup(mk []byte) (cachedRecord, bool) {
	e, ok := c.m[string(mk)]
	return e, ok
}

// fill records what a store lookup of metadata key mk returned: v, the
// encoded record, or ok=false for absent.
func (c *RecordCache) fill(mk, v []byte, ok bool) {
	if !ok {
		c.put(mk, cachedRecord{})
		return
	}
	rec, err := decodeHeader(v)
	if err != nil {
		c.forget(mk)
		return
	}
	e := cachedRecord{rec: rec, present: true}
	if len(v)-recordHeader <= recCacheSmallValue {
		e.rec.value, e.full = append([]byte(nil), v[recordHeader:]...), true
	}
	c.put(mk, e)
}

// stored records that mk now holds rec.
func (c *RecordCache) stored(mk []byte, rec *record) {
	e := cachedRecord{rec: *rec, present: true}
	e.rec.value = nil
	if len(rec.value) <= recCacheSmallValue {
		e.rec.value, e.full = append([]byte(nil), rec.value...), true
	}
	c.put(mk, e)
}

func (c *RecordCache) put(mk []byte, e cachedRecord) {
	if old, ok := c.m[string(mk)]; ok {
		c.bytes -= entrySize(len(mk), old)
	} else if c.bytes+entrySize(len(mk), e) > c.max {
		c.evict()
	}
	c.m[string(mk)] = e
	c.bytes += entrySize(len(mk), e)
}

func (c *RecordCache) forget(mk []byte) {
	if old, ok := c.m[string(mk)]; ok {
		c.bytes -= entrySize(len(mk), old)
		delete(c.m, string(mk))
	}
}

// evict drops about an eighth of the entries, whichever the map's
// randomized iteration yields first: cheaper than an LRU list on every
// hit, and a hot key evicted by chance costs one lookup to come back.
func (c *RecordCache) evict() {
	n := len(c.m)/8 + 1
	for k, e := range c.m {
		if n == 0 {
			break
		}
		c.bytes -= entrySize(len(k), e)
		delete(c.m, k)
		n--
	}
}

func entrySize(keyLen int, e cachedRecord) int {
	return keyLen + len(e.rec.value) + recCacheOverhead
}

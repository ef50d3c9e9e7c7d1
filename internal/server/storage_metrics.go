package server

import (
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvorum/kvorum/internal/reccache"
)

// storageCollector exports the storage engine's figures, read from
// pebble.DB.Metrics once per scrape: above all the block cache's hit rate
// (a cache that memtables crowded out showed as 12 % under load) and the
// flush and compaction work that writes cost.
type storageCollector struct {
	descs []*prometheus.Desc
	mu    sync.RWMutex
	db    *pebble.DB // nil once the node closes it (a scrape may still run)
}

var storageMetrics = []struct {
	name, help string
	kind       prometheus.ValueType
	value      func(m *pebble.Metrics) float64
}{
	{"kvorum_storage_block_cache_bytes", "Bytes of data blocks held by the storage engine's block cache (--cache-size).",
		prometheus.GaugeValue, func(m *pebble.Metrics) float64 { return float64(m.BlockCache.Size) }},
	{"kvorum_storage_block_cache_hits_total", "Block reads served by the block cache.",
		prometheus.CounterValue, func(m *pebble.Metrics) float64 { return float64(m.BlockCache.Hits) }},
	{"kvorum_storage_block_cache_misses_total", "Block reads that missed the block cache (read from the file system and decompressed).",
		prometheus.CounterValue, func(m *pebble.Metrics) float64 { return float64(m.BlockCache.Misses) }},
	{"kvorum_storage_memtable_bytes", "Bytes of the storage engine's memtables (write buffers).",
		prometheus.GaugeValue, func(m *pebble.Metrics) float64 { return float64(m.MemTable.Size) }},
	{"kvorum_storage_flushes_total", "Memtables flushed to tables.",
		prometheus.CounterValue, func(m *pebble.Metrics) float64 { return float64(m.Flush.Count) }},
	{"kvorum_storage_compactions_total", "Compactions run by the storage engine.",
		prometheus.CounterValue, func(m *pebble.Metrics) float64 { return float64(m.Compact.Count) }},
	{"kvorum_storage_wal_written_bytes_total", "Bytes written to the storage engine's write-ahead log (Raft log entries, hard state and applied state, all in one).",
		prometheus.CounterValue, func(m *pebble.Metrics) float64 { return float64(m.WAL.BytesWritten) }},
	{"kvorum_storage_flushed_bytes_total", "Bytes of tables and blob files (separated values) written by memtable flushes.",
		prometheus.CounterValue, func(m *pebble.Metrics) float64 {
			return levelSum(m, func(l *pebble.LevelMetrics) uint64 { return l.TableBytesFlushed + l.BlobBytesFlushed })
		}},
	{"kvorum_storage_compacted_bytes_total", "Bytes of tables and blob files written by compactions (with the flushed bytes, the write amplification).",
		prometheus.CounterValue, func(m *pebble.Metrics) float64 {
			return levelSum(m, func(l *pebble.LevelMetrics) uint64 { return l.TableBytesCompacted + l.BlobBytesCompacted })
		}},
	{"kvorum_storage_compaction_read_bytes_total", "Bytes of tables read by compactions, with Pebble's estimate of the separated values they referenced.",
		prometheus.CounterValue, func(m *pebble.Metrics) float64 {
			return levelSum(m, func(l *pebble.LevelMetrics) uint64 { return l.TableBytesRead + l.BlobBytesReadEstimate })
		}},
	{"kvorum_storage_read_amplification", "Table levels and sublevels a point read may search.",
		prometheus.GaugeValue, func(m *pebble.Metrics) float64 { return float64(m.ReadAmp()) }},
	{"kvorum_storage_disk_bytes", "Bytes of the storage engine's tables and WAL on disk.",
		prometheus.GaugeValue, func(m *pebble.Metrics) float64 { return float64(m.DiskSpaceUsage()) }},
}

// levelSum adds up one figure over the levels. (Metrics.Total counts the
// WAL's bytes as flushed too.)
func levelSum(m *pebble.Metrics, f func(*pebble.LevelMetrics) uint64) float64 {
	var n uint64
	for i := range m.Levels {
		n += f(&m.Levels[i])
	}
	return float64(n)
}

func newStorageCollector(db *pebble.DB) *storageCollector {
	c := &storageCollector{db: db}
	for _, m := range storageMetrics {
		c.descs = append(c.descs, prometheus.NewDesc(m.name, m.help, nil, nil))
	}
	return c
}

func (c *storageCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// detach is called before the DB closes: scrapes from then on report
// nothing of it.
func (c *storageCollector) detach() {
	c.mu.Lock()
	c.db = nil
	c.mu.Unlock()
}

func (c *storageCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.db == nil {
		return
	}
	m := c.db.Metrics()
	for i, sm := range storageMetrics {
		ch <- prometheus.MustNewConstMetric(c.descs[i], sm.kind, sm.value(m))
	}
}

// newReadCacheCollector exports the read cache's figures (reccache.Shared,
// --read-cache) at scrape time.
func newReadCacheCollector(sh *reccache.Shared) prometheus.Collector {
	c := readCacheCollector{sh: sh}
	for _, d := range readCacheMetrics {
		c.descs = append(c.descs, prometheus.NewDesc(d.name, d.help, nil, nil))
	}
	return &c
}

type readCacheCollector struct {
	sh    *reccache.Shared
	descs []*prometheus.Desc
}

var readCacheMetrics = []struct {
	name, help string
	kind       prometheus.ValueType
	value      func(st reccache.SharedStats) float64
}{
	{"kvorum_read_cache_hits_total", "Record reads served by the read cache (--read-cache).",
		prometheus.CounterValue, func(st reccache.SharedStats) float64 { return float64(st.Hits) }},
	{"kvorum_read_cache_misses_total", "Record reads that missed the read cache and looked in the storage engine.",
		prometheus.CounterValue, func(st reccache.SharedStats) float64 { return float64(st.Misses) }},
	{"kvorum_read_cache_keys", "Keys whose records the read cache holds.",
		prometheus.GaugeValue, func(st reccache.SharedStats) float64 { return float64(st.Keys) }},
	{"kvorum_read_cache_bytes", "Bytes the read cache accounts for (keys, records and per-entry overhead).",
		prometheus.GaugeValue, func(st reccache.SharedStats) float64 { return float64(st.Bytes) }},
}

func (c *readCacheCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *readCacheCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.sh.Stats()
	for i, d := range readCacheMetrics {
		ch <- prometheus.MustNewConstMetric(c.descs[i], d.kind, d.value(st))
	}
}

package storage

import (
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/atomicfs"
)

// Options configures Open. The zero value is usable: the OS filesystem, no
// logging, and a panic on a background fatal error.
type Options struct {
	// FS is the filesystem the store lives on. Default: the OS filesystem
	// (vfs.Default); tests pass vfs.NewMem() or a crashable or
	// error-injecting FS.
	FS vfs.FS
	// Logger receives Pebble's logs (Info at Debug level, errors at Error).
	// nil discards them.
	Logger *slog.Logger
	// BackgroundFatal is called when Pebble reports a fatal error outside
	// Commit: on one of its own goroutines (flush, compaction, e.g.
	// "MANIFEST sync failed" in version_set.go), which cannot be unwound or
	// resumed. The failure has been logged already; msg is Pebble's
	// message. It must not return (if it does, the goroutine panics with
	// msg). Default: panic("storage failure: " + msg). `kvorum start`
	// passes an exit of the process (status 1) with one clear line instead
	// of a goroutine dump. See fault.go.
	BackgroundFatal func(msg string)
	// CacheSize is the size in bytes of Pebble's block cache, which holds
	// the uncompressed index, filter and data blocks that reads and the
	// state machine's lookups use. Default DefaultCacheSize; Pebble's own
	// default (8 MiB) made every lookup of a key's record under load read
	// and decompress blocks from the OS (perf-notes: 56 % of a follower's
	// CPU in Batch.Get). The memtables come on top: see pebbleCacheSize.
	CacheSize int64
	// MemTableSize is the size in bytes of one Pebble memtable (up to
	// MemTableStopWritesThreshold of them exist while flushes run). Default
	// DefaultMemTableSize.
	MemTableSize uint64
}

// Defaults of Options' sizes.
const (
	DefaultCacheSize    = 32 << 20
	DefaultMemTableSize = 16 << 20
)

// ensureDefaults fills the zero fields of o.
func (o *Options) ensureDefaults() {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.BackgroundFatal == nil {
		o.BackgroundFatal = func(msg string) { panic("storage failure: " + msg) }
	}
	if o.CacheSize <= 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.MemTableSize == 0 {
		o.MemTableSize = DefaultMemTableSize
	}
}

// memTableReserve is how many memtables' worth of memory the block cache
// is given on top of Options.CacheSize: the mutable memtable and one being
// flushed.
const memTableReserve = 2

// pebbleCacheSize is the size to give Pebble's cache for a block cache of
// o.CacheSize. Pebble charges every memtable's arena to the block cache
// (Cache.Reserve in newMemTable): given CacheSize alone, two 32 MiB
// memtables took all of a 64 MiB cache, which then held no block at all
// (db.Metrics: "Block cache: 0 entries", hit rate 12 %; under load every
// lookup read and decompressed blocks: 17-20 % of a node's CPU in
// pread and snappy).
func pebbleCacheSize(o Options) int64 {
	return o.CacheSize + memTableReserve*int64(o.MemTableSize)
}

// Open opens (creating if needed) the node's Pebble store in dir on
// o.FS.
func Open(dir string, o Options) (*pebble.DB, error) {
	o.ensureDefaults()
	fs, logger := o.FS, o.Logger
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("storage: create %s: %w", dir, err)
	}
	// Pebble would drop synced records after a damaged point of the newest
	// WAL as a torn tail when the proof of corruption sits in the same
	// 32 KiB block; look for it first (see wal.go).
	if err := checkWALTail(fs, dir, logger); err != nil {
		return nil, err
	}
	opts := &pebble.Options{
		FS:     fs,
		Logger: pebbleLogger{l: logger, fatal: o.BackgroundFatal},
		// FormatWALSyncChunks makes every WAL chunk carry the offset up to
		// which the log was synced when it was written. Without it Pebble
		// cannot tell a corrupted record in the newest WAL from a torn tail
		// and silently drops every (synced) record after it (open.go,
		// replayWAL; record.Reader.readAheadForCorruption). An existing
		// store is ratcheted up to it at Open. FormatValueSeparation,
		// above it, lets values live in blob files (see below).
		FormatMajorVersion: pebble.FormatValueSeparation,
		// 16 MiB by default (DefaultMemTableSize). Before values moved to
		// blob files, 16 MiB instead of 32 doubled the p99 of writes and
		// cost 17-30 % of their throughput (more flushes and compactions,
		// which rewrote the values and slowed the WAL's fsyncs on the
		// same disk). With value separation, seven alternating pairs of
		// the load (bench kv, 100k x 1 KiB, 16 clients) gave 3,681 against
		// 3,736 ops/s, three pairs of A and 5/95 +3 % and +13 %, for 30
		// MiB less resident memory per node: Pebble keeps a flushed
		// memtable's arena for reuse, so two of them stay resident.
		MemTableSize:                o.MemTableSize,
		MemTableStopWritesThreshold: 4,
		CacheSize:                   pebbleCacheSize(o),
		// Six L0 tables before a compaction into the base level, not
		// four: every L0 table spans the whole keyspace (hashed keys),
		// so each compaction rewrites the base level, and waiting for
		// six halves how often. Measured (3 fresh pairs, bench kv, 100k x
		// 1 KiB zipfian, 16 clients): bytes compacted -35 %, 5/95 +7 %
		// (CPU per op -8 %), load +4 %, C unchanged, A -2 % (within
		// noise). Eight cost reads 7-9 % (more L0 tables to look in).
		L0CompactionThreshold: 6,
		L0StopWritesThreshold: 24,
		MaxOpenFiles:          1000,
	}
	// Bloom filters on every level: a write looks up its key's record
	// first (type, expiry, collection version), and for a new key the
	// filters answer "absent" without reading a data block.
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	// Values of 256 bytes or more go to blob files at flush and stay
	// there: compactions move keys and value handles, not the values.
	// Hashed keys make every L0 table span the whole keyspace, so each L0
	// compaction rewrote the base level, values and all: compaction was a
	// quarter of the leader's CPU under pipelined SETs. Measured on fresh
	// 3-node clusters, alternating with the build before (docs/
	// benchmarks.md): redis-benchmark -P 16 SET, 300k over 100k keys,
	// CPU per op 113-149 us against 154-181, bytes compacted per node
	// 118-168 MB against 230-253; bench kv (100k x 1 KiB, 16 clients, five
	// pairs) 5/95 +15 %, load +7 %, A and C +2 % on average (each pair
	// within -16..+33 %: a noisy day), and 20-40 MiB less resident memory
	// on most nodes. The price: blob files keep overwritten values until
	// a rewrite reclaims them (once a fifth of a file is garbage and it is
	// five minutes old), so the data directory was ~10 % larger after
	// those runs. A compaction rewrites values only when its output would
	// reference more than MaxBlobReferenceDepth overlapping blob files
	// (every flush makes one that spans the keyspace): 50 compacted 30 %
	// fewer bytes than 10 in the -P 16 runs, and a point read follows one
	// handle whatever the depth. Needs FormatValueSeparation.
	opts.Experimental.ValueSeparationPolicy = func() pebble.ValueSeparationPolicy {
		return pebble.ValueSeparationPolicy{
			Enabled:               true,
			MinimumSize:           256,
			MaxBlobReferenceDepth: 50,
			RewriteMinimumAge:     5 * time.Minute,
			TargetGarbageRatio:    0.2,
		}
	}
	before := formatOnDisk(fs, dir)
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, openError(fs, dir, err)
	}
	// Open creates its new WAL before it ratchets the format version
	// (open.go: wal manager Create, then ratchetFormatMajorVersionLocked):
	// in a store this Open created or upgraded, that WAL has no sync
	// chunks. A flush rotates to a WAL that has them.
	if before < pebble.FormatWALSyncChunks {
		if err := db.Flush(); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("storage: open %s: rotate the write-ahead log: %w", dir, err)
		}
	}
	return db, nil
}

// formatOnDisk is the store's format major version before Open, 0 for a
// new store. Pebble keeps it in the "format-version" marker file
// (format_major_version.go, lookupFormatMajorVersion).
func formatOnDisk(fs vfs.FS, dir string) pebble.FormatMajorVersion {
	v, err := atomicfs.ReadMarker(fs, dir, "format-version")
	if err != nil {
		return 0
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0
	}
	return pebble.FormatMajorVersion(n)
}

// pebbleLogger is Pebble's Logger: l may be nil (nothing is logged); fatal
// is Options.BackgroundFatal.
type pebbleLogger struct {
	l     *slog.Logger
	fatal func(msg string)
}

func (p pebbleLogger) Infof(format string, args ...interface{}) {
	if p.l != nil {
		p.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
	}
}

func (p pebbleLogger) Errorf(format string, args ...interface{}) {
	if p.l != nil {
		p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
	}
}

// Fatalf must not return (see fault.go). Inside Commit it panics with a
// value Commit recovers into a *CommitError; the store then stops the node
// and the node logs the failure once. Elsewhere (Pebble's own goroutines)
// it logs the failure and calls Options.BackgroundFatal.
func (p pebbleLogger) Fatalf(format string, args ...interface{}) {
	msg := fmt.Sprintf(format, args...)
	if insideCommit() {
		var err error
		for _, a := range args {
			if e, ok := a.(error); ok {
				err = e
				break
			}
		}
		if p.l != nil {
			p.l.Debug(msg, "component", "pebble")
		}
		panic(fatalPanic{msg: msg, err: err})
	}
	if p.l != nil {
		p.l.Error("storage failure: "+msg+"; the node cannot continue and the process stops; restart it after the disk is fixed", "component", "pebble")
	}
	if p.fatal != nil {
		p.fatal(msg)
	}
	panic(msg) // BackgroundFatal must not return
}

package server

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvorum/kvorum/internal/kv"
)

// maxmemory guard: the node side of resp's maxmemory (internal/resp
// maxmemory.go). maxmemory is a cluster-wide parameter (CONFIG SET
// maxmemory is a Raft entry, KVORUM.CONFIG); each node reads it from its
// applied state (kvMachine.maxMem, updated after every Apply) and compares
// it with its own estimate of its data set: Pebble's estimate of the disk
// space of the sstables of the user key span (kv.UserSpan: the keyspace,
// without the Raft log) plus the live size of its write-ahead log (the
// writes not yet flushed to sstables, which EstimateDiskUsage does not see;
// Raft log entries are among them, so the estimate errs high until a
// flush). It counts compressed bytes on disk, not Redis's memory: a limit
// on the size of the data set, cheap to read. Deleted data leaves it when
// compactions reclaim the space. Sampling costs a Pebble metrics
// collection, so it is done at most once a second, by the command that
// finds the sample stale; in between the last one stands, plus the bytes
// of the writes this node proposed since (their arguments' size: a node
// that receives a burst of writes refuses them before the next sample). A node over the limit refuses denyoom commands before it
// proposes them, whatever its role: the replicas of one cluster hold the
// same data, so they refuse alike within a sample's delay.

// memSampleInterval is the longest time a data size sample is used.
const memSampleInterval = time.Second

// memGuard holds the node's last data size sample.
type memGuard struct {
	mu   sync.Mutex   // held while sampling
	at   atomic.Int64 // time of the last sample, Unix ns (0: none)
	used atomic.Int64 // bytes, at the last sample
	// since is the size of the writes proposed by this node since the
	// last sample (only counted while maxmemory is set).
	since atomic.Int64
}

// noteWrites counts the writes cmds in the estimate until the next
// sample, if maxmemory is set.
func (n *Node) noteWrites(cmds [][][]byte) {
	if n.maxMemory() <= 0 {
		return
	}
	var b int64
	for _, c := range cmds {
		for _, a := range c {
			b += int64(len(a))
		}
	}
	n.mem.since.Add(b)
}

// maxMemory is the cluster's maxmemory as this node has applied it
// (bytes, 0: no limit); before the first Apply since the node started,
// read from its store.
func (n *Node) maxMemory() int64 {
	if n.machine.maxMemKnown.Load() {
		return n.machine.maxMem.Load()
	}
	if db := n.store.DB(); db != nil {
		if v, err := kv.ReadMaxMemory(db); err == nil {
			return v
		}
	}
	return 0
}

// dataSize is the node's estimate of its data set (see above), sampled at
// most once per memSampleInterval.
func (n *Node) dataSize() int64 {
	g := &n.mem
	now := time.Now().UnixNano()
	if now-g.at.Load() < int64(memSampleInterval) || !g.mu.TryLock() {
		return g.used.Load() + g.since.Load() // fresh, or another command is sampling
	}
	defer g.mu.Unlock()
	if now-g.at.Load() < int64(memSampleInterval) {
		return g.used.Load() + g.since.Load()
	}
	db := n.store.DB()
	if db == nil {
		return 0
	}
	start, end := kv.UserSpan()
	disk, err := db.EstimateDiskUsage(start, end)
	if err != nil {
		return g.used.Load() // keep the last sample, retry next time
	}
	used := int64(min(disk+db.Metrics().WAL.Size, 1<<63-1)) //nolint:gosec // capped
	g.used.Store(used)
	g.since.Store(0) // in used now (roughly: a write proposed meanwhile is forgotten)
	g.at.Store(now)
	return used
}

// MaxMemory is resp's memoryLimiter: maxmemory as this node has applied it.
func (b *backend) MaxMemory() int64 { return (*Node)(b).maxMemory() }

// OverMaxMemory is resp's memoryLimiter: whether the node's data set
// estimate is larger than maxmemory (never if it is 0).
func (b *backend) OverMaxMemory() bool {
	n := (*Node)(b)
	lim := n.maxMemory()
	return lim > 0 && n.dataSize() > lim
}

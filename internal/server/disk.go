package server

import (
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/resp"
)

// Disk space guard.
//
// A node whose disk fills up cannot append to its Raft log: the Ready loop's
// commit fails with ENOSPC and the node stops (store.StorageError), which is
// safe but abrupt, and with every replica on similar disks the whole
// cluster would follow. So each node polls the free space of its data
// directory's filesystem and, while it is below Config.MinFreeDisk, refuses
// writes before they reach Raft, with an error that says why:
//
//   - at the top of execWrite, for writes its own clients send, whatever its
//     role. A follower refuses too: it would have to persist every entry it
//     forwards and would fill up and stop;
//   - in Replica.Propose through the store's WriteGate, on the leader, for
//     writes forwarded by the other nodes and for internal proposals
//     (expiry, blocking pops): a leader low on disk refuses writes for the
//     whole cluster.
//
// Reads, membership changes and leader transfers keep working (moving
// leadership away from a full node is one way out). Nothing is proposed, so
// nothing changes: the refusal is certain, unlike a failed commit.
//
// The error code is ERR: Redis clients do not retry it by themselves
// (go-redis retries only LOADING, READONLY, CLUSTERDOWN, TRYAGAIN,
// MASTERDOWN, NOREPLICAS and "max number of clients"), so no client spins
// on a full disk. Redis's own MISCONF (writes refused because RDB saving
// fails) would be the closest code, but it names an RDB configuration that
// kvorum does not have.

// Disk guard defaults.
const (
	DefaultMinFreeDisk       = 256 << 20
	DefaultDiskCheckInterval = 500 * time.Millisecond
)

// diskMonitor is the node's view of its data directory's free space.
type diskMonitor struct {
	min      atomic.Int64 // effective MinFreeDisk; <= 0: disabled
	avail    atomic.Int64 // bytes available; -1 unknown
	total    atomic.Int64 // bytes in the filesystem; -1 unknown
	low      atomic.Bool  // avail < min: writes are refused
	refused  atomic.Uint64
	failing  bool // GetDiskUsage fails (poll goroutine only)
	interval time.Duration
}

// startDiskMonitor polls once, installs the write guard and metrics, and
// starts polling every DiskCheckInterval until the node stops.
func (n *Node) startDiskMonitor() {
	d := &n.disk
	minFree := int64(n.cfg.MinFreeDisk)
	if minFree == 0 {
		minFree = DefaultMinFreeDisk
	}
	d.min.Store(minFree) // clients may already run INFO: atomics only
	d.interval = n.cfg.DiskCheckInterval
	if d.interval <= 0 {
		d.interval = DefaultDiskCheckInterval
	}
	d.avail.Store(-1)
	d.total.Store(-1)
	n.pollDisk()
	n.store.SetWriteGate(func() (reply.Reply, bool) {
		if r := n.diskRefusal(); r != nil {
			return *r, true
		}
		return reply.Reply{}, false
	})
	g := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	n.reg.MustRegister(
		g("kvorum_disk_available_bytes", "Bytes available to the node on the filesystem of its data directory (-1 if unknown).",
			func() float64 { return float64(d.avail.Load()) }),
		g("kvorum_disk_total_bytes", "Size of the filesystem of the data directory (-1 if unknown).",
			func() float64 { return float64(d.total.Load()) }),
		g("kvorum_disk_min_free_bytes", "--min-free-disk: writes are refused below this many available bytes (0: check disabled).",
			func() float64 { return float64(max(d.min.Load(), 0)) }),
		g("kvorum_disk_writes_refused", "1 while the node refuses writes because its disk is nearly full.",
			func() float64 {
				if d.low.Load() {
					return 1
				}
				return 0
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kvorum_disk_refused_writes_total", Help: "Write batches refused because the disk was nearly full."},
			func() float64 { return float64(d.refused.Load()) }),
	)
	n.wg.Add(1)
	go n.diskLoop()
}

func (n *Node) diskLoop() {
	defer n.wg.Done()
	t := time.NewTicker(n.disk.interval)
	defer t.Stop()
	for {
		select {
		case <-n.stopper:
			return
		case <-t.C:
			n.pollDisk()
		}
	}
}

// pollDisk reads the free space and updates the guard, logging changes.
func (n *Node) pollDisk() {
	d := &n.disk
	log := n.cfg.Logger.With("node", uint64(n.id))
	u, err := n.cfg.FS.GetDiskUsage(n.cfg.DataDir)
	if err != nil {
		// Unknown free space does not refuse writes (vfs.MemFS reports
		// ErrUnsupported unless a test sets a usage); a real disk that
		// fills up still stops the node cleanly (store.StorageError).
		d.avail.Store(-1)
		d.total.Store(-1)
		if !d.failing && !errors.Is(err, vfs.ErrUnsupported) {
			log.Warn("cannot read free disk space; the --min-free-disk guard is off until it can", "dir", n.cfg.DataDir, "err", err)
		}
		d.failing = true
		if d.low.Swap(false) {
			log.Warn("accepting writes again (free disk space unknown)")
		}
		return
	}
	d.failing = false
	avail := int64(min(u.AvailBytes, uint64(1<<63-1)))
	d.avail.Store(avail)
	d.total.Store(int64(min(u.TotalBytes, uint64(1<<63-1))))
	minFree := d.min.Load()
	low := minFree > 0 && avail < minFree
	if d.low.Swap(low) != low {
		if low {
			log.Warn("disk nearly full: refusing writes until space is freed (reads still work)",
				"dir", n.cfg.DataDir, "free", humanBytes(avail), "min_free_disk", humanBytes(minFree))
		} else {
			log.Warn("disk space freed: accepting writes again", "dir", n.cfg.DataDir, "free", humanBytes(avail))
		}
	}
}

// diskFullPrefix starts the gate's error reply (diskRefusal), which a
// node a write was forwarded to sends back as a reply.
const diskFullPrefix = "ERR disk full on node "

// diskRefusal returns the error reply for a write while the disk is nearly
// full, nil otherwise, and counts refusals.
func (n *Node) diskRefusal() *reply.Reply {
	d := &n.disk
	if !d.low.Load() {
		return nil
	}
	d.refused.Add(1)
	r := reply.Error(fmt.Sprintf(diskFullPrefix+"%d: %s free, below --min-free-disk %s; writes are refused until space is freed (reads still work)",
		uint64(n.id), humanBytes(d.avail.Load()), humanBytes(d.min.Load())))
	return &r
}

// persistenceInfo is INFO's "Persistence" section.
func (n *Node) persistenceInfo() resp.InfoSection {
	d := &n.disk
	status := "ok"
	switch {
	case d.min.Load() <= 0:
		status = "check_disabled"
	case d.avail.Load() < 0:
		status = "unknown"
	case d.low.Load():
		status = "low_writes_refused"
	}
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	refusing := "0"
	if d.low.Load() {
		refusing = "1"
	}
	return resp.InfoSection{Name: "Persistence", Fields: [][2]string{
		{"loading", "0"},
		{"disk_status", status},
		{"disk_writes_refused", refusing},
		{"disk_available_bytes", i(d.avail.Load())},
		{"disk_total_bytes", i(d.total.Load())},
		{"min_free_disk_bytes", i(max(d.min.Load(), 0))},
		{"disk_refused_writes_total", strconv.FormatUint(d.refused.Load(), 10)},
	}}
}

// humanBytes formats n like "120 MiB".
func humanBytes(n int64) string {
	switch {
	case n < 0:
		return "unknown"
	case n >= 1<<30:
		return strconv.FormatFloat(float64(n)/(1<<30), 'f', 1, 64) + " GiB"
	case n >= 1<<20:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	default:
		return strconv.FormatInt(n, 10) + " bytes"
	}
}

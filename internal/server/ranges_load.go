package server

import (
	"sync"
	"time"

	"github.com/kvorum/kvorum/internal/kv"
	"github.com/kvorum/kvorum/internal/slot"
	"github.com/kvorum/kvorum/internal/storage"
	"github.com/kvorum/kvorum/internal/store"
)

// Per-range load (docs/ranges.md §5, "Observability"): the client
// commands this node executed for each range, reads and writes apart, and
// their rate over the last loadWindow. What counts, once per command:
//
//   - a command a client sent to this node, counted at the range routing
//     hands it to (execWrite, execRead, routeGroups): whether this node
//     serves it (a read, a write it leads) or forwards it to the range's
//     leader. A pipeline of 64 SETs counts 64 writes. A command sent again
//     to another range (RANGEKEYMISMATCH after a split) counts once, at
//     the range that answered; one answered CROSSRANGE counts nowhere;
//   - a keyspace command that acts on every range (DBSIZE, SCAN, KEYS,
//     RANDOMKEY, FLUSHALL, FLUSHDB) counts once on every local range;
//   - a blocking command (BLPOP, XREAD BLOCK, ...) or a lock command
//     counts once, when it arrives, however often it is retried;
//   - not the node's own commands: forwarded commands served for another
//     node (that node counts them), config copies, keyspace-miss and WATCH
//     registrations, PFCOUNT write-backs, the blocking queues' upkeep.
//
// The counters live on the replica (store.Load): one atomic add per range
// per batch, no lock. The rates are sampled once a second (rangeLoadLoop).
//
// With splits by load on (Config.RangeSplitQPS), one counted command in
// store.LoadSampleEvery also has the hash slot of its first key recorded
// into the replica's ring of slot samples (store.Load.RecordSlot: one
// more atomic add, no lock, no allocation); the split queue splits a
// range at the weighted median of those slots (chooseLoadSplitSlot).
// Commands with no key (and the fan-out commands) count but give no
// sample. With splits by load off nothing is sampled.

// loadWindow is the span the rates are averaged over.
const loadWindow = 10 * time.Second

// loadSampleEvery is how often rangeLoadLoop samples the counters.
const loadSampleEvery = time.Second

// countLoad counts k commands executed for r's range (see above). cmds
// are the commands counted (or the run they were answered from, of which
// k were: the samples are taken from it, close enough); nil: none to
// sample.
func (n *Node) countLoad(r *store.Replica, write bool, k int, cmds [][][]byte) {
	l := r.Load()
	if n.cfg.RangeSplitQPS <= 0 || len(cmds) == 0 {
		l.Add(write, k)
		return
	}
	for i := l.AddSampled(write, k); i < k; i += store.LoadSampleEvery {
		if sl, ok := firstKeySlot(cmds[i%len(cmds)]); ok {
			l.RecordSlot(sl)
		}
	}
}

// firstKeySlot is the hash slot of args' first key (false: no key): the
// key at the command's first key position (COMMAND INFO's), without an
// allocation; for the commands without one (wrappers, EVAL, XREAD, ...),
// the first key routing finds (kv.EachKey).
func firstKeySlot(args [][]byte) (sl uint16, ok bool) {
	if len(args) == 0 {
		return 0, false
	}
	if sp := kv.Lookup(args[0]); sp != nil && sp.FirstKey > 0 {
		if sp.FirstKey < len(args) {
			return slot.Of(args[sp.FirstKey]), true
		}
		return 0, false
	}
	kv.EachKey(args, func(k []byte) bool {
		sl, ok = slot.Of(k), true
		return false
	})
	return sl, ok
}

// countOne counts one command given to its range outside the routed runs
// (a blocking or lock command): at the range owning its keys.
func (n *Node) countOne(args [][]byte) {
	r, cross := n.routeOf(args)
	if cross || r == nil {
		return
	}
	l, write := r.Load(), isWrite(args)
	if n.cfg.RangeSplitQPS <= 0 {
		l.Add(write, 1)
		return
	}
	if l.AddSampled(write, 1) == 0 {
		if sl, ok := firstKeySlot(args); ok {
			l.RecordSlot(sl)
		}
	}
}

// loadSample is a replica's counters at one moment.
type loadSample struct {
	at            time.Time
	reads, writes uint64
}

// loadRing is one replica's samples, oldest first, over loadWindow.
type loadRing struct {
	rep     *store.Replica // the counters sampled: another replica object restarts them
	samples []loadSample
}

// loadRates holds the samples of every local replica.
type loadRates struct {
	mu    sync.Mutex
	rings map[storage.RangeID]*loadRing
}

// sample records the counters of reps at now, dropping the samples older
// than loadWindow (one is kept at or past it, the window's start) and
// the ranges no longer held.
func (l *loadRates) sample(reps []*store.Replica, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rings == nil {
		l.rings = map[storage.RangeID]*loadRing{}
	}
	seen := make(map[storage.RangeID]bool, len(reps))
	for _, r := range reps {
		id := r.RangeID()
		seen[id] = true
		g := l.rings[id]
		if g == nil || g.rep != r {
			g = &loadRing{rep: r}
			l.rings[id] = g
		}
		rd, wr := r.Load().Totals()
		g.samples = append(g.samples, loadSample{at: now, reads: rd, writes: wr})
		drop := 0
		for drop+1 < len(g.samples) && now.Sub(g.samples[drop+1].at) >= loadWindow {
			drop++
		}
		g.samples = g.samples[drop:]
	}
	for id := range l.rings {
		if !seen[id] {
			delete(l.rings, id)
		}
	}
}

// rate returns r's reads and writes per second from the oldest sample in
// the window to its counters at now (0 before a sample exists, or if
// none is older than now).
func (l *loadRates) rate(r *store.Replica, now time.Time) (readsPerSec, writesPerSec float64) {
	rd, wr := r.Load().Totals()
	l.mu.Lock()
	g := l.rings[r.RangeID()]
	var first loadSample
	ok := g != nil && g.rep == r && len(g.samples) > 0
	if ok {
		first = g.samples[0]
	}
	l.mu.Unlock()
	if !ok {
		return 0, 0
	}
	dt := now.Sub(first.at).Seconds()
	if dt <= 0 || rd < first.reads || wr < first.writes {
		return 0, 0
	}
	return float64(rd-first.reads) / dt, float64(wr-first.writes) / dt
}

// sustained returns the lowest rate of r's commands (reads and writes
// together) per second between two consecutive samples over the last
// window (at most loadWindow) before the newest sample, and whether the
// samples cover that window (within half a sampling interval): a range
// whose lowest rate is above a limit has been above it for the whole
// window, not in one burst.
func (l *loadRates) sustained(r *store.Replica, window time.Duration) (minRate float64, covered bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.rings[r.RangeID()]
	if g == nil || g.rep != r || len(g.samples) < 2 {
		return 0, false
	}
	last := g.samples[len(g.samples)-1]
	minRate = -1
	i := len(g.samples) - 1
	for ; i > 0; i-- {
		a, b := g.samples[i-1], g.samples[i]
		dt := b.at.Sub(a.at).Seconds()
		if dt <= 0 || b.reads < a.reads || b.writes < a.writes {
			return 0, false
		}
		rate := float64(b.reads-a.reads+b.writes-a.writes) / dt
		if minRate < 0 || rate < minRate {
			minRate = rate
		}
		if last.at.Sub(a.at) >= window {
			break
		}
	}
	first := g.samples[max(i-1, 0)]
	return minRate, last.at.Sub(first.at) >= window-loadSampleEvery/2
}

// rangeLoadLoop samples the ranges' counters once a second until the node
// stops.
func (n *Node) rangeLoadLoop() {
	defer n.wg.Done()
	t := time.NewTicker(loadSampleEvery)
	defer t.Stop()
	n.load.sample(n.store.Replicas(), time.Now())
	for {
		select {
		case <-n.stopper:
			return
		case now := <-t.C:
			n.load.sample(n.store.Replicas(), now)
		}
	}
}

// RangeLoad returns the client reads and writes per second this node
// executed for range id over about the last loadWindow (0, 0 if it holds
// no replica of it). The counting is described at the top of
// ranges_load.go.
func (n *Node) RangeLoad(id storage.RangeID) (readsPerSec, writesPerSec float64) {
	r := n.store.Replica(id)
	if r == nil {
		return 0, 0
	}
	return n.load.rate(r, time.Now())
}

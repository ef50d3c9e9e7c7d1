package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvorum/kvorum/internal/kv"
	"github.com/kvorum/kvorum/internal/storage"
	"github.com/kvorum/kvorum/internal/store"
)

// splitQueueEvery is how often the split queue looks at the size of the
// ranges this node leads (splitQueueLoop).
const splitQueueEvery = 10 * time.Second

// MinRangeSplitSize is the smallest Config.RangeSplitSize accepted (0, off,
// aside): below it a cluster would split into thousands of tiny ranges.
const MinRangeSplitSize = 1 << 20

// splitQueueProbes bounds the EstimateDiskUsage calls that choosing one
// split slot makes (the whole range, then a binary search over at most
// 16384 slots: 14 more).
const splitQueueProbes = 16

// splitQueueMaxBackoff bounds how long the queue waits after failed
// splits.
const splitQueueMaxBackoff = 5 * time.Minute

// ValidateRangeSplitSize checks Config.RangeSplitSize (`kvorum start
// --range-split-size`): 0 is off, negative is an error, and a size below
// MinRangeSplitSize is refused.
func ValidateRangeSplitSize(size int64) error {
	switch {
	case size < 0:
		return fmt.Errorf("--range-split-size must not be negative (0 turns automatic splits off), got %d", size)
	case size > 0 && size < MinRangeSplitSize:
		return fmt.Errorf("--range-split-size %d bytes is below the minimum of 1MiB (0 turns automatic splits off; TiKV's default is 96MiB)", size)
	}
	return nil
}

// ValidateRangeSplitQPS checks Config.RangeSplitQPS (`kvorum start
// --range-split-qps`): 0 is off, negative (or not a number) is an error.
func ValidateRangeSplitQPS(qps float64) error {
	if qps < 0 || math.IsNaN(qps) || math.IsInf(qps, 0) {
		return fmt.Errorf("--range-split-qps must be a non-negative number of commands per second (0 turns splits by load off), got %v", qps)
	}
	return nil
}

// loadSplitMinSamples is how many slot samples inside a range the queue
// wants before it splits the range by load (fewer: it waits for more).
const loadSplitMinSamples = 32

// loadSplitMinShare is the smallest share of the sampled load the lighter
// half of a split by load may get: below it the load sits on one slot
// (more than 1-2*loadSplitMinShare of the samples), and splitting would
// only peel cold slots off the hot one.
const loadSplitMinShare = 0.1

// splitQueue is the split queue's state: its metrics, which ranges it
// has already reported as unsplittable, and when it first saw each
// range's generation (splits by load wait a load window after a change).
type splitQueue struct {
	splits       *prometheus.CounterVec
	unsplittable prometheus.Gauge
	// unsplittableSeen counts the rounds that found a range too large but
	// unsplittable (each range and generation counted and logged once).
	unsplittableSeen prometheus.Counter

	mu         sync.Mutex
	logged     map[storage.RangeID]uint64 // range -> generation already reported unsplittable
	loggedLoad map[storage.RangeID]uint64 // the same, by load
	genSince   map[storage.RangeID]genSeen
}

// genSeen is a range's generation and when the queue first saw it.
type genSeen struct {
	gen   uint64
	since time.Time
}

func newSplitQueue(reg prometheus.Registerer) *splitQueue {
	q := &splitQueue{
		splits: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvorum_range_splits_total",
			Help: "Ranges this node split by itself, by reason (size: the split queue, --range-split-size; load: --range-split-qps). Splits by hand are not counted."},
			[]string{"reason"}),
		unsplittable: prometheus.NewGauge(prometheus.GaugeOpts{Name: "kvorum_range_unsplittable",
			Help: "Ranges this node leads that are larger than --range-split-size, or busier than --range-split-qps, but cannot split (one hash slot; by load: the load on one slot), as of the split queue's last round."}),
		unsplittableSeen: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvorum_range_unsplittable_total",
			Help: "Ranges (counted once per range, generation and reason) the split queue found larger than --range-split-size, or busier than --range-split-qps, but unsplittable (one hash slot; by load: the load on one slot)."}),
		logged:     map[storage.RangeID]uint64{},
		loggedLoad: map[storage.RangeID]uint64{},
		genSince:   map[storage.RangeID]genSeen{},
	}
	q.splits.WithLabelValues("size") // exported as 0 before the first split
	q.splits.WithLabelValues("load")
	reg.MustRegister(q.splits, q.unsplittable, q.unsplittableSeen)
	return q
}

// splitQueueLoop splits the ranges this node leads that have grown past
// Config.RangeSplitSize (docs/ranges.md §5, split queue), at a slot that
// halves them by bytes, and those whose load stays above
// Config.RangeSplitQPS, at a slot that halves their sampled load
// (splitByLoadRound). Off (it returns at once) when both are 0, the
// default: a multi-key command across ranges answers CROSSRANGE until
// the cross-range commit protocol lands.
//
// The size is Pebble's EstimateDiskUsage over the range's span: flushed
// data only. What sits in the memtables (at most two of
// Config.MemTableSize, 16 MiB by default) is not counted until it is
// flushed, a small error next to split sizes of tens of MiB.
//
// Only a range's leader splits it, one split at a time (the loop's splits
// run one after the other), and after a failure the queue waits, doubling
// the wait up to splitQueueMaxBackoff.
func (n *Node) splitQueueLoop() {
	defer n.bg.Done()
	if n.cfg.RangeSplitSize <= 0 && n.cfg.RangeSplitQPS <= 0 {
		return
	}
	every := splitQueueEvery
	if n.cfg.testSplitQueueEvery > 0 {
		every = n.cfg.testSplitQueueEvery
	}
	ctx, cancel := n.untilStop()
	defer cancel()
	t := time.NewTicker(every)
	defer t.Stop()
	var backoff time.Duration
	var retryAt time.Time
	for {
		select {
		case <-n.stopper:
			return
		case <-t.C:
		}
		if time.Now().Before(retryAt) {
			continue
		}
		if err := n.splitQueueRound(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			backoff = min(max(2*backoff, every), splitQueueMaxBackoff)
			retryAt = time.Now().Add(backoff)
			n.cfg.Logger.Warn("automatic range split failed; the split queue retries later", "err", err, "retry_in", backoff)
			continue
		}
		backoff = 0
	}
}

// splitQueueRound is one round of splitQueueLoop: every range this node
// leads that is larger than RangeSplitSize, or else busier than
// RangeSplitQPS (splitByLoad), is split once, one after the other. It
// stops at the first failed split.
func (n *Node) splitQueueRound(ctx context.Context) error {
	limit := uint64(n.cfg.RangeSplitSize)
	q := n.splitQ
	reps := n.store.Replicas()
	slices.SortFunc(reps, func(a, b *store.Replica) int { return cmp.Compare(a.RangeID(), b.RangeID()) })
	unsplittable := 0
	defer func() { q.unsplittable.Set(float64(unsplittable)) }()
	q.forgetGone(reps)
	for _, r := range reps {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if _, local := r.Leader(); !local {
			continue // never on a follower
		}
		desc := r.Descriptor()
		if desc == nil || desc.StartSlot >= desc.EndSlot {
			continue // uninitialized
		}
		var size uint64
		if limit > 0 {
			size = n.spanSize(desc, desc.StartSlot, desc.EndSlot)
		}
		if size <= limit { // not too large (or splits by size off): by load?
			unsplit, err := n.splitByLoad(ctx, r, desc)
			if unsplit {
				unsplittable++
			}
			if err != nil {
				return err
			}
			continue
		}
		sl, ok := chooseSplitSlot(desc.StartSlot, desc.EndSlot, splitQueueProbes, func(lo, hi uint16) (uint64, bool) {
			return n.spanSizeOK(desc, lo, hi)
		})
		if !ok {
			unsplittable++
			q.reportUnsplittable(n, desc, size)
			continue
		}
		if err := n.splitBySize(ctx, desc, sl, size); err != nil {
			return err
		}
	}
	return nil
}

// splitBySize splits desc's range at sl (splitQueueRound).
func (n *Node) splitBySize(ctx context.Context, desc *storage.Descriptor, sl uint16, size uint64) error {
	return n.queueSplit(ctx, desc, sl, "size", fmt.Sprintf("%d bytes", size), "bytes", size, "limit", n.cfg.RangeSplitSize)
}

// queueSplit splits desc's range at sl for the split queue: reason is
// the metric's label (size, load), what the measure that made it split
// (for the error), attrs the log's. A range that changed under the queue
// (a split by hand, a leadership change) is skipped: the next round looks
// again.
func (n *Node) queueSplit(ctx context.Context, desc *storage.Descriptor, sl uint16, reason, what string, attrs ...any) error {
	cctx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout)
	defer cancel()
	lhs, rhs, err := n.SplitRange(cctx, desc.RangeID, sl)
	if err != nil {
		if errors.Is(err, store.ErrSplitStaleGeneration) || errors.Is(err, store.ErrSplitSlotOutside) {
			n.cfg.Logger.Info("automatic range split skipped: the range changed", "range", uint64(desc.RangeID), "slot", sl, "err", err)
			return nil
		}
		return fmt.Errorf("split range %d by %s at slot %d (%s): %w", desc.RangeID, reason, sl, what, err)
	}
	n.splitQ.splits.WithLabelValues(reason).Inc()
	attrs = append([]any{"range", uint64(desc.RangeID), "slot", sl}, attrs...)
	attrs = append(attrs, "lhs", fmt.Sprintf("[%d, %d)", lhs.StartSlot, lhs.EndSlot),
		"rhs_range", uint64(rhs.RangeID), "rhs", fmt.Sprintf("[%d, %d)", rhs.StartSlot, rhs.EndSlot))
	n.cfg.Logger.Info("split a range by "+reason, attrs...)
	return nil
}

// splitByLoad splits r's range (desc) at the slot that halves its sampled
// load if splits by load are on and its load, as this node counts it
// (ranges_load.go: the client commands sent to this node), stayed above
// RangeSplitQPS over the whole load window, and its generation is at
// least that old (after a split, the window must hold the new range's
// load only). unsplittable: the range is that busy but its load sits on
// one slot (chooseLoadSplitSlot), reported once per generation.
func (n *Node) splitByLoad(ctx context.Context, r *store.Replica, desc *storage.Descriptor) (unsplittable bool, err error) {
	qps := n.cfg.RangeSplitQPS
	if qps <= 0 {
		return false, nil
	}
	window := loadWindow
	if w := n.cfg.testLoadSplitWindow; w > 0 && w < window {
		window = w
	}
	q := n.splitQ
	now := time.Now()
	q.mu.Lock()
	g, ok := q.genSince[desc.RangeID]
	if !ok || g.gen != desc.Generation {
		g = genSeen{gen: desc.Generation, since: now}
		q.genSince[desc.RangeID] = g
	}
	q.mu.Unlock()
	if now.Sub(g.since) < window {
		return false, nil
	}
	rate, covered := n.load.sustained(r, window)
	if !covered || rate <= qps {
		return false, nil
	}
	samples := inRange(r.Load().SlotSamples(nil), desc.StartSlot, desc.EndSlot)
	if len(samples) < loadSplitMinSamples {
		return false, nil // too few yet: the next round looks again
	}
	sl, ok := chooseLoadSplitSlot(desc.StartSlot, desc.EndSlot, samples, loadSplitMinShare)
	if !ok {
		q.reportUnsplittableLoad(n, desc, rate)
		return true, nil
	}
	return false, n.queueSplit(ctx, desc, sl, "load", fmt.Sprintf("%.0f commands/s", rate),
		"commands_per_sec", rate, "limit", qps, "samples", len(samples))
}

// inRange keeps the slots of s in [start, end), in place.
func inRange(s []uint16, start, end uint16) []uint16 {
	return slices.DeleteFunc(s, func(sl uint16) bool { return sl < start || sl >= end })
}

// chooseLoadSplitSlot picks the slot at which to split the range [start,
// end) so that both halves get about the same share of the sampled load
// (samples: the hash slots of sampled commands, inside the range; it
// sorts them): the weighted median, as CockroachDB's load-based splitter
// picks the median of its sampled keys. Of the boundaries that divide the
// samples closest to half, all between the same two sampled slots a < b
// (any s in [a+1, b]), it returns the middle one, so the unsampled slots
// between two hot regions are shared out. start < slot < end: it never
// cuts a slot. ok is false for a range of one slot, no samples, samples
// all in one slot, or when the lighter half would get less than minShare
// of them (the load sits on one slot: splitting would only peel cold
// slots off it).
func chooseLoadSplitSlot(start, end uint16, samples []uint16, minShare float64) (sl uint16, ok bool) {
	if int(end)-int(start) < 2 || len(samples) == 0 {
		return 0, false
	}
	slices.Sort(samples)
	total := len(samples)
	bestDist, bestI := total+1, -1
	// Boundaries between distinct sampled slots: samples[:i] on the left.
	for i := 1; i < total; i++ {
		if samples[i] == samples[i-1] {
			continue
		}
		d := 2*i - total
		if d < 0 {
			d = -d
		}
		if d < bestDist {
			bestDist, bestI = d, i
		}
	}
	if bestI < 0 {
		return 0, false // every sample in one slot
	}
	lighter := min(bestI, total-bestI)
	if float64(lighter) < minShare*float64(total) {
		return 0, false
	}
	lo, hi := int(samples[bestI-1])+1, int(samples[bestI]) // any s in [lo, hi]
	s := lo + (hi-lo)/2
	s = max(s, int(start)+1)
	s = min(s, int(end)-1)
	return uint16(s), true
}

// reportUnsplittableLoad logs and counts, once per range and generation,
// a range busier than RangeSplitQPS whose load sits on one slot.
func (q *splitQueue) reportUnsplittableLoad(n *Node, desc *storage.Descriptor, rate float64) {
	if !q.firstReport(q.loggedLoad, desc) {
		return
	}
	n.cfg.Logger.Warn("range is busier than --range-split-qps but its load sits on a single hash slot, which cannot split (spread the hot keys over more hash tags)",
		"range", uint64(desc.RangeID), "slots", fmt.Sprintf("[%d, %d)", desc.StartSlot, desc.EndSlot), "commands_per_sec", rate, "limit", n.cfg.RangeSplitQPS)
}

// firstReport records desc's generation in logged (q.logged or
// q.loggedLoad) and reports whether it is the first report of this range
// and generation there, counting it in kvorum_range_unsplittable_total.
func (q *splitQueue) firstReport(logged map[storage.RangeID]uint64, desc *storage.Descriptor) bool {
	q.mu.Lock()
	gen, seen := logged[desc.RangeID]
	logged[desc.RangeID] = desc.Generation
	q.mu.Unlock()
	if seen && gen == desc.Generation {
		return false
	}
	q.unsplittableSeen.Inc()
	return true
}

// forgetGone drops the queue's per-range state of the ranges no longer
// held (reps: the ones held).
func (q *splitQueue) forgetGone(reps []*store.Replica) {
	held := make(map[storage.RangeID]bool, len(reps))
	for _, r := range reps {
		held[r.RangeID()] = true
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, m := range []map[storage.RangeID]uint64{q.logged, q.loggedLoad} {
		for id := range m {
			if !held[id] {
				delete(m, id)
			}
		}
	}
	for id := range q.genSince {
		if !held[id] {
			delete(q.genSince, id)
		}
	}
}

// reportUnsplittable logs and counts, once per range and generation, a
// range too large to keep that cannot split: a single hash slot.
func (q *splitQueue) reportUnsplittable(n *Node, desc *storage.Descriptor, size uint64) {
	if !q.firstReport(q.logged, desc) {
		return
	}
	n.cfg.Logger.Warn("range is larger than --range-split-size but holds a single hash slot, which cannot split (spread its keys over more hash tags)",
		"range", uint64(desc.RangeID), "slot", desc.StartSlot, "bytes", size, "limit", n.cfg.RangeSplitSize)
}

// spanSize estimates the bytes of desc's range's data in slots [lo, hi)
// (0 on error).
func (n *Node) spanSize(desc *storage.Descriptor, lo, hi uint16) uint64 {
	b, _ := n.spanSizeOK(desc, lo, hi)
	return b
}

// spanSizeOK is Pebble's estimate of the bytes stored in slots [lo, hi)
// of desc's range: its span (kvMachine.Span) when [lo, hi) is the whole
// range (range 1's global hidden keys included), else the slots' span.
func (n *Node) spanSizeOK(desc *storage.Descriptor, lo, hi uint16) (uint64, bool) {
	var start, end []byte
	if lo == desc.StartSlot && hi == desc.EndSlot {
		start, end = n.machine.Span(desc)
	} else {
		start, end = kv.SlotSpan(lo, hi)
		if lo == desc.StartSlot {
			start, _ = n.machine.Span(desc) // range 1's hidden keys belong to its left half
		}
	}
	b, err := n.db.EstimateDiskUsage(start, end)
	if err != nil {
		return 0, false
	}
	return b, true
}

// chooseSplitSlot picks the slot at which to split the range [start, end)
// so that both halves hold about the same bytes: start < slot < end, so
// the split never cuts a slot and leaves each half at least one. size(lo,
// hi) estimates the bytes in slots [lo, hi) (false: no estimate). It
// calls size at most probes times: once for the whole range, then a
// binary search for the first boundary s whose left side [start, s) holds
// at least half; of s and s-1 it returns the one that divides closer to
// half (s on a tie). So a range whose bytes sit in one slot splits next to
// that slot, and its next split isolates it. Without estimates (none, or
// an empty range) it returns the middle slot; if the probes run out, the
// probed boundary closest to half. ok is false for a range of one slot,
// which cannot split.
func chooseSplitSlot(start, end uint16, probes int, size func(lo, hi uint16) (uint64, bool)) (sl uint16, ok bool) {
	if int(end)-int(start) < 2 {
		return 0, false
	}
	mid := start + (end-start)/2
	total, ok := size(start, end)
	if !ok || total == 0 || probes < 2 {
		return mid, true
	}
	dist := func(left uint64) uint64 {
		if 2*left >= total {
			return 2*left - total
		}
		return total - 2*left
	}
	best, bestDist := mid, ^uint64(0)
	lo, hi := int(start)+1, int(end)-1 // candidate slots
	// The left sizes at lo-1 and hi+1 once probed: the search keeps
	// left(lo-1) < half <= left(hi+1).
	var belowLeft, aboveLeft uint64
	var below, above bool
	for i := 1; i < probes && lo <= hi; i++ {
		s := lo + (hi-lo)/2
		left, ok := size(start, uint16(s))
		if !ok {
			return best, true
		}
		if d := dist(left); d < bestDist {
			best, bestDist = uint16(s), d
		}
		if 2*left < total {
			lo, belowLeft, below = s+1, left, true
		} else {
			hi, aboveLeft, above = s-1, left, true
		}
	}
	if lo <= hi {
		return best, true // out of probes
	}
	// lo is the first boundary with at least half on its left (end if
	// none); lo-1 the last with less (start if none).
	switch {
	case above && below:
		if dist(belowLeft) < dist(aboveLeft) {
			return uint16(lo - 1), true
		}
		return uint16(lo), true
	case above: // every boundary has half on its left: the first slot is heavy
		return uint16(lo), true
	default: // no boundary has half on its left: the last slot is heavy
		return uint16(lo - 1), true
	}
}

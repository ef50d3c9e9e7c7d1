package torture

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/kvorum/kvorum/internal/storage"
)

// maxTortureRanges bounds how many ranges split events make.
const maxTortureRanges = 12

// injector fires scheduled events against the cluster. Events may overlap;
// node lifecycle changes are serialised by the cluster's mutex.
type injector struct {
	c    *cluster
	res  *Result
	mu   sync.Mutex // guards res.Applied, res.Skipped and rng
	rng  *rand.Rand
	logf func(string, ...any)
}

func (in *injector) applied(ev Event, what string) {
	in.mu.Lock()
	in.res.Applied[ev.Kind]++
	in.mu.Unlock()
	in.logf("%s: %s", ev, what)
}

func (in *injector) skip(ev Event, why string) {
	in.mu.Lock()
	in.res.Skipped = append(in.res.Skipped, ev.String()+": "+why)
	in.mu.Unlock()
}

func (in *injector) subRNG() *rand.Rand {
	in.mu.Lock()
	defer in.mu.Unlock()
	return rand.New(rand.NewPCG(in.rng.Uint64(), in.rng.Uint64()))
}

// target resolves an event's target slot: the leader for -1, else the
// slot with that index. Must hold c.mu.
func (in *injector) target(ev Event) *slot {
	if ev.Target < 0 {
		return in.c.leader()
	}
	return in.c.slots[ev.Target%len(in.c.slots)]
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (in *injector) inject(ctx context.Context, ev Event) {
	c := in.c
	switch ev.Kind {
	case Crash:
		c.mu.Lock()
		s := in.target(ev)
		down := len(c.slots) - len(c.running())
		switch {
		case s == nil:
			c.mu.Unlock()
			in.skip(ev, "no leader to crash")
			return
		case s.node == nil:
			c.mu.Unlock()
			in.skip(ev, "already down")
			return
		case down+1 > (len(c.slots)-1)/2:
			c.mu.Unlock()
			in.skip(ev, "a majority must stay up")
			return
		}
		c.crash(s, ev.Percent, in.subRNG())
		c.mu.Unlock()
		in.applied(ev, fmt.Sprintf("node %d crashed", s.id))
		sleepCtx(ctx, ev.Hold)
		c.mu.Lock()
		err := c.restart(s)
		c.mu.Unlock()
		if err != nil {
			in.logf("restart node %d: %v", s.id, err)
		}

	case PowerLoss:
		c.mu.Lock()
		rng := in.subRNG()
		for _, s := range c.slots {
			c.net.setDown(s.id, true) // all at the same instant
		}
		for _, s := range c.slots {
			c.crash(s, ev.Percent, rng)
		}
		c.mu.Unlock()
		in.applied(ev, "every node crashed")
		sleepCtx(ctx, ev.Hold)
		c.mu.Lock()
		for _, s := range c.slots {
			if err := c.restart(s); err != nil {
				in.logf("restart node %d: %v", s.id, err)
			}
		}
		c.mu.Unlock()

	case Partition:
		c.mu.Lock()
		cuts, what := in.partition(ev)
		c.mu.Unlock()
		if cuts == nil {
			in.skip(ev, what)
			return
		}
		for _, l := range cuts {
			c.net.cutLink(l[0], l[1])
		}
		in.applied(ev, what)
		sleepCtx(ctx, ev.Hold)
		for _, l := range cuts {
			c.net.uncutLink(l[0], l[1])
		}

	case Lossy:
		gen := c.net.lossy(float64(ev.Percent)/100, 0.05, 0, 15*time.Millisecond)
		in.applied(ev, "lossy network")
		sleepCtx(ctx, ev.Hold)
		c.net.endLossy(gen)

	case Transfer:
		c.mu.Lock()
		lead := c.leader()
		t := in.target(ev)
		c.mu.Unlock()
		if lead == nil || t == nil || t.node == nil || t == lead {
			in.skip(ev, "no leader, target down or already leading")
			return
		}
		tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := lead.node.TransferLeader(tctx, t.id)
		cancel()
		if err != nil {
			in.skip(ev, "transfer: "+err.Error())
			return
		}
		in.applied(ev, fmt.Sprintf("leadership moved to node %d", t.id))

	case Split:
		c.mu.Lock()
		s := in.target(ev)
		c.mu.Unlock()
		if s == nil || s.node == nil {
			in.skip(ev, "no leader or target down")
			return
		}
		// SplitRange forwards to the range's leader; the node asked may
		// be any member.
		var rangeID uint64
		ranges := s.node.Ranges().Ranges
		for _, r := range ranges {
			if uint32(ev.Slot) >= r.StartSlot && uint32(ev.Slot) < r.EndSlot {
				rangeID = r.RangeID
			}
		}
		switch {
		case len(ranges) >= maxTortureRanges:
			in.skip(ev, fmt.Sprintf("%d ranges already", len(ranges)))
			return
		case rangeID == 0:
			in.skip(ev, "no local range holds the slot")
			return
		}
		sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, rhs, err := s.node.SplitRange(sctx, storage.RangeID(rangeID), ev.Slot)
		cancel()
		if err != nil {
			in.skip(ev, "split: "+err.Error())
			return
		}
		in.applied(ev, fmt.Sprintf("range %d split at slot %d: range %d holds [%d, %d)", rangeID, ev.Slot, rhs.RangeID, rhs.StartSlot, rhs.EndSlot))

	case Membership:
		c.mu.Lock()
		s := in.target(ev)
		if s == nil || s.node == nil || s == c.leader() {
			c.mu.Unlock()
			in.skip(ev, "target down or leading")
			return
		}
		old := s.id
		mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := c.replace(mctx, s)
		cancel()
		newID := s.id
		c.mu.Unlock()
		if err != nil {
			in.skip(ev, "replace: "+err.Error())
			return
		}
		in.applied(ev, fmt.Sprintf("node %d replaced by node %d", old, newID))

	case Clock:
		c.mu.Lock()
		s := in.target(ev)
		c.mu.Unlock()
		if s == nil {
			in.skip(ev, "no leader")
			return
		}
		c.shiftClock(s, ev.Jump)
		in.applied(ev, fmt.Sprintf("node %d clock jumped %v", s.id, ev.Jump))
		sleepCtx(ctx, ev.Hold)
		c.shiftClock(s, -ev.Jump) // overlapping jumps: undoing one may put the clock ahead
	}
}

// partition computes the directed links to cut for a partition event and
// a description, or nil and why not. Must hold c.mu.
func (in *injector) partition(ev Event) ([][2]uint64, string) {
	c := in.c
	var ids []uint64
	for _, s := range c.slots {
		ids = append(ids, s.id)
	}
	n := len(ids)
	both := func(a, b uint64, cuts [][2]uint64) [][2]uint64 {
		return append(cuts, [2]uint64{a, b}, [2]uint64{b, a})
	}
	pick := ev.Target
	if pick < 0 {
		if l := c.leader(); l != nil {
			for i, id := range ids {
				if id == l.id {
					pick = i
				}
			}
		}
		if pick < 0 {
			return nil, "no leader"
		}
	}
	pick %= n
	var cuts [][2]uint64
	switch ev.Variant {
	case "isolate":
		for i, id := range ids {
			if i != pick {
				cuts = both(ids[pick], id, cuts)
			}
		}
		return cuts, fmt.Sprintf("node %d isolated", ids[pick])
	case "split":
		// A minority containing the picked node against the rest.
		minority := map[uint64]bool{}
		for i := 0; len(minority) < (n-1)/2; i++ {
			minority[ids[(pick+i)%n]] = true
		}
		for _, a := range ids {
			for _, b := range ids {
				if minority[a] && !minority[b] {
					cuts = both(a, b, cuts)
				}
			}
		}
		return cuts, fmt.Sprintf("split %v | rest", keys(minority))
	case "oneway":
		to := ids[(pick+1)%n]
		return [][2]uint64{{ids[pick], to}}, fmt.Sprintf("one-way cut %d -> %d", ids[pick], to)
	case "bridge":
		// Every node sees a majority but not the same one: each node keeps
		// links to its ring neighbours within distance (n-1)/2... for 3
		// nodes, the picked node bridges the other two.
		if n == 3 {
			a, b := ids[(pick+1)%3], ids[(pick+2)%3]
			return both(a, b, nil), fmt.Sprintf("bridge: %d and %d cut, %d sees both", a, b, ids[pick])
		}
		for i := 0; i < n; i++ {
			for j := i + 1; j < n; j++ {
				d := (j - i + n) % n
				if d > n-d {
					d = n - d
				}
				if d > 1 { // keep only ring neighbours
					cuts = both(ids[(i+pick)%n], ids[(j+pick)%n], cuts)
				}
			}
		}
		return cuts, "majority ring: each node linked to its two ring neighbours only"
	}
	return nil, "unknown partition shape " + ev.Variant
}

func keys(m map[uint64]bool) []uint64 {
	var out []uint64
	for k := range m {
		out = append(out, k)
	}
	return out
}

// shiftClock moves slot s's clock by d and records the furthest any clock
// ran ahead (the TTL check's bound).
func (c *cluster) shiftClock(s *slot, d time.Duration) {
	off := s.offset.Add(d.Milliseconds())
	for m := c.maxAhead.Load(); off > m && !c.maxAhead.CompareAndSwap(m, off); m = c.maxAhead.Load() {
	}
}

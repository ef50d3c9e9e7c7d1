package server

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/slot"
	"github.com/kvorum/kvorum/internal/store"
)

// TestChooseLoadSplitSlot: the split slot by load is the weighted median
// of the sampled slots, the middle of the gap between the two sampled
// slots that divide the samples closest to half; it never cuts a slot,
// and samples all in one slot (or with the lighter half below the
// minimum share) cannot split.
func TestChooseLoadSplitSlot(t *testing.T) {
	rep := func(sl uint16, n int) []uint16 { return slices.Repeat([]uint16{sl}, n) }
	cat := func(ss ...[]uint16) []uint16 { return slices.Concat(ss...) }
	uniform := func(start, end uint16, n int) []uint16 {
		var s []uint16
		for i := 0; i < n; i++ {
			s = append(s, start+uint16(i*int(end-start)/n))
		}
		return s
	}
	span := func(lo, hi uint16) []uint16 {
		var s []uint16
		for x := lo; x <= hi; x++ {
			s = append(s, x)
		}
		return s
	}
	rng := rand.New(rand.NewPCG(1, 2))
	shuffled := func(s []uint16) []uint16 {
		rng.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
		return s
	}
	for _, c := range []struct {
		name       string
		start, end uint16
		samples    []uint16
		want       []uint16 // acceptable answers
		noSplit    bool
	}{
		{name: "no samples", start: 0, end: 16384, noSplit: true},
		{name: "one-slot range", start: 7, end: 8, samples: rep(7, 100), noSplit: true},
		{name: "single hot slot", start: 0, end: 16384, samples: rep(4000, 512), noSplit: true},
		{name: "hot slot, a trickle elsewhere", start: 0, end: 16384, samples: cat(rep(4000, 480), rep(100, 16), rep(9000, 16)), noSplit: true},
		{name: "two hot slots", start: 0, end: 16384, samples: shuffled(cat(rep(1000, 200), rep(3000, 200))), want: []uint16{2000}},
		{name: "two hot slots, adjacent", start: 0, end: 16384, samples: shuffled(cat(rep(1000, 200), rep(1001, 250))), want: []uint16{1001}},
		{name: "uniform", start: 0, end: 16384, samples: shuffled(uniform(0, 16384, 512)), want: []uint16{8176}},
		{name: "uniform in a sub-range", start: 4096, end: 8192, samples: shuffled(uniform(4096, 8192, 256)), want: []uint16{6136}},
		{name: "skewed: hot region", start: 0, end: 16384, samples: shuffled(cat(uniform(0, 16384, 128), uniform(12000, 12100, 384))), want: span(12030, 12060)},
		// The hot slot holds 60%: the best split puts it with the side
		// that leaves the other closest to half.
		{name: "skewed: hot slot with a spread", start: 0, end: 16384, samples: shuffled(cat(rep(500, 300), uniform(1000, 16384, 200))), want: []uint16{750}},
		{name: "samples at the range's edges", start: 100, end: 200, samples: shuffled(cat(rep(100, 50), rep(199, 50))), want: []uint16{149, 150}},
	} {
		t.Run(c.name, func(t *testing.T) {
			sl, ok := chooseLoadSplitSlot(c.start, c.end, slices.Clone(c.samples), loadSplitMinShare)
			if c.noSplit {
				if ok {
					t.Fatalf("splits at %d, want no split", sl)
				}
				return
			}
			if !ok {
				t.Fatal("no split slot")
			}
			if sl <= c.start || sl >= c.end {
				t.Fatalf("split slot %d not strictly inside [%d, %d)", sl, c.start, c.end)
			}
			if !slices.Contains(c.want, sl) {
				t.Fatalf("split slot %d, want one of %v", sl, c.want)
			}
			left := 0
			for _, s := range c.samples {
				if s < sl {
					left++
				}
			}
			t.Logf("slot %d: %d of %d samples on the left", sl, left, len(c.samples))
		})
	}
}

// TestLoadSustained: the lowest per-second rate over the window, and
// whether the samples cover it: a burst does not make a range busy, nor
// does a window not yet filled.
func TestLoadSustained(t *testing.T) {
	c := newRangeCluster(t, 2)
	r := c.node(1).store.Replica(2)
	var l loadRates
	t0 := time.Unix(1000, 0)
	if _, covered := l.sustained(r, loadWindow); covered {
		t.Fatal("covered without samples")
	}
	at := t0
	l.sample([]*store.Replica{r}, at)
	for i := 1; i <= 5; i++ {
		at = at.Add(time.Second)
		r.Load().Add(true, 100)
		r.Load().Add(false, 100)
		l.sample([]*store.Replica{r}, at)
	}
	if rate, covered := l.sustained(r, loadWindow); covered || rate != 200 {
		t.Fatalf("5 s of 200/s: %v, %v; want 200, not covered", rate, covered)
	}
	for i := 6; i <= 12; i++ {
		at = at.Add(time.Second)
		n := 100
		if i == 9 {
			n = 10 // one slow second
		}
		r.Load().Add(true, n)
		l.sample([]*store.Replica{r}, at)
	}
	if rate, covered := l.sustained(r, loadWindow); !covered || rate != 10 {
		t.Fatalf("a slow second in the window: %v, %v; want 10, covered", rate, covered)
	}
	// The slow second is 3 s old: a 3 s window does not see it.
	if rate, covered := l.sustained(r, 3*time.Second); !covered || rate != 100 {
		t.Fatalf("3 s window: %v, %v; want 100, covered", rate, covered)
	}
	// A burst in one second over an idle window.
	for i := 0; i < 10; i++ {
		at = at.Add(time.Second)
		if i == 5 {
			r.Load().Add(true, 100000)
		}
		l.sample([]*store.Replica{r}, at)
	}
	if rate, covered := l.sustained(r, loadWindow); !covered || rate != 0 {
		t.Fatalf("a burst: %v, %v; want 0, covered", rate, covered)
	}
}

// hotTags returns two hash tags whose slots are far apart (the first
// below 3000, the second above 13000).
func hotTags(t *testing.T) (lo, hi string) {
	for i := 0; lo == "" || hi == ""; i++ {
		tag := fmt.Sprintf("{hot%d}", i)
		switch s := slot.Of([]byte(tag)); {
		case s < 3000 && lo == "":
			lo = tag
		case s > 13000 && hi == "":
			hi = tag
		}
	}
	return lo, hi
}

// loadSplitCluster starts 3 nodes with splits by load at qps (0: off),
// the split queue looking every 50ms over a 2 s load window, and runs
// load (SETs and GETs, pipelined, to every node, so the leader of each
// range counts some) on two hot slots until stop is closed. It returns
// the cluster, the values written and a function that stops the load
// and waits for it.
func loadSplitCluster(t *testing.T, qps float64) (c *testCluster, tags [2]string, vals map[string]string, stop func()) {
	t.Helper()
	c = newClusterWith(t, 3, func(_ uint64, cfg *Config) {
		cfg.RangeSplitQPS = qps
		cfg.testSplitQueueEvery = 50 * time.Millisecond
		cfg.testLoadSplitWindow = 2 * time.Second
	})
	ctx := testCtx(t, 2*time.Minute)
	tags[0], tags[1] = hotTags(t)
	vals = map[string]string{}
	for _, tag := range tags {
		for i := 0; i < 50; i++ {
			k := fmt.Sprintf("%s:%d", tag, i)
			vals[k] = fmt.Sprintf("v%d", i)
			if err := c.client(1).Set(ctx, k, vals[k], 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for id := uint64(1); id <= 3; id++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := c.client(id)
			for j := 0; ; j++ {
				select {
				case <-done:
					return
				default:
				}
				pipe := cl.Pipeline()
				for i := 0; i < 20; i++ {
					k := fmt.Sprintf("%s:%d", tags[i%2], (j+i)%50)
					if i%4 == 0 {
						pipe.Set(ctx, k, vals[k], 0)
					} else {
						pipe.Get(ctx, k)
					}
				}
				pipe.Exec(ctx) // errors (a split under way) are retried by the next batch
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	var once sync.Once
	stop = func() { once.Do(func() { close(done); wg.Wait() }) }
	t.Cleanup(stop)
	return c, tags, vals, stop
}

// splitsByReason is kvorum_range_splits_total{reason} summed over the
// cluster's nodes (each node must export it).
func splitsByReason(t *testing.T, c *testCluster, reason string) float64 {
	t.Helper()
	var total float64
	for id := uint64(1); id <= 3; id++ {
		mfs, err := c.node(id).reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, mf := range mfs {
			if mf.GetName() != "kvorum_range_splits_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "reason" && l.GetValue() == reason {
						total += m.GetCounter().GetValue()
						found = true
					}
				}
			}
		}
		if !found {
			t.Fatalf("node %d does not export kvorum_range_splits_total{reason=%q}", id, reason)
		}
	}
	return total
}

// TestSplitQueueSplitsByLoad: with RangeSplitQPS low, load on two hot
// slots far apart splits the one range by itself, once, at the middle of
// the gap between them (the weighted median of the samples); each half's
// load then sits on one slot, which cannot split: no more splits, and
// its leader reports it unsplittable. Every key reads back from every
// node, and the split is counted as kvorum_range_splits_total{reason="load"}.
func TestSplitQueueSplitsByLoad(t *testing.T) {
	c, tags, vals, stop := loadSplitCluster(t, 50)
	a, b := slot.Of([]byte(tags[0])), slot.Of([]byte(tags[1]))
	want := a + 1 + (b-a-1)/2
	deadline := time.Now().Add(45 * time.Second)
	for {
		same := true
		for id := uint64(1); id <= 3 && same; id++ {
			rs := c.node(id).Ranges().Ranges
			same = len(rs) == 2 && rs[0].EndSlot == uint32(want) && rs[1].StartSlot == uint32(want)
		}
		if same {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no split by load at slot %d (hot slots %d and %d): node 1 holds %v, node 2 %v, node 3 %v",
				want, a, b, rangesOf(c, 1), rangesOf(c, 2), rangesOf(c, 3))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("hot slots %d and %d; ranges %v", a, b, rangesOf(c, 1))
	// More rounds under the same load: each half is busy but on one slot,
	// which its leader reports (once) after a window, and does not split.
	unsplittable := func() float64 {
		var sum float64
		for id := uint64(1); id <= 3; id++ {
			sum += gather(t, c.node(id), "kvorum_range_unsplittable_total")
		}
		return sum
	}
	for deadline := time.Now().Add(30 * time.Second); unsplittable() < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("kvorum_range_unsplittable_total sums to %v, want 2 (each half, once)", unsplittable())
		}
	}
	time.Sleep(time.Second) // 20 more rounds
	if v := unsplittable(); v != 2 {
		t.Fatalf("kvorum_range_unsplittable_total sums to %v, want 2 (each half, once)", v)
	}
	if n := len(c.node(1).Ranges().Ranges); n != 2 {
		t.Fatalf("%d ranges after more load (%v): a half whose load sits on one slot split", n, rangesOf(c, 1))
	}
	if v := splitsByReason(t, c, "load"); v != 1 {
		t.Fatalf("kvorum_range_splits_total{reason=\"load\"} sums to %v, want 1", v)
	}
	if v := splitsByReason(t, c, "size"); v != 0 {
		t.Fatalf("kvorum_range_splits_total{reason=\"size\"} sums to %v, want 0", v)
	}
	stop()

	ctx := testCtx(t, time.Minute)
	for id := uint64(1); id <= 3; id++ {
		for k, v := range vals {
			if got, err := c.client(id).Get(ctx, k).Result(); err != nil || got != v {
				t.Fatalf("node %d: GET %s = %q, %v; want %q", id, k, got, err, v)
			}
		}
	}
	for i := 0; i < 30; i++ {
		if err := c.client(uint64(i%3+1)).Set(ctx, fmt.Sprintf("after:%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSplitQueueLoadOff: with RangeSplitQPS 0 (the default) the same load
// never splits the range, and nothing is sampled.
func TestSplitQueueLoadOff(t *testing.T) {
	c, _, _, stop := loadSplitCluster(t, 0)
	time.Sleep(5 * time.Second) // two windows and 100 rounds, had it been on
	stop()
	for id := uint64(1); id <= 3; id++ {
		rs := c.node(id).Ranges().Ranges
		if len(rs) != 1 {
			t.Fatalf("node %d holds %v with splits by load off", id, rangesOf(c, id))
		}
		r := c.node(id).store.Replica(firstRange)
		if rd, wr := r.Load().Totals(); rd+wr < 1000 {
			t.Fatalf("node %d counted %d commands: the test would not have split it either", id, rd+wr)
		}
		if n := r.Load().SampleCount(); n != 0 {
			t.Fatalf("node %d sampled %d slots with splits by load off", id, n)
		}
	}
	if v := splitsByReason(t, c, "load"); v != 0 {
		t.Fatalf("kvorum_range_splits_total{reason=\"load\"} = %v", v)
	}
}

// TestRangeSplitQPSValidate: a negative or non-finite RangeSplitQPS is
// refused; 0 and positive rates are accepted.
func TestRangeSplitQPSValidate(t *testing.T) {
	for _, c := range []struct {
		qps float64
		ok  bool
	}{{0, true}, {0.5, true}, {1000, true}, {-1, false}, {math.NaN(), false}, {math.Inf(1), false}} {
		cfg := Config{DataDir: "/d", RangeSplitQPS: c.qps}
		cfg.EnsureDefaults()
		if err := cfg.Validate(); (err == nil) != c.ok {
			t.Errorf("RangeSplitQPS %v: Validate = %v, want ok %v", c.qps, err, c.ok)
		}
	}
}

// BenchmarkCountLoad is the counting point's cost per pipeline of 64 GETs
// (one countLoad per batch), with splits by load off (no sampling) and on
// (8 of the 64 commands' slots sampled).
func BenchmarkCountLoad(b *testing.B) {
	c := newClusterWith(b, 1, func(uint64, *Config) {})
	r := c.node(1).store.Replica(firstRange)
	cmds := make([][][]byte, 64)
	for i := range cmds {
		cmds[i] = [][]byte{[]byte("GET"), []byte(fmt.Sprintf("bench:%d", i))}
	}
	for _, qps := range []float64{0, 1e12} {
		b.Run(fmt.Sprintf("qps=%g", qps), func(b *testing.B) {
			n := &Node{}
			n.cfg.RangeSplitQPS = qps
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				n.countLoad(r, false, len(cmds), cmds)
			}
		})
	}
}

// TestFirstKeySlot: the slot sampled for a command is its first key's,
// by its first key position or, for commands without one, by routing's
// key search; a command with no key gives none.
func TestFirstKeySlot(t *testing.T) {
	args := func(s ...string) [][]byte {
		var a [][]byte
		for _, x := range s {
			a = append(a, []byte(x))
		}
		return a
	}
	for _, c := range []struct {
		cmd []string
		key string // "": no key
	}{
		{[]string{"GET", "{a}x"}, "{a}x"},
		{[]string{"set", "k1", "v"}, "k1"},
		{[]string{"MSET", "b", "1", "c", "2"}, "b"},
		{[]string{"EVAL", "return 1", "1", "ek"}, "ek"},
		{[]string{"XREAD", "STREAMS", "s1", "0"}, "s1"},
		{[]string{"PING"}, ""},
		{[]string{"GET"}, ""},
		{[]string{"NOSUCHCOMMAND", "k"}, ""},
		{nil, ""},
	} {
		sl, ok := firstKeySlot(args(c.cmd...))
		if c.key == "" {
			if ok {
				t.Errorf("%q: slot %d, want none", c.cmd, sl)
			}
			continue
		}
		if want := slot.Of([]byte(c.key)); !ok || sl != want {
			t.Errorf("%q: slot %d, %v; want %d (key %q)", c.cmd, sl, ok, want, c.key)
		}
	}
}

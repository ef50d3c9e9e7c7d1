package server

import (
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/storage"
	"github.com/kvorum/kvorum/internal/store"
)

// rangeLoadTotals returns node id's load counters by range.
func rangeLoadTotals(c *testCluster, id uint64) map[storage.RangeID][2]uint64 {
	out := map[storage.RangeID][2]uint64{}
	for _, r := range c.node(id).store.Replicas() {
		rd, wr := r.Load().Totals()
		out[r.RangeID()] = [2]uint64{rd, wr}
	}
	return out
}

// TestRangeLoadCounts sends writes to keys of range 2 and reads of keys
// of range 3 to one node (a pipeline and single commands): exactly those
// ranges' counters move on that node, by one per command, and the other
// nodes (which got the forwarded writes) count nothing. The counters
// show in Ranges(), /metrics and RangeLoad.
func TestRangeLoadCounts(t *testing.T) {
	c := newRangeCluster(t, testRangeCount)
	ctx := testCtx(t, time.Minute)
	const via = 2
	cl := c.client(via)
	if err := cl.Ping(ctx).Err(); err != nil { // connect (OnConnect's INFO) before the counts are read
		t.Fatal(err)
	}
	before := map[uint64]map[storage.RangeID][2]uint64{}
	for id := uint64(1); id <= 3; id++ {
		before[id] = rangeLoadTotals(c, id)
	}

	const writes, reads = 30, 17
	pipe := cl.Pipeline()
	for i := 0; i < writes-5; i++ {
		pipe.Set(ctx, keyIn("load:", 2, i), "v", 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	for i := writes - 5; i < writes; i++ {
		if err := cl.Set(ctx, keyIn("load:", 2, i), "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	pipe = cl.Pipeline()
	for i := 0; i < reads-2; i++ {
		pipe.Get(ctx, keyIn("load:", 3, i%4))
	}
	if _, err := pipe.Exec(ctx); err != nil && err.Error() != "redis: nil" {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := cl.Get(ctx, keyIn("load:", 2, i)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// The two single GETs were of range 2: its reads move by 2.
	want := map[storage.RangeID][2]uint64{2: {2, writes}, 3: {reads - 2, 0}}
	for id := uint64(1); id <= 3; id++ {
		after := rangeLoadTotals(c, id)
		for rg := storage.RangeID(1); rg <= testRangeCount; rg++ {
			var w [2]uint64
			if id == via {
				w = want[rg]
			}
			got := [2]uint64{after[rg][0] - before[id][rg][0], after[rg][1] - before[id][rg][1]}
			if got != w {
				t.Errorf("node %d range %d: counted %d reads, %d writes; want %d, %d", id, rg, got[0], got[1], w[0], w[1])
			}
		}
	}

	n := c.node(via)
	totals := rangeLoadTotals(c, via)
	for _, rg := range n.Ranges().Ranges {
		if tt := totals[storage.RangeID(rg.RangeID)]; rg.ReadsTotal != tt[0] || rg.WritesTotal != tt[1] {
			t.Errorf("Ranges(): range %d totals %d, %d; counters %v", rg.RangeID, rg.ReadsTotal, rg.WritesTotal, tt)
		}
		if rg.RangeID == 2 && (rg.WritesPerSec <= 0 || rg.ReadsPerSec <= 0) {
			t.Errorf("Ranges(): range 2 rates %v reads/s, %v writes/s, want > 0", rg.ReadsPerSec, rg.WritesPerSec)
		}
		if rg.RangeID == 4 && (rg.WritesPerSec != 0 || rg.ReadsPerSec != 0) {
			t.Errorf("Ranges(): range 4 rates %v reads/s, %v writes/s, want 0", rg.ReadsPerSec, rg.WritesPerSec)
		}
	}
	if rd, wr := n.RangeLoad(3); rd <= 0 || wr != 0 {
		t.Errorf("RangeLoad(3) = %v, %v; want reads > 0, no writes", rd, wr)
	}
	if rd, wr := n.RangeLoad(99); rd != 0 || wr != 0 {
		t.Errorf("RangeLoad(99) = %v, %v; want 0, 0", rd, wr)
	}
	mfs, err := n.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) == 1 && m.GetCounter() != nil {
				found[mf.GetName()+"{"+m.GetLabel()[0].GetValue()+"}"] = m.GetCounter().GetValue()
			}
		}
	}
	for rg := storage.RangeID(1); rg <= testRangeCount; rg++ {
		l := strconv.FormatUint(uint64(rg), 10)
		if got, want := found["kvorum_range_reads_total{"+l+"}"], float64(totals[rg][0]); got != want {
			t.Errorf("kvorum_range_reads_total{range=%s} = %v, want %v", l, got, want)
		}
		if got, want := found["kvorum_range_writes_total{"+l+"}"], float64(totals[rg][1]); got != want {
			t.Errorf("kvorum_range_writes_total{range=%s} = %v, want %v", l, got, want)
		}
	}

	// A keyspace command counts once on every range.
	before[via] = rangeLoadTotals(c, via)
	if err := cl.DBSize(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	after := rangeLoadTotals(c, via)
	for rg := storage.RangeID(1); rg <= testRangeCount; rg++ {
		if after[rg][0]-before[via][rg][0] != 1 || after[rg][1] != before[via][rg][1] {
			t.Errorf("DBSIZE: range %d counted %v, before %v", rg, after[rg], before[via][rg])
		}
	}
}

// TestRangeLoadRates checks the rate arithmetic of loadRates with a fake
// clock: the rate is over the last loadWindow, from the samples taken.
func TestRangeLoadRates(t *testing.T) {
	c := newRangeCluster(t, 2)
	r := c.node(1).store.Replica(2)
	var l loadRates
	t0 := time.Unix(1000, 0)
	if rd, wr := l.rate(r, t0); rd != 0 || wr != 0 {
		t.Fatalf("no sample: %v, %v", rd, wr)
	}
	l.sample([]*store.Replica{r}, t0)
	r.Load().Add(true, 50)
	r.Load().Add(false, 20)
	if rd, wr := l.rate(r, t0.Add(5*time.Second)); rd != 4 || wr != 10 {
		t.Fatalf("after 5 s: %v reads/s, %v writes/s; want 4, 10", rd, wr)
	}
	// 30 s of 100 writes a second, then 10 s of none: the rate is over
	// the last 10 s only.
	at := t0
	for i := 0; i < 30; i++ {
		at = at.Add(time.Second)
		r.Load().Add(true, 100)
		l.sample([]*store.Replica{r}, at)
	}
	if _, wr := l.rate(r, at); math.Abs(wr-100) > 1e-9 {
		t.Fatalf("steady: %v writes/s, want 100", wr)
	}
	if n := len(l.rings[2].samples); n > int(loadWindow/loadSampleEvery)+1 {
		t.Fatalf("%d samples kept", n)
	}
	for i := 0; i < 10; i++ {
		at = at.Add(time.Second)
		l.sample([]*store.Replica{r}, at)
	}
	if _, wr := l.rate(r, at); wr != 0 {
		t.Fatalf("idle for the window: %v writes/s, want 0", wr)
	}
	// A range no longer held is forgotten.
	l.sample(nil, at.Add(time.Second))
	if len(l.rings) != 0 {
		t.Fatalf("rings %v", l.rings)
	}
}

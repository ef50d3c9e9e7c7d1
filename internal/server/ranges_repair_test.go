package server

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/slot"
	"github.com/kvorum/kvorum/internal/storage"
)

// gaugeValue returns the value of an unlabelled gauge or counter of n's
// registry, and whether n exports it.
func gaugeValue(t *testing.T, n *Node, name string) (float64, bool) {
	t.Helper()
	mfs, err := n.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.GetMetric()) == 0 {
			continue
		}
		m := mf.GetMetric()[0]
		if g := m.GetGauge(); g != nil {
			return g.GetValue(), true
		}
		return m.GetCounter().GetValue(), true
	}
	return 0, false
}

// TestRangesRepairHoleAfterSplitSnapshot: node 3 is down while range 1
// splits at 8192 and both halves take enough writes to truncate their
// logs past the split (SnapshotThreshold 50). Restarted, it catches up on
// range 1 by a snapshot taken after the split, so it never applies the
// split entry: its range 1 narrows to [0, 8192) and slots [8192, 16384)
// are owned by no local replica. The range repair loop (ranges_repair.go)
// must find that hole, create a replica of the RHS, and the RHS leader
// then sends it a snapshot: node 3 ends with both ranges, no hole, every
// key in its own storage, and takes writes to both halves.
func TestRangesRepairHoleAfterSplitSnapshot(t *testing.T) {
	c := newClusterWith(t, 3, func(_ uint64, cfg *Config) { cfg.testRangesRepairEvery = 50 * time.Millisecond })
	t.Cleanup(c.stopAll)
	ctx := testCtx(t, 2*time.Minute)
	lead, rhs, want, set := splitWhileDown(t, c, ctx)
	n3 := c.start(3)
	want2 := map[uint64][2]uint32{1: {0, 8192}, uint64(rhs.RangeID): {8192, slot.Count}}
	waitRanges(t, c, want2)
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, holes := n3.holeSlots()
		caught := holes == 0
		for id := range want2 {
			r3, rl := n3.store.Replica(storage.RangeID(id)), c.node(lead).store.Replica(storage.RangeID(id))
			if r3 == nil || r3.AppliedIndex() < rl.AppliedIndex() {
				caught = false
			}
		}
		if caught {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node 3: %d slots owned by no replica, ranges %+v", holes, n3.Ranges().Ranges)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Both ranges came by snapshot: range 1's because its log was
	// truncated past the split (else node 3 would have applied the split
	// entry and created the RHS itself, and this test would test nothing),
	// the RHS's because node 3's replica of it started empty.
	if v, _ := gaugeValue(t, n3, "kvorum_raft_snapshots_applied_total"); v < 2 {
		t.Fatalf("node 3 applied %v snapshots, want one per range", v)
	}
	if v, ok := gaugeValue(t, n3, "kvorum_range_hole_slots"); !ok || v != 0 {
		t.Fatalf("kvorum_range_hole_slots = %v (exported: %v), want 0", v, ok)
	}
	if got := n3.Ranges().HoleSlots; got != 0 {
		t.Fatalf("GET /v1/ranges hole_slots = %d", got)
	}
	db := n3.store.DB()
	for k, v := range want {
		if r := readAt(db, nil, [][]byte{[]byte("GET"), []byte(k)}, time.Now().UnixMilli()); string(r.Str) != v {
			t.Fatalf("node 3 local GET %s = %+v, want %q", k, r, v)
		}
	}
	// Writes through node 3 to both halves.
	for i := 0; i < 40; i++ {
		k := fmt.Sprintf("via3:%d", i)
		set(3, k, "x")
		if got, err := c.client(lead%3+1).Get(ctx, k).Result(); err != nil || got != "x" {
			t.Fatalf("GET %s after a write through node 3: %q, %v", k, got, err)
		}
	}
	var lo3, hi3 bool
	for i := 0; i < 40; i++ {
		s := slot.Of([]byte(fmt.Sprintf("via3:%d", i)))
		lo3, hi3 = lo3 || s < 8192, hi3 || s >= 8192
	}
	if !lo3 || !hi3 {
		t.Fatal("the writes through node 3 did not reach both halves")
	}
}

// TestInHoles: a range's interval fills a hole only if it lies entirely
// inside one; an interval that touches an owned slot does not.
func TestInHoles(t *testing.T) {
	holes := [][2]uint16{{100, 200}, {8192, slot.Count}}
	for _, c := range []struct {
		lo, hi uint16
		want   bool
	}{
		{100, 200, true}, {120, 130, true}, {8192, slot.Count, true}, {9000, slot.Count, true},
		{99, 200, false}, {100, 201, false}, {150, 8192, false}, {0, 100, false}, {8191, 8193, false},
	} {
		if got := inHoles(holes, c.lo, c.hi); got != c.want {
			t.Errorf("inHoles(%v, %d, %d) = %v, want %v", holes, c.lo, c.hi, got, c.want)
		}
	}
	if inHoles(nil, 0, 1) {
		t.Error("no holes, yet an interval fills one")
	}
}

// splitWhileDown loads keys, stops node 3, splits range 1 at 8192 on the
// leader (returned) and writes 8 times SnapshotThreshold keys to each
// half, so that node 3, restarted, catches up on range 1 by a snapshot
// taken after the split and never applies the split entry. It returns the
// leader, the right-hand range, the keys written and the write function.
func splitWhileDown(t *testing.T, c *testCluster, ctx context.Context) (uint64, *storage.Descriptor, map[string]string, func(uint64, string, string)) {
	t.Helper()
	want := map[string]string{}
	set := func(id uint64, k, v string) {
		t.Helper()
		if err := c.client(id).Set(ctx, k, v, 0).Err(); err != nil {
			t.Fatalf("node %d SET %s: %v", id, k, err)
		}
		want[k] = v
	}
	for i := 0; i < 100; i++ {
		set(1, fmt.Sprintf("pre:%d", i), fmt.Sprint(i))
	}
	c.stop(3)
	lead := c.waitLeader()
	_, rhs, err := c.node(lead).SplitRange(ctx, 1, 8192)
	if err != nil {
		t.Fatal(err)
	}
	var low, high int
	for i := 0; i < 400; i++ { // 8 times SnapshotThreshold in each half
		k := fmt.Sprintf("post:%d", i)
		if slot.Of([]byte(k)) < 8192 {
			low++
		} else {
			high++
		}
		set(uint64(i%2+1), k, fmt.Sprint(i*3))
	}
	if low < 120 || high < 120 {
		t.Fatalf("keys per half: %d below the split, %d above; each half needs enough to truncate its log", low, high)
	}
	return lead, rhs, want, set
}

// TestEachRangeWaitsForHoles: node 3 caught up on range 1 by a snapshot
// taken after a split holds no replica of the right-hand range (a hole;
// its repair loop is off here). A member change run on node 3 (eachRange)
// must not end after the ranges it holds: it waits for the hole to be
// filled and visits the new range too. Before, it ended at once and the
// member was never added to that range (torture seed 2020: the joining
// node missing from a range split off on a node that learned the split by
// snapshot).
func TestEachRangeWaitsForHoles(t *testing.T) {
	c := newClusterWith(t, 3, func(_ uint64, cfg *Config) { cfg.testRangesRepairEvery = time.Hour })
	t.Cleanup(c.stopAll)
	ctx := testCtx(t, 2*time.Minute)
	_, rhs, _, _ := splitWhileDown(t, c, ctx)
	n3 := c.start(3)
	for {
		if _, holes := n3.holeSlots(); holes > 0 && n3.store.Replica(firstRange).AppliedIndex() > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("node 3 never had a hole")
		}
		time.Sleep(10 * time.Millisecond)
	}
	var mu sync.Mutex
	var visited []storage.RangeID
	done := make(chan error, 1)
	go func() {
		done <- n3.eachRange(ctx, false, func(rg storage.RangeID) error {
			mu.Lock()
			defer mu.Unlock()
			visited = append(visited, rg)
			return nil
		})
	}()
	select {
	case err := <-done:
		t.Fatalf("eachRange returned (%v) while slots had no range, having visited %v", err, visited)
	case <-time.After(300 * time.Millisecond):
	}
	// What the repair loop would do.
	if _, err := n3.store.AddReplica(uninitializedDescriptor(rhs.RangeID)); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(visited, rhs.RangeID) || !slices.Contains(visited, firstRange) {
		t.Fatalf("visited %v, want range 1 and range %d", visited, rhs.RangeID)
	}
}

package server

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/storage"
)

// TestRangesReport: every node reports its one replica of range 1, with
// the cluster's replicas and leader, the leader's view of their logs on
// the leader only, and a size that grows with the data.
func TestRangesReport(t *testing.T) {
	c := newTestCluster(t, 3)
	lead := c.waitLeader()
	ctx := context.Background()
	before := c.node(lead).Ranges()
	r := c.client(lead)
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		val := make([]byte, 4096)
		for j := range val {
			val[j] = byte(rnd.Uint32())
		}
		if err := r.Set(ctx, fmt.Sprintf("k%d", i), val, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.node(lead).db.Flush(); err != nil {
		t.Fatal(err)
	}
	for id := uint64(1); id <= 3; id++ {
		rr := c.node(id).Ranges()
		if rr.NodeID != id || len(rr.Ranges) != 1 {
			t.Fatalf("node %d: %+v", id, rr)
		}
		rg := rr.Ranges[0]
		if rg.RangeID != 1 || rg.StartSlot != 0 || rg.EndSlot != 16384 || rg.Leader != lead || len(rg.Replicas) != 3 || rg.Term == 0 || rg.AppliedIndex == 0 {
			t.Fatalf("node %d: range %+v", id, rg)
		}
		if want := map[bool]string{true: "leader", false: "follower"}[id == lead]; rg.Role != want {
			t.Fatalf("node %d: role %q, want %q", id, rg.Role, want)
		}
		for _, m := range rg.Replicas {
			if (id == lead) != (m.Match > 0) {
				t.Fatalf("node %d (leader %d): replica %+v", id, lead, m)
			}
		}
	}
	for id := uint64(1); id <= 3; id++ {
		info, err := c.client(id).Info(ctx, "replication").Result()
		want := map[bool]string{true: "raft_ranges_leading:1", false: "raft_ranges_leading:0"}[id == lead]
		if err != nil || !strings.Contains(info, "raft_ranges:1\r\n") || !strings.Contains(info, want+"\r\n") {
			t.Fatalf("node %d INFO replication (want raft_ranges:1, %s): %v\n%s", id, want, err, info)
		}
		mfs, err := c.node(id).reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		found := map[string]float64{}
		for _, mf := range mfs {
			if strings.HasPrefix(mf.GetName(), "kvorum_range_") {
				for _, m := range mf.GetMetric() {
					if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == "1" {
						found[mf.GetName()] = m.GetGauge().GetValue()
					}
				}
			}
		}
		if found["kvorum_range_is_leader"] != map[bool]float64{true: 1}[id == lead] || found["kvorum_range_leader"] != float64(lead) ||
			found["kvorum_range_replicas"] != 3 || found["kvorum_range_applied_index"] == 0 {
			t.Fatalf("node %d: range metrics %v", id, found)
		}
	}
	for id := uint64(1); id <= 3; id++ {
		st := c.node(id).Status()
		if st.Ranges != 1 || st.RangesLeading != map[bool]int{true: 1}[id == lead] {
			t.Fatalf("node %d status: %d ranges, %d led", id, st.Ranges, st.RangesLeading)
		}
	}
	after := c.node(lead).Ranges().Ranges[0]
	if after.ApproximateBytes < before.Ranges[0].ApproximateBytes+300*4096/2 {
		t.Fatalf("size %d after 1.2 MB of writes (before %d)", after.ApproximateBytes, before.Ranges[0].ApproximateBytes)
	}
}

// TestShutdownHandsOverRangesAtOnce: node 1 leads 16 quiesced ranges
// (quiesced, they never check their quorum, so they still have node 1 as
// leader after the other nodes are gone) and its peers are stopped; each
// leadership transfer then waits its full bound, two election timeouts.
// Shutdown runs them at once, so it takes about one bound for the ranges
// and one for range 1, not one per range (16 ranges, 200 ms election
// timeout: 6.4 s one after the other; a node of 1,000 ranges took
// minutes to stop).
func TestShutdownHandsOverRangesAtOnce(t *testing.T) {
	const ranges = 16
	c := newRangeCluster(t, ranges)
	ctx := testCtx(t, time.Minute)
	n1 := c.node(1)
	if err := n1.TransferLeader(ctx, 1); err != nil {
		t.Fatal(err)
	}
	for rg := storage.RangeID(2); rg <= ranges; rg++ {
		r := n1.store.Replica(rg)
		for !r.Quiesced() {
			if ctx.Err() != nil {
				t.Fatalf("range %d never quiesced", rg)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	c.stop(2)
	c.stop(3)
	led := 0
	for rg := storage.RangeID(2); rg <= ranges; rg++ {
		if _, local := n1.store.Replica(rg).Leader(); local {
			led++
		}
	}
	if led < ranges/2 {
		t.Fatalf("node 1 leads only %d of the quiesced ranges once alone", led)
	}
	c.mu.Lock()
	delete(c.nodes, 1)
	c.mu.Unlock()
	start := time.Now()
	if err := n1.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	bound := 2 * n1.electionTimeout()
	if took := time.Since(start); took > 4*bound {
		t.Fatalf("Shutdown took %v with %d ranges led and no peer: more than 4 transfer bounds (%v), so one range after the other", took, led, 4*bound)
	}
}

// TestRangesPerNode: with 4 ranges on 3 nodes, every node's INFO and
// status report each node as a replica of the 4 ranges and the leaders
// per node adding up to 4, matching each range's leader; after range 2's
// leadership moves to node 3 alone, node 3 leads one range more.
func TestRangesPerNode(t *testing.T) {
	c := newRangeCluster(t, testRangeCount)
	ctx := testCtx(t, time.Minute)
	check := func(id uint64) map[uint64]int {
		t.Helper()
		st := c.node(id).Status()
		led := map[uint64]int{}
		total := 0
		for _, m := range st.Members {
			if m.Replicas != testRangeCount {
				t.Fatalf("node %d reports node %d as a replica of %d ranges, want %d", id, m.ID, m.Replicas, testRangeCount)
			}
			if m.Leading > 0 { // INFO lists the nodes that lead a range
				led[m.ID] = m.Leading
			}
			total += m.Leading
		}
		if total != testRangeCount {
			t.Fatalf("node %d: leaders per node %v add up to %d", id, led, total)
		}
		info, err := c.client(id).Info(ctx, "replication").Result()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(info, "raft_ranges_per_node:1=4,2=4,3=4\r\n") {
			t.Fatalf("node %d INFO replication: no raft_ranges_per_node:1=4,2=4,3=4\n%s", id, info)
		}
		want := fmt.Sprintf("raft_leaders_per_node:%s\r\n", perNodeField(led))
		if !strings.Contains(info, want) {
			t.Fatalf("node %d INFO replication: want %q\n%s", id, want, info)
		}
		return led
	}
	for id := uint64(1); id <= 3; id++ {
		check(id)
	}
	// Range 2's leadership to node 3, then to node 1 and back to 3, so
	// that it moves whoever led it.
	n := c.node(1)
	if err := n.transferLeaderOf(ctx, 2, 1); err != nil {
		t.Fatal(err)
	}
	n.catchUp(ctx, 2)
	before := check(1)
	if err := n.transferLeaderOf(ctx, 2, 3); err != nil {
		t.Fatal(err)
	}
	for {
		if lead, _ := n.store.Replica(2).Leader(); lead == 3 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("node 1 never saw node 3 lead range 2")
		}
		time.Sleep(10 * time.Millisecond)
	}
	after := check(1)
	if after[3] != before[3]+1 || after[1] != before[1]-1 {
		t.Fatalf("leaders per node %v before and %v after moving range 2 from node 1 to node 3", before, after)
	}
}

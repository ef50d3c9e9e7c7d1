package server

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvorum/kvorum/internal/slot"
	"github.com/kvorum/kvorum/internal/storage"
)

// TestClusterSlotsPerRangeLeader: with range 3 led by another node than
// range 1, CLUSTER SLOTS lists each range's interval with its own leader
// first and all three members, CLUSTER NODES has a master per distinct
// leader, and go-redis's ClusterClient, routing by that map, sends each
// range's keys to its leader and reads them back.
func TestClusterSlotsPerRangeLeader(t *testing.T) {
	c := newRangeCluster(t, testRangeCount)
	ctx := testCtx(t, time.Minute)
	n1 := c.node(1)
	lead1, _ := n1.store.Replica(1).Leader()
	lead3, _ := n1.store.Replica(3).Leader()
	if lead3 == lead1 {
		to := lead1%3 + 1
		if err := n1.transferLeaderOf(ctx, 3, to); err != nil {
			t.Fatalf("transfer range 3 to node %d: %v", to, err)
		}
	}
	// leaders waits until every node sees range 3 led by another node
	// than range 1 and returns each range's leader.
	leaders := func() map[storage.RangeID]uint64 {
		for {
			out := map[storage.RangeID]uint64{}
			agree := true
			for rg := storage.RangeID(1); rg <= testRangeCount; rg++ {
				l, _ := n1.store.Replica(rg).Leader()
				for id := uint64(2); id <= 3; id++ {
					if o, _ := c.node(id).store.Replica(rg).Leader(); o != l {
						agree = false
					}
				}
				out[rg] = l
			}
			if agree && out[1] != 0 && out[3] != 0 && out[1] != out[3] {
				return out
			}
			if ctx.Err() != nil {
				t.Fatalf("range leaders %v: want range 3 led by another node than range 1, seen by every node", out)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	lead := leaders()
	per := slot.Count / testRangeCount

	// The probes that learn the other nodes' addresses start with the
	// first CLUSTER command: retry until every member is known.
	var slots []redis.ClusterSlot
	for id := uint64(1); id <= 3; id++ {
		for {
			var err error
			slots, err = c.client(id).ClusterSlots(ctx).Result()
			if err == nil && len(slots) == testRangeCount && len(slots[0].Nodes) == 3 && len(slots[2].Nodes) == 3 {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("node %d CLUSTER SLOTS: %+v, %v; want %d ranges on 3 nodes", id, slots, err, testRangeCount)
			}
			time.Sleep(50 * time.Millisecond)
		}
		for i, s := range slots {
			rg := storage.RangeID(i + 1)
			l := lead[rg]
			if s.Start != i*per || s.End != (i+1)*per-1 || len(s.Nodes) != 3 {
				t.Fatalf("node %d CLUSTER SLOTS entry %d: %+v; want %d-%d on 3 nodes", id, i, s, i*per, (i+1)*per-1)
			}
			if s.Nodes[0].ID != n1.sentinelID(storage.NodeID(l)) || s.Nodes[0].Addr != c.node(l).ClientAddr() {
				t.Fatalf("node %d CLUSTER SLOTS entry %d: master %+v; want range %d's leader, node %d at %s", id, i, s.Nodes[0], rg, l, c.node(l).ClientAddr())
			}
		}
	}
	if slots[0].Nodes[0].ID == slots[2].Nodes[0].ID {
		t.Fatalf("CLUSTER SLOTS: ranges 1 and 3 both led by %s", slots[0].Nodes[0].ID)
	}

	nodes, err := c.client(2).ClusterNodes(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	distinct := map[uint64]bool{}
	for _, l := range lead {
		distinct[l] = true
	}
	if got := strings.Count(nodes, "master - "); got != len(distinct) {
		t.Fatalf("CLUSTER NODES with %d distinct leaders (%v):\n%s", len(distinct), lead, nodes)
	}
	// Each leader's line ends with the intervals of the ranges it leads,
	// adjacent ones merged.
	want := map[uint64][][2]int{}
	for rg := storage.RangeID(1); rg <= testRangeCount; rg++ {
		l, start, end := lead[rg], int(rg-1)*per, int(rg)*per-1
		if iv := want[l]; len(iv) > 0 && iv[len(iv)-1][1]+1 == start {
			iv[len(iv)-1][1] = end
		} else {
			want[l] = append(iv, [2]int{start, end})
		}
	}
	for l, iv := range want {
		line := n1.sentinelID(storage.NodeID(l)) + " " + c.node(l).ClientAddr()
		suffix := " connected"
		for _, r := range iv {
			suffix += fmt.Sprintf(" %d-%d", r[0], r[1])
		}
		found := false
		for _, ln := range strings.Split(nodes, "\n") {
			if strings.HasPrefix(ln, line) && strings.HasSuffix(ln, suffix) && strings.Contains(ln, "master - ") {
				found = true
			}
		}
		if !found {
			t.Fatalf("CLUSTER NODES: no line %s...master...%s (leaders %v):\n%s", line, suffix, lead, nodes)
		}
	}

	addrs := []string{c.node(1).ClientAddr(), c.node(2).ClientAddr(), c.node(3).ClientAddr()}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer rdb.Close()
	for rg := storage.RangeID(1); rg <= testRangeCount; rg++ {
		k := keyIn("cslots:", rg, 0)
		// The client's slot map sends the key to its range's leader at
		// once (no -MOVED round trip needed).
		m, err := rdb.MasterForKey(ctx, k)
		if err != nil || m.Options().Addr != c.node(lead[rg]).ClientAddr() {
			t.Fatalf("ClusterClient master for %s (range %d): %v, %v; want node %d at %s", k, rg, m, err, lead[rg], c.node(lead[rg]).ClientAddr())
		}
		if err := rdb.Set(ctx, k, fmt.Sprint(rg), 0).Err(); err != nil {
			t.Fatalf("ClusterClient SET %s (range %d): %v", k, rg, err)
		}
		if v, err := rdb.Get(ctx, k).Result(); err != nil || v != fmt.Sprint(rg) {
			t.Fatalf("ClusterClient GET %s: %q, %v", k, v, err)
		}
		if v, err := c.client(lead[rg]%3+1).Get(ctx, k).Result(); err != nil || v != fmt.Sprint(rg) {
			t.Fatalf("GET %s through another node: %q, %v", k, v, err)
		}
	}
}

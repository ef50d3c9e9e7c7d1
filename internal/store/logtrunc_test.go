package store

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestLogTruncatedBySize: with a byte budget far below what the count rule
// would keep, every node truncates its log by size, keeps a tail within
// the budget, and a follower that was down meanwhile still catches up.
func TestLogTruncatedBySize(t *testing.T) {
	const budget = 8 << 10
	c := newClusterWith(t, 3, func(cfg *Config) {
		cfg.SnapshotThreshold = 10_000
		cfg.LogBytes = budget
	})
	lead := c.leader()
	val := strings.Repeat("v", 300)
	write := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := propose(t, lead, []string{"SET", fmt.Sprintf("k%d", i%7), fmt.Sprintf("%d-%s", i, val)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(0, 200) // ~60 KiB of entries: several times the budget
	for _, tn := range c.nodes {
		barrierRead(t, tn, "k0")
		// A leader keeps what a responsive follower had not acknowledged
		// when it last truncated, and a follower here may lag by a
		// hundred entries or more (proposals wait for one follower only),
		// so the leader's log only has to be truncated at all (the count
		// rule keeps every entry); a follower's stays within the budget.
		minFirst, limit := uint64(100), uint64(2*budget/300)
		if tn == lead {
			minFirst, limit = 2, 1000
		}
		// The Ready loop updates the log's bounds after the reads of its
		// round are released, and truncates after that: poll.
		r := tn.store.Replica(1)
		var first, last uint64
		for end := time.Now().Add(3 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			first, _ = r.log.FirstIndex()
			last, _ = r.log.LastIndex()
			if (first >= minFirst && last-first+1 <= limit) || time.Now().After(end) {
				break
			}
		}
		if first < minFirst {
			t.Errorf("node %d: log not truncated by size: entries %d..%d", tn.id, first, last)
		}
		if kept := last - first + 1; kept > limit {
			t.Errorf("node %d: %d entries kept (%d..%d), more than the budget holds (%d)", tn.id, kept, first, last, limit)
		}
	}

	// A follower down while the log moves on catches up when it returns.
	var down *testNode
	for _, tn := range c.nodes {
		if tn != lead {
			down = tn
			break
		}
	}
	c.stopNode(down)
	write(200, 400)
	c.startNode(down, lead.store.Replica(1).Descriptor())
	for i := 393; i < 400; i++ {
		key := fmt.Sprintf("k%d", i%7)
		if v, ok := barrierRead(t, down, key); !ok || v != fmt.Sprintf("%d-%s", i, val) {
			t.Fatalf("node %d after its restart: %s = %.12q, want %d-...", down.id, key, v, i)
		}
	}
}

package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/kv"
)

// TestExpiredKeysDeletedInBackground: keys whose deadline passed are
// deleted from every node's store by the leader's expiry pass, many of
// them within a few ticks (the pass runs more rounds while many expire),
// and keys without a deadline or with a later one stay.
func TestExpiredKeysDeletedInBackground(t *testing.T) {
	c := newTestCluster(t, 3)
	lead := c.waitLeader()
	ctx := testCtx(t, 60*time.Second)
	cl := c.client(lead)
	const short = 1000
	pipe := cl.Pipeline()
	for i := 0; i < short; i++ {
		pipe.Set(ctx, fmt.Sprintf("short-%04d", i), "v", 50*time.Millisecond)
	}
	for i := 0; i < 10; i++ {
		pipe.Set(ctx, fmt.Sprintf("keep-%d", i), "v", 0)
		pipe.Set(ctx, fmt.Sprintf("later-%d", i), "v", time.Hour)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	// Expired but still stored, on node id: what the pass has to delete.
	left := func(id uint64) int {
		keys, err := kv.ExpiredKeys(c.node(id).store.DB(), time.Now().UnixMilli(), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		return len(keys)
	}
	time.Sleep(100 * time.Millisecond) // every short deadline has passed
	start := time.Now()
	for id := uint64(1); id <= 3; id++ {
		for left(id) > 0 {
			if time.Since(start) > 20*time.Second {
				t.Fatalf("node %d: %d expired keys still stored after %v", id, left(id), time.Since(start))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	t.Logf("%d expired keys deleted on every node within %v", short, time.Since(start).Round(time.Millisecond))
	for id := uint64(1); id <= 3; id++ {
		if n, err := c.client(id).DBSize(ctx).Result(); err != nil || n != 20 {
			t.Fatalf("node %d: dbsize %d, %v; want the 20 keys without a passed deadline", id, n, err)
		}
	}
}

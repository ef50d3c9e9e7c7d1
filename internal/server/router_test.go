package server

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvorum/kvorum/internal/slot"
	"github.com/kvorum/kvorum/internal/storage"
	"github.com/kvorum/kvorum/internal/store"
)

// Routing over several ranges (router.go, docs/ranges.md §3.6), on 3-node
// clusters whose keyspace starts split into 4 ranges of 4,096 slots each
// (Config.testRanges), every node hosting every range.
//
// These tests use strings, TTLs and the keyspace commands mostly; kv's
// hidden keys are per range or per slot (docs/ranges.md §2.3), the expiry
// index included (expiry_ranges_test.go).

const testRangeCount = 4

// newRangeCluster starts a 3-node cluster split into ranges ranges and
// waits until each range has a leader every node knows.
func newRangeCluster(t *testing.T, ranges int) *testCluster {
	t.Helper()
	return newRangeClusterWith(t, ranges, nil)
}

// newRangeClusterWith is newRangeCluster with adjust (nil: none) applied
// to each node's configuration.
func newRangeClusterWith(t *testing.T, ranges int, adjust func(id uint64, cfg *Config)) *testCluster {
	t.Helper()
	c := newClusterWith(t, 3, func(id uint64, cfg *Config) {
		cfg.testRanges = ranges
		if adjust != nil {
			adjust(id, cfg)
		}
	})
	t.Cleanup(c.stopAll)
	ctx := testCtx(t, 30*time.Second)
	for id := uint64(1); id <= 3; id++ {
		n := c.node(id)
		if got := n.store.ReplicaCount(); got != ranges {
			t.Fatalf("node %d holds %d ranges, want %d", id, got, ranges)
		}
		for rg := storage.RangeID(1); rg <= storage.RangeID(ranges); rg++ {
			r := n.store.Replica(rg)
			for {
				if lead, _ := r.Leader(); lead != 0 {
					bctx, cancel := context.WithTimeout(ctx, time.Second)
					err := r.ReadBarrier(bctx)
					cancel()
					if err == nil {
						break
					}
				}
				if ctx.Err() != nil {
					t.Fatalf("node %d: range %d has no leader", id, rg)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	return c
}

// rangeOfKey is the range of key in a cluster of testRangeCount ranges.
func rangeOfKey(key string) storage.RangeID {
	return storage.RangeID(int(slot.Of([]byte(key)))/(slot.Count/testRangeCount)) + 1
}

// keyIn returns the i-th key of prefix whose slot is in range rg.
func keyIn(prefix string, rg storage.RangeID, i int) string {
	for j := 0; ; j++ {
		k := fmt.Sprintf("%s%d", prefix, j)
		if rangeOfKey(k) == rg {
			if i == 0 {
				return k
			}
			i--
		}
	}
}

func TestRangesSplitTable(t *testing.T) {
	c := newRangeCluster(t, testRangeCount)
	n := c.node(1)
	for s := 0; s < slot.Count; s += 97 {
		r := n.store.ReplicaForSlot(uint16(s))
		if want := storage.RangeID(s/(slot.Count/testRangeCount)) + 1; r == nil || r.RangeID() != want {
			t.Fatalf("slot %d routes to %v, want range %d", s, r, want)
		}
		if !r.Descriptor().ContainsSlot(uint16(s)) {
			t.Fatalf("slot %d: range %d's descriptor does not hold it", s, r.RangeID())
		}
	}
}

// TestRangesStringsRouteEverywhere: SET, GET, INCR and DEL of 1,000 keys
// spread over every range, sent through every node (followers forward to
// each range's leader with the range in the payload), read back through
// every node.
func TestRangesStringsRouteEverywhere(t *testing.T) {
	c := newRangeCluster(t, testRangeCount)
	ctx := testCtx(t, 2*time.Minute)
	cls := []*redis.Client{c.client(1), c.client(2), c.client(3)}
	perRange := map[storage.RangeID]int{}
	const keys = 1000
	for i := 0; i < keys; i++ {
		k := fmt.Sprintf("key:%d", i)
		perRange[rangeOfKey(k)]++
		if err := cls[i%3].Set(ctx, k, fmt.Sprintf("v%d", i), 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
	}
	for rg := storage.RangeID(1); rg <= testRangeCount; rg++ {
		if perRange[rg] < keys/testRangeCount/2 {
			t.Fatalf("keys per range %v: range %d has too few", perRange, rg)
		}
	}
	for i := 0; i < 100; i++ {
		k := fmt.Sprintf("ctr:%d", i)
		for j := 0; j < 3; j++ {
			if err := cls[(i+j)%3].Incr(ctx, k).Err(); err != nil {
				t.Fatalf("INCR %s: %v", k, err)
			}
		}
	}
	for i := 0; i < keys; i += 10 {
		if err := cls[i%3].Del(ctx, fmt.Sprintf("key:%d", i)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, cl := range cls {
		for i := 0; i < keys; i++ {
			k := fmt.Sprintf("key:%d", i)
			v, err := cl.Get(ctx, k).Result()
			if i%10 == 0 {
				if err != redis.Nil {
					t.Fatalf("GET %s after DEL: %q, %v", k, v, err)
				}
				continue
			}
			if err != nil || v != fmt.Sprintf("v%d", i) {
				t.Fatalf("GET %s: %q, %v", k, v, err)
			}
		}
		for i := 0; i < 100; i++ {
			if v, err := cl.Get(ctx, fmt.Sprintf("ctr:%d", i)).Result(); err != nil || v != "3" {
				t.Fatalf("GET ctr:%d: %q, %v", i, v, err)
			}
		}
	}
	// Each range applied only its own keys: its leader's applied index
	// moved by about its share of the writes.
	for rg := storage.RangeID(1); rg <= testRangeCount; rg++ {
		if applied := c.node(1).store.Replica(rg).AppliedIndex(); applied < uint64(perRange[rg]/2) {
			t.Errorf("range %d applied index %d for %d keys", rg, applied, perRange[rg])
		}
	}
}

// TestRangesMultiKey: a multi-key command within one range works, with or
// without a hash tag; one whose keys span ranges answers CROSSRANGE and
// writes nothing.
func TestRangesMultiKey(t *testing.T) {
	c := newRangeCluster(t, testRangeCount)
	ctx := testCtx(t, time.Minute)
	cl := c.client(2)
	a, b := keyIn("mk", 2, 0), keyIn("mk", 2, 1)
	other := keyIn("mk", 3, 0)
	if err := cl.MSet(ctx, a, "1", b, "2").Err(); err != nil {
		t.Fatalf("MSET within range 2: %v", err)
	}
	if v, err := cl.MGet(ctx, a, b).Result(); err != nil || fmt.Sprint(v) != "[1 2]" {
		t.Fatalf("MGET within range 2: %v, %v", v, err)
	}
	err := cl.MGet(ctx, a, other).Err()
	if err == nil || !strings.HasPrefix(err.Error(), "CROSSRANGE") {
		t.Fatalf("MGET across ranges: %v, want CROSSRANGE", err)
	}
	err = cl.MSet(ctx, other, "x", a, "y").Err()
	if err == nil || !strings.HasPrefix(err.Error(), "CROSSRANGE") {
		t.Fatalf("MSET across ranges: %v, want CROSSRANGE", err)
	}
	if err := cl.Get(ctx, other).Err(); err != redis.Nil {
		t.Fatalf("the refused MSET wrote %s: %v", other, err)
	}
	err = cl.Del(ctx, a, other).Err()
	if err == nil || !strings.HasPrefix(err.Error(), "CROSSRANGE") {
		t.Fatalf("DEL across ranges: %v, want CROSSRANGE", err)
	}
	if n, err := cl.Del(ctx, a, b).Result(); err != nil || n != 2 {
		t.Fatalf("DEL within range 2: %d, %v", n, err)
	}
	// Hash tags keep keys of any name in one slot.
	tagged := []string{"{user7}:name", "{user7}:mail", "{user7}:visits"}
	if err := c.client(3).MSet(ctx, tagged[0], "ann", tagged[1], "a@x", tagged[2], "0").Err(); err != nil {
		t.Fatalf("MSET with a hash tag: %v", err)
	}
	if err := c.client(1).Incr(ctx, tagged[2]).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := c.client(1).MGet(ctx, tagged...).Result(); err != nil || fmt.Sprint(v) != "[ann a@x 1]" {
		t.Fatalf("MGET with a hash tag: %v, %v", v, err)
	}
	if err := c.client(2).Rename(ctx, tagged[0], "{user7}:fullname").Err(); err != nil {
		t.Fatalf("RENAME with a hash tag: %v", err)
	}
	if v, err := c.client(3).Get(ctx, "{user7}:fullname").Result(); err != nil || v != "ann" {
		t.Fatalf("GET after RENAME: %q, %v", v, err)
	}
}

// TestRangesKeyspaceFanOut: DBSIZE, KEYS, SCAN (a full iteration with a
// small COUNT sees every key exactly once, through every range's span),
// RANDOMKEY and FLUSHALL act on every range.
func TestRangesKeyspaceFanOut(t *testing.T) {
	c := newRangeCluster(t, testRangeCount)
	ctx := testCtx(t, 2*time.Minute)
	const keys = 400
	pipe := c.client(1).Pipeline()
	for i := 0; i < keys; i++ {
		pipe.Set(ctx, fmt.Sprintf("fan:%d", i), "x", 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	for id := uint64(1); id <= 3; id++ {
		cl := c.client(id)
		if n, err := cl.DBSize(ctx).Result(); err != nil || n != keys {
			t.Fatalf("node %d DBSIZE: %d, %v", id, n, err)
		}
		if ks, err := cl.Keys(ctx, "fan:*").Result(); err != nil || len(ks) != keys {
			t.Fatalf("node %d KEYS: %d keys, %v", id, len(ks), err)
		}
		seen := map[string]int{}
		var cursor uint64
		for {
			ks, next, err := cl.Scan(ctx, cursor, "", 7).Result()
			if err != nil {
				t.Fatalf("node %d SCAN: %v", id, err)
			}
			for _, k := range ks {
				seen[k]++
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
		if len(seen) != keys {
			t.Fatalf("node %d SCAN saw %d keys, want %d", id, len(seen), keys)
		}
		for k, n := range seen {
			if n != 1 {
				t.Fatalf("node %d SCAN returned %s %d times", id, k, n)
			}
		}
		k, err := cl.RandomKey(ctx).Result()
		if err != nil || !strings.HasPrefix(k, "fan:") {
			t.Fatalf("node %d RANDOMKEY: %q, %v", id, k, err)
		}
	}
	if err := c.client(2).FlushAll(ctx).Err(); err != nil {
		t.Fatalf("FLUSHALL: %v", err)
	}
	for id := uint64(1); id <= 3; id++ {
		cl := c.client(id)
		if n, err := cl.DBSize(ctx).Result(); err != nil || n != 0 {
			t.Fatalf("node %d DBSIZE after FLUSHALL: %d, %v", id, n, err)
		}
		if err := cl.RandomKey(ctx).Err(); err != redis.Nil {
			t.Fatalf("node %d RANDOMKEY after FLUSHALL: %v", id, err)
		}
	}
	// Writes go on in every range after the flush.
	if err := c.client(3).Set(ctx, keyIn("after", 4, 0), "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := c.client(1).DBSize(ctx).Result(); err != nil || n != 1 {
		t.Fatalf("DBSIZE: %d, %v", n, err)
	}
}

// TestRangesPipelineOrder: a pipeline whose commands go to different
// ranges (grouped by range, the groups in parallel) gets its replies in
// command order.
func TestRangesPipelineOrder(t *testing.T) {
	c := newRangeCluster(t, testRangeCount)
	ctx := testCtx(t, time.Minute)
	for id := uint64(1); id <= 3; id++ {
		pipe := c.client(id).Pipeline()
		var cmds []redis.Cmder
		const n = 120
		for i := 0; i < n; i++ {
			k := fmt.Sprintf("p%d:%d", id, i)
			cmds = append(cmds, pipe.Set(ctx, k, i, 0), pipe.Get(ctx, k), pipe.Incr(ctx, k))
			if i > 0 {
				cmds = append(cmds, pipe.Get(ctx, fmt.Sprintf("p%d:%d", id, i-1)))
			}
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatalf("node %d pipeline: %v", id, err)
		}
		j := 0
		for i := 0; i < n; i++ {
			if s := cmds[j].(*redis.StatusCmd).Val(); s != "OK" {
				t.Fatalf("cmd %d SET: %q", j, s)
			}
			if v := cmds[j+1].(*redis.StringCmd).Val(); v != fmt.Sprint(i) {
				t.Fatalf("cmd %d GET: %q, want %d", j+1, v, i)
			}
			if v := cmds[j+2].(*redis.IntCmd).Val(); v != int64(i+1) {
				t.Fatalf("cmd %d INCR: %d, want %d", j+2, v, i+1)
			}
			j += 3
			if i > 0 {
				// The previous key, INCRed earlier in the pipeline (its
				// range may differ from this command's).
				if v := cmds[j].(*redis.StringCmd).Val(); v != fmt.Sprint(i) {
					t.Fatalf("cmd %d GET of the previous key: %q, want %d", j, v, i)
				}
				j++
			}
		}
	}
}

// TestRangesExpiry: keys with a TTL expire in every range (invisible at
// once, then deleted by the sweeper of each range's leader).
func TestRangesExpiry(t *testing.T) {
	c := newRangeCluster(t, testRangeCount)
	ctx := testCtx(t, time.Minute)
	cl := c.client(2)
	var keys []string
	for rg := storage.RangeID(1); rg <= testRangeCount; rg++ {
		for i := 0; i < 5; i++ {
			k := keyIn("ttl", rg, i)
			keys = append(keys, k)
			if err := cl.Set(ctx, k, "v", 200*time.Millisecond).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := cl.Set(ctx, keyIn("keep", 3, 0), "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	for _, k := range keys {
		if err := c.client(3).Get(ctx, k).Err(); err != redis.Nil {
			t.Fatalf("GET %s (range %d) after its TTL: %v", k, rangeOfKey(k), err)
		}
	}
	// The sweeper deletes them: DBSIZE counts the kept key only, on
	// every node.
	deadline := time.Now().Add(15 * time.Second)
	for id := uint64(1); id <= 3; id++ {
		for {
			n, err := c.client(id).DBSize(ctx).Result()
			if err == nil && n == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d DBSIZE %d, %v: expired keys not deleted", id, n, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// TestRangesLeadersDiffer: the leadership of one range moves to another
// node than range 1's leader, and commands for every range, through every
// node, still reach their range's leader.
func TestRangesLeadersDiffer(t *testing.T) {
	c := newRangeCluster(t, testRangeCount)
	ctx := testCtx(t, time.Minute)
	n1 := c.node(1)
	lead1, _ := n1.store.Replica(1).Leader()
	lead3, _ := n1.store.Replica(3).Leader()
	to := lead1%3 + 1
	if to == lead3 {
		to = to%3 + 1
		if to == lead1 {
			to = to%3 + 1
		}
	}
	if err := n1.transferLeaderOf(ctx, 3, to); err != nil {
		t.Fatalf("transfer range 3 to node %d: %v", to, err)
	}
	for {
		l3, _ := n1.store.Replica(3).Leader()
		l1, _ := n1.store.Replica(1).Leader()
		if l3 == to && l1 != l3 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("range 3 led by %d, range 1 by %d; want range 3 on %d", l3, l1, to)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for id := uint64(1); id <= 3; id++ {
		cl := c.client(id)
		for rg := storage.RangeID(1); rg <= testRangeCount; rg++ {
			k := keyIn(fmt.Sprintf("lead%d:", id), rg, 0)
			if err := cl.Set(ctx, k, fmt.Sprint(rg), 0).Err(); err != nil {
				t.Fatalf("node %d SET %s (range %d): %v", id, k, rg, err)
			}
			if err := cl.Incr(ctx, k).Err(); err != nil {
				t.Fatalf("node %d INCR %s (range %d): %v", id, k, rg, err)
			}
		}
	}
	for id := uint64(1); id <= 3; id++ {
		for src := uint64(1); src <= 3; src++ {
			for rg := storage.RangeID(1); rg <= testRangeCount; rg++ {
				k := keyIn(fmt.Sprintf("lead%d:", src), rg, 0)
				if v, err := c.client(id).Get(ctx, k).Result(); err != nil || v != fmt.Sprint(rg+1) {
					t.Fatalf("node %d GET %s: %q, %v", id, k, v, err)
				}
			}
		}
	}
}

// TestOneRangeDefault: a cluster started as today holds one range that
// owns every slot; multi-key commands over any slots work as before (no
// CROSSRANGE), and the state machine's span is the whole user span.
func TestOneRangeDefault(t *testing.T) {
	c := newTestCluster(t, 3)
	t.Cleanup(c.stopAll)
	ctx := testCtx(t, time.Minute)
	n := c.node(1)
	if n.multiRange() || n.store.ReplicaCount() != 1 {
		t.Fatalf("a default cluster holds %d ranges", n.store.ReplicaCount())
	}
	for _, s := range []uint16{0, 1, 8191, slot.Count - 1} {
		if r := n.store.ReplicaForSlot(s); r == nil || r.RangeID() != firstRange {
			t.Fatalf("slot %d routes to %v", s, r)
		}
	}
	if d := n.store.Replica(firstRange).Descriptor(); !d.IsFull() {
		t.Fatalf("range 1 descriptor %+v does not own every slot", d)
	}
	cl := c.client(c.waitLeader()%3 + 1)
	if err := cl.MSet(ctx, "a", "1", "b", "2", "c", "3").Err(); err != nil {
		t.Fatalf("MSET over slots: %v", err)
	}
	if v, err := cl.MGet(ctx, "a", "b", "c").Result(); err != nil || fmt.Sprint(v) != "[1 2 3]" {
		t.Fatalf("MGET over slots: %v, %v", v, err)
	}
	if n, err := cl.DBSize(ctx).Result(); err != nil || n != 3 {
		t.Fatalf("DBSIZE: %d, %v", n, err)
	}
}

// TestRangesRestartCatchesUp: a node of a 4-range cluster that was down
// while every range took writes (and truncated its log: SnapshotThreshold
// 50) restarts with its 4 ranges, catches up on each (by log or by a
// snapshot of the range's own slot span: a snapshot of one range must not
// touch another's keys), and holds every key. Then a graceful shutdown
// hands over every range its node leads, and the other two nodes serve
// every range.
func TestRangesRestartCatchesUp(t *testing.T) {
	c := newRangeCluster(t, testRangeCount)
	ctx := testCtx(t, 2*time.Minute)
	for i := 0; i < 100; i++ {
		if err := c.client(1).Set(ctx, fmt.Sprintf("early:%d", i), "e", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	c.stop(3)
	const keys = 400
	for i := 0; i < keys; i++ {
		if err := c.client(uint64(i%2+1)).Set(ctx, fmt.Sprintf("late:%d", i), fmt.Sprint(i), 0).Err(); err != nil {
			t.Fatalf("SET late:%d with node 3 down: %v", i, err)
		}
	}
	c.start(3)
	n3 := c.node(3)
	if got := n3.store.ReplicaCount(); got != testRangeCount {
		t.Fatalf("restarted node holds %d ranges", got)
	}
	for rg := storage.RangeID(1); rg <= testRangeCount; rg++ {
		for {
			want := c.node(1).store.Replica(rg).AppliedIndex()
			if got := n3.store.Replica(rg).AppliedIndex(); got >= want {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("range %d: node 3 never caught up", rg)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if mfs, err := n3.reg.Gather(); err == nil {
		for _, mf := range mfs {
			if mf.GetName() == "kvorum_raft_snapshots_applied_total" {
				t.Logf("node 3 applied %v snapshots on restart", mf.GetMetric()[0].GetCounter().GetValue())
			}
		}
	}
	db := n3.store.DB()
	for i := 0; i < 100; i++ {
		if r := readAt(db, nil, [][]byte{[]byte("GET"), []byte(fmt.Sprintf("early:%d", i))}, time.Now().UnixMilli()); string(r.Str) != "e" {
			t.Fatalf("node 3 local early:%d = %+v", i, r)
		}
	}
	for i := 0; i < keys; i++ {
		if r := readAt(db, nil, [][]byte{[]byte("GET"), []byte(fmt.Sprintf("late:%d", i))}, time.Now().UnixMilli()); string(r.Str) != fmt.Sprint(i) {
			t.Fatalf("node 3 local late:%d = %+v", i, r)
		}
	}
	if r := readAt(db, nil, [][]byte{[]byte("DBSIZE")}, time.Now().UnixMilli()); r.Int != 100+keys {
		t.Fatalf("node 3 local DBSIZE %d, want %d", r.Int, 100+keys)
	}

	// Graceful shutdown of the node leading range 1: it hands over every
	// range it leads first.
	lead, _ := c.node(1).store.Replica(1).Leader()
	c.shutdown(lead)
	var rest []uint64
	for id := uint64(1); id <= 3; id++ {
		if id != lead {
			rest = append(rest, id)
		}
	}
	for _, id := range rest {
		for rg := storage.RangeID(1); rg <= testRangeCount; rg++ {
			k := keyIn(fmt.Sprintf("after%d:", id), rg, 0)
			if err := c.client(id).Set(ctx, k, "1", 0).Err(); err != nil {
				t.Fatalf("node %d SET %s (range %d) after the shutdown of node %d: %v", id, k, rg, lead, err)
			}
			if v, err := c.client(rest[0]).Get(ctx, k).Result(); err != nil || v != "1" {
				t.Fatalf("GET %s: %q, %v", k, v, err)
			}
		}
	}
}

// TestRangesMisrouteRetried: a command first sent to a range that does not
// own its key (as a split leaves a stale route) is refused by the range
// check (a write: at apply, having written nothing; a read: by the
// descriptor kv.ReadIn gets) and routed again to the owner: every reply is
// right and every INCR counted once.
func TestRangesMisrouteRetried(t *testing.T) {
	var misrouted atomic.Int64
	misroute := func(n *Node, args [][]byte) *store.Replica {
		if len(args) < 2 {
			return nil
		}
		misrouted.Add(1)
		return n.store.Replica(rangeOfKey(string(args[1]))%testRangeCount + 1)
	}
	testMisroute.Store(&misroute)
	t.Cleanup(func() { testMisroute.Store(nil) })
	c := newRangeCluster(t, testRangeCount)
	ctx := testCtx(t, time.Minute)
	for id := uint64(1); id <= 3; id++ {
		pipe := c.client(id).Pipeline()
		var incrs []*redis.IntCmd
		var gets []*redis.StringCmd
		for i := 0; i < 40; i++ {
			k := fmt.Sprintf("mis%d:%d", id, i)
			pipe.Set(ctx, k, 10, 0)
			incrs = append(incrs, pipe.Incr(ctx, k))
			gets = append(gets, pipe.Get(ctx, k))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatalf("node %d: %v", id, err)
		}
		for i := range incrs {
			if incrs[i].Val() != 11 || gets[i].Val() != "11" {
				t.Fatalf("node %d key %d: INCR %d, GET %q; want 11", id, i, incrs[i].Val(), gets[i].Val())
			}
		}
	}
	testMisroute.Store(nil)
	for id := uint64(1); id <= 3; id++ {
		for i := 0; i < 40; i++ {
			if v, err := c.client(id%3+1).Get(ctx, fmt.Sprintf("mis%d:%d", id, i)).Result(); err != nil || v != "11" {
				t.Fatalf("GET mis%d:%d: %q, %v", id, i, v, err)
			}
		}
	}
	if misrouted.Load() < 3*120 {
		t.Fatalf("only %d commands misrouted", misrouted.Load())
	}
}

// TestResolveScriptsNoAlloc: a run with no EVALSHA goes through
// resolveScripts (every run routed to a range other than 1 does) without
// an allocation, whatever the case of its command names.
func TestResolveScriptsNoAlloc(t *testing.T) {
	n := &Node{}
	cmds := [][][]byte{{[]byte("SET"), []byte("k"), []byte("v")}, {[]byte("get"), []byte("k")}, {[]byte("HSet"), []byte("h"), []byte("f"), []byte("v")}}
	ctx := context.Background()
	if a := testing.AllocsPerRun(100, func() { n.resolveScripts(ctx, cmds) }); a != 0 {
		t.Fatalf("resolveScripts of a run without EVALSHA: %v allocations", a)
	}
}

package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvorum/kvorum/internal/admin"
	"github.com/kvorum/kvorum/internal/slot"
	"github.com/kvorum/kvorum/internal/storage"
)

// waitRanges waits until every node holds exactly the ranges want
// (id -> [start, end)) with those intervals, each with a leader.
func waitRanges(t *testing.T, c *testCluster, want map[uint64][2]uint32) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		bad := ""
		for id := uint64(1); id <= 3; id++ {
			rs := c.node(id).Ranges().Ranges
			if len(rs) != len(want) {
				bad = fmt.Sprintf("node %d holds %d ranges, want %d", id, len(rs), len(want))
				continue
			}
			for _, r := range rs {
				w, ok := want[r.RangeID]
				if !ok || r.StartSlot != w[0] || r.EndSlot != w[1] || r.Leader == 0 {
					bad = fmt.Sprintf("node %d: range %d is [%d, %d) leader %d, want %v", id, r.RangeID, r.StartSlot, r.EndSlot, r.Leader, w)
				}
			}
		}
		if bad == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(bad)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSplitKeepsEveryKey: a 3-node cluster with one range loads keys of
// several types, some with TTLs, then splits twice (3 ranges). Every key
// reads back as written through Redis commands from every node, TTLs
// survive, and a SCAN cursor taken before the splits, continued after
// them, misses no key.
func TestSplitKeepsEveryKey(t *testing.T) {
	c := newClusterWith(t, 3, func(uint64, *Config) {})
	t.Cleanup(c.stopAll)
	ctx := testCtx(t, 2*time.Minute)
	cl := c.client(1)
	const n = 800
	strs := map[string]string{}
	pipe := cl.Pipeline()
	for i := 0; i < n; i++ {
		k, v := fmt.Sprintf("s:%d", i), fmt.Sprintf("v%d", i*7)
		strs[k] = v
		ttl := time.Duration(0)
		if i%5 == 0 {
			ttl = time.Hour
		}
		pipe.Set(ctx, k, v, ttl)
		pipe.HSet(ctx, fmt.Sprintf("h:%d", i), "a", i, "b", fmt.Sprint(-i))
		pipe.SAdd(ctx, fmt.Sprintf("set:%d", i), "x", i, i+1)
		pipe.ZAdd(ctx, fmt.Sprintf("z:%d", i), redis.Z{Score: float64(i), Member: "m1"}, redis.Z{Score: 0.5, Member: "m2"})
		if i%7 == 0 {
			pipe.Expire(ctx, fmt.Sprintf("z:%d", i), time.Hour)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	all := map[string]bool{}
	for i := 0; i < n; i++ {
		for _, p := range []string{"s", "h", "set", "z"} {
			all[fmt.Sprintf("%s:%d", p, i)] = true
		}
	}
	// A SCAN started before the split.
	seen := map[string]bool{}
	keys, cursor, err := cl.Scan(ctx, 0, "", 200).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		seen[k] = true
	}
	if cursor == 0 {
		t.Fatal("SCAN finished in one call; the test needs a cursor in the middle")
	}

	// Split from a follower, then from the leader's node.
	lead := c.waitLeader()
	fol := lead%3 + 1
	l, r, err := c.node(fol).SplitRange(ctx, 1, 8192)
	if err != nil {
		t.Fatal(err)
	}
	if l.EndSlot != 8192 || r.StartSlot != 8192 || r.EndSlot != slot.Count || r.RangeID <= 1 {
		t.Fatalf("split: %+v %+v", l, r)
	}
	first := uint64(r.RangeID)
	_, r2, err := c.node(lead).SplitRange(ctx, 1, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if r2.RangeID <= r.RangeID || r2.StartSlot != 4096 || r2.EndSlot != 8192 {
		t.Fatalf("second split: %+v", r2)
	}
	waitRanges(t, c, map[uint64][2]uint32{1: {0, 4096}, uint64(r2.RangeID): {4096, 8192}, first: {8192, slot.Count}})

	for {
		keys, cursor, err = cl.Scan(ctx, cursor, "", 200).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			seen[k] = true
		}
		if cursor == 0 {
			break
		}
	}
	for k := range all {
		if !seen[k] {
			t.Fatalf("SCAN across the split missed %s", k)
		}
	}

	for id := uint64(1); id <= 3; id++ {
		cl := c.client(id)
		pipe := cl.Pipeline()
		gets := map[string]*redis.StringCmd{}
		ttls := map[string]*redis.DurationCmd{}
		hs := map[int]*redis.MapStringStringCmd{}
		ss := map[int]*redis.StringSliceCmd{}
		zs := map[int]*redis.ZSliceCmd{}
		for i := 0; i < n; i++ {
			k := fmt.Sprintf("s:%d", i)
			gets[k] = pipe.Get(ctx, k)
			ttls[k] = pipe.TTL(ctx, k)
			hs[i] = pipe.HGetAll(ctx, fmt.Sprintf("h:%d", i))
			ss[i] = pipe.SMembers(ctx, fmt.Sprintf("set:%d", i))
			zs[i] = pipe.ZRangeWithScores(ctx, fmt.Sprintf("z:%d", i), 0, -1)
			ttls[fmt.Sprintf("z:%d", i)] = pipe.TTL(ctx, fmt.Sprintf("z:%d", i))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatalf("node %d: %v", id, err)
		}
		for i := 0; i < n; i++ {
			k := fmt.Sprintf("s:%d", i)
			if gets[k].Val() != strs[k] {
				t.Fatalf("node %d: GET %s = %q, want %q", id, k, gets[k].Val(), strs[k])
			}
			for _, tk := range []string{k, fmt.Sprintf("z:%d", i)} {
				want := (tk == k && i%5 == 0) || (tk != k && i%7 == 0)
				if got := ttls[tk].Val() > 0; got != want {
					t.Fatalf("node %d: TTL %s = %v, want a TTL: %v", id, tk, ttls[tk].Val(), want)
				}
			}
			if h := hs[i].Val(); h["a"] != fmt.Sprint(i) || h["b"] != fmt.Sprint(-i) || len(h) != 2 {
				t.Fatalf("node %d: HGETALL h:%d = %v", id, i, h)
			}
			m := ss[i].Val()
			sort.Strings(m)
			want := []string{fmt.Sprint(i), fmt.Sprint(i + 1), "x"}
			sort.Strings(want)
			if !slices.Equal(m, want) {
				t.Fatalf("node %d: SMEMBERS set:%d = %v", id, i, m)
			}
			z := zs[i].Val()
			if len(z) != 2 {
				t.Fatalf("node %d: z:%d = %v", id, i, z)
			}
		}
	}
	// Both halves take new writes.
	for i := 0; i < 50; i++ {
		if err := cl.Incr(ctx, fmt.Sprintf("after:%d", i)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// A restarted node reloads every range (ids 2 and 3 here: consecutive,
	// what recoverOrBootstrap's loop loads) and serves the moved keys.
	c.stop(3)
	c.start(3)
	waitRanges(t, c, map[uint64][2]uint32{1: {0, 4096}, uint64(r2.RangeID): {4096, 8192}, first: {8192, slot.Count}})
	cl3 := c.client(3)
	for i := 0; i < n; i += 37 {
		k := fmt.Sprintf("s:%d", i)
		if v, err := cl3.Get(ctx, k).Result(); err != nil || v != strs[k] {
			t.Fatalf("after restart: GET %s = %q, %v", k, v, err)
		}
	}
	for i := 0; i < 50; i++ {
		if v, err := cl3.Get(ctx, fmt.Sprintf("after:%d", i)).Result(); err != nil || v != "1" {
			t.Fatalf("after restart: GET after:%d = %q, %v", i, v, err)
		}
	}
}

// TestSplitUnderLoad: writers INCR counters in both halves while the
// range splits; every counter ends equal to its acknowledged INCRs.
func TestSplitUnderLoad(t *testing.T) {
	c := newClusterWith(t, 3, func(uint64, *Config) {})
	t.Cleanup(c.stopAll)
	ctx := testCtx(t, 2*time.Minute)
	// Keys on both sides of slot 8192.
	var keys []string
	lo, hi := 0, 0
	for i := 0; lo < 4 || hi < 4; i++ {
		k := fmt.Sprintf("ctr:%d", i)
		if slot.Of([]byte(k)) < 8192 && lo < 4 {
			keys, lo = append(keys, k), lo+1
		} else if slot.Of([]byte(k)) >= 8192 && hi < 4 {
			keys, hi = append(keys, k), hi+1
		}
	}
	acked := make([]atomic.Int64, len(keys))
	failed := make([]atomic.Int64, len(keys))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := c.client(uint64(w%3 + 1))
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := cl.Incr(ctx, keys[w]).Err(); err != nil {
					if failed[w].Add(1) == 1 {
						t.Logf("INCR %s: %v", keys[w], err)
					}
				} else {
					acked[w].Add(1)
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	_, rhs, err := c.node(2).SplitRange(ctx, 1, 8192)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	waitRanges(t, c, map[uint64][2]uint32{1: {0, 8192}, uint64(rhs.RangeID): {8192, slot.Count}})
	cl := c.client(1)
	for i, k := range keys {
		v, err := cl.Get(ctx, k).Int64()
		if err != nil {
			t.Fatal(err)
		}
		a, f := acked[i].Load(), failed[i].Load()
		// The router retries what a split refused (RANGEKEYMISMATCH):
		// no INCR may fail, and none may count twice.
		if v != a || f > 0 || a == 0 {
			t.Fatalf("%s = %d after %d acknowledged INCRs (%d failed)", k, v, a, f)
		}
	}
}

// TestSplitAdminEndpoint: POST /v1/ranges/{id}/split splits and replies
// the two descriptors; bad requests get 4xx.
func TestSplitAdminEndpoint(t *testing.T) {
	c := newClusterWith(t, 3, func(uint64, *Config) {})
	t.Cleanup(c.stopAll)
	n := c.node(1)
	post := adminPoster(t, n)
	for _, tc := range []struct {
		path, body string
		code       int
	}{
		{"/v1/ranges/9/split", `{"slot": 100}`, http.StatusNotFound},
		{"/v1/ranges/x/split", `{"slot": 100}`, http.StatusBadRequest},
		{"/v1/ranges/1/split", `{}`, http.StatusBadRequest},
		{"/v1/ranges/1/split", `{"slot": 0}`, http.StatusBadRequest},
		{"/v1/ranges/1/split", `{"slot": 16384}`, http.StatusBadRequest},
	} {
		if code, body := post(tc.path, tc.body); code != tc.code {
			t.Fatalf("POST %s %s: %d %s, want %d", tc.path, tc.body, code, body, tc.code)
		}
	}
	code, body := post("/v1/ranges/1/split", `{"slot": 10000}`)
	if code != http.StatusOK {
		t.Fatalf("split: %d %s", code, body)
	}
	var res admin.SplitRangeResponse
	if err := json.Unmarshal(body, &res); err != nil {
		t.Fatal(err)
	}
	if res.Left.RangeID != 1 || res.Left.EndSlot != 10000 || res.Right.StartSlot != 10000 || res.Right.EndSlot != slot.Count || len(res.Right.Replicas) != 3 {
		t.Fatalf("split replied %s", body)
	}
	// The slot is now the start of range 1's neighbour: outside range 1.
	if code, body := post("/v1/ranges/1/split", `{"slot": 10000}`); code != http.StatusBadRequest {
		t.Fatalf("split at the boundary: %d %s", code, body)
	}
	if r := n.store.Replica(storage.RangeID(res.Right.RangeID)); r == nil {
		t.Fatal("node 1 has no RHS")
	}
}

// adminPoster serves n's admin API on a test server and returns a function
// that POSTs body (JSON) to path there, returning the status and body.
func adminPoster(t *testing.T, n *Node) func(path, body string) (int, []byte) {
	srv := httptest.NewServer(admin.New(admin.Config{Node: (*adminAPI)(n), Logger: testLogger()}).Handler())
	t.Cleanup(srv.Close)
	return func(path, body string) (int, []byte) {
		t.Helper()
		resp, err := http.Post(srv.URL+path, "application/json", bytes.NewBufferString(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		return resp.StatusCode, buf.Bytes()
	}
}

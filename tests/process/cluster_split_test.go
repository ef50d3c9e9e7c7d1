package process

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// split splits range id at slot through p's admin API.
func (c *cluster) split(p *proc, id, slot int) {
	c.t.Helper()
	resp, err := http.Post(fmt.Sprintf("http://%s/v1/ranges/%d/split", p.admin, id), "application/json", strings.NewReader(fmt.Sprintf(`{"slot":%d}`, slot)))
	if err != nil {
		c.t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		c.dumpLogs()
		c.t.Fatalf("split range %d at slot %d: HTTP %d: %s", id, slot, resp.StatusCode, body)
	}
}

// TestClusterClientsThroughSplit: on a 5-node cluster, go-redis's
// ClusterClient keeps writing while range 1 is split twice through the
// admin API. Every acknowledged write reads back on every node, CLUSTER
// SLOTS lists the three ranges with all five nodes, and redis-py's
// RedisCluster, started after the splits, writes and reads through them.
func TestClusterClientsThroughSplit(t *testing.T) {
	requireRedisPy(t)
	c := newCluster(t, 5)
	lead := c.waitLeader()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.clientAddrs(), MaxRedirects: 8})
	defer rdb.Close()

	var mu sync.Mutex
	acked := map[string]string{}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for i := range 20000 { // bounded; stopped long before
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			k, v := fmt.Sprintf("split-%d", i), fmt.Sprintf("v%d", i)
			if err := rdb.Set(ctx, k, v, 0).Err(); err != nil {
				done <- fmt.Errorf("SET %s through the cluster client: %w", k, err)
				return
			}
			mu.Lock()
			acked[k] = v
			mu.Unlock()
		}
		done <- nil
	}()
	// more waits until the writer has had n more writes acknowledged.
	more := func(n int) {
		t.Helper()
		want := count() + n
		for deadline := time.Now().Add(30 * time.Second); count() < want; time.Sleep(10 * time.Millisecond) {
			select {
			case err := <-done:
				t.Fatalf("the writer stopped: %v", err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("the writer is stuck at %d acknowledged writes", count())
			}
		}
	}
	more(200)
	c.split(lead, 1, 8192)
	more(200)
	c.split(c.procs[lead.id%5], 1, 4096) // through a follower's admin API
	more(200)
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	slots, err := rdb.ClusterSlots(ctx).Result()
	if err != nil || len(slots) != 3 {
		t.Fatalf("CLUSTER SLOTS after two splits: %+v, %v; want 3 slot ranges", slots, err)
	}
	want := [][2]int{{0, 4095}, {4096, 8191}, {8192, 16383}}
	for i, s := range slots {
		if s.Start != want[i][0] || s.End != want[i][1] || len(s.Nodes) != 5 {
			t.Fatalf("CLUSTER SLOTS entry %d: %+v; want %d-%d on 5 nodes", i, s, want[i][0], want[i][1])
		}
	}
	mu.Lock()
	defer mu.Unlock()
	checkAcked(t, c, acked)

	cmd := exec.CommandContext(ctx, pythonWithRedis, append([]string{"-u", "testdata/redis_py_cluster.py", "py-split-"}, c.clientAddrs()...)...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "OK 100\n") {
		c.dumpLogs()
		t.Fatalf("redis_py_cluster.py after the splits: %v\n%s", err, out)
	}
}

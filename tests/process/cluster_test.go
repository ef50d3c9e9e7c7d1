package process

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis Cluster clients, unchanged, given the kvorum nodes' client
// addresses as their seed nodes: CLUSTER SLOTS names the leader as the
// master of every slot, they send each command there, and a leadership
// change reaches them as -MOVED.

// transferLeader moves the leadership to p through its admin API and
// waits until every node agrees.
func (c *cluster) transferLeader(p *proc) {
	c.t.Helper()
	resp, err := http.Post("http://"+p.admin+"/v1/transfer-leader", "application/json", strings.NewReader(fmt.Sprintf(`{"id":%d}`, p.id)))
	if err != nil {
		c.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("transfer-leader to node %d: HTTP %d", p.id, resp.StatusCode)
	}
	if lead := c.waitLeader(); lead != p {
		c.t.Fatalf("leader is node %d after the transfer to node %d", lead.id, p.id)
	}
}

// TestClusterClientGoRedis: go-redis's ClusterClient sees one slot range
// served by the leader, writes and reads through it, and keeps working
// after the leadership moves (it follows -MOVED). A plain connection to a
// follower is forwarded; one that sent a CLUSTER command gets -MOVED, and
// with READONLY reads on the follower.
func TestClusterClientGoRedis(t *testing.T) {
	c := newCluster(t, 3)
	lead := c.waitLeader()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.clientAddrs(), MaxRedirects: 8})
	defer rdb.Close()

	slots, err := rdb.ClusterSlots(ctx).Result()
	if err != nil || len(slots) != 1 || slots[0].Start != 0 || slots[0].End != 16383 || len(slots[0].Nodes) != 3 ||
		slots[0].Nodes[0].Addr != lead.client {
		t.Fatalf("CLUSTER SLOTS %+v, %v; want 0-16383 on the leader %s first, then 2 replicas", slots, err, lead.client)
	}
	acked := map[string]string{}
	write := func(prefix string) {
		for i := range 100 {
			k, v := fmt.Sprintf("%s%d", prefix, i), fmt.Sprintf("v%d", i)
			if err := rdb.Set(ctx, k, v, 0).Err(); err != nil {
				t.Fatalf("SET %s through the cluster client: %v", k, err)
			}
			acked[k] = v
		}
		for k, v := range acked {
			if got, err := rdb.Get(ctx, k).Result(); err != nil || got != v {
				t.Fatalf("GET %s through the cluster client: %q, %v; want %q", k, got, err, v)
			}
		}
	}
	write("cc-a-")
	next := c.procs[lead.id%3]
	c.transferLeader(next)
	write("cc-b-")
	if slots, err := rdb.ClusterSlots(ctx).Result(); err != nil || slots[0].Nodes[0].Addr != next.client {
		t.Fatalf("CLUSTER SLOTS after the transfer: %+v, %v; want the new leader %s first", slots, err, next.client)
	}
	checkAcked(t, c, acked)

	follower := c.procs[next.id%3]
	one := func() *redis.Client {
		return redis.NewClient(&redis.Options{Addr: follower.client, Protocol: 2, PoolSize: 1, MaxRetries: -1})
	}
	plain := one()
	defer plain.Close()
	if err := plain.Set(ctx, "foo", "plain", 0).Err(); err != nil {
		t.Fatalf("a plain client's SET on a follower: %v (want it forwarded)", err)
	}
	aware := one()
	defer aware.Close()
	if n, err := aware.ClusterKeySlot(ctx, "foo").Result(); err != nil || n != 12182 {
		t.Fatalf("CLUSTER KEYSLOT foo = %d, %v", n, err)
	}
	// The follower knows where to send the client once it has learned the
	// leader's client address (its discovery probes, which CLUSTER SLOTS
	// runs when they are stale); until then it forwards.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		slots, err := aware.ClusterSlots(ctx).Result()
		if err == nil && len(slots) == 1 && slots[0].Nodes[0].Addr == next.client {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CLUSTER SLOTS on the follower: %+v, %v; want the leader %s first", slots, err, next.client)
		}
	}
	if err := aware.Set(ctx, "foo", "aware", 0).Err(); err == nil || err.Error() != "MOVED 12182 "+next.client {
		t.Fatalf("a cluster-aware SET on a follower: %v; want MOVED 12182 %s", err, next.client)
	}
	if err := aware.Do(ctx, "READONLY").Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := aware.Get(ctx, "cc-a-1").Result(); err != nil || v != "v1" {
		t.Fatalf("READONLY GET on a follower: %q, %v", v, err)
	}
	if err := aware.Set(ctx, "foo", "aware", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "MOVED ") {
		t.Fatalf("READONLY SET on a follower: %v; want MOVED", err)
	}
}

// TestClusterClientRedisPy: redis-py's RedisCluster, seeded with every
// node, writes and reads 100 keys, across a leadership transfer
// (testdata/redis_py_cluster.py).
func TestClusterClientRedisPy(t *testing.T) {
	requireRedisPy(t)
	c := newCluster(t, 3)
	lead := c.waitLeader()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	run := func(prefix string) string {
		cmd := exec.CommandContext(ctx, pythonWithRedis, append([]string{"-u", "testdata/redis_py_cluster.py", prefix}, c.clientAddrs()...)...)
		cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			c.dumpLogs()
			t.Fatalf("redis_py_cluster.py %s: %v\n%s", prefix, err, out)
		}
		return string(out)
	}
	if out := run("py-a-"); !strings.Contains(out, "MASTER "+lead.client+"\n") || !strings.Contains(out, "OK 100\n") {
		t.Fatalf("redis-py output:\n%s\nwant MASTER %s and OK 100", out, lead.client)
	}
	next := c.procs[lead.id%3]
	c.transferLeader(next)
	if out := run("py-b-"); !strings.Contains(out, "MASTER "+next.client+"\n") || !strings.Contains(out, "OK 100\n") {
		t.Fatalf("redis-py output after the transfer:\n%s\nwant MASTER %s and OK 100", out, next.client)
	}
	want := map[string]string{}
	for _, p := range []string{"py-a-", "py-b-"} {
		for i := range 100 {
			want[fmt.Sprintf("%s%d", p, i)] = fmt.Sprintf("v%d", i)
		}
	}
	checkAcked(t, c, want)
}

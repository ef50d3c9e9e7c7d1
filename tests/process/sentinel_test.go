package process

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis Sentinel clients, unchanged, given the kvorum nodes' client
// addresses as their sentinels: they find the leader, and find the new one
// after the leader is killed with kill -9.

func (c *cluster) clientAddrs() []string {
	var out []string
	for _, p := range c.procs {
		out = append(out, p.client)
	}
	return out
}

func (c *cluster) procAt(addr string) *proc {
	for _, p := range c.procs {
		if p.client == addr {
			return p
		}
	}
	return nil
}

// TestSentinelFailoverGoRedis: go-redis's NewFailoverClient writes keys,
// the leader's process is killed (kill -9), the client keeps writing
// (retrying a failed write, a bounded number of times) and ends on another
// node; every acknowledged key reads back. Twice: with go-redis's default
// options, then (the killed node restarted) with DialerRetries 1, which
// README recommends: go-redis keeps asking the sentinel it last used, and
// when that was the killed leader each of its dials is retried 5 times by
// default (about 10 s to recover here instead of about 1 s).
func TestSentinelFailoverGoRedis(t *testing.T) {
	c := newCluster(t, 3, "--sentinel-master-name", "kv-main")
	c.waitLeader()
	all := map[string]string{}
	for round, dialerRetries := range []int{0, 1} {
		for k, v := range goRedisFailover(t, c, fmt.Sprintf("gr%d-", round), dialerRetries) {
			all[k] = v
		}
		for _, p := range c.procs {
			if p.cmd == nil {
				c.start(p, "--sentinel-master-name", "kv-main") // a restart takes the flags again
			}
		}
		c.waitLeader()
		checkAcked(t, c, all)
	}
}

// goRedisFailover writes 30 keys through a failover client, kills the
// leader, writes 70 more and returns them all.
func goRedisFailover(t *testing.T, c *cluster, prefix string, dialerRetries int) map[string]string {
	lead := c.waitLeader()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	rdb := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    "kv-main",
		SentinelAddrs: c.clientAddrs(),
		DialerRetries: dialerRetries,
	})
	defer rdb.Close()
	// Connected to the leader: its ROLE says master.
	if role, err := rdb.Do(ctx, "ROLE").Slice(); err != nil || role[0] != "master" {
		t.Fatalf("ROLE through the failover client: %v %v", role, err)
	}
	sc := redis.NewSentinelClient(&redis.Options{Addr: c.procs[0].client})
	defer sc.Close()
	if addr, err := sc.GetMasterAddrByName(ctx, "kv-main").Result(); err != nil || net.JoinHostPort(addr[0], addr[1]) != lead.client {
		c.dumpLogs()
		t.Fatalf("GET-MASTER-ADDR-BY-NAME: %v %v, want the leader's %s; SENTINEL MASTERS %v", addr, err, lead.client, sc.Masters(ctx).Val())
	}

	acked := map[string]string{}
	errs := 0
	var errSeen []string
	deadline := time.Now().Add(60 * time.Second)
	write := func(i int) {
		key, val := fmt.Sprintf("%s%d", prefix, i), fmt.Sprintf("v%d", i)
		for attempt := 0; attempt < 100; attempt++ {
			if time.Now().After(deadline) {
				c.dumpLogs()
				t.Fatalf("60 s passed at key %d (%d acknowledged, %d errors: %v)", i, len(acked), errs, errSeen)
			}
			wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
			err := rdb.Set(wctx, key, val, 0).Err()
			wcancel()
			if err == nil {
				acked[key] = val
				return
			}
			errs++
			if len(errSeen) < 5 {
				errSeen = append(errSeen, err.Error())
			}
			time.Sleep(100 * time.Millisecond)
		}
		c.dumpLogs()
		t.Fatalf("key %s not written after 100 attempts (%v)", key, errSeen)
	}
	for i := 0; i < 30; i++ {
		write(i)
	}
	c.kill(lead, syscall.SIGKILL)
	t.Logf("DialerRetries %d: kill -9 leader node %d (%s)", dialerRetries, lead.id, lead.client)
	start := time.Now()
	for i := 30; i < 100; i++ {
		write(i)
		if i == 30 {
			t.Logf("DialerRetries %d: first write after the kill acknowledged after %v", dialerRetries, time.Since(start).Round(time.Millisecond))
		}
	}
	t.Logf("%d writes acknowledged, %d failed attempts: %v", len(acked), errs, errSeen)
	if len(acked) != 100 {
		t.Fatalf("%d keys acknowledged, want 100", len(acked))
	}
	// The client now talks to the new leader.
	if role, err := rdb.Do(ctx, "ROLE").Slice(); err != nil || role[0] != "master" {
		t.Errorf("ROLE through the failover client after the kill: %v %v", role, err)
	}
	newLead := c.waitLeader()
	if newLead == lead {
		t.Fatalf("node %d leads again while killed", lead.id)
	}
	for _, p := range c.procs {
		if p.cmd == nil {
			continue
		}
		sc := redis.NewSentinelClient(&redis.Options{Addr: p.client})
		// Discovery is eventually consistent: a node names the leader once
		// its probes reach it (every 250 ms, each bounded by 500 ms: on a
		// loaded machine the first may time out).
		var addr []string
		var err error
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			addr, err = sc.GetMasterAddrByName(ctx, "kv-main").Result()
			if err == nil && net.JoinHostPort(addr[0], addr[1]) == newLead.client || time.Now().After(deadline) {
				break
			}
		}
		if err != nil || net.JoinHostPort(addr[0], addr[1]) != newLead.client {
			st, _ := c.status(p)
			t.Errorf("node %d names master %v (%v), want node %d's %s; its status %+v, SENTINEL MASTERS %v",
				p.id, addr, err, newLead.id, newLead.client, st, sc.Masters(ctx).Val())
		}
		sc.Close()
	}
	return acked
}

// checkAcked reads every acknowledged key back through every running node.
func checkAcked(t *testing.T, c *cluster, acked map[string]string) {
	t.Helper()
	for _, p := range c.procs {
		if p.cmd == nil {
			continue
		}
		cl := client(p)
		for k, v := range acked {
			got, err := cl.Get(context.Background(), k).Result()
			if err != nil || got != v {
				cl.Close()
				t.Fatalf("node %d: acknowledged %s=%s reads %q, %v", p.id, k, v, got, err)
			}
		}
		cl.Close()
	}
}

// TestSentinelFailoverRedisPy: the same with redis-py's
// Sentinel(...).master_for (testdata/redis_py_sentinel.py).
func TestSentinelFailoverRedisPy(t *testing.T) {
	requireRedisPy(t)
	c := newCluster(t, 3)
	lead := c.waitLeader()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, pythonWithRedis, append([]string{"-u", "testdata/redis_py_sentinel.py", "kvorum"}, c.clientAddrs()...)...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	var acked []string
	killed := false
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		out.WriteString(line + "\n")
		switch f := strings.Fields(line); {
		case len(f) == 2 && f[0] == "READY-FOR-KILL":
			if f[1] != lead.client {
				t.Errorf("redis-py's master is %s, the leader is node %d at %s", f[1], lead.id, lead.client)
			}
			if p := c.procAt(f[1]); p != nil && !killed {
				c.kill(p, syscall.SIGKILL)
				killed = true
				t.Logf("kill -9 node %d (%s)", p.id, p.client)
			}
			_, _ = io.WriteString(stdin, "KILLED\n")
		case strings.HasPrefix(line, "ACKED "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "ACKED ")), &acked); err != nil {
				t.Errorf("ACKED line: %v", err)
			}
		}
	}
	err = cmd.Wait()
	t.Logf("redis-py output:\n%s%s", out.String(), stderr.String())
	if err != nil || !killed || len(acked) != 100 {
		c.dumpLogs()
		t.Fatalf("script: %v; killed %v; %d keys acknowledged, want 100", err, killed, len(acked))
	}
	want := map[string]string{}
	for _, k := range acked {
		var i int
		if _, err := fmt.Sscanf(k, "py-%d", &i); err != nil {
			t.Fatalf("acknowledged key %q", k)
		}
		want[k] = fmt.Sprintf("v%d", i)
	}
	c.waitLeader()
	checkAcked(t, c, want)
}

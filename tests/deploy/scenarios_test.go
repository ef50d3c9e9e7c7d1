package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvorum/kvorum/internal/admin"
)

// The Compose scenarios of issue 17: a partitioned node, a rolling
// restart under load, and a fourth node joining. Each runs its own
// project (startCompose) and needs Docker as TestComposeCluster does.

// docker runs the docker CLI under the cluster's context.
func (c *composeCluster) docker(args ...string) (string, error) {
	return run(c.ctx, c.root, nil, "docker", args...)
}

func (c *composeCluster) mustDocker(args ...string) string {
	c.t.Helper()
	out, err := c.docker(args...)
	if err != nil {
		c.t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(out)
}

// TestComposePartition cuts one follower off the Compose network (docker
// network disconnect): the two others keep serving writes, the cut-off
// node, once it knows no leader, refuses a write with CLUSTERDOWN (after
// --request-timeout, 10 s) and never applies it; once reconnected it becomes healthy again and
// serves everything written meanwhile. The test reaches the cut-off node
// through a network of its own that only that node is on.
func TestComposePartition(t *testing.T) {
	c := startCompose(t, 100*time.Second)
	for i := range c.clients {
		c.write(i, fmt.Sprintf("before-%d", i+1), "x", 10*time.Second)
	}
	l := c.leader(0)
	v := l % 3 // a follower: the node after the leader
	victim := c.containers[v]
	name := fmt.Sprintf("kvorum-%d", v+1)

	// A side door to the victim: a network with no other member, whose
	// address the host can reach.
	probe := c.project + "_probe"
	c.mustDocker("network", "create", probe)
	t.Cleanup(func() {
		run(context.Background(), "", nil, "docker", "network", "disconnect", "-f", probe, victim)
		run(context.Background(), "", nil, "docker", "network", "rm", probe)
	})
	c.mustDocker("network", "connect", probe, victim)
	ip := c.mustDocker("inspect", "--format", fmt.Sprintf(`{{(index .NetworkSettings.Networks %q).IPAddress}}`, probe), victim)
	// A read timeout beyond --request-timeout: the node's own answer, not
	// the client's timeout, is what is tested.
	side := redis.NewClient(&redis.Options{Addr: net.JoinHostPort(ip, "6379"), MaxRetries: -1, ReadTimeout: 20 * time.Second})
	t.Cleanup(func() { side.Close() })
	if err := side.Ping(c.ctx).Err(); err != nil {
		t.Fatalf("%s through %s: %v", name, ip, err)
	}

	c.mustDocker("network", "disconnect", c.network(), victim)
	cut := time.Now()
	t.Logf("%s (a follower; leader kvorum-%d) disconnected from %s", name, l, c.network())
	// The majority serves.
	for n := 0; n < 5; n++ {
		for _, i := range []int{(v + 1) % 3, (v + 2) % 3} {
			c.write(i, fmt.Sprintf("majority-%d-%d", i+1, n), strconv.Itoa(n), 15*time.Second)
		}
	}
	c.readAll((v+1)%3, 10*time.Second)
	t.Logf("the majority took 10 writes in %v", time.Since(cut).Round(time.Millisecond))
	// The minority refuses, clearly, within its request timeout. Right
	// after the cut the node still takes its old leader for the leader
	// and forwards a write on a connection that leads nowhere: that
	// write gets UNCERTAIN (it may have arrived). Once its election
	// timeout has passed it knows no leader, and a write gets CLUSTERDOWN
	// (certainly not applied): wait for that.
	for {
		out := c.mustDocker("exec", victim, "/kvorum", "ctl", "--json", "--timeout", "3s", "status")
		var st admin.Status
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("status of %s: %v: %s", name, err, out)
		}
		if st.Leader == 0 {
			t.Logf("%s knows no leader %v after the cut (role %s, term %d)", name, time.Since(cut).Round(time.Millisecond), st.Role, st.Term)
			break
		}
		if time.Since(cut) > 20*time.Second {
			t.Fatalf("the cut-off %s still names leader %d after 20s", name, st.Leader)
		}
		time.Sleep(300 * time.Millisecond)
	}
	refusedAt := time.Now()
	opCtx, cancel := context.WithTimeout(c.ctx, 20*time.Second)
	err := side.Set(opCtx, "minority", "lost", 0).Err()
	cancel()
	if err == nil || !strings.HasPrefix(err.Error(), "CLUSTERDOWN") {
		t.Fatalf("SET through the cut-off %s: %v, want CLUSTERDOWN", name, err)
	}
	t.Logf("the cut-off %s answered a write after %v: %v", name, time.Since(refusedAt).Round(time.Millisecond), err)
	if out, err := c.docker("exec", victim, "/kvorum", "ctl", "--timeout", "3s", "health"); err == nil {
		t.Errorf("the cut-off %s reports itself ready: %s", name, out)
	}

	// Heal: back on the Compose network under its service name (peers
	// dial names, and its address may have changed).
	c.mustDocker("network", "connect", "--alias", name, c.network(), victim)
	healed := time.Now()
	waitHealthy(t, c.ctx, victim)
	c.readAllVia(side, name+" (reconnected)", 20*time.Second)
	t.Logf("%s healthy and caught up %v after reconnecting", name, time.Since(healed).Round(time.Millisecond))
	for i, cl := range []*redis.Client{c.clients[(v+1)%3], c.clients[(v+2)%3], side} {
		opCtx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
		got, err := cl.Get(opCtx, "minority").Result()
		cancel()
		if err != redis.Nil {
			t.Errorf("GET of the refused write through client %d: %q, %v; want nil (CLUSTERDOWN means not applied)", i, got, err)
		}
	}
	c.write((v+1)%3, "after-heal", "y", 10*time.Second)
	c.readAllVia(side, name, 10*time.Second)
	t.Logf("done in %v", time.Since(c.start).Round(time.Millisecond))
}

// TestComposeRollingRestart restarts the three containers one at a time
// (docker restart: SIGTERM, a leader hands over first), each healthy
// before the next, while a writer keeps writing through the nodes that
// are up (bounded: at most 400 writes, one every 20 ms). Every
// acknowledged write reads back on every node at the end.
func TestComposeRollingRestart(t *testing.T) {
	c := startCompose(t, 150*time.Second)
	var (
		down    atomic.Int32 // index of the node being restarted, -1: none
		stop    = make(chan struct{})
		wg      sync.WaitGroup
		mu      sync.Mutex
		acked   = map[string]string{}
		failed  atomic.Int32
		writes  atomic.Int32
		maxLoad = 400
	)
	down.Store(-1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; n < maxLoad; n++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			i := n % 3
			if int(down.Load()) == i {
				i = (i + 1) % 3
			}
			key, val := fmt.Sprintf("load-%d", n), fmt.Sprintf("v%d-via-%d", n, i+1)
			opCtx, cancel := context.WithTimeout(c.ctx, 3*time.Second)
			err := c.clients[i].Set(opCtx, key, val, 0).Err()
			cancel()
			writes.Add(1)
			if err != nil {
				failed.Add(1)
				continue
			}
			mu.Lock()
			acked[key] = val
			mu.Unlock()
		}
	}()
	for i, id := range c.containers {
		leader := c.leader((i + 1) % 3)
		startedAt := func() string { return c.mustDocker("inspect", "--format", "{{.State.StartedAt}}", id) }
		before := startedAt()
		down.Store(int32(i))
		began := time.Now()
		c.mustDocker("restart", "-t", "10", id)
		waitHealthy(t, c.ctx, c.containers...)
		down.Store(-1)
		if startedAt() == before {
			t.Fatalf("kvorum-%d: docker restart did not restart it", i+1)
		}
		t.Logf("kvorum-%d (leader: kvorum-%d) restarted and all healthy in %v", i+1, leader, time.Since(began).Round(time.Millisecond))
	}
	close(stop)
	wg.Wait()
	mu.Lock()
	for k, v := range acked {
		c.want[k] = v
	}
	mu.Unlock()
	t.Logf("%d writes, %d acknowledged, %d failed (not acknowledged: not checked)", writes.Load(), len(c.want), failed.Load())
	if len(c.want) < 50 {
		t.Errorf("only %d writes acknowledged during the rolling restart", len(c.want))
	}
	for i := range c.clients {
		c.readAll(i, 20*time.Second)
	}
	t.Logf("done in %v", time.Since(c.start).Round(time.Millisecond))
}

// TestComposeScaleUp adds a fourth node as deploy/kubernetes adds pods
// from ordinal 3 on: the command line every founding node could run too
// (--id-from-name, --join-from-ordinal 3, --initial-cluster and --join),
// a stable host name it advertises, and a listener on every interface.
// The node's name is kvorum-4, so by the pods' rule (kvorum-N is node
// N+1; Compose's services count from 1) it is node 5. It joins, becomes a
// voter, and serves the reads of what was written before it came.
func TestComposeScaleUp(t *testing.T) {
	c := startCompose(t, 100*time.Second)
	for i := range c.clients {
		c.write(i, fmt.Sprintf("before-%d", i+1), "x", 10*time.Second)
	}
	port := freePorts(t, 1)[0]
	name := "kvorum-4"
	container := c.project + "_" + name
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := run(context.Background(), "", nil, "docker", "logs", "--tail", "40", container)
			t.Logf("%s logs:\n%s", name, out)
		}
		// -v: its anonymous /data volume too.
		run(context.Background(), "", nil, "docker", "rm", "-f", "-v", container)
	})
	began := time.Now()
	c.mustDocker("run", "-d", "--name", container, "--hostname", name,
		"--network", c.network(), "--network-alias", name,
		"-p", fmt.Sprintf("%d:6379", port), imageName+":latest",
		"start", "--id-from-name="+name, "--join-from-ordinal=3",
		"--initial-cluster=1=kvorum-1:7379,2=kvorum-2:7379,3=kvorum-3:7379",
		"--join=kvorum-1:7379",
		"--data-dir=/data", "--peer-addr=0.0.0.0:7379", "--advertise-peer-addr="+name+":7379",
		"--client-addr=0.0.0.0:6379", "--admin-addr=0.0.0.0:8379", "--log-level=info")
	// No health check on a plain docker run (it would need a shell): ask
	// the node itself, as the Compose health check does.
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := c.docker("exec", container, "/kvorum", "ctl", "--timeout", "2s", "health")
		if err == nil {
			break
		}
		if time.Now().After(deadline) || c.ctx.Err() != nil {
			t.Fatalf("%s not ready after 60s: %v %s", name, err, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("%s joined and ready in %v", name, time.Since(began).Round(time.Millisecond))
	// A voter once caught up (it joins as a learner).
	for {
		out := c.mustDocker("exec", c.containers[0], "/kvorum", "ctl", "--json", "member", "list")
		var mr admin.MembersResponse
		if err := json.Unmarshal([]byte(out), &mr); err != nil {
			t.Fatalf("member list: %v: %s", err, out)
		}
		voter := false
		for _, m := range mr.Members {
			voter = voter || m.ID == 5 && m.PeerAddr == name+":7379" && !m.Learner
		}
		if voter && len(mr.Members) == 4 {
			t.Logf("members: %+v", mr.Members)
			break
		}
		if time.Now().After(deadline) || c.ctx.Err() != nil {
			t.Fatalf("node 5 (%s:7379) is not a voter among 4 members: %s", name, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
	fourth := c.client(net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	c.readAllVia(fourth, name, 20*time.Second)
	c.writeVia(fourth, name, "via-4", "z", 10*time.Second)
	for i := range c.clients {
		c.readAll(i, 10*time.Second)
	}
	t.Logf("done in %v", time.Since(c.start).Round(time.Millisecond))
}

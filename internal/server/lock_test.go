package server

import (
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestLockContentionAcrossNodes: clients on every node contend for one
// lock. Every grant is released with its own token (a client handed a
// stale token by a lagging replica would get STALE), holds never overlap,
// tokens never repeat, and the FIFO queue serves everyone.
func TestLockContentionAcrossNodes(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx := testCtx(t, 60*time.Second)
	c.waitLeader()
	const clients, rounds = 5, 25
	type hold struct {
		client     int
		token      int64
		start, end time.Time
	}
	var mu sync.Mutex
	var holds []hold
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			cl := c.client(uint64(i%3 + 1))
			lease, err := cl.Do(ctx, "LEASE", "GRANT", 30000).Int64()
			if err != nil {
				errs <- err
				return
			}
			for r := 0; r < rounds; r++ {
				tok, err := cl.Do(ctx, "LOCK", "ACQUIRE", "hot", lease).Int64()
				if err != nil {
					errs <- err
					return
				}
				start := time.Now()
				time.Sleep(time.Millisecond)
				end := time.Now()
				if n, err := cl.Do(ctx, "LOCK", "RELEASE", "hot", tok).Int64(); err != nil || n != 1 {
					errs <- err
					t.Errorf("client %d: release of token %d: %d %v", i, tok, n, err)
					return
				}
				mu.Lock()
				holds = append(holds, hold{i, tok, start, end})
				mu.Unlock()
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(holds) != clients*rounds {
		t.Fatalf("%d holds, want %d", len(holds), clients*rounds)
	}
	sort.Slice(holds, func(a, b int) bool { return holds[a].start.Before(holds[b].start) })
	seen := map[int64]bool{}
	for i, h := range holds {
		if seen[h.token] {
			t.Fatalf("token %d granted twice", h.token)
		}
		seen[h.token] = true
		if i > 0 {
			p := holds[i-1]
			if h.start.Before(p.end) {
				t.Fatalf("client %d (token %d) held from %v while client %d (token %d) held until %v", h.client, h.token, h.start, p.client, p.token, p.end)
			}
			if h.token <= p.token {
				t.Fatalf("tokens went backwards: %d then %d", p.token, h.token)
			}
		}
	}
	info, err := c.client(1).Do(ctx, "LOCK", "INFO", "hot").Result()
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := info.(map[interface{}]interface{}); ok {
		if m["mode"] != "free" {
			t.Fatalf("after every release: %v", m)
		}
	} else if s, ok := info.([]interface{}); !ok || len(s) < 2 || s[1] != "free" {
		t.Fatalf("after every release: %#v", info)
	}
}

// TestLeaseExpiryHandsOverAndFailoverGrace: a holder that stops renewing
// loses the lock to the waiter about one TTL later, timed by the leader;
// and a lease renewed just before the leader stops survives the failover
// longer than its TTL, because the new leader extends it by one election
// timeout before expiring anything.
func TestLeaseExpiryHandsOverAndFailoverGrace(t *testing.T) {
	const election = time.Second
	c := newClusterWith(t, 3, func(_ uint64, cfg *Config) { cfg.ElectionTicks = int(election / cfg.TickInterval) })
	ctx := testCtx(t, 60*time.Second)
	lead := c.waitLeader()
	other := lead%3 + 1
	// A lease that exists when a node becomes leader gets the failover
	// grace; let the new leader's lease timer take over first.
	time.Sleep(200 * time.Millisecond)

	holder, err := c.client(lead).Do(ctx, "LEASE", "GRANT", 500).Int64()
	if err != nil {
		t.Fatal(err)
	}
	waiter, err := c.client(other).Do(ctx, "LEASE", "GRANT", 30000).Int64()
	if err != nil {
		t.Fatal(err)
	}
	t1, err := c.client(lead).Do(ctx, "LOCK", "ACQUIRE", "m", holder).Int64()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	t2, err := c.client(other).Do(ctx, "LOCK", "ACQUIRE", "m", waiter).Int64()
	took := time.Since(start)
	if err != nil || t2 <= t1 {
		t.Fatalf("waiter: token %d err %v (holder had %d)", t2, err, t1)
	}
	if took < 400*time.Millisecond || took > 5*time.Second {
		t.Fatalf("the waiter was granted %v after the holder's last renewal, want about its 500ms TTL", took)
	}
	t.Logf("hand-off after the holder stopped renewing a 500ms lease: %v", took)
	if err := c.client(other).Do(ctx, "LEASE", "KEEPALIVE", holder).Err(); err == nil || err.Error()[:7] != "NOLEASE" {
		t.Fatalf("keep-alive of the expired lease: %v, want NOLEASE", err)
	}

	// Failover grace. The lease's TTL is shorter than the time the
	// cluster needs to elect a new leader, so without the grace the new
	// leader would expire it at once.
	const ttl = 800 * time.Millisecond
	l, err := c.client(other).Do(ctx, "LEASE", "GRANT", ttl.Milliseconds()).Int64()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.client(other).Do(ctx, "LEASE", "KEEPALIVE", l).Err(); err != nil {
		t.Fatal(err)
	}
	renewed := time.Now()
	c.stop(lead)
	newLead := c.waitLeader()
	time.Sleep(300 * time.Millisecond) // well past the TTL, within the grace
	if since := time.Since(renewed); since < ttl {
		t.Fatalf("the new leader came up only %v after the renewal; the test needs more than the TTL %v", since, ttl)
	}
	if err := c.client(newLead).Do(ctx, "LEASE", "KEEPALIVE", l).Err(); err != nil {
		t.Fatalf("keep-alive %v after the last renewal, across a failover: %v (the new leader must extend leases by one election timeout)", time.Since(renewed), err)
	}
}

// TestLockWaitKeepsQueuePlace: ACQUIRE ... WAIT ms replies null at the
// timeout but keeps the waiter queued (TIMEOUT leaves the queue); acquiring
// again resumes the wait in the same place.
func TestLockWaitKeepsQueuePlace(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx := testCtx(t, 30*time.Second)
	c.waitLeader()
	a, b, d := c.client(1), c.client(2), c.client(3)
	la, _ := a.Do(ctx, "LEASE", "GRANT", 30000).Int64()
	lb, _ := b.Do(ctx, "LEASE", "GRANT", 30000).Int64()
	ld, _ := d.Do(ctx, "LEASE", "GRANT", 30000).Int64()
	ta, err := a.Do(ctx, "LOCK", "ACQUIRE", "w", la).Int64()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Do(ctx, "LOCK", "ACQUIRE", "w", lb, "WAIT", 200).Err(); err != redis.Nil {
		t.Fatalf("WAIT on a held lock: %v, want null", err)
	}
	if err := d.Do(ctx, "LOCK", "ACQUIRE", "w", ld, "TIMEOUT", 200).Err(); err != redis.Nil {
		t.Fatalf("TIMEOUT on a held lock: %v, want null", err)
	}
	info, err := a.Do(ctx, "LOCK", "INFO", "w").Slice()
	if err != nil || len(info) != 8 || info[7] != int64(1) {
		t.Fatalf("LOCK INFO after a WAIT and a TIMEOUT: %v %v, want 1 waiter (WAIT's)", info, err)
	}
	// d queues now, behind b's kept place.
	dGot := make(chan int64, 1)
	go func() {
		tok, _ := d.Do(ctx, "LOCK", "ACQUIRE", "w", ld).Int64()
		dGot <- tok
	}()
	time.Sleep(200 * time.Millisecond)
	if n, err := a.Do(ctx, "LOCK", "RELEASE", "w", ta).Int64(); err != nil || n != 1 {
		t.Fatalf("release: %d %v", n, err)
	}
	select {
	case tok := <-dGot:
		t.Fatalf("d (queued later) was granted %d before b, whose WAIT kept its place", tok)
	case <-time.After(300 * time.Millisecond):
	}
	tb, err := b.Do(ctx, "LOCK", "ACQUIRE", "w", lb, "WAIT", 1000).Int64()
	if err != nil || tb <= ta {
		t.Fatalf("b resuming its wait: %d %v (a had %d)", tb, err, ta)
	}
	if n, err := b.Do(ctx, "LOCK", "RELEASE", "w", tb).Int64(); err != nil || n != 1 {
		t.Fatalf("b's release: %d %v", n, err)
	}
	if td := <-dGot; td <= tb {
		t.Fatalf("d's token %d not above b's %d", td, tb)
	}
}

// TestLockWaiterDisconnect: a client that disconnects while its ACQUIRE
// waits leaves the queue; one that waits with WAIT keeps its place (the
// README's claim for both).
func TestLockWaiterDisconnect(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx := testCtx(t, 30*time.Second)
	c.waitLeader()
	a := c.client(1)
	la, _ := a.Do(ctx, "LEASE", "GRANT", 30000).Int64()
	if _, err := a.Do(ctx, "LOCK", "ACQUIRE", "dc", la).Int64(); err != nil {
		t.Fatal(err)
	}
	waiters := func() int64 {
		info, err := a.Do(ctx, "LOCK", "INFO", "dc").Slice()
		if err != nil || len(info) != 8 {
			t.Fatalf("LOCK INFO: %v %v", info, err)
		}
		return info[7].(int64)
	}
	waitFor := func(want int64, what string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for waiters() != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d waiters, want %d", what, waiters(), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, tc := range []struct {
		opts []interface{}
		left int64 // waiters after the client disconnected
	}{
		{nil, 0},
		{[]interface{}{"WAIT", 10000}, 1},
	} {
		cl := redis.NewClient(&redis.Options{Addr: c.node(2).ClientAddr(), MaxRetries: -1})
		lb, err := cl.Do(ctx, "LEASE", "GRANT", 30000).Int64()
		if err != nil {
			t.Fatal(err)
		}
		go cl.Do(ctx, append([]interface{}{"LOCK", "ACQUIRE", "dc", lb}, tc.opts...)...)
		waitFor(1, "after the acquire queued")
		cl.Close()
		time.Sleep(300 * time.Millisecond) // let the node notice the disconnect
		waitFor(tc.left, "after the client disconnected")
		if tc.left > 0 {
			if n, err := a.Do(ctx, "LOCK", "CANCEL", "dc", lb).Int64(); err != nil || n != 1 {
				t.Fatalf("LOCK CANCEL of the kept waiter: %d %v", n, err)
			}
		}
	}
}

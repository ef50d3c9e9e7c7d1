package kvlock_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/kvorum/kvorum/internal/server"
	"github.com/kvorum/kvorum/internal/testport"
	"github.com/kvorum/kvorum/pkg/kvlock"
	"github.com/redis/go-redis/v9"
)

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func init() { redis.SetLogger(quietLogger{}) } // the tests stop nodes on purpose

// cluster is a 3-node kvorum cluster in this process (in-memory disks).
type cluster struct {
	t     *testing.T
	nodes []*server.Node
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	addr := func() string {
		a, err := testport.Addr()
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	initial := map[uint64]string{}
	cfgs := make([]server.Config, 3)
	for i := range cfgs {
		id := uint64(i + 1)
		cfgs[i] = server.Config{
			ID: id, DataDir: fmt.Sprintf("/node-%d", id), FS: vfs.NewMem(),
			ClientAddr: addr(), PeerAddr: addr(), AdminAddr: "-",
			TickInterval: 50 * time.Millisecond, ElectionTicks: 10, HeartbeatTicks: 1,
			RequestTimeout: 3 * time.Second,
			Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		}
		initial[id] = cfgs[i].PeerAddr
	}
	c := &cluster{t: t}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			if err := n.Stop(); err != nil {
				t.Errorf("stop node %d: %v", n.ID(), err)
			}
		}
	})
	for i := range cfgs {
		cfgs[i].InitialCluster = initial
		n, err := server.Start(cfgs[i])
		if err != nil {
			t.Fatalf("start node %d: %v", i+1, err)
		}
		c.nodes = append(c.nodes, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for _, n := range c.nodes {
		if err := n.WaitLeader(ctx); err != nil {
			t.Fatalf("node %d: no leader: %v", n.ID(), err)
		}
	}
	return c
}

// client returns a go-redis client of node i (0-based), with go-redis's
// default timeouts unless opt changes them.
func (c *cluster) client(i int, opt ...func(*redis.Options)) *redis.Client {
	o := &redis.Options{Addr: c.nodes[i%len(c.nodes)].ClientAddr(), Protocol: 2}
	for _, f := range opt {
		f(o)
	}
	cl := redis.NewClient(o)
	c.t.Cleanup(func() { cl.Close() })
	return cl
}

func (c *cluster) session(i int, opts ...kvlock.Option) *kvlock.Session {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := kvlock.NewSession(ctx, c.client(i), opts...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func info(t *testing.T, c kvlock.Client, name string) kvlock.LockInfo {
	t.Helper()
	in, err := kvlock.Info(ctxFor(t, 5*time.Second), c, name)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// waitWaiters waits until LOCK INFO shows n waiters on name.
func waitWaiters(t *testing.T, c kvlock.Client, name string, n int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		in := info(t, c, name)
		if in.Waiters == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("lock %s: %d waiters after 5s, want %d", name, in.Waiters, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// One cluster for every subtest: starting one takes about a second.
func TestCluster(t *testing.T) {
	c := startCluster(t)
	t.Run("LockUnlock", func(t *testing.T) { testLockUnlock(t, c) })
	t.Run("TryLockWhenHeld", func(t *testing.T) { testTryLockWhenHeld(t, c) })
	t.Run("FIFO", func(t *testing.T) { testFIFO(t, c) })
	t.Run("Shared", func(t *testing.T) { testShared(t, c) })
	t.Run("DeadlineAndCancelLeaveQueue", func(t *testing.T) { testDeadlineAndCancel(t, c) })
	t.Run("WaitLongerThanReadTimeout", func(t *testing.T) { testLongWait(t, c) })
	t.Run("DoneAfterRevokeAndFencing", func(t *testing.T) { testRevokeAndFencing(t, c) })
	t.Run("CloseReleases", func(t *testing.T) { testCloseReleases(t, c) })
}

func testLockUnlock(t *testing.T, c *cluster) {
	ctx := ctxFor(t, 20*time.Second)
	s := c.session(0)
	m := s.Mutex("lu")
	tok, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tok <= 0 || m.Token() != tok {
		t.Fatalf("token %d, Token() %d", tok, m.Token())
	}
	// Visible through another node, held by our lease with our token.
	in := info(t, c.client(1), "lu")
	if in.Mode != "exclusive" || len(in.Holders) != 1 || in.Holders[0] != (kvlock.Holder{Lease: s.Lease(), Token: tok}) {
		t.Fatalf("LOCK INFO while held: %+v (lease %d, token %d)", in, s.Lease(), tok)
	}
	// Lock again through the same session: idempotent, same token.
	if again, err := m.Lock(ctx); err != nil || again != tok {
		t.Fatalf("second Lock: %d, %v; want %d", again, err, tok)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if in := info(t, c.client(2), "lu"); in.Mode != "free" || len(in.Holders) != 0 {
		t.Fatalf("LOCK INFO after Unlock: %+v", in)
	}
	if err := m.Unlock(ctx); !errors.Is(err, kvlock.ErrNotHeld) {
		t.Fatalf("second Unlock: %v", err)
	}
	tok2, err := m.Lock(ctx)
	if err != nil || tok2 <= tok {
		t.Fatalf("relock: token %d after %d, %v: tokens must increase", tok2, tok, err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func testTryLockWhenHeld(t *testing.T, c *cluster) {
	ctx := ctxFor(t, 20*time.Second)
	a, b := c.session(0), c.session(1)
	ma, mb := a.Mutex("try"), b.Mutex("try")
	tokA, ok, err := ma.TryLock(ctx)
	if err != nil || !ok {
		t.Fatalf("TryLock on a free lock: %v %v", ok, err)
	}
	if tok, ok, err := mb.TryLock(ctx); err != nil || ok || tok != 0 {
		t.Fatalf("TryLock while another session holds it: %d %v %v, want 0 false nil", tok, ok, err)
	}
	if in := info(t, c.client(2), "try"); in.Waiters != 0 {
		t.Fatalf("TryLock queued: %+v", in)
	}
	if err := ma.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	tokB, ok, err := mb.TryLock(ctx)
	if err != nil || !ok || tokB <= tokA {
		t.Fatalf("TryLock after release: %d %v %v (previous token %d)", tokB, ok, err, tokA)
	}
	mb.Unlock(ctx)
}

func testFIFO(t *testing.T, c *cluster) {
	ctx := ctxFor(t, 30*time.Second)
	holder := c.session(0).Mutex("fifo")
	tok0, err := holder.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type grant struct {
		waiter int
		token  int64
		err    error
	}
	grants := make(chan grant, 3)
	var wg sync.WaitGroup
	for w := 1; w <= 3; w++ {
		m := c.session(w).Mutex("fifo") // waiters on nodes 2, 3, 1
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok, err := m.Lock(ctx)
			grants <- grant{w, tok, err}
			if err == nil {
				time.Sleep(20 * time.Millisecond) // hold a little: the next must wait
				if err := m.Unlock(ctx); err != nil {
					t.Errorf("waiter %d unlock: %v", w, err)
				}
			}
		}()
		// Enqueue strictly one after another.
		waitWaiters(t, c.client(0), "fifo", int64(w))
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(grants)
	prev := tok0
	want := 1
	for g := range grants {
		if g.err != nil {
			t.Fatalf("waiter %d: %v", g.waiter, g.err)
		}
		if g.waiter != want {
			t.Errorf("grant %d went to waiter %d: not FIFO", want, g.waiter)
		}
		if g.token <= prev {
			t.Errorf("waiter %d got token %d after %d: tokens must increase", g.waiter, g.token, prev)
		}
		prev = g.token
		want++
	}
	if want != 4 {
		t.Fatalf("%d grants, want 3", want-1)
	}
}

func testShared(t *testing.T, c *cluster) {
	ctx := ctxFor(t, 20*time.Second)
	r1, r2, w := c.session(0).RWMutex("rw"), c.session(1).RWMutex("rw"), c.session(2).RWMutex("rw")
	t1, err := r1.RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t2, err := r2.RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if in := info(t, c.client(0), "rw"); in.Mode != "shared" || len(in.Holders) != 2 {
		t.Fatalf("two readers: %+v", in)
	}
	if _, ok, err := w.TryLock(ctx); ok || err != nil {
		t.Fatalf("writer TryLock while read-held: %v %v", ok, err)
	}
	// Both readers' tokens fence writes.
	for i, m := range []*kvlock.Mutex{r1.Reader(), r2.Reader()} {
		if err := m.Fenced(ctx, "SET", "rw-key", fmt.Sprint(i)).Err(); err != nil {
			t.Fatalf("fenced write with reader token %d: %v", []int64{t1, t2}[i], err)
		}
	}
	done := make(chan error, 1)
	go func() { _, err := w.Lock(ctx); done <- err }()
	waitWaiters(t, c.client(0), "rw", 1)
	r1.RUnlock(ctx)
	select {
	case err := <-done:
		t.Fatalf("writer granted while a reader still holds: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	r2.RUnlock(ctx)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if in := info(t, c.client(1), "rw"); in.Mode != "exclusive" {
		t.Fatalf("after the readers left: %+v", in)
	}
	w.Unlock(ctx)
}

func testDeadlineAndCancel(t *testing.T, c *cluster) {
	ctx := ctxFor(t, 20*time.Second)
	holder := c.session(0).Mutex("dl")
	if _, err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	m := c.session(1).Mutex("dl")
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := m.Lock(short)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock on a held lock with a 300ms deadline: %v", err)
	}
	if el := time.Since(start); el < 200*time.Millisecond || el > 2*time.Second {
		t.Errorf("gave up after %v, want about 300ms", el)
	}
	if in := info(t, c.client(2), "dl"); in.Waiters != 0 || len(in.Holders) != 1 {
		t.Fatalf("after a timed-out Lock: %+v, want the holder alone", in)
	}
	// A cancelled context (no deadline) takes the waiter out of the queue too.
	cctx, ccancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { _, err := m.Lock(cctx); errc <- err }()
	waitWaiters(t, c.client(0), "dl", 1)
	ccancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Lock: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Lock did not return within 5s of its context's cancel")
	}
	if in := info(t, c.client(0), "dl"); in.Waiters != 0 {
		t.Fatalf("after a cancelled Lock: %+v", in)
	}
	holder.Unlock(ctx)
	if in := info(t, c.client(0), "dl"); in.Mode != "free" {
		t.Fatalf("the abandoned waiter was granted the lock: %+v", in)
	}
}

// A client with a read timeout shorter than the wait still gets the lock
// (Lock waits in rounds).
func testLongWait(t *testing.T, c *cluster) {
	ctx := ctxFor(t, 20*time.Second)
	holder := c.session(0).Mutex("long")
	if _, err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	cl := c.client(1, func(o *redis.Options) { o.ReadTimeout = 300 * time.Millisecond })
	s, err := kvlock.NewSession(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	time.AfterFunc(time.Second, func() { holder.Unlock(context.Background()) })
	// A second waiter queues after the first one's first round began: the
	// rounds must keep the first one's place (WAIT), so it still goes first.
	second := make(chan error, 1)
	s2 := c.session(2)
	time.AfterFunc(100*time.Millisecond, func() {
		_, err := s2.Mutex("long").Lock(ctx)
		second <- err
	})
	start := time.Now()
	m := s.Mutex("long")
	if _, err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock through a client with a 300ms read timeout: %v", err)
	}
	if el := time.Since(start); el < 900*time.Millisecond {
		t.Errorf("granted after %v although the holder held it for 1s", el)
	}
	select {
	case err := <-second:
		t.Fatalf("the waiter that queued later was granted first (err %v): the rounds lost the first waiter's place", err)
	case <-time.After(200 * time.Millisecond):
	}
	m.Unlock(ctx)
	if err := <-second; err != nil {
		t.Fatalf("second waiter: %v", err)
	}
}

func testRevokeAndFencing(t *testing.T, c *cluster) {
	ctx := ctxFor(t, 20*time.Second)
	const ttl = 1500 * time.Millisecond
	a := c.session(0, kvlock.WithTTL(ttl))
	ma := a.Mutex("fence")
	tokA, err := ma.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ma.Fenced(ctx, "SET", "fenced-key", "a").Err(); err != nil {
		t.Fatalf("fenced write by the holder: %v", err)
	}
	// Another client revokes a's lease: the lock goes to b.
	if n, err := c.client(2).Do(ctx, "LEASE", "REVOKE", a.Lease()).Int64(); err != nil || n != 1 {
		t.Fatalf("LEASE REVOKE: %d %v", n, err)
	}
	select {
	case <-a.Done():
	case <-time.After(ttl):
		t.Fatalf("Done not closed within the TTL %v of LEASE REVOKE", ttl)
	}
	if err := a.Err(); !errors.Is(err, kvlock.ErrLeaseLost) {
		t.Fatalf("Err after revoke: %v", err)
	}
	mb := c.session(1).Mutex("fence")
	tokB, err := mb.Lock(ctx)
	if err != nil || tokB <= tokA {
		t.Fatalf("b's Lock: %d %v (a had %d)", tokB, err, tokA)
	}
	if err := mb.Fenced(ctx, "SET", "fenced-key", "b").Err(); err != nil {
		t.Fatal(err)
	}
	// a still believes in its token; the storage refuses it.
	if ma.Token() != tokA {
		t.Fatalf("a's Token %d, want its stale %d", ma.Token(), tokA)
	}
	err = ma.Fenced(ctx, "SET", "fenced-key", "a-stale").Err()
	if !errors.Is(err, kvlock.ErrFenced) {
		t.Fatalf("fenced write with a stale token: %v, want ErrFenced", err)
	}
	if v, err := c.client(0).Get(ctx, "fenced-key").Result(); err != nil || v != "b" {
		t.Fatalf("fenced-key = %q, %v; want b (the stale write must not land)", v, err)
	}
	if err := ma.Unlock(ctx); !errors.Is(err, kvlock.ErrStaleToken) {
		t.Fatalf("Unlock with a stale token: %v, want ErrStaleToken", err)
	}
	if in := info(t, c.client(0), "fence"); len(in.Holders) != 1 || in.Holders[0].Token != tokB {
		t.Fatalf("the stale Unlock changed the lock: %+v", in)
	}
	mb.Unlock(ctx)
}

func testCloseReleases(t *testing.T, c *cluster) {
	ctx := ctxFor(t, 20*time.Second)
	s, err := kvlock.NewSession(ctx, c.client(0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Mutex("close").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if in := info(t, c.client(1), "close"); in.Mode != "free" {
		t.Fatalf("lock after Close: %+v", in)
	}
	if n, err := c.client(1).Do(ctx, "LEASE", "TTL", s.Lease()).Int64(); err != nil || n != -2 {
		t.Fatalf("LEASE TTL after Close: %d %v, want -2", n, err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

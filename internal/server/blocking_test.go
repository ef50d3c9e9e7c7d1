package server

import (
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestClusterBlockingPopWokenByPushOnAnotherNode: a BLPOP waiting on one
// node returns the element an RPUSH through another node added; timeouts
// are honoured; a waiter whose client disconnected pops nothing.
func TestClusterBlockingPopWokenByPushOnAnotherNode(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx := testCtx(t, 30*time.Second)
	leader := c.waitLeader()
	follower := leader%3 + 1

	type res struct {
		v   []string
		err error
		d   time.Duration
	}
	got := make(chan res, 1)
	go func() {
		start := time.Now()
		v, err := c.client(follower).BLPop(ctx, 10*time.Second, "q1", "q2").Result()
		got <- res{v, err, time.Since(start)}
	}()
	time.Sleep(300 * time.Millisecond) // let it block
	select {
	case r := <-got:
		t.Fatalf("BLPOP returned before any push: %v %v", r.v, r.err)
	default:
	}
	if err := c.client(leader).RPush(ctx, "q2", "job-1").Err(); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil || len(r.v) != 2 || r.v[0] != "q2" || r.v[1] != "job-1" {
		t.Fatalf("BLPOP: %v %v", r.v, r.err)
	}
	if r.d > 5*time.Second {
		t.Fatalf("BLPOP took %v to notice the push", r.d)
	}

	// Timeout: nil after about the timeout.
	start := time.Now()
	_, err := c.client(follower).BLPop(ctx, 400*time.Millisecond, "empty").Result()
	if err != redis.Nil {
		t.Fatalf("BLPOP on an empty list: %v, want redis.Nil", err)
	}
	if d := time.Since(start); d < 350*time.Millisecond || d > 5*time.Second {
		t.Fatalf("BLPOP timeout 400ms returned after %v", d)
	}

	// BLMOVE waits too, and moves atomically.
	done := make(chan string, 1)
	go func() {
		v, _ := c.client(leader).BLMove(ctx, "src", "dst", "LEFT", "RIGHT", 10*time.Second).Result()
		done <- v
	}()
	time.Sleep(200 * time.Millisecond)
	c.client(follower).LPush(ctx, "src", "m")
	if v := <-done; v != "m" {
		t.Fatalf("BLMOVE: %q", v)
	}
	if v := c.client(follower).LRange(ctx, "dst", 0, -1).Val(); len(v) != 1 || v[0] != "m" {
		t.Fatalf("dst after BLMOVE: %v", v)
	}

	// A client that disconnects while blocked must not pop a later push.
	nc, err := net.Dial("tcp", c.node(follower).ClientAddr())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Write([]byte("*3\r\n$5\r\nBLPOP\r\n$6\r\norphan\r\n$1\r\n0\r\n")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if n := c.node(follower).blockedClients.Load(); n != 1 {
		t.Fatalf("%d clients blocked on node %d, want 1", n, follower)
	}
	nc.Close()
	time.Sleep(300 * time.Millisecond)
	if err := c.client(leader).RPush(ctx, "orphan", "keep-me").Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if v := c.client(leader).LRange(ctx, "orphan", 0, -1).Val(); len(v) != 1 {
		t.Fatalf("a disconnected blocked client popped the element: list is %v", v)
	}
	if n := c.node(follower).blockedClients.Load(); n != 0 {
		t.Fatalf("%d clients still blocked on node %d", n, follower)
	}
}

package server

import (
	"fmt"
	"net"
	"strings"
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

// TestClusterBlockingZPop: BZPOPMIN and BZMPOP waiting on a follower
// return what a ZADD through the leader added (the lowest member; the
// highest two); a timeout gives a null; a key of another type is an error
// at once, as in Redis.
func TestClusterBlockingZPop(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx := testCtx(t, 30*time.Second)
	leader := c.waitLeader()
	f := c.client(leader%3 + 1)
	l := c.client(leader)

	type res struct {
		v   any
		err error
	}
	wait := func(args ...any) chan res {
		got := make(chan res, 1)
		go func() {
			v, err := f.Do(ctx, args...).Result()
			got <- res{v, err}
		}()
		time.Sleep(300 * time.Millisecond) // let it block
		select {
		case r := <-got:
			t.Fatalf("%v returned before any ZADD: %v %v", args, r.v, r.err)
		default:
		}
		return got
	}
	got := wait("BZPOPMIN", "z1", "z2", 10)
	if err := l.ZAdd(ctx, "z2", redis.Z{Score: 2, Member: "b"}, redis.Z{Score: 1, Member: "a"}).Err(); err != nil {
		t.Fatal(err)
	}
	if r := <-got; r.err != nil || fmt.Sprint(r.v) != "[z2 a 1]" {
		t.Fatalf("BZPOPMIN: %v %v, want [z2 a 1]", r.v, r.err)
	}

	got = wait("BZMPOP", 10, 2, "z3", "z4", "MAX", "COUNT", 2)
	if err := l.ZAdd(ctx, "z4", redis.Z{Score: 1, Member: "x"}, redis.Z{Score: 2, Member: "y"}, redis.Z{Score: 3, Member: "w"}).Err(); err != nil {
		t.Fatal(err)
	}
	if r := <-got; r.err != nil || fmt.Sprint(r.v) != "[z4 [[w 3] [y 2]]]" {
		t.Fatalf("BZMPOP: %v %v, want [z4 [[w 3] [y 2]]]", r.v, r.err)
	}
	if n, err := l.ZCard(ctx, "z4").Result(); err != nil || n != 1 {
		t.Fatalf("ZCARD after BZMPOP COUNT 2 of 3: %d %v", n, err)
	}

	start := time.Now()
	if err := f.Do(ctx, "BZPOPMAX", "nothing", 0.3).Err(); err != redis.Nil {
		t.Fatalf("BZPOPMAX on a missing key: %v, want a null", err)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Fatalf("BZPOPMAX with a 0.3 s timeout returned after %v", d)
	}
	if err := l.Set(ctx, "str", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := f.Do(ctx, "BZPOPMIN", "str", 10).Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE") {
		t.Fatalf("BZPOPMIN on a string: %v, want WRONGTYPE", err)
	}
}

package server

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestClusterStreamBlockingRead: XREAD BLOCK on a follower is served by
// the read path and woken by an XADD through another node; "$" only
// returns entries added after the call; a timeout gives a null; a client
// that goes away stops waiting; inside MULTI it does not block.
func TestClusterStreamBlockingRead(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx := testCtx(t, 30*time.Second)
	leader := c.waitLeader()
	follower := leader%3 + 1
	f, l := c.client(follower), c.client(leader)

	if err := l.XAdd(ctx, &redis.XAddArgs{Stream: "s", ID: "1-1", Values: []string{"old", "1"}}).Err(); err != nil {
		t.Fatal(err)
	}
	type res struct {
		v   []redis.XStream
		err error
		d   time.Duration
	}
	wait := func(args *redis.XReadArgs) chan res {
		got := make(chan res, 1)
		go func() {
			start := time.Now()
			v, err := f.XRead(ctx, args).Result()
			got <- res{v, err, time.Since(start)}
		}()
		time.Sleep(300 * time.Millisecond) // let it block
		select {
		case r := <-got:
			t.Fatalf("XREAD %v returned before any XADD: %v %v", args.Streams, r.v, r.err)
		default:
		}
		return got
	}

	// "$": the entry already there is not returned, the new one is.
	got := wait(&redis.XReadArgs{Streams: []string{"s", "other", "$", "$"}, Block: 10 * time.Second})
	if n := c.node(follower).blockedClients.Load(); n != 1 {
		t.Fatalf("%d clients blocked on node %d, want 1", n, follower)
	}
	id, err := l.XAdd(ctx, &redis.XAddArgs{Stream: "s", Values: []string{"new", "2"}}).Result()
	if err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil || fmtXStreams(r.v) != fmt.Sprintf("s[%s map[new:2]]", id) {
		t.Fatalf("XREAD BLOCK $: %v %v (XADD gave %s)", r.v, r.err, id)
	}
	if r.d > 5*time.Second {
		t.Fatalf("XREAD BLOCK took %v to notice the XADD", r.d)
	}

	// A missing key: "$" is 0-0, and the first entry wakes the reader;
	// without COUNT it gets everything up to 1000 entries.
	got = wait(&redis.XReadArgs{Streams: []string{"fresh", "$"}, Block: 0})
	if err := l.XAdd(ctx, &redis.XAddArgs{Stream: "fresh", ID: "5-1", Values: []string{"a", "1"}}).Err(); err != nil {
		t.Fatal(err)
	}
	if r := <-got; r.err != nil || fmtXStreams(r.v) != "fresh[5-1 map[a:1]]" {
		t.Fatalf("XREAD BLOCK 0 on a new key: %v %v", r.v, r.err)
	}

	// An explicit ID with entries already after it: served at once.
	start := time.Now()
	v, err := f.XRead(ctx, &redis.XReadArgs{Streams: []string{"s", "0"}, Count: 1, Block: 10 * time.Second}).Result()
	if err != nil || fmtXStreams(v) != "s[1-1 map[old:1]]" || time.Since(start) > 5*time.Second {
		t.Fatalf("XREAD BLOCK with data: %v %v", v, err)
	}

	// Writes to other keys do not end the wait; the timeout gives a null.
	start = time.Now()
	done := make(chan error, 1)
	go func() {
		_, err := f.XRead(ctx, &redis.XReadArgs{Streams: []string{"s", "$"}, Block: 600 * time.Millisecond}).Result()
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	l.XAdd(ctx, &redis.XAddArgs{Stream: "unrelated", ID: "1-1", Values: []string{"a", "1"}})
	if err := <-done; err != redis.Nil {
		t.Fatalf("XREAD BLOCK 600 with no new entry: %v, want redis.Nil", err)
	}
	if d := time.Since(start); d < 550*time.Millisecond || d > 5*time.Second {
		t.Fatalf("XREAD BLOCK 600 returned after %v", d)
	}

	// A key of another type is an error at once.
	if err := l.Set(ctx, "str", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := f.XRead(ctx, &redis.XReadArgs{Streams: []string{"str", "$"}, Block: 10 * time.Second}).Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE") {
		t.Fatalf("XREAD BLOCK on a string: %v, want WRONGTYPE", err)
	}

	// Inside MULTI, XREAD BLOCK does not block.
	start = time.Now()
	cmds, err := f.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.XRead(ctx, &redis.XReadArgs{Streams: []string{"s", "$"}, Block: 0})
		p.XLen(ctx, "s")
		return nil
	})
	if err != redis.Nil || len(cmds) != 2 || cmds[0].Err() != redis.Nil || cmds[1].(*redis.IntCmd).Val() != 2 || time.Since(start) > 5*time.Second {
		t.Fatalf("MULTI XREAD BLOCK: %v %v", cmds, err)
	}

	// A client that disconnects while blocked stops waiting.
	nc, err := net.Dial("tcp", c.node(follower).ClientAddr())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Write([]byte("*6\r\n$5\r\nXREAD\r\n$5\r\nBLOCK\r\n$1\r\n0\r\n$7\r\nSTREAMS\r\n$6\r\norphan\r\n$1\r\n$\r\n")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if n := c.node(follower).blockedClients.Load(); n != 1 {
		t.Fatalf("%d clients blocked on node %d, want 1", n, follower)
	}
	nc.Close()
	deadline := time.Now().Add(5 * time.Second)
	for c.node(follower).blockedClients.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d clients still blocked on node %d after the client left", c.node(follower).blockedClients.Load(), follower)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func fmtXStreams(v []redis.XStream) string {
	var b strings.Builder
	for _, s := range v {
		b.WriteString(s.Stream)
		for _, m := range s.Messages {
			fmt.Fprintf(&b, "[%s %v]", m.ID, m.Values)
		}
	}
	return b.String()
}

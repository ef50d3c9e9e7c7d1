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

// TestClusterStreamConsumerGroups: XREADGROUP BLOCK on a follower is a
// blocking write woken by an XADD through the leader; two consumers of one
// group never get the same entry; XACK empties the PEL; inside MULTI
// XREADGROUP BLOCK does not block.
func TestClusterStreamConsumerGroups(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx := testCtx(t, 30*time.Second)
	leader := c.waitLeader()
	follower := leader%3 + 1
	f, l := c.client(follower), c.client(leader)

	if err := f.XGroupCreateMkStream(ctx, "s", "g", "$").Err(); err != nil {
		t.Fatal(err)
	}
	type res struct {
		v   []redis.XStream
		err error
		d   time.Duration
	}
	read := func(consumer string, block time.Duration) chan res {
		got := make(chan res, 1)
		go func() {
			start := time.Now()
			v, err := f.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: consumer, Streams: []string{"s", ">"}, Block: block}).Result()
			got <- res{v, err, time.Since(start)}
		}()
		return got
	}
	got := read("alice", 10*time.Second)
	time.Sleep(300 * time.Millisecond)
	select {
	case r := <-got:
		t.Fatalf("XREADGROUP returned before any XADD: %v %v", r.v, r.err)
	default:
	}
	if n := c.node(follower).blockedClients.Load(); n != 1 {
		t.Fatalf("%d clients blocked on node %d, want 1", n, follower)
	}
	if err := l.XAdd(ctx, &redis.XAddArgs{Stream: "s", ID: "1-1", Values: []string{"a", "1"}}).Err(); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil || fmtXStreams(r.v) != "s[1-1 map[a:1]]" || r.d > 5*time.Second {
		t.Fatalf("XREADGROUP BLOCK: %v %v after %v", r.v, r.err, r.d)
	}

	// Two consumers: every entry is delivered exactly once.
	for i := 2; i <= 9; i++ {
		if err := l.XAdd(ctx, &redis.XAddArgs{Stream: "s", ID: fmt.Sprintf("%d-1", i), Values: []string{"n", fmt.Sprint(i)}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]string{"1-1": "alice"}
	for round := 0; round < 10 && len(seen) < 9; round++ {
		for _, consumer := range []string{"alice", "bob"} {
			cl := f
			if consumer == "bob" {
				cl = l
			}
			v, err := cl.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: consumer, Streams: []string{"s", ">"}, Count: 2, Block: -1}).Result()
			if err == redis.Nil {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range v[0].Messages {
				if prev, dup := seen[m.ID]; dup {
					t.Fatalf("%s delivered to %s and %s", m.ID, prev, consumer)
				}
				seen[m.ID] = consumer
			}
		}
	}
	if len(seen) != 9 {
		t.Fatalf("delivered %v", seen)
	}
	p, err := l.XPending(ctx, "s", "g").Result()
	if err != nil || p.Count != 9 || p.Consumers["alice"]+p.Consumers["bob"] != 9 || p.Consumers["bob"] == 0 {
		t.Fatalf("XPENDING: %+v %v", p, err)
	}
	var ids []string
	for id := range seen {
		ids = append(ids, id)
	}
	if n, err := f.XAck(ctx, "s", "g", ids...).Result(); err != nil || n != 9 {
		t.Fatalf("XACK: %d %v", n, err)
	}
	if p, err := l.XPending(ctx, "s", "g").Result(); err != nil || p.Count != 0 {
		t.Fatalf("XPENDING after XACK: %+v %v", p, err)
	}

	// Timeout: a null.
	start := time.Now()
	if _, err := f.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "bob", Streams: []string{"s", ">"}, Block: 500 * time.Millisecond}).Result(); err != redis.Nil {
		t.Fatalf("XREADGROUP BLOCK 500: %v, want redis.Nil", err)
	}
	if d := time.Since(start); d < 450*time.Millisecond || d > 5*time.Second {
		t.Fatalf("XREADGROUP BLOCK 500 returned after %v", d)
	}

	// Inside MULTI it does not block.
	start = time.Now()
	cmds, err := f.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "bob", Streams: []string{"s", ">"}, Block: 0})
		p.XLen(ctx, "s")
		return nil
	})
	if err != redis.Nil || len(cmds) != 2 || cmds[0].Err() != redis.Nil || cmds[1].(*redis.IntCmd).Val() != 9 || time.Since(start) > 5*time.Second {
		t.Fatalf("MULTI XREADGROUP BLOCK: %v %v", cmds, err)
	}

	// Destroying the group wakes a blocked reader with NOGROUP.
	got = read("carol", 10*time.Second)
	time.Sleep(300 * time.Millisecond)
	if n, err := l.XGroupDestroy(ctx, "s", "g").Result(); err != nil || n != 1 {
		t.Fatalf("XGROUP DESTROY: %d %v", n, err)
	}
	if r := <-got; r.err == nil || !strings.HasPrefix(r.err.Error(), "NOGROUP") || r.d > 5*time.Second {
		t.Fatalf("XREADGROUP after DESTROY: %v %v after %v", r.v, r.err, r.d)
	}
}

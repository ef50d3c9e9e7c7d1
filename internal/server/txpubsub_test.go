package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestClusterMultiExecAndWatch: EXEC is atomic and WATCH aborts a
// transaction when the key was written afterwards through another node.
func TestClusterMultiExecAndWatch(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx := testCtx(t, 30*time.Second)
	a, b := c.client(1), c.client(2)

	// Plain MULTI/EXEC: replies in order, one per queued command.
	cmds, err := a.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "k", "1", 0)
		p.Incr(ctx, "k")
		p.Get(ctx, "k")
		p.Ping(ctx)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := cmds[2].(*redis.StringCmd).Val(); got != "2" {
		t.Fatalf("GET inside EXEC: %q", got)
	}
	if got := cmds[3].(*redis.StatusCmd).Val(); got != "PONG" {
		t.Fatalf("PING inside EXEC: %q", got)
	}

	// WATCH on node 1, write on node 2, EXEC on node 1: aborted.
	err = a.Watch(ctx, func(tx *redis.Tx) error {
		if err := b.Set(ctx, "k", "other", 0).Err(); err != nil {
			return err
		}
		_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "k", "mine", 0)
			return nil
		})
		return err
	}, "k")
	if !errors.Is(err, redis.TxFailedErr) {
		t.Fatalf("EXEC after a watched key changed elsewhere: %v, want TxFailedErr", err)
	}
	if v := a.Get(ctx, "k").Val(); v != "other" {
		t.Fatalf("aborted transaction wrote: %q", v)
	}

	// Unchanged watched key: EXEC runs.
	err = a.Watch(ctx, func(tx *redis.Tx) error {
		_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "k", "mine", 0)
			return nil
		})
		return err
	}, "k")
	if err != nil {
		t.Fatal(err)
	}

	// Concurrent WATCH/MULTI increments from all nodes never lose an update.
	var wg sync.WaitGroup
	const workers, each = 6, 15
	for w := 0; w < workers; w++ {
		cl := c.client(uint64(w%3 + 1))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				for try := 0; ; try++ {
					err := cl.Watch(ctx, func(tx *redis.Tx) error {
						n, err := tx.Get(ctx, "ctr").Int()
						if err != nil && err != redis.Nil {
							return err
						}
						_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
							p.Set(ctx, "ctr", n+1, 0)
							return nil
						})
						return err
					}, "ctr")
					if err == nil {
						break
					}
					if !errors.Is(err, redis.TxFailedErr) || try > 500 {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if n, _ := a.Get(ctx, "ctr").Int(); n != workers*each {
		t.Fatalf("optimistic increments: %d, want %d", n, workers*each)
	}
}

// TestTransactionErrorsLikeRedis: queue-time errors abort EXEC, run-time
// errors are per command.
func TestTransactionErrorsLikeRedis(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx := testCtx(t, 30*time.Second)
	conn := c.client(2).Conn()
	defer conn.Close()
	do := func(args ...any) (any, error) { return conn.Do(ctx, args...).Result() }
	expectErr := func(want string, args ...any) {
		t.Helper()
		if _, err := do(args...); err == nil || err.Error() != want {
			t.Fatalf("%v: %v, want %q", args, err, want)
		}
	}
	expectErr("ERR EXEC without MULTI", "EXEC")
	expectErr("ERR DISCARD without MULTI", "DISCARD")
	if _, err := do("MULTI"); err != nil {
		t.Fatal(err)
	}
	expectErr("ERR MULTI calls can not be nested", "MULTI")
	expectErr("ERR WATCH inside MULTI is not allowed", "WATCH", "x")
	if v, err := do("SET", "a", "1"); err != nil || v != "QUEUED" {
		t.Fatal(v, err)
	}
	expectErr("ERR wrong number of arguments for 'get' command", "GET")
	expectErr("EXECABORT Transaction discarded because of previous errors.", "EXEC")
	if v, _ := do("EXISTS", "a"); v != int64(0) {
		t.Fatalf("aborted transaction applied: EXISTS a = %v", v)
	}
	// Run-time errors: the other commands still apply.
	do("MULTI")
	do("SET", "s", "str")
	do("INCR", "s") // not an integer: fails at run time
	do("SET", "t", "v", "NX", "XX")
	do("INCR", "n")
	v, err := do("EXEC")
	if err != nil {
		t.Fatal(err)
	}
	r := v.([]any)
	if len(r) != 4 || r[0] != "OK" || r[3] != int64(1) {
		t.Fatalf("EXEC reply %#v", r)
	}
	for i, want := range map[int]string{1: "ERR value is not an integer", 2: "ERR syntax error"} {
		e, ok := r[i].(error)
		if !ok || len(e.Error()) < len(want) || e.Error()[:len(want)] != want {
			t.Fatalf("EXEC reply %d: %#v, want %s...", i, r[i], want)
		}
	}
	// DISCARD forgets the queue and the watches.
	do("WATCH", "n")
	do("MULTI")
	do("INCR", "n")
	if v, _ := do("DISCARD"); v != "OK" {
		t.Fatal(v)
	}
	if v, _ := do("GET", "n"); v != "1" {
		t.Fatalf("after DISCARD: n=%v", v)
	}
}

// TestClusterPubSubAcrossNodes: a message published on any node reaches
// subscribers on every node, in publish order, in RESP2 and RESP3.
func TestClusterPubSubAcrossNodes(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx := testCtx(t, 30*time.Second)
	var subs []*redis.PubSub
	for id := uint64(1); id <= 3; id++ {
		opts := *c.client(id).Options()
		opts.Protocol = 2 + int(id%2) // nodes 1 and 3 RESP3, node 2 RESP2
		cl := redis.NewClient(&opts)
		t.Cleanup(func() { cl.Close() })
		var ps *redis.PubSub
		if id == 3 {
			ps = cl.PSubscribe(ctx, "news.*")
		} else {
			ps = cl.Subscribe(ctx, "news.sport")
		}
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ps.Close() })
		subs = append(subs, ps)
	}
	const n = 50
	for i := 0; i < n; i++ {
		pub := c.client(uint64(i%3 + 1))
		if err := pub.Publish(ctx, "news.sport", strconv.Itoa(i)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for si, ps := range subs {
		for i := 0; i < n; i++ {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			m, err := ps.ReceiveMessage(rctx)
			cancel()
			if err != nil {
				t.Fatalf("subscriber %d message %d: %v", si, i, err)
			}
			if m.Channel != "news.sport" || m.Payload != strconv.Itoa(i) {
				t.Fatalf("subscriber %d got %s/%s, want message %d in order", si, m.Channel, m.Payload, i)
			}
			if si == 2 && m.Pattern != "news.*" {
				t.Fatalf("pattern subscriber: pattern %q", m.Pattern)
			}
		}
	}
	// PUBLISH counts the subscribers on the node that answers; PUBSUB
	// reports this node's subscriptions.
	if n, err := c.client(1).Publish(ctx, "news.sport", "x").Result(); err != nil || n != 1 {
		t.Fatalf("PUBLISH via node 1: %d, %v (one local subscriber)", n, err)
	}
	if n, err := c.client(3).Publish(ctx, "news.sport", "x").Result(); err != nil || n != 1 {
		t.Fatalf("PUBLISH via node 3: %d, %v (one local pattern subscriber)", n, err)
	}
	if m, err := c.client(2).PubSubNumSub(ctx, "news.sport", "none").Result(); err != nil || m["news.sport"] != 1 || m["none"] != 0 {
		t.Fatalf("PUBSUB NUMSUB: %v %v", m, err)
	}
	if n, err := c.client(3).PubSubNumPat(ctx).Result(); err != nil || n != 1 {
		t.Fatalf("PUBSUB NUMPAT: %d %v", n, err)
	}
	if ch, err := c.client(1).PubSubChannels(ctx, "news*").Result(); err != nil || fmt.Sprint(ch) != "[news.sport]" {
		t.Fatalf("PUBSUB CHANNELS: %v %v", ch, err)
	}
}

// TestPubSubRESP2Restrictions: a RESP2 subscriber may only (un)subscribe,
// PING, QUIT and RESET.
func TestPubSubRESP2Restrictions(t *testing.T) {
	c := newTestCluster(t, 1)
	ctx := testCtx(t, 20*time.Second)
	conn := c.client(1).Conn()
	defer conn.Close()
	if err := conn.Do(ctx, "SUBSCRIBE", "a", "b").Err(); err != nil {
		t.Fatal(err)
	}
	// go-redis reads one reply per Do; drain the second confirmation.
	conn.Do(ctx, "PING")
	err := conn.Do(ctx, "GET", "x").Err()
	for err == nil {
		err = conn.Do(ctx, "GET", "x").Err()
	}
	if want := "ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"; err.Error() != want {
		t.Fatalf("GET while subscribed: %v", err)
	}
}

// TestClusterShardedPubSub: SPUBLISH through any node reaches SSUBSCRIBE
// subscribers on every node, and only them; confirmations carry the
// shard-channel count and frames are Redis 7.0's, byte for byte.
func TestClusterShardedPubSub(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx := testCtx(t, 30*time.Second)
	leader := c.waitLeader()
	follower := leader%3 + 1

	nc, err := net.Dial("tcp", c.node(follower).ClientAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	br := bufio.NewReader(nc)
	// expect sends a command (if any) and reads exactly the bytes want.
	expect := func(want string, args ...string) {
		t.Helper()
		if len(args) > 0 {
			cmd := fmt.Sprintf("*%d\r\n", len(args))
			for _, a := range args {
				cmd += fmt.Sprintf("$%d\r\n%s\r\n", len(a), a)
			}
			if _, err := nc.Write([]byte(cmd)); err != nil {
				t.Fatal(err)
			}
		}
		got := make([]byte, len(want))
		_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(br, got); err != nil || string(got) != want {
			t.Fatalf("%v: got %q (%v), want %q", args, got, err, want)
		}
	}
	expect("*3\r\n$12\r\nsunsubscribe\r\n$-1\r\n:0\r\n", "SUNSUBSCRIBE")
	expect("*3\r\n$9\r\nsubscribe\r\n$1\r\nx\r\n:1\r\n", "SUBSCRIBE", "x")
	expect("*3\r\n$10\r\nssubscribe\r\n$2\r\ns1\r\n:1\r\n*3\r\n$10\r\nssubscribe\r\n$2\r\ns2\r\n:2\r\n*3\r\n$10\r\nssubscribe\r\n$2\r\ns1\r\n:2\r\n",
		"SSUBSCRIBE", "s1", "s2", "s1")
	expect("*3\r\n$10\r\npsubscribe\r\n$2\r\np*\r\n:2\r\n", "PSUBSCRIBE", "p*")
	expect("-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n", "GET", "k")

	// Published through the leader, delivered on the follower.
	l := c.client(leader)
	if n, err := l.Do(ctx, "PUBLISH", "s1", "plain").Int64(); err != nil || n != 0 {
		t.Fatalf("PUBLISH to a shard channel's name: %d %v", n, err)
	}
	if n, err := l.Do(ctx, "SPUBLISH", "x", "nope").Int64(); err != nil || n != 0 {
		t.Fatalf("SPUBLISH to a plain channel's name: %d %v", n, err)
	}
	if err := l.Do(ctx, "SPUBLISH", "s1", "hi").Err(); err != nil {
		t.Fatal(err)
	}
	expect("*3\r\n$8\r\nsmessage\r\n$2\r\ns1\r\n$2\r\nhi\r\n") // pushed, no command
	expect("*2\r\n$4\r\npong\r\n$0\r\n\r\n", "PING")

	// The follower counts its own subscribers.
	f := c.client(follower)
	if n, err := f.Do(ctx, "SPUBLISH", "s2", "m").Int64(); err != nil || n != 1 {
		t.Fatalf("SPUBLISH through the follower: %d %v", n, err)
	}
	expect("*3\r\n$8\r\nsmessage\r\n$2\r\ns2\r\n$1\r\nm\r\n")
	if v, err := f.Do(ctx, "PUBSUB", "SHARDCHANNELS").StringSlice(); err != nil || fmt.Sprint(v) != "[s1 s2]" {
		t.Fatalf("PUBSUB SHARDCHANNELS: %v %v", v, err)
	}
	if v, err := f.Do(ctx, "PUBSUB", "SHARDNUMSUB", "s1", "zz").Slice(); err != nil || fmt.Sprint(v) != "[s1 1 zz 0]" {
		t.Fatalf("PUBSUB SHARDNUMSUB: %v %v", v, err)
	}
	if v, err := f.Do(ctx, "PUBSUB", "NUMSUB", "s1").Slice(); err != nil || fmt.Sprint(v) != "[s1 0]" {
		t.Fatalf("PUBSUB NUMSUB of a shard channel: %v %v", v, err)
	}
	// MULTI and scripts may SPUBLISH.
	if v, err := l.Do(ctx, "EVAL", "return redis.call('spublish', 's1', 'lua')", "0").Int64(); err != nil || v != 0 {
		t.Fatalf("SPUBLISH from a script: %d %v", v, err)
	}

	expect("*3\r\n$8\r\nsmessage\r\n$2\r\ns1\r\n$3\r\nlua\r\n")
	expect("*3\r\n$12\r\nsunsubscribe\r\n$2\r\ns2\r\n:1\r\n*3\r\n$12\r\nsunsubscribe\r\n$2\r\nzz\r\n:1\r\n", "SUNSUBSCRIBE", "s2", "zz")
	expect("*3\r\n$12\r\nsunsubscribe\r\n$2\r\ns1\r\n:0\r\n", "SUNSUBSCRIBE")
	expect("*3\r\n$11\r\nunsubscribe\r\n$1\r\nx\r\n:1\r\n", "UNSUBSCRIBE")
	expect("*3\r\n$12\r\npunsubscribe\r\n$2\r\np*\r\n:0\r\n", "PUNSUBSCRIBE")
	expect("$-1\r\n", "GET", "k")
	if v, err := f.Do(ctx, "PUBSUB", "SHARDCHANNELS").StringSlice(); err != nil || len(v) != 0 {
		t.Fatalf("PUBSUB SHARDCHANNELS after SUNSUBSCRIBE: %v %v", v, err)
	}
}

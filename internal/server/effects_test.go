package server

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvorum/kvorum/internal/resp/codec"
)

// TestPublishRepliesAndDeliveryOrder: PUBLISH replies with the number of
// this node's subscribers it reaches, whether sent alone, pipelined with
// writes or queued in MULTI (node.publishReplies); a script's
// redis.call('publish') replies 0 as the apply does. The subscriber gets
// every message once, in log order, also those of a transaction and a
// script, which deliver after the round that applied them is committed.
func TestPublishRepliesAndDeliveryOrder(t *testing.T) {
	c := newTestCluster(t, 1)
	c.waitLeader()
	ctx := testCtx(t, 20*time.Second)
	cl := c.client(1)
	sub := cl.Subscribe(ctx, "ch")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	msgs := sub.Channel()

	if n, err := cl.Publish(ctx, "ch", "one").Result(); err != nil || n != 1 {
		t.Fatalf("PUBLISH: %d %v", n, err)
	}
	cmds, err := cl.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "k", "v", 0)
		p.Publish(ctx, "ch", "two")
		p.Publish(ctx, "nobody", "x")
		p.Incr(ctx, "n")
		return nil
	})
	if err != nil || cmds[1].(*redis.IntCmd).Val() != 1 || cmds[2].(*redis.IntCmd).Val() != 0 {
		t.Fatalf("pipelined PUBLISH: %v %v", cmds, err)
	}
	cmds, err = cl.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "k", "w", 0)
		p.Publish(ctx, "ch", "three")
		p.SPublish(ctx, "ch", "not to plain subscribers")
		return nil
	})
	if err != nil || cmds[1].(*redis.IntCmd).Val() != 1 || cmds[2].(*redis.IntCmd).Val() != 0 {
		t.Fatalf("PUBLISH in MULTI: %v %v", cmds, err)
	}
	if v, err := cl.Eval(ctx, "redis.call('set', 'k', 'x'); return redis.call('publish', 'ch', 'four')", nil).Int64(); err != nil || v != 0 {
		t.Fatalf("PUBLISH from a script: %d %v", v, err)
	}

	for _, want := range []string{"one", "two", "three", "four"} {
		select {
		case m := <-msgs:
			if m.Channel != "ch" || m.Payload != want {
				t.Fatalf("got %s/%s, want ch/%s", m.Channel, m.Payload, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("message %q not delivered", want)
		}
	}
	select {
	case m := <-msgs:
		t.Fatalf("unexpected message %s/%s", m.Channel, m.Payload)
	case <-time.After(100 * time.Millisecond):
	}
}

// TestPublishToOwnSubscriptionPushFirst: a RESP3 connection subscribed to
// a channel that publishes to it gets the message before the PUBLISH
// reply, as from Redis, every time: publishReplies waits until the node
// has delivered what the log committed so far. One node, so that it leads
// throughout: on a follower the reply may come back from the leader before
// the follower applies the entry (see the README).
func TestPublishToOwnSubscriptionPushFirst(t *testing.T) {
	c := newTestCluster(t, 1)
	for _, id := range []uint64{c.waitLeader()} {
		nc, err := net.Dial("tcp", c.node(id).ClientAddr())
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(nc)
		send := func(args ...string) {
			t.Helper()
			if _, err := nc.Write(codec.AppendCommand(nil, toBytes(args)...)); err != nil {
				t.Fatal(err)
			}
		}
		expect := func(want string) {
			t.Helper()
			got := make([]byte, len(want))
			_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.ReadFull(br, got); err != nil || string(got) != want {
				t.Fatalf("node %d: got %q (%v), want %q", id, got, err, want)
			}
		}
		send("HELLO", "3")
		if _, err := br.ReadString('\n'); err != nil { // the map header; skip the map
			t.Fatal(err)
		}
		for i := 0; i < 14; i++ {
			if _, err := readLine(br); err != nil {
				t.Fatal(err)
			}
		}
		send("SUBSCRIBE", "ch")
		expect(">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n")
		for i := 0; i < 20; i++ {
			send("PUBLISH", "ch", "m")
			expect(">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\nm\r\n:1\r\n")
		}
		nc.Close()
	}
}

// readLine reads one RESP frame of a HELLO map entry: a bulk string (two
// lines), an integer or an empty array (one line).
func readLine(br *bufio.Reader) (string, error) {
	l, err := br.ReadString('\n')
	if err != nil || len(l) == 0 || l[0] != '$' {
		return l, err
	}
	return br.ReadString('\n')
}

func toBytes(args []string) [][]byte {
	b := make([][]byte, len(args))
	for i, a := range args {
		b[i] = []byte(a)
	}
	return b
}

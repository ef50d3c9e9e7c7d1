package server

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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

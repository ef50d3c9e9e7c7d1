package server

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/slot"
)

// upperKey returns a key of prefix whose hash slot is at least 8192 (the
// right-hand half of a split at 8192).
func upperKey(prefix string) string {
	for i := 0; ; i++ {
		if k := fmt.Sprintf("%s%d", prefix, i); slot.Of([]byte(k)) >= 8192 {
			return k
		}
	}
}

// TestSplitKeepsBlockedClientsAndShardSubscribers: a client blocked in
// BLPOP on a key, and a client subscribed with SSUBSCRIBE to a shard
// channel, both of whose slots move to a new range when range 1 splits at
// 8192, still get the push and the message sent through another node
// after the split: the issue's "blocking commands, pub/sub (including
// sharded pub/sub per slot) keep their guarantees" across a split.
func TestSplitKeepsBlockedClientsAndShardSubscribers(t *testing.T) {
	c := newClusterWith(t, 3, func(uint64, *Config) {})
	t.Cleanup(c.stopAll)
	ctx := testCtx(t, time.Minute)
	list, ch := upperKey("bq:"), upperKey("sch:")

	sub := c.client(3).SSubscribe(ctx, ch)
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	msgs := sub.Channel()

	popped := make(chan []string, 1)
	errs := make(chan error, 1)
	go func() {
		v, err := c.client(2).BLPop(ctx, 30*time.Second, list).Result()
		if err != nil {
			errs <- err
			return
		}
		popped <- v
	}()
	// The BLPOP is blocked before the split (its connection is counted
	// by INFO clients' blocked_clients).
	for {
		info, err := c.client(2).Info(ctx, "clients").Result()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(info, "blocked_clients:1\r\n") {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the BLPOP never blocked:\n%s", info)
		}
		time.Sleep(10 * time.Millisecond)
	}

	lead := c.waitLeader()
	_, rhs, err := c.node(lead).SplitRange(ctx, firstRange, 8192)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint64{1, 2, 3} {
		for {
			if r := c.node(id).store.ReplicaForSlot(slot.Of([]byte(list))); r != nil && r.RangeID() == rhs.RangeID {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("node %d never routed %s to range %d", id, list, rhs.RangeID)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	if err := c.client(1).RPush(ctx, list, "after-split").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case v := <-popped:
		if len(v) != 2 || v[0] != list || v[1] != "after-split" {
			t.Fatalf("BLPOP got %v", v)
		}
	case err := <-errs:
		t.Fatalf("BLPOP: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the client blocked before the split never got the push made after it")
	}
	// Through node 1: the reply counts node 1's own subscribers (none),
	// as a Redis Cluster node does; the message reaches node 3's.
	if err := c.client(1).SPublish(ctx, ch, "after-split").Err(); err != nil {
		t.Fatalf("SPUBLISH after the split: %v", err)
	}
	select {
	case m := <-msgs:
		if m.Channel != ch || m.Payload != "after-split" {
			t.Fatalf("got %s/%s", m.Channel, m.Payload)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the shard subscriber never got the message published after the split")
	}
}

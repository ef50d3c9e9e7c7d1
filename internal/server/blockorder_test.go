package server

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestBlockedClientsServedInOrder: four clients block on one list 100 ms
// apart, through different nodes; one RPUSH of four elements then serves
// them in the order they blocked (the first gets the first element), as
// Redis does. 100 runs (ten at a time, on ten keys), every one in order.
func TestBlockedClientsServedInOrder(t *testing.T) {
	c := newTestCluster(t, 3)
	c.waitLeader()
	ctx := testCtx(t, 3*time.Minute)
	const runs, parallel, clients = 100, 10, 4
	var mu sync.Mutex
	var bad []string
	for batch := 0; batch < runs/parallel; batch++ {
		var wg sync.WaitGroup
		for r := 0; r < parallel; r++ {
			run := batch*parallel + r
			wg.Add(1)
			go func() {
				defer wg.Done()
				if why := blockOrderRun(ctx, c, fmt.Sprintf("order-%d", run), run, clients); why != "" {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("run %d: %s", run, why))
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	if len(bad) > 0 {
		t.Fatalf("%d of %d runs not served in blocking order:\n%v", len(bad), runs, bad)
	}
}

// blockOrderRun is one run; it returns what went wrong ("" if nothing).
func blockOrderRun(ctx context.Context, c *testCluster, key string, run, clients int) string {
	type got struct {
		i   int
		v   []string
		err error
	}
	out := make(chan got, clients)
	for i := 0; i < clients; i++ {
		node := uint64((run+i)%3 + 1) // each client through another node than the one before
		conn := c.client(node).Conn()
		defer conn.Close()
		name := fmt.Sprintf("%s-%d", key, i)
		if err := conn.ClientSetName(ctx, name).Err(); err != nil {
			return err.Error()
		}
		go func() {
			v, err := conn.BLPop(ctx, 30*time.Second, key).Result()
			out <- got{i, v, err}
		}()
		// The blocking order is the order in which the commands reach
		// the server: wait until this one has (its connection's current
		// command is BLPOP), so that a client-side delay (a dial, a
		// goroutine scheduled late on a loaded machine) does not reorder
		// the clients; then 100 ms before the next one.
		if !arrived(ctx, c, node, name) {
			return fmt.Sprintf("client %d's BLPOP did not reach node %d", i, node)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := c.client(uint64(run%3+1)).RPush(ctx, key, "e0", "e1", "e2", "e3").Err(); err != nil {
		return err.Error()
	}
	var why string
	for range clients {
		g := <-out
		want := fmt.Sprintf("e%d", g.i)
		if g.err != nil || len(g.v) != 2 || g.v[1] != want {
			why += fmt.Sprintf("client %d (blocked %dth) got %v %v, want %s; ", g.i, g.i+1, g.v, g.err, want)
		}
	}
	return why
}

// arrived waits (up to 10 s) until node's CLIENT LIST shows the
// connection named name running BLPOP.
func arrived(ctx context.Context, c *testCluster, node uint64, name string) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		list, err := c.client(node).ClientList(ctx).Result()
		if err != nil {
			continue
		}
		for _, line := range strings.Split(list, "\n") {
			if strings.Contains(line, " name="+name+" ") && strings.Contains(line, " cmd=blpop ") {
				return true
			}
		}
	}
	return false
}

// TestBlockedClientNotWokenByTypeChange: a key that becomes a list and
// then a string inside one MULTI/EXEC does not wake a client blocked on
// it with WRONGTYPE (Redis keeps it blocked); it is served when the key
// is a list with elements again.
func TestBlockedClientNotWokenByTypeChange(t *testing.T) {
	c := newTestCluster(t, 3)
	lead := c.waitLeader()
	ctx := testCtx(t, 30*time.Second)
	type got struct {
		v   []string
		err error
	}
	out := make(chan got, 1)
	go func() {
		v, err := c.client(lead%3+1).BLPop(ctx, 20*time.Second, "k").Result()
		out <- got{v, err}
	}()
	time.Sleep(200 * time.Millisecond)
	w := c.client(lead)
	if _, err := w.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.LPush(ctx, "k", "x")
		p.Del(ctx, "k")
		p.Set(ctx, "k", "str", 0)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case g := <-out:
		t.Fatalf("the blocked BLPOP returned %v %v after the key became a string", g.v, g.err)
	case <-time.After(500 * time.Millisecond):
	}
	if _, err := w.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, "k")
		p.RPush(ctx, "k", "y")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case g := <-out:
		if g.err != nil || len(g.v) != 2 || g.v[1] != "y" {
			t.Fatalf("BLPOP got %v %v, want [k y]", g.v, g.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the blocked BLPOP was not served when the key became a list again")
	}
}

// TestBlockedClientOfAStoppedNodeDoesNotHoldTheQueue: a client blocked
// through a node that then stops is first in the key's queue; clients
// blocked after it through the other nodes are still served (once the
// stopped node's waits are no longer live), in their order.
func TestBlockedClientOfAStoppedNodeDoesNotHoldTheQueue(t *testing.T) {
	c := newTestCluster(t, 3)
	lead := c.waitLeader()
	ctx := testCtx(t, 60*time.Second)
	gone := lead%3 + 1
	dead := c.client(gone)
	go dead.BLPop(ctx, 0, "q") // never answered: its node stops
	time.Sleep(300 * time.Millisecond)
	type got struct {
		i int
		v []string
	}
	out := make(chan got, 2)
	others := []uint64{lead, 6 - lead - gone}
	for i, id := range others {
		cl := c.client(id)
		go func() {
			v, _ := cl.BLPop(ctx, 30*time.Second, "q").Result()
			out <- got{i, v}
		}()
		time.Sleep(100 * time.Millisecond)
	}
	c.stop(gone)
	if err := c.client(lead).RPush(ctx, "q", "e0", "e1").Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for range others {
		g := <-out
		if want := fmt.Sprintf("e%d", g.i); len(g.v) != 2 || g.v[1] != want {
			t.Fatalf("client %d got %v, want %s", g.i, g.v, want)
		}
	}
	t.Logf("served %v after the push (the stopped node's wait was first)", time.Since(start))
}

// TestBlockedClientNotClosedByIdleTimeout: CONFIG SET timeout does not
// close a client blocked longer than it (Redis exempts blocked clients).
func TestBlockedClientNotClosedByIdleTimeout(t *testing.T) {
	c := newTestCluster(t, 3)
	lead := c.waitLeader()
	ctx := testCtx(t, 30*time.Second)
	cl := c.client(lead)
	if err := cl.ConfigSet(ctx, "timeout", "1").Err(); err != nil {
		t.Fatal(err)
	}
	defer cl.ConfigSet(ctx, "timeout", "0")
	start := time.Now()
	if _, err := cl.BLPop(ctx, 2500*time.Millisecond, "nothing").Result(); err != redis.Nil {
		t.Fatalf("BLPOP 2.5 s with timeout 1: %v, want a nil reply", err)
	}
	if d := time.Since(start); d < 2*time.Second {
		t.Fatalf("BLPOP returned after %v", d)
	}
}

// TestBlockedXReadGroupServedInOrder: three consumers of one group block
// on a stream 100 ms apart, through different nodes; three XADDs then
// serve them in the order they blocked, one entry each (COUNT 1), as
// Redis does. 10 runs.
func TestBlockedXReadGroupServedInOrder(t *testing.T) {
	c := newTestCluster(t, 3)
	lead := c.waitLeader()
	ctx := testCtx(t, 2*time.Minute)
	for run := 0; run < 10; run++ {
		key := fmt.Sprintf("s%d", run)
		if err := c.client(lead).XGroupCreateMkStream(ctx, key, "g", "$").Err(); err != nil {
			t.Fatal(err)
		}
		type got struct {
			i   int
			ids []string
			err error
		}
		out := make(chan got, 3)
		for i := 0; i < 3; i++ {
			cl := c.client(uint64((run+i)%3 + 1))
			go func() {
				res, err := cl.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: fmt.Sprintf("c%d", i), Streams: []string{key, ">"}, Count: 1, Block: 20 * time.Second}).Result()
				var ids []string
				for _, s := range res {
					for _, m := range s.Messages {
						ids = append(ids, m.ID)
					}
				}
				out <- got{i, ids, err}
			}()
			time.Sleep(100 * time.Millisecond)
		}
		for i := 1; i <= 3; i++ {
			if err := c.client(uint64(i)).XAdd(ctx, &redis.XAddArgs{Stream: key, ID: fmt.Sprintf("%d-1", i), Values: []string{"f", "v"}}).Err(); err != nil {
				t.Fatal(err)
			}
		}
		for range 3 {
			g := <-out
			if want := fmt.Sprintf("%d-1", g.i+1); g.err != nil || len(g.ids) != 1 || g.ids[0] != want {
				t.Fatalf("run %d: consumer %d (blocked %dth) got %v %v, want [%s]", run, g.i, g.i+1, g.ids, g.err, want)
			}
		}
	}
}

// TestBlockedXReadGroupGroupsDoNotWaitForEachOther: consumers of
// different groups do not queue behind each other: with the first
// consumer (group g1) blocked through a node that then stops, a consumer
// of group g2 blocked after it gets a new entry at once, not after the
// stopped node's waits expire.
func TestBlockedXReadGroupGroupsDoNotWaitForEachOther(t *testing.T) {
	c := newTestCluster(t, 3)
	lead := c.waitLeader()
	ctx := testCtx(t, 60*time.Second)
	gone := lead%3 + 1
	for _, g := range []string{"g1", "g2"} {
		if err := c.client(lead).XGroupCreateMkStream(ctx, "s", g, "$").Err(); err != nil {
			t.Fatal(err)
		}
	}
	go c.client(gone).XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g1", Consumer: "c", Streams: []string{"s", ">"}, Block: 0})
	time.Sleep(300 * time.Millisecond)
	got := make(chan []redis.XStream, 1)
	go func() {
		res, _ := c.client(lead).XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g2", Consumer: "c", Streams: []string{"s", ">"}, Block: 20 * time.Second}).Result()
		got <- res
	}()
	time.Sleep(200 * time.Millisecond)
	c.stop(gone)
	start := time.Now()
	if err := c.client(lead).XAdd(ctx, &redis.XAddArgs{Stream: "s", ID: "1-1", Values: []string{"f", "v"}}).Err(); err != nil {
		t.Fatal(err)
	}
	res := <-got
	if len(res) != 1 || len(res[0].Messages) != 1 || res[0].Messages[0].ID != "1-1" {
		t.Fatalf("g2's consumer got %v", res)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("g2's consumer was served %v after the XADD: it waited for g1's stopped consumer", d)
	}
}

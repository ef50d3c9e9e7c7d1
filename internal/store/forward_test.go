package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/reply"
)

func submitOn(s *Store, ctx context.Context, cmds ...[]string) ([]reply.Reply, error) {
	var args [][][]byte
	for _, c := range cmds {
		var a [][]byte
		for _, w := range c {
			a = append(a, []byte(w))
		}
		args = append(args, a)
	}
	return s.Replica(1).Submit(ctx, args)
}

func followers(c *testCluster, lead *testNode) []*testNode {
	var fs []*testNode
	for _, tn := range c.nodes {
		if tn != lead {
			fs = append(fs, tn)
		}
	}
	return fs
}

// TestForwardedWritesAnsweredByTheFollower: writes submitted on the two
// followers go to the leader through Raft (the test transport refuses
// calls, so no other way exists) and each is answered with the reply its
// own follower's apply computed: concurrent INCRs from both followers get
// every value from 1 to n exactly once.
func TestForwardedWritesAnsweredByTheFollower(t *testing.T) {
	c := newCluster(t, 3)
	lead := c.leader()
	const each = 40
	var mu sync.Mutex
	seen := map[int64]int{}
	var wg sync.WaitGroup
	errs := make(chan error, 2*each)
	for _, f := range followers(c, lead) {
		for i := 0; i < each; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				rs, err := submitOn(f.store, ctx, []string{"INCR", "n"})
				if err != nil {
					errs <- err
					return
				}
				if rs[0].Kind != reply.KindInt {
					errs <- fmt.Errorf("reply %+v", rs[0])
					return
				}
				mu.Lock()
				seen[rs[0].Int]++
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for v := int64(1); v <= 2*each; v++ {
		if seen[v] != 1 {
			t.Fatalf("INCR reply %d seen %d times (all: %v)", v, seen[v], seen)
		}
	}
	var forwarded float64
	for _, f := range followers(c, lead) {
		forwarded += counterValue(t, f.store.cfg.Metrics.ForwardedProposals)
	}
	if forwarded != 2*each {
		t.Fatalf("followers forwarded %v proposals, want %d", forwarded, 2*each)
	}
	if got, _ := barrierRead(t, lead, "n"); got != fmt.Sprint(2*each) {
		t.Fatalf("n = %q on the leader", got)
	}
}

// TestForwardRefusedByTheLeadersGate: a forwarded write that the leader's
// WriteGate refuses is answered with the gate's reply (a nack carries it)
// and is not applied.
func TestForwardRefusedByTheLeadersGate(t *testing.T) {
	c, lead, f := clusterWithKey(t)
	_ = c
	lead.store.SetWriteGate(func() (reply.Reply, bool) { return reply.Error("ERR disk nearly full"), true })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rs, err := submitOn(f.store, ctx, []string{"SET", "k", "refused"}, []string{"SET", "k2", "refused"})
	if err != nil || len(rs) != 2 || rs[0].Kind != reply.KindError || rs[1].Kind != reply.KindError {
		t.Fatalf("replies %+v, err %v; want the gate's error twice", rs, err)
	}
	lead.store.SetWriteGate(nil)
	if got, _ := barrierRead(t, lead, "k"); got != "v" {
		t.Fatalf("k = %q after a refused write", got)
	}
}

// TestForwardLostInOldTermIsDropped: a forward that never reached the
// leader fails with ErrProposalDropped (safe to retry) once the follower
// applies an entry of a later term, not after its context's timeout; and
// it was not applied.
func TestForwardLostInOldTermIsDropped(t *testing.T) {
	c, lead, f := clusterWithKey(t)
	c.part.CutOneWay(f.id, lead.id) // the forward is lost
	type result struct {
		err error
		at  time.Duration
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		_, err := submitOn(f.store, context.Background(), []string{"SET", "k", "lost"})
		done <- result{err, time.Since(start)}
	}()
	time.Sleep(50 * time.Millisecond)
	// A new term: the old leader is cut off, the other two elect.
	c.part.Heal()
	c.part.Isolate(lead.id)
	select {
	case res := <-done:
		if !errors.Is(res.err, ErrProposalDropped) {
			t.Fatalf("err %v after %v, want ErrProposalDropped", res.err, res.at)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the lost forward was not failed once a later term applied")
	}
	c.part.Heal()
	for _, tn := range c.nodes {
		if got, _ := barrierRead(t, tn, "k"); got != "v" {
			t.Fatalf("node %d: k = %q, the dropped write was applied", tn.id, got)
		}
	}
}

// TestForwardCoveredBySnapshotIsAmbiguous: a forward that the leader
// committed while the follower missed the entries, which it then receives
// in a snapshot, ends as ErrAmbiguous (it was applied, and the follower
// cannot tell), never as ErrProposalDropped, which would invite a retry
// that applies it twice.
func TestForwardCoveredBySnapshotIsAmbiguous(t *testing.T) {
	c, lead, f := clusterWithKey(t)
	c.part.CutOneWay(lead.id, f.id) // the follower hears nothing more
	done := make(chan error, 1)
	go func() {
		_, err := submitOn(f.store, context.Background(), []string{"INCR", "x"})
		done <- err
	}()
	// The forward arrives and commits on the leader and the other
	// follower; then enough writes for the log to be truncated past it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if got, _ := barrierRead(t, lead, "x"); got == "1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the forward did not commit")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for i := 0; i < 60; i++ {
		if _, err := propose(t, lead, []string{"SET", "k", fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	c.part.Heal()
	select {
	case err := <-done:
		if !errors.Is(err, ErrAmbiguous) {
			t.Fatalf("err %v, want ErrAmbiguous", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the forward covered by a snapshot was not failed")
	}
	if n := counterValue(t, f.store.cfg.Metrics.SnapshotsRecv); n == 0 {
		t.Fatal("the follower caught up without a snapshot: the test did not test")
	}
}

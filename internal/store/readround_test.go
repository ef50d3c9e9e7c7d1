package store

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// clusterWithKey starts a 3-node cluster, writes k=v through its leader
// and returns the cluster, the leader and a follower.
func clusterWithKey(t *testing.T) (c *testCluster, lead, f *testNode) {
	c = newCluster(t, 3)
	lead = c.leader()
	if _, err := propose(t, lead, []string{"SET", "k", "v"}); err != nil {
		t.Fatal(err)
	}
	for _, tn := range c.nodes {
		if tn != lead {
			return c, lead, tn
		}
	}
	t.Fatal("no follower")
	return nil, nil, nil
}

// TestFollowerReadsShareOneRoundInFlight: a follower keeps at most one
// ReadIndex round in flight (readRoundPendingLocked); reads that arrive
// meanwhile wait and share the next round. Many concurrent readers on a
// follower must then need far fewer rounds than reads, and no sample of
// the follower's state may show two rounds in flight at once.
func TestFollowerReadsShareOneRoundInFlight(t *testing.T) {
	c, _, f := clusterWithKey(t)
	// Each message waits a little, so that rounds overlap readers.
	c.part.SetDelay(200*time.Microsecond, 400*time.Microsecond)
	defer c.part.SetDelay(0, 0)
	r := f.store.Replica(1)
	// Rounds come back well within a second even under -race; a shorter
	// patience would let a slow round overlap the next one, as designed.
	f.store.readPatience.Store(int64(time.Second))
	rounds0 := counterValue(t, f.store.cfg.Metrics.ReadIndexRounds)

	const readers, each = 16, 40
	var maxInFlight atomic.Int64
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			r.mu.Lock()
			n := int64(len(r.mu.readSent))
			r.mu.Unlock()
			if n > maxInFlight.Load() {
				maxInFlight.Store(n)
			}
			time.Sleep(20 * time.Microsecond)
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	for i := 0; i < readers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j, retries := 0, 0; j < each; j++ {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err := r.ReadBarrier(ctx)
				cancel()
				// An election on a starved machine (100 ms timeouts here)
				// fails the rounds in flight; callers retry, as the
				// error says.
				if errors.Is(err, ErrLeaderChanged) && retries < 20 {
					retries++
					j--
					continue
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	sampler.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("read barrier: %v", err)
	}
	rounds := counterValue(t, f.store.cfg.Metrics.ReadIndexRounds) - rounds0
	t.Logf("%d reads, %.0f rounds, at most %d in flight", readers*each, rounds, maxInFlight.Load())
	if m := maxInFlight.Load(); m > 1 {
		t.Errorf("%d ReadIndex rounds in flight at once on a follower; want at most 1", m)
	}
	if rounds > readers*each/4 {
		t.Errorf("%.0f rounds for %d concurrent reads: reads do not share rounds", rounds, readers*each)
	}
	// Every released round is timed, in its parts too.
	m := f.store.cfg.Metrics
	for name, h := range map[string]prometheus.Histogram{"barrier": m.ReadBarrierDuration, "index": m.ReadIndexDuration, "apply wait": m.ReadApplyWait} {
		var d dto.Metric
		if err := h.Write(&d); err != nil {
			t.Fatal(err)
		}
		if n := float64(d.GetHistogram().GetSampleCount()); n < rounds {
			t.Errorf("read %s histogram: %.0f samples for %.0f rounds", name, n, rounds)
		}
	}
}

// TestFollowerReadAfterLostRound: raft never resends a ReadIndex request
// the network lost. A read queued behind such a round must not wait for it
// longer than readRoundPatience: once the follower hears the leader again,
// a read succeeds at once.
func TestFollowerReadAfterLostRound(t *testing.T) {
	c, lead, f := clusterWithKey(t)
	r := f.store.Replica(1)
	// Lose the follower's requests (one way: it still hears heartbeats,
	// so it keeps its leader and raft keeps no memory of the request).
	c.part.CutOneWay(f.id, lead.id)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	err := r.ReadBarrier(ctx)
	cancel()
	if err == nil {
		t.Fatal("read barrier succeeded with the follower's requests cut off")
	}
	r.mu.Lock()
	lost := len(r.mu.readSent)
	r.mu.Unlock()
	if lost == 0 {
		t.Fatal("no ReadIndex round in flight after the cut: the test does not test the lost round")
	}
	c.part.Heal()
	start := time.Now()
	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := r.ReadBarrier(ctx); err != nil {
		t.Fatalf("read barrier after heal: %v (waited %v)", err, time.Since(start))
	}
	if v, ok := readKey(f.store, "k"); !ok || v != "v" {
		t.Fatalf("read after heal: %q %v", v, ok)
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

package server

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/kvdiff"
)

// TestReplicasConverge: after a random workload over every data type
// (random commands included: SPOP, scripts using math.random and TIME),
// sent concurrently through all nodes, every replica's applied state hashes
// the same at the same applied index.
func TestReplicasConverge(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx := testCtx(t, 60*time.Second)
	c.waitLeader()
	before, _, _, err := c.node(1).StateHash()
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		cl := c.client(uint64(w + 1))
		g := kvdiff.NewGen(uint64(100+w), false)
		wg.Add(1)
		go func() {
			defer wg.Done()
			pipe := cl.Pipeline()
			for i := 0; i < 400; i++ {
				args := g.Next()
				iargs := make([]any, len(args))
				for j, a := range args {
					iargs[j] = a
				}
				pipe.Do(ctx, iargs...)
				if i%8 == 7 {
					pipe.Exec(ctx) // errors are replies here; only convergence matters
				}
			}
			pipe.Exec(ctx)
		}()
	}
	wg.Wait()
	// One more write so every node has something to catch up to, then wait
	// for equal applied indexes and compare hashes.
	if err := c.client(1).Set(ctx, "last", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		type st struct {
			applied uint64
			sum     [32]byte
			keys    int
		}
		var s []st
		for id := uint64(1); id <= 3; id++ {
			a, sum, keys, err := c.node(id).StateHash()
			if err != nil {
				t.Fatal(err)
			}
			s = append(s, st{a, sum, keys})
		}
		if s[0].applied == s[1].applied && s[1].applied == s[2].applied {
			for i := 1; i < 3; i++ {
				if !bytes.Equal(s[i].sum[:], s[0].sum[:]) {
					t.Fatalf("node %d state differs from node 1 at applied index %d: %x (%d keys) vs %x (%d keys)",
						i+1, s[0].applied, s[i].sum[:8], s[i].keys, s[0].sum[:8], s[0].keys)
				}
			}
			if s[0].applied < before+100 {
				t.Fatalf("applied index went from %d to %d: the workload did not write", before, s[0].applied)
			}
			t.Logf("3 replicas identical at applied index %d: %d storage keys, hash %x", s[0].applied, s[0].keys, s[0].sum[:8])
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("applied indexes never became equal: %v", fmt.Sprint(s))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

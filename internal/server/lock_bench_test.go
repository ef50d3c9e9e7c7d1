package server

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// BenchmarkLockHandOff measures the h of the shared-lock goal of 'kvorum
// bench locks' (average acquire about 4 x (hold + h) with 5 processes):
// from a holder's LOCK RELEASE, sent, to the return of the LOCK ACQUIRE
// that was queued behind it, on a 3-node cluster in this process whose
// nodes keep their data on the real disk (every write is fsynced, as with
// 'kvorum start'). Next to it, in the same run and through the same node,
// the durable write a hand-off is made of: a SET. Both with the clients
// on the leader and on a follower. The custom metric latency-ms is h for
// handoff and the SET's latency for set.
//
//	go test ./internal/server -run '^$' -bench LockHandOff -benchtime 300x
func BenchmarkLockHandOff(b *testing.B) {
	c := newDiskCluster(b)
	lead := c.waitLeader()
	follower := lead%3 + 1
	for _, at := range []struct {
		role string
		id   uint64
	}{{"leader", lead}, {"follower", follower}} {
		b.Run("set/"+at.role, func(b *testing.B) {
			cl := c.client(at.id)
			ctx := testCtx(b, 5*time.Minute)
			start := time.Now()
			for i := 0; i < b.N; i++ {
				if err := cl.Set(ctx, "k", i, 0).Err(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "latency-ms")
		})
		b.Run("handoff/"+at.role, func(b *testing.B) {
			benchHandOff(b, c, at.id)
		})
	}
}

// benchHandOff passes lock "h" back and forth between two clients of node
// id: the holder releases while the other waits, queued.
func benchHandOff(b *testing.B, c *testCluster, id uint64) {
	ctx := testCtx(b, 5*time.Minute)
	cl := [2]struct {
		do    func(args ...any) (int64, error)
		lease int64
	}{}
	for i := range cl {
		rc := c.client(id)
		cl[i].do = func(args ...any) (int64, error) { return rc.Do(ctx, args...).Int64() }
		var err error
		if cl[i].lease, err = cl[i].do("LEASE", "GRANT", 600_000); err != nil {
			b.Fatal(err)
		}
	}
	info := c.client(id)
	queued := func() bool {
		v, err := info.Do(ctx, "LOCK", "INFO", "h").Slice()
		if err != nil || len(v) != 8 {
			b.Fatalf("LOCK INFO: %v %v", v, err)
		}
		return v[7] == int64(1)
	}
	tok, err := cl[0].do("LOCK", "ACQUIRE", "h", cl[0].lease)
	if err != nil {
		b.Fatal(err)
	}
	type grant struct {
		tok int64
		at  time.Time
		err error
	}
	var total time.Duration
	holder := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		waiter := 1 - holder
		got := make(chan grant, 1)
		go func() {
			t, err := cl[waiter].do("LOCK", "ACQUIRE", "h", cl[waiter].lease)
			got <- grant{t, time.Now(), err}
		}()
		for deadline := time.Now().Add(10 * time.Second); !queued(); time.Sleep(100 * time.Microsecond) {
			if time.Now().After(deadline) {
				b.Fatal("the waiter was not queued within 10s")
			}
		}
		b.StartTimer()
		t0 := time.Now()
		if n, err := cl[holder].do("LOCK", "RELEASE", "h", tok); err != nil || n != 1 {
			b.Fatalf("release: %d %v", n, err)
		}
		g := <-got
		if g.err != nil || g.tok <= tok {
			b.Fatalf("the waiter got %d %v after token %d", g.tok, g.err, tok)
		}
		total += g.at.Sub(t0)
		tok, holder = g.tok, waiter
	}
	b.StopTimer()
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "latency-ms")
	// The benchmark function runs again with a larger b.N: leave "h" free.
	if n, err := cl[holder].do("LOCK", "RELEASE", "h", tok); err != nil || n != 1 {
		b.Fatalf("final release: %d %v", n, err)
	}
}

// BenchmarkLeaderStopPause measures how long writes through a follower
// stall when the leader stops: with Shutdown (what 'kvorum start' does on
// SIGTERM: leadership is handed over first) and with Stop (like a crash:
// the others wait out an election timeout). The cluster runs with the
// default ticks of 'kvorum start' (100 ms, election after 10). The custom
// metric pause-ms is the longest gap between two acknowledged SETs of a
// client writing in a loop, averaged over the iterations.
//
//	go test ./internal/server -run '^$' -bench LeaderStopPause -benchtime 3x
func BenchmarkLeaderStopPause(b *testing.B) {
	for _, mode := range []string{"shutdown", "stop"} {
		b.Run(mode, func(b *testing.B) {
			var total time.Duration
			for i := 0; i < b.N; i++ {
				total += leaderStopPause(b, mode == "shutdown")
			}
			b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "pause-ms")
		})
	}
}

func leaderStopPause(b *testing.B, graceful bool) time.Duration {
	c := newClusterWith(b, 3, func(_ uint64, cfg *Config) {
		cfg.TickInterval, cfg.ElectionTicks, cfg.HeartbeatTicks = DefaultTickInterval, DefaultElectionTicks, DefaultHeartbeatTicks
	})
	defer c.stopAll()
	lead := c.waitLeader()
	cl := c.client(followersOf(lead, 3)[0])
	ctx := testCtx(b, time.Minute)
	gap := make(chan time.Duration, 1)
	go func() {
		var worst time.Duration
		last := time.Now()
		for end := last.Add(4 * time.Second); time.Now().Before(end); {
			if cl.Set(ctx, "k", "v", 0).Err() != nil {
				continue // CLUSTERDOWN or UNCERTAIN while there is no leader
			}
			worst = max(worst, time.Since(last))
			last = time.Now()
		}
		gap <- worst
	}()
	time.Sleep(time.Second)
	if graceful {
		c.shutdown(lead)
	} else {
		c.stop(lead)
	}
	return <-gap
}

// newDiskCluster is a 3-node cluster in this process whose nodes keep
// their data on the real disk (every write fsynced, as with 'kvorum
// start'), for benchmarks.
func newDiskCluster(b *testing.B) *testCluster {
	dir := b.TempDir()
	return newClusterWith(b, 3, func(id uint64, cfg *Config) {
		cfg.FS = vfs.Default
		cfg.DataDir = filepath.Join(dir, fmt.Sprintf("node-%d", id))
		cfg.SnapshotThreshold = 10_000
	})
}

package server

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// BenchmarkACLOverhead is issue 16's cost goal: GET and SET with ACLs on
// (a user with a key pattern and a category rule: checked on the node that
// receives the command, SETs wrapped and checked again at apply, GETs
// checked again after the read point) against ACLs off (the default user,
// allowed everything), on one 3-node cluster on the real disk, through a
// follower, 16 clients in parallel; the two variants alternate within
// the run (six rounds, each order three times):
//
//	go test ./internal/server -run '^$' -bench ACLOverhead -benchtime 12000x
//
// The metrics are the time per operation of each variant and on/off, the
// ratio.
func BenchmarkACLOverhead(b *testing.B) {
	c := newDiskCluster(b)
	lead := c.waitLeader()
	follower := lead%3 + 1
	ctx := testCtx(b, 10*time.Minute)
	if err := c.client(lead).Do(ctx, "ACL", "SETUSER", "app", "on", ">pw", "~key:*", "~other:*", "+@all", "-@dangerous").Err(); err != nil {
		b.Fatal(err)
	}
	clients := map[string]*redis.Client{
		"off": redis.NewClient(&redis.Options{Addr: c.node(follower).ClientAddr(), PoolSize: 16}),
		"on":  redis.NewClient(&redis.Options{Addr: c.node(follower).ClientAddr(), PoolSize: 16, Username: "app", Password: "pw"}),
	}
	for _, cl := range clients {
		b.Cleanup(func() { cl.Close() })
	}
	for _, op := range []string{"set", "get"} {
		b.Run(op, func(b *testing.B) {
			// Rounds alternate the order of the two variants; b.N
			// operations each, split over 16 clients.
			var spent [2]time.Duration
			const rounds = 6
			for r := 0; r < rounds; r++ {
				for k := 0; k < 2; k++ {
					v := (r + k) % 2 // 0: off, 1: on
					cl := clients[[]string{"off", "on"}[v]]
					start := time.Now()
					runACLOps(b, ctx, cl, op, b.N/rounds)
					spent[v] += time.Since(start)
				}
			}
			per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N/rounds*rounds) }
			b.ReportMetric(per(spent[0]), "off-µs/op")
			b.ReportMetric(per(spent[1]), "on-µs/op")
			b.ReportMetric(float64(spent[1])/float64(spent[0]), "on/off")
		})
	}
}

// runACLOps runs n SETs or GETs of cl from 16 goroutines.
func runACLOps(b *testing.B, ctx context.Context, cl *redis.Client, op string, n int) {
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += 16 {
				key := fmt.Sprintf("key:%d", i%1000)
				var err error
				if op == "set" {
					err = cl.Set(ctx, key, "value-of-64-bytes-0123456789012345678901234567890123456789012", 0).Err()
				} else if err = cl.Get(ctx, key).Err(); err == redis.Nil {
					err = nil
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

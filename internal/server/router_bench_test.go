package server

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// BenchmarkRouterPipeline is the cost of routing (router.go): pipelines
// of 64 GETs and of 64 SETs of keys over every slot, sent to the leader
// of range 1 of an in-memory 3-node cluster of 1 range (the default: no
// key is looked at) and of 4 ranges (each command's keys hashed to their
// range, the run cut into one group per range, run in parallel):
//
//	go test ./internal/server -run '^$' -bench RouterPipeline -benchtime 2000x
func BenchmarkRouterPipeline(b *testing.B) {
	// op "-sampled": splits by load on at a rate never reached, so that
	// one command in 8 has its slot sampled (ranges_load.go).
	for _, ranges := range []int{1, 4} {
		for _, op := range []string{"get", "set", "get-sampled", "set-sampled"} {
			b.Run(fmt.Sprintf("ranges=%d/%s", ranges, op), func(b *testing.B) {
				sampled := strings.HasSuffix(op, "-sampled")
				op := strings.TrimSuffix(op, "-sampled")
				c := newClusterWith(b, 3, func(_ uint64, cfg *Config) {
					cfg.testRanges = ranges
					if sampled {
						cfg.RangeSplitQPS = 1e12
					}
				})
				defer c.stopAll()
				lead := c.waitLeader()
				ctx := testCtx(b, 5*time.Minute)
				cl := c.client(lead)
				keys := make([]string, 64)
				for i := range keys {
					keys[i] = fmt.Sprintf("bench:%d", i)
					if err := cl.Set(ctx, keys[i], "v", 0).Err(); err != nil {
						b.Fatal(err)
					}
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					pipe := cl.Pipeline()
					for _, k := range keys {
						if op == "get" {
							pipe.Get(ctx, k)
						} else {
							pipe.Set(ctx, k, "w", 0)
						}
					}
					if _, err := pipe.Exec(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

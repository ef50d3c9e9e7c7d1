package torture

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// ttlHorizon is the TTL of the keys the TTL writer sets: longer than any
// clock jump a schedule draws (10 min), so none may expire during a run
// whichever node's clock stamped it.
const ttlHorizon = time.Hour

// ttlWriter sets keys "t:<n>" with a TTL of ttlHorizon through the nodes in
// turn until ctx ends, and returns the keys acknowledged OK.
func ttlWriter(ctx context.Context, addrs []string) []string {
	var acked []string
	clients := make([]*redis.Client, len(addrs))
	for i, a := range addrs {
		clients[i] = redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
			ReadTimeout: time.Second, WriteTimeout: time.Second, PoolSize: 1})
		defer clients[i].Close()
	}
	for n := 0; ctx.Err() == nil; n++ {
		k := "t:" + strconv.Itoa(n)
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		err := clients[n%len(clients)].Set(cctx, k, n, ttlHorizon).Err()
		cancel()
		if err == nil {
			acked = append(acked, k)
		}
		select {
		case <-ctx.Done():
		case <-time.After(15 * time.Millisecond):
		}
	}
	return acked
}

// verifyTTL checks, once every clock is back to normal, that every
// acknowledged TTL key still exists with a remaining TTL no longer than
// the horizon plus maxAhead, the furthest any node's clock ran ahead (a
// leader whose clock ran ahead stamped a later deadline; overlapping
// jumps of one node add up), and returns what is wrong.
func verifyTTL(ctx context.Context, addr string, acked []string, maxAhead time.Duration) []string {
	cl := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer cl.Close()
	var bad []string
	maxJump := maxAhead + time.Second
	for _, k := range acked {
		var ttl time.Duration
		var err error
		for try := 0; try < 50; try++ {
			if ttl, err = cl.PTTL(ctx, k).Result(); err == nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		switch {
		case err != nil:
			return append(bad, fmt.Sprintf("%s: PTTL: %v", k, err))
		case ttl < 0:
			bad = append(bad, fmt.Sprintf("%s (TTL %v) expired early or lost (PTTL %v)", k, ttlHorizon, ttl))
		case ttl > ttlHorizon+maxJump:
			bad = append(bad, fmt.Sprintf("%s: remaining TTL %v exceeds %v + the furthest a clock ran ahead (%v)", k, ttl, ttlHorizon, maxAhead))
		}
	}
	return bad
}

package lockbench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/redis/go-redis/v9"
)

// The Redlock algorithm as the paper ran it: the python `redlock` library
// (redlock-py), on independent Redis instances.
//
//   - A random value identifies the acquisition (22 letters and digits, like
//     redlock-py's get_unique_id), drawn once per lock() call.
//   - An attempt sends SET name value NX PX ttl to every instance in turn;
//     the lock is acquired if a majority answered OK and the validity
//     ttl - elapsed - drift is positive, drift = ttl × 0.01 + 2ms.
//   - Otherwise the attempt is undone on every instance (the compare-and-
//     delete script below) and retried after a random delay in
//     [0, retry delay). redlock-py gives up after retry_count (3) attempts
//     and the caller tries again; here lock() keeps trying until it
//     succeeds or its context ends, so an acquisition's time includes every
//     failed attempt and delay, as the paper's acquire time does.
//   - Release runs the script on every instance.

const redlockUnlockScript = `if redis.call("get",KEYS[1]) == ARGV[1] then
    return redis.call("del",KEYS[1])
else
    return 0
end`

const (
	redlockDriftFactor = 0.01
	redlockValueChars  = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
)

type redlock struct {
	clients    []*redis.Client
	quorum     int
	name       string
	ttl        time.Duration
	retryDelay time.Duration
	rng        *rand.Rand
	value      string // of the current hold
	tries      int64
}

func newRedlock(ctx context.Context, ws WorkerSpec) (*redlock, error) {
	if len(ws.Addrs) == 0 {
		return nil, errors.New("redlock worker needs at least one Redis address")
	}
	r := &redlock{
		quorum: len(ws.Addrs)/2 + 1, name: ws.Lock, ttl: ws.TTL, retryDelay: ws.RetryDelay,
		rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(ws.Proc)+1)),
	}
	for _, a := range ws.Addrs {
		c := redis.NewClient(&redis.Options{Addr: a, Protocol: 2, PoolSize: 1, MinIdleConns: 1,
			DialTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second})
		r.clients = append(r.clients, c)
		if err := c.Ping(ctx).Err(); err != nil {
			r.close()
			return nil, fmt.Errorf("redis %s: %w", a, err)
		}
	}
	return r, nil
}

func (r *redlock) randomValue() string {
	b := make([]byte, 22)
	for i := range b {
		b[i] = redlockValueChars[r.rng.IntN(len(redlockValueChars))]
	}
	return string(b)
}

// acquire runs Redlock attempts until one succeeds. Redlock has no fencing
// token: the result is 0.
func (r *redlock) acquire(ctx context.Context) (int64, error) {
	val := r.randomValue()
	drift := time.Duration(float64(r.ttl)*redlockDriftFactor) + 2*time.Millisecond
	ttlMs := r.ttl.Milliseconds()
	var lastErr error
	for {
		r.tries++
		n := 0
		start := time.Now()
		for _, c := range r.clients {
			ok, err := c.Do(ctx, "SET", r.name, val, "NX", "PX", ttlMs).Text()
			switch {
			case err == nil && ok == "OK":
				n++
			case err != nil && !errors.Is(err, redis.Nil):
				lastErr = err // an instance down counts as a failed vote
			}
		}
		validity := r.ttl - time.Since(start) - drift
		if validity > 0 && n >= r.quorum {
			r.value = val
			return 0, nil
		}
		r.unlockAll(ctx, val)
		delay := time.Duration(r.rng.Int64N(int64(r.retryDelay)))
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			if lastErr != nil {
				return 0, fmt.Errorf("%w (last Redis error: %v)", ctx.Err(), lastErr)
			}
			return 0, ctx.Err()
		case <-t.C:
		}
	}
}

func (r *redlock) unlockAll(ctx context.Context, val string) error {
	var first error
	for _, c := range r.clients {
		if err := c.Eval(ctx, redlockUnlockScript, []string{r.name}, val).Err(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (r *redlock) release(ctx context.Context) error {
	if r.value == "" {
		return errors.New("redlock: release without a hold")
	}
	err := r.unlockAll(ctx, r.value)
	r.value = ""
	return err
}

func (r *redlock) attempts() int64 { return r.tries }

func (r *redlock) close() {
	for _, c := range r.clients {
		c.Close()
	}
}

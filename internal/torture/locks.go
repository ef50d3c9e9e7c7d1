package torture

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvorum/kvorum/internal/check"
)

// The lock workload runs beside the key-value clients in every torture
// run: a few clients contend for one lock with short leases while faults
// fire, and every grant is checked afterwards.
//
//   - Mutual exclusion, as a client may rely on it: a client counts a grant
//     valid from the acquire's reply until it invokes the release, and never
//     beyond the send time of its lease's last successful renewal + TTL (a
//     client whose keep-alives fail must assume the lease is gone). Two
//     such intervals of different clients must not overlap.
//   - Tokens: a grant's token is never handed to another lease.
//   - Fencing: each holder appends its token to a list with LOCK FENCED;
//     the list, the log order of fenced writes, must be non-decreasing and
//     hold every acknowledged append.
const (
	lockName     = "torture:lock"
	fenceList    = "torture:fence{f67926}" // hash slot 0: always in range 1, with the locks (LOCK FENCED runs there; split faults never move slot 0)
	lockLeaseTTL = 600 * time.Millisecond
	lockClients  = 3
)

type grant struct {
	client     int
	lease      int64
	token      int64
	start, end time.Time // valid from the acquire's reply to the release (or the lease's last possible moment)
}

type lockWorkload struct {
	mu     sync.Mutex
	grants []grant
	fenced []int64 // tokens whose fenced append was acknowledged
	errs   []string
}

// lockWorkers runs the lock clients until ctx ends.
func lockWorkers(ctx context.Context, addrs []string) *lockWorkload {
	w := &lockWorkload{}
	var wg sync.WaitGroup
	for i := 0; i < lockClients; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			w.client(ctx, i, addrs)
		}(i)
	}
	wg.Wait()
	return w
}

// lockSession is one client's lease and what it knows of its validity.
type lockSession struct {
	mu    sync.Mutex
	lease int64
	until time.Time // last successful renewal's send time + TTL
}

func (s *lockSession) get() (int64, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lease, s.until
}

func (w *lockWorkload) client(ctx context.Context, i int, addrs []string) {
	clients := make([]*redis.Client, len(addrs))
	for j, a := range addrs {
		clients[j] = redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
			ReadTimeout: 2 * time.Second, WriteTimeout: time.Second, PoolSize: 2})
		defer clients[j].Close()
	}
	node := i
	do := func(timeout time.Duration, args ...any) *redis.Cmd {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		cmd := clients[node%len(clients)].Do(cctx, args...)
		if err := cmd.Err(); err != nil && err != redis.Nil {
			switch code, _, _ := check.ErrorReply(err); code {
			case "STALE", "FENCED", "NOLEASE":
				// An answer about the lock or the lease, not about the node.
			default:
				node++ // this node is unreachable or without a leader: try another
			}
		}
		return cmd
	}
	sess := &lockSession{}
	var keepWG sync.WaitGroup
	defer keepWG.Wait()
	newLease := func() bool {
		sent := time.Now()
		id, err := do(time.Second, "LEASE", "GRANT", lockLeaseTTL.Milliseconds()).Int64()
		if err != nil {
			return false
		}
		sess.mu.Lock()
		sess.lease, sess.until = id, sent.Add(lockLeaseTTL)
		sess.mu.Unlock()
		return true
	}
	keepWG.Add(1)
	go func() { // keep-alive at TTL/4
		defer keepWG.Done()
		for ctx.Err() == nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(lockLeaseTTL / 4):
			}
			id, _ := sess.get()
			if id == 0 {
				continue
			}
			sent := time.Now()
			if err := do(lockLeaseTTL/2, "LEASE", "KEEPALIVE", id).Err(); err == nil {
				sess.mu.Lock()
				if sess.lease == id {
					sess.until = sent.Add(lockLeaseTTL)
				}
				sess.mu.Unlock()
			} else if code, _, _ := check.ErrorReply(err); code == "NOLEASE" {
				sess.mu.Lock()
				if sess.lease == id {
					sess.lease = 0
				}
				sess.mu.Unlock()
			}
		}
	}()
	pause := func(d time.Duration) {
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
	for ctx.Err() == nil {
		id, until := sess.get()
		if id == 0 || time.Now().After(until) {
			if !newLease() {
				pause(20 * time.Millisecond)
			}
			continue
		}
		tok, err := do(1500*time.Millisecond, "LOCK", "ACQUIRE", lockName, id, "TIMEOUT", 1000).Int64()
		got := time.Now()
		if err != nil {
			pause(5 * time.Millisecond)
			continue // null (timed out) or an error: acquire again (idempotent)
		}
		if _, until = sess.get(); !got.Before(until) {
			continue // granted, but the lease may be gone already: not ours to use
		}
		if do(time.Second, "LOCK", "FENCED", lockName, tok, "RPUSH", fenceList, tok).Err() == nil {
			w.mu.Lock()
			w.fenced = append(w.fenced, tok)
			w.mu.Unlock()
		}
		pause(2 * time.Millisecond)
		rel := time.Now()
		_, until = sess.get()
		end := rel
		if until.Before(end) {
			end = until
		}
		w.mu.Lock()
		w.grants = append(w.grants, grant{client: i, lease: id, token: tok, start: got, end: end})
		w.mu.Unlock()
		if err := do(time.Second, "LOCK", "RELEASE", lockName, tok).Err(); err != nil && !isStale(err) {
			// Unknown outcome: the lock may still be ours until the lease
			// expires. Start over with a new lease so the old one runs out.
			sess.mu.Lock()
			sess.lease = 0
			sess.mu.Unlock()
		}
	}
}

// verify checks the grants and the fenced list (read through addr after
// recovery) and returns the violations.
func (w *lockWorkload) verify(ctx context.Context, addr string) []string {
	var bad []string
	gs := append([]grant(nil), w.grants...)
	sort.Slice(gs, func(a, b int) bool { return gs[a].start.Before(gs[b].start) })
	owner := map[int64]int64{} // token -> lease
	for _, g := range gs {
		if l, ok := owner[g.token]; ok && l != g.lease {
			bad = append(bad, fmt.Sprintf("token %d granted to lease %d and to lease %d", g.token, l, g.lease))
		}
		owner[g.token] = g.lease
	}
	for a := range gs {
		for b := a + 1; b < len(gs) && gs[b].start.Before(gs[a].end); b++ {
			if gs[b].client != gs[a].client && gs[b].start.Before(gs[b].end) {
				bad = append(bad, fmt.Sprintf("two holders at once: client %d (token %d, valid %v) and client %d (token %d) from %v",
					gs[a].client, gs[a].token, gs[a].end.Sub(gs[a].start), gs[b].client, gs[b].token, gs[a].end.Sub(gs[b].start)))
			}
		}
	}
	cl := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer cl.Close()
	var list []string
	var err error
	for try := 0; try < 50; try++ {
		if list, err = cl.LRange(ctx, fenceList, 0, -1).Result(); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		return append(bad, "reading the fenced list: "+err.Error())
	}
	in := map[int64]bool{}
	var prev int64
	for _, s := range list {
		t, _ := strconv.ParseInt(s, 10, 64)
		if t < prev {
			bad = append(bad, fmt.Sprintf("fenced write with token %d applied after one with token %d", t, prev))
		}
		prev = t
		in[t] = true
	}
	for _, t := range w.fenced {
		if !in[t] {
			bad = append(bad, fmt.Sprintf("acknowledged fenced append of token %d lost", t))
		}
	}
	return bad
}

// isStale reports a STALE reply to LOCK RELEASE: the token no longer held
// the lock, nothing changed.
func isStale(err error) bool {
	code, _, _ := check.ErrorReply(err)
	return code == "STALE"
}

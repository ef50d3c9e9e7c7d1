package process

// Leases and locks (issue 7, contract in the lease/lock API notes) against
// 3-node clusters of real kvorum processes (--tick-interval 50ms: the
// election timeout is 10 ticks = 500 ms). Fault tests: kill -9 of a holder
// client process, kill -9 of the leader during a contended run (grant
// history checked), a minority node that must not grant, and a paused
// holder whose fenced write is refused after its lease expired.

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// lockElection is the clusters' election timeout (50ms ticks x 10).
const lockElection = 500 * time.Millisecond

type acqResult struct {
	tok int64
	err error
	at  time.Time // when the reply arrived
}

// acquireAsync runs a (blocking) lock command in a goroutine.
func acquireAsync(cl *redis.Client, args ...interface{}) <-chan acqResult {
	ch := make(chan acqResult, 1)
	go func() {
		tok, err := cl.Do(lctx(), args...).Int64()
		ch <- acqResult{tok, err, time.Now()}
	}()
	return ch
}

// await waits for an acquireAsync result.
func await(t *testing.T, ch <-chan acqResult, within time.Duration, what string) acqResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(within):
		t.Fatalf("%s: no reply within %v", what, within)
	}
	return acqResult{}
}

// notYet checks that ch has no result for d.
func notYet(t *testing.T, ch <-chan acqResult, d time.Duration, what string) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case r := <-ch:
		t.Fatalf("%s: replied (token %d, err %v) but should still be blocked", what, r.tok, r.err)
	default:
	}
	select {
	case r := <-ch:
		t.Fatalf("%s: replied (token %d, err %v) but should still be blocked", what, r.tok, r.err)
	case <-timer.C:
	}
}

func wantToken(t *testing.T, r acqResult, what string) int64 {
	t.Helper()
	if r.err != nil || r.tok <= 0 {
		t.Fatalf("%s: want a token, got %d, %v", what, r.tok, r.err)
	}
	return r.tok
}

func doInt(t *testing.T, cl *redis.Client, args ...interface{}) int64 {
	t.Helper()
	v, err := cl.Do(lctx(), args...).Int64()
	if err != nil {
		t.Fatalf("%s: %v", cmdline(args), err)
	}
	return v
}

func wantIntReply(t *testing.T, cl *redis.Client, exp int64, args ...interface{}) {
	t.Helper()
	if v := doInt(t, cl, args...); v != exp {
		t.Fatalf("%s = %d, want %d", cmdline(args), v, exp)
	}
}

func wantNull(t *testing.T, cl *redis.Client, args ...interface{}) {
	t.Helper()
	v, err := cl.Do(lctx(), args...).Result()
	if !errors.Is(err, redis.Nil) {
		t.Fatalf("%s = %#v, %v; want null", cmdline(args), v, err)
	}
}

// wantCode checks that the command fails with an error reply whose first
// word is code.
func wantCode(t *testing.T, cl *redis.Client, code string, args ...interface{}) {
	t.Helper()
	v, err := cl.Do(lctx(), args...).Result()
	if replyCode(err) != code {
		t.Fatalf("%s = %#v, %v; want a -%s error", cmdline(args), v, err, code)
	}
}

func sameHolders(got [][2]int64, want ...[2]int64) bool {
	if len(got) != len(want) {
		return false
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || g == w
		}
		if !found {
			return false
		}
	}
	return true
}

// TestLockBasicsProcess: the lease and lock commands' replies per the
// contract, across the three nodes of a cluster (no faults).
func TestLockBasicsProcess(t *testing.T) {
	r := newRKV(t, 3)
	a := lockClientT(t, r.procs[0].client, 15*time.Second)
	b := lockClientT(t, r.procs[1].client, 15*time.Second)
	c := lockClientT(t, r.procs[2].client, 15*time.Second)
	// A RESP3 client, for the null replies.
	c3 := redis.NewClient(&redis.Options{Addr: r.procs[2].client, Protocol: 3, MaxRetries: -1, ReadTimeout: 15 * time.Second})
	t.Cleanup(func() { c3.Close() })
	ctx := lctx()

	t.Run("lease", func(t *testing.T) {
		for _, bad := range []interface{}{0, -5, 86400001, "abc"} {
			v, err := a.Do(ctx, "LEASE", "GRANT", bad).Result()
			if replyCode(err) != "ERR" || !strings.Contains(err.Error(), "invalid lease TTL") {
				t.Errorf("LEASE GRANT %v = %#v, %v; want -ERR invalid lease TTL", bad, v, err)
			}
		}
		id := grantLease(t, a, 5*time.Second)
		id2 := grantLease(t, b, 86400000*time.Millisecond)
		if id2 <= id {
			t.Errorf("lease ids not increasing: %d then %d", id, id2)
		}
		if ttl := doInt(t, c, "LEASE", "TTL", id); ttl <= 0 || ttl > 5000 {
			t.Errorf("LEASE TTL %d = %d, want in (0, 5000]", id, ttl)
		}
		wantIntReply(t, b, 5000, "LEASE", "KEEPALIVE", id)
		wantIntReply(t, c, -2, "LEASE", "TTL", id2+1_000_000)
		wantCode(t, a, "NOLEASE", "LEASE", "KEEPALIVE", id2+1_000_000)
		wantIntReply(t, a, 0, "LEASE", "REVOKE", id2+1_000_000)
		list, err := c.Do(ctx, "LEASE", "LIST").Int64Slice()
		if err != nil {
			t.Fatalf("LEASE LIST: %v", err)
		}
		if !(len(list) >= 2 && containsInt(list, id) && containsInt(list, id2) && isSorted(list)) {
			t.Errorf("LEASE LIST = %v, want ascending ids containing %d and %d", list, id, id2)
		}

		// SET ... LEASE: the key goes with the lease; a later write detaches it.
		if err := a.Do(ctx, "SET", "lk:k", "v", "LEASE", id).Err(); err != nil {
			t.Fatalf("SET lk:k v LEASE %d: %v", id, err)
		}
		if err := a.Do(ctx, "SET", "lk:k2", "v2", "LEASE", id).Err(); err != nil {
			t.Fatalf("SET lk:k2 v2 LEASE %d: %v", id, err)
		}
		if err := b.Set(ctx, "lk:k2", "detached", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if got, err := c.Get(ctx, "lk:k").Result(); err != nil || got != "v" {
			t.Errorf("GET lk:k on node 3 = %q, %v; want v", got, err)
		}
		wantCode(t, b, "NOLEASE", "SET", "lk:k3", "v", "LEASE", id2+1_000_000)
		if n, err := c.Exists(ctx, "lk:k3").Result(); err != nil || n != 0 {
			t.Errorf("EXISTS lk:k3 after the refused SET ... LEASE = %d, %v; want 0", n, err)
		}
		wantIntReply(t, b, 1, "LEASE", "REVOKE", id)
		for i, cl := range []*redis.Client{a, b, c} {
			if got, err := cl.Get(ctx, "lk:k").Result(); !errors.Is(err, redis.Nil) {
				t.Errorf("node %d: GET lk:k after LEASE REVOKE = %q, %v; want nil", i+1, got, err)
			}
			if got, err := cl.Get(ctx, "lk:k2").Result(); err != nil || got != "detached" {
				t.Errorf("node %d: GET lk:k2 (rewritten without LEASE) = %q, %v; want detached", i+1, got, err)
			}
		}
		wantIntReply(t, c, 0, "LEASE", "REVOKE", id)
		wantIntReply(t, a, -2, "LEASE", "TTL", id)
		wantCode(t, c, "NOLEASE", "LEASE", "KEEPALIVE", id)
		list, err = a.Do(ctx, "LEASE", "LIST").Int64Slice()
		if err != nil || containsInt(list, id) || !containsInt(list, id2) {
			t.Errorf("LEASE LIST after revoking %d = %v, %v", id, list, err)
		}
		wantIntReply(t, a, 1, "LEASE", "REVOKE", id2)
	})

	t.Run("exclusive", func(t *testing.T) {
		l1, l2 := grantLease(t, a, 30*time.Second), grantLease(t, b, 30*time.Second)
		li := mustLockInfo(t, c, "X")
		if li.Mode != "free" || li.Token != 0 || len(li.Holders) != 0 || li.Waiters != 0 {
			t.Errorf("LOCK INFO of a never-used lock: %v; want free, token 0", li)
		}
		t1 := doInt(t, a, "LOCK", "TRYACQUIRE", "X", l1)
		wantNull(t, b, "LOCK", "TRYACQUIRE", "X", l2)
		wantNull(t, c3, "LOCK", "TRYACQUIRE", "X", l2)
		wantIntReply(t, c, t1, "LOCK", "ACQUIRE", "X", l1) // idempotent for the holder's lease
		wantIntReply(t, b, t1, "LOCK", "TRYACQUIRE", "X", l1)
		li = mustLockInfo(t, b, "X")
		if li.Mode != "exclusive" || li.Token != t1 || !sameHolders(li.Holders, [2]int64{l1, t1}) || li.Waiters != 0 {
			t.Errorf("LOCK INFO X = %v; want exclusive, token %d, holders [[%d %d]], 0 waiters", li, t1, l1, t1)
		}
		// Fenced writes.
		if v, err := b.Do(ctx, "LOCK", "FENCED", "X", t1, "SET", "lk:res", "one").Result(); err != nil || v != "OK" {
			t.Errorf("LOCK FENCED X %d SET = %#v, %v; want OK", t1, v, err)
		}
		wantCode(t, c, "FENCED", "LOCK", "FENCED", "X", t1-1, "SET", "lk:res", "bad")
		wantCode(t, a, "STALE", "LOCK", "RELEASE", "X", t1-1)
		wantCode(t, a, "STALE", "LOCK", "RELEASE", "X", t1+1_000_000)
		wantIntReply(t, c, 1, "LOCK", "RELEASE", "X", t1)
		wantCode(t, b, "STALE", "LOCK", "RELEASE", "X", t1)
		wantCode(t, b, "FENCED", "LOCK", "FENCED", "X", t1, "SET", "lk:res", "late")
		if got, err := a.Get(ctx, "lk:res").Result(); err != nil || got != "one" {
			t.Errorf("GET lk:res = %q, %v; want one (refused fenced writes wrote nothing)", got, err)
		}
		li = mustLockInfo(t, a, "X")
		if li.Mode != "free" || li.Token != 0 || len(li.Holders) != 0 || li.Waiters != 0 {
			t.Errorf("LOCK INFO X after release = %v; want free, token 0 (a free lock has no current token), no holders", li)
		}
		t2 := doInt(t, b, "LOCK", "TRYACQUIRE", "X", l2)
		if t2 <= t1 {
			t.Errorf("token after re-grant %d <= previous %d", t2, t1)
		}
		wantCode(t, a, "NOLEASE", "LOCK", "TRYACQUIRE", "Y", l2+1_000_000)
		wantCode(t, a, "NOLEASE", "LOCK", "ACQUIRE", "Y", l2+1_000_000, "TIMEOUT", 100)
		// Revoking the holder's lease releases the lock.
		wantIntReply(t, c, 1, "LEASE", "REVOKE", l2)
		li = mustLockInfo(t, a, "X")
		if li.Mode != "free" || len(li.Holders) != 0 {
			t.Errorf("LOCK INFO X after revoking the holder's lease = %v; want free", li)
		}
		wantIntReply(t, a, 1, "LEASE", "REVOKE", l1)
	})

	t.Run("fifo", func(t *testing.T) {
		h := grantLease(t, a, 30*time.Second)
		th := doInt(t, a, "LOCK", "ACQUIRE", "Q", h)
		cls := []*redis.Client{b, c, a}
		var leases []int64
		var chans []<-chan acqResult
		for i, cl := range cls {
			l := grantLease(t, cl, 30*time.Second)
			leases = append(leases, l)
			chans = append(chans, acquireAsync(cl, "LOCK", "ACQUIRE", "Q", l, "TIMEOUT", 20000))
			waitLockInfo(t, b, "Q", 5*time.Second, fmt.Sprintf("%d waiters", i+1), func(li lockInfo) bool { return li.Waiters == int64(i+1) })
			time.Sleep(30 * time.Millisecond)
		}
		for i := range chans {
			notYet(t, chans[i], 50*time.Millisecond, fmt.Sprintf("waiter %d while Q is held", i+1))
		}
		prevTok, prevLease := th, h
		for i := range chans {
			wantIntReply(t, cls[(i+1)%3], 1, "LOCK", "RELEASE", "Q", prevTok)
			res := await(t, chans[i], 5*time.Second, fmt.Sprintf("waiter %d", i+1))
			tok := wantToken(t, res, fmt.Sprintf("waiter %d (FIFO: %d-th to enqueue)", i+1, i+1))
			if tok <= prevTok {
				t.Errorf("waiter %d token %d <= previous holder's %d", i+1, tok, prevTok)
			}
			for j := i + 1; j < len(chans); j++ {
				notYet(t, chans[j], 30*time.Millisecond, fmt.Sprintf("waiter %d after the release of lease %d (FIFO: waiter %d is first)", j+1, prevLease, i+1))
			}
			li := mustLockInfo(t, c, "Q")
			if li.Mode != "exclusive" || !sameHolders(li.Holders, [2]int64{leases[i], tok}) || li.Waiters != int64(len(chans)-i-1) || li.Token != tok {
				t.Errorf("LOCK INFO Q after hand-off to waiter %d = %v; want holder [%d %d], %d waiters", i+1, li, leases[i], tok, len(chans)-i-1)
			}
			prevTok, prevLease = tok, leases[i]
		}
		wantIntReply(t, b, 1, "LOCK", "RELEASE", "Q", prevTok)
		for _, l := range append(leases, h) {
			wantIntReply(t, c, 1, "LEASE", "REVOKE", l)
		}
	})

	t.Run("timeout-and-cancel", func(t *testing.T) {
		h, w := grantLease(t, a, 30*time.Second), grantLease(t, b, 30*time.Second)
		th := doInt(t, a, "LOCK", "ACQUIRE", "T", h)
		start := time.Now()
		ch := acquireAsync(b, "LOCK", "ACQUIRE", "T", w, "TIMEOUT", 1500)
		waitLockInfo(t, c, "T", time.Second, "1 waiter", func(li lockInfo) bool { return li.Waiters == 1 })
		res := await(t, ch, 6*time.Second, "ACQUIRE T TIMEOUT 1500")
		if !errors.Is(res.err, redis.Nil) {
			t.Fatalf("ACQUIRE T TIMEOUT 1500 while held = %d, %v; want null", res.tok, res.err)
		}
		if d := res.at.Sub(start); d < 1400*time.Millisecond || d > 4*time.Second {
			t.Errorf("ACQUIRE ... TIMEOUT 1500 replied null after %v", d)
		}
		li := mustLockInfo(t, c, "T")
		if li.Waiters != 0 || !sameHolders(li.Holders, [2]int64{h, th}) {
			t.Errorf("LOCK INFO T after the waiter timed out = %v; want 0 waiters, holder [%d %d]", li, h, th)
		}
		wantIntReply(t, c, 0, "LOCK", "CANCEL", "T", w)
		// CANCEL of a waiting lease takes it out of the queue.
		ch = acquireAsync(b, "LOCK", "ACQUIRE", "T", w, "TIMEOUT", 3000)
		waitLockInfo(t, c, "T", time.Second, "1 waiter", func(li lockInfo) bool { return li.Waiters == 1 })
		wantIntReply(t, c, 1, "LOCK", "CANCEL", "T", w)
		li = mustLockInfo(t, a, "T")
		if li.Waiters != 0 {
			t.Errorf("LOCK INFO T after CANCEL = %v; want 0 waiters", li)
		}
		res = await(t, ch, 6*time.Second, "cancelled ACQUIRE")
		t.Logf("a cancelled LOCK ACQUIRE replied: token %d, err %v after %v", res.tok, res.err, res.at.Sub(start))
		if res.err == nil {
			t.Errorf("a cancelled waiter got token %d", res.tok)
		}
		// A released lock goes to nobody (the timed-out and cancelled waiters left).
		wantIntReply(t, a, 1, "LOCK", "RELEASE", "T", th)
		li = mustLockInfo(t, b, "T")
		if li.Mode != "free" || li.Waiters != 0 {
			t.Errorf("LOCK INFO T = %v; want free", li)
		}
		wantIntReply(t, c, 1, "LEASE", "REVOKE", h)
		wantIntReply(t, c, 1, "LEASE", "REVOKE", w)
	})

	t.Run("revoke-hands-over", func(t *testing.T) {
		h, w := grantLease(t, a, 30*time.Second), grantLease(t, b, 30*time.Second)
		th := doInt(t, a, "LOCK", "ACQUIRE", "R", h)
		ch := acquireAsync(b, "LOCK", "ACQUIRE", "R", w, "TIMEOUT", 20000)
		waitLockInfo(t, c, "R", 5*time.Second, "1 waiter", func(li lockInfo) bool { return li.Waiters == 1 })
		wantIntReply(t, c, 1, "LEASE", "REVOKE", h)
		tw := wantToken(t, await(t, ch, 5*time.Second, "waiter after the holder's lease was revoked"), "waiter after LEASE REVOKE of the holder")
		if tw <= th {
			t.Errorf("token %d after revoke <= holder's %d", tw, th)
		}
		wantCode(t, a, "STALE", "LOCK", "RELEASE", "R", th)
		wantIntReply(t, a, 1, "LEASE", "REVOKE", w)
		if li := mustLockInfo(t, c, "R"); li.Mode != "free" || li.Waiters != 0 {
			t.Errorf("LOCK INFO R = %v; want free", li)
		}
	})

	t.Run("lease-expires", func(t *testing.T) {
		// A lease nobody keeps alive expires: its keys go, its waiter
		// gets -NOLEASE and leaves the queue.
		h := grantLease(t, a, 30*time.Second)
		th := doInt(t, a, "LOCK", "ACQUIRE", "E", h)
		start := time.Now()
		e := grantLease(t, b, 700*time.Millisecond)
		if err := b.Do(ctx, "SET", "lk:e", "v", "LEASE", e).Err(); err != nil {
			t.Fatal(err)
		}
		res := await(t, acquireAsync(c, "LOCK", "ACQUIRE", "E", e), 5*time.Second, "a waiter whose lease expires")
		took := res.at.Sub(start)
		if replyCode(res.err) != "NOLEASE" {
			t.Errorf("a waiter whose lease expired got %d, %v after %v; want -NOLEASE", res.tok, res.err, took)
		}
		if took < 600*time.Millisecond || took > 700*time.Millisecond+lockElection+time.Second {
			t.Errorf("lease TTL 700ms: the waiter got -NOLEASE after %v", took)
		}
		wantIntReply(t, a, -2, "LEASE", "TTL", e)
		if n, err := a.Exists(ctx, "lk:e").Result(); err != nil || n != 0 {
			t.Errorf("EXISTS lk:e (attached to the expired lease) = %d, %v; want 0", n, err)
		}
		li := mustLockInfo(t, b, "E")
		if li.Waiters != 0 || !sameHolders(li.Holders, [2]int64{h, th}) {
			t.Errorf("LOCK INFO E = %v; want holder [%d %d], no waiters", li, h, th)
		}
		wantIntReply(t, a, 1, "LEASE", "REVOKE", h)
	})

	t.Run("multi-and-lua", func(t *testing.T) {
		h, w := grantLease(t, a, 30*time.Second), grantLease(t, b, 30*time.Second)
		th := doInt(t, a, "LOCK", "ACQUIRE", "U", h)
		var held, free *redis.Cmd
		if _, err := b.TxPipelined(ctx, func(p redis.Pipeliner) error {
			held = p.Do(ctx, "LOCK", "ACQUIRE", "U", w)
			free = p.Do(ctx, "LOCK", "ACQUIRE", "U2", w)
			return nil
		}); err != nil && !errors.Is(err, redis.Nil) {
			t.Fatalf("MULTI/EXEC: %v", err)
		}
		if v, err := held.Result(); !errors.Is(err, redis.Nil) {
			t.Errorf("LOCK ACQUIRE of a held lock inside MULTI = %#v, %v; want null (acts as TRYACQUIRE)", v, err)
		}
		if v, err := free.Int64(); err != nil || v <= th {
			t.Errorf("LOCK ACQUIRE of a free lock inside MULTI = %d, %v; want a token > %d", v, err, th)
		}
		if li := mustLockInfo(t, c, "U"); li.Waiters != 0 {
			t.Errorf("LOCK INFO U after ACQUIRE inside MULTI = %v; want no waiters", li)
		}
		for _, script := range []string{"return redis.call('LEASE', 'LIST')", "return redis.call('LOCK', 'INFO', 'U')"} {
			if v, err := a.Eval(ctx, script, nil).Result(); err == nil {
				t.Errorf("EVAL %q = %#v; want an error (LEASE/LOCK not callable from scripts)", script, v)
			}
		}
		wantIntReply(t, a, 1, "LEASE", "REVOKE", h)
		wantIntReply(t, a, 1, "LEASE", "REVOKE", w)
	})

	t.Run("shared", func(t *testing.T) {
		s1, s2, e, s3 := grantLease(t, a, 30*time.Second), grantLease(t, b, 30*time.Second), grantLease(t, c, 30*time.Second), grantLease(t, a, 30*time.Second)
		t1 := doInt(t, a, "LOCK", "TRYACQUIRE", "S", s1, "SHARED")
		t2 := doInt(t, b, "LOCK", "ACQUIRE", "S", s2, "SHARED")
		li := mustLockInfo(t, c, "S")
		if li.Mode != "shared" || !sameHolders(li.Holders, [2]int64{s1, t1}, [2]int64{s2, t2}) || t2 <= t1 {
			t.Errorf("LOCK INFO S with two shared holders = %v (tokens %d, %d)", li, t1, t2)
		}
		wantNull(t, c, "LOCK", "TRYACQUIRE", "S", e) // exclusive while shared
		// Fenced write with either shared holder's token.
		if err := c.Do(ctx, "LOCK", "FENCED", "S", t1, "SET", "lk:s", "1").Err(); err != nil {
			t.Errorf("LOCK FENCED S (shared holder 1): %v", err)
		}
		chE := acquireAsync(c, "LOCK", "ACQUIRE", "S", e, "TIMEOUT", 20000)
		waitLockInfo(t, a, "S", 5*time.Second, "exclusive waiter queued", func(li lockInfo) bool { return li.Waiters == 1 })
		time.Sleep(30 * time.Millisecond)
		chS3 := acquireAsync(a, "LOCK", "ACQUIRE", "S", s3, "SHARED", "TIMEOUT", 20000)
		waitLockInfo(t, a, "S", 5*time.Second, "shared waiter queued behind the exclusive one", func(li lockInfo) bool { return li.Waiters == 2 })
		notYet(t, chS3, 200*time.Millisecond, "a later SHARED acquire behind an exclusive waiter")
		notYet(t, chE, 10*time.Millisecond, "an exclusive acquire while shared holders hold")
		wantIntReply(t, b, 1, "LOCK", "RELEASE", "S", t1)
		notYet(t, chE, 100*time.Millisecond, "an exclusive acquire while one shared holder remains")
		wantIntReply(t, c, 1, "LOCK", "RELEASE", "S", t2)
		te := wantToken(t, await(t, chE, 5*time.Second, "exclusive waiter"), "exclusive waiter")
		if te <= t2 {
			t.Errorf("exclusive token %d <= shared %d", te, t2)
		}
		notYet(t, chS3, 100*time.Millisecond, "a SHARED acquire while the exclusive holder holds")
		li = mustLockInfo(t, b, "S")
		if li.Mode != "exclusive" || !sameHolders(li.Holders, [2]int64{e, te}) || li.Waiters != 1 {
			t.Errorf("LOCK INFO S = %v; want exclusive [%d %d], 1 waiter", li, e, te)
		}
		wantIntReply(t, a, 1, "LOCK", "RELEASE", "S", te)
		t3 := wantToken(t, await(t, chS3, 5*time.Second, "shared waiter"), "shared waiter")
		if t3 <= te {
			t.Errorf("shared token %d <= exclusive %d", t3, te)
		}
		li = mustLockInfo(t, c, "S")
		if li.Mode != "shared" || !sameHolders(li.Holders, [2]int64{s3, t3}) || li.Waiters != 0 {
			t.Errorf("LOCK INFO S = %v; want shared [%d %d]", li, s3, t3)
		}
		for _, l := range []int64{s1, s2, e, s3} {
			wantIntReply(t, b, 1, "LEASE", "REVOKE", l)
		}
		li = mustLockInfo(t, a, "S")
		if li.Mode != "free" || len(li.Holders) != 0 || li.Waiters != 0 {
			t.Errorf("LOCK INFO S after revoking every lease = %v; want free", li)
		}
	})
}

func containsInt(l []int64, x int64) bool {
	for _, v := range l {
		if v == x {
			return true
		}
	}
	return false
}

func isSorted(l []int64) bool {
	for i := 1; i < len(l); i++ {
		if l[i] <= l[i-1] {
			return false
		}
	}
	return true
}

// TestLockHolderKillHandsOver: a holder client process (lease TTL 1 s,
// keep-alive every 300 ms) is killed with kill -9 while a waiter blocks on
// another node. The waiter is granted once the lease expired: not before
// TTL after the holder's last keep-alive, and within TTL + one election
// timeout + 1 s of the kill, with a larger token.
func TestLockHolderKillHandsOver(t *testing.T) {
	const ttl, keepalive = 1000 * time.Millisecond, 300 * time.Millisecond
	r := newRKV(t, 3)
	h := startHolder(t, r.procs[0].client, "L", ttl, keepalive)
	w := lockClientT(t, r.procs[1].client, 30*time.Second)
	lease2 := grantLease(t, w, 60*time.Second)
	ch := acquireAsync(w, "LOCK", "ACQUIRE", "L", lease2)
	waitLockInfo(t, lockClientT(t, r.procs[2].client, 5*time.Second), "L", 5*time.Second, "the waiter queued",
		func(li lockInfo) bool { return li.Waiters == 1 && sameHolders(li.Holders, [2]int64{h.lease, h.token}) })
	// Let a few keep-alives go by: the lease must outlive its TTL.
	time.Sleep(2 * ttl)
	notYet(t, ch, 0, "the waiter while the holder keeps its lease alive")

	killAt := time.Now()
	h.signal(syscall.SIGKILL)
	h.wait()
	res := await(t, ch, 10*time.Second, "the waiter after kill -9 of the holder")
	tok := wantToken(t, res, "the waiter after kill -9 of the holder")
	handoff := res.at.Sub(killAt)
	t.Logf("hand-off after kill -9 of the holder: %v (TTL %v, keep-alive every %v, election timeout %v)",
		handoff.Round(time.Millisecond), ttl, keepalive, lockElection)
	if errs := h.keepAliveErrors(); len(errs) > 0 {
		t.Logf("holder keep-alive errors: %v", errs)
	}
	if tok <= h.token {
		t.Errorf("waiter's token %d <= holder's %d", tok, h.token)
	}
	if limit := ttl + lockElection + time.Second; handoff > limit {
		t.Errorf("hand-off took %v > TTL + election timeout + 1s = %v", handoff, limit)
	}
	// The lease expires when no keep-alive reached the leader for TTL: the
	// grant cannot come before TTL after the last keep-alive the holder sent
	// (wall clock of this machine, shared by both processes).
	last := h.lastKA.Load()
	if last != 0 {
		t.Logf("granted %v after the holder's last acknowledged keep-alive was sent", res.at.Sub(time.Unix(0, last)).Round(time.Millisecond))
	}
	if last == 0 {
		t.Errorf("the holder reported no successful keep-alive")
	} else if early := time.Unix(0, last).Add(ttl).Sub(res.at); early > 20*time.Millisecond {
		t.Errorf("the lease expired %v before TTL had passed since the holder's last keep-alive", early)
	}
	li := mustLockInfo(t, w, "L")
	if li.Mode != "exclusive" || !sameHolders(li.Holders, [2]int64{lease2, tok}) || li.Waiters != 0 || li.Token != tok {
		t.Errorf("LOCK INFO L = %v; want exclusive, holder [%d %d], 0 waiters", li, lease2, tok)
	}
	leases, err := w.Do(lctx(), "LEASE", "LIST").Int64Slice()
	if err != nil {
		t.Errorf("LEASE LIST: %v", err)
	} else if containsInt(leases, h.lease) {
		t.Errorf("LEASE LIST %v still lists the dead holder's lease %d", leases, h.lease)
	}
	wantIntReply(t, w, 1, "LOCK", "RELEASE", "L", tok)
}

// TestLockPausedHolderFencedWriteRefused: a holder process (TTL 1 s)
// writes through its fencing token, is paused with SIGSTOP, loses its
// lease to expiry; B acquires and writes. When the holder resumes, its
// fenced write with the old token is refused, its release is STALE, its
// keep-alive finds no lease, and B still holds.
func TestLockPausedHolderFencedWriteRefused(t *testing.T) {
	const ttl = 1000 * time.Millisecond
	r := newRKV(t, 3)
	h := startHolder(t, r.procs[0].client, "F", ttl, 300*time.Millisecond)
	tokA := h.token
	if line := h.command("FENCED resource a", 10*time.Second); line != "REPLY FENCED OK" {
		t.Fatalf("holder's fenced write with its token %d: %s", tokA, line)
	}
	b := lockClientT(t, r.procs[1].client, 30*time.Second)
	leaseB := grantLease(t, b, 60*time.Second)
	time.Sleep(ttl) // a few keep-alives

	stopAt := time.Now()
	h.signal(syscall.SIGSTOP)
	t.Logf("SIGSTOP holder (lease %d, token %d)", h.lease, tokA)
	res := await(t, acquireAsync(b, "LOCK", "ACQUIRE", "F", leaseB, "TIMEOUT", 15000), 20*time.Second, "B's ACQUIRE")
	tokB := wantToken(t, res, "B's ACQUIRE while the holder is paused")
	took := res.at.Sub(stopAt)
	t.Logf("B granted %v after the holder was paused", took.Round(time.Millisecond))
	if tokB <= tokA {
		t.Errorf("B's token %d <= A's %d", tokB, tokA)
	}
	if limit := ttl + lockElection + time.Second; took > limit {
		t.Errorf("B waited %v > TTL + election timeout + 1s", took)
	}
	if v, err := b.Do(lctx(), "LOCK", "FENCED", "F", tokB, "SET", "resource", "b").Result(); err != nil || v != "OK" {
		t.Fatalf("B's fenced write: %#v, %v", v, err)
	}

	h.signal(syscall.SIGCONT)
	line := h.command("FENCED resource a2", 10*time.Second)
	if !strings.HasPrefix(line, "ERROR FENCED FENCED ") {
		t.Errorf("resumed holder's fenced write with token %d: %s; want a -FENCED error", tokA, line)
	}
	// The same from a fresh connection.
	o := lockClientT(t, r.procs[2].client, 10*time.Second)
	wantCode(t, o, "FENCED", "LOCK", "FENCED", "F", tokA, "SET", "resource", "a3")
	for _, p := range r.procs {
		cl := lockClientT(t, p.client, 10*time.Second)
		if got, err := cl.Get(lctx(), "resource").Result(); err != nil || got != "b" {
			t.Errorf("node %d: GET resource = %q, %v; want b", p.id, got, err)
		}
	}
	if line := h.command("RELEASE", 10*time.Second); !strings.HasPrefix(line, "ERROR RELEASE STALE ") {
		t.Errorf("resumed holder's LOCK RELEASE F %d: %s; want -STALE", tokA, line)
	}
	if line := h.command("KEEPALIVE", 10*time.Second); !strings.HasPrefix(line, "ERROR KEEPALIVE NOLEASE ") {
		t.Errorf("resumed holder's LEASE KEEPALIVE %d: %s; want -NOLEASE", h.lease, line)
	}
	li := mustLockInfo(t, o, "F")
	if li.Mode != "exclusive" || !sameHolders(li.Holders, [2]int64{leaseB, tokB}) || li.Token != tokB || li.Waiters != 0 {
		t.Errorf("LOCK INFO F = %v; want B (lease %d, token %d) holding", li, leaseB, tokB)
	}
	wantIntReply(t, b, 1, "LOCK", "RELEASE", "F", tokB)
}

// TestLockMinorityCannotAcquire: with two of three nodes SIGSTOPped, the
// lone node must not grant a lock (TRYACQUIRE or ACQUIRE, with a lease
// granted beforehand). Two cases: the lone node is the leader (it steps
// down when it loses its quorum) or a follower (its leader is paused).
//
// Attempts made before the lone node knows it has no leader may get
// UNCERTAIN (the lone leader appended the entry; a follower forwarded it
// to the paused leader, which will read it when it resumes): such an
// attempt may legitimately be applied after the cluster heals, so lock
// "M" is then allowed to be held by that attempt's lease and nobody else.
// Attempts made once the lone node reports no leader must fail with
// CLUSTERDOWN (no proposal was made), so lock "M2" must never have been
// granted (token 0) after healing.
func TestLockMinorityCannotAcquire(t *testing.T) {
	for _, lone := range []string{"leader", "follower"} {
		t.Run("lone-"+lone, func(t *testing.T) { lockMinority(t, lone == "leader") })
	}
}

func lockMinority(t *testing.T, loneIsLeader bool) {
	redis.SetLogger(rkvQuietDials{})
	r := newRKV(t, 3, "--request-timeout", "1s")
	lead := r.waitLeader()
	loneP, stopped := lead, r.others(lead)
	if !loneIsLeader {
		loneP = r.others(lead)[0]
		stopped = r.others(loneP)
	}
	lone := lockClientT(t, loneP.client, 5*time.Second)
	la, lb := grantLease(t, lone, 120*time.Second), grantLease(t, lone, 120*time.Second)
	before := mustLockInfo(t, lone, "M")
	if before.Mode != "free" || before.Token != 0 {
		t.Fatalf("LOCK INFO M before: %v", before)
	}

	for _, p := range stopped {
		pause(t, p)
	}
	t.Logf("SIGSTOP nodes %d and %d; lone node %d (leader: %v)", stopped[0].id, stopped[1].id, loneP.id, loneIsLeader)
	// Phase A: at once, before the lone node notices.
	start := time.Now()
	v, err := lone.Do(lctx(), "LOCK", "TRYACQUIRE", "M", la).Result()
	phaseA := errClass(err)
	t.Logf("phase A: LOCK TRYACQUIRE M on the lone node: %#v, %v (after %v)", v, err, time.Since(start).Round(time.Millisecond))
	if err == nil || phaseA == "nil" {
		t.Fatalf("the lone node replied %#v, %v to LOCK TRYACQUIRE M: a minority must not answer a lock command", v, err)
	}

	// Phase B: once the lone node reports no leader.
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := r.status(loneP)
		if err == nil && st.Leader == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lone node %d still reports leader %d (%v) 10s after the others were paused", loneP.id, st.Leader, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Concurrently, each on its own connection.
	var wg sync.WaitGroup
	for _, args := range [][]interface{}{
		{"LOCK", "TRYACQUIRE", "M2", lb},
		{"LOCK", "ACQUIRE", "M2", lb, "TIMEOUT", 1000},
		{"LOCK", "ACQUIRE", "M2", lb},
		{"LOCK", "TRYACQUIRE", "M2", lb, "SHARED"},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			v, err := lone.Do(lctx(), args...).Result()
			t.Logf("phase B: %s on the lone node: %#v, %v (after %v)", cmdline(args), v, err, time.Since(start).Round(time.Millisecond))
			if err == nil {
				t.Errorf("the lone node without a leader granted %s: %#v", cmdline(args), v)
			} else if errClass(err) != "CLUSTERDOWN" {
				t.Errorf("%s on a node without a leader: %v; want -CLUSTERDOWN (nothing proposed)", cmdline(args), err)
			}
		}()
	}
	wg.Wait()
	if v, err := lone.Do(lctx(), "LOCK", "INFO", "M2").Result(); err == nil {
		t.Logf("LOCK INFO M2 on the lone node answered %#v (a stale read?)", v)
	}

	for _, p := range stopped {
		resume(t, p)
	}
	r.waitLeader()
	// Every node must show the same state. The phase-A attempt may still be
	// applied just after healing (the resumed leader reads the forwarded
	// request, or commits the entry the lone leader appended), so a
	// difference is retried for a while before it counts.
	var infos [2][3]lockInfo
	var infoCls []*redis.Client
	for _, p := range r.procs {
		infoCls = append(infoCls, lockClientT(t, p.client, 5*time.Second))
	}
	for round := 0; ; round++ {
		same := true
		for i, name := range []string{"M", "M2"} {
			for j, cl := range infoCls {
				infos[i][j] = mustLockInfo(t, cl, name)
			}
			if infos[i][0].String() != infos[i][1].String() || infos[i][0].String() != infos[i][2].String() {
				same = false
			}
		}
		if same {
			break
		}
		if round == 30 {
			t.Fatalf("LOCK INFO M, M2 still differ between nodes after healing: %v", infos)
		}
		time.Sleep(100 * time.Millisecond)
	}
	m, m2 := infos[0][0], infos[1][0]
	t.Logf("after healing: LOCK INFO M = %v, M2 = %v", m, m2)
	if m2.Mode != "free" || m2.Token != 0 || len(m2.Holders) != 0 || m2.Waiters != 0 {
		t.Errorf("LOCK INFO M2 = %v: the attempts on the leaderless node left state behind; want free, token 0", m2)
	}
	switch {
	case m.Mode == "free" && len(m.Holders) == 0 && m.Waiters == 0:
	case phaseA != "CLUSTERDOWN" && m.Mode == "exclusive" && len(m.Holders) == 1 && m.Holders[0][0] == la && m.Waiters == 0:
		t.Logf("the phase-A attempt (%s) was applied after healing: lease %d holds M with token %d", phaseA, la, m.Holders[0][1])
	default:
		t.Errorf("LOCK INFO M = %v after a phase-A reply %q; want free (or held by lease %d only if the reply was ambiguous)", m, phaseA, la)
	}

	// The cluster works again, and stays consistent.
	cl := lockClientT(t, r.procs[(loneP.id)%3].client, 10*time.Second)
	lc := grantLease(t, cl, 30*time.Second)
	tc := doInt(t, cl, "LOCK", "TRYACQUIRE", "M2", lc)
	wantNull(t, lone, "LOCK", "TRYACQUIRE", "M2", lb)
	wantIntReply(t, lone, 1, "LOCK", "RELEASE", "M2", tc)
	tb := doInt(t, lone, "LOCK", "ACQUIRE", "M2", lb, "TIMEOUT", 5000)
	if tb <= tc {
		t.Errorf("token %d after %d", tb, tc)
	}
	for _, l := range []int64{la, lb, lc} {
		wantIntReply(t, cl, 1, "LEASE", "REVOKE", l)
	}
	for _, name := range []string{"M", "M2"} {
		for _, p := range r.procs {
			li := mustLockInfo(t, lockClientT(t, p.client, 5*time.Second), name)
			if li.Mode != "free" || len(li.Holders) != 0 || li.Waiters != 0 {
				t.Errorf("node %d: LOCK INFO %s after revoking every lease = %v; want free", p.id, name, li)
			}
		}
	}
}

// ---- contended run with a leader kill ----

// lockWorker is one client of TestLockLeaderKillContended: its own lease,
// a client per node (preferring node pref), retrying on other nodes after
// connection errors.
type lockWorker struct {
	id    int
	cls   []*redis.Client
	cur   int
	lease int64
	notes []string // retried errors, for the log
}

// do runs a lock command until a reply that is not transient. ambiguous
// reports whether an earlier attempt may have been applied (UNCERTAIN or a
// connection error after sending). CLUSTERDOWN is certain not-applied.
func (w *lockWorker) do(deadline time.Time, args ...interface{}) (v int64, ambiguous bool, tries, node int, err error) {
	for tries = 1; ; tries++ {
		node = w.cur
		v, err = w.cls[w.cur].Do(lctx(), args...).Int64()
		class := errClass(err)
		switch class {
		case "", "nil":
			return v, ambiguous, tries, node, err
		case "UNCERTAIN", "net", "CLUSTERDOWN", "TRYAGAIN", "LOADING":
			if class != "CLUSTERDOWN" && class != "TRYAGAIN" && class != "LOADING" {
				ambiguous = true
			}
			if class != "UNCERTAIN" {
				w.cur = (w.cur + 1) % len(w.cls)
			}
			if len(w.notes) < 50 {
				w.notes = append(w.notes, fmt.Sprintf("%s %s: %v", time.Now().Format("15:04:05.000"), args[1], err))
			}
		default:
			return v, ambiguous, tries, node, err
		}
		if tries >= 200 || time.Now().After(deadline) {
			return v, ambiguous, tries, node, fmt.Errorf("gave up after %d tries: %w", tries, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestLockLeaderKillContended: five clients (leases TTL 3 s kept alive
// at TTL/3, spread over the nodes) loop ACQUIRE (TIMEOUT 5 s) / hold 5 ms
// / RELEASE on one lock while the leader is killed with kill -9 and later
// restarted. Retries: ACQUIRE after UNCERTAIN, CLUSTERDOWN or a connection
// error (idempotent per lease); RELEASE likewise, where a STALE reply is
// accepted only after an attempt of the same release that may have been
// applied (a STALE on an unambiguous first attempt means the client lost
// the lock while holding it, a failure); since no keep-alive ever saw
// NOLEASE and every lease still exists at the end (LEASE REVOKE -> 1), the
// token cannot have been released by an expiry, only by that earlier
// attempt. Checked: no two grants overlap
// in real time, tokens strictly increase in grant order, no token granted
// twice, no lease expired (no NOLEASE anywhere), every client was granted
// again after the failover, no ACQUIRE lost, and the lock ends free with
// an empty queue.
func TestLockLeaderKillContended(t *testing.T) {
	const (
		nClients = 5
		ttl      = 3 * time.Second
		hold     = 5 * time.Millisecond
	)
	redis.SetLogger(rkvQuietDials{})
	r := newRKV(t, 3)
	lead := r.waitLeader()
	n := len(r.procs)

	var mu sync.Mutex
	var grants []lockGrant
	var failures []string
	fail := func(format string, a ...interface{}) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, fmt.Sprintf(format, a...))
	}
	stop := make(chan struct{})
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	timeouts := make([]int, nClients)
	workers := make([]*lockWorker, nClients)
	var wg, kaWG sync.WaitGroup
	kaStop := make(chan struct{})
	for i := 0; i < nClients; i++ {
		w := &lockWorker{id: i, cur: i % n}
		for _, p := range r.procs {
			w.cls = append(w.cls, lockClientT(t, p.client, 12*time.Second))
		}
		w.lease = grantLease(t, w.cls[w.cur], ttl)
		workers[i] = w
		// Keep-alive at TTL/3, over any node.
		kaWG.Add(1)
		go func(w *lockWorker) {
			defer kaWG.Done()
			var kcls []*redis.Client
			for _, p := range r.procs {
				kcls = append(kcls, lockClientT(t, p.client, 1500*time.Millisecond))
			}
			cur := w.id % n
			tick := time.NewTicker(ttl / 3)
			defer tick.Stop()
			for i := 0; i < 1000; i++ {
				select {
				case <-kaStop:
					return
				case <-tick.C:
				}
				for try := 0; try < 2*n; try++ {
					_, err := kcls[cur].Do(lctx(), "LEASE", "KEEPALIVE", w.lease).Int64()
					if err == nil {
						break
					}
					if replyCode(err) == "NOLEASE" {
						fail("client %d: LEASE KEEPALIVE %d at %s: %v (the lease expired)", w.id, w.lease, time.Now().Format("15:04:05.000"), err)
						return
					}
					cur = (cur + 1) % n
					time.Sleep(50 * time.Millisecond)
				}
			}
		}(w)
	}
	for i := 0; i < nClients; i++ {
		wg.Add(1)
		go func(w *lockWorker) {
			defer wg.Done()
			for iter := 0; iter < 5000 && !stopped(); iter++ {
				tok, _, tries, node, err := w.do(time.Now().Add(30*time.Second), "LOCK", "ACQUIRE", "L", w.lease, "TIMEOUT", 5000)
				acq := time.Now()
				if errors.Is(err, redis.Nil) {
					mu.Lock()
					timeouts[w.id]++
					mu.Unlock()
					continue
				}
				if err != nil {
					fail("client %d: LOCK ACQUIRE L %d lost: %v", w.id, w.lease, err)
					return
				}
				time.Sleep(hold)
				rel := time.Now()
				v, amb, _, _, err := w.do(time.Now().Add(30*time.Second), "LOCK", "RELEASE", "L", tok)
				g := lockGrant{client: w.id, node: node + 1, token: tok, acq: acq, rel: rel, acqTries: tries}
				switch {
				case err == nil && v == 1:
					g.relNote = "1"
				case replyCode(err) == "STALE" && amb:
					g.relNote = "STALE after an ambiguous attempt (accepted)"
				default:
					g.relNote = fmt.Sprintf("%d, %v (ambiguous earlier: %v)", v, err, amb)
					fail("client %d: LOCK RELEASE L %d: %s", w.id, tok, g.relNote)
				}
				mu.Lock()
				grants = append(grants, g)
				mu.Unlock()
				if g.relNote != "1" && !strings.HasPrefix(g.relNote, "STALE") {
					return
				}
			}
		}(workers[i])
	}

	time.Sleep(1500 * time.Millisecond)
	killAt := time.Now()
	r.kill(lead, syscall.SIGKILL)
	t.Logf("kill -9 leader node %d", lead.id)
	time.Sleep(2500 * time.Millisecond)
	restartAt := time.Now()
	r.restart(lead)
	t.Logf("restarted node %d", lead.id)
	// At least 2.5 s after the restart, and until every client was granted
	// the lock after it (at most 20 s: a loaded CI machine may take
	// seconds to elect and to go round the queue; the check below fails
	// if some client never is).
	grantedAfter := func() bool {
		mu.Lock()
		defer mu.Unlock()
		seen := make([]bool, nClients)
		for _, g := range grants {
			if !g.acq.Before(restartAt) {
				seen[g.client] = true
			}
		}
		for _, ok := range seen {
			if !ok {
				return false
			}
		}
		return true
	}
	time.Sleep(2500 * time.Millisecond)
	for deadline := time.Now().Add(20 * time.Second); !grantedAfter() && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	close(stop)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("clients did not finish within 60s after stop")
	}
	stopAt := time.Now()

	// The lock ends free with an empty queue (the leases are still alive).
	li := mustLockInfo(t, workers[0].cls[(lead.id)%n], "L")
	close(kaStop)
	kaWG.Wait()

	mu.Lock()
	defer mu.Unlock()
	for _, w := range workers {
		if len(w.notes) > 0 {
			t.Logf("client %d retried: %s", w.id, strings.Join(w.notes, "; "))
		}
	}
	perClient := make([][3]int, nClients) // before kill, kill..restart, after restart
	var maxTok int64
	retried := 0
	for _, g := range grants {
		switch {
		case g.acq.Before(killAt):
			perClient[g.client][0]++
		case g.acq.Before(restartAt):
			perClient[g.client][1]++
		default:
			perClient[g.client][2]++
		}
		if g.token > maxTok {
			maxTok = g.token
		}
		if g.acqTries > 1 || g.relNote != "1" {
			retried++
			t.Logf("retried grant: %v", g)
		}
	}
	t.Logf("%d grants in %v (%d retried); per client [before kill, kill..restart, after restart]: %v; null TIMEOUT replies: %v",
		len(grants), stopAt.Sub(killAt.Add(-1500*time.Millisecond)).Round(time.Millisecond), retried, perClient, timeouts)
	for _, f := range failures {
		t.Error(f)
	}
	for _, b := range checkGrantHistory(grants) {
		t.Error(b)
	}
	for i, pc := range perClient {
		if pc[2] == 0 {
			t.Errorf("client %d was not granted the lock after the failover and restart (grants %v, null TIMEOUT replies %d)", i, pc, timeouts[i])
		}
	}
	if len(grants) < 20 {
		t.Errorf("only %d grants", len(grants))
	}
	if li.Mode != "free" || len(li.Holders) != 0 || li.Waiters != 0 {
		t.Errorf("LOCK INFO L after every client released = %v; want free, 0 waiters", li)
	}
	if li.Token != 0 {
		t.Errorf("LOCK INFO L token %d for a free lock, want 0", li.Token)
	}
	// Every lease lived to the end (so a STALE reply to a retried release
	// can only mean that an earlier attempt of that release was applied).
	for _, w := range workers {
		if v, _, _, _, err := w.do(time.Now().Add(10*time.Second), "LEASE", "REVOKE", w.lease); err != nil || v != 1 {
			t.Errorf("client %d: LEASE REVOKE %d at the end = %d, %v; want 1 (the lease should never have expired)", w.id, w.lease, v, err)
		}
	}
}

// TestLockLaggingFollowerAcquire: a LOCK ACQUIRE parked on a follower
// that lags behind the leader must not take the lease's previous, already
// released grant for its own. Follower F is paused (SIGSTOP) after it
// applied X's grant t1; while it is stopped the leader and the other
// follower commit a backlog of writes, Y queues on G, X releases t1 (Y gets
// t2). X's LOCK ACQUIRE G is sent to F, and F resumes: the leader queues X
// at once, but F needs a while to catch up, and its local state still says
// X holds t1. X must stay blocked while Y holds, then get a token > t2.
// (Found by TestLockLeaderKillContended under load: token t1 returned a
// second time while another client held the lock, then STALE on release;
// fixed in feb7ca3 — this is its deterministic reproduction.)
func TestLockLaggingFollowerAcquire(t *testing.T) {
	r := newRKV(t, 3)
	lead := r.waitLeader()
	f := r.others(lead)[0]
	x := lockClientT(t, f.client, 20*time.Second)
	xl := lockClientT(t, lead.client, 20*time.Second)
	y := lockClientT(t, lead.client, 20*time.Second)
	lx, ly := grantLease(t, xl, 120*time.Second), grantLease(t, y, 120*time.Second)
	t1 := doInt(t, x, "LOCK", "TRYACQUIRE", "G", lx)
	// A linearizable read through F: F has applied X's grant.
	if err := x.Get(lctx(), "lk:nothing").Err(); err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	pause(t, f)
	val := strings.Repeat("v", 8192)
	start := time.Now()
	for b := 0; b < 8; b++ { // 3.2 MB for F to catch up on
		p := y.Pipeline()
		for k := 0; k < 50; k++ {
			p.Set(lctx(), fmt.Sprintf("lk:backlog%d-%d", b, k), val, 0)
		}
		if _, err := p.Exec(lctx()); err != nil {
			t.Fatalf("backlog: %v", err)
		}
	}
	t.Logf("backlog written in %v with node %d paused", time.Since(start).Round(time.Millisecond), f.id)
	chY := acquireAsync(y, "LOCK", "ACQUIRE", "G", ly, "TIMEOUT", 10000)
	waitLockInfo(t, xl, "G", 5*time.Second, "Y queued", func(li lockInfo) bool { return li.Waiters == 1 })
	wantIntReply(t, xl, 1, "LOCK", "RELEASE", "G", t1)
	t2 := wantToken(t, await(t, chY, 5*time.Second, "Y's ACQUIRE"), "Y's ACQUIRE")
	chX := acquireAsync(x, "LOCK", "ACQUIRE", "G", lx, "TIMEOUT", 10000)
	time.Sleep(50 * time.Millisecond) // the request waits in F's socket
	resume(t, f)
	resumed := time.Now()
	select {
	case res := <-chX:
		t.Fatalf("X's LOCK ACQUIRE G %d through lagging follower node %d replied %d, %v after %v while Y holds token %d (X's own released token was %d)",
			lx, f.id, res.tok, res.err, res.at.Sub(resumed).Round(time.Millisecond), t2, t1)
	case <-time.After(time.Second):
	}
	wantIntReply(t, y, 1, "LOCK", "RELEASE", "G", t2)
	res := await(t, chX, 10*time.Second, "X's ACQUIRE")
	if tx := wantToken(t, res, "X's ACQUIRE after Y released"); tx <= t2 {
		t.Errorf("X's token %d <= Y's %d (X's previous token was %d)", tx, t2, t1)
	}
	li := mustLockInfo(t, x, "G")
	if li.Mode != "exclusive" || len(li.Holders) != 1 || li.Holders[0][0] != lx || li.Waiters != 0 {
		t.Errorf("LOCK INFO G = %v; want X (lease %d) alone", li, lx)
	}
}

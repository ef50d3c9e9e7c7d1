package kvlock

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// respErr is a server error reply, as go-redis returns them.
type respErr string

func (e respErr) Error() string { return string(e) }
func (respErr) RedisError()     {}

// fakeClient answers Do with handler and records every call.
type fakeClient struct {
	mu      sync.Mutex
	calls   [][]any
	handler func(ctx context.Context, args []any) (any, error)
}

func (f *fakeClient) Do(ctx context.Context, args ...any) *redis.Cmd {
	f.mu.Lock()
	f.calls = append(f.calls, args)
	f.mu.Unlock()
	cmd := redis.NewCmd(ctx, args...)
	v, err := f.handler(ctx, args)
	if err != nil {
		cmd.SetErr(err)
	} else {
		cmd.SetVal(v)
	}
	return cmd
}

// calls returns the recorded calls whose first two words are cmd, sub.
func (f *fakeClient) callsOf(cmd, sub string) [][]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out [][]any
	for _, c := range f.calls {
		if len(c) >= 2 && c[0] == cmd && c[1] == sub {
			out = append(out, c)
		}
	}
	return out
}

// leaseOK answers the LEASE subcommands of a healthy server for lease 7.
func leaseOK(args []any) (any, error, bool) {
	if args[0] != "LEASE" {
		return nil, nil, false
	}
	switch args[1] {
	case "GRANT":
		return int64(7), nil, true
	case "KEEPALIVE":
		return int64(10000), nil, true
	case "REVOKE":
		return int64(1), nil, true
	}
	return nil, fmt.Errorf("unexpected %v", args), true
}

func newFake(t *testing.T, lock func(ctx context.Context, args []any) (any, error)) *fakeClient {
	return &fakeClient{handler: func(ctx context.Context, args []any) (any, error) {
		if v, err, ok := leaseOK(args); ok {
			return v, err
		}
		if lock == nil {
			t.Errorf("unexpected call %v", args)
			return nil, errors.New("unexpected")
		}
		return lock(ctx, args)
	}}
}

func newTestSession(t *testing.T, c Client, opts ...Option) *Session {
	t.Helper()
	s, err := NewSession(context.Background(), c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestSessionGrantKeepAliveClose(t *testing.T) {
	f := newFake(t, nil)
	s := newTestSession(t, f, WithTTL(1500*time.Millisecond))
	if s.Lease() != 7 {
		t.Fatalf("lease %d, want 7", s.Lease())
	}
	if got := f.callsOf("LEASE", "GRANT"); len(got) != 1 || !reflect.DeepEqual(got[0], []any{"LEASE", "GRANT", int64(1500)}) {
		t.Fatalf("grant calls %v", got)
	}
	time.Sleep(1300 * time.Millisecond) // keep-alives at ~500 and 1000 ms
	ka := f.callsOf("LEASE", "KEEPALIVE")
	if len(ka) < 1 || len(ka) > 3 {
		t.Errorf("%d keep-alives in 1.3s with TTL 1.5s, want 2", len(ka))
	}
	for _, c := range ka {
		if !reflect.DeepEqual(c, []any{"LEASE", "KEEPALIVE", int64(7)}) {
			t.Errorf("keep-alive call %v", c)
		}
	}
	if isClosed(s.Done()) || s.Err() != nil {
		t.Fatalf("healthy session ended: %v", s.Err())
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !isClosed(s.Done()) || !errors.Is(s.Err(), ErrSessionClosed) {
		t.Fatalf("after Close: done %v, err %v", isClosed(s.Done()), s.Err())
	}
	if got := f.callsOf("LEASE", "REVOKE"); len(got) != 1 || got[0][2] != int64(7) {
		t.Fatalf("revoke calls %v", got)
	}
	n := len(f.callsOf("LEASE", "KEEPALIVE"))
	time.Sleep(250 * time.Millisecond)
	if m := len(f.callsOf("LEASE", "KEEPALIVE")); m != n {
		t.Errorf("%d keep-alives after Close", m-n)
	}
	if _, err := s.Mutex("x").Lock(context.Background()); !errors.Is(err, ErrSessionClosed) {
		t.Errorf("Lock after Close: %v", err)
	}
}

func TestSessionBadOptions(t *testing.T) {
	f := newFake(t, nil)
	for _, opts := range [][]Option{
		{WithTTL(0)}, {WithTTL(500 * time.Microsecond)}, {WithTTL(25 * time.Hour)},
		{WithTTL(time.Second), WithKeepAliveInterval(time.Second)},
	} {
		if _, err := NewSession(context.Background(), f, opts...); err == nil {
			t.Errorf("options %d accepted", len(opts))
		}
	}
	if n := len(f.callsOf("LEASE", "GRANT")); n != 0 {
		t.Errorf("%d grants sent for bad options", n)
	}
}

func TestSessionGrantRetriesClusterDown(t *testing.T) {
	n := 0
	f := &fakeClient{handler: func(_ context.Context, args []any) (any, error) {
		if args[1] == "GRANT" {
			if n++; n < 3 {
				return nil, respErr("CLUSTERDOWN no Raft leader reachable")
			}
		}
		v, err, _ := leaseOK(args)
		return v, err
	}}
	s := newTestSession(t, f)
	if s.Lease() != 7 || n != 3 {
		t.Fatalf("lease %d after %d grants", s.Lease(), n)
	}
	// A server error that is not transient is returned at once.
	f.handler = func(context.Context, []any) (any, error) { return nil, respErr("ERR unknown command 'LEASE'") }
	if _, err := NewSession(context.Background(), f); err == nil || !strings.Contains(err.Error(), "unknown command") {
		t.Fatalf("err %v", err)
	}
}

func TestSessionLostOnNoLease(t *testing.T) {
	f := &fakeClient{handler: func(_ context.Context, args []any) (any, error) {
		if args[1] == "KEEPALIVE" {
			return nil, respErr("NOLEASE lease 7 not found (expired or revoked)")
		}
		v, err, _ := leaseOK(args)
		return v, err
	}}
	s := newTestSession(t, f, WithTTL(time.Second), WithKeepAliveInterval(50*time.Millisecond))
	select {
	case <-s.Done():
	case <-time.After(time.Second):
		t.Fatal("Done not closed after NOLEASE")
	}
	err := s.Err()
	if !errors.Is(err, ErrLeaseLost) || !strings.Contains(err.Error(), "NOLEASE lease 7") {
		t.Fatalf("Err %v", err)
	}
	if !redis.HasErrorPrefix(errors.Unwrap(err), "NOLEASE") {
		t.Errorf("the server reply is not reachable through %v", err)
	}
	if _, err := s.Mutex("x").Lock(context.Background()); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Lock after loss: %v", err)
	}
}

// The lease counts as lost at send time of the last successful renewal +
// TTL, by the client's clock, while renewals fail with retryable errors.
func TestSessionLostByClientClock(t *testing.T) {
	const ttl = time.Second
	const slow = 300 * time.Millisecond
	var mu sync.Mutex
	var okSent time.Time
	n := 0
	f := &fakeClient{handler: func(_ context.Context, args []any) (any, error) {
		if args[1] == "KEEPALIVE" {
			mu.Lock()
			n++
			first := n == 1
			if first {
				okSent = time.Now()
			}
			mu.Unlock()
			if first {
				// A slow success: the validity must count from the send.
				time.Sleep(slow)
				return int64(ttl / time.Millisecond), nil
			}
			return nil, respErr("CLUSTERDOWN no Raft leader reachable")
		}
		v, err, _ := leaseOK(args)
		return v, err
	}}
	start := time.Now()
	s := newTestSession(t, f, WithTTL(ttl))
	select {
	case <-s.Done():
	case <-time.After(3 * ttl):
		t.Fatal("Done not closed although no renewal succeeded for 3 TTLs")
	}
	lostAt := time.Now()
	mu.Lock()
	sent := okSent
	mu.Unlock()
	if sent.IsZero() {
		t.Fatal("no keep-alive sent")
	}
	// Counted from the send, not from the reply (which came 300ms later).
	if v := s.ValidUntil(); v.After(sent.Add(ttl)) || v.Before(sent.Add(ttl-slow/2)) {
		t.Errorf("validity %v after the successful send, want the TTL %v", v.Sub(sent), ttl)
	}
	if lostAt.Before(sent.Add(ttl)) {
		t.Errorf("lost %v after the last successful send, before the TTL %v ran out", lostAt.Sub(sent), ttl)
	}
	if lostAt.After(sent.Add(ttl + time.Second)) {
		t.Errorf("lost only %v after the last successful send (TTL %v)", lostAt.Sub(sent), ttl)
	}
	err := s.Err()
	if !errors.Is(err, ErrLeaseLost) || !strings.Contains(err.Error(), "CLUSTERDOWN") {
		t.Errorf("Err %v", err)
	}
	mu.Lock()
	if n < 3 {
		t.Errorf("only %d keep-alive attempts in %v: failures must be retried", n, lostAt.Sub(start))
	}
	mu.Unlock()
}

func TestLockArgsAndTimeout(t *testing.T) {
	var mu sync.Mutex
	var got [][]any
	f := newFake(t, func(_ context.Context, args []any) (any, error) {
		mu.Lock()
		got = append(got, args)
		mu.Unlock()
		if args[1] == "ACQUIRE" {
			return int64(40 + len(got)), nil
		}
		return int64(1), nil
	})
	s := newTestSession(t, f, WithMaxBlock(0))
	m := s.Mutex("orders")
	tok, err := m.Lock(context.Background())
	if err != nil || tok != 41 || m.Token() != 41 {
		t.Fatalf("Lock: %d, %v (Token %d)", tok, err, m.Token())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r := s.Mutex("orders", Shared())
	if _, err := r.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if m.Token() != 0 {
		t.Errorf("Token %d after Unlock", m.Token())
	}
	if !reflect.DeepEqual(got[0], []any{"LOCK", "ACQUIRE", "orders", int64(7)}) {
		t.Errorf("acquire without deadline: %v", got[0])
	}
	if len(got[1]) != 7 || got[1][4] != "TIMEOUT" || got[1][6] != "SHARED" {
		t.Fatalf("shared acquire with deadline: %v", got[1])
	}
	if ms := got[1][5].(int64); ms < 1700 || ms > 2000 {
		t.Errorf("TIMEOUT %dms for a 2s deadline", ms)
	}
	if !reflect.DeepEqual(got[2], []any{"LOCK", "RELEASE", "orders", int64(41)}) {
		t.Errorf("release: %v", got[2])
	}
}

func TestLockDeadlineNull(t *testing.T) {
	f := newFake(t, func(_ context.Context, args []any) (any, error) {
		if args[1] == "ACQUIRE" {
			return nil, redis.Nil // the TIMEOUT ran out
		}
		return int64(0), nil
	})
	s := newTestSession(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := s.Mutex("x").Lock(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want DeadlineExceeded", err)
	}
	if n := len(f.callsOf("LOCK", "ACQUIRE")); n != 1 {
		t.Errorf("%d acquires, want 1", n)
	}
	// A null reply is definite (the server dequeued us): no cleanup.
	if n := len(f.callsOf("LOCK", "CANCEL")); n != 0 {
		t.Errorf("%d cancels after a definite null", n)
	}
	// An expired context sends nothing.
	ctx2, cancel2 := context.WithTimeout(context.Background(), -time.Second)
	defer cancel2()
	if _, err := s.Mutex("x").Lock(ctx2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("expired ctx: %v", err)
	}
	if n := len(f.callsOf("LOCK", "ACQUIRE")); n != 1 {
		t.Errorf("an acquire was sent with an expired context")
	}
}

// Rounds bounded by the client's read timeout: a null ends a round, not
// the Lock, and the rounds use WAIT (the server keeps the queue place).
func TestLockRounds(t *testing.T) {
	n := 0
	f := newFake(t, func(_ context.Context, args []any) (any, error) {
		if args[1] == "ACQUIRE" {
			if n++; n < 3 {
				return nil, redis.Nil
			}
			return int64(99), nil
		}
		return nil, fmt.Errorf("unexpected %v", args)
	})
	s := newTestSession(t, f, WithMaxBlock(50*time.Millisecond))
	tok, err := s.Mutex("x").Lock(context.Background())
	if err != nil || tok != 99 {
		t.Fatalf("Lock: %d, %v", tok, err)
	}
	for _, c := range f.callsOf("LOCK", "ACQUIRE") {
		if len(c) != 6 || c[4] != "WAIT" || c[5] != int64(50) {
			t.Errorf("round %v, want WAIT 50", c)
		}
	}
	if d := defaultMaxBlock(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: 4 * time.Second})); d != 3*time.Second {
		t.Errorf("max block for ReadTimeout 4s: %v", d)
	}
	if d := defaultMaxBlock(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: -1})); d != 0 {
		t.Errorf("max block without read timeout: %v", d)
	}
	if d := defaultMaxBlock(f); d != 0 {
		t.Errorf("max block for an unknown client: %v", d)
	}
}

func TestLockRetriesUncertain(t *testing.T) {
	n := 0
	f := newFake(t, func(_ context.Context, args []any) (any, error) {
		if args[1] == "ACQUIRE" {
			switch n++; n {
			case 1:
				return nil, respErr("UNCERTAIN the write may or may not have been applied")
			case 2:
				return nil, errors.New("read tcp: connection reset by peer")
			}
			return int64(5), nil
		}
		return nil, fmt.Errorf("unexpected %v", args)
	})
	s := newTestSession(t, f)
	tok, err := s.Mutex("x").Lock(context.Background())
	if err != nil || tok != 5 || n != 3 {
		t.Fatalf("Lock: %d, %v after %d acquires", tok, err, n)
	}
}

func TestLockNoLease(t *testing.T) {
	f := newFake(t, func(_ context.Context, args []any) (any, error) {
		return nil, respErr("NOLEASE lease expired or was revoked while waiting for the lock")
	})
	s := newTestSession(t, f)
	_, err := s.Mutex("x").Lock(context.Background())
	if !errors.Is(err, ErrLeaseLost) || !isClosed(s.Done()) {
		t.Fatalf("err %v, done %v", err, isClosed(s.Done()))
	}
}

// A cancelled Lock leaves the queue and releases a grant that raced with
// the cancel.
func TestLockCancelCleansUp(t *testing.T) {
	cancelled := make(chan struct{})
	var once sync.Once
	f := newFake(t, func(_ context.Context, args []any) (any, error) {
		switch args[1] {
		case "ACQUIRE":
			// Blocks like the server, ignoring ctx like a client without
			// ContextTimeoutEnabled; answers once cancelled: granted.
			<-cancelled
			return int64(77), nil
		case "CANCEL":
			once.Do(func() { close(cancelled) })
			return int64(0), nil
		case "RELEASE":
			return int64(1), nil
		}
		return nil, fmt.Errorf("unexpected %v", args)
	})
	s := newTestSession(t, f, WithMaxBlock(0))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	m := s.Mutex("x")
	_, err := m.Lock(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	if got := f.callsOf("LOCK", "CANCEL"); len(got) != 1 || !reflect.DeepEqual(got[0], []any{"LOCK", "CANCEL", "x", int64(7)}) {
		t.Errorf("cancel calls %v", got)
	}
	if got := f.callsOf("LOCK", "RELEASE"); len(got) != 1 || got[0][3] != int64(77) {
		t.Errorf("release calls %v: the raced grant must be released", got)
	}
	if m.Token() != 0 {
		t.Errorf("Token %d after a cancelled Lock", m.Token())
	}
}

// After an uncertain outcome and an expired context, Lock looks up what it
// may hold (LOCK INFO) and releases it.
func TestLockUncertainThenDeadlineReleases(t *testing.T) {
	f := newFake(t, func(_ context.Context, args []any) (any, error) {
		switch args[1] {
		case "ACQUIRE":
			return nil, respErr("UNCERTAIN the write may or may not have been applied")
		case "CANCEL":
			return int64(0), nil
		case "INFO":
			return []any{"mode", "exclusive", "token", int64(12), "holders", []any{[]any{int64(7), int64(12)}}, "waiters", int64(0)}, nil
		case "RELEASE":
			return int64(1), nil
		}
		return nil, fmt.Errorf("unexpected %v", args)
	})
	s := newTestSession(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := s.Mutex("x").Lock(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v", err)
	}
	if got := f.callsOf("LOCK", "RELEASE"); len(got) != 1 || got[0][3] != int64(12) {
		t.Errorf("release calls %v, want token 12 released", got)
	}
}

func TestTryLock(t *testing.T) {
	held := true
	f := newFake(t, func(_ context.Context, args []any) (any, error) {
		if args[1] == "TRYACQUIRE" {
			if held {
				return nil, redis.Nil
			}
			return int64(8), nil
		}
		return nil, fmt.Errorf("unexpected %v", args)
	})
	s := newTestSession(t, f)
	m := s.Mutex("x", Shared())
	if tok, ok, err := m.TryLock(context.Background()); tok != 0 || ok || err != nil {
		t.Fatalf("held: %d %v %v", tok, ok, err)
	}
	held = false
	if tok, ok, err := m.TryLock(context.Background()); tok != 8 || !ok || err != nil || m.Token() != 8 {
		t.Fatalf("free: %d %v %v", tok, ok, err)
	}
	if got := f.callsOf("LOCK", "TRYACQUIRE"); !reflect.DeepEqual(got[0], []any{"LOCK", "TRYACQUIRE", "x", int64(7), "SHARED"}) {
		t.Errorf("call %v", got[0])
	}
}

func TestUnlockStaleAndNotHeld(t *testing.T) {
	n := 0
	f := newFake(t, func(_ context.Context, args []any) (any, error) {
		switch args[1] {
		case "ACQUIRE":
			return int64(30), nil
		case "RELEASE":
			n++
			if n == 2 {
				return nil, respErr("UNCERTAIN the write may or may not have been applied")
			}
			return nil, respErr("STALE fencing token 30 does not hold lock 'x' (it is free); nothing changed")
		}
		return nil, fmt.Errorf("unexpected %v", args)
	})
	s := newTestSession(t, f)
	m := s.Mutex("x")
	if err := m.Unlock(context.Background()); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Unlock before Lock: %v", err)
	}
	m.Lock(context.Background())
	err := m.Unlock(context.Background())
	if !errors.Is(err, ErrStaleToken) || !redis.HasErrorPrefix(errors.Unwrap(err), "STALE") {
		t.Fatalf("stale unlock: %v", err)
	}
	if m.Token() != 0 {
		t.Errorf("Token %d kept after STALE", m.Token())
	}
	// UNCERTAIN, then STALE: the first attempt released it.
	m.Lock(context.Background())
	if err := m.Unlock(context.Background()); err != nil {
		t.Fatalf("STALE after an uncertain release: %v", err)
	}
}

func TestFenced(t *testing.T) {
	refuse := false
	f := newFake(t, func(_ context.Context, args []any) (any, error) {
		switch args[1] {
		case "ACQUIRE":
			return int64(30), nil
		case "FENCED":
			if refuse {
				return nil, respErr("FENCED token 30 is not the current holder of lock 'x'; nothing was written")
			}
			return "OK", nil
		}
		return nil, fmt.Errorf("unexpected %v", args)
	})
	s := newTestSession(t, f)
	m := s.Mutex("x")
	if err := m.Fenced(context.Background(), "SET", "k", "v").Err(); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("fenced without a hold: %v", err)
	}
	if n := len(f.callsOf("LOCK", "FENCED")); n != 0 {
		t.Fatalf("sent a fenced write without a token")
	}
	m.Lock(context.Background())
	cmd := m.Fenced(context.Background(), "SET", "k", "v")
	if v, err := cmd.Text(); err != nil || v != "OK" {
		t.Fatalf("fenced: %q %v", v, err)
	}
	if got := f.callsOf("LOCK", "FENCED"); !reflect.DeepEqual(got[0], []any{"LOCK", "FENCED", "x", int64(30), "SET", "k", "v"}) {
		t.Errorf("call %v", got[0])
	}
	refuse = true
	err := m.Fenced(context.Background(), "SET", "k", "v").Err()
	if !errors.Is(err, ErrFenced) || !redis.HasErrorPrefix(err, "FENCED") {
		t.Fatalf("refused: %v", err)
	}
}

func TestParseInfo(t *testing.T) {
	want := LockInfo{Mode: "shared", Token: 12, Holders: []Holder{{7, 11}, {8, 12}}, Waiters: 3}
	resp2 := []any{"mode", "shared", "token", int64(12), "holders",
		[]any{[]any{int64(7), int64(11)}, []any{int64(8), int64(12)}}, "waiters", int64(3)}
	resp3 := map[any]any{"mode": "shared", "token": int64(12), "waiters": int64(3),
		"holders": []any{[]any{int64(7), int64(11)}, []any{int64(8), int64(12)}}}
	for _, v := range []any{resp2, resp3} {
		got, err := parseInfo(v)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("parseInfo(%v) = %+v, %v", v, got, err)
		}
	}
	free, err := parseInfo([]any{"mode", "free", "token", int64(0), "holders", []any{}, "waiters", int64(0)})
	if err != nil || free.Mode != "free" || len(free.Holders) != 0 {
		t.Errorf("free: %+v %v", free, err)
	}
	for _, bad := range []any{"x", []any{"mode"}, []any{"mode", "free", "token", "x", "waiters", int64(0)},
		[]any{"mode", "free", "token", int64(1), "holders", []any{int64(1)}, "waiters", int64(0)}} {
		if _, err := parseInfo(bad); err == nil {
			t.Errorf("parseInfo(%v) accepted", bad)
		}
	}
}

func TestErrorClasses(t *testing.T) {
	for _, c := range []struct {
		err              error
		retry, maybeDone bool
	}{
		{respErr("CLUSTERDOWN no leader"), true, false},
		{respErr("UNCERTAIN maybe"), true, true},
		{errors.New("dial tcp: connection refused"), true, true},
		{respErr("ERR syntax error"), false, false},
		{respErr("NOLEASE lease 1 not found"), false, false},
		{redis.Nil, false, false},
		{context.Canceled, false, false},
		{fmt.Errorf("wrapped: %w", context.DeadlineExceeded), false, false},
		{redis.ErrClosed, false, false},
	} {
		if r, m := retryable(c.err), maybeApplied(c.err); r != c.retry || m != c.maybeDone {
			t.Errorf("%v: retryable %v maybeApplied %v, want %v %v", c.err, r, m, c.retry, c.maybeDone)
		}
	}
}

func TestKindOf(t *testing.T) {
	for _, c := range []struct {
		err  error
		kind replyKind
	}{
		{nil, notReply},
		{redis.Nil, notReply},
		{errors.New("dial tcp: connection refused"), notReply},
		{context.DeadlineExceeded, notReply},
		{respErr("NOLEASE lease 1 not found"), noLease},
		{fmt.Errorf("wrapped: %w", respErr("NOLEASE lease 1 not found")), noLease},
		{respErr("STALE token 3 does not hold lock x"), staleToken},
		{respErr("FENCED token 3"), fenced},
		{respErr("CLUSTERDOWN no leader"), clusterDown},
		{respErr("UNCERTAIN maybe"), uncertain},
		{respErr("TRYAGAIN"), tryAgain},
		{respErr("LOADING dataset"), tryAgain},
		{respErr("ERR node is shutting down"), nodeStopping},
		{respErr("ERR node is shutting down; the lock wait stays queued, acquire again to resume it"), nodeStopping},
		{respErr("ERR syntax error"), otherReply},
		{respErr("ERR lock x: node is shutting down"), otherReply}, // only the reply's start counts
		{respErr("STALEMATE"), otherReply},
	} {
		if k := kindOf(c.err); k != c.kind {
			t.Errorf("%v: kind %d, want %d", c.err, k, c.kind)
		}
	}
}

package kvlock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Client is what kvlock needs from a Redis client: redis.Client,
// redis.ClusterClient, redis.Conn and every redis.UniversalClient have it.
type Client interface {
	Do(ctx context.Context, args ...any) *redis.Cmd
}

// DefaultTTL is the lease TTL when WithTTL is not given.
const DefaultTTL = 10 * time.Second

// Option configures a Session.
type Option func(*options)

type options struct {
	ttl       time.Duration
	keepAlive time.Duration
	maxBlock  time.Duration
	maxSet    bool
}

// WithTTL sets the lease TTL (default 10s): how long the locks outlive this
// process if it dies or is cut off. At least 1ms; whole milliseconds.
func WithTTL(d time.Duration) Option { return func(o *options) { o.ttl = d } }

// WithKeepAliveInterval sets how often the lease is renewed (default a third
// of the TTL, so that two renewals in a row may fail without losing it).
func WithKeepAliveInterval(d time.Duration) Option { return func(o *options) { o.keepAlive = d } }

// WithMaxBlock bounds how long one blocking LOCK ACQUIRE may wait on the
// server before Lock sends it again; 0 means no bound.
//
// A client's read timeout cuts a blocking command short, so by default
// Lock waits in rounds of three quarters of the client's ReadTimeout when it
// can read it (redis.Client, redis.ClusterClient; go-redis's default is 5s)
// and without a bound otherwise. Such a round is sent with WAIT: when it
// ends without a grant the server keeps the waiter's place in the queue,
// and the next round resumes the wait, so FIFO order holds over any wait.
func WithMaxBlock(d time.Duration) Option {
	return func(o *options) { o.maxBlock, o.maxSet = d, true }
}

// Session is a lease on the kvorum cluster, kept alive in the background,
// and the owner of the locks taken through it. A lock belongs to the lease,
// not to a goroutine: two Mutexes of one Session on the same name both
// "hold" it (LOCK ACQUIRE is idempotent per lock and lease). Use one
// Session per independent owner.
//
// The keep-alive renews the lease every TTL/3. The lease counts as lost —
// Done is closed and Err returns an error wrapping ErrLeaseLost — when the
// server answers NOLEASE, or when no renewal succeeded before the lease
// would have expired by this client's own clock, counting conservatively
// from the moment the last successful KEEPALIVE was sent. The server's
// expiry is at least that late, so once Done is closed nothing else can
// have been granted a lock of this session before, but may be from now on.
type Session struct {
	c         Client
	id        int64
	ttl       time.Duration
	keepAlive time.Duration
	maxBlock  time.Duration

	stop      chan struct{} // closed by Close: the keep-alive loop ends
	stopOnce  sync.Once
	loopDone  chan struct{}
	done      chan struct{} // closed when the lease is lost or the session closed
	mu        sync.Mutex
	validTill time.Time // the lease is certainly alive until then
	expiry    *time.Timer
	err       error // why done is closed
	lastErr   error // the last failed keep-alive's error
}

// NewSession grants a lease (LEASE GRANT) and starts renewing it.
// CLUSTERDOWN and connection errors are retried while ctx allows; a grant
// whose reply was lost leaves an unused lease that expires after its TTL.
func NewSession(ctx context.Context, c Client, opts ...Option) (*Session, error) {
	o := options{ttl: DefaultTTL}
	for _, opt := range opts {
		opt(&o)
	}
	if o.ttl < time.Millisecond || o.ttl > 24*time.Hour {
		return nil, fmt.Errorf("kvlock: TTL %v out of range (1ms to 24h)", o.ttl)
	}
	if o.keepAlive == 0 {
		o.keepAlive = o.ttl / 3
	}
	if o.keepAlive <= 0 || o.keepAlive >= o.ttl {
		return nil, fmt.Errorf("kvlock: keep-alive interval %v must be positive and below the TTL %v", o.keepAlive, o.ttl)
	}
	if !o.maxSet {
		o.maxBlock = defaultMaxBlock(c)
	}
	ttlMs := o.ttl.Milliseconds()
	var id int64
	var sent time.Time
	for attempt := 0; ; attempt++ {
		sent = time.Now()
		cmd := c.Do(ctx, "LEASE", "GRANT", ttlMs)
		err := cmd.Err()
		if err == nil {
			if id, err = cmd.Int64(); err != nil {
				return nil, fmt.Errorf("kvlock: LEASE GRANT: unexpected reply %v: %w", cmd.Val(), err)
			}
			break
		}
		if !retryable(err) || sleep(ctx, backoff(attempt, time.Second)) != nil {
			return nil, fmt.Errorf("kvlock: LEASE GRANT: %w", err)
		}
	}
	s := &Session{
		c: c, id: id, ttl: o.ttl, keepAlive: o.keepAlive, maxBlock: o.maxBlock,
		stop: make(chan struct{}), loopDone: make(chan struct{}), done: make(chan struct{}),
		validTill: sent.Add(o.ttl),
	}
	s.mu.Lock()
	s.expiry = time.AfterFunc(time.Until(s.validTill), s.checkExpiry)
	s.mu.Unlock()
	go s.keepAliveLoop()
	return s, nil
}

// defaultMaxBlock is three quarters of the client's read timeout when it
// can be read (0 after go-redis's defaults means none), else unbounded.
func defaultMaxBlock(c Client) time.Duration {
	var rt time.Duration
	switch cl := c.(type) {
	case interface{ Options() *redis.Options }:
		rt = cl.Options().ReadTimeout
	case interface{ Options() *redis.ClusterOptions }:
		rt = cl.Options().ReadTimeout
	case interface{ Options() *redis.RingOptions }:
		rt = cl.Options().ReadTimeout
	}
	if rt <= 0 {
		return 0
	}
	return rt * 3 / 4
}

// Lease is the id of the session's lease (LEASE GRANT's reply).
func (s *Session) Lease() int64 { return s.id }

// TTL is the lease's TTL.
func (s *Session) TTL() time.Duration { return s.ttl }

// Done is closed when the lease is lost or the session closed.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err is nil while the lease is alive; then an error wrapping ErrLeaseLost
// (with the reason) or ErrSessionClosed.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// ValidUntil is the time until which the lease is certainly alive by this
// client's clock: the send time of the last successful renewal plus the TTL.
func (s *Session) ValidUntil() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.validTill
}

// Close stops the keep-alive, closes Done, and revokes the lease (LEASE
// REVOKE), which releases every lock of the session and dequeues its
// waiters at once instead of after the TTL. A lease already gone is not an
// error. CLUSTERDOWN and connection errors are retried while ctx allows.
// Close may be called more than once.
func (s *Session) Close(ctx context.Context) error {
	s.stopOnce.Do(func() { close(s.stop) })
	s.end(ErrSessionClosed)
	for attempt := 0; ; attempt++ {
		err := s.c.Do(ctx, "LEASE", "REVOKE", s.id).Err()
		if err == nil || kindOf(err) == noLease {
			return nil
		}
		if !retryable(err) || sleep(ctx, backoff(attempt, time.Second)) != nil {
			return fmt.Errorf("kvlock: LEASE REVOKE %d: %w", s.id, err)
		}
	}
}

// end records why the session ended (the first reason wins) and closes
// Done.
func (s *Session) end(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return
	}
	s.err = err
	s.expiry.Stop()
	close(s.done)
}

// lost ends the session because the server reports the lease gone.
func (s *Session) lost(reply error) {
	s.end(fmt.Errorf("kvlock: lease %d lost: %w", s.id, mapReply(reply)))
}

// checkExpiry runs when the validity timer fires. A renewal may have moved
// the validity after the timer fired, so it checks again under the lock.
func (s *Session) checkExpiry() {
	s.mu.Lock()
	remaining := time.Until(s.validTill)
	last := s.lastErr
	s.mu.Unlock()
	if remaining > 0 {
		return // renewed in the meantime; the renewal reset the timer
	}
	why := "no renewal succeeded"
	if last != nil {
		why = fmt.Sprintf("no renewal succeeded (last error: %v)", last)
	}
	s.end(fmt.Errorf("%w: lease %d not renewed within its TTL %v by this client's clock: %s", ErrLeaseLost, s.id, s.ttl, why))
}

// alive returns the session's error, if it ended.
func (s *Session) alive() error { return s.Err() }

func (s *Session) keepAliveLoop() {
	defer close(s.loopDone)
	next := s.keepAlive
	for failures := 0; ; {
		t := time.NewTimer(next)
		select {
		case <-s.stop:
			t.Stop()
			return
		case <-s.done:
			t.Stop()
			return
		case <-t.C:
		}
		// Bound the renewal by the validity: past it, the lease is lost
		// anyway. (A client without ContextTimeoutEnabled may still wait up
		// to its read timeout; the expiry timer does not depend on it.)
		ctx, cancel := context.WithDeadline(context.Background(), s.ValidUntil())
		sent := time.Now()
		cmd := s.c.Do(ctx, "LEASE", "KEEPALIVE", s.id)
		cancel()
		err := cmd.Err()
		var ms int64
		if err == nil {
			if ms, err = cmd.Int64(); err != nil {
				err = fmt.Errorf("unexpected LEASE KEEPALIVE reply %v: %w", cmd.Val(), err)
			}
		}
		switch {
		case err == nil:
			s.renewed(sent, time.Duration(ms)*time.Millisecond)
			failures, next = 0, s.keepAlive
		case kindOf(err) == noLease:
			s.lost(err)
			return
		default:
			// Anything else is retried until the validity runs out: the
			// expiry timer, not this loop, decides that the lease is lost.
			s.mu.Lock()
			s.lastErr = err
			s.mu.Unlock()
			failures++
			next = backoff(failures, s.keepAlive/4)
		}
	}
}

// renewed moves the validity to sent + the renewed TTL (the smaller of ours
// and the server's answer) and resets the expiry timer.
func (s *Session) renewed(sent time.Time, ttl time.Duration) {
	if ttl <= 0 || ttl > s.ttl {
		ttl = s.ttl
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return
	}
	if v := sent.Add(ttl); v.After(s.validTill) {
		s.validTill = v
	}
	s.lastErr = nil
	s.expiry.Reset(time.Until(s.validTill))
}

// Mutex returns an exclusive (or, with Shared, shared) lock on name held
// through this session's lease. It makes no server call.
func (s *Session) Mutex(name string, opts ...MutexOption) *Mutex {
	m := &Mutex{s: s, name: name}
	for _, o := range opts {
		o(m)
	}
	return m
}

// RWMutex returns a read-write lock on name: Lock takes it exclusively,
// RLock shared with other readers (FIFO: a queued writer blocks later
// readers).
func (s *Session) RWMutex(name string) *RWMutex {
	return &RWMutex{w: s.Mutex(name), r: s.Mutex(name, Shared())}
}

// backoff is the wait before retry attempt n: 10ms doubling up to max,
// jittered down by up to half so that clients do not retry in step.
func backoff(n int, max time.Duration) time.Duration {
	d := 10 * time.Millisecond
	for i := 0; i < n && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	if d <= 1 {
		return time.Millisecond
	}
	return d/2 + rand.N(d/2)
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

package kvlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// MutexOption configures a Mutex.
type MutexOption func(*Mutex)

// Shared makes the Mutex take the lock in SHARED mode: shared holders
// coexist; an exclusive holder excludes them all.
func Shared() MutexOption { return func(m *Mutex) { m.shared = true } }

// Mutex is one lock of a Session, by name. Its methods are safe for
// concurrent use, but the lock belongs to the session's lease, not to the
// Mutex or a goroutine (see Session).
type Mutex struct {
	s      *Session
	name   string
	shared bool

	mu    sync.Mutex
	token int64 // fencing token of the current hold; 0 when not held
}

// Name is the lock's name.
func (m *Mutex) Name() string { return m.name }

// Session is the session the Mutex belongs to.
func (m *Mutex) Session() *Session { return m.s }

// Token is the fencing token of the current hold (the reply of the last
// successful Lock or TryLock), or 0 when the Mutex does not hold the lock.
// Holding it is a claim, not a proof: pass it to the storage (Fenced) to
// have the claim checked.
func (m *Mutex) Token() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.token
}

func (m *Mutex) setToken(t int64) {
	m.mu.Lock()
	m.token = t
	m.mu.Unlock()
}

// acquireArgs builds LOCK ACQUIRE/TRYACQUIRE. A round bounded by the
// client's read timeout uses WAIT (the server replies null but keeps our
// place in the queue); a round bounded by the caller's deadline uses
// TIMEOUT (the server takes us out of the queue).
func (m *Mutex) acquireArgs(cmd string, timeoutMs int64, keepQueued bool) []any {
	args := []any{"LOCK", cmd, m.name, m.s.id}
	if timeoutMs > 0 {
		opt := "TIMEOUT"
		if keepQueued {
			opt = "WAIT"
		}
		args = append(args, opt, timeoutMs)
	}
	if m.shared {
		args = append(args, "SHARED")
	}
	return args
}

// Lock waits for the lock (LOCK ACQUIRE: FIFO, no polling) and returns its
// fencing token. If ctx has a deadline, the server is told to give up at it
// (TIMEOUT) and Lock returns an error wrapping context.DeadlineExceeded;
// if ctx is cancelled, Lock takes itself out of the queue (LOCK CANCEL) and
// returns ctx.Err(). CLUSTERDOWN, UNCERTAIN and connection errors are
// retried while ctx allows: ACQUIRE is idempotent for a lease, so a retry
// after a lost reply gets the same grant or the same place in the queue.
//
// Whenever Lock returns an error after a request may have queued it or
// granted it the lock, it cancels and releases what it may have got before
// returning (best effort; what remains is released when the lease ends).
// If the lease is lost while waiting, the error wraps ErrLeaseLost.
func (m *Mutex) Lock(ctx context.Context) (int64, error) {
	held := m.Token()
	uncertain := false // a request may have queued us or granted the lock unseen
	fail := func(err error) (int64, error) {
		if uncertain {
			m.cleanup(nil, held)
		}
		return 0, fmt.Errorf("kvlock: lock %q: %w", m.name, err)
	}
	for attempt := 0; ; {
		if err := m.s.alive(); err != nil {
			return fail(err)
		}
		wait, byDeadline, err := m.roundWait(ctx)
		if err != nil {
			return fail(err)
		}
		args := m.acquireArgs("ACQUIRE", wait.Milliseconds(), !byDeadline)
		ch := make(chan *redis.Cmd, 1)
		go func() { ch <- m.s.c.Do(ctx, args...) }()
		var cmd *redis.Cmd
		select {
		case cmd = <-ch:
		case <-ctx.Done():
			// A client that ignores ctx for reads keeps waiting for the
			// server's reply: cancel the wait on the server instead.
			m.cleanup(ch, held)
			return 0, fmt.Errorf("kvlock: lock %q: %w", m.name, ctx.Err())
		case <-m.s.Done():
			m.cleanup(ch, held)
			return 0, fmt.Errorf("kvlock: lock %q: %w", m.name, m.s.Err())
		}
		err = cmd.Err()
		switch {
		case err == nil:
			tok, err := cmd.Int64()
			if err != nil {
				uncertain = true
				return fail(fmt.Errorf("unexpected LOCK ACQUIRE reply %v: %w", cmd.Val(), err))
			}
			if serr := m.s.alive(); serr != nil {
				// Granted through a lease this client already counts as
				// lost: the grant cannot be trusted to last.
				uncertain = true
				return fail(serr)
			}
			m.setToken(tok)
			return tok, nil
		case errors.Is(err, redis.Nil):
			// The TIMEOUT ran out; the server took us out of the queue.
			if byDeadline {
				return fail(fmt.Errorf("not granted before the context deadline: %w", context.DeadlineExceeded))
			}
			continue // a WAIT round bounded by the client's read timeout: we kept our place
		case kindOf(err) == noLease:
			m.s.lost(err)
			return 0, fmt.Errorf("kvlock: lock %q: %w", m.name, m.s.Err())
		case retryable(err) || kindOf(err) == nodeStopping:
			// A node shutting down keeps our place in the queue: acquiring
			// again (through any node) resumes the wait.
			uncertain = uncertain || maybeApplied(err) || kindOf(err) == nodeStopping
			if serr := sleep(ctx, backoff(attempt, time.Second)); serr != nil {
				return fail(fmt.Errorf("%w (last error: %v)", serr, err))
			}
			attempt++
		default:
			// Whatever the server did with this request, leave nothing behind.
			uncertain = true
			return fail(err)
		}
	}
}

// roundWait is the TIMEOUT of the next ACQUIRE round (0: none) and whether
// it is the context's deadline (rather than the client's read limit).
func (m *Mutex) roundWait(ctx context.Context) (wait time.Duration, byDeadline bool, err error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	if dl, ok := ctx.Deadline(); ok {
		rem := time.Until(dl)
		// Leave time for the reply to arrive before the deadline: a grant
		// made just before the TIMEOUT would otherwise be cut off with the
		// read, and have to be cleaned up.
		wait = rem - min(rem/10, 100*time.Millisecond)
		if wait < time.Millisecond {
			return 0, false, fmt.Errorf("not granted before the context deadline: %w", context.DeadlineExceeded)
		}
		byDeadline = true
	}
	if mb := m.s.maxBlock; mb > 0 && (wait == 0 || mb < wait) {
		wait, byDeadline = max(mb, time.Millisecond), false
	}
	return wait, byDeadline, nil
}

// TryLock takes the lock if it is free (or compatible, for Shared) and
// returns its token and true; if someone else holds it, 0 and false. It
// never queues. Errors are retried like Lock's.
func (m *Mutex) TryLock(ctx context.Context) (int64, bool, error) {
	held := m.Token()
	uncertain := false
	fail := func(err error) (int64, bool, error) {
		if uncertain {
			m.cleanup(nil, held)
		}
		return 0, false, fmt.Errorf("kvlock: trylock %q: %w", m.name, err)
	}
	for attempt := 0; ; attempt++ {
		if err := m.s.alive(); err != nil {
			return fail(err)
		}
		cmd := m.s.c.Do(ctx, m.acquireArgs("TRYACQUIRE", 0, false)...)
		err := cmd.Err()
		switch {
		case err == nil:
			tok, err := cmd.Int64()
			if err != nil {
				uncertain = true
				return fail(fmt.Errorf("unexpected LOCK TRYACQUIRE reply %v: %w", cmd.Val(), err))
			}
			m.setToken(tok)
			return tok, true, nil
		case errors.Is(err, redis.Nil):
			return 0, false, nil
		case kindOf(err) == noLease:
			m.s.lost(err)
			return 0, false, fmt.Errorf("kvlock: trylock %q: %w", m.name, m.s.Err())
		case retryable(err):
			uncertain = uncertain || maybeApplied(err)
			if serr := sleep(ctx, backoff(attempt, time.Second)); serr != nil {
				return fail(fmt.Errorf("%w (last error: %v)", serr, err))
			}
		default:
			return fail(err)
		}
	}
}

// Unlock releases the lock (LOCK RELEASE name token). If the token no
// longer held the lock, nothing changes on the server and the error wraps
// ErrStaleToken: the hold ended earlier (the lease expired), and whatever
// was done under it may have overlapped another holder's. CLUSTERDOWN,
// UNCERTAIN and connection errors are retried while ctx allows; STALE after
// such a retry means the earlier attempt released it, and is not an error.
// (go-redis itself resends a command whose connection broke; a STALE after
// such a hidden resend cannot be told apart and is reported.) Without a
// hold the error wraps ErrNotHeld.
func (m *Mutex) Unlock(ctx context.Context) error {
	tok := m.Token()
	if tok == 0 {
		return fmt.Errorf("kvlock: unlock %q: %w", m.name, ErrNotHeld)
	}
	err := m.release(ctx, tok)
	if err == nil || errors.Is(err, ErrStaleToken) {
		m.mu.Lock()
		if m.token == tok {
			m.token = 0
		}
		m.mu.Unlock()
	}
	if err != nil {
		return fmt.Errorf("kvlock: unlock %q: %w", m.name, err)
	}
	return nil
}

func (m *Mutex) release(ctx context.Context, tok int64) error {
	uncertain := false
	for attempt := 0; ; attempt++ {
		err := m.s.c.Do(ctx, "LOCK", "RELEASE", m.name, tok).Err()
		switch {
		case err == nil:
			return nil
		case kindOf(err) == staleToken:
			if uncertain {
				return nil
			}
			return mapReply(err)
		case retryable(err):
			uncertain = uncertain || maybeApplied(err)
			if serr := sleep(ctx, backoff(attempt, time.Second)); serr != nil {
				return fmt.Errorf("%w (last error: %v)", serr, err)
			}
		default:
			return err
		}
	}
}

// Fenced runs a write command under the lock: LOCK FENCED name token
// command args.... The server runs it, atomically, only if the token is
// (one of) the current holder's; otherwise Err() wraps ErrFenced and
// nothing was written. Without a hold Err() wraps ErrNotHeld and nothing is
// sent. The reply is the command's own. Fenced does not retry.
func (m *Mutex) Fenced(ctx context.Context, args ...any) *redis.Cmd {
	tok := m.Token()
	full := append([]any{"LOCK", "FENCED", m.name, tok}, args...)
	if tok == 0 {
		cmd := redis.NewCmd(ctx, full...)
		cmd.SetErr(fmt.Errorf("kvlock: fenced write on %q: %w", m.name, ErrNotHeld))
		return cmd
	}
	cmd := m.s.c.Do(ctx, full...)
	if err := cmd.Err(); kindOf(err) == fenced {
		cmd.SetErr(mapReply(err))
	}
	return cmd
}

// cleanupTimeout bounds the cleanup after an abandoned acquire.
const cleanupTimeout = 3 * time.Second

// cleanup undoes what an acquire that Lock or TryLock gave up on may have
// done on the server: it leaves the queue (LOCK CANCEL), waits a little for
// the abandoned request's reply (pending, if any), and releases a grant it
// carries or that LOCK INFO shows for this lease. A hold that predates the
// call (held) is kept. Best effort: errors are ignored, and the lease's end
// releases whatever remains.
func (m *Mutex) cleanup(pending <-chan *redis.Cmd, held int64) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	_ = m.s.c.Do(ctx, "LOCK", "CANCEL", m.name, m.s.id).Err()
	if pending != nil {
		select {
		case cmd := <-pending:
			err := cmd.Err()
			if err == nil {
				if tok, terr := cmd.Int64(); terr == nil {
					if tok != held {
						_ = m.release(ctx, tok)
					}
					return
				}
			} else if errors.Is(err, redis.Nil) || (kindOf(err) != notReply && !retryable(err)) {
				return // a definite answer: not granted
			}
		case <-ctx.Done():
		}
	}
	info, err := Info(ctx, m.s.c, m.name)
	if err != nil {
		return
	}
	for _, h := range info.Holders {
		if h.Lease == m.s.id && h.Token != held {
			_ = m.release(ctx, h.Token)
		}
	}
}

// RWMutex is a read-write lock of a Session: Lock/Unlock exclusive,
// RLock/RUnlock shared. One session holds it in one mode at a time.
type RWMutex struct{ w, r *Mutex }

// Lock takes the lock exclusively (see Mutex.Lock).
func (rw *RWMutex) Lock(ctx context.Context) (int64, error) { return rw.w.Lock(ctx) }

// TryLock takes the lock exclusively if it is free.
func (rw *RWMutex) TryLock(ctx context.Context) (int64, bool, error) { return rw.w.TryLock(ctx) }

// Unlock releases an exclusive hold.
func (rw *RWMutex) Unlock(ctx context.Context) error { return rw.w.Unlock(ctx) }

// RLock takes the lock shared (see Mutex.Lock).
func (rw *RWMutex) RLock(ctx context.Context) (int64, error) { return rw.r.Lock(ctx) }

// TryRLock takes the lock shared if no writer holds it or waits before us.
func (rw *RWMutex) TryRLock(ctx context.Context) (int64, bool, error) { return rw.r.TryLock(ctx) }

// RUnlock releases a shared hold.
func (rw *RWMutex) RUnlock(ctx context.Context) error { return rw.r.Unlock(ctx) }

// Writer is the exclusive side as a Mutex (for Token and Fenced).
func (rw *RWMutex) Writer() *Mutex { return rw.w }

// Reader is the shared side as a Mutex (for Token and Fenced).
func (rw *RWMutex) Reader() *Mutex { return rw.r }

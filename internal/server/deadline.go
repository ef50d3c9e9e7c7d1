package server

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Every command runs under the node's request timeout. context.WithTimeout
// makes a timer and registers the new context with its parent (the
// connection's) for each command: 3.6 % of a leader's CPU under bench kv
// workload C, and three of them per forwarded write on the leader, where
// the caller's deadline already bounds the call. Most commands never wait
// on their context (a leader's lease read returns at once), so the
// deadline is made lazily, and not at all when the parent's is as tight.

// noCancel is the cancel function of a context that needs none.
func noCancel() {}

// withRequestTimeout is ctx bounded by the node's request timeout, as
// context.WithTimeout, except that ctx itself is returned when its own
// deadline comes first (a forwarded call carries its caller's), and that
// the timer is only made if something waits on the context (lazyDeadline).
func (n *Node) withRequestTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline := time.Now().Add(n.cfg.RequestTimeout)
	if dl, ok := ctx.Deadline(); ok && !dl.After(deadline) {
		return ctx, noCancel
	}
	c := &lazyDeadline{parent: ctx, deadline: deadline}
	return c, c.release
}

// lazyDeadline is context.WithDeadline(parent, deadline), made on the first
// call of Done or Err (context.WithDeadline's own context from then on).
// Deadline and Value do not make it.
type lazyDeadline struct {
	parent   context.Context
	deadline time.Time
	once     sync.Once
	inner    atomic.Pointer[context.Context]
	cancel   context.CancelFunc
}

func (c *lazyDeadline) get() context.Context {
	c.once.Do(func() {
		ctx, cancel := context.WithDeadline(c.parent, c.deadline)
		c.cancel = cancel
		c.inner.Store(&ctx)
	})
	return *c.inner.Load()
}

func (c *lazyDeadline) Deadline() (time.Time, bool) {
	if dl, ok := c.parent.Deadline(); ok && dl.Before(c.deadline) {
		return dl, true
	}
	return c.deadline, true
}

func (c *lazyDeadline) Done() <-chan struct{} { return c.get().Done() }

func (c *lazyDeadline) Err() error { return c.get().Err() }

// Value asks the inner context once it exists (a context derived from this
// one then finds the inner one's cancellation, as it would for a context
// of package context), else the parent.
func (c *lazyDeadline) Value(key any) any {
	if p := c.inner.Load(); p != nil {
		return (*p).Value(key)
	}
	return c.parent.Value(key)
}

// canceled is what a lazyDeadline released before it was made becomes.
var canceled = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// release is the context's cancel function. A context released before it
// was made becomes canceled without ever being made (a late Done or Err
// sees context.Canceled).
func (c *lazyDeadline) release() {
	c.once.Do(func() {
		c.cancel = noCancel
		c.inner.Store(&canceled)
	})
	c.cancel()
}

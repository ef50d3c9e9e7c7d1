// Package kvlock is the Go client side of kvorum's leases and locks: a
// Session holds a lease and keeps it alive, and a Mutex of the session
// takes a lock through it, with a fencing token.
//
//	s, err := kvlock.NewSession(ctx, rdb, kvlock.WithTTL(10*time.Second))
//	m := s.Mutex("orders")
//	tok, err := m.Lock(ctx)
//
// rdb is any go-redis client (redis.UniversalClient, or anything with
// Do). The commands are kvorum's (LEASE GRANT|KEEPALIVE|REVOKE, LOCK
// ACQUIRE|TRYACQUIRE|RELEASE|CANCEL|INFO|FENCED); they are not part of
// Redis, so this package works against kvorum only. Within this module,
// `kvorum bench locks` (internal/lockbench) takes its locks with it.
//
// # What a lock guarantees
//
// The lock state is replicated with Raft: grants are linearizable, FIFO
// and survive failovers. A lock belongs to the session's lease; if the
// process dies or is cut off, the lease expires after its TTL and the next
// waiter is granted the lock in the same Raft entry. The session notices
// first: Done is closed as soon as the lease may have expired by this
// client's clock (the send time of the last successful renewal plus the
// TTL), or when the server reports it gone.
//
// A process can still be paused (GC, swap, SIGSTOP) past its lease's end
// while believing it holds the lock. The fencing token is the answer:
// every grant has a larger token than all earlier grants, and writes sent
// with Mutex.Fenced are executed by kvorum only while the token still
// holds the lock. Writes to other systems should carry the token and be
// checked there.
//
// # Errors and retries
//
// Errors wrap ErrLeaseLost, ErrSessionClosed, ErrStaleToken, ErrFenced or
// ErrNotHeld where they apply; server replies stay reachable with
// errors.As (redis.Error). CLUSTERDOWN (nothing applied), UNCERTAIN and
// connection errors are retried while the context allows, by the
// keep-alive, Lock, TryLock, Unlock and Close; LOCK ACQUIRE is idempotent
// per lock and lease, so a retried acquire gets the same grant or keeps
// its place in the queue. Fenced is never retried: its write is the
// application's.
//
// A server error reply is classified once, by its code (the reply's first
// word: NOLEASE, STALE, FENCED, CLUSTERDOWN, UNCERTAIN, TRYAGAIN,
// LOADING), never by searching its text. The one exception is the ERR
// reply of a node that shuts down while a LOCK ACQUIRE waits on it, which
// Redis has no code for and which starts "ERR node is shutting down": the
// wait stays queued on the cluster, so Lock acquires again (through any
// node) and keeps its place.
//
// # Waiting
//
// Lock blocks on the server (no polling). With a context deadline the
// server gives up at the deadline; a cancelled context takes the waiter
// out of the queue. go-redis cuts every command at the client's
// ReadTimeout (5s by default), so Lock waits in rounds shorter than that
// (see WithMaxBlock), sent with WAIT: the server keeps the waiter's place
// in the queue between rounds, so the order stays FIFO however long the
// wait.
package kvlock

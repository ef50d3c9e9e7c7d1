package kvlock

import (
	"context"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Sentinel errors. Errors returned by this package wrap them, so test with
// errors.Is. Errors that carry a server reply (NOLEASE, STALE, FENCED) also
// unwrap to that reply, a redis.Error, so redis.HasErrorPrefix keeps working.
var (
	// ErrLeaseLost: the session's lease is gone — the server answered
	// NOLEASE, or the keep-alive could not renew the lease before it would
	// have expired by this client's clock. Locks held through the lease are
	// released (or will be, when the server expires it); stop using the
	// resources they protected.
	ErrLeaseLost = errors.New("kvlock: lease lost")
	// ErrSessionClosed: the session was closed with Close.
	ErrSessionClosed = errors.New("kvlock: session closed")
	// ErrStaleToken: LOCK RELEASE was refused (STALE) because the token no
	// longer holds the lock — typically the lease expired and the lock went
	// to someone else. Nothing changed on the server.
	ErrStaleToken = errors.New("kvlock: stale fencing token")
	// ErrFenced: LOCK FENCED refused to run the command because the token is
	// not the lock's current holder. Nothing was written.
	ErrFenced = errors.New("kvlock: fenced")
	// ErrNotHeld: the Mutex does not hold the lock (Unlock or Fenced before
	// a successful Lock, or after Unlock).
	ErrNotHeld = errors.New("kvlock: lock not held")
)

// replyError is an error reply of the server that this package maps to a
// sentinel: errors.Is(err, kind) and errors.As(err, &redis.Error) both
// hold, and the message is the server's own, which names the lease, token
// or lock.
type replyError struct {
	kind  error
	reply error
}

func (e *replyError) Error() string   { return e.reply.Error() }
func (e *replyError) Unwrap() []error { return []error{e.kind, e.reply} }

// errorCode is the first word of a server error reply ("NOLEASE",
// "CLUSTERDOWN", ...), or "" when err is not a server reply (a connection
// error, a timeout, redis.Nil is a reply but not an error reply).
func errorCode(err error) string {
	var re redis.Error
	if err == nil || errors.Is(err, redis.Nil) || !errors.As(err, &re) {
		return ""
	}
	code, _, _ := strings.Cut(re.Error(), " ")
	return code
}

// mapReply wraps the server errors that have a sentinel; other errors are
// returned unchanged.
func mapReply(err error) error {
	var kind error
	switch errorCode(err) {
	case "NOLEASE":
		kind = ErrLeaseLost
	case "STALE":
		kind = ErrStaleToken
	case "FENCED":
		kind = ErrFenced
	default:
		return err
	}
	return &replyError{kind: kind, reply: err}
}

// retryable reports whether a command that failed with err may be sent
// again: the cluster had no leader (CLUSTERDOWN: not applied), the outcome
// is unknown (UNCERTAIN, or the connection failed or timed out after the
// command was written), or the server asked for it (TRYAGAIN, LOADING).
// Callers only retry commands that are idempotent under the contract, or
// that they can check afterwards.
func retryable(err error) bool {
	switch {
	case err == nil, errors.Is(err, redis.Nil),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, redis.ErrClosed):
		return false
	}
	switch errorCode(err) {
	case "":
		return true // not a server reply: a connection error or a timeout
	case "CLUSTERDOWN", "UNCERTAIN", "TRYAGAIN", "LOADING":
		return true
	}
	return false
}

// maybeApplied reports whether a failed write may nevertheless have been
// applied: UNCERTAIN, or a connection error or timeout after the command
// may have been written. CLUSTERDOWN, TRYAGAIN and LOADING mean it was not.
func maybeApplied(err error) bool {
	if !retryable(err) {
		return false
	}
	code := errorCode(err)
	return code == "" || code == "UNCERTAIN"
}

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

// replyKind is what a failed command's error says, parsed once (kindOf)
// from the server's error reply: the reply's code, its first word, decides.
type replyKind int

const (
	// notReply: no error reply at all: nil, redis.Nil (a null answer), a
	// connection error, a timeout, a context error.
	notReply replyKind = iota
	// noLease: NOLEASE, the lease does not exist (any more).
	noLease
	// staleToken: STALE, LOCK RELEASE with a token that no longer holds.
	staleToken
	// fenced: FENCED, LOCK FENCED with a token that does not hold.
	fenced
	// clusterDown: CLUSTERDOWN, no leader reachable: not applied.
	clusterDown
	// uncertain: UNCERTAIN, the write may or may not have been applied.
	uncertain
	// tryAgain: TRYAGAIN or LOADING, the server asks for a resend: not
	// applied.
	tryAgain
	// nodeStopping: the node answering is shutting down (see
	// stoppingReply); a LOCK ACQUIRE waiting on it stays queued.
	nodeStopping
	// otherReply: any other error reply (ERR syntax error, WRONGTYPE, ...).
	otherReply
)

// stoppingReply is how a kvorum node that shuts down answers the commands
// waiting on it: an ERR reply, since Redis has no code for it, whose text
// starts with this (what follows varies).
const stoppingReply = "node is shutting down"

// kindOf parses err's server error reply, if it is one.
func kindOf(err error) replyKind {
	var re redis.Error
	if err == nil || errors.Is(err, redis.Nil) || !errors.As(err, &re) {
		return notReply
	}
	code, text, _ := strings.Cut(re.Error(), " ")
	switch code {
	case "NOLEASE":
		return noLease
	case "STALE":
		return staleToken
	case "FENCED":
		return fenced
	case "CLUSTERDOWN":
		return clusterDown
	case "UNCERTAIN":
		return uncertain
	case "TRYAGAIN", "LOADING":
		return tryAgain
	case "ERR":
		if strings.HasPrefix(text, stoppingReply) {
			return nodeStopping
		}
	}
	return otherReply
}

// mapReply wraps the server errors that have a sentinel; other errors are
// returned unchanged.
func mapReply(err error) error {
	var kind error
	switch kindOf(err) {
	case noLease:
		kind = ErrLeaseLost
	case staleToken:
		kind = ErrStaleToken
	case fenced:
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
	switch kindOf(err) {
	case notReply:
		return true // a connection error or a timeout
	case clusterDown, uncertain, tryAgain:
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
	k := kindOf(err)
	return k == notReply || k == uncertain
}

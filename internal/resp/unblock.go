package resp

import (
	"context"
	"errors"
	"strconv"

	"github.com/kvorum/kvorum/internal/reply"
)

// CLIENT UNBLOCK.
//
// While a connection's run of data commands holds one that may wait, the
// run's context carries a channel (UnblockRequests) on which CLIENT
// UNBLOCK from another connection delivers ErrUnblockTimeout or
// ErrUnblockError. The backend takes it only while the command waits,
// not while it proposes or reads, so an unblocked command never loses
// what it was doing: it answers as if its timeout had passed, or
// Redis's UNBLOCKED error.

// Reasons CLIENT UNBLOCK delivers.
var (
	ErrUnblockTimeout = errors.New("unblocked by CLIENT UNBLOCK TIMEOUT")
	ErrUnblockError   = errors.New("unblocked by CLIENT UNBLOCK ERROR")
)

// UnblockedReply is Redis's reply to a command unblocked with ERROR.
var UnblockedReply = reply.Error("UNBLOCKED client unblocked via CLIENT UNBLOCK")

type unblockKey struct{}

// UnblockRequests returns the channel on which CLIENT UNBLOCK reaches the
// blocking command running with ctx (nil, which never delivers, if none).
func UnblockRequests(ctx context.Context) <-chan error {
	ch, _ := ctx.Value(unblockKey{}).(chan error)
	return ch
}

// blockingContext gives a run that may wait its CLIENT UNBLOCK channel;
// done ends it.
func (c *conn) blockingContext(ctx context.Context) (context.Context, func()) {
	ch := make(chan error, 1)
	c.unblockMu.Lock()
	c.unblockCh = ch
	c.unblockMu.Unlock()
	return context.WithValue(ctx, unblockKey{}, ch), func() {
		c.unblockMu.Lock()
		c.unblockCh = nil
		c.unblockMu.Unlock()
	}
}

// clientUnblock is CLIENT UNBLOCK id [TIMEOUT|ERROR]: 1 if the client was
// blocked and is told to stop waiting, 0 otherwise (as Redis: a client
// not blocked, unknown, or already told).
func clientUnblock(c *conn, args [][]byte) reply.Reply {
	if len(args) > 4 {
		return reply.Error("ERR unknown subcommand or wrong number of arguments for 'UNBLOCK'. Try CLIENT HELP.")
	}
	id, err := strconv.ParseUint(string(args[2]), 10, 64)
	if err != nil {
		return reply.Error("ERR value is not an integer or out of range")
	}
	why := ErrUnblockTimeout
	if len(args) == 4 {
		switch {
		case eqFold(args[3], "timeout"):
		case eqFold(args[3], "error"):
			why = ErrUnblockError
		default:
			return reply.Error("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR")
		}
	}
	s := c.s
	s.mu.Lock()
	var target *conn
	for o := range s.conns {
		if o.id == id {
			target = o
			break
		}
	}
	s.mu.Unlock()
	if target == nil {
		return reply.Int(0)
	}
	target.unblockMu.Lock()
	defer target.unblockMu.Unlock()
	if target.unblockCh == nil {
		return reply.Int(0)
	}
	select {
	case target.unblockCh <- why:
		return reply.Int(1)
	default:
		return reply.Int(0) // told already
	}
}

package resp

import (
	"bytes"
	"time"

	"github.com/kvorum/kvorum/internal/acl"
	"github.com/kvorum/kvorum/internal/reply"
)

// Transactions: MULTI queues commands on the connection; EXEC sends the
// queued data commands to the backend as one Commands.Exec command (one
// Raft entry, applied atomically on every replica) together with the
// stamps WATCH read, so the apply aborts if a watched key changed.
// Connection commands queued in a transaction (PING, ECHO, ...) are
// answered by this server in their place in EXEC's reply.

type txState struct {
	multi   bool
	dirty   bool       // a queued command was refused: EXEC aborts
	queued  [][][]byte // copies of the queued commands
	watched [][]byte   // keys WATCHed, in order
	stamps  []uint64   // their stamps when WATCHed
}

func (t *txState) reset() {
	t.multi, t.dirty = false, false
	clear(t.queued)
	t.queued = t.queued[:0]
	t.watched, t.stamps = nil, nil
}

var (
	errNestedMulti = reply.Error("ERR MULTI calls can not be nested")
	errExecNoMulti = reply.Error("ERR EXEC without MULTI")
	errDiscardNoTx = reply.Error("ERR DISCARD without MULTI")
	errWatchInTx   = reply.Error("ERR WATCH inside MULTI is not allowed")
	errExecAbort   = reply.Error("EXECABORT Transaction discarded because of previous errors.")
	queuedReply    = reply.Status("QUEUED")
)

// txControl reports whether cmd runs at once even inside MULTI, as in
// Redis's processCommand.
func txControl(cmd *command) bool {
	if cmd == nil {
		return false
	}
	switch cmd.spec.Name {
	case "exec", "discard", "multi", "watch", "quit", "reset":
		return true
	}
	return false
}

// noMulti lists commands Redis refuses inside a transaction (flag no-multi).
// redisNoMultiArity is the arity of the commands Redis 7.0 refuses inside
// MULTI (its no_multi flag). kvorum implements none of them; inside a
// transaction they answer Redis's refusal rather than kvorum's "not
// supported", as clients that handle the one expect (an arity error
// comes first, as in Redis).
var redisNoMultiArity = map[string]int{"save": 1, "shutdown": -1, "sync": 1, "psync": -3}

func redisNoMulti(args [][]byte) bool {
	var buf [32]byte
	name, ok := lower(&buf, args[0])
	if !ok {
		return false
	}
	arity, ok := redisNoMultiArity[string(name)]
	return ok && arityOK(arity, len(args))
}

func noMulti(cmd *command) bool {
	if cmd == nil {
		return false
	}
	switch cmd.spec.Name {
	case "subscribe", "psubscribe", "unsubscribe", "punsubscribe", "ssubscribe", "sunsubscribe":
		return true
	}
	return false
}

// queue handles a command received inside MULTI.
func (c *conn) queue(cmd *command, args [][]byte) reply.Reply {
	var r reply.Reply
	ok := true
	switch {
	case cmd == nil && redisNoMulti(args):
		r, ok = reply.Error("ERR Command not allowed inside a transaction"), false
	case cmd == nil || (cmd.handler == nil && !c.s.table.Known(args[0])):
		r, ok = c.s.unknownCommand(args), false
	case arityOK(cmd.spec.Arity, len(args)) && c.s.overMaxMemory():
		r, ok = errOOM, false // maxmemory.go: nothing is queued over maxmemory
	case noMulti(cmd):
		r, ok = reply.Error("ERR Command not allowed inside a transaction"), false
	case cmd.handler != nil:
		if !arityOK(cmd.spec.Arity, len(args)) {
			r, ok = wrongArgs(cmd.spec.Name), false
		}
	default:
		r, ok = c.s.table.CheckQueued(args)
	}
	if !ok {
		c.tx.dirty = true
		return r
	}
	cp := make([][]byte, len(args))
	for i, a := range args {
		cp[i] = bytes.Clone(a)
		if cp[i] == nil {
			cp[i] = []byte{}
		}
	}
	c.tx.queued = append(c.tx.queued, cp)
	return queuedReply
}

func multiCmd(c *conn, args [][]byte) reply.Reply {
	if c.tx.multi {
		return errNestedMulti
	}
	c.tx.multi = true
	return reply.OK
}

func discardCmd(c *conn, args [][]byte) reply.Reply {
	if !c.tx.multi {
		return errDiscardNoTx
	}
	c.tx.reset()
	return reply.OK
}

func watchCmd(c *conn, args [][]byte) reply.Reply {
	if c.tx.multi {
		return errWatchInTx
	}
	keys := args[1:]
	stamps, errReply := c.s.b.Watch(c.ctx, keys)
	if errReply != nil {
		return *errReply
	}
	for i, k := range keys {
		c.tx.watched = append(c.tx.watched, bytes.Clone(k))
		c.tx.stamps = append(c.tx.stamps, stamps[i])
	}
	return reply.OK
}

func unwatchCmd(c *conn, args [][]byte) reply.Reply {
	c.tx.watched, c.tx.stamps = nil, nil
	return reply.OK
}

func execCmd(c *conn, args [][]byte) (r reply.Reply) {
	if !c.tx.multi {
		return errExecNoMulti
	}
	defer c.tx.reset()
	if c.execOOM() {
		return errOOM // maxmemory.go: Redis checks this before the queued errors
	}
	if c.tx.dirty {
		return errExecAbort
	}
	queued := c.tx.queued
	start := time.Now()
	defer func() { // before the reset: SLOWLOG logs what the transaction ran
		if r.Kind == reply.KindArray {
			c.slowlogTx(queued, time.Since(start))
		}
	}()
	var data [][][]byte
	// The users may have changed since the commands were queued: EXEC
	// checks each again, as Redis does, and answers a refused one with
	// EXEC's NOPERM in its place (the others run).
	var refused map[int]reply.Reply
	for i, q := range queued {
		cmd := c.s.lookup(q[0])
		if cmd != nil {
			if r, no := c.aclRefusal(cmd, q, acl.ContextMulti, true); no {
				if refused == nil {
					refused = map[int]reply.Reply{}
				}
				refused[i] = r
				continue
			}
		}
		if cmd == nil || cmd.handler == nil {
			data = append(data, q)
		}
	}
	var dataReplies []reply.Reply
	if len(data) > 0 || len(c.tx.watched) > 0 {
		r := c.s.b.Do(c.withUser(c.ctx), [][][]byte{c.aclWrap(c.s.table.Exec(c.tx.watched, c.tx.stamps, data))})[0]
		switch {
		case r.Kind == reply.KindNilArray:
			return reply.NilArray
		case r.Kind == reply.KindError:
			return r
		case r.Kind != reply.KindArray || len(r.Elems) != len(data):
			return reply.Error("ERR internal error: malformed transaction reply")
		}
		dataReplies = r.Elems
	}
	out := make([]reply.Reply, len(queued))
	j := 0
	for i, q := range queued {
		if r, no := refused[i]; no {
			out[i] = r
			continue
		}
		cmd := c.s.lookup(q[0])
		if cmd != nil && cmd.handler != nil {
			out[i] = c.connCommand(cmd, q)
			continue
		}
		out[i] = dataReplies[j]
		j++
	}
	return reply.Array(out...)
}

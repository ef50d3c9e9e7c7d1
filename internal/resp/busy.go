package resp

import (
	"bytes"
	"time"

	"github.com/kvorum/kvorum/internal/reply"
)

// The BUSY reply, SCRIPT KILL and FUNCTION KILL (Redis 7.0's behaviour
// while a script runs past busy-reply-threshold).
//
// Redis runs one command at a time: while a script runs longer than
// busy-reply-threshold, every command but those flagged allow_busy (AUTH,
// HELLO, MULTI, DISCARD, WATCH, UNWATCH, QUIT, RESET, SHUTDOWN, SCRIPT
// KILL, FUNCTION KILL, FUNCTION STATS) is answered BUSY. A kvorum node
// does the same for the commands that arrive on its connections while a
// script has run that long on it (Config.Scripts: the oldest run, at
// apply time or on the read path). Behind a run at apply time, writes and
// linearizable reads would wait anyway (the node applies nothing else
// meanwhile); behind a read-only run on the read path nothing would wait,
// and connection commands never would: they get BUSY too, as from Redis,
// so that clients see the behaviour they are written for.

// BusyThreshold is busy-reply-threshold: how long a script runs before
// the node answers BUSY.
func (s *Server) BusyThreshold() time.Duration {
	return time.Duration(s.busyThreshold.Load()) * time.Millisecond
}

// busyReply is the BUSY reply to cmd if a script has run past the
// threshold on this node and cmd may not run meanwhile; busy false
// otherwise. It costs two atomic loads when no script runs.
func (c *conn) busyReply(cmd *command, args [][]byte) (r reply.Reply, busy bool) {
	sc := c.s.cfg.Scripts
	if sc == nil {
		return reply.Reply{}, false
	}
	b, function := sc.Busy(time.Duration(c.s.busyThreshold.Load()) * time.Millisecond)
	if !b {
		return reply.Reply{}, false
	}
	if isFunctionStats(args) {
		if function {
			return reply.Reply{}, false // FUNCTION STATS shows the running function
		}
	} else if allowBusy(cmd, args) {
		return reply.Reply{}, false
	}
	msg := "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
	if function {
		msg = "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
	}
	// As Redis's rejectCommand: a refused EXEC discards the transaction
	// (with or without MULTI), another command inside MULTI makes EXEC
	// fail.
	if cmd.spec.Name == "exec" {
		c.tx.reset()
		return reply.Error("EXECABORT Transaction discarded because of: " + msg), true
	}
	if c.tx.multi {
		c.tx.dirty = true
	}
	return reply.Error(msg), true
}

// allowBusy reports whether cmd has Redis's allow_busy flag: the
// connection commands carry it in their spec, the data commands with it
// are the subcommands SCRIPT KILL, FUNCTION KILL and FUNCTION STATS (kv's
// table has no subcommand specs). FUNCTION STATS is allowed only while a
// function runs (Redis's functionStatsCommand answers the script's BUSY
// error while an EVAL runs).
func allowBusy(cmd *command, args [][]byte) bool {
	for _, f := range cmd.spec.Flags {
		if f == "allow_busy" {
			return true
		}
	}
	return isScriptKill(args) || isFunctionStats(args)
}

func isSub(args [][]byte, container, sub string) bool {
	return len(args) == 2 && bytes.EqualFold(args[0], []byte(container)) && bytes.EqualFold(args[1], []byte(sub))
}

func isScriptKill(args [][]byte) bool {
	return isSub(args, "script", "kill") || isSub(args, "function", "kill")
}

func isFunctionStats(args [][]byte) bool { return isSub(args, "function", "stats") }

// scriptKill answers SCRIPT KILL and FUNCTION KILL on this node
// (Config.Scripts), without the backend: they must not wait behind the
// script they kill. ok false: args is neither.
func (c *conn) scriptKill(args [][]byte) (reply.Reply, bool) {
	sc := c.s.cfg.Scripts
	if sc == nil || !isScriptKill(args) {
		return reply.Reply{}, false
	}
	return sc.Kill(bytes.EqualFold(args[0], []byte("function"))), true
}

package resp

import (
	"slices"
	"strings"

	"github.com/kvorum/kvorum/internal/reply"
)

// maxmemory. kvorum does not evict (its data lives on disk): with
// maxmemory set (a cluster-wide parameter, CONFIG SET through Raft) and
// the node's estimate of its data set above it, the server refuses the
// commands Redis flags denyoom, before anything is proposed, with Redis's
// OOM error, as Redis does under maxmemory-policy noeviction
// (processCommand):
//
//   - a command flagged denyoom (SET, XADD, FUNCTION LOAD, ...), after
//     its arity is checked and before its syntax is;
//   - inside MULTI, every command but EXEC, DISCARD, QUIT and RESET: it
//     is not queued and EXEC aborts (EXECABORT);
//   - EXEC of a transaction that queued a denyoom command (the
//     transaction is discarded).
//
// Commands that do not add data (DEL, GET, EXPIRE, PUBLISH, ...) run.
// Scripts (EVAL, EVALSHA, FCALL) are proposed wrapped (oomWrapper), so
// that every replica applies Redis's rules for scripts over maxmemory.
// The estimate and the limit are the backend's (memoryLimiter); the
// limit changes on each node when it applies the CONFIG SET.

// memoryLimiter is a Backend that enforces maxmemory.
type memoryLimiter interface {
	// MaxMemory is the cluster's maxmemory as this node has applied it
	// (bytes, 0: no limit).
	MaxMemory() int64
	// OverMaxMemory reports whether the node's data set is larger than
	// maxmemory (never when it is 0).
	OverMaxMemory() bool
}

// oomWrapper is a Commands table with commands that run differently when
// proposed over maxmemory (package kv: scripts, as KVORUM.OOM).
type oomWrapper interface {
	OOMWrap(args [][]byte) [][]byte
}

// oomWrap is args as this node proposes it now: wrapped by the table if
// the node is over maxmemory and the command is one it wraps.
func (s *Server) oomWrap(cmd *command, args [][]byte) [][]byte {
	w, ok := s.table.(oomWrapper)
	if !ok || cmd == nil || !strings.HasPrefix(cmd.spec.Name, "eval") && !strings.HasPrefix(cmd.spec.Name, "fcall") || !s.overMaxMemory() {
		return args
	}
	return w.OOMWrap(args)
}

// errOOM is Redis's shared.oomerr.
var errOOM = reply.Error("OOM command not allowed when used memory > 'maxmemory'.")

// denyOOMSubs are the subcommands of data containers that Redis flags
// denyoom (kvorum's specs flag the containers only).
var denyOOMSubs = map[string][]string{
	"function": {"load", "restore"},
	"xgroup":   {"create", "createconsumer"},
}

// denyOOM reports whether Redis flags the command args (of cmd) denyoom.
func denyOOM(cmd *command, args [][]byte) bool {
	if cmd == nil {
		return false
	}
	if subs, ok := denyOOMSubs[cmd.spec.Name]; ok {
		return len(args) > 1 && slices.Contains(subs, strings.ToLower(string(args[1])))
	}
	return slices.Contains(cmd.spec.Flags, "denyoom")
}

// overMaxMemory reports whether the backend is over maxmemory.
func (s *Server) overMaxMemory() bool {
	m, ok := s.b.(memoryLimiter)
	return ok && m.OverMaxMemory()
}

// maxMemory is the cluster's maxmemory as the backend has applied it.
func (s *Server) maxMemory() int64 {
	if m, ok := s.b.(memoryLimiter); ok {
		return m.MaxMemory()
	}
	return 0
}

// oomRefuses reports whether the command args (of cmd, which passed its
// arity check) is refused for maxmemory outside MULTI.
func (s *Server) oomRefuses(cmd *command, args [][]byte) bool {
	return denyOOM(cmd, args) && s.overMaxMemory()
}

// execOOM reports whether EXEC of the queued commands is refused for
// maxmemory: one of them is denyoom.
func (c *conn) execOOM() bool {
	for _, q := range c.tx.queued {
		if denyOOM(c.s.lookup(q[0]), q) {
			return c.s.overMaxMemory()
		}
	}
	return false
}

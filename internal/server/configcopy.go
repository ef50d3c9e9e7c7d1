package server

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/kv"
	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/storage"
	"github.com/kvorum/kvorum/internal/store"
)

// Copies of the cluster-wide parameters in every range (kv/configcopy.go,
// docs/ranges.md §2.3 row 'c'); the function libraries (row 'F',
// kv/fncopy.go) are copied the same way, by the same code (copiers). Range 1 holds the parameters; every other
// range applies with its own copy, written only by KVORUM.CONFIGCOPY
// entries of its own log, so every replica of a range encodes and notifies
// the same way at the same index (deterministic whatever order the node
// applies the ranges' logs in). The copies get there two ways:
//
//   - immediately: the node that ran a CONFIG SET (KVORUM.CONFIG SET, on
//     range 1) proposes range 1's resulting parameters to every other
//     range before it replies (copyConfigAfter), so a client that got OK
//     sees the new value in every range;
//   - eventually: range 1's leader checks every configCopyTick that each
//     range's copy is as new as range 1's and proposes the copy to any that
//     is not (configQueueLoop): a new range, or one a failed or crashed
//     CONFIG SET did not reach. Until then such a range applies with its
//     old copy (or the defaults), the same on each of its replicas.
//
// A copy is versioned by range 1's index of its last CONFIG SET and a
// range ignores one not newer than its own, so the two ways may race and
// repeat freely.

// configCopyTick is how often range 1's leader checks the ranges' copies.
var configCopyTick = time.Second

// copier is one kind of range 1 state every range keeps a versioned copy
// of: the parameters (KVORUM.CONFIGCOPY) or the function libraries
// (KVORUM.FNCOPY, kv/fncopy.go), kept the same way.
type copier struct {
	what string
	// read returns the copy command of range 1's state in r, and its
	// version.
	read func(r pebble.Reader) ([][]byte, uint64, error)
	// version returns the version of range id's copy in r.
	version func(r pebble.Reader, id storage.RangeID) (uint64, bool, error)
	// wrote reports whether args changed range 1's state (when applied
	// without error).
	wrote func(args [][]byte) bool
}

var copiers = []copier{
	{what: "the cluster parameters", read: kv.ConfigCopy, version: kv.ConfigCopyVersion, wrote: isConfigSet},
	{what: "the function libraries", read: kv.FunctionCopy, version: kv.FunctionCopyVersion, wrote: isFunctionWrite},
}

// isConfigSet reports whether args is KVORUM.CONFIG SET.
func isConfigSet(args [][]byte) bool {
	return len(args) > 2 && strings.EqualFold(string(args[0]), "kvorum.config") && strings.EqualFold(string(args[1]), "set")
}

// isFunctionWrite reports whether args is FUNCTION LOAD, DELETE, FLUSH or
// RESTORE.
func isFunctionWrite(args [][]byte) bool {
	if len(args) < 2 || !strings.EqualFold(string(args[0]), "function") {
		return false
	}
	switch strings.ToLower(string(args[1])) {
	case "load", "delete", "flush", "restore":
		return true
	}
	return false
}

// copyConfigAfter copies range 1's parameters (or libraries) to every
// other range if the run of writes cmds changed them (replies: their
// replies). A copy that fails turns the write's OK into an error saying
// so: the change is made in range 1 and reaches the range later
// (configQueueLoop), but not before the reply.
func (n *Node) copyConfigAfter(ctx context.Context, cmds [][][]byte, replies []reply.Reply) {
	if !n.multiRange() {
		return
	}
	for _, c := range copiers {
		last := -1
		for i, args := range cmds {
			if c.wrote(args) && replies[i].Kind != reply.KindError {
				last = i
			}
		}
		if last < 0 {
			continue
		}
		if e := n.copyToRanges(ctx, c); e != nil {
			replies[last] = *e
		}
	}
}

// copyToRanges proposes range 1's state of c, as this node reads it after
// a read barrier on range 1 (so it includes every write that completed
// before), to every other local range, in parallel.
func (n *Node) copyToRanges(ctx context.Context, c copier) *reply.Reply {
	// The copies run with the client's context (its deadline): asUser
	// leaves internal commands unwrapped, so they are not checked against
	// the client's ACL user (TestRangesConfigCopyNotAsUser).
	r1 := n.store.Replica(firstRange)
	if e := n.readBarrierOn(ctx, r1); e != nil {
		return e
	}
	args, _, err := n.readCopy(c)
	if err != nil {
		e := reply.Error("ERR reading " + c.what + " to copy to every range: " + err.Error())
		return &e
	}
	var failed *reply.Reply
	var mu sync.Mutex
	// A split of a range in flight may apply before the copy in its log:
	// its right-hand range then has neither the copy nor (made before it)
	// the range-local copy of it. After each round, a read barrier on
	// every range copied to makes this node apply what their logs hold up
	// to the copy (a split's new range exists here once its split entry is
	// applied, store.afterCommit), and a range that appeared is copied to
	// in the next round, until none appears.
	done := map[storage.RangeID]bool{firstRange: true}
	for {
		var todo []*store.Replica
		for _, r := range n.localReplicas() {
			if !done[r.RangeID()] {
				done[r.RangeID()] = true
				todo = append(todo, r)
			}
		}
		if len(todo) == 0 || ctx.Err() != nil {
			return failed
		}
		var wg sync.WaitGroup
		for _, r := range todo {
			wg.Add(1)
			go func(r *store.Replica) {
				defer wg.Done()
				out := make([]reply.Reply, 1)
				n.execWriteOn(ctx, r, [][][]byte{args}, out)
				if out[0].Kind == reply.KindError {
					mu.Lock()
					e := reply.Error("ERR the change is made in range 1, but copying " + c.what + " to range " + strconv.FormatUint(uint64(r.RangeID()), 10) + " failed (it is retried in the background): " + string(out[0].Str))
					failed = &e
					mu.Unlock()
					return
				}
				_ = n.readBarrierOn(ctx, r)
			}(r)
		}
		wg.Wait()
	}
}

// readCopy reads range 1's state of c and its version from one snapshot
// of the node's store.
func (n *Node) readCopy(c copier) ([][]byte, uint64, error) {
	snap := n.store.DB().NewSnapshot()
	defer snap.Close()
	return c.read(snap)
}

// configQueueLoop: while this node leads range 1 and holds several ranges,
// it proposes range 1's parameters (and libraries) to each range whose
// copy (as this node has applied it) is older than range 1's, at most one
// proposal per range and kind per tick, each bounded by the request
// timeout. A replica of that range here that lags only costs a proposal
// the range ignores (not newer).
func (n *Node) configQueueLoop() {
	defer n.bg.Done()
	base, cancelBase := n.untilStop()
	defer cancelBase()
	t := time.NewTicker(configCopyTick)
	defer t.Stop()
	for {
		select {
		case <-n.stopper:
			return
		case <-t.C:
		}
		if !n.multiRange() {
			continue
		}
		if lead, _ := n.store.Replica(firstRange).LeaderTerm(); !lead {
			continue
		}
		for _, c := range copiers {
			n.copyBehind(base, c)
		}
	}
}

// copyBehind proposes range 1's state of c to every local range whose
// copy is older.
func (n *Node) copyBehind(base context.Context, c copier) {
	args, version, err := n.readCopy(c)
	if err != nil {
		n.cfg.Logger.Warn("config queue: reading range 1's state", "what", c.what, "err", err)
		return
	}
	for _, r := range n.localReplicas() {
		if r.RangeID() == firstRange {
			continue
		}
		v, ok, err := c.version(n.store.DB(), r.RangeID())
		if err != nil {
			n.cfg.Logger.Warn("config queue: reading a range's copy", "what", c.what, "range", r.RangeID(), "err", err)
			continue
		}
		if ok && v >= version {
			continue
		}
		ctx, cancel := context.WithTimeout(base, n.cfg.RequestTimeout)
		out := make([]reply.Reply, 1)
		n.execWriteOn(ctx, r, [][][]byte{args}, out)
		cancel()
		if out[0].Kind == reply.KindError {
			n.cfg.Logger.Warn("config queue: copying to a range", "what", c.what, "range", r.RangeID(), "version", version, "err", string(out[0].Str))
		} else {
			n.cfg.Logger.Info("config queue: copied to a range", "what", c.what, "range", r.RangeID(), "version", version, "had", v, "had_copy", ok)
		}
	}
}

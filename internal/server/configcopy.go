package server

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kvorum/kvorum/internal/kv"
	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/store"
)

// Copies of the cluster-wide parameters in every range (kv/configcopy.go,
// docs/ranges.md §2.3 row 'c'). Range 1 holds the parameters; every other
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

// isConfigSet reports whether args is KVORUM.CONFIG SET.
func isConfigSet(args [][]byte) bool {
	return len(args) > 2 && strings.EqualFold(string(args[0]), "kvorum.config") && strings.EqualFold(string(args[1]), "set")
}

// copyConfigAfter copies range 1's parameters to every other range if the
// run of writes cmds set any (replies: their replies). A copy that fails
// turns the SET's OK into an error saying so: the value is set in range 1
// and reaches the range later (configQueueLoop), but not before the reply.
func (n *Node) copyConfigAfter(ctx context.Context, cmds [][][]byte, replies []reply.Reply) {
	if !n.multiRange() {
		return
	}
	set := -1
	for i, args := range cmds {
		if isConfigSet(args) && replies[i].Kind != reply.KindError {
			set = i
		}
	}
	if set < 0 {
		return
	}
	if e := n.copyConfig(ctx); e != nil {
		replies[set] = *e
	}
}

// copyConfig proposes range 1's parameters, as this node reads them after
// a read barrier on range 1 (so they include every SET that completed
// before), to every other local range, in parallel.
func (n *Node) copyConfig(ctx context.Context) *reply.Reply {
	r1 := n.store.Replica(firstRange)
	if e := n.readBarrierOn(ctx, r1); e != nil {
		return e
	}
	args, _, err := n.readConfigCopy()
	if err != nil {
		e := reply.Error("ERR reading the cluster parameters to copy to every range: " + err.Error())
		return &e
	}
	var failed *reply.Reply
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, r := range n.localReplicas() {
		if r.RangeID() == firstRange {
			continue
		}
		wg.Add(1)
		go func(r *store.Replica) {
			defer wg.Done()
			out := make([]reply.Reply, 1)
			n.execWriteOn(ctx, r, [][][]byte{args}, out)
			if out[0].Kind == reply.KindError {
				mu.Lock()
				e := reply.Error("ERR the parameter is set in range 1, but copying it to range " + strconv.FormatUint(uint64(r.RangeID()), 10) + " failed (it is retried in the background): " + string(out[0].Str))
				failed = &e
				mu.Unlock()
			}
		}(r)
	}
	wg.Wait()
	return failed
}

// readConfigCopy reads range 1's parameters and their version from one
// snapshot of the node's store (kv.ConfigCopy).
func (n *Node) readConfigCopy() ([][]byte, uint64, error) {
	snap := n.store.DB().NewSnapshot()
	defer snap.Close()
	return kv.ConfigCopy(snap)
}

// configQueueLoop: while this node leads range 1 and holds several ranges,
// it proposes range 1's parameters to each range whose copy (as this node
// has applied it) is older than range 1's, at most one proposal per range
// per tick, each bounded by the request timeout. A replica of that range
// here that lags only costs a proposal the range ignores (not newer).
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
		args, version, err := n.readConfigCopy()
		if err != nil {
			n.cfg.Logger.Warn("config queue: reading range 1's parameters", "err", err)
			continue
		}
		for _, r := range n.localReplicas() {
			if r.RangeID() == firstRange {
				continue
			}
			v, ok, err := kv.ConfigCopyVersion(n.store.DB(), r.RangeID())
			if err != nil {
				n.cfg.Logger.Warn("config queue: reading a range's copy", "range", r.RangeID(), "err", err)
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
				n.cfg.Logger.Warn("config queue: copying the parameters to a range", "range", r.RangeID(), "version", version, "err", string(out[0].Str))
			} else {
				n.cfg.Logger.Info("config queue: copied the parameters to a range", "range", r.RangeID(), "version", version, "had", v, "had_copy", ok)
			}
		}
	}
}

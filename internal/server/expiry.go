package server

import (
	"context"
	"time"

	"github.com/kvorum/kvorum/internal/kv"
	"github.com/kvorum/kvorum/internal/slot"
	"github.com/kvorum/kvorum/internal/storage"
	"github.com/kvorum/kvorum/internal/store"
)

// expiryInterval is how often the leader looks for expired keys to delete.
// Expired keys are invisible to reads at once; this only reclaims space.
const expiryInterval = time.Second

// untilStop returns a context cancelled when the node stops (or when
// cancel is called), for the proposals of background loops.
func (n *Node) untilStop() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-n.stopper:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// expiryBatch bounds the leases expired per proposal (lock.go).
const expiryBatch = 256

// keyExpiryBatch bounds the keys deleted per proposal. They come from the
// per-slot expiry index (kv.Deadlines.Due), which holds only keys with a
// deadline: a sweep reads nothing but the keys it deletes, in the slots
// whose earliest deadline has passed.
const keyExpiryBatch = 256

// keyExpiryRounds bounds the proposals per range and tick: while every
// read fills a batch (many keys expire at once), the next one runs in the
// same tick.
const keyExpiryRounds = 8

// expiryLoop runs on every node; it acts only while this node leads. It
// proposes KVORUM.DELEXPIRED, which deletes a key only if its deadline has
// passed at apply time (so a TTL extended meanwhile wins).
func (n *Node) expiryLoop() {
	defer n.bg.Done()
	// Stop waits for this loop before it closes the DB: a proposal in
	// flight is cancelled when the node stops.
	base, cancelBase := n.untilStop()
	defer cancelBase()
	t := time.NewTicker(expiryInterval)
	defer t.Stop()
	for {
		select {
		case <-n.stopper:
			return
		case <-t.C:
		}
		n.sweepExpired(base)
	}
}

// sweepExpired is one tick of expiryLoop: for every range whose local
// replica leads, it proposes to that range the deletion of its keys whose
// deadline has passed, found in the range's slots whose earliest deadline
// is due (the node's kv.Deadlines), and KVORUM.TOMBGC when the range's
// tombstone floor is old. Each range's hidden keys are its own
// (docs/ranges.md §2.3), so each is swept alone.
func (n *Node) sweepExpired(base context.Context) {
	for _, r := range n.localReplicas() {
		if _, local := r.Leader(); !local {
			continue
		}
		d := r.Descriptor()
		n.collectTombs(base, r)
		n.expireRange(base, r, d)
	}
}

// rangeSlots is the slot interval of d (the whole slot space for a
// descriptor without one).
func rangeSlots(d *storage.Descriptor) (lo, hi uint16) {
	if d == nil || d.IsFull() {
		return 0, slot.Count
	}
	return d.StartSlot, d.EndSlot
}

// expireRange proposes KVORUM.DELEXPIRED to r for the due keys of its
// slots, at most keyExpiryRounds proposals. It returns the number of
// slots it sought (for tests).
func (n *Node) expireRange(base context.Context, r *store.Replica, d *storage.Descriptor) (visited int) {
	lo, hi := rangeSlots(d)
	for round := 0; round < keyExpiryRounds; round++ {
		keys, v, err := n.machine.deadlines.Due(n.store.DB(), lo, hi, n.cfg.Now(), keyExpiryBatch)
		visited += v
		if err != nil {
			n.cfg.Logger.Warn("expiry scan", "range", r.RangeID(), "err", err)
			return visited
		}
		if len(keys) == 0 {
			return visited
		}
		ctx, cancel := context.WithTimeout(base, n.cfg.RequestTimeout)
		_, err = r.Propose(ctx, [][][]byte{append([][]byte{[]byte("KVORUM.DELEXPIRED")}, keys...)})
		cancel()
		if err != nil {
			n.cfg.Logger.Debug("expiry proposal", "range", r.RangeID(), "err", err)
			return visited
		}
		if len(keys) < keyExpiryBatch {
			return visited
		}
	}
	return visited
}

// collectTombs proposes KVORUM.TOMBGC to r when the leader's clock has
// entered a new tombstone epoch past r's floor (kv/tomb.go): once every
// ten minutes per range.
func (n *Node) collectTombs(base context.Context, r *store.Replica) {
	if due, err := kv.TombGCDueIn(n.store.DB(), r.RangeID(), n.cfg.Now()); err != nil || !due {
		return
	}
	ctx, cancel := context.WithTimeout(base, n.cfg.RequestTimeout)
	defer cancel()
	if _, err := r.Propose(ctx, [][][]byte{{[]byte("KVORUM.TOMBGC")}}); err != nil {
		n.cfg.Logger.Debug("tombstone collection", "range", r.RangeID(), "err", err)
	}
}

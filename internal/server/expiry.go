package server

import (
	"context"
	"slices"
	"time"

	"github.com/kvorum/kvorum/internal/kv"
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
// expiry index (kv.ExpiredKeys), which holds only keys with a deadline,
// earliest first: a sweep reads nothing but the keys it deletes.
const keyExpiryBatch = 256

// keyExpiryRounds bounds the proposals per tick: while every read fills a
// batch (many keys expire at once), the next one runs in the same tick.
// The same bound holds for the entries that build the expiry index of a
// store written by an older kvorum (kv.ExpiryIndexBuilt).
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
// deadline has passed. KVORUM.TOMBGC and the build of the expiry index of
// an older store (KVORUM.TTLINDEX) go to range 1, as the hidden keys they
// maintain are still one copy for the whole store (docs/ranges.md §2.3).
func (n *Node) sweepExpired(base context.Context) {
	r1 := n.store.Replica(firstRange)
	_, lead1 := r1.Leader()
	multi := n.multiRange()
	if !multi && !lead1 {
		return
	}
	var leading []*store.Replica
	if multi {
		for _, r := range n.localReplicas() {
			if _, local := r.Leader(); local {
				leading = append(leading, r)
			}
		}
		if len(leading) == 0 {
			return
		}
	}
	built, err := kv.ExpiryIndexBuilt(n.store.DB())
	if err != nil {
		n.cfg.Logger.Warn("expiry index", "err", err)
		return
	}
	if lead1 {
		n.collectTombs(base)
	}
	if !built {
		if lead1 {
			n.buildExpiryIndex(base, r1)
		}
		return
	}
	limit := keyExpiryBatch
	if multi {
		// The index holds every range's keys, earliest first: read past
		// those of the ranges led elsewhere.
		limit *= n.store.ReplicaCount()
	}
	for round := 0; round < keyExpiryRounds; round++ {
		keys, err := kv.ExpiredKeys(n.store.DB(), n.cfg.Now(), limit)
		if err != nil {
			n.cfg.Logger.Warn("expiry scan", "err", err)
			return
		}
		if len(keys) == 0 {
			return
		}
		var cmds [][][]byte
		var reps []*store.Replica
		if !multi {
			cmds, reps = [][][]byte{append([][]byte{[]byte("KVORUM.DELEXPIRED")}, keys...)}, []*store.Replica{r1}
		} else {
			for _, k := range keys {
				r := n.replicaForKey(k)
				if !slices.Contains(leading, r) {
					continue
				}
				i := slices.Index(reps, r)
				if i < 0 {
					i = len(reps)
					reps = append(reps, r)
					cmds = append(cmds, [][]byte{[]byte("KVORUM.DELEXPIRED")})
				}
				cmds[i] = append(cmds[i], k)
			}
		}
		for i, r := range reps {
			ctx, cancel := context.WithTimeout(base, n.cfg.RequestTimeout)
			_, err := r.Propose(ctx, cmds[i:i+1])
			cancel()
			if err != nil {
				n.cfg.Logger.Debug("expiry proposal", "err", err)
				return
			}
		}
		if len(keys) < limit || len(reps) == 0 {
			return
		}
	}
}

// buildExpiryIndex proposes KVORUM.TTLINDEX to r (range 1) until the
// index of a store written by an older kvorum is built, at most
// keyExpiryRounds entries a tick.
func (n *Node) buildExpiryIndex(base context.Context, r *store.Replica) {
	for round := 0; round < keyExpiryRounds; round++ {
		ctx, cancel := context.WithTimeout(base, n.cfg.RequestTimeout)
		replies, err := r.Propose(ctx, [][][]byte{{[]byte("KVORUM.TTLINDEX")}})
		cancel()
		if err != nil {
			n.cfg.Logger.Debug("expiry proposal", "err", err)
			return
		}
		// 0: this entry found the index built (or finished it).
		if len(replies) == 1 && replies[0].Int == 0 {
			return
		}
	}
}

// collectTombs proposes KVORUM.TOMBGC when the leader's clock has
// entered a new tombstone epoch (kv/tomb.go): once every ten minutes.
func (n *Node) collectTombs(base context.Context) {
	if due, err := kv.TombGCDue(n.store.DB(), n.cfg.Now()); err != nil || !due {
		return
	}
	ctx, cancel := context.WithTimeout(base, n.cfg.RequestTimeout)
	defer cancel()
	if _, err := n.store.Replica(firstRange).Propose(ctx, [][][]byte{{[]byte("KVORUM.TOMBGC")}}); err != nil {
		n.cfg.Logger.Debug("tombstone collection", "err", err)
	}
}

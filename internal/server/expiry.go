package server

import (
	"context"
	"time"

	"github.com/kvorum/kvorum/internal/kv"
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
		r := n.store.Replica(firstRange)
		if _, local := r.Leader(); !local {
			continue
		}
		built, err := kv.ExpiryIndexBuilt(n.store.DB())
		if err != nil {
			n.cfg.Logger.Warn("expiry index", "err", err)
			continue
		}
		n.collectTombs(base)
		for round := 0; round < keyExpiryRounds; round++ {
			cmd := [][]byte{[]byte("KVORUM.TTLINDEX")}
			if built {
				keys, err := kv.ExpiredKeys(n.store.DB(), n.cfg.Now(), keyExpiryBatch)
				if err != nil {
					n.cfg.Logger.Warn("expiry scan", "err", err)
					break
				}
				if len(keys) == 0 {
					break
				}
				cmd = append([][]byte{[]byte("KVORUM.DELEXPIRED")}, keys...)
			}
			ctx, cancel := context.WithTimeout(base, n.cfg.RequestTimeout)
			replies, err := r.Propose(ctx, [][][]byte{cmd})
			cancel()
			if err != nil {
				n.cfg.Logger.Debug("expiry proposal", "err", err)
				break
			}
			if !built {
				// 0: this entry found the index built (or finished it).
				if len(replies) == 1 && replies[0].Int == 0 {
					break
				}
				continue
			}
			if len(cmd)-1 < keyExpiryBatch {
				break
			}
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

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

// keyExpiryBatch bounds the keys deleted per proposal, and so the records a
// scan reads (kv.ExpiredKeys: at most 64 times as many). A scan reads every
// record with its value through the block cache: at 256 (16,384 records,
// ~16 MiB of blocks a second on 1 KiB values) it took 9 % of a leader's CPU
// under a read-only load with no TTL at all, and kept evicting the hot
// blocks from the 32 MiB cache.
const keyExpiryBatch = 32

// keyExpiryRounds bounds the proposals per tick: while every scan fills a
// batch (many keys expire at once), the next one runs in the same tick.
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
	var cursor []byte
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
		for round := 0; round < keyExpiryRounds; round++ {
			keys, next, err := kv.ExpiredKeys(n.store.DB(), cursor, n.cfg.Now(), keyExpiryBatch)
			if err != nil {
				n.cfg.Logger.Warn("expiry scan", "err", err)
				break
			}
			cursor = next
			if len(keys) == 0 {
				break
			}
			cmd := append([][]byte{[]byte("KVORUM.DELEXPIRED")}, keys...)
			ctx, cancel := context.WithTimeout(base, n.cfg.RequestTimeout)
			_, err = r.Propose(ctx, [][][]byte{cmd})
			cancel()
			if err != nil {
				n.cfg.Logger.Debug("expiry proposal", "err", err)
				break
			}
			if len(keys) < keyExpiryBatch {
				break
			}
		}
	}
}

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

// expiryBatch bounds the keys deleted per proposal.
const expiryBatch = 256

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
		keys, next, err := kv.ExpiredKeys(n.store.DB(), cursor, n.cfg.Now(), expiryBatch)
		if err != nil {
			n.cfg.Logger.Warn("expiry scan", "err", err)
			continue
		}
		cursor = next
		if len(keys) == 0 {
			continue
		}
		cmd := append([][]byte{[]byte("KVORUM.DELEXPIRED")}, keys...)
		ctx, cancel := context.WithTimeout(base, n.cfg.RequestTimeout)
		_, err = r.Propose(ctx, [][][]byte{cmd})
		cancel()
		if err != nil {
			n.cfg.Logger.Debug("expiry proposal", "err", err)
		}
	}
}

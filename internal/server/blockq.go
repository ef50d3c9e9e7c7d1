package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvorum/kvorum/internal/kv"
	"github.com/kvorum/kvorum/internal/reply"
)

// Blocked pops served in order: the node's side of kv's wait queues (see
// kv/blockq.go). Each blocked list or sorted-set pop is a wait with an id
// (node, boot, sequence); every attempt is a KVORUM.BLOCK of that id,
// proposed together with a KVORUM.ALIVE of the node (so the wait is live
// when it joins a queue); while the node has waits it renews ALIVE every
// second; a wait that ends without a pop leaves its queues with
// KVORUM.UNBLOCK, proposed in the background (retried until it applies).

// blockQueues is the node's part of the wait queues.
type blockQueues struct {
	boot   uint64        // this process's id among the node's boots
	seq    atomic.Uint64 // wait ids
	active atomic.Int64  // waits that may be in a queue
	mu     sync.Mutex
	gone   [][][]byte // KVORUM.UNBLOCK commands to propose
}

func newBlockQueues() *blockQueues { return &blockQueues{boot: rand.Uint64() | 1} }

func (n *Node) aliveCmd() [][]byte {
	node := binary.BigEndian.AppendUint64(nil, n.cfg.ID)
	return [][]byte{[]byte("KVORUM.ALIVE"), node, binary.BigEndian.AppendUint64(nil, n.bq.boot)}
}

// execQueuedPop runs a blocking pop as a wait in its keys' queues.
func (n *Node) execQueuedPop(parent context.Context, args [][]byte, deadline <-chan time.Time, keys [][]byte) reply.Reply {
	id := kv.WaiterID(n.cfg.ID, n.bq.boot, n.bq.seq.Add(1))
	cmds := [][][]byte{n.aliveCmd(), append([][]byte{[]byte("KVORUM.BLOCK"), id}, args...)}
	n.bq.active.Add(1)
	defer n.bq.active.Add(-1)
	out := make([]reply.Reply, 2)
	for {
		// Register before trying, so a push applied between the try and
		// the wait is not missed.
		wt := n.waiters.add(keys)
		ctx, cancel := context.WithTimeout(parent, n.cfg.RequestTimeout)
		n.execWrite(ctx, cmds, out)
		cancel()
		r := out[1]
		yield := r.Kind == reply.KindStatus && string(r.Str) == kv.BlockYield
		if !yield && !isNullReply(r) {
			n.waiters.remove(wt)
			if r.Kind == reply.KindError {
				n.leaveQueues(id, args) // it may have joined them before
			}
			return r
		}
		// A blocked XREADGROUP without COUNT is served with COUNT 1000.
		args = kv.XReadGroupRetry(args)
		cmds[1] = append([][]byte{[]byte("KVORUM.BLOCK"), id}, args...)
		var retry <-chan time.Time
		var t *time.Timer
		if yield { // data it may not take yet: try again in a while even if nothing is written
			t = time.NewTimer(time.Second)
			retry = t.C
		}
		r, done := n.awaitWrite(parent, wt, deadline, retry, kv.BlockingNull(args))
		n.waiters.remove(wt)
		if t != nil {
			t.Stop()
		}
		if done {
			n.leaveQueues(id, args)
			return r
		}
	}
}

// leaveQueues has wait id of the blocking pop args leave its keys'
// queues, in the background (args are copied: they point into the
// client's read buffer, which the next command overwrites).
func (n *Node) leaveQueues(id []byte, args [][]byte) {
	cmd := [][]byte{[]byte("KVORUM.UNBLOCK"), id}
	for _, a := range args {
		cmd = append(cmd, bytes.Clone(a))
	}
	n.bq.mu.Lock()
	n.bq.gone = append(n.bq.gone, cmd)
	n.bq.mu.Unlock()
	select {
	case n.bqKick <- struct{}{}:
	default:
	}
}

// blockQueueLoop renews the node's ALIVE every second while it has waits
// and proposes the UNBLOCKs of waits that ended.
func (n *Node) blockQueueLoop() {
	defer n.bg.Done()
	base, cancelBase := n.untilStop()
	defer cancelBase()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		tick := false
		select {
		case <-n.stopper:
			return
		case <-t.C:
			tick = true
		case <-n.bqKick:
		}
		n.bq.mu.Lock()
		cmds := n.bq.gone
		n.bq.gone = nil
		n.bq.mu.Unlock()
		if tick && n.bq.active.Load() > 0 {
			cmds = append(cmds, n.aliveCmd())
		}
		if len(cmds) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(base, n.cfg.RequestTimeout)
		out := make([]reply.Reply, len(cmds))
		n.execWrite(ctx, cmds, out)
		cancel()
		var again [][][]byte
		for i, r := range out {
			if r.Kind == reply.KindError && string(cmds[i][0]) == "KVORUM.UNBLOCK" {
				again = append(again, cmds[i]) // not applied (or unknown): try again
			}
		}
		if len(again) > 0 {
			n.bq.mu.Lock()
			n.bq.gone = append(again, n.bq.gone...)
			n.bq.mu.Unlock()
		}
	}
}

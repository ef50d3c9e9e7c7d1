package server

import (
	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/kv"
	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/storage"
	"github.com/kvorum/kvorum/internal/store"
)

// Effects of the applied log, and where the node acts on them.
//
// kv.Apply returns a command's reply and appends everything else the
// command did, besides writing the batch, to a kv.Effects: keys written,
// messages published, leases renewed or gone. kvMachine gives every
// command of a Ready round the same kv.Effects and hands it to the store
// at the end of the round (TakeEffects); the store passes it back on
// Store.Effects once the round's batch is committed, and effectsLoop acts
// on it in one place (actOn). So a blocked client is woken, and a message
// reaches this node's subscribers, only once the round that produced it
// is committed and readable; messages are delivered in log order. The
// kv.Effects then goes back to kvMachine for a later round: in steady
// state nothing is allocated for it.

// kvMachine is package kv as the store's state machine. The Ready loop is
// its only caller.
type kvMachine struct {
	fx   *kv.Effects      // the round being applied; nil: take one from free
	free chan *kv.Effects // records effectsLoop is done with
}

func newKVMachine() *kvMachine {
	return &kvMachine{free: make(chan *kv.Effects, 4)}
}

func (m *kvMachine) Apply(b *pebble.Batch, args [][]byte, env store.ApplyEnv) reply.Reply {
	if m.fx == nil {
		select {
		case m.fx = <-m.free:
		default:
			m.fx = new(kv.Effects)
		}
	}
	return kv.Apply(b, args, kv.Env{Now: env.Now, Index: env.Index, Seq: env.Seq, Effects: m.fx})
}

// TakeEffects hands the round's record to the store (nil if it is empty:
// it is then kept for the next round).
func (m *kvMachine) TakeEffects() store.Effects {
	if m.fx.Empty() {
		return nil
	}
	fx := m.fx
	m.fx = nil
	return fx
}

// recycle returns a record the node has acted on, for a later round.
func (m *kvMachine) recycle(fx *kv.Effects) {
	fx.Reset()
	select {
	case m.free <- fx:
	default: // enough spares
	}
}

func (*kvMachine) Span(*storage.Descriptor) (start, end []byte) {
	// One range covers the whole keyspace for now; with many ranges this
	// becomes the storage encoding of [StartKey, EndKey).
	return kv.UserSpan()
}

// effectsLoop acts on each committed round's effects, in log order, until
// the store stops (and closes committed).
func (n *Node) effectsLoop(committed <-chan store.Effects) {
	defer n.wg.Done()
	for e := range committed {
		fx := e.(*kv.Effects)
		n.actOn(fx)
		n.machine.recycle(fx)
	}
}

// actOn is the one place where the node acts on what the applied log did,
// once it is committed: it wakes the clients blocked on the keys written
// (BLPOP, XREAD BLOCK, LOCK ACQUIRE on a lock's wait key; they read the
// result from the DB), hands the messages published to this node's
// subscribers (resp.Server.Deliver; never blocks on a client) and notes
// lease renewals for the leader's expiry timer. It never waits for the
// store, so the Ready loop never waits for it for long.
func (n *Node) actOn(fx *kv.Effects) {
	n.waiters.wake(fx.Written)
	for _, m := range fx.Published {
		n.resp.Deliver(m.Shard, m.Channel, m.Payload)
	}
	for _, l := range fx.Leases {
		n.leases.observe(l.ID, l.RenewIdx, l.TTLMs)
	}
}

// publishReplies decides the reply of each PUBLISH and SPUBLISH among
// cmds, a run of writes this node executed for a client, top level or
// queued in a transaction: the number of this node's subscribers the
// message reaches (as Redis Cluster does), counted when the reply is
// ready. This is the only place the count is decided: the apply, which
// runs on every replica, replies 0, and a node's subscribers are its own.
// A script's redis.call('publish', ...) keeps the apply's 0.
func (n *Node) publishReplies(cmds [][][]byte, replies []reply.Reply) {
	kv.ForEachPublish(cmds, replies, func(shard bool, channel []byte, r *reply.Reply) {
		*r = reply.Int(n.resp.Receivers(shard, channel))
	})
}

package server

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/kv"
	"github.com/kvorum/kvorum/internal/reccache"
	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/script"
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
	fx *roundEffects // the round being applied; nil: take one from free
	// scripts records the scripts running on this node, at apply time and
	// on the read path (SCRIPT KILL, the BUSY reply, FUNCTION STATS).
	scripts script.Monitor
	free    chan *roundEffects // records effectsLoop is done with
	// taken is the log index of the newest round whose effects were
	// handed to the store; delivered (effectsLoop) catches up with it.
	taken atomic.Uint64
	// records spares write commands a search of the store for the record
	// they replace (package reccache); only Apply uses it.
	records *reccache.Cache
	// shared is the read path's record cache (nil: none), which records
	// publishes each round's writes to (Committed).
	shared *reccache.Shared
	// settings is the cluster-wide parameters (notify-keyspace-events)
	// as range 1's applied log has set them (the node's maxmemory and
	// keymiss checks read it); rangeSettings is every other range's, as
	// its own log has set its copy (kv/configcopy.go): an Apply of range R
	// uses only R's, so that it is deterministic. The Ready loop alone
	// touches rangeSettings.
	settings      kv.Settings
	rangeSettings map[storage.RangeID]*kv.Settings
	// maxMem is maxmemory as the applied log has set it, for other
	// goroutines; maxMemKnown: the settings were loaded once.
	maxMem      atomic.Int64
	maxMemKnown atomic.Bool
	// stats is the node's INFO counters (backend.go).
	stats nodeStats
	// acl is the node's ACL users, rebuilt when an entry changes them
	// (acl.go); db is where they are read again after a snapshot.
	acl *aclUsers
	db  *pebble.DB
	// deadlines is each hash slot's earliest expiry deadline, which the
	// applied entries lower and the sweeper reads and refreshes
	// (kv.Deadlines: safe for both goroutines).
	deadlines *kv.Deadlines
}

// roundEffects is one Ready round's effects and the index of its last
// entry that had any.
type roundEffects struct {
	kv.Effects
	index uint64
}

// newKVMachine returns the state machine with a record cache of at most
// records keys (Config.RecordCache) and a read cache of readCache bytes
// (Config.ReadCache; too small: none).
func newKVMachine(records int, readCache int64) *kvMachine {
	m := &kvMachine{free: make(chan *roundEffects, 4), records: reccache.New(records), shared: reccache.NewShared(readCache), deadlines: kv.NewDeadlines()}
	if m.shared != nil {
		m.records.Share(m.shared)
	}
	return m
}

func (m *kvMachine) Apply(b *pebble.Batch, args [][]byte, env store.ApplyEnv) reply.Reply {
	if m.fx == nil {
		select {
		case m.fx = <-m.free:
		default:
			m.fx = new(roundEffects)
		}
	}
	m.fx.index = env.Index
	settings := m.settingsOf(env.Range)
	r := kv.Apply(b, args, kv.Env{Now: env.Now, Index: env.Index, Seq: env.Seq, Effects: &m.fx.Effects, Records: m.records, Settings: settings,
		Scripts: &m.scripts, Perms: m.perms(), CountLookups: env.Leader, Desc: env.Desc, Deadlines: m.deadlines})
	if v, ok := m.settings.MaxMemory(); ok && settings == &m.settings {
		m.maxMem.Store(v) // for the maxmemory guard (maxmemory.go)
		m.maxMemKnown.Store(true)
	}
	if m.acl != nil && r.Kind != reply.KindError {
		if lines, ok := kv.ACLSetLines(args); ok {
			m.acl.sync(env.Index, lines) // acl.go: from this index on
		}
	}
	return r
}

// settingsOf returns range id's Settings (range 1's for id 0 or 1).
func (m *kvMachine) settingsOf(id storage.RangeID) *kv.Settings {
	if id <= firstRange {
		return &m.settings
	}
	s := m.rangeSettings[id]
	if s == nil {
		if m.rangeSettings == nil {
			m.rangeSettings = make(map[storage.RangeID]*kv.Settings)
		}
		s = new(kv.Settings)
		m.rangeSettings[id] = s
	}
	return s
}

// SplitCopy gives the right-hand range of a split what kv adds to the
// range-local copy (store.SplitCopier: range 1's function libraries).
func (m *kvMachine) SplitCopy(b *pebble.Batch, lhs, rhs storage.RangeID) error {
	return kv.SplitCopy(b, lhs, rhs)
}

// perms checks the calls of scripts run for a user (nil: none).
func (m *kvMachine) perms() kv.Permissions {
	if m.acl == nil {
		return nil
	}
	return m.acl
}

// Replaced: a snapshot replaces the span of a range (the whole keyspace
// when one range covers it). The slots' earliest deadlines become unknown
// once the round is committed (kv.Deadlines.Publish, in Committed). Every
// range's parameters are read again (a few keys each, at its next Apply):
// simpler than finding which range the span is, and only the replaced
// range's copy can have changed.
func (m *kvMachine) Replaced(start, end []byte) {
	m.deadlines.ResetSpan(start, end)
	m.records.Clear()
	m.settings.Reset()
	for _, s := range m.rangeSettings {
		s.Reset()
	}
	if m.acl != nil {
		m.acl.stale = true
	}
}

// Committed publishes the round's writes to the read cache, and reads the
// ACL users again after a snapshot replaced them.
func (m *kvMachine) Committed() {
	m.records.Publish()
	m.deadlines.Publish()
	if m.acl != nil && m.acl.stale {
		m.acl.stale = false
		if err := m.acl.load(m.db); err != nil {
			m.acl.log.Error("reading the ACL users after a snapshot failed; the previous users stay", "err", err)
		}
	}
}

// TakeEffects hands the round's record to the store (nil if it is empty:
// it is then kept for the next round).
func (m *kvMachine) TakeEffects() store.Effects {
	if m.fx == nil || m.fx.Empty() {
		return nil
	}
	fx := m.fx
	m.fx = nil
	m.taken.Store(fx.index)
	return fx
}

// recycle returns a record the node has acted on, for a later round.
func (m *kvMachine) recycle(fx *roundEffects) {
	fx.Reset()
	fx.index = 0
	select {
	case m.free <- fx:
	default: // enough spares
	}
}

func (*kvMachine) Span(d *storage.Descriptor) (start, end []byte) {
	if d == nil || d.IsFull() {
		// One range covers the whole keyspace (the default).
		return kv.UserSpan()
	}
	if d.StartSlot >= d.EndSlot {
		// No slots: a replica created for the snapshot of a range this
		// node missed the split of, before the snapshot installs. The
		// snapshot's install deletes this span: nothing.
		start, _ = kv.SlotSpan(0, 1)
		return start, start
	}
	// One of several ranges: user keys are stored slot first, so its
	// slots' keys (with their per-slot hidden keys) are one span; its
	// per-range counters travel separately (storage.EmitRange). Range 1,
	// whose interval starts at slot 0, also carries the global hidden
	// keys just before it: leases, locks, config, scripts, functions. The
	// expiry index is per slot (kv/expiry.go), in the slots' span.
	start, end = kv.SlotSpan(d.StartSlot, d.EndSlot)
	if d.RangeID == firstRange && d.StartSlot == 0 {
		start, _ = kv.UserSpan()
	}
	return start, end
}

// effectsLoop acts on each committed round's effects, in log order, until
// the store stops (and closes committed).
func (n *Node) effectsLoop(committed <-chan store.Effects) {
	defer n.wg.Done()
	for e := range committed {
		fx := e.(*roundEffects)
		n.actOn(&fx.Effects)
		n.delivered.advance(fx.index)
		n.machine.recycle(fx)
	}
}

// progress is a log index that only grows, with a way to wait for it.
// The wake channel is made only when someone waits, so advancing it on
// every round allocates nothing while nobody does.
type progress struct {
	mu   sync.Mutex
	idx  uint64
	wake chan struct{} // closed when idx grows; nil: nobody waits
}

func newProgress() *progress { return &progress{} }

func (p *progress) advance(idx uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if idx > p.idx {
		p.idx = idx
		if p.wake != nil {
			close(p.wake)
			p.wake = nil
		}
	}
}

// wait returns once idx is reached, or false when ctx or stop ends first.
func (p *progress) wait(ctx context.Context, stop <-chan struct{}, idx uint64) bool {
	for {
		p.mu.Lock()
		if p.idx >= idx {
			p.mu.Unlock()
			return true
		}
		if p.wake == nil {
			p.wake = make(chan struct{})
		}
		wake := p.wake
		p.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return false
		case <-stop:
			return false
		}
	}
}

// actOn is the one place where the node acts on what the applied log did,
// once it is committed: it wakes the clients blocked on the keys written
// (BLPOP, XREAD BLOCK, LOCK ACQUIRE on a lock's wait key; they read the
// result from the DB), hands the messages published to this node's
// subscribers (resp.Server.Deliver; never blocks on a client) and notes
// lease renewals for the leader's expiry timer, and counts what INFO
// reports (keys changed, keys expired). It never waits for the
// store, so the Ready loop never waits for it for long.
func (n *Node) actOn(fx *kv.Effects) {
	n.machine.stats.applied(fx, n.store.Replica(firstRange).SavedAt())
	if l := fx.Looked; l.Hits+l.Misses > 0 {
		// Read lookups made at apply: counted by the leader, which
		// computes the replies of the entries it applies (a follower that
		// forwarded the command gets its reply from there).
		if _, leads := n.store.Replica(firstRange).Leader(); leads {
			n.machine.stats.hits.Add(l.Hits)
			n.machine.stats.misses.Add(l.Misses)
		}
	}
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
//
// It first lets this node deliver what the log has committed so far, its
// own messages included, so that a client subscribed to the channel it
// publishes to (RESP3) gets the message before the reply, as from Redis.
func (n *Node) publishReplies(ctx context.Context, cmds [][][]byte, replies []reply.Reply) {
	waited := false
	kv.ForEachPublish(cmds, replies, func(shard bool, channel []byte, r *reply.Reply) {
		if !waited {
			waited = true
			n.delivered.wait(ctx, n.stopper, n.machine.taken.Load())
		}
		*r = reply.Int(n.resp.Receivers(shard, channel))
	})
}

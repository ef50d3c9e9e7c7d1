package store

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/slot"
	"github.com/kvorum/kvorum/internal/storage"
)

// Transport is what the store needs from the peer transport.
type Transport interface {
	// Send sends each message to its destination's replica of the
	// message's range.
	Send(msgs []RaftMessage)
	SetPeer(id uint64, addr string)
	RemovePeer(id uint64)
}

// RaftMessage is a Raft message and the range it belongs to (see
// storage.RaftMessage, where it is defined so that the transport can carry
// it without importing store).
type RaftMessage = storage.RaftMessage

// Config configures a Store.
type Config struct {
	NodeID storage.NodeID
	DB     *pebble.DB
	// FS and Dir locate the directory where incoming snapshots are staged.
	FS  vfs.FS
	Dir string

	Transport Transport

	// TickInterval is the period of the Raft logical clock. Zero means no
	// ticker goroutine: the owner advances the clock by calling Tick
	// (deterministic tests do).
	TickInterval   time.Duration
	ElectionTicks  int
	HeartbeatTicks int
	// SnapshotThreshold: the log is truncated once it holds more than this
	// many applied entries.
	SnapshotThreshold uint64
	// LogBytes is the log's byte budget: once the entries applied since
	// the last truncation hold more than this, the log is truncated down
	// to the newest quarter of it (logtrunc.go). Default DefaultLogBytes;
	// negative: entries are counted only.
	LogBytes int
	// MaxInflightBytes bounds unacknowledged MsgApp bytes per follower.
	MaxInflightBytes uint64

	// StateMachine applies committed commands. Required.
	StateMachine StateMachine

	Logger  *slog.Logger
	Metrics *Metrics
	// Now returns the wall clock in Unix ms; tests replace it.
	Now func() int64
	// UnsafeNoSync commits every Ready round without fsync: writes are
	// acknowledged before they are durable. Only for showing that the
	// fault suites catch lost writes; see server.Config.Unsafe.
	UnsafeNoSync bool
	// LeaseReads lets a leader that holds a lease serve reads without a
	// ReadIndex round (see lease.go). It assumes that the nodes' clocks
	// and tickers run at rates within leaseDriftPercent of each other.
	// Needs TickInterval > 0. False: every read batch costs a ReadIndex
	// round.
	LeaseReads bool
	// DisableQuiesce keeps every range ticking (replica_quiesce.go).
	DisableQuiesce bool
}

// StateMachine is the replicated state machine the store drives (package
// kv, through the node's adapter, in production). The Ready loop is its
// only caller. Apply runs at apply time on every replica with the
// leader's timestamp and must be deterministic; it writes through b, an
// indexed batch that also carries the round's Raft state.
type StateMachine interface {
	// Apply executes one command of a committed entry; env says which.
	// What the command did besides its reply and its writes (keys written,
	// messages published, ...) the state machine records on its side,
	// for TakeEffects.
	Apply(b *pebble.Batch, args [][]byte, env ApplyEnv) reply.Reply
	// TakeEffects returns what the commands applied since the previous
	// call recorded, nil if nothing, and starts a new record. The Ready
	// loop calls it once per round after applying the round's entries
	// and hands the value out on Store.Effects once the round's batch is
	// committed (dropped if the commit fails). The store never looks
	// inside.
	TakeEffects() Effects
	// Span is the storage span holding a range's user data: what a
	// snapshot carries and replaces.
	Span(d *storage.Descriptor) (start, end []byte)
	// Replaced tells the state machine that the round being applied
	// replaces its data in [start, end) (a snapshot is installed in the
	// round's batch): whatever it keeps in memory about that data is stale.
	Replaced(start, end []byte)
	// Committed tells the state machine that the round it applied last is
	// in the store (readers of the DB see it), before any read may be
	// served at the round's applied index: what it keeps in memory for
	// readers may now show the round's writes.
	Committed()
}

// ApplyEnv is what the state machine learns about the command it applies.
type ApplyEnv struct {
	Now   int64  // the leader's clock when it proposed the entry, Unix ms
	Index uint64 // the entry's log index
	Seq   int    // the command's position within the entry
	// Leader: this replica led when the round was taken (raft's state at
	// its Ready), so the replies it computes are the ones clients get.
	Leader bool
	// Range is the range whose log holds the entry.
	Range storage.RangeID
	// Desc is the range's descriptor as the replica has it when it applies
	// the entry (after the round's earlier conf changes and snapshot):
	// the slot interval whose keys the command may touch. Shared: read
	// it, never change it.
	Desc *storage.Descriptor
}

// Effects is what one round's applies produced besides replies and
// writes, as the state machine recorded it (a *kv.Effects in production).
// Opaque to the store: it only carries the value from the round that
// produced it to the reader of Store.Effects, after the commit.
type Effects any

// effectsBacklog is how many committed rounds' effects may wait for the
// reader of Store.Effects before the Ready loop waits for it.
const effectsBacklog = 64

// Store hosts the replicas of one node.
type Store struct {
	cfg   Config
	db    *pebble.DB
	snaps *storage.SnapshotRegistry
	log   *slog.Logger

	work    chan struct{}
	stopper chan struct{}
	wg      sync.WaitGroup
	// effects carries each committed round's effects, in round order,
	// from the Ready loop to the node. Closed by Stop once the loop ended.
	effects chan Effects

	// createMu serializes creating replicas for snapshots of unknown
	// ranges and the overlap checks of received snapshots (claimSnapshot);
	// it guards placeholders.
	createMu      sync.Mutex
	placeholders  map[storage.RangeID]placeholder
	nplaceholders atomic.Int32

	mu struct {
		sync.RWMutex
		replicas map[storage.RangeID]*Replica
		// list holds the replicas too, for loops over all of them; replaced,
		// never changed in place.
		list    []*Replica
		stopped bool
	}
	// slots maps each hash slot to the local replica whose range owns it,
	// and nreplicas counts the replicas: both rebuilt under mu
	// (rebuildSlots).
	slots     atomic.Pointer[[slot.Count]*Replica]
	nreplicas atomic.Int32
	// fatal is set when persisting failed; the store then stops serving.
	fatal     chan error
	fatalOnce sync.Once
	// failed is set (after failErr) by failFatal: see fault.go.
	failed  atomic.Bool
	failErr error
	// writeGate, if set, may refuse proposals: see SetWriteGate.
	writeGate atomic.Pointer[WriteGate]
	// mono is the monotonic clock that times leases and the vote delay
	// (lease.go): time.Now, never Config.Now. Tests replace it before
	// AddReplica.
	mono func() time.Time
	// readPatience, if positive, replaces readRoundPatience (tests).
	readPatience atomic.Int64

	// sched holds the replicas with work for the Ready loop
	// (store_scheduler.go); sweepEvery is the period of Tick's safety
	// sweep in ticks (0: none; tests).
	sched      scheduler
	sweepEvery uint64
	// ticks counts Tick calls; heard.at is the tick at which each peer was
	// last heard from, peers the nodes liveness messages go to, and
	// quiescedCount the quiesced replicas (replica_quiesce.go).
	ticks atomic.Uint64
	heard struct {
		mu sync.Mutex
		at map[uint64]uint64
	}
	peers atomic.Pointer[[]uint64]
	// quiescible: the store hosts a range other than range 1; until then
	// it keeps no heard-from table.
	quiescible    atomic.Bool
	peersStale    atomic.Bool
	quiescedCount atomic.Int64
	tickedLast    atomic.Int64
}

// ErrStopped is returned for operations on a stopped store.
var ErrStopped = errors.New("store: stopped")

// New creates a store; call AddReplica for each range, then Start.
func New(cfg Config) *Store {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = func() int64 { return time.Now().UnixMilli() }
	}
	if cfg.MaxInflightBytes == 0 {
		cfg.MaxInflightBytes = 32 << 20
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	s := &Store{
		cfg:     cfg,
		db:      cfg.DB,
		snaps:   storage.NewSnapshotRegistry(cfg.StateMachine.Span),
		log:     cfg.Logger,
		work:    make(chan struct{}, 1),
		stopper: make(chan struct{}),
		effects: make(chan Effects, effectsBacklog),
		fatal:   make(chan error, 1),
		mono:    time.Now,
	}
	s.mu.replicas = map[storage.RangeID]*Replica{}
	s.sweepEvery = defaultSweepTicks
	s.heard.at = map[uint64]uint64{}
	return s
}

// DB returns the store's Pebble.
func (s *Store) DB() *pebble.DB { return s.db }

// NodeID returns the node id.
func (s *Store) NodeID() storage.NodeID { return s.cfg.NodeID }

// Effects delivers, in round order, what StateMachine.TakeEffects returned
// for each Ready round, once that round's batch is committed to the DB:
// everything the effects describe can be read back from the DB. Rounds
// that recorded nothing are skipped. The owner of the state machine must
// receive from it: when effectsBacklog rounds wait, so does the Ready
// loop. Closed by Stop.
func (s *Store) Effects() <-chan Effects { return s.effects }

// Fatal is closed-with-value when the store hit an unrecoverable storage error.
func (s *Store) Fatal() <-chan error { return s.fatal }

// Start launches the Ready loop and, unless TickInterval is zero, the ticker.
func (s *Store) Start() {
	if s.cfg.TickInterval > 0 {
		s.wg.Add(1)
		go s.tickLoop()
	}
	s.wg.Add(1)
	go s.run()
}

// Stop stops the loops; pending proposals and reads fail with ErrStopped.
func (s *Store) Stop() {
	s.mu.Lock()
	if s.mu.stopped {
		s.mu.Unlock()
		return
	}
	s.mu.stopped = true
	s.mu.Unlock()
	close(s.stopper)
	s.wg.Wait()
	close(s.effects) // the Ready loop, its only sender, has ended
	for _, r := range s.Replicas() {
		r.failAll(ErrStopped)
	}
	s.snaps.Close()
}

// Replica returns the replica of range id, or nil.
func (s *Store) Replica(id storage.RangeID) *Replica {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.mu.replicas[id]
}

// Replicas returns every replica.
func (s *Store) Replicas() []*Replica {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*Replica, 0, len(s.mu.replicas))
	for _, r := range s.mu.replicas {
		out = append(out, r)
	}
	return out
}

// replicaList returns every replica; the caller must not change the slice.
func (s *Store) replicaList() []*Replica {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.mu.list
}

// ReplicaForSlot returns the local replica whose range owns hash slot s
// (slot.Of of a user key), or nil. A lookup in a table of every slot,
// rebuilt under mu when replicas are added (rebuildSlots).
func (s *Store) ReplicaForSlot(sl uint16) *Replica {
	t := s.slots.Load()
	if t == nil || int(sl) >= len(t) {
		return nil
	}
	return t[sl]
}

// ReplicaCount returns how many replicas the store holds (routing skips
// key extraction while it is one).
func (s *Store) ReplicaCount() int { return int(s.nreplicas.Load()) }

// rebuildSlots rebuilds the slot table from every replica's descriptor.
// Callers hold s.mu (write). Split and replica removal must call it after
// they change a descriptor's slot interval or the replica set.
func (s *Store) rebuildSlots() {
	var t [slot.Count]*Replica
	for _, r := range s.mu.replicas {
		d := r.Descriptor()
		for i := int(d.StartSlot); i < int(d.EndSlot) && i < slot.Count; i++ {
			if t[i] == nil || t[i].id > r.id {
				t[i] = r
			}
		}
	}
	s.slots.Store(&t)
	s.nreplicas.Store(int32(len(s.mu.replicas)))
}

// RefreshSlots rebuilds the slot table (ReplicaForSlot) after a
// replica's descriptor changed its slot interval.
func (s *Store) RefreshSlots() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rebuildSlots()
}

func (s *Store) signal() {
	select {
	case s.work <- struct{}{}:
	default:
	}
}

func (s *Store) tickLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.TickInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stopper:
			return
		case <-t.C:
			s.Tick()
		}
	}
}

// Tick advances the Raft clock of every awake (not quiesced) replica by
// one tick and marks it for the Ready loop. The ticker goroutine calls it
// each TickInterval; with TickInterval zero the owner does. It also sends
// the store's liveness messages, wakes the quiesced replicas of a leader
// gone silent (replica_quiesce.go), and now and then sweeps every replica
// for unmarked work (store_scheduler.go).
func (s *Store) Tick() {
	n := s.ticks.Add(1)
	var out []RaftMessage
	ticked := 0
	list := s.replicaList()
	for _, r := range list {
		if r.quiesced.Load() {
			continue
		}
		out = r.tick(out)
		ticked++
		s.sched.add(r)
	}
	s.tickedLast.Store(int64(ticked))
	s.signal()
	if s.peersStale.Swap(false) {
		s.refreshPeers()
	}
	out = append(out, s.liveness()...)
	if len(out) > 0 {
		s.cfg.Transport.Send(out)
	}
	if silent, fresh := s.silentNodes(); silent != nil && (fresh || n%uint64(max(s.cfg.ElectionTicks, 1)) == 0) {
		s.wakeLedBy(silent)
	}
	if s.sweepEvery > 0 && n%s.sweepEvery == 0 {
		s.refreshPeers()
		s.sweep()
	}
	q := s.quiescedCount.Load()
	s.cfg.Metrics.RangesQuiesced.Set(float64(q))
	s.cfg.Metrics.RangesAwake.Set(float64(int64(len(list)) - q))
}

// Step delivers a message from a peer to the range it belongs to. A
// message for a range this store has no replica of is dropped, counted
// (Metrics.UnknownRangeMessages) and logged at debug level, never an
// error: Raft tolerates lost messages, and a peer may name a range that
// is not here yet or any more (one of many in a stream shared by all
// ranges, which must keep flowing).
func (s *Store) Step(rangeID storage.RangeID, m *raftpb.Message) {
	s.StepMessage(RaftMessage{Range: rangeID, Msg: m})
}

// StepMessage is Step for a message with its store-level kind
// (storage.MsgKind): a liveness message only records that its sender is
// up, a quiesce message may quiesce the range (replica_quiesce.go). Every
// message counts as a sign of life of its sender.
func (s *Store) StepMessage(msg RaftMessage) {
	m := msg.Msg
	s.noteHeard(m.GetFrom())
	if msg.Kind == storage.MsgLiveness {
		return
	}
	r := s.Replica(msg.Range)
	if r == nil {
		s.cfg.Metrics.UnknownRangeMessages.Inc()
		s.log.Debug("dropped a raft message for a range with no replica here",
			"range", uint64(msg.Range), "type", m.GetType().String(), "from", m.GetFrom())
		return
	}
	if msg.Kind == storage.MsgQuiesce {
		r.stepQuiesce(m)
	} else {
		r.step(m)
	}
	r.enqueue()
}

// ReportUnreachable tells every replica that has node to in its
// descriptor that a message to it could not be sent: the transport's
// queue and stream to a node serve all ranges.
func (s *Store) ReportUnreachable(to uint64) {
	for _, r := range s.Replicas() {
		if r.hasReplicaOn(storage.NodeID(to)) {
			r.ReportUnreachable(to)
		}
	}
}

// ReportSnapshot tells the replica of rangeID how sending it a snapshot
// to node to ended (nothing if the range is gone).
func (s *Store) ReportSnapshot(rangeID storage.RangeID, to uint64, ok bool) {
	if r := s.Replica(rangeID); r != nil {
		r.ReportSnapshot(to, ok)
	}
}

// OpenSnapshot opens the data stream of an outgoing snapshot message.
func (s *Store) OpenSnapshot(snap *raftpb.Snapshot) (interface {
	Read([]byte) (int, error)
	Close() error
}, error) {
	return s.snaps.Open(snap)
}

func (s *Store) failFatal(err error) {
	s.fatalOnce.Do(func() {
		// The node logs err once when it stops (server.Node.watchFatal).
		s.log.Debug("storage failure: node stops serving", "err", err)
		s.failErr = err
		s.failed.Store(true)
		// Waiters of proposals in flight learn why, rather than a bare
		// "stopped": their entry may or may not have been committed by
		// the other replicas.
		for _, r := range s.Replicas() {
			r.failAll(err)
		}
		s.fatal <- err
		close(s.fatal)
	})
}

// raftConfig returns the raft.Config for a replica.
func (s *Store) raftConfig(log *storage.RaftLog, applied uint64) *raft.Config {
	return &raft.Config{
		ID:                        uint64(s.cfg.NodeID),
		ElectionTick:              s.cfg.ElectionTicks,
		HeartbeatTick:             s.cfg.HeartbeatTicks,
		Storage:                   log,
		Applied:                   applied,
		MaxSizePerMsg:             1 << 20,
		MaxCommittedSizePerReady:  16 << 20,
		MaxUncommittedEntriesSize: 256 << 20,
		MaxInflightMsgs:           256,
		MaxInflightBytes:          s.cfg.MaxInflightBytes,
		CheckQuorum:               true,
		PreVote:                   true,
		ReadOnlyOption:            raft.ReadOnlySafe,
		DisableProposalForwarding: true,
		Logger:                    raftLogger{s.log},
	}
}

// forgetPeers drops from the transport each of ids that no local replica's
// descriptor lists any more: a node removed from one range may still be a
// replica of another (and forwarding to it, or its messages to this node,
// must keep working). Called with no lock held.
func (s *Store) forgetPeers(ids []storage.NodeID) {
	if len(ids) == 0 {
		return
	}
	reps := s.Replicas()
	for _, id := range ids {
		used := false
		for _, r := range reps {
			if _, ok := r.Descriptor().Replica(id); ok {
				used = true
				break
			}
		}
		if !used {
			s.cfg.Transport.RemovePeer(uint64(id))
		}
	}
}

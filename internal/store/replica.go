package store

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"

	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/storage"
)

// Replica is this node's member of one range: its descriptor, RawNode and
// applied state.
type Replica struct {
	store *Store
	id    storage.RangeID
	log   *storage.RaftLog

	// applied mirrors log.Applied().Index for lock-free reads.
	applied atomic.Uint64
	// broken is set once raft panicked; the store is stopping.
	broken atomic.Bool
	// destroyed is set when the store dropped this replica object for
	// another of the same range (a split initializing an uninitialized
	// replica: replaceUninitialized): the Ready loop skips it.
	destroyed atomic.Bool
	// voteDelayUntil: the replica drops vote requests until then
	// (store.mono; zero: never). See lease.go.
	voteDelayUntil time.Time
	// logSizes holds the index and data size of each entry applied since
	// the log was last truncated, and logBytes their sum; logRetryAt is
	// the sum at which to try again (sizeTruncated). The Ready loop's own
	// (stageApply, truncateLog), for truncating by size (logtrunc.go).
	logSizes   []entrySize
	logBytes   int
	logRetryAt int
	// savedAt is when the log was last truncated or replaced by a
	// snapshot (Unix ns; the replica's start before either): see SavedAt.
	savedAt atomic.Int64
	// quiesced: the replica does not tick (replica_quiesce.go). Written
	// under mu, read by Tick without it.
	quiesced atomic.Bool
	// schedQueued: the replica is in the scheduler's queue. Guarded by
	// Store.sched.mu.
	schedQueued bool
	// load counts the client commands run for the range here (load.go).
	load Load

	mu struct {
		sync.Mutex
		rn   *raft.RawNode
		desc *storage.Descriptor
		// lastTS is the latest timestamp this replica proposed or applied;
		// proposals never stamp an earlier one.
		lastTS   int64
		nextProp uint64
		// proposals by id, and by log index once their entry was appended
		// (several proposals share an entry); pending holds proposals not
		// yet handed to raft: the Ready loop proposes them as one entry
		// per round (flushProposalsLocked).
		proposals map[uint64]*proposal
		byIndex   map[uint64][]*proposal
		pending   []*proposal
		// readQueue holds reads not yet covered by a ReadIndex request;
		// readSent holds requests sent, by context; readWait holds batches
		// that know their index and wait for it to be applied.
		readQueue []*readBatch
		readSent  map[uint64]*readBatch
		readWait  []*readBatch
		readSeq   uint64
		// readSentAt is when the last ReadIndex request went out (see
		// readRoundPending).
		readSentAt time.Time
		leader     uint64
		// lease is the leader's read lease (lease.go).
		lease leaseState
		// sentCommit is the highest commit index this replica has told
		// another node (MsgApp, heartbeat, ReadIndex answers), and acked
		// the last index it applied and may have acknowledged: what any
		// node can have applied or answered from (leaseReadIndexLocked).
		sentCommit, acked uint64
		// staged maps snapshot index to the staged file path.
		staged map[uint64]string
		// appended is the index of the last entry this replica appended
		// as leader; holdSince is when pending proposals began to wait for
		// it to commit (zero: they do not wait). See holdProposalsLocked.
		appended  uint64
		holdSince time.Time
		// holdTimer signals the Ready loop when a hold's patience is up
		// (made on the first hold, then reset).
		holdTimer *time.Timer
		// idleTicks counts the leader's ticks in a row that found the
		// range idle (maybeQuiesceLocked).
		idleTicks int
	}
}

type proposal struct {
	id      uint64
	cmds    [][][]byte // until proposed
	done    chan struct{}
	replies []reply.Reply
	err     error
}

func (p *proposal) finish(replies []reply.Reply, err error) {
	p.replies, p.err = replies, err
	close(p.done)
}

// readBatch is a group of reads served by one ReadIndex round (or a
// lease read waiting for the commit index to be applied, or a lease probe
// that no read waits for).
type readBatch struct {
	done  chan struct{}
	index uint64
	err   error
	// queued, sent and answered time the batch (Metrics.ReadBarrierDuration
	// and its parts); zero for batches served from the lease.
	queued, sent, answered time.Time
	// probe: the leader sent this ReadIndex at probeSent in probeTerm;
	// once its ReadState is released it extends the lease (lease.go).
	probe     bool
	probeSent time.Time
	probeTerm uint64
}

// Errors a caller may retry (the command was certainly not applied).
var (
	// ErrProposalDropped: raft refused or lost the proposal before commit.
	ErrProposalDropped = errors.New("store: proposal dropped (leader changed); not applied")
	// ErrNoLeader: no leader is known; the node may be in a minority.
	ErrNoLeader = errors.New("store: no leader")
	// ErrLeaderChanged: a read round was interrupted by a leader change.
	ErrLeaderChanged = errors.New("store: leader changed during read")
)

// ErrAmbiguous: the caller stopped waiting; the command may or may not apply.
var ErrAmbiguous = errors.New("store: timed out waiting for commit; the write may or may not have been applied")

// NotLeaderError is returned by Propose, and by membership changes, on a
// replica that does not lead. Nothing was proposed: the caller may retry on
// the leader.
type NotLeaderError struct {
	Range  storage.RangeID
	Leader uint64 // 0 if unknown
	// LeaderAddr is the leader's peer address as this replica's descriptor
	// has it; "" if the leader or its address is unknown.
	LeaderAddr string
}

func (e *NotLeaderError) Error() string {
	return fmt.Sprintf("store: range %d: not leader (leader %d)", e.Range, e.Leader)
}

// notLeader is the NotLeaderError of this replica when raft says lead leads
// (0: unknown); desc supplies the leader's address.
func (r *Replica) notLeader(lead uint64, desc *storage.Descriptor) *NotLeaderError {
	e := &NotLeaderError{Range: r.id, Leader: lead}
	if desc == nil || lead == 0 {
		return e
	}
	if rep, ok := desc.Replica(storage.NodeID(lead)); ok {
		e.LeaderAddr = rep.PeerAddr
	}
	return e
}

// The log position and term BootstrapRange starts a range at.
const bootstrapIndex, bootstrapTerm = 10, 5

// BootstrapRange writes the initial state of a brand-new range whose members
// are desc.Replicas (all voters). Every initial member writes the same state,
// so they agree without any message.
func BootstrapRange(w storage.Writer, desc *storage.Descriptor) error {
	return BootstrapRangeAt(w, desc, bootstrapIndex)
}

// BootstrapRangeAt is BootstrapRange for a range whose state machine data
// is already at a log index (a restored backup's): the new log starts
// there, so that what the state machine keeps by log index stays in
// order. An index below BootstrapRange's is raised to it. The term is
// BootstrapRange's: the members of the new cluster have never heard from
// a leader (see lease.go).
func BootstrapRangeAt(w storage.Writer, desc *storage.Descriptor, initIndex uint64) error {
	initIndex = max(initIndex, bootstrapIndex)
	initTerm := uint64(bootstrapTerm)
	cs := &raftpb.ConfState{}
	for _, r := range desc.Replicas {
		if r.Learner {
			cs.Learners = append(cs.Learners, uint64(r.NodeID))
		} else {
			cs.Voters = append(cs.Voters, uint64(r.NodeID))
		}
	}
	if err := storage.SetDescriptor(w, desc); err != nil {
		return err
	}
	if err := storage.SetTruncatedState(w, desc.RangeID, storage.TruncatedState{Index: initIndex, Term: initTerm}); err != nil {
		return err
	}
	if err := storage.SetAppliedState(w, desc.RangeID, storage.AppliedState{Index: initIndex, Term: initTerm, ConfState: cs}); err != nil {
		return err
	}
	return storage.SetHardState(w, desc.RangeID, &raftpb.HardState{Term: ptr(initTerm), Commit: ptr(initIndex)})
}

func ptr[T any](v T) *T { return &v }

// ErrReplicaExists: AddReplica of a range the store already holds.
var ErrReplicaExists = errors.New("store: the store already holds a replica of the range")

// AddReplica loads range desc.RangeID from storage and adds it to the store.
// desc is used only when storage holds no descriptor yet (a node that joins
// and waits for a snapshot).
func (s *Store) AddReplica(desc *storage.Descriptor) (*Replica, error) {
	log, err := storage.LoadRaftLog(s.db, desc.RangeID, s.snaps)
	if err != nil {
		return nil, err
	}
	stored, ok, err := storage.LoadDescriptor(s.db, desc.RangeID)
	if err != nil {
		return nil, err
	}
	if ok {
		desc = stored
	}
	applied := log.Applied()
	rn, err := raft.NewRawNode(s.raftConfig(log, applied.Index))
	if err != nil {
		return nil, fmt.Errorf("store: range %d: %w", desc.RangeID, err)
	}
	r := &Replica{store: s, id: desc.RangeID, log: log}
	if hs, _, _, _ := log.State(); hs.GetTerm() > bootstrapTerm {
		// It may have acknowledged a leader before it stopped: see lease.go.
		r.voteDelayUntil = s.mono().Add(s.electionTimeout())
	}
	r.applied.Store(applied.Index)
	r.savedAt.Store(time.Now().UnixNano())
	r.mu.rn = rn
	r.mu.desc = desc
	r.mu.proposals = map[uint64]*proposal{}
	r.mu.byIndex = map[uint64][]*proposal{}
	r.mu.readSent = map[uint64]*readBatch{}
	r.mu.staged = map[uint64]string{}
	var seed [8]byte
	_, _ = crand.Read(seed[:])
	r.mu.nextProp = binary.LittleEndian.Uint64(seed[:]) >> 1
	for _, rd := range desc.Replicas {
		if rd.NodeID != s.cfg.NodeID {
			s.cfg.Transport.SetPeer(uint64(rd.NodeID), rd.PeerAddr)
		}
	}
	s.mu.Lock()
	if _, dup := s.mu.replicas[desc.RangeID]; dup {
		// Two creators raced (a join, the hole repair, a snapshot of an
		// unknown range): the first one's replica stays.
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: range %d", ErrReplicaExists, desc.RangeID)
	}
	s.mu.replicas[desc.RangeID] = r
	s.mu.list = append(s.mu.list[:len(s.mu.list):len(s.mu.list)], r)
	s.rebuildSlots()
	s.mu.Unlock()
	s.peersStale.Store(true)
	return r, nil
}

// RangeID returns the range id.
func (r *Replica) RangeID() storage.RangeID { return r.id }

// Descriptor returns a copy of the current descriptor.
func (r *Replica) Descriptor() *storage.Descriptor {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.desc.Clone()
}

// hasReplicaOn reports whether the range's descriptor has a replica on
// node id (Descriptor without the copy).
func (r *Replica) hasReplicaOn(id storage.NodeID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.mu.desc.Replica(id)
	return ok
}

// AppliedIndex returns the index of the last applied entry.
func (r *Replica) AppliedIndex() uint64 { return r.applied.Load() }

// tick ticks the replica and appends the quiesce messages of a leader that
// quiesces to out.
func (r *Replica) tick(out []RaftMessage) []RaftMessage {
	if r.broken.Load() {
		return out
	}
	defer r.recoverRaftPanic()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.quiesced.Load() {
		return out
	}
	// Before the tick, so that a leader that quiesces sends no heartbeat
	// of its own after the quiesce message.
	if q := r.maybeQuiesceLocked(); len(q) > 0 || r.quiesced.Load() {
		return append(out, q...)
	}
	r.mu.rn.Tick()
	return out
}

// recoverRaftPanic turns a panic inside raft into a fatal store error. Raft
// panics when its log contradicts what a peer proves was persisted (e.g.
// "tocommit(x) is out of range [lastIndex(y)]. Was the raft log corrupted,
// truncated, or lost?"): the node then stops with that message, and the
// replica is not stepped again, instead of the panic killing the process
// from a transport goroutine.
func (r *Replica) recoverRaftPanic() {
	if p := recover(); p != nil {
		r.broken.Store(true)
		r.store.failFatal(fmt.Errorf("raft invariant violated on range %d (was persisted state lost or corrupted?): %v", r.id, p))
	}
}

func (r *Replica) step(m *raftpb.Message) {
	if r.broken.Load() {
		return
	}
	defer r.recoverRaftPanic()
	if r.quiesced.Load() {
		r.mu.Lock()
		if r.wakesLocked(m) {
			r.wakeLocked()
		}
		r.mu.Unlock()
	}
	if m.GetType() == raftpb.MessageType_MsgReadIndex {
		r.mu.Lock()
		resp, renew, ok := r.answerReadIndexLocked(m)
		if ok {
			r.noteSentLocked(resp)
		} else {
			renew = r.acquireLeaseLocked()
		}
		r.mu.Unlock()
		if !ok && renew {
			r.enqueue() // the probe goes out in the next Ready round
		}
		if ok {
			// A follower's read batch served by the lease: no heartbeat
			// round to a quorum.
			r.store.cfg.Metrics.LeaseReads.Inc()
			r.store.cfg.Transport.Send([]RaftMessage{{Range: r.id, Msg: resp}})
			if renew {
				r.enqueue()
			}
			return
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if m.GetType() == raftpb.MessageType_MsgReadIndexResp && r.takeReadIndexLocked(m) {
		return
	}
	if r.votesDelayed(m) {
		r.store.log.Debug("vote request dropped: replica started less than an election timeout ago",
			"range", r.id, "type", m.GetType(), "from", m.GetFrom(), "term", m.GetTerm())
		return
	}
	if m.GetType() == raftpb.MessageType_MsgTransferLeader {
		r.dropLeaseLocked(r.mu.rn.BasicStatus().GetTerm())
	}
	if err := r.mu.rn.Step(m); err != nil && !errors.Is(err, raft.ErrStepPeerNotFound) {
		r.store.log.Debug("raft step", "range", r.id, "type", m.GetType(), "from", m.GetFrom(), "err", err)
	}
}

// Leader returns the current leader's node id (0 if unknown) and whether it
// is this node.
func (r *Replica) Leader() (leader uint64, isLocal bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.mu.rn.BasicStatus()
	return st.Lead, st.RaftState == raft.StateLeader
}

// LeaderTerm reports whether this replica leads and in which term (the
// cheap part of Status, for loops that run every few milliseconds).
func (r *Replica) LeaderTerm() (isLeader bool, term uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.mu.rn.BasicStatus()
	return st.RaftState == raft.StateLeader, st.GetTerm()
}

func (r *Replica) nextProposalIDLocked() uint64 {
	r.mu.nextProp++
	return r.mu.nextProp
}

// Propose replicates cmds as one entry and returns their replies once the
// entry is applied on this replica. Returns *NotLeaderError if this replica
// does not lead, ErrProposalDropped if raft lost it (safe to retry), and
// ErrAmbiguous if ctx ended first. When the store's WriteGate refuses, it
// returns the gate's error reply for every command and proposes nothing.
func (r *Replica) Propose(ctx context.Context, cmds [][][]byte) ([]reply.Reply, error) {
	if r.store.failed.Load() {
		return nil, ErrStopped // never proposed: not applied
	}
	if refused := r.store.gate(len(cmds)); refused != nil {
		return refused, nil
	}
	r.mu.Lock()
	st := r.mu.rn.BasicStatus()
	if st.RaftState != raft.StateLeader {
		r.mu.Unlock()
		return nil, r.notLeader(st.Lead, r.mu.desc)
	}
	r.wakeLocked()
	p := &proposal{id: r.nextProposalIDLocked(), cmds: cmds, done: make(chan struct{})}
	r.mu.pending = append(r.mu.pending, p)
	r.mu.proposals[p.id] = p
	r.mu.Unlock()
	r.store.cfg.Metrics.Proposals.Inc()
	r.enqueue()
	start := time.Now()
	replies, err := r.wait(ctx, p)
	if err == nil {
		r.store.cfg.Metrics.ProposalLatency.Observe(time.Since(start).Seconds())
	}
	return replies, err
}

// maxEntryPayload bounds the proposals grouped into one entry (raft's
// MaxSizePerMsg): a larger proposal gets an entry of its own.
const maxEntryPayload = 1 << 20

// flushProposalsLocked proposes the pending proposals to raft, grouped into
// as few entries as maxEntryPayload allows, with one timestamp: the
// leader's clock, never below one it proposed or applied before. Called
// by the Ready loop before it asks for a Ready, so that every proposal
// that arrived during the previous round shares this round's entry,
// fsync and messages. Proposals raft refuses (leadership lost meanwhile)
// fail with ErrProposalDropped: never appended, so never applied.
// REQUIRES: r.mu held.
func (r *Replica) flushProposalsLocked() {
	if len(r.mu.pending) == 0 {
		return
	}
	st := r.mu.rn.BasicStatus()
	if st.RaftState == raft.StateLeader && r.holdProposalsLocked(st.GetCommit()) {
		return
	}
	pend := r.mu.pending
	r.mu.pending = nil
	if st.RaftState != raft.StateLeader {
		r.dropLocked(pend)
		return
	}
	ts := r.store.cfg.Now()
	if ts < r.mu.lastTS {
		ts = r.mu.lastTS
	}
	r.mu.lastTS = ts
	e := entryPayload{node: uint64(r.store.cfg.NodeID), ts: ts}
	for len(pend) > 0 {
		e.props = e.props[:0]
		size, n := 0, 0
		for n < len(pend) {
			sz := cmdsSize(pend[n].cmds)
			if n > 0 && size+sz > maxEntryPayload {
				break
			}
			size += sz
			e.props = append(e.props, entryProposal{id: pend[n].id, cmds: pend[n].cmds})
			n++
		}
		if err := r.mu.rn.Propose(encodeEntry(&e)); err != nil {
			r.dropLocked(pend[:n])
		}
		for _, p := range pend[:n] {
			p.cmds = nil
		}
		pend = pend[n:]
	}
}

// holdPatience and holdMaxCmds bound how long and for how many commands
// holdProposalsLocked keeps proposals back. Measured on 3 nodes sharing 2
// cores (bench kv, 16 clients, three alternating pairs): entries carried
// 5.1 proposals instead of 2.5, workload A +13 % and 5/95 +17 % with 10-25
// % less CPU per operation, the load unchanged.
const (
	holdPatience = 2 * time.Millisecond
	holdMaxCmds  = 64
)

// holdProposalsLocked reports whether the pending proposals should wait
// for the leader's last entry to commit instead of going into an entry of
// their own now: one entry in flight at a time, as a group commit does,
// so that the writes arriving meanwhile share the next entry, its fsync
// on every node and its messages: under load, fewer and fuller rounds
// cost less CPU per write on every node, and the CPU is what bounds this
// machine. Not once holdMaxCmds commands wait or they have waited
// holdPatience (at most a tick: the commit may not come, a follower is
// down), nor without a ticker (tests that drive the clock themselves);
// the Ready round that applies the entry proposes them. A lone writer
// never waits: its previous entry is committed before it writes again.
// REQUIRES: r.mu held.
func (r *Replica) holdProposalsLocked(commit uint64) bool {
	if r.store.cfg.TickInterval == 0 || r.mu.appended <= commit {
		r.mu.holdSince = time.Time{}
		return false
	}
	patience := min(holdPatience, r.store.cfg.TickInterval)
	n := 0
	for _, p := range r.mu.pending {
		n += len(p.cmds)
	}
	now := r.store.mono()
	switch {
	case n >= holdMaxCmds:
	case r.mu.holdSince.IsZero():
		r.mu.holdSince = now
		if r.mu.holdTimer == nil {
			r.mu.holdTimer = time.AfterFunc(patience, r.enqueue)
		} else {
			r.mu.holdTimer.Reset(patience)
		}
		return true
	case now.Sub(r.mu.holdSince) < patience:
		return true
	}
	r.mu.holdSince = time.Time{}
	return false
}

// dropLocked fails proposals that never reached the log.
// REQUIRES: r.mu held.
func (r *Replica) dropLocked(ps []*proposal) {
	for _, p := range ps {
		if _, ok := r.mu.proposals[p.id]; ok {
			delete(r.mu.proposals, p.id)
			p.finish(nil, ErrProposalDropped)
		}
	}
}

func (r *Replica) wait(ctx context.Context, p *proposal) ([]reply.Reply, error) {
	select {
	case <-p.done:
		return p.replies, p.err
	case <-ctx.Done():
		r.forget(p)
		return nil, ErrAmbiguous
	case <-r.store.stopper:
		select {
		case <-p.done: // failed by failFatal just before the stop: say why
			return p.replies, p.err
		default:
		}
		return nil, ErrStopped
	}
}

func (r *Replica) forget(p *proposal) {
	r.mu.Lock()
	delete(r.mu.proposals, p.id)
	r.mu.Unlock()
}

// ReadBarrier returns once this replica has applied everything committed
// before the call (a linearizable read point). A leader that holds a lease
// (Config.LeaseReads, lease.go) takes its commit index as the read point
// and returns as soon as that is applied, with no Raft message; otherwise
// concurrent callers share one ReadIndex round. Errors: ErrNoLeader,
// ErrLeaderChanged (retry), ctx errors.
func (r *Replica) ReadBarrier(ctx context.Context) error {
	if r.store.failed.Load() {
		return ErrStopped
	}
	r.mu.Lock()
	r.wakeLocked()
	b, leased, renew := r.leaseReadLocked()
	if leased {
		r.mu.Unlock()
		r.store.cfg.Metrics.LeaseReads.Inc()
		if renew || b != nil {
			r.enqueue()
		}
		if b == nil {
			return nil
		}
		return r.waitRead(ctx, b)
	}
	if n := len(r.mu.readQueue); n > 0 {
		b = r.mu.readQueue[n-1]
	} else {
		b = &readBatch{done: make(chan struct{}), queued: r.store.mono()}
		r.mu.readQueue = append(r.mu.readQueue, b)
	}
	r.mu.Unlock()
	r.enqueue()
	return r.waitRead(ctx, b)
}

func (r *Replica) waitRead(ctx context.Context, b *readBatch) error {
	select { // done already: ctx is not asked (making its Done may cost a timer)
	case <-b.done:
		return b.err
	default:
	}
	select {
	case <-b.done:
		return b.err
	case <-ctx.Done():
		return ctx.Err()
	case <-r.store.stopper:
		return ErrStopped
	}
}

// issueReadsLocked sends one ReadIndex for all queued reads. On a leader
// with leases on, that request is also a lease probe; and if a lease read
// asked for a renewal and no probe is in flight, it sends a probe that no
// read waits for.
// REQUIRES: r.mu held.
func (r *Replica) issueReadsLocked() {
	renew := r.mu.lease.renew
	r.mu.lease.renew = false
	if len(r.mu.readQueue) == 0 && !renew {
		return
	}
	st := r.mu.rn.BasicStatus()
	if st.Lead == raft.None {
		for _, b := range r.mu.readQueue {
			b.err = ErrNoLeader
			close(b.done)
		}
		r.mu.readQueue = r.mu.readQueue[:0]
		return
	}
	now := r.store.mono()
	if renew && len(r.mu.readQueue) == 0 && !r.probeInFlightLocked(st.GetTerm(), now) {
		b := &readBatch{done: make(chan struct{})}
		r.leaseProbeLocked(b, &st, now)
		if b.probe {
			r.sendReadIndexLocked(b)
			r.store.cfg.Metrics.LeaseProbes.Inc()
		}
	}
	if len(r.mu.readQueue) > 0 && r.readRoundPendingLocked(now) {
		return // the reads wait for the round in flight to come back
	}
	for _, b := range r.mu.readQueue {
		r.leaseProbeLocked(b, &st, now)
		r.sendReadIndexLocked(b)
		r.store.cfg.Metrics.ReadIndexRounds.Inc()
	}
	r.mu.readQueue = r.mu.readQueue[:0]
}

// readRoundPatience is how long reads queued behind a ReadIndex round in
// flight wait for it before a round of their own goes out anyway (raft
// never resends a ReadIndex request that the transport lost); at most a
// tick. Store.readPatience overrides it in tests.
const readRoundPatience = 5 * time.Millisecond

// readRoundPendingLocked reports whether queued reads should wait for the
// ReadIndex round in flight instead of sending their own: one round at a
// time, so that the reads that arrive while it travels share the next one
// (group commit for reads). Sending a round per Ready round instead cost a
// follower one round trip per read under load: with 16 clients on a
// follower, 1.0 reads per round and 54 µs of CPU per read, against 22 µs
// for a leader's lease reads. Without a ticker (tests that drive the clock
// themselves) every round goes out at once.
// REQUIRES: r.mu held.
func (r *Replica) readRoundPendingLocked(now time.Time) bool {
	if r.store.cfg.TickInterval == 0 || len(r.mu.readSent) == 0 {
		return false
	}
	patience := min(readRoundPatience, r.store.cfg.TickInterval)
	if p := r.store.readPatience.Load(); p > 0 {
		patience = time.Duration(p)
	}
	return now.Sub(r.mu.readSentAt) < patience
}

// sendReadIndexLocked sends a ReadIndex request for b.
// REQUIRES: r.mu held.
func (r *Replica) sendReadIndexLocked(b *readBatch) {
	r.mu.readSeq++
	var ctx [8]byte
	binary.BigEndian.PutUint64(ctx[:], r.mu.readSeq)
	r.mu.readSent[r.mu.readSeq] = b
	r.mu.readSentAt = r.store.mono()
	b.sent = r.mu.readSentAt
	r.mu.rn.ReadIndex(ctx[:])
}

// takeReadIndexLocked takes the leader's answer m to one of this
// follower's ReadIndex requests as it arrives, rather than through the
// next Ready round (which would hand it over after that round's fsync):
// the batch waits from now on only for its index to be applied. It takes
// only what raft itself would turn into a ReadState: an answer from the
// leader it follows, in its current term, to a request in flight; false
// leaves m to raft.
// REQUIRES: r.mu held.
func (r *Replica) takeReadIndexLocked(m *raftpb.Message) bool {
	if len(m.GetEntries()) != 1 {
		return false
	}
	st := r.mu.rn.BasicStatus()
	if st.RaftState != raft.StateFollower || m.GetFrom() != st.Lead || m.GetTerm() != st.GetTerm() {
		return false
	}
	if !r.readAnsweredLocked(m.GetEntries()[0].GetData(), m.GetIndex()) {
		return false
	}
	r.releaseAnsweredLocked()
	return true
}

// readAnsweredLocked moves the ReadIndex request with context rctx, if
// in flight, to the batches waiting for their index to be applied.
// REQUIRES: r.mu held.
func (r *Replica) readAnsweredLocked(rctx []byte, index uint64) bool {
	if len(rctx) != 8 {
		return false
	}
	seq := binary.BigEndian.Uint64(rctx)
	b, ok := r.mu.readSent[seq]
	if !ok {
		return false
	}
	delete(r.mu.readSent, seq)
	b.index = index
	b.answered = r.store.mono()
	r.mu.readWait = append(r.mu.readWait, b)
	return true
}

// releaseAnsweredLocked releases the answered batches whose index is
// applied, and lets reads held back by readRoundPendingLocked go.
// REQUIRES: r.mu held.
func (r *Replica) releaseAnsweredLocked() {
	r.releaseReadsLocked(r.applied.Load())
	if len(r.mu.readQueue) > 0 && len(r.mu.readSent) == 0 {
		r.enqueue()
	}
}

// observeReadLocked records a ReadIndex batch's timings as it is released.
// REQUIRES: r.mu held.
func (r *Replica) observeReadLocked(b *readBatch) {
	if b.queued.IsZero() || b.answered.IsZero() {
		return // a lease read's batch, or a probe no read waits for
	}
	now := r.store.mono()
	m := r.store.cfg.Metrics
	m.ReadBarrierDuration.Observe(now.Sub(b.queued).Seconds())
	m.ReadIndexDuration.Observe(b.answered.Sub(b.sent).Seconds())
	m.ReadApplyWait.Observe(now.Sub(b.answered).Seconds())
}

// failReadsLocked fails every read round in flight.
// REQUIRES: r.mu held.
func (r *Replica) failReadsLocked(err error) {
	for k, b := range r.mu.readSent {
		b.err = err
		close(b.done)
		delete(r.mu.readSent, k)
	}
}

// releaseReadsLocked completes read batches whose index is applied.
// REQUIRES: r.mu held.
func (r *Replica) releaseReadsLocked(applied uint64) {
	keep := r.mu.readWait[:0]
	for _, b := range r.mu.readWait {
		if b.index <= applied {
			if b.probe {
				r.probeAnsweredLocked(b)
			}
			r.observeReadLocked(b)
			close(b.done)
		} else {
			keep = append(keep, b)
		}
	}
	r.mu.readWait = keep
}

func (r *Replica) failAll(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, p := range r.mu.proposals {
		p.finish(nil, err)
		delete(r.mu.proposals, id)
	}
	r.mu.pending = nil
	r.mu.byIndex = map[uint64][]*proposal{}
	r.failReadsLocked(err)
	for _, b := range r.mu.readQueue {
		b.err = err
		close(b.done)
	}
	r.mu.readQueue = nil
	for _, b := range r.mu.readWait {
		b.err = err
		close(b.done)
	}
	r.mu.readWait = nil
}

// Status is a snapshot of the replica's Raft state.
type Status struct {
	RangeID      storage.RangeID
	Role         string
	Term         uint64
	Leader       uint64
	Commit       uint64
	Applied      uint64
	FirstIndex   uint64
	LastIndex    uint64
	Descriptor   *storage.Descriptor
	Progress     map[uint64]tracker.Progress
	LeadTransfer uint64
}

// SavedAt is when the replica last truncated its log or installed a
// snapshot (its start before either): the state up to there no longer
// needs the log, kvorum's equivalent of a Redis RDB save (INFO
// rdb_last_save_time). Cheap: one atomic load.
func (r *Replica) SavedAt() time.Time { return time.Unix(0, r.savedAt.Load()) }

// Status reports the replica's state.
func (r *Replica) Status() Status {
	r.mu.Lock()
	st := r.mu.rn.Status()
	desc := r.mu.desc.Clone()
	r.mu.Unlock()
	_, applied, trunc, last := r.log.State()
	role := st.RaftState.String()
	switch role {
	case "StateLeader":
		role = "leader"
	case "StateFollower":
		role = "follower"
		if _, ok := st.Config.Learners[st.ID]; ok {
			role = "learner"
		}
	case "StateCandidate":
		role = "candidate"
	case "StatePreCandidate":
		role = "pre-candidate"
	}
	return Status{
		RangeID: r.id, Role: role, Term: st.GetTerm(), Leader: st.Lead,
		Commit: st.GetCommit(), Applied: applied.Index,
		FirstIndex: trunc.Index + 1, LastIndex: last,
		Descriptor: desc, Progress: st.Progress, LeadTransfer: st.LeadTransferee,
	}
}

// ReportUnreachable tells raft that a message to id could not be sent.
func (r *Replica) ReportUnreachable(id uint64) {
	r.mu.Lock()
	r.mu.rn.ReportUnreachable(id)
	r.mu.Unlock()
	r.enqueue()
}

// ReportSnapshot tells raft how sending a snapshot to id ended.
func (r *Replica) ReportSnapshot(id uint64, ok bool) {
	st := raft.SnapshotFinish
	if !ok {
		st = raft.SnapshotFailure
	}
	r.mu.Lock()
	r.wakeLocked()
	r.mu.rn.ReportSnapshot(id, st)
	r.mu.Unlock()
	r.enqueue()
}

package store

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/storage"
)

// readyItem is one replica's share of a round of Ready handling.
type readyItem struct {
	r      *Replica
	rd     raft.Ready
	leader bool
	// The round's local storage messages (raft's AsyncStorageWrites): the
	// log write (entries, hard state, snapshot) and the entries to apply,
	// each nil if raft asked for none.
	appendMsg *raftpb.Message
	applyMsg  *raftpb.Message

	// Filled while applying, used after the apply batch commits.
	applied     storage.AppliedState
	appliedSet  bool
	snapApplied bool
	snapDesc    *storage.Descriptor
	completions []completion
	newDesc     *storage.Descriptor
	truncate    bool
}

type completion struct {
	p       *proposal
	replies []reply.Reply
	err     error
	// afterCommit: complete only once the round's apply batch is
	// committed (a membership change: its caller reads the new
	// descriptor).
	afterCommit bool
}

// run is the Ready loop: see the package doc.
func (s *Store) run() {
	defer s.wg.Done()
	for {
		select {
		case <-s.stopper:
			return
		case <-s.work:
		}
		more, err := s.processReadyGuarded()
		if err != nil {
			s.failFatal(err)
			return
		}
		if more {
			s.signal()
		}
	}
}

// processReadyGuarded is processReady with a panic inside raft (see
// Replica.recoverRaftPanic) turned into an error that stops the store.
func (s *Store) processReadyGuarded() (more bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			for _, r := range s.Replicas() {
				r.broken.Store(true)
			}
			err = fmt.Errorf("raft invariant violated (was persisted state lost or corrupted?): %v", p)
		}
	}()
	return s.processReady()
}

// processReady handles one round for every replica with work. It reports
// whether another round is already due.
//
// Raft runs with AsyncStorageWrites: a round does not wait for the disk.
// Messages to other nodes go out at once (raft holds back those that
// depend on a local write: they come back as responses of the write);
// the log writes (entries, hard state) go to the append worker
// (append.go), which syncs them in one batch with whatever other rounds
// queued meanwhile and then delivers their responses (the follower's
// acknowledgement to the leader, the leader's own); the entries raft
// says are committed and already stable here are applied by this round
// in one batch committed without sync (the log holds them durably, and
// a restart re-applies from the applied index). So a follower's fsync,
// the leader's own fsync and the apply of earlier entries overlap, and a
// commit is acted on as soon as its acknowledgement arrives, not after
// the fsync in progress.
func (s *Store) processReady() (more bool, err error) {
	start := time.Now()
	var items []*readyItem
	for _, r := range s.Replicas() {
		func() {
			r.mu.Lock()
			defer r.mu.Unlock() // also if raft panics: see processReadyGuarded
			r.issueReadsLocked()
			r.flushProposalsLocked()
			if r.mu.rn.HasReady() {
				items = append(items, &readyItem{r: r, rd: r.mu.rn.Ready(), leader: r.mu.rn.BasicStatus().RaftState == raft.StateLeader})
			}
		}()
	}
	if len(items) == 0 {
		return false, nil
	}
	s.cfg.Metrics.ReadyRounds.Inc()

	var out []*raftpb.Message
	for _, it := range items {
		for _, m := range it.rd.Messages {
			switch m.GetTo() {
			case raft.LocalAppendThread:
				it.appendMsg = m
			case raft.LocalApplyThread:
				it.applyMsg = m
			default:
				out = append(out, m)
			}
		}
	}
	s.send(out)

	// Log writes: to the append worker, or here and now for a snapshot
	// (rare: it replaces the state machine's data, which only this
	// goroutine touches) and when no worker runs (deterministic tests).
	var jobs []appendJob
	for _, it := range items {
		m := it.appendMsg
		if m == nil {
			continue
		}
		if len(m.GetEntries()) > 0 {
			it.r.trackProposalIndexes(m.GetEntries())
		}
		if m.GetSnapshot() != nil && !raft.IsEmptySnap(m.GetSnapshot()) {
			if err := s.persistSnapshot(it); err != nil {
				return false, err
			}
			continue
		}
		jobs = append(jobs, appendJob{r: it.r, m: m})
	}
	if len(jobs) > 0 {
		if err := s.queueAppends(jobs); err != nil {
			return false, err
		}
	}

	if err := s.applyCommitted(items); err != nil {
		return false, err
	}

	for _, it := range items {
		it.r.afterApply(it)
		if it.truncate {
			if err := it.r.truncateLog(); err != nil {
				return false, err
			}
		}
	}
	for _, it := range items {
		it.r.mu.Lock()
		more = more || it.r.mu.rn.HasReady()
		it.r.mu.Unlock()
	}
	s.cfg.Metrics.ReadyDuration.Observe(time.Since(start).Seconds())
	return more, nil
}

// applyCommitted applies the round's committed entries (every item's
// MsgStorageApply) in one indexed batch, completes their waiters, commits
// the batch without sync, hands the round's effects to the node and tells
// raft the entries are applied.
func (s *Store) applyCommitted(items []*readyItem) error {
	var applying []*readyItem
	for _, it := range items {
		if it.applyMsg != nil {
			applying = append(applying, it)
		}
	}
	if len(applying) == 0 {
		return nil
	}
	batch := s.db.NewIndexedBatch()
	defer batch.Close()
	for _, it := range applying {
		if err := it.r.stageApply(batch, it, it.applyMsg.GetEntries()); err != nil {
			return fmt.Errorf("range %d: apply: %w", it.r.id, err)
		}
	}
	// The waiters get their replies now, before the batch is committed:
	// the entries are committed (durable on a majority) and stable in
	// this node's log, and applying them is deterministic, so a crash
	// before this batch reaches the disk re-applies them from the log to
	// the same result. Reads wait for the applied index, which moves
	// only after the commit (afterApply). The round's effects are taken
	// first: a waiter that wants them acted on (PUBLISH's receiver count)
	// waits for the round the state machine last handed over.
	effects := s.cfg.StateMachine.TakeEffects()
	for _, it := range applying {
		it.completeEarly()
	}
	if !batch.Empty() {
		// No sync: the entries are in the synced log; the applied state
		// may lag on disk and is caught up by replay. Pebble's WAL keeps
		// commit order, so the applied state never reaches the disk
		// without the log entries the append worker synced before.
		if err := storage.Commit(batch, pebble.NoSync); err != nil {
			return &StorageError{Err: err}
		}
	}
	if effects != nil {
		select {
		case s.effects <- effects:
		case <-s.stopper:
		}
	}
	for _, it := range applying {
		it.r.setApplied(it)
		it.r.stepLocal(it.applyMsg.GetResponses())
	}
	return nil
}

func (s *Store) send(msgs []*raftpb.Message) {
	if len(msgs) == 0 {
		return
	}
	for _, m := range msgs {
		if m.GetType() == raftpb.MessageType_MsgSnap {
			s.cfg.Metrics.SnapshotsSent.Inc()
		}
	}
	s.cfg.Transport.Send(msgs)
}

// trackProposalIndexes records at which index each local proposal landed, so
// that a different entry committed there proves the proposal lost.
func (r *Replica) trackProposalIndexes(ents []*raftpb.Entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.mu.proposals) == 0 {
		return
	}
	self := uint64(r.store.cfg.NodeID)
	for _, e := range ents {
		if e.GetType() != raftpb.EntryType_EntryNormal || len(e.GetData()) < 2 {
			continue
		}
		p, err := decodeEntryIDs(e.GetData())
		if err != nil || p.node != self {
			continue
		}
		for _, pr := range p.props {
			if prop, ok := r.mu.proposals[pr.id]; ok {
				r.mu.byIndex[e.GetIndex()] = append(r.mu.byIndex[e.GetIndex()], prop)
			}
		}
	}
}

// stageApply applies committed entries into b.
func (r *Replica) stageApply(b *pebble.Batch, it *readyItem, ents []*raftpb.Entry) error {
	self := uint64(r.store.cfg.NodeID)
	var last *raftpb.Entry
	cur := r.log.Applied()
	cs := cur.ConfState
	for _, e := range ents {
		if e.GetIndex() <= cur.Index {
			continue // already applied (e.g. covered by the snapshot)
		}
		last = e
		switch e.GetType() {
		case raftpb.EntryType_EntryNormal:
			if len(e.GetData()) == 0 {
				break // a new leader's empty entry
			}
			p, err := decodeEntry(e.GetData())
			if err != nil {
				return fmt.Errorf("entry %d: %w", e.GetIndex(), err)
			}
			seq := 0
			for _, pr := range p.props {
				replies := make([]reply.Reply, len(pr.cmds))
				for i, args := range pr.cmds {
					replies[i] = r.store.cfg.StateMachine.Apply(b, args, ApplyEnv{Now: p.ts, Index: e.GetIndex(), Seq: seq})
					seq++
				}
				if p.node == self {
					r.mu.Lock()
					if prop, ok := r.mu.proposals[pr.id]; ok {
						delete(r.mu.proposals, pr.id)
						it.completions = append(it.completions, completion{p: prop, replies: replies})
					}
					r.mu.Unlock()
				}
			}
			r.mu.Lock()
			if p.ts > r.mu.lastTS {
				// The log clock never runs backwards, even when the next
				// leader's clock is behind this entry's.
				r.mu.lastTS = p.ts
			}
			r.mu.Unlock()
		case raftpb.EntryType_EntryConfChange, raftpb.EntryType_EntryConfChangeV2:
			newCS, err := r.applyConfChange(b, it, e)
			if err != nil {
				return err
			}
			cs = newCS
		}
		r.resolveIndex(it, e.GetIndex())
	}
	if last == nil {
		return nil
	}
	it.applied = storage.AppliedState{Index: last.GetIndex(), Term: last.GetTerm(), ConfState: cs}
	it.appliedSet = true
	r.store.cfg.Metrics.EntriesApplied.Add(float64(len(ents)))
	_, _, trunc, _ := r.log.State()
	if th := r.store.cfg.SnapshotThreshold; th > 0 && last.GetIndex()-trunc.Index > th {
		it.truncate = true
	}
	return storage.SetAppliedState(b, r.id, it.applied)
}

// resolveIndex fails the local proposals that were appended at index but
// lost to another entry there: called once the entry committed at index
// has been applied, which completed (and forgot) the proposals it held.
func (r *Replica) resolveIndex(it *readyItem, index uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ps, ok := r.mu.byIndex[index]
	if !ok {
		return
	}
	delete(r.mu.byIndex, index)
	for _, p := range ps {
		if _, pending := r.mu.proposals[p.id]; pending {
			delete(r.mu.proposals, p.id)
			it.completions = append(it.completions, completion{p: p, err: ErrProposalDropped})
		}
	}
}

// completeEarly completes the waiters of the round's applied entries (see
// processReady), all but those that must wait for the commit.
func (it *readyItem) completeEarly() {
	for _, c := range it.completions {
		if !c.afterCommit {
			c.p.finish(c.replies, c.err)
		}
	}
}

// setApplied updates the in-memory applied state once the round's apply
// batch is committed, and completes the waiters that waited for that.
func (r *Replica) setApplied(it *readyItem) {
	if it.appliedSet {
		r.log.SetApplied(it.applied)
		r.applied.Store(it.applied.Index)
	}
	for _, c := range it.completions {
		if c.afterCommit {
			c.p.finish(c.replies, c.err)
		}
	}
}

// afterApply updates the replica's in-memory state at the end of a round:
// a new descriptor (membership change or snapshot), the leader it knows,
// the read rounds answered and the reads whose index is now applied.
func (r *Replica) afterApply(it *readyItem) {
	rd := &it.rd
	desc := it.newDesc
	if desc == nil {
		desc = it.snapDesc
	}
	if desc != nil {
		for _, rep := range desc.Replicas {
			if rep.NodeID != r.store.cfg.NodeID {
				r.store.cfg.Transport.SetPeer(uint64(rep.NodeID), rep.PeerAddr)
			}
		}
	}

	r.mu.Lock()
	if desc != nil {
		old := r.mu.desc
		r.mu.desc = desc
		for _, rep := range old.Replicas {
			if _, ok := desc.Replica(rep.NodeID); !ok && rep.NodeID != r.store.cfg.NodeID {
				r.store.cfg.Transport.RemovePeer(uint64(rep.NodeID))
			}
		}
	}
	if rd.SoftState != nil && rd.SoftState.Lead != r.mu.leader {
		r.mu.leader = rd.SoftState.Lead
		// Read rounds sent to the old leader will never be answered.
		r.failReadsLocked(ErrLeaderChanged)
	}
	for _, rs := range rd.ReadStates {
		if len(rs.RequestCtx) != 8 {
			continue
		}
		seq := binary.BigEndian.Uint64(rs.RequestCtx)
		if b, ok := r.mu.readSent[seq]; ok {
			delete(r.mu.readSent, seq)
			b.index = rs.Index
			r.mu.readWait = append(r.mu.readWait, b)
		}
	}
	r.releaseReadsLocked(r.applied.Load())
	if it.snapApplied {
		for idx := range r.mu.staged {
			if idx <= it.applied.Index {
				r.store.removeStaged(r.mu.staged[idx])
				delete(r.mu.staged, idx)
			}
		}
	}
	r.mu.Unlock()
}

// stepLocal hands raft the responses of a local storage write (append or
// apply) once the write is done: those to this node are stepped here, the
// others (a follower's acknowledgement, a vote) are sent.
func (r *Replica) stepLocal(msgs []*raftpb.Message) {
	if len(msgs) == 0 || r.broken.Load() {
		return
	}
	self := uint64(r.store.cfg.NodeID)
	var remote []*raftpb.Message
	for _, m := range msgs {
		if m.GetTo() != self {
			remote = append(remote, m)
		}
	}
	r.store.send(remote)
	func() {
		defer r.recoverRaftPanic()
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, m := range msgs {
			if m.GetTo() != self {
				continue
			}
			if err := r.mu.rn.Step(m); err != nil {
				r.store.log.Debug("raft step (local)", "range", r.id, "type", m.GetType(), "err", err)
			}
		}
	}()
	r.store.signal()
}

// truncateLog removes applied entries beyond the retained tail.
func (r *Replica) truncateLog() error {
	applied := r.log.Applied().Index
	keep := r.store.cfg.SnapshotThreshold / 2
	if applied <= keep {
		return nil
	}
	b := r.store.db.NewBatch()
	defer b.Close()
	t, err := r.log.StageTruncate(b, applied-keep)
	if err != nil {
		return err
	}
	if err := storage.Commit(b, pebble.NoSync); err != nil {
		return &StorageError{Err: fmt.Errorf("truncate log: %w", err)}
	}
	r.log.SetTruncated(t)
	return nil
}

// applyConfChange applies a committed membership change.
func (r *Replica) applyConfChange(b *pebble.Batch, it *readyItem, e *raftpb.Entry) (*raftpb.ConfState, error) {
	var cc raftpb.ConfChangeI
	var ctxBytes []byte
	if e.GetType() == raftpb.EntryType_EntryConfChange {
		var c1 raftpb.ConfChange
		if err := proto.Unmarshal(e.GetData(), &c1); err != nil {
			return nil, fmt.Errorf("entry %d: conf change: %w", e.GetIndex(), err)
		}
		cc, ctxBytes = &c1, c1.GetContext()
	} else {
		var c2 raftpb.ConfChangeV2
		if err := proto.Unmarshal(e.GetData(), &c2); err != nil {
			return nil, fmt.Errorf("entry %d: conf change: %w", e.GetIndex(), err)
		}
		cc, ctxBytes = &c2, c2.GetContext()
	}
	cctx, err := decodeConfContext(ctxBytes)
	if err != nil {
		return nil, fmt.Errorf("entry %d: conf context: %w", e.GetIndex(), err)
	}
	r.mu.Lock()
	cs := r.mu.rn.ApplyConfChange(cc)
	desc := r.mu.desc
	if it.newDesc != nil {
		desc = it.newDesc
	}
	r.mu.Unlock()
	nd := desc.Clone()
	nd.Generation++
	nd.Replicas = nd.Replicas[:0]
	addr := func(id uint64) string {
		if rep, ok := desc.Replica(storage.NodeID(id)); ok && rep.PeerAddr != "" {
			return rep.PeerAddr
		}
		if cctx.NodeID == id {
			return cctx.PeerAddr
		}
		return ""
	}
	for _, id := range cs.GetVoters() {
		nd.Replicas = append(nd.Replicas, storage.ReplicaDescriptor{NodeID: storage.NodeID(id), PeerAddr: addr(id)})
	}
	for _, id := range cs.GetLearners() {
		nd.Replicas = append(nd.Replicas, storage.ReplicaDescriptor{NodeID: storage.NodeID(id), PeerAddr: addr(id), Learner: true})
	}
	if err := storage.SetDescriptor(b, nd); err != nil {
		return nil, err
	}
	it.newDesc = nd
	if cctx.Proposer == uint64(r.store.cfg.NodeID) {
		r.mu.Lock()
		if p, ok := r.mu.proposals[cctx.ProposalID]; ok {
			delete(r.mu.proposals, cctx.ProposalID)
			it.completions = append(it.completions, completion{p: p, afterCommit: true})
		}
		r.mu.Unlock()
	}
	r.store.log.Info("membership changed", "range", r.id, "voters", cs.GetVoters(), "learners", cs.GetLearners(), "index", e.GetIndex())
	return cs, nil
}

package store

import (
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

	// Filled while staging, used after the batch commits.
	applied     storage.AppliedState
	appliedSet  bool
	snapApplied bool
	snapDesc    *storage.Descriptor
	completions []completion
	newDesc     *storage.Descriptor
	truncate    bool
	// splits are the splits the round applied (replica_split.go): their
	// right-hand ranges are created in afterCommit.
	splits []appliedSplit
}

type completion struct {
	p       *proposal
	replies []reply.Reply
	err     error
	// afterCommit: complete only once the round's batch is committed (a
	// membership change: its caller reads the new descriptor).
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
		_, err := s.processReadyGuarded()
		if err != nil {
			s.failFatal(err)
			return
		}
		if s.sched.len() > 0 {
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

// processReady handles one round for the replicas the scheduler holds
// (up to schedBatch of them; store_scheduler.go). It reports whether
// another round is already due.
func (s *Store) processReady() (more bool, err error) {
	start := time.Now()
	var items []*readyItem
	var buf [16]*Replica
	for _, r := range s.sched.take(schedBatch, buf[:0]) {
		if r.destroyed.Load() {
			continue
		}
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
		return s.sched.len() > 0, nil
	}
	s.cfg.Metrics.ReadyRounds.Inc()

	// A leader's messages may go out before its own fsync (Raft thesis
	// 10.2.1): followers persist in parallel with the leader, and nothing is
	// acknowledged to a client before this round's batch is durable, since
	// entries are applied in the same batch that persists them.
	// A follower's ReadIndex requests need nothing of the round's batch
	// either: they go now too, not after its fsync.
	var early []RaftMessage
	for _, it := range items {
		it.r.noteSent(it.rd.Messages)
		if it.leader {
			early = it.r.appendMessages(early, it.rd.Messages)
			it.rd.Messages = nil
			continue
		}
		keep := it.rd.Messages[:0]
		for _, m := range it.rd.Messages {
			if m.GetType() == raftpb.MessageType_MsgReadIndex {
				early = append(early, RaftMessage{Range: it.r.id, Msg: m})
			} else {
				keep = append(keep, m)
			}
		}
		it.rd.Messages = keep
	}
	s.send(early)

	batch := s.db.NewIndexedBatch()
	defer batch.Close()
	mustSync := false
	for _, it := range items {
		if err := it.r.stage(batch, it); err != nil {
			return false, fmt.Errorf("range %d: stage ready: %w", it.r.id, err)
		}
		mustSync = mustSync || it.rd.MustSync || it.snapApplied
	}
	// The waiters of the entries applied in this round get their replies
	// now, before the round's fsync: those entries are committed, that is
	// durable on a majority already, and applying them is deterministic,
	// so a crash before this batch commits re-applies them from the log to
	// the same result. What the batch's fsync covers is the round's new
	// entries (whose own waiters complete in a later round) and the
	// applied state; reads wait for it regardless (ReadBarrier waits for
	// the applied index, which moves in afterCommit). Under load this
	// takes one fsync off every write's latency.
	// The round's effects are taken first: a waiter that wants them acted
	// on (PUBLISH's receiver count) waits for the round the state machine
	// last handed over.
	effects := s.cfg.StateMachine.TakeEffects()
	for _, it := range items {
		it.completeEarly()
	}
	if !batch.Empty() {
		sync := mustSync && !s.cfg.UnsafeNoSync
		// storage.Commit: Pebble reports a failed WAL write or fsync through
		// Logger.Fatalf or a panic, never as a plain error (see
		// storage/fault.go). Of this round, only the entries that were
		// already committed (durable on a majority) were acknowledged
		// (completeEarly); the round's new entries were not, and neither is
		// a membership change (afterCommit is not reached).
		//
		// Reads need not wait for this round's fsync either: when early,
		// the batch goes into Pebble unsynced (readers of the DB see it),
		// the reads waiting for the entries it applies are released, and
		// then one empty synced record makes the whole batch durable
		// (Pebble's WAL is sequential: a synced record syncs every record
		// before it). What the reads see is what the completed writes did:
		// committed entries, durable on a majority. A crash before the sync
		// loses the batch here and the node applies them again from the log
		// (the leader: persisted in an earlier round; a follower: from the
		// leader); a read waits for the applied index, so it never sees
		// less. Under load a round's fsync is most of a lease read's wait
		// and a follower read's apply wait.
		early := sync && publishableEarly(items)
		opts := pebble.NoSync
		if sync && !early {
			opts = pebble.Sync
		}
		t := time.Now()
		if err := storage.Commit(batch, opts); err != nil {
			return false, &StorageError{Err: err}
		}
		s.cfg.StateMachine.Committed()
		if early {
			for _, it := range items {
				it.r.publishApplied(it)
			}
			t = time.Now()
			if err := storage.SyncWAL(s.db); err != nil {
				return false, &StorageError{Err: err}
			}
		}
		if mustSync {
			s.cfg.Metrics.FsyncDuration.Observe(time.Since(t).Seconds())
		}
	}
	// Committed: the node may act on what the round did (wake clients
	// blocked on the keys it wrote, deliver its messages). First, so that
	// this happens as early as the replies to the round's waiters.
	// A send that fits the backlog is never dropped, not even when Stop
	// races with this round: its waiters may have their replies already
	// (completeEarly), and what they did must still be acted on.
	if effects != nil {
		select {
		case s.effects <- effects:
		default:
			select {
			case s.effects <- effects:
			case <-s.stopper:
			}
		}
	}

	var msgs []RaftMessage
	for _, it := range items {
		it.r.afterCommit(it)
		msgs = it.r.appendMessages(msgs, it.rd.Messages)
	}
	s.send(msgs)
	for _, it := range items {
		func() {
			it.r.mu.Lock()
			defer it.r.mu.Unlock()
			it.r.mu.rn.Advance(it.rd)
			if it.r.mu.rn.HasReady() {
				more = true
				s.sched.add(it.r)
			}
		}()
		if it.truncate {
			if err := it.r.truncateLog(); err != nil {
				return false, err
			}
		}
	}
	s.cfg.Metrics.ReadyDuration.Observe(time.Since(start).Seconds())
	return more || s.sched.len() > 0, nil
}

// appendMessages appends the replica's messages to out, each with the
// replica's range: that is where its destination steps it.
func (r *Replica) appendMessages(out []RaftMessage, msgs []*raftpb.Message) []RaftMessage {
	for _, m := range msgs {
		out = append(out, RaftMessage{Range: r.id, Msg: m})
	}
	return out
}

func (s *Store) send(msgs []RaftMessage) {
	if len(msgs) == 0 {
		return
	}
	for _, m := range msgs {
		if m.Msg.GetType() == raftpb.MessageType_MsgSnap {
			s.cfg.Metrics.SnapshotsSent.Inc()
		}
	}
	s.cfg.Transport.Send(msgs)
}

// noteSent records the commit indexes msgs tell other nodes, before they
// are sent (see leaseReadIndexLocked).
func (r *Replica) noteSent(msgs []*raftpb.Message) {
	if len(msgs) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range msgs {
		r.noteSentLocked(m)
	}
}

// stage adds the replica's snapshot, entries, hard state and the writes of
// its committed entries to b.
func (r *Replica) stage(b *pebble.Batch, it *readyItem) error {
	rd := &it.rd
	if !raft.IsEmptySnap(rd.Snapshot) {
		if err := r.stageSnapshot(b, it); err != nil {
			return err
		}
	}
	if err := r.log.StageAppend(b, rd.Entries); err != nil {
		return err
	}
	if len(rd.Entries) > 0 {
		r.trackProposalIndexes(rd.Entries, it.leader)
	}
	if !raft.IsEmptyHardState(rd.HardState) {
		if err := storage.SetHardState(b, r.id, rd.HardState); err != nil {
			return err
		}
	}
	if len(rd.CommittedEntries) > 0 {
		return r.stageApply(b, it)
	}
	return nil
}

// trackProposalIndexes records at which index each local proposal landed, so
// that a different entry committed there proves the proposal lost.
func (r *Replica) trackProposalIndexes(ents []*raftpb.Entry, leader bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if leader {
		r.mu.appended = ents[len(ents)-1].GetIndex()
	}
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
func (r *Replica) stageApply(b *pebble.Batch, it *readyItem) error {
	self := uint64(r.store.cfg.NodeID)
	var last *raftpb.Entry
	cur := r.log.Applied()
	if it.snapApplied {
		cur = it.applied
	}
	cs := cur.ConfState
	desc := r.applyDesc(it)
	for _, e := range it.rd.CommittedEntries {
		if e.GetIndex() <= cur.Index {
			continue // already applied (e.g. covered by the snapshot)
		}
		last = e
		switch e.GetType() {
		case raftpb.EntryType_EntryNormal:
			if len(e.GetData()) == 0 {
				break // a new leader's empty entry
			}
			if e.GetData()[0] == entrySplit {
				if err := r.applySplit(b, it, e); err != nil {
					return err
				}
				desc = r.applyDesc(it)
				break
			}
			p, err := decodeEntry(e.GetData())
			if err != nil {
				return fmt.Errorf("entry %d: %w", e.GetIndex(), err)
			}
			seq := 0
			for _, pr := range p.props {
				replies := make([]reply.Reply, len(pr.cmds))
				for i, args := range pr.cmds {
					replies[i] = r.store.cfg.StateMachine.Apply(b, args, ApplyEnv{Now: p.ts, Index: e.GetIndex(), Seq: seq, Leader: it.leader, Range: r.id, Desc: desc})
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
			desc = r.applyDesc(it)
		}
		r.resolveIndex(it, e.GetIndex())
	}
	if last == nil {
		return nil
	}
	// Before completeEarly answers the round's waiters (see
	// leaseReadIndexLocked).
	r.mu.Lock()
	r.mu.acked = max(r.mu.acked, last.GetIndex())
	r.mu.Unlock()
	it.applied = storage.AppliedState{Index: last.GetIndex(), Term: last.GetTerm(), ConfState: cs}
	it.appliedSet = true
	r.store.cfg.Metrics.EntriesApplied.Add(float64(len(it.rd.CommittedEntries)))
	_, _, trunc, _ := r.log.State()
	if th := r.store.cfg.SnapshotThreshold; th > 0 && last.GetIndex()-trunc.Index > th {
		it.truncate = true
	}
	if r.noteApplied(it.rd.CommittedEntries) {
		it.truncate = true
	}
	return storage.SetAppliedState(b, r.id, it.applied)
}

// applyDesc is the descriptor the replica has at this point of the
// round's apply: one a conf change of the round wrote, else the one the
// round's snapshot installed, else the replica's. Descriptors are
// replaced, never changed in place, so it is shared, not copied.
func (r *Replica) applyDesc(it *readyItem) *storage.Descriptor {
	if it.newDesc != nil {
		return it.newDesc
	}
	if it.snapApplied && it.snapDesc != nil {
		return it.snapDesc
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.desc
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

// publishableEarly reports whether the round's applied state may be shown
// to reads before its fsync: not when it installs a snapshot or changes
// the membership (both also change what the replica is, and stay in
// afterCommit).
func publishableEarly(items []*readyItem) bool {
	for _, it := range items {
		if it.snapApplied || it.newDesc != nil {
			return false
		}
	}
	return true
}

// publishApplied moves the applied index reads wait for to what the round
// applied, once its batch is in Pebble (not yet synced: see processReady),
// and releases the reads waiting for it.
func (r *Replica) publishApplied(it *readyItem) {
	if !it.appliedSet {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.applied.Store(it.applied.Index)
	r.releaseReadsLocked(it.applied.Index)
}

// afterCommit updates in-memory state once the round's batch is durable and
// completes waiters. Runs before messages are sent and before Advance.
func (r *Replica) afterCommit(it *readyItem) {
	rd := &it.rd
	if it.snapApplied {
		r.log.ApplySnapshot(rd.Snapshot.GetMetadata(), it.applied)
		r.store.cfg.Metrics.SnapshotsRecv.Inc()
		r.forgetSizes(it.applied.Index)
	}
	r.log.Append(rd.Entries)
	if !raft.IsEmptyHardState(rd.HardState) {
		r.log.SetHardState(rd.HardState)
	}
	if it.appliedSet {
		r.log.SetApplied(it.applied)
	}
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
		r.mu.Lock()
		old := r.mu.desc
		r.mu.desc = desc
		slotsMoved := slotsChanged(old, desc)
		var gone []storage.NodeID
		for _, rep := range old.Replicas {
			if _, ok := desc.Replica(rep.NodeID); !ok && rep.NodeID != r.store.cfg.NodeID {
				gone = append(gone, rep.NodeID)
			}
		}
		r.mu.Unlock()
		r.store.forgetPeers(gone)
		// No replica lock is held here (rebuildSlots takes Store.mu, then
		// each replica's). Before the round's messages go out: a client
		// told of the split must find the new slot table.
		if len(it.splits) > 0 {
			r.afterSplits(it)
		} else if slotsMoved {
			r.store.RefreshSlots()
		}
	}
	// Only now the applied index moves (publishableEarly kept this
	// round's from moving earlier): a read its barrier releases must find
	// the new descriptor, the split's right-hand range and the new slot
	// table. Released with the old descriptor, it would read a key this
	// range no longer owns as of this node's apply of this range, not of
	// the range that owns it now: the torture's split fault found such
	// stale reads on a node catching up across a split.
	if it.appliedSet {
		r.applied.Store(it.applied.Index)
	}

	r.mu.Lock()
	if rd.SoftState != nil && rd.SoftState.Lead != r.mu.leader {
		r.mu.leader = rd.SoftState.Lead
		// Read rounds sent to the old leader will never be answered.
		r.failReadsLocked(ErrLeaderChanged)
	}
	for _, rs := range rd.ReadStates {
		r.readAnsweredLocked(rs.RequestCtx, rs.Index)
	}
	r.releaseAnsweredLocked()
	for idx := range it.r.mu.staged {
		if it.snapApplied && idx <= it.applied.Index {
			r.store.removeStaged(r.mu.staged[idx])
			delete(r.mu.staged, idx)
		}
	}
	r.mu.Unlock()
	// After the descriptor is installed: a membership change's caller
	// reads the new one.
	for _, c := range it.completions {
		if c.afterCommit {
			c.p.finish(c.replies, c.err)
		}
	}
	if it.appliedSet {
		r.store.releasePlaceholder(r.id, it.applied.Index)
	}
}

// truncateLog removes applied entries beyond the retained tail: the
// newest SnapshotThreshold/2 entries, or fewer when they hold more than
// the log's byte budget (truncateIndex).
func (r *Replica) truncateLog() error {
	applied := r.log.Applied().Index
	index := r.truncateIndex(applied)
	if index == 0 {
		r.sizeTruncated()
		return nil
	}
	b := r.store.db.NewBatch()
	defer b.Close()
	t, err := r.log.StageTruncate(b, index)
	if err != nil {
		return err
	}
	if err := storage.Commit(b, pebble.NoSync); err != nil {
		return &StorageError{Err: fmt.Errorf("truncate log: %w", err)}
	}
	r.log.SetTruncated(t)
	r.savedAt.Store(time.Now().UnixNano())
	r.forgetSizes(t.Index)
	r.sizeTruncated()
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

package store

import (
	"slices"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"

	"github.com/kvorum/kvorum/internal/storage"
)

// Quiescence (docs/ranges.md §3.4): an idle range stops ticking, so that a
// node hosting thousands of idle ranges spends nothing on them per tick.
//
// A leader quiesces (tick, maybeQuiesceLocked) when, for quiesceIdleTicks
// ticks in a row, it has nothing in flight (no pending or unapplied
// proposals, no reads, no lease renewal, no leadership transfer),
// applied == commit == lastIndex and every member's Match is
// lastIndex; never range 1 (leases, locks and liveness live there). It
// then stops ticking and sends each follower a MsgQuiesce: its own
// MsgHeartbeat (term, commit) with the store-level kind storage.MsgQuiesce
// (the transport's v=3 frame; raftpb is left alone, and the heartbeat has
// no context, so ReadIndex's heartbeat contexts are untouched). The
// follower steps the heartbeat (which resets its election timer and brings
// its commit index up to the leader's) and stops ticking if it is a
// follower of that leader in that term with commit == lastIndex ==
// the message's commit and no reads or proposals waiting.
//
// A quiesced replica wakes (starts ticking again) on a proposal, a read, a
// conf change, a leadership transfer, or any message stepped into it except
// a heartbeat response (the answers to the quiesce message itself) and
// another quiesce message. Followers whose quiesce message was lost keep
// ticking; their campaign wakes the leader, which then heartbeats again.
//
// Leader failure: quiesced followers hear no heartbeats, so the store
// watches its peers instead. Every message received counts as a sign of
// life of its sender (Store.noteHeard), and a store that hosts a range
// other than range 1 (one that may quiesce) sends every peer one
// MsgLiveness per tick. A node silent for
// ElectionTicks of this store's ticks is down for this purpose: every
// quiesced replica it leads wakes and ticks ElectionTicks times at once,
// so that its election timer has run out (raft's inLease no longer rejects
// votes) and it campaigns within its randomized timeout. That is raft's
// own CheckQuorum rule, measured in the follower's ticks from the last
// thing it heard from the leader (which is no earlier than any heartbeat
// the leader's lease rests on), so lease.go's argument holds. A quiesced
// leader keeps no lease: the lease is timed on the monotonic clock and runs
// out while it is quiesced, and any read wakes the range.

// quiesceIdleTicks is how many ticks in a row a leader must find its range
// idle before it quiesces: the heartbeat of the first carries the final
// commit index to the followers.
const quiesceIdleTicks = 2

// Quiesced reports whether the replica has stopped ticking.
func (r *Replica) Quiesced() bool { return r.quiesced.Load() }

// wakeLocked makes a quiesced replica tick again.
// REQUIRES: r.mu held.
func (r *Replica) wakeLocked() {
	r.mu.idleTicks = 0
	if r.quiesced.Load() {
		r.quiesced.Store(false)
		r.store.quiescedCount.Add(-1)
	}
}

func (r *Replica) quiesceLocked() {
	r.mu.idleTicks = 0
	if !r.quiesced.Load() {
		r.quiesced.Store(true)
		r.store.quiescedCount.Add(1)
	}
}

// wakesLocked reports whether stepping m into the quiesced replica wakes
// it: not an answer to a heartbeat (unless it carries a ReadIndex
// round's context), nor a heartbeat of its leader that tells it nothing
// new (one sent before the quiesce message, arriving after it).
// REQUIRES: r.mu held.
func (r *Replica) wakesLocked(m *raftpb.Message) bool {
	switch m.GetType() {
	case raftpb.MessageType_MsgHeartbeatResp:
		return len(m.GetContext()) > 0
	case raftpb.MessageType_MsgHeartbeat:
		st := r.mu.rn.BasicStatus()
		return len(m.GetContext()) > 0 || st.RaftState != raft.StateFollower || st.Lead != m.GetFrom() ||
			st.GetTerm() != m.GetTerm() || st.GetCommit() != m.GetCommit()
	}
	return true
}

// maybeQuiesceLocked runs before a leader's tick: it quiesces an idle range
// and returns the quiesce messages for its followers.
// REQUIRES: r.mu held.
func (r *Replica) maybeQuiesceLocked() []RaftMessage {
	if r.id == 1 || r.store.cfg.DisableQuiesce {
		return nil
	}
	st := r.mu.rn.BasicStatus()
	if st.RaftState != raft.StateLeader || st.LeadTransferee != 0 ||
		len(r.mu.pending) > 0 || len(r.mu.proposals) > 0 ||
		len(r.mu.readQueue) > 0 || len(r.mu.readSent) > 0 || len(r.mu.readWait) > 0 ||
		r.mu.lease.renew {
		r.mu.idleTicks = 0
		return nil
	}
	last, _ := r.log.LastIndex()
	if st.GetCommit() != last || r.applied.Load() != last {
		r.mu.idleTicks = 0
		return nil
	}
	caughtUp := true
	var peers []uint64
	r.mu.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if pr.Match != last {
			caughtUp = false
		}
		if id != st.ID {
			peers = append(peers, id)
		}
	})
	if !caughtUp {
		r.mu.idleTicks = 0
		return nil
	}
	r.mu.idleTicks++
	if r.mu.idleTicks < quiesceIdleTicks {
		return nil
	}
	r.quiesceLocked()
	msgs := make([]RaftMessage, 0, len(peers))
	for _, id := range peers {
		hb := &raftpb.Message{
			Type: raftpb.MessageType_MsgHeartbeat.Enum(), From: ptr(st.ID), To: ptr(id),
			Term: ptr(st.GetTerm()), Commit: ptr(last),
		}
		r.noteSentLocked(hb)
		msgs = append(msgs, RaftMessage{Range: r.id, Msg: hb, Kind: storage.MsgQuiesce})
	}
	return msgs
}

// stepQuiesce steps a leader's quiesce message and quiesces the follower
// if it agrees with the leader.
func (r *Replica) stepQuiesce(m *raftpb.Message) {
	if r.broken.Load() {
		return
	}
	defer r.recoverRaftPanic()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.mu.rn.Step(m); err != nil {
		return
	}
	if r.id == 1 || r.store.cfg.DisableQuiesce {
		return
	}
	st := r.mu.rn.BasicStatus()
	last, _ := r.log.LastIndex()
	if st.RaftState == raft.StateFollower && st.Lead == m.GetFrom() && st.GetTerm() == m.GetTerm() &&
		st.GetCommit() == m.GetCommit() && last == m.GetCommit() &&
		len(r.mu.pending) == 0 && len(r.mu.readQueue) == 0 && len(r.mu.readSent) == 0 {
		r.quiesceLocked()
	}
}

// noteHeard records that a message from node from arrived.
func (s *Store) noteHeard(from uint64) {
	if from == 0 || !s.quiescible.Load() {
		return
	}
	t := s.ticks.Load()
	s.heard.mu.Lock()
	s.heard.at[from] = t
	s.heard.mu.Unlock()
}

// silentNodes returns the nodes not heard from for ElectionTicks ticks,
// and whether any of them only now became silent.
func (s *Store) silentNodes() (silent map[uint64]bool, fresh bool) {
	now := s.ticks.Load()
	et := uint64(max(s.cfg.ElectionTicks, 1))
	s.heard.mu.Lock()
	defer s.heard.mu.Unlock()
	for id, at := range s.heard.at {
		if now-at < et {
			continue
		}
		if silent == nil {
			silent = map[uint64]bool{}
		}
		silent[id] = true
		if now-at == et {
			fresh = true
		}
	}
	return silent, fresh
}

// wakeLedBy wakes every quiesced replica led by a silent node and ticks it
// through an election timeout (see the comment at the top).
func (s *Store) wakeLedBy(silent map[uint64]bool) {
	for _, r := range s.replicaList() {
		if !r.quiesced.Load() || r.broken.Load() {
			continue
		}
		woke := func() bool {
			defer r.recoverRaftPanic()
			r.mu.Lock()
			defer r.mu.Unlock()
			st := r.mu.rn.BasicStatus()
			if !r.quiesced.Load() || st.RaftState == raft.StateLeader || !silent[st.Lead] {
				return false
			}
			r.wakeLocked()
			for i := 0; i < s.cfg.ElectionTicks; i++ {
				r.mu.rn.Tick()
			}
			return true
		}()
		if woke {
			r.enqueue()
		}
	}
}

// liveness returns this store's liveness messages for its peers: none
// while it hosts range 1 only, which never quiesces (a one-range cluster
// sends what it always did).
func (s *Store) liveness() []RaftMessage {
	peers := s.peers.Load()
	if peers == nil || len(*peers) == 0 {
		return nil
	}
	self := uint64(s.cfg.NodeID)
	out := make([]RaftMessage, 0, len(*peers))
	for _, id := range *peers {
		out = append(out, RaftMessage{Range: 1, Kind: storage.MsgLiveness, Msg: &raftpb.Message{
			Type: raftpb.MessageType_MsgHeartbeat.Enum(), From: ptr(self), To: ptr(id),
		}})
	}
	return out
}

// refreshPeers recomputes the peers liveness messages go to: every other
// node of any range, when the store hosts a range other than range 1 (one
// that may quiesce). It forgets when it last heard from nodes that are no
// longer peers.
func (s *Store) refreshPeers() {
	list := s.replicaList()
	var ids []uint64
	quiescible := false
	for _, r := range list {
		quiescible = quiescible || r.id != 1
	}
	s.quiescible.Store(quiescible && !s.cfg.DisableQuiesce)
	if quiescible && !s.cfg.DisableQuiesce {
		seen := map[storage.NodeID]bool{s.cfg.NodeID: true}
		for _, r := range list {
			r.mu.Lock()
			for _, rep := range r.mu.desc.Replicas {
				if !seen[rep.NodeID] {
					seen[rep.NodeID] = true
					ids = append(ids, uint64(rep.NodeID))
				}
			}
			r.mu.Unlock()
		}
	}
	s.peers.Store(&ids)
	s.heard.mu.Lock()
	for id := range s.heard.at {
		if !slices.Contains(ids, id) {
			delete(s.heard.at, id)
		}
	}
	s.heard.mu.Unlock()
}

// QuiescedReplicas returns how many of the store's replicas are quiesced.
func (s *Store) QuiescedReplicas() int { return int(s.quiescedCount.Load()) }

// TickedLast returns how many replicas the last Tick ticked.
func (s *Store) TickedLast() int { return int(s.tickedLast.Load()) }

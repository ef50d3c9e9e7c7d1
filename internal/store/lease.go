package store

import (
	"bytes"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Leader leases (Config.LeaseReads).
//
// A leader that holds a lease serves a linearizable read without any Raft
// message: the read index is its own commit index. The lease rests on
// raft's CheckQuorum rule (raft's inLease): a follower that heard from the
// leader less than ElectionTicks ticks ago ignores MsgVote and MsgPreVote
// (unless they belong to a leadership transfer). So once a quorum has
// acknowledged a message the leader sent at time T, no other leader can be
// elected before T + electionTimeout, measured on the clocks of that
// quorum; until then this leader's commit index covers every committed
// entry.
//
// Acquisition and renewal use raft's own ReadIndex: a ReadIndex request
// issued by the leader at T (monotonic clock, time.Now) is answered only
// after a quorum acknowledged a heartbeat that carries it, and only after
// the leader committed an entry of its term. When its ReadState is
// released, the lease runs until T + leaseDuration(). Every ReadIndex the
// leader issues for queued reads counts as such a probe; and a read that
// finds less than half of the lease left asks for a probe of its own in
// the next Ready round (issueReadsLocked), so a steady read load renews
// the lease ahead of expiry and never waits for a probe.
//
// The lease is kept per term and checked under Replica.mu at every read:
// a different term, not leading, or a leadership transfer under way
// (BasicStatus().LeadTransferee != 0) means no lease. A transfer also
// forfeits leases for the rest of the term (noLeaseTerm): the target's
// vote requests are forced past the followers' inLease check, and one
// delayed in the network may still win after an aborted transfer.
//
// The restart hole: a node that restarts forgets the leader it heard
// from (raft's lead is None), so raft would grant its vote at once,
// although its acknowledgement before the restart may be part of the
// quorum behind a lease still running. So a replica drops MsgVote and
// MsgPreVote during the first electionTimeout after it was created (a
// restart, or a node newly added), except the forced votes of a
// leadership transfer (see votesDelayed). A replica whose persisted term
// is still the bootstrap term (a brand-new cluster, or a new node that
// never heard from a leader) has never acknowledged a leader, since a
// follower persists a new term before any reply in it goes out: it needs
// no delay, so a new cluster elects its first leader as fast as before.
// Its own campaigns are never delayed. The rule holds whatever
// Config.LeaseReads says, so that a cluster switched node by node stays
// safe.

// leaseDriftPercent is the share of the election timeout the lease gives
// up for clock-rate drift: a follower counts the election timeout in ticks
// of its own ticker, and the leader times its lease with its own
// monotonic clock; the lease stays safe as long as no follower's ticks
// run more than this much faster than the leader's clock. Quartz clocks
// differ by parts per million, and a late or stalled ticker only makes a
// follower wait longer, so 10% is a wide margin.
const leaseDriftPercent = 10

// electionTimeout is the base election timeout in real time: ElectionTicks
// × TickInterval (0 without a ticker: no leases, no vote delay).
func (s *Store) electionTimeout() time.Duration {
	return time.Duration(s.cfg.ElectionTicks) * s.cfg.TickInterval
}

// leaseDuration is how long after sending a probe at T the leader may
// serve lease reads: electionTimeout minus the drift margin
// (leaseDriftPercent of it) minus one tick, since a follower's first tick
// may come right after the heartbeat that reset its election timer, so
// ElectionTicks ticks can take as little as (ElectionTicks−1) ×
// TickInterval. 0 means no leases.
func (s *Store) leaseDuration() time.Duration {
	if !s.cfg.LeaseReads {
		return 0
	}
	et := s.electionTimeout()
	d := et - et*leaseDriftPercent/100 - s.cfg.TickInterval
	if d <= 0 {
		return 0
	}
	return d
}

// leaseState is a replica's lease, under Replica.mu.
type leaseState struct {
	// term is the term the lease was granted in (0: none); expires is the
	// end of it on the monotonic clock.
	term    uint64
	expires time.Time
	// noLeaseTerm: a leadership transfer began in this term.
	noLeaseTerm uint64
	// floor is the commit index when the lease of term was granted: at
	// least the term's first entry, so above every entry an earlier
	// leader can have acknowledged (raft answers a ReadIndex only once the
	// leader committed an entry of its term).
	floor uint64
	// probeSent is when the probe in flight was issued, in probeTerm
	// (zero: none in flight).
	probeSent time.Time
	probeTerm uint64
	// renew: a read found less than half of the lease left; the next
	// Ready round issues a probe.
	renew bool
}

// campaignTransferCtx is the Context raft puts on the MsgVote of a
// leadership transfer (raft's campaignTransfer; unexported there). Raft
// forces those votes past its inLease check, and so does votesDelayed.
const campaignTransferCtx = "CampaignTransfer"

// votesDelayed reports whether m is a vote request this replica must drop
// because it was created less than an electionTimeout ago (see the
// restart hole above).
// REQUIRES: r.mu held (voteDelayUntil is set before the replica is shared).
func (r *Replica) votesDelayed(m *raftpb.Message) bool {
	t := m.GetType()
	if t != raftpb.MessageType_MsgVote && t != raftpb.MessageType_MsgPreVote {
		return false
	}
	if r.voteDelayUntil.IsZero() || bytes.Equal(m.GetContext(), []byte(campaignTransferCtx)) {
		return false
	}
	return r.store.mono().Before(r.voteDelayUntil)
}

// leaseIndexLocked returns the index a read may use under the lease: the
// leader's commit index capped at what anyone may have seen of it
// (leaseReadIndexLocked), if this replica leads and holds a valid lease in
// its term (ok). renew reports that the lease needs a probe in the next
// Ready round (the caller signals the Ready loop).
// REQUIRES: r.mu held.
func (r *Replica) leaseIndexLocked() (index, term uint64, ok, renew bool) {
	l := &r.mu.lease
	if l.term == 0 {
		return 0, 0, false, false
	}
	st := r.mu.rn.BasicStatus()
	now := r.store.mono()
	if st.RaftState != raft.StateLeader || st.GetTerm() != l.term || st.LeadTransferee != raft.None {
		l.term = 0
		return 0, 0, false, false
	}
	left := l.expires.Sub(now)
	if left <= 0 {
		l.term = 0
		return 0, 0, false, false
	}
	if left < r.store.leaseDuration()/2 && !l.renew && !r.probeInFlightLocked(l.term, now) {
		l.renew, renew = true, true
	}
	return r.leaseReadIndexLocked(st.GetCommit()), l.term, true, renew
}

// leaseReadLocked serves a read from the lease if this replica holds one:
// ok reports that it does; then b is nil if the read may run at once, or a
// batch in readWait to wait for (the read index is not applied yet).
// REQUIRES: r.mu held.
func (r *Replica) leaseReadLocked() (b *readBatch, ok, renew bool) {
	index, _, ok, renew := r.leaseIndexLocked()
	if !ok {
		return nil, false, false
	}
	if r.applied.Load() >= index {
		return nil, true, renew
	}
	b = &readBatch{done: make(chan struct{}), index: index}
	r.mu.readWait = append(r.mu.readWait, b)
	return b, true, renew
}

// leaseReadIndexLocked is the index a read on the lease holder waits for:
// the commit index, or less when the newest committed entries have not
// been seen by anyone yet. Linearizability needs the read to reflect every
// entry whose effects anyone may have seen when the read arrives: entries
// this replica applied and may have acknowledged (acked: a waiter is
// answered in the round that applies its entry, before that round's batch
// is durable and before the applied index moves), entries another node may
// have applied or read at (sentCommit: followers apply only up to a commit
// index the leader sent them, and a follower's ReadIndex answer carries
// the index it reads at), and entries an earlier leader may have
// acknowledged (the lease's floor). Entries committed after all those, by
// an acknowledgement that arrived during this round, have been seen by
// nobody: the read is ordered before them and waits only for the round in
// progress, not for the next one as well (a round is an fsync: under
// writes this takes about one fsync off a read on the leader).
// REQUIRES: r.mu held, a valid lease (called by leaseIndexLocked).
func (r *Replica) leaseReadIndexLocked(commit uint64) uint64 {
	seen := max(r.mu.lease.floor, r.mu.sentCommit, r.mu.acked)
	return min(commit, seen)
}

// noteSentLocked records the commit index that message m tells another
// node, before it is sent (see leaseReadIndexLocked).
// REQUIRES: r.mu held.
func (r *Replica) noteSentLocked(m *raftpb.Message) {
	idx := m.GetCommit()
	switch m.GetType() {
	case raftpb.MessageType_MsgReadIndexResp:
		idx = max(idx, m.GetIndex())
	case raftpb.MessageType_MsgSnap:
		idx = max(idx, m.GetSnapshot().GetMetadata().GetIndex())
	}
	if idx > r.mu.sentCommit {
		r.mu.sentCommit = idx
	}
}

// answerReadIndexLocked answers a follower's ReadIndex request (m, a
// MsgReadIndex from another node) from the lease, as raft's leader would
// after a heartbeat quorum: a MsgReadIndexResp in this term with the
// index a read here would wait for (leaseReadIndexLocked: the follower's
// read must reflect what anyone may have seen when the request arrived,
// no more) and the request's context. ok=false: no lease, step m into
// raft (which confirms leadership with a heartbeat round).
// REQUIRES: r.mu held.
func (r *Replica) answerReadIndexLocked(m *raftpb.Message) (resp *raftpb.Message, renew, ok bool) {
	if len(m.GetEntries()) != 1 || m.GetFrom() == uint64(r.store.cfg.NodeID) {
		return nil, false, false
	}
	index, term, ok, renew := r.leaseIndexLocked()
	if !ok {
		return nil, false, false
	}
	resp = &raftpb.Message{
		Type:    raftpb.MessageType_MsgReadIndexResp.Enum(),
		To:      proto.Uint64(m.GetFrom()),
		From:    proto.Uint64(uint64(r.store.cfg.NodeID)),
		Term:    proto.Uint64(term),
		Index:   proto.Uint64(index),
		Entries: m.GetEntries(),
	}
	return resp, renew, true
}

// acquireLeaseLocked asks for a lease probe in the next Ready round when
// this replica may hold a lease but holds none and has no probe in flight
// (true: the caller signals the Ready loop). A follower's ReadIndex that
// found no lease calls it: the request itself takes raft's heartbeat
// round, and the follower's next ones are answered from the lease. A
// leader that serves no reads of its own would otherwise never acquire
// one, and every follower read would pay a heartbeat round to a quorum
// (idle cluster, GETs on a follower only, one client: 0.44 ms per
// ReadIndex round trip against 0.1-0.2 ms from the lease).
// REQUIRES: r.mu held.
func (r *Replica) acquireLeaseLocked() bool {
	l := &r.mu.lease
	st := r.mu.rn.BasicStatus()
	if l.renew || !r.mayLeaseLocked(&st) || r.probeInFlightLocked(st.GetTerm(), r.store.mono()) {
		return false
	}
	if l.term == st.GetTerm() && l.expires.After(r.store.mono()) {
		return false // a lease is held: answerReadIndexLocked declined for another reason
	}
	l.renew = true
	return true
}

// mayLeaseLocked reports whether a replica in state st may hold a lease:
// leases are on, it leads, no leadership transfer is under way and it did
// not give up leases for this term (probes are marked, and answered
// probes extend the lease, only then).
// REQUIRES: r.mu held.
func (r *Replica) mayLeaseLocked(st *raft.BasicStatus) bool {
	return r.store.leaseDuration() > 0 && st.RaftState == raft.StateLeader &&
		st.LeadTransferee == raft.None && st.GetTerm() != r.mu.lease.noLeaseTerm
}

// leaseProbeLocked marks b, about to be sent as a ReadIndex request, as a
// lease probe if this replica leads and may hold a lease in its term.
// REQUIRES: r.mu held.
func (r *Replica) leaseProbeLocked(b *readBatch, st *raft.BasicStatus, now time.Time) {
	if !r.mayLeaseLocked(st) {
		return
	}
	b.probe, b.probeSent, b.probeTerm = true, now, st.GetTerm()
	r.mu.lease.probeSent, r.mu.lease.probeTerm = now, st.GetTerm()
}

// probeInFlightLocked reports whether a probe of the current term is in
// flight and not older than a lease (raft keeps an unanswered ReadIndex
// and answers it with a later heartbeat quorum, but never after a leader
// change, which also changes the term).
// REQUIRES: r.mu held.
func (r *Replica) probeInFlightLocked(term uint64, now time.Time) bool {
	l := &r.mu.lease
	return !l.probeSent.IsZero() && l.probeTerm == term && now.Sub(l.probeSent) < r.store.leaseDuration()
}

// probeAnsweredLocked extends the lease once the ReadState of a probe sent
// at b.probeSent in b.probeTerm came back.
// REQUIRES: r.mu held.
func (r *Replica) probeAnsweredLocked(b *readBatch) {
	l := &r.mu.lease
	if l.probeTerm == b.probeTerm && !l.probeSent.After(b.probeSent) {
		l.probeSent = time.Time{}
	}
	st := r.mu.rn.BasicStatus()
	if st.GetTerm() != b.probeTerm || !r.mayLeaseLocked(&st) {
		return
	}
	exp := b.probeSent.Add(r.store.leaseDuration())
	if l.term != b.probeTerm {
		l.floor = max(st.GetCommit(), b.index)
	}
	if l.term != b.probeTerm || exp.After(l.expires) {
		l.term, l.expires = b.probeTerm, exp
	}
}

// dropLeaseLocked forfeits the lease for the rest of term (a leadership
// transfer begins).
// REQUIRES: r.mu held.
func (r *Replica) dropLeaseLocked(term uint64) {
	r.mu.lease.term = 0
	r.mu.lease.noLeaseTerm = term
	r.mu.lease.renew = false
}

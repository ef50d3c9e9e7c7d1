package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/kvorum/kvorum/internal/storage"
)

// Membership errors.
var (
	ErrMemberExists   = errors.New("store: node is already a member")
	ErrMemberNotFound = errors.New("store: node is not a member")
)

// proposeConfChange proposes cc (its Context is filled here) and waits until
// it is applied on this replica.
func (r *Replica) proposeConfChange(ctx context.Context, cc *raftpb.ConfChangeV2, target uint64, addr string) error {
	r.mu.Lock()
	r.wakeLocked()
	st := r.mu.rn.BasicStatus()
	if st.RaftState != raft.StateLeader {
		r.mu.Unlock()
		return r.notLeader(st.Lead, r.mu.desc)
	}
	p := &proposal{id: r.nextProposalIDLocked(), done: make(chan struct{})}
	cctx := &confContext{ProposalID: p.id, Proposer: uint64(r.store.cfg.NodeID), NodeID: target, PeerAddr: addr}
	cc.Context = cctx.encode()
	if err := r.mu.rn.ProposeConfChange(cc); err != nil {
		r.mu.Unlock()
		return fmt.Errorf("%w: %v", ErrProposalDropped, err)
	}
	r.mu.proposals[p.id] = p
	r.mu.Unlock()
	r.enqueue()
	_, err := r.wait(ctx, p)
	return err
}

func confChange(t raftpb.ConfChangeType, id uint64) *raftpb.ConfChangeV2 {
	return &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{{Type: &t, NodeId: &id}}}
}

// AddMember adds node id as a learner, waits until it has caught up with
// the leader's log, then promotes it to voter. It must run on the leader.
// If the node is already a learner it resumes at the catch-up step.
func (r *Replica) AddMember(ctx context.Context, id uint64, addr string) error {
	desc := r.Descriptor()
	if rep, ok := desc.Replica(storage.NodeID(id)); ok && !rep.Learner {
		return ErrMemberExists
	} else if !ok {
		if err := r.proposeConfChange(ctx, confChange(raftpb.ConfChangeType_ConfChangeAddLearnerNode, id), id, addr); err != nil {
			return fmt.Errorf("add learner %d: %w", id, err)
		}
	}
	// Catch-up: the learner's match index must reach the leader's commit
	// index (as of a moment after the learner was added).
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		st := r.Status()
		if st.Role != "leader" {
			return r.notLeader(st.Leader, st.Descriptor)
		}
		if pr, ok := st.Progress[id]; ok && pr.Match >= st.Commit {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %d is a learner but did not catch up in time (is it running and reachable at %s?): %w", id, addr, ctx.Err())
		case <-tick.C:
		}
	}
	if err := r.proposeConfChange(ctx, confChange(raftpb.ConfChangeType_ConfChangeAddNode, id), id, addr); err != nil {
		return fmt.Errorf("promote %d: %w", id, err)
	}
	return nil
}

// RemoveMember removes node id. It must run on the leader.
func (r *Replica) RemoveMember(ctx context.Context, id uint64) error {
	if _, ok := r.Descriptor().Replica(storage.NodeID(id)); !ok {
		return ErrMemberNotFound
	}
	return r.proposeConfChange(ctx, confChange(raftpb.ConfChangeType_ConfChangeRemoveNode, id), id, "")
}

// TransferLeader asks raft to hand leadership to id and waits until a
// leader other than this node is known (id, normally).
func (r *Replica) TransferLeader(ctx context.Context, id uint64) error {
	rep, ok := r.Descriptor().Replica(storage.NodeID(id))
	if !ok {
		return ErrMemberNotFound
	}
	if rep.Learner {
		return fmt.Errorf("store: node %d is a learner and cannot lead", id)
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		r.mu.Lock()
		r.wakeLocked()
		st := r.mu.rn.BasicStatus()
		if st.Lead == id {
			r.mu.Unlock()
			return nil
		}
		if st.RaftState == raft.StateLeader && st.LeadTransferee != id {
			// No lease reads from now on in this term (lease.go).
			r.dropLeaseLocked(st.GetTerm())
			r.mu.rn.TransferLeader(id)
		} else if st.RaftState != raft.StateLeader && st.Lead != 0 && st.Lead != id && st.Lead != uint64(r.store.cfg.NodeID) {
			r.mu.Unlock()
			return fmt.Errorf("store: leadership went to %d instead of %d", st.Lead, id)
		}
		r.mu.Unlock()
		r.enqueue()
		select {
		case <-ctx.Done():
			return fmt.Errorf("transfer leadership to %d: %w", id, ctx.Err())
		case <-tick.C:
		}
	}
}

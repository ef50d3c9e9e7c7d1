package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/kvorum/kvorum/internal/storage"
)

// Split errors. Each is decided at apply time from the entry and the
// descriptor every replica has at that point, so all replicas agree; the
// proposer also checks them before proposing.
var (
	// ErrSplitStaleGeneration: the range changed (split, membership)
	// since the caller read its descriptor; re-read it and retry.
	ErrSplitStaleGeneration = errors.New("store: split: stale range generation")
	// ErrSplitSlotOutside: the split slot is not strictly inside the
	// range's slot interval (a split at its start would leave an empty
	// left-hand range).
	ErrSplitSlotOutside = errors.New("store: split: slot not strictly inside the range")
	// ErrSplitRangeExists: the right-hand range id is already in use.
	ErrSplitRangeExists = errors.New("store: split: right-hand range id already exists")
)

// SplitCopier is optionally implemented by a StateMachine that gives the
// right-hand range of a split more than the copy of the left-hand range's
// replicated range-local keys. SplitCopy runs at the split entry's apply,
// on every replica, and writes into b (which holds the round's earlier
// writes): it must be deterministic, a function of the replicated state
// of lhs's log alone.
type SplitCopier interface {
	SplitCopy(b *pebble.Batch, lhs, rhs storage.RangeID) error
}

// appliedSplit is one split a round applied: the RHS is created in
// afterCommit, and then the proposer's waiter (if local) completes.
type appliedSplit struct {
	rhs  *storage.Descriptor
	prop *proposal
	// existed: the RHS was already initialized on this store (see
	// applySplit); nothing is created.
	existed bool
}

// Split splits the range at slot: it keeps [StartSlot, slot) and a new
// range rhs takes [slot, EndSlot) with the same replicas. gen is the
// generation of the descriptor the caller read. It must run on the leader
// (*NotLeaderError otherwise) and returns once the split is applied here
// and the RHS replica exists on this store, with both new descriptors.
func (r *Replica) Split(ctx context.Context, sl uint16, rhs storage.RangeID, gen uint64) (lhsDesc, rhsDesc *storage.Descriptor, err error) {
	if err := splitCheck(r.Descriptor(), sl, gen); err != nil {
		return nil, nil, err
	}
	if rhs == 0 || r.store.Replica(rhs) != nil {
		return nil, nil, fmt.Errorf("%w: %d", ErrSplitRangeExists, rhs)
	}
	// A split writes (the left-hand range's range-local state is copied,
	// a range is created): the store's WriteGate refuses it as it refuses
	// a proposal of commands.
	if refused := r.store.gate(1); refused != nil {
		return nil, nil, &WriteRefusedError{Msg: string(refused[0].Str)}
	}
	r.mu.Lock()
	r.wakeLocked()
	st := r.mu.rn.BasicStatus()
	if st.RaftState != raft.StateLeader {
		r.mu.Unlock()
		return nil, nil, r.notLeader(st.Lead, r.mu.desc)
	}
	p := &proposal{id: r.nextProposalIDLocked(), done: make(chan struct{})}
	data := encodeSplitEntry(&splitEntry{node: uint64(r.store.cfg.NodeID), id: p.id, slot: sl, rhs: uint64(rhs), gen: gen})
	if err := r.mu.rn.Propose(data); err != nil {
		r.mu.Unlock()
		return nil, nil, fmt.Errorf("%w: %v", ErrProposalDropped, err)
	}
	r.mu.proposals[p.id] = p
	r.mu.Unlock()
	r.enqueue()
	if _, err := r.wait(ctx, p); err != nil {
		return nil, nil, err
	}
	rr := r.store.Replica(rhs)
	if rr == nil {
		return nil, nil, fmt.Errorf("store: split applied but range %d is missing", rhs)
	}
	return r.Descriptor(), rr.Descriptor(), nil
}

// splitCheck reports whether a split at sl with expected generation gen
// may apply to desc.
func splitCheck(desc *storage.Descriptor, sl uint16, gen uint64) error {
	if gen != desc.Generation {
		return fmt.Errorf("%w: range %d is at generation %d, not %d", ErrSplitStaleGeneration, desc.RangeID, desc.Generation, gen)
	}
	if !(desc.StartSlot < sl && sl < desc.EndSlot) {
		return fmt.Errorf("%w: slot %d, range %d owns [%d, %d)", ErrSplitSlotOutside, sl, desc.RangeID, desc.StartSlot, desc.EndSlot)
	}
	return nil
}

// applySplit applies a committed split entry into b. A split that may not
// apply (stale generation, slot outside, RHS id in use) changes nothing
// and fails the proposer's waiter; it is not an error of the Ready loop.
func (r *Replica) applySplit(b *pebble.Batch, it *readyItem, e *raftpb.Entry) error {
	sp, err := decodeSplitEntry(e.GetData())
	if err != nil {
		return fmt.Errorf("entry %d: %w", e.GetIndex(), err)
	}
	var prop *proposal
	if sp.node == uint64(r.store.cfg.NodeID) {
		r.mu.Lock()
		if p, ok := r.mu.proposals[sp.id]; ok {
			delete(r.mu.proposals, sp.id)
			prop = p
		}
		r.mu.Unlock()
	}
	desc := r.applyDesc(it)
	rhsID := storage.RangeID(sp.rhs)
	// Whether the split applies is decided from the entry and the
	// descriptor alone: every replica must decide the same. What this
	// store holds of the RHS id is local (a joining node, or one whose
	// slot table had a hole, may hold an uninitialized replica of it:
	// see below), so it never refuses the split here; the proposer checks
	// for an id in use before proposing, and KVORUM.NEXTRANGEID hands out
	// ids that are used nowhere.
	err = splitCheck(desc, sp.slot, sp.gen)
	if err == nil && (rhsID == 0 || rhsID == r.id) {
		err = fmt.Errorf("%w: %d", ErrSplitRangeExists, rhsID)
	}
	if err != nil {
		r.store.log.Info("split refused", "range", r.id, "index", e.GetIndex(), "err", err)
		if prop != nil {
			it.completions = append(it.completions, completion{p: prop, err: err})
		}
		return nil
	}

	lhs := desc.Clone()
	lhs.EndSlot = sp.slot
	lhs.Generation++
	rhs := desc.Clone()
	rhs.RangeID = rhsID
	rhs.StartSlot = sp.slot
	rhs.Generation = lhs.Generation
	if err := storage.SetDescriptor(b, lhs); err != nil {
		return err
	}
	// As applyConfChange: afterCommit installs it, and the round's
	// applied state is not published before its fsync.
	it.newDesc = lhs
	// A RHS already initialized here cannot be: its snapshot would have
	// been refused while this LHS still owned its slots (claimSnapshot),
	// and once the LHS is narrowed by a snapshot it never applies this
	// entry. Should it happen, its state is left alone (the LHS narrows
	// as on every other replica) and the error is logged.
	if _, ok, lerr := storage.LoadDescriptor(b, rhsID); lerr != nil {
		return lerr
	} else if ok {
		r.store.log.Error("split: the right-hand range is already initialized here; left as it is", "range", r.id, "rhs", rhsID, "index", e.GetIndex())
		it.splits = append(it.splits, appliedSplit{rhs: rhs, prop: prop, existed: true})
		return nil
	}
	// An uninitialized RHS replica may exist here and may have voted in
	// a term of the RHS (raft grants votes whatever its configuration):
	// its term and vote are kept, so that it never votes twice in a term.
	hs, err := storage.LoadHardState(b, rhsID)
	if err != nil {
		return err
	}
	// The RHS's log starts at the split's index: what the state machine
	// keeps by log index stays in order across the two logs.
	if err := BootstrapRangeAt(b, rhs, e.GetIndex()); err != nil {
		return err
	}
	if hs.GetTerm() > bootstrapTerm {
		if err := storage.SetHardState(b, rhsID, &raftpb.HardState{Term: ptr(hs.GetTerm()), Vote: ptr(hs.GetVote()), Commit: ptr(max(e.GetIndex(), bootstrapIndex))}); err != nil {
			return err
		}
	}
	// The LHS's replicated range-local keys (version counter, FLUSHALL
	// index, ...) describe the data of both halves at this index: the RHS
	// starts with a copy. Read through b, which holds the round's earlier
	// writes. User data stays where it is (stored by slot).
	start, end := storage.ReplicatedRangeSpan(r.id)
	iter, err := b.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return err
	}
	for iter.First(); iter.Valid(); iter.Next() {
		_, name, ok := storage.ParseReplicatedRangeKey(iter.Key())
		if !ok {
			continue
		}
		v, verr := iter.ValueAndErr()
		if verr != nil {
			_ = iter.Close()
			return verr
		}
		if err := b.Set(storage.ReplicatedRangeKey(rhsID, name), v, nil); err != nil {
			_ = iter.Close()
			return err
		}
	}
	if err := iter.Close(); err != nil {
		return err
	}
	// What the state machine adds (a split of range 1: its function
	// libraries, which it keeps in no range-local key).
	if sc, ok := r.store.cfg.StateMachine.(SplitCopier); ok {
		if err := sc.SplitCopy(b, r.id, rhsID); err != nil {
			return err
		}
	}
	it.splits = append(it.splits, appliedSplit{rhs: rhs, prop: prop})
	r.store.log.Info("range split", "range", r.id, "rhs", rhsID, "slot", sp.slot, "index", e.GetIndex(), "generation", lhs.Generation)
	return nil
}

// afterSplits creates the round's new right-hand replicas once the batch
// that wrote them is committed, rebuilds the slot table, lets the RHS
// campaign where the LHS leads (so its leader starts where the LHS leader
// is), then completes the local proposers. Called from afterCommit with
// no replica lock held.
func (r *Replica) afterSplits(it *readyItem) {
	for _, sp := range it.splits {
		if sp.existed {
			if sp.prop != nil {
				sp.prop.finish(nil, nil)
			}
			continue
		}
		// AddReplica loads the RHS from storage (the committed batch) and
		// rebuilds the slot table; an uninitialized replica of the RHS
		// held here is replaced by it.
		rr, err := r.store.replaceUninitialized(sp.rhs)
		if err != nil {
			// The split is committed and durable: a restart loads the RHS.
			r.store.failFatal(fmt.Errorf("range %d: create split range %d: %w", r.id, sp.rhs.RangeID, err))
			if sp.prop != nil {
				sp.prop.finish(nil, err)
			}
			continue
		}
		if it.leader {
			rr.mu.Lock()
			_ = rr.mu.rn.Campaign()
			rr.mu.Unlock()
		}
		rr.enqueue()
		if sp.prop != nil {
			sp.prop.finish(nil, nil)
		}
	}
	// AddReplica rebuilt the table, but the LHS's narrower descriptor may
	// have been installed after the last rebuild of a round with several.
	r.store.RefreshSlots()
}

// replaceUninitialized adds the replica of desc's range, loaded from
// storage, in place of an uninitialized replica of the same range this
// store may hold (one created to receive a snapshot, by a join or for a
// hole in the slot table). That object is marked destroyed: the Ready
// loop skips it, so nothing it still had in memory is written over the
// state the split bootstrapped.
func (s *Store) replaceUninitialized(desc *storage.Descriptor) (*Replica, error) {
	s.createMu.Lock()
	defer s.createMu.Unlock()
	if old := s.Replica(desc.RangeID); old != nil {
		s.mu.Lock()
		delete(s.mu.replicas, desc.RangeID)
		list := make([]*Replica, 0, len(s.mu.list))
		for _, x := range s.mu.list {
			if x != old {
				list = append(list, x)
			}
		}
		s.mu.list = list
		s.mu.Unlock()
		old.destroyed.Store(true)
		s.log.Info("an uninitialized replica is replaced by the range a split created", "range", desc.RangeID)
	}
	return s.AddReplica(desc)
}

package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kvorum/kvorum/internal/admin"
	"github.com/kvorum/kvorum/internal/storage"
	"github.com/kvorum/kvorum/internal/store"
)

// onLeader runs local on this node if it leads range req.Range (0: range
// 1), else forwards method to that range's leader. It waits for a leader
// for up to ctx.
func (n *Node) onLeader(ctx context.Context, method string, req memberRequest, local func(*store.Replica) error) error {
	r := n.store.Replica(req.rangeID())
	if r == nil {
		return fmt.Errorf("%w: no replica of range %d on node %d", admin.ErrInvalid, req.Range, n.id)
	}
	payload, _ := json.Marshal(req)
	for {
		lead, isLocal := r.Leader()
		var err error
		switch {
		case isLocal:
			err = local(r)
		case lead != 0:
			_, err = n.trans.Call(ctx, lead, method, payload)
			err = callError(err) // the leader's own error, typed again
		default:
			err = store.ErrNoLeader
		}
		var nle *store.NotLeaderError
		if err == nil || !(errors.As(err, &nle) || errors.Is(err, store.ErrNoLeader)) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %v", admin.ErrNoLeader, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// catchUp waits briefly until this node has applied what the leader has
// committed, so that what it reports after a forwarded membership change
// includes the change. A node that was itself removed may never learn of
// it; hence the short bound.
func (n *Node) catchUp(ctx context.Context, rangeID storage.RangeID) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if r := n.store.Replica(rangeID); r != nil {
		_ = r.ReadBarrier(ctx)
	}
}

// holeWait bounds how long eachRange waits for a hole in the slot table
// to be filled.
const holeWait = 10 * time.Second

// awaitNoHoles returns once the slot table has no hole or this node holds
// a range not in seen, or fails after holeWait.
func (n *Node) awaitNoHoles(ctx context.Context, seen map[storage.RangeID]bool) error {
	deadline := time.Now().Add(holeWait)
	for {
		_, holes := n.holeSlots()
		if holes == 0 {
			return nil
		}
		for _, r := range n.store.Replicas() {
			if !seen[r.RangeID()] {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %d hash slots have no range on node %d yet (a split it learned by snapshot; see kvorum_range_hole_slots): try again", admin.ErrNoLeader, holes, n.id)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %v", admin.ErrNoLeader, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// rangeOrder returns the ranges this node holds, range 1 first, or, with
// last, range 1 last (docs/ranges.md §3.5b: a member is added to range 1
// first and removed from it last; leadership of range 1 moves last).
func (n *Node) rangeOrder(system1Last bool) []storage.RangeID {
	reps := n.localReplicas()
	ids := make([]storage.RangeID, 0, len(reps))
	for _, r := range reps {
		if r.RangeID() != firstRange {
			ids = append(ids, r.RangeID())
		}
	}
	if system1Last {
		return append(ids, firstRange)
	}
	return append([]storage.RangeID{firstRange}, ids...)
}

// AddMember adds a node to every range (range 1 first): to each, first as
// a learner, then, once it has caught up, promotes it to voter
// (ConfChangeV2). Returns when the promotions are applied. A joining node
// has created a replica of every range before it asks (joinRanges), so
// that each range's snapshot finds one. A range that already has the node
// as a voter is skipped, so that an add interrupted half-way (a leader
// change, the joining node restarted) resumes; ErrMemberExists only when
// every range had it. Ranges split off while the add runs are added to
// as well (eachRange).
func (n *Node) AddMember(ctx context.Context, id uint64, peerAddr string) error {
	existed, visited := 0, 0
	err := n.eachRange(ctx, false, func(rg storage.RangeID) error {
		visited++
		if f := n.testBeforeAddTo.Load(); f != nil {
			(*f)(rg)
		}
		err := n.addMemberTo(ctx, rg, id, peerAddr)
		if errors.Is(err, admin.ErrMemberExists) {
			existed++
			return nil
		}
		return err
	})
	if err != nil {
		return err
	}
	if existed == visited {
		return fmt.Errorf("%w: node %d", admin.ErrMemberExists, id)
	}
	return nil
}

// eachRange calls f for every range this node holds, range 1 first (or,
// with system1Last, last; rangeOrder), and then again for every range that
// appeared meanwhile, until a pass finds none: a split of a range that
// f already visited, applied before f's change to it, made a right-hand
// range with the replicas from before the change (the member not added
// yet, or not removed yet), and f must visit it too. f's change to a range
// is applied here before f returns (catchUp), so every split ordered
// before it in that range's log has created its range here by then, and a
// split ordered after it copies the changed replica set. That holds only
// if this node applied the split; one that learned the range by a
// snapshot taken after it has a hole in its slot table instead, and
// eachRange waits for the repair loop to fill it (awaitNoHoles). Ranges
// visited after range 1 with system1Last come last only as far as they
// existed.
func (n *Node) eachRange(ctx context.Context, system1Last bool, f func(storage.RangeID) error) error {
	done := map[storage.RangeID]bool{}
	for {
		var todo []storage.RangeID
		for _, rg := range n.rangeOrder(system1Last) {
			if !done[rg] {
				todo = append(todo, rg)
			}
		}
		if len(todo) == 0 {
			// Holes in the slot table: a range this node learned by a
			// snapshot taken after a split, whose right-hand range has no
			// replica here yet (rangesRepairLoop creates it). f must visit
			// that range too.
			if err := n.awaitNoHoles(ctx, done); err != nil {
				return err
			}
			if len(n.rangeOrder(system1Last)) == len(done) {
				return nil
			}
			continue
		}
		for _, rg := range todo {
			done[rg] = true
			if err := f(rg); err != nil {
				return err
			}
		}
	}
}

// addMemberTo adds a node to range rg.
func (n *Node) addMemberTo(ctx context.Context, rg storage.RangeID, id uint64, peerAddr string) error {
	if id == 0 || peerAddr == "" {
		return fmt.Errorf("%w: member id and peer address are required", admin.ErrInvalid)
	}
	err := n.onLeader(ctx, methodJoin, memberRequest{ID: id, PeerAddr: peerAddr, Range: uint64(rg), One: true}, func(r *store.Replica) error {
		err := r.AddMember(ctx, id, peerAddr)
		if errors.Is(err, store.ErrMemberExists) {
			return fmt.Errorf("%w: node %d", admin.ErrMemberExists, id)
		}
		return err
	})
	if err == nil {
		n.catchUp(ctx, rg)
	}
	return err
}

// RemoveMember removes a node from the cluster: from every range, range 1
// last (and ranges split off meanwhile after it: eachRange).
func (n *Node) RemoveMember(ctx context.Context, id uint64) error {
	return n.eachRange(ctx, true, func(rg storage.RangeID) error {
		err := n.removeMemberFrom(ctx, rg, id)
		if errors.Is(err, admin.ErrUnknownMember) && rg != firstRange {
			return nil // a range split off before the node was added
		}
		return err
	})
}

// removeMemberFrom removes a node from range rg.
func (n *Node) removeMemberFrom(ctx context.Context, rg storage.RangeID, id uint64) error {
	err := n.onLeader(ctx, methodRemoveMember, memberRequest{ID: id, Range: uint64(rg), One: true}, func(r *store.Replica) error {
		d := r.Descriptor()
		voters := 0
		for _, rep := range d.Replicas {
			if !rep.Learner {
				voters++
			}
		}
		if rep, ok := d.Replica(storage.NodeID(id)); ok && !rep.Learner && voters == 1 {
			return fmt.Errorf("%w: cannot remove the last voter", admin.ErrInvalid)
		}
		err := r.RemoveMember(ctx, id)
		if errors.Is(err, store.ErrMemberNotFound) {
			return fmt.Errorf("%w: node %d", admin.ErrUnknownMember, id)
		}
		return err
	})
	if err != nil && !errors.Is(err, admin.ErrUnknownMember) && !errors.Is(err, admin.ErrInvalid) {
		// The reply may have been lost because the removal itself closed the
		// connection to the removed leader: check what was applied.
		n.catchUp(ctx, rg)
		if _, still := n.store.Replica(rg).Descriptor().Replica(storage.NodeID(id)); !still {
			return nil
		}
		return err
	}
	if err == nil {
		n.catchUp(ctx, rg)
	}
	return err
}

// TransferLeader moves leadership of every range to node id (range 1
// last, and ranges split off meanwhile after it: eachRange) and waits
// until it holds.
func (n *Node) TransferLeader(ctx context.Context, id uint64) error {
	return n.eachRange(ctx, true, func(rg storage.RangeID) error { return n.transferLeaderOf(ctx, rg, id) })
}

// transferLeaderOf moves leadership of range rg to node id and waits
// until it holds.
func (n *Node) transferLeaderOf(ctx context.Context, rg storage.RangeID, id uint64) error {
	return n.onLeader(ctx, methodTransferLeader, memberRequest{ID: id, Range: uint64(rg), One: true}, func(r *store.Replica) error {
		err := r.TransferLeader(ctx, id)
		if errors.Is(err, store.ErrMemberNotFound) {
			return fmt.Errorf("%w: node %d", admin.ErrUnknownMember, id)
		}
		return err
	})
}

// Status reports the node's state.
func (n *Node) Status() admin.Status {
	st := n.store.Replica(firstRange).Status()
	out := admin.Status{
		NodeID: uint64(n.id), ClusterID: n.clusterID, Role: st.Role, Term: st.Term,
		Leader: st.Leader, CommitIndex: st.Commit, AppliedIndex: st.Applied,
		FirstIndex: st.FirstIndex, LastIndex: st.LastIndex,
		ClientAddr: n.AdvertiseClientAddr(), TLSClientAddr: n.TLSClientAddr(), PeerAddr: n.AdvertisePeerAddr(), AdminAddr: n.AdminAddr(),
		Version: Version,
	}
	if l := n.ClientAddr(); l != out.ClientAddr {
		out.ClientListenAddr = l
	}
	if l := n.PeerAddr(); l != out.PeerAddr {
		out.PeerListenAddr = l
	}
	out.Members = completeMembers(members(st), n.localDescriptors())
	held, led := n.perNodeCounts()
	for i := range out.Members {
		out.Members[i].Replicas, out.Members[i].Leading = held[out.Members[i].ID], led[out.Members[i].ID]
	}
	out.Ranges, out.RangesLeading = n.rangeCounts()
	out.Ready = n.ready()
	return out
}

// perNodeCounts returns, per node id, how many of this node's local
// replicas' ranges list it as a replica and how many it leads (as each
// local replica knows its leader): the cluster's ranges and leaders per
// node as this node sees them (INFO, /v1/status, `kvorum ctl status`).
func (n *Node) perNodeCounts() (held, led map[uint64]int) {
	held, led = map[uint64]int{}, map[uint64]int{}
	for _, r := range n.store.Replicas() {
		for _, rep := range r.Descriptor().Replicas {
			held[uint64(rep.NodeID)]++
		}
		if lead, _ := r.Leader(); lead != 0 {
			led[lead]++
		}
	}
	return held, led
}

// perNodeField formats counts as "id=count,..." by node id (INFO).
func perNodeField(counts map[uint64]int) string {
	ids := make([]uint64, 0, len(counts))
	for id := range counts {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d=%d", id, counts[id])
	}
	return b.String()
}

// completeMembers marks as a learner every member of range 1 (ms) that
// is not a voter in every range (descs, range 1's included): with several
// ranges a node is added to range 1 first and then to the others
// (AddMember), and it is not a full member, able to serve every key or
// to lead, until the last of them has promoted it (docs/ranges.md
// §3.5b). So `kvorum ctl member list` reports it as complete only then,
// and the admin API lets a second `member add` resume the add.
func completeMembers(ms []admin.Member, descs []*storage.Descriptor) []admin.Member {
	for i := range ms {
		for _, d := range descs {
			if rep, ok := d.Replica(storage.NodeID(ms[i].ID)); !ok || rep.Learner {
				ms[i].Learner = true
				break
			}
		}
	}
	return ms
}

// ready reports whether a linearizable read would succeed right now.
func (n *Node) ready() bool {
	r := n.store.Replica(firstRange)
	if lead, _ := r.Leader(); lead == 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	return r.ReadBarrier(ctx) == nil
}

// adminAPI adapts Node to admin.NodeAPI.
type adminAPI Node

func (a *adminAPI) Status() admin.Status { return (*Node)(a).Status() }
func (a *adminAPI) AddMember(ctx context.Context, id uint64, addr string) error {
	return (*Node)(a).AddMember(ctx, id, addr)
}
func (a *adminAPI) RemoveMember(ctx context.Context, id uint64) error {
	return (*Node)(a).RemoveMember(ctx, id)
}
func (a *adminAPI) TransferLeader(ctx context.Context, id uint64) error {
	return (*Node)(a).TransferLeader(ctx, id)
}
func (a *adminAPI) Ranges() admin.RangesResponse { return (*Node)(a).Ranges() }

package server

import (
	"context"
	"encoding/json"
	"time"

	"github.com/kvorum/kvorum/internal/slot"
	"github.com/kvorum/kvorum/internal/storage"
)

// rangesRepairEvery is how often the node looks for holes in its slot
// table (rangesRepairLoop). A hole lasts until the next look plus one
// snapshot, so a second is short next to the catch-up that made it, and a
// peer call a second while a hole lasts costs nothing.
const rangesRepairEvery = time.Second

// rangesRepairLoop closes holes in this node's slot table: slots that no
// local replica owns (docs/ranges.md §3.5). A follower that catches up on
// a range by a snapshot taken after a split never applies the split
// entry, so it never creates the right-hand range; its left-hand range
// narrows to the snapshot's interval and leaves the moved slots to
// nobody. The RHS leader cannot fix that alone: the follower drops the
// RHS's messages (Store.StepMessage: unknown range), so raft's probe never
// gets the rejection that would make the leader send a snapshot. This
// loop asks a peer for its ranges and creates an uninitialized replica of
// each one that fills a hole; that replica rejects the leader's next
// append (its log is empty) and receives the range by snapshot.
func (n *Node) rangesRepairLoop() {
	defer n.bg.Done()
	every := rangesRepairEvery
	if n.cfg.testRangesRepairEvery > 0 {
		every = n.cfg.testRangesRepairEvery
	}
	ctx, cancel := n.untilStop()
	defer cancel()
	t := time.NewTicker(every)
	defer t.Stop()
	var prev [][2]uint16
	for {
		select {
		case <-n.stopper:
			return
		case <-t.C:
		}
		prev = n.repairHoles(ctx, every, prev)
	}
}

// holeSlots returns the hash slots that no local replica owns, as
// maximal [start, end) intervals, and how many slots they hold. A scan of the 16384-entry slot table.
func (n *Node) holeSlots() (holes [][2]uint16, count int) {
	start := -1
	for s := 0; s < slot.Count; s++ {
		if n.store.ReplicaForSlot(uint16(s)) == nil {
			count++
			if start < 0 {
				start = s
			}
			continue
		}
		if start >= 0 {
			holes = append(holes, [2]uint16{uint16(start), uint16(s)})
			start = -1
		}
	}
	if start >= 0 {
		holes = append(holes, [2]uint16{uint16(start), slot.Count})
	}
	return holes, count
}

// inHoles reports whether [lo, hi) lies entirely inside one of holes
// (holes are maximal intervals, so an interval inside the union lies
// inside one of them).
func inHoles(holes [][2]uint16, lo, hi uint16) bool {
	for _, h := range holes {
		if h[0] <= lo && hi <= h[1] {
			return true
		}
	}
	return false
}

// repairHoles is one round of rangesRepairLoop: if the slot table has
// holes and this node is a member, it fetches a peer's descriptors and
// creates the replicas that fill holes that were already there in the
// previous round (prev). It returns this round's holes, the next round's
// prev. Bounded: one peer call at a time of at most every, over range 1's
// members.
//
// Why a hole must last a round: a replica applying a split narrows its
// descriptor before the store adds the RHS replica (replica_split.go
// afterSplits, right after the batch commits), so a slot table rebuilt in
// between shows a hole for a moment. A replica created here then would be
// a second replica of the RHS (Store.AddReplica does not check for one),
// and the split would overwrite it. A hole left by a snapshot lasts until
// this loop acts; one left by a split being applied is gone long before
// the next round.
func (n *Node) repairHoles(ctx context.Context, every time.Duration, prev [][2]uint16) [][2]uint16 {
	holes, _ := n.holeSlots()
	if len(holes) == 0 || len(prev) == 0 {
		return holes
	}
	r1 := n.store.Replica(firstRange)
	if r1 == nil {
		return holes
	}
	// A node still joining (range 1's descriptor does not list it yet:
	// uninitializedDescriptor has no replicas) has nothing but holes until
	// its snapshots arrive; joinRanges creates its replicas. So does
	// resumeJoin on a node restarted during its join: both check for a
	// replica before they add one, and the store does not, so they must
	// not run at the same time as this loop.
	desc1 := r1.Descriptor()
	if _, member := desc1.Replica(n.id); !member || n.resumingJoin.Load() {
		return holes
	}
	peers := make([]uint64, 0, len(desc1.Replicas))
	if lead, local := r1.Leader(); lead != 0 && !local {
		peers = append(peers, lead)
	}
	for _, rep := range desc1.Replicas {
		if id := uint64(rep.NodeID); id != uint64(n.id) && (len(peers) == 0 || id != peers[0]) {
			peers = append(peers, id)
		}
	}
	var descs []*storage.Descriptor
	for _, p := range peers {
		cctx, cancel := context.WithTimeout(ctx, every)
		b, err := n.trans.Call(cctx, p, methodRanges, nil)
		cancel()
		if err != nil {
			continue
		}
		descs = nil
		if json.Unmarshal(b, &descs) == nil {
			break
		}
		descs = nil
	}
	for _, d := range descs {
		if d.StartSlot >= d.EndSlot {
			continue // the peer's own uninitialized replica: no interval to fill
		}
		if _, member := d.Replica(n.id); !member {
			continue // its leader sends this node nothing
		}
		// Never for a range whose interval overlaps a local replica's:
		// that replica (an LHS that has not applied the split yet) still
		// owns those slots and has log entries for them to apply. Had the
		// range's snapshot been installed there, the LHS would then apply
		// those entries a second time on top of the snapshot's newer data.
		// The LHS learns the split from its log, or narrows by its own
		// snapshot, first; a later round then sees a hole.
		if !inHoles(holes, d.StartSlot, d.EndSlot) || !inHoles(prev, d.StartSlot, d.EndSlot) {
			continue
		}
		// Again, just before: the peer call took time.
		if n.store.Replica(d.RangeID) != nil || !n.stillHoles(d.StartSlot, d.EndSlot) {
			continue // created (by a split, or earlier here: waiting for its snapshot)
		}
		if _, err := n.store.AddReplica(uninitializedDescriptor(d.RangeID)); err != nil {
			n.cfg.Logger.Warn("could not create a replica for a hole in the slot table", "range", uint64(d.RangeID), "err", err)
			continue
		}
		n.cfg.Logger.Info("created a replica to receive the snapshot of a range whose slots no local replica owns",
			"range", uint64(d.RangeID), "start_slot", d.StartSlot, "end_slot", d.EndSlot)
	}
	return holes
}

// stillHoles reports whether no local replica owns any slot of [lo, hi).
func (n *Node) stillHoles(lo, hi uint16) bool {
	for s := int(lo); s < int(hi); s++ {
		if n.store.ReplicaForSlot(uint16(s)) != nil {
			return false
		}
	}
	return true
}

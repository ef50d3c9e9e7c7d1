package server

import (
	"cmp"
	"slices"

	"github.com/kvorum/kvorum/internal/admin"
	"github.com/kvorum/kvorum/internal/store"
)

// Ranges reports every replica this node holds, by range id (GET
// /v1/ranges, `kvorum ctl range list`).
func (n *Node) Ranges() admin.RangesResponse {
	reps := n.store.Replicas()
	slices.SortFunc(reps, func(a, b *store.Replica) int { return cmp.Compare(a.RangeID(), b.RangeID()) })
	out := admin.RangesResponse{NodeID: uint64(n.id), Ranges: make([]admin.Range, 0, len(reps))}
	for _, r := range reps {
		st := r.Status()
		rg := admin.Range{
			RangeID: uint64(st.RangeID), Role: st.Role, Term: st.Term, Leader: st.Leader,
			CommitIndex: st.Commit, AppliedIndex: st.Applied, Replicas: members(st),
		}
		if st.Descriptor != nil {
			rg.Generation = st.Descriptor.Generation
			start, end := n.machine.Span(st.Descriptor)
			if b, err := n.db.EstimateDiskUsage(start, end); err == nil {
				rg.ApproximateBytes = b
			}
		}
		out.Ranges = append(out.Ranges, rg)
	}
	return out
}

// members lists a range's voters and learners as its replica's status
// has them, with the leader's view of their log when it leads.
func members(st store.Status) []admin.Member {
	if st.Descriptor == nil {
		return nil
	}
	out := make([]admin.Member, 0, len(st.Descriptor.Replicas))
	for _, rep := range st.Descriptor.Replicas {
		m := admin.Member{ID: uint64(rep.NodeID), PeerAddr: rep.PeerAddr, Learner: rep.Learner}
		if pr, ok := st.Progress[uint64(rep.NodeID)]; ok {
			m.Match = pr.Match
		}
		out = append(out, m)
	}
	return out
}

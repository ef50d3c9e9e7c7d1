package placement

import (
	"math"
	"sort"
)

// UnderReplicated returns the ranges, by id, with fewer replicas on live
// nodes than the replication factor (a replica on a dead node counts as
// missing, whether or not the timeout has passed).
func UnderReplicated(s *ClusterState, o Options) []RangeID {
	o = o.withDefaults()
	alive := make(map[NodeID]bool, len(s.Nodes))
	for i := range s.Nodes {
		alive[s.Nodes[i].ID] = s.Nodes[i].Alive
	}
	var out []RangeID
	for i := range s.Ranges {
		r := &s.Ranges[i]
		n := 0
		for _, id := range r.Replicas {
			if alive[id] {
				n++
			}
		}
		if n < o.Replicas {
			out = append(out, r.ID)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// NodeBalance is one live node's count of a stat against its fair share.
type NodeBalance struct {
	Node  NodeID
	Count float64
	Fair  float64 // total × weight / Σ live weights
	Ratio float64 // Count / Fair (0 when both are 0, +Inf when only Fair is)
}

// Balance returns, for each live node in id order, its count of st (the
// replicas it holds, the ranges it leads, or their bytes) against its fair
// share under o's scorer. The fair shares sum to the count over live nodes.
func Balance(s *ClusterState, o Options, st Stat) []NodeBalance {
	p := newPlanner(s, o)
	var total, sum float64
	for i := range p.nodes {
		if p.live[i] {
			total += p.c[st][i]
			sum += p.w[st][i]
		}
	}
	var out []NodeBalance
	for i := range p.nodes {
		if !p.live[i] {
			continue
		}
		b := NodeBalance{Node: p.nodes[i].ID, Count: p.c[st][i]}
		if sum > 0 {
			b.Fair = total * p.w[st][i] / sum
		}
		switch {
		case b.Fair > 0:
			b.Ratio = b.Count / b.Fair
		case b.Count > 0:
			b.Ratio = math.Inf(1) // holds some of what it should hold none of
		}
		out = append(out, b)
	}
	return out
}

// Within reports whether the count is within limit× of the fair share
// both ways: Fair/limit ≤ Count ≤ Fair×limit, widened to the integers
// around Fair (with a fair share of 1.5, counts of 1 and 2 are within
// any limit: no placement of whole replicas does better).
func (b NodeBalance) Within(limit float64) bool {
	hi := math.Max(b.Fair*limit, math.Ceil(b.Fair-eps))
	lo := math.Min(b.Fair/limit, math.Floor(b.Fair+eps))
	return b.Count <= hi+eps && b.Count >= lo-eps
}

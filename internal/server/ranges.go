package server

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

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
			rg.StartSlot, rg.EndSlot = uint32(st.Descriptor.StartSlot), uint32(st.Descriptor.EndSlot)
			start, end := n.machine.Span(st.Descriptor)
			if b, err := n.db.EstimateDiskUsage(start, end); err == nil {
				rg.ApproximateBytes = b
			}
		}
		out.Ranges = append(out.Ranges, rg)
	}
	return out
}

// rangeCounts is how many ranges this node holds a replica of and how
// many of them it leads (INFO, /v1/status): no disk estimate, unlike
// Ranges.
func (n *Node) rangeCounts() (held, leading int) {
	for _, r := range n.store.Replicas() {
		held++
		if _, local := r.Leader(); local {
			leading++
		}
	}
	return held, leading
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

// rangeCollector exports each local replica's state as gauges labelled
// with its range, read at scrape time (kvorum_range_*).
type rangeCollector struct {
	n                                         *Node
	leader, leader2, applied, replicas, bytes *prometheus.Desc
}

func newRangeCollector(n *Node) *rangeCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, []string{"range"}, nil)
	}
	return &rangeCollector{n: n,
		leader:   d("kvorum_range_is_leader", "1 if this node's replica leads the range."),
		leader2:  d("kvorum_range_leader", "Node id of the range's known leader (0 = none)."),
		applied:  d("kvorum_range_applied_index", "Last applied index of this node's replica of the range."),
		replicas: d("kvorum_range_replicas", "Voters and learners of the range."),
		bytes:    d("kvorum_range_approximate_bytes", "Pebble's estimate of the range's data on this node's disk."),
	}
}

func (c *rangeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.leader, c.leader2, c.applied, c.replicas, c.bytes} {
		ch <- d
	}
}

func (c *rangeCollector) Collect(ch chan<- prometheus.Metric) {
	for _, r := range c.n.Ranges().Ranges {
		id := strconv.FormatUint(r.RangeID, 10)
		g := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, id)
		}
		lead := 0.0
		if r.Role == "leader" {
			lead = 1
		}
		g(c.leader, lead)
		g(c.leader2, float64(r.Leader))
		g(c.applied, float64(r.AppliedIndex))
		g(c.replicas, float64(len(r.Replicas)))
		g(c.bytes, float64(r.ApproximateBytes))
	}
}

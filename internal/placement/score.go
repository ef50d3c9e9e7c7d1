package placement

import "time"

// Stat is a quantity placement balances across nodes.
type Stat uint8

const (
	StatReplicas Stat = iota // replicas per node
	StatLeaders              // leaders per node
	StatBytes                // bytes of replicas per node (a tie-break by default)
)

func (s Stat) String() string {
	switch s {
	case StatReplicas:
		return "replicas"
	case StatLeaders:
		return "leaders"
	case StatBytes:
		return "bytes"
	}
	return "stat?"
}

// Scorer is the replaceable part of placement: how much of each stat a
// node should carry relative to the others.
//
// A live node's fair share of a stat is total × Weight(n) / Σ Weight over
// the live nodes, and its load is count / Weight(n). A move of a unit u
// (one replica, one leader, or a range's bytes) from node A to node B is
// allowed only if it does not invert the two loads:
//
//	(C_A − u) / W_A ≥ (C_B + u) / W_B
//
// which is the paper's Eq. 1 (ALOR, §3.2) with counts in place of data
// volumes. Every allowed move lowers Σ C²/W strictly, so placement never
// oscillates for a fixed set of weights.
//
// Weight must be a pure function of the node (its fields and Attrs) and
// must be ≥ 0. A node of weight 0 is given nothing of that stat (it is
// never a target); what it holds is moved off first. Issue 19's ALOR
// scorer reads a measured speed from Node.Attrs: leader weight and replica
// weight grow with speed, and a node past 95 % of Capacity gets a replica
// weight of 1e-6 so that it sheds ranges.
type Scorer interface {
	Weight(n *Node, s Stat) float64
}

// Even is the default scorer: every live node has weight 1 for every stat,
// so placement balances replica and leader counts (ED in the ALOR paper).
type Even struct{}

// Weight returns 1.
func (Even) Weight(*Node, Stat) float64 { return 1 }

// WeightFunc adapts a function to a Scorer.
type WeightFunc func(n *Node, s Stat) float64

// Weight calls f.
func (f WeightFunc) Weight(n *Node, s Stat) float64 { return f(n, s) }

// Options are the knobs of placement. The zero value of a field means its
// default.
type Options struct {
	// Replicas is the replication factor, 3 or 5 (default 3).
	Replicas int
	// DeadNodeTimeout is how long a node must be dead before its replicas
	// are replaced (default 5 minutes, as CockroachDB's
	// server.time_until_store_dead).
	DeadNodeTimeout time.Duration
	// Band is how far from its fair share a node's count may be before
	// rebalancing acts: a node above share×(1+Band) gives, one below
	// share×(1−Band) takes (default 0.05). The contract is looser (1.2×);
	// acting earlier keeps every node well inside it.
	Band float64
	// MaxSnapshotsPerNode bounds the snapshots a node sends or receives at
	// once (default 2). The leader of a range sends the snapshot of a new
	// replica.
	MaxSnapshotsPerNode int
	// MaxTransfersPerNode bounds the leader transfers from or to one node
	// in one Plan (default 8).
	MaxTransfersPerNode int
	// Scorer gives nodes their weights (default Even).
	Scorer Scorer
	// RebalanceBy is what replica placement balances: StatReplicas (the
	// default: counts, bytes breaking ties) or StatBytes (data volume, as
	// Eq. 1 of the ALOR paper states it; counts breaking ties). Leaders are
	// always balanced by count.
	RebalanceBy Stat
}

// DefaultOptions returns the options with every default filled in.
func DefaultOptions() Options {
	return Options{}.withDefaults()
}

func (o Options) withDefaults() Options {
	if o.Replicas <= 0 {
		o.Replicas = 3
	}
	if o.DeadNodeTimeout <= 0 {
		o.DeadNodeTimeout = 5 * time.Minute
	}
	if o.Band <= 0 {
		o.Band = 0.05
	}
	if o.MaxSnapshotsPerNode <= 0 {
		o.MaxSnapshotsPerNode = 2
	}
	if o.MaxTransfersPerNode <= 0 {
		o.MaxTransfersPerNode = 8
	}
	if o.Scorer == nil {
		o.Scorer = Even{}
	}
	return o
}

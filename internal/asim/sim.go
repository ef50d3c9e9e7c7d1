// Package asim is a seeded discrete-event simulator of range placement: a
// model of nodes and ranges (no Raft, no storage, no network) on which the
// functions of internal/placement run as the node's replicate queue will
// run them, at a scale this machine cannot run for real (100 nodes, 10,000
// ranges). It is driven by the datadriven files in testdata/ (see
// asim_test.go for the commands), after CockroachDB's allocator simulator.
//
// The model: a node is alive or dead (since a time), has a capacity and a
// snapshot rate (bytes per second it sends or receives); a range has
// replicas on distinct nodes, a leader, and a size in bytes. Time advances
// from event to event:
//
//   - every tick (default 10 s) the simulator builds a placement.ClusterState,
//     calls placement.Plan and starts what it returns;
//   - a replica addition is a snapshot sent by the range's leader: it takes
//     bytes / min(sender rate, receiver rate) of simulated time, ±10 %
//     (seeded), and counts against both nodes' snapshot slots until it ends.
//     When it ends, the new replica joins and the replaced one (if any)
//     leaves in one step; if the sender or receiver died meanwhile, it fails.
//     A freed slot triggers a plan at the next whole simulated second, as a
//     replicate queue picks its next range without waiting for a tick;
//   - leader transfers and replica removals take effect at once;
//   - a range whose leader is dead elects one of its live replicas (seeded)
//     before the next plan if its live replicas are a quorum.
//
// Given the same commands and seeds, the output is the same on every run.
package asim

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kvorum/kvorum/internal/placement"
)

// Config holds the node defaults of a simulated cluster.
type Config struct {
	Capacity            int64 // bytes per node
	SnapshotRate        int64 // bytes per second a node sends or receives
	MaxSnapshotsPerNode int   // concurrent snapshots per node
}

type simNode struct {
	id       placement.NodeID
	alive    bool
	diedAt   time.Duration
	capacity int64
	rate     int64
	snaps    int
	replicas int
	leaders  int
	bytes    int64
	attrs    map[string]float64 // Node.Attrs, for a weighted scorer
}

type simRange struct {
	id       placement.RangeID
	replicas []placement.NodeID
	leader   placement.NodeID
	bytes    int64
	changing bool
	// The in-flight move, if any: the node receiving a snapshot and the
	// node whose replica leaves when it ends.
	adding, removing placement.NodeID
}

// move is an in-flight replica addition.
type move struct {
	at       time.Duration
	seq      uint64
	r        *simRange
	to, from placement.NodeID
	sender   placement.NodeID
	why      placement.Reason
}

type moveHeap []*move

func (h moveHeap) Len() int { return len(h) }
func (h moveHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h moveHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *moveHeap) Push(x any)   { *h = append(*h, x.(*move)) }
func (h *moveHeap) Pop() any {
	old := *h
	m := old[len(old)-1]
	*h = old[:len(old)-1]
	return m
}

// Sim is one simulated cluster.
type Sim struct {
	cfg    Config
	now    time.Duration
	nodes  []*simNode // nodes[i].id == i+1
	ranges []*simRange
	rf     int
	moves  moveHeap
	seq    uint64
	rnd    *rand.Rand

	// Weight, if not empty, is the node attribute that weighs nodes (a
	// node without it weighs 1): placement's fair shares and the balance
	// assertions follow it. Empty: placement.Even. By is what replicas are
	// balanced by (placement.Options.RebalanceBy).
	Weight string
	By     placement.Stat

	// Verify makes Eval check the invariants (Check) after every plan and
	// stop at the first violation (Result.Err).
	Verify bool

	// Reused between plans.
	stNodes  []placement.Node
	stRanges []placement.Range
}

// New returns a cluster of n live nodes and no ranges.
func New(n int, cfg Config) *Sim {
	if cfg.Capacity <= 0 {
		cfg.Capacity = 1 << 40
	}
	if cfg.SnapshotRate <= 0 {
		cfg.SnapshotRate = 32 << 20
	}
	if cfg.MaxSnapshotsPerNode <= 0 {
		cfg.MaxSnapshotsPerNode = 2
	}
	s := &Sim{cfg: cfg, rf: 3, rnd: rand.New(rand.NewSource(1))}
	s.AddNodes(n)
	return s
}

// Now is the simulated time since the cluster was generated.
func (s *Sim) Now() time.Duration { return s.now }

// Replicas is the replication factor of the generated ranges.
func (s *Sim) Replicas() int { return s.rf }

// AddNodes adds n live, empty nodes and returns their ids.
func (s *Sim) AddNodes(n int) []placement.NodeID {
	var ids []placement.NodeID
	for i := 0; i < n; i++ {
		id := placement.NodeID(len(s.nodes) + 1)
		s.nodes = append(s.nodes, &simNode{id: id, alive: true, capacity: s.cfg.Capacity, rate: s.cfg.SnapshotRate})
		ids = append(ids, id)
	}
	return ids
}

// Placement says how GenRanges places replicas.
type Placement string

const (
	// Even places replicas on the live nodes evenly (counts within one of
	// each other) on seeded random sets of nodes, each range led by the
	// replica whose node leads the fewest ranges so far.
	Even Placement = "even"
	// Skewed places every replica on the first quarter of the live nodes
	// (at least replicas nodes), as Even places them on all.
	Skewed Placement = "skewed"
)

// GenRanges adds n ranges of rf replicas each, of bytes ±50 % (seeded).
func (s *Sim) GenRanges(n, rf int, bytes int64, how Placement, seed int64) error {
	if len(s.ranges) > 0 && rf != s.rf {
		return fmt.Errorf("the cluster's ranges have %d replicas", s.rf)
	}
	var live []placement.NodeID
	for _, nd := range s.nodes {
		if nd.alive {
			live = append(live, nd.id)
		}
	}
	switch how {
	case Even:
	case Skewed:
		k := (len(live) + 3) / 4
		if k < rf {
			k = rf
		}
		if k < len(live) {
			live = live[:k]
		}
	default:
		return fmt.Errorf("unknown placement %q (even, skewed)", how)
	}
	if len(live) < rf {
		return fmt.Errorf("%d live nodes for %d replicas", len(live), rf)
	}
	s.rf = rf
	rnd := rand.New(rand.NewSource(seed))
	// A stream of seeded permutations of the nodes: each range takes the
	// next rf distinct nodes of it, so that counts stay within one of each
	// other while the sets of nodes that share ranges are random.
	var stream []placement.NodeID
	perm := func() []placement.NodeID {
		p := append([]placement.NodeID(nil), live...)
		rnd.Shuffle(len(p), func(i, j int) { p[i], p[j] = p[j], p[i] })
		return p
	}
	next := func(taken []placement.NodeID) placement.NodeID {
		for {
			for k, id := range stream {
				if !contains(taken, id) {
					stream[0], stream[k] = stream[k], stream[0]
					stream = stream[1:]
					return id
				}
			}
			stream = append(append([]placement.NodeID(nil), stream...), perm()...)
		}
	}
	for i := 0; i < n; i++ {
		r := &simRange{id: placement.RangeID(len(s.ranges) + 1)}
		r.bytes = int64(float64(bytes) * (0.5 + rnd.Float64()))
		for j := 0; j < rf; j++ {
			r.replicas = append(r.replicas, next(r.replicas))
		}
		// The replica whose node leads the fewest ranges leads.
		r.leader = r.replicas[0]
		for _, id := range r.replicas[1:] {
			if s.node(id).leaders < s.node(r.leader).leaders {
				r.leader = id
			}
		}
		for _, id := range r.replicas {
			nd := s.node(id)
			nd.replicas++
			nd.bytes += r.bytes
		}
		s.node(r.leader).leaders++
		s.ranges = append(s.ranges, r)
	}
	return nil
}

func (s *Sim) node(id placement.NodeID) *simNode { return s.nodes[id-1] }

// KillNode marks node id dead now. Its replicas stay in their ranges
// until placement replaces them; its leaderships end (ranges elect anew).
func (s *Sim) KillNode(id placement.NodeID) error {
	if id < 1 || int(id) > len(s.nodes) {
		return fmt.Errorf("no node n%d", id)
	}
	nd := s.node(id)
	if !nd.alive {
		return fmt.Errorf("n%d is already dead", id)
	}
	nd.alive = false
	nd.diedAt = s.now
	return nil
}

// Result is what one Eval did.
type Result struct {
	Start, End time.Duration
	Seed       int64
	Tick       time.Duration
	Timeout    time.Duration
	// Moves completed, by reason; Failed moves lost their sender or
	// receiver. Removals and Transfers took effect at once.
	Moves      map[placement.Reason]int
	Failed     int
	Removals   int
	Transfers  int
	Elections  int
	BytesMoved int64
	Plans      int
	// LastChange is when the placement last changed (a move completed, a
	// removal or transfer applied), -1 if it did not. Converged is true if
	// at the end the last plan proposed nothing, no move is in flight and
	// no range is under-replicated: LastChange is then the time the
	// cluster took to converge.
	LastChange      time.Duration
	Converged       bool
	InFlight        int
	UnderReplicated int
	// Err is the first invariant violation found with Sim.Verify.
	Err error
}

// TotalMoves is the number of completed replica moves and additions.
func (r *Result) TotalMoves() int {
	n := 0
	for _, v := range r.Moves {
		n += v
	}
	return n
}

// Eval runs the cluster for d of simulated time, planning every tick.
func (s *Sim) Eval(d, tick, deadTimeout time.Duration, seed int64) *Result {
	if tick <= 0 {
		tick = 10 * time.Second
	}
	o := s.options(deadTimeout)
	res := &Result{Start: s.now, End: s.now + d, Seed: seed, Tick: tick, Timeout: o.DeadNodeTimeout,
		Moves: map[placement.Reason]int{}, LastChange: -1}
	s.rnd = rand.New(rand.NewSource(seed))
	const never = time.Duration(math.MaxInt64)
	nextTick, replan := s.now, never
	lastEmpty := false
	for {
		t := nextTick
		if replan < t {
			t = replan
		}
		if len(s.moves) > 0 && s.moves[0].at < t {
			t = s.moves[0].at
		}
		if t > res.End {
			break
		}
		s.now = t
		done := false
		for len(s.moves) > 0 && s.moves[0].at == t {
			s.complete(heap.Pop(&s.moves).(*move), res)
			done = true
		}
		if done && replan == never {
			replan = (t + time.Second - 1) / time.Second * time.Second
		}
		if t == nextTick || t == replan {
			s.elect(res)
			n := s.plan(o, res)
			res.Plans++
			lastEmpty = n == 0
			if t == nextTick {
				nextTick += tick
			}
			if t == replan {
				replan = never
			}
			if s.Verify {
				if err := s.Check(); err != nil {
					res.Err = fmt.Errorf("at %s: %w", s.now, err)
					break
				}
			}
		}
	}
	s.now = res.End
	res.InFlight = len(s.moves)
	res.UnderReplicated = len(s.UnderReplicated())
	res.Converged = lastEmpty && res.InFlight == 0 && res.UnderReplicated == 0
	return res
}

func (s *Sim) options(deadTimeout time.Duration) placement.Options {
	o := placement.Options{
		Replicas:            s.rf,
		DeadNodeTimeout:     deadTimeout,
		MaxSnapshotsPerNode: s.cfg.MaxSnapshotsPerNode,
		RebalanceBy:         s.By,
	}
	if key := s.Weight; key != "" {
		o.Scorer = placement.WeightFunc(func(n *placement.Node, _ placement.Stat) float64 {
			if w, ok := n.Attrs[key]; ok {
				return w
			}
			return 1
		})
	}
	return o
}

// SetAttr sets an attribute of node id (placement.Node.Attrs).
func (s *Sim) SetAttr(id placement.NodeID, key string, v float64) error {
	if id < 1 || int(id) > len(s.nodes) {
		return fmt.Errorf("no node n%d", id)
	}
	nd := s.node(id)
	if nd.attrs == nil {
		nd.attrs = map[string]float64{}
	}
	nd.attrs[key] = v
	return nil
}

// elect gives each range whose leader is dead or missing a leader among
// its live replicas, if they are a quorum.
func (s *Sim) elect(res *Result) {
	var live []placement.NodeID
	for _, r := range s.ranges {
		if r.leader != 0 && s.node(r.leader).alive {
			continue
		}
		live = live[:0]
		for _, id := range r.replicas {
			if s.node(id).alive {
				live = append(live, id)
			}
		}
		if r.leader != 0 {
			s.node(r.leader).leaders--
			r.leader = 0
		}
		if len(live) > len(r.replicas)/2 {
			r.leader = live[s.rnd.Intn(len(live))]
			s.node(r.leader).leaders++
			res.Elections++
		}
	}
}

// State returns the cluster as placement sees it now. The ranges' replica
// slices are the simulator's own: read them only.
func (s *Sim) State() *placement.ClusterState {
	s.stNodes = s.stNodes[:0]
	for _, nd := range s.nodes {
		n := placement.Node{ID: nd.id, Alive: nd.alive, Capacity: nd.capacity, Used: nd.bytes, Snapshots: nd.snaps, Attrs: nd.attrs}
		if !nd.alive {
			n.DeadFor = s.now - nd.diedAt
		}
		s.stNodes = append(s.stNodes, n)
	}
	s.stRanges = s.stRanges[:0]
	for _, r := range s.ranges {
		s.stRanges = append(s.stRanges, placement.Range{ID: r.id, Replicas: r.replicas, Leader: r.leader, Bytes: r.bytes,
			Changing: r.changing, Adding: r.adding, Removing: r.removing})
	}
	return &placement.ClusterState{Nodes: s.stNodes, Ranges: s.stRanges}
}

// plan runs placement once and starts its actions; it returns how many.
func (s *Sim) plan(o placement.Options, res *Result) int {
	acts := placement.Plan(s.State(), o)
	for _, a := range acts {
		r := s.ranges[a.RangeID()-1]
		switch a := a.(type) {
		case *placement.AddReplica:
			snd, to := s.node(r.leader), s.node(a.Node)
			rate := snd.rate
			if to.rate < rate {
				rate = to.rate
			}
			secs := float64(r.bytes) / float64(rate) * (0.9 + 0.2*s.rnd.Float64())
			dur := time.Duration(secs * float64(time.Second))
			if dur < time.Millisecond {
				dur = time.Millisecond
			}
			s.seq++
			heap.Push(&s.moves, &move{at: s.now + dur, seq: s.seq, r: r, to: a.Node, from: a.Replaces, sender: r.leader, why: a.Reason})
			snd.snaps++
			to.snaps++
			r.changing = true
			r.adding, r.removing = a.Node, a.Replaces
		case *placement.RemoveReplica:
			s.drop(r, a.Node)
			res.Removals++
			res.LastChange = s.now
		case *placement.TransferLeader:
			s.node(a.From).leaders--
			s.node(a.To).leaders++
			r.leader = a.To
			res.Transfers++
			res.LastChange = s.now
		}
	}
	return len(acts)
}

func (s *Sim) drop(r *simRange, id placement.NodeID) {
	for i, x := range r.replicas {
		if x == id {
			// A new slice: State's earlier copies alias the old one.
			r.replicas = append(append([]placement.NodeID(nil), r.replicas[:i]...), r.replicas[i+1:]...)
			nd := s.node(id)
			nd.replicas--
			nd.bytes -= r.bytes
			return
		}
	}
}

func (s *Sim) complete(m *move, res *Result) {
	r := m.r
	r.changing = false
	r.adding, r.removing = 0, 0
	snd, to := s.node(m.sender), s.node(m.to)
	snd.snaps--
	to.snaps--
	if !snd.alive || !to.alive {
		res.Failed++
		return
	}
	if m.from != 0 {
		s.drop(r, m.from)
	}
	r.replicas = append(append([]placement.NodeID(nil), r.replicas...), m.to)
	to.replicas++
	to.bytes += r.bytes
	res.Moves[m.why]++
	res.BytesMoved += r.bytes
	res.LastChange = s.now
}

// Stat is a per-node figure the simulator reports.
type Stat string

const (
	StatReplicas Stat = "replicas"
	StatLeaders  Stat = "leaders"
	StatBytes    Stat = "bytes"
)

func (s *Sim) value(nd *simNode, st Stat) float64 {
	switch st {
	case StatLeaders:
		return float64(nd.leaders)
	case StatBytes:
		return float64(nd.bytes)
	}
	return float64(nd.replicas)
}

// Summary is min, mean and max of a stat over the live nodes.
type Summary struct{ Min, Mean, Max float64 }

// Summarize returns the min, mean and max of st over the live nodes.
func (s *Sim) Summarize(st Stat) Summary {
	var sm Summary
	n := 0
	for _, nd := range s.nodes {
		if !nd.alive {
			continue
		}
		v := s.value(nd, st)
		if n == 0 || v < sm.Min {
			sm.Min = v
		}
		if n == 0 || v > sm.Max {
			sm.Max = v
		}
		sm.Mean += v
		n++
	}
	if n > 0 {
		sm.Mean /= float64(n)
	}
	return sm
}

// UnderReplicated returns the ranges with fewer live replicas than the
// replication factor.
func (s *Sim) UnderReplicated() []placement.RangeID {
	return placement.UnderReplicated(s.State(), s.options(0))
}

// Unavailable returns the ranges without a live quorum.
func (s *Sim) Unavailable() []placement.RangeID {
	var out []placement.RangeID
	for _, r := range s.ranges {
		n := 0
		for _, id := range r.replicas {
			if s.node(id).alive {
				n++
			}
		}
		if n <= len(r.replicas)/2 {
			out = append(out, r.id)
		}
	}
	return out
}

// Imbalanced returns one line per live node whose count of st is not
// within threshold× of its fair share (placement.NodeBalance.Within).
func (s *Sim) Imbalanced(st Stat, threshold float64) []string {
	var ps placement.Stat
	switch st {
	case StatReplicas:
		ps = placement.StatReplicas
	case StatLeaders:
		ps = placement.StatLeaders
	default:
		ps = placement.StatBytes
	}
	var out []string
	for _, b := range placement.Balance(s.State(), s.options(0), ps) {
		if !b.Within(threshold) {
			out = append(out, fmt.Sprintf("n%d: %s %s, fair share %.1f (%.2f×)", b.Node, fmtCount(b.Count, st), st, b.Fair, b.Ratio))
		}
	}
	return out
}

func fmtCount(v float64, st Stat) string {
	if st == StatBytes {
		return FormatBytes(int64(v))
	}
	return fmt.Sprintf("%.0f", v)
}

// FormatBytes prints n in the largest binary unit that keeps it ≥ 1.
func FormatBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	v := float64(n)
	i := 0
	for math.Abs(v) >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}

// Table prints st for every node, ten to a line; a dead node shows "x".
func (s *Sim) Table(st Stat) string {
	var b strings.Builder
	for i, nd := range s.nodes {
		if i%10 == 0 {
			if i > 0 {
				b.WriteByte('\n')
			}
			fmt.Fprintf(&b, "%-5s", fmt.Sprintf("n%d", nd.id))
		}
		v := "x"
		if nd.alive {
			v = fmtCount(s.value(nd, st), st)
			if st == StatBytes {
				v = fmt.Sprintf("%.0fG", s.value(nd, st)/(1<<30))
			}
		}
		fmt.Fprintf(&b, " %5s", v)
	}
	b.WriteByte('\n')
	return b.String()
}

// Histogram prints how many live nodes have each value of st, in at most
// ten buckets between the min and the max.
func (s *Sim) Histogram(st Stat) string {
	var vals []float64
	for _, nd := range s.nodes {
		if nd.alive {
			vals = append(vals, s.value(nd, st))
		}
	}
	if len(vals) == 0 {
		return "no live nodes\n"
	}
	sort.Float64s(vals)
	lo, hi := vals[0], vals[len(vals)-1]
	width := math.Ceil((hi - lo + 1) / 10)
	if width < 1 {
		width = 1
	}
	var b strings.Builder
	for start := lo; start <= hi; start += width {
		n := 0
		for _, v := range vals {
			if v >= start && v < start+width {
				n++
			}
		}
		label := fmtCount(start, st)
		if width > 1 {
			label += "-" + fmtCount(start+width-1, st)
		}
		fmt.Fprintf(&b, "%15s %4d %s\n", label, n, strings.Repeat("#", (n+1)/2))
	}
	return b.String()
}

// ParseBytes reads a size: a number with an optional unit B, KiB, MiB,
// GiB or TiB (also KB, MB, ... as the same powers of two).
func ParseBytes(v string) (int64, error) {
	units := []struct {
		suffix string
		mult   float64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"TB", 1 << 40}, {"B", 1}}
	mult := 1.0
	for _, u := range units {
		if strings.HasSuffix(v, u.suffix) {
			v, mult = strings.TrimSuffix(v, u.suffix), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("bad size %q", v)
	}
	return int64(f * mult), nil
}

func contains(ids []placement.NodeID, id placement.NodeID) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// Check verifies the simulator's invariants: no range has two replicas on
// one node or a leader that is not one of its replicas; every range has
// the replication factor of replicas (a move swaps one for one); no node
// sends or receives more snapshots than its limit; the per-node counts
// kept incrementally equal a recount.
func (s *Sim) Check() error {
	reps := make([]int, len(s.nodes))
	leads := make([]int, len(s.nodes))
	bytes := make([]int64, len(s.nodes))
	snaps := make([]int, len(s.nodes))
	for _, r := range s.ranges {
		if len(r.replicas) != s.rf {
			return fmt.Errorf("r%d has %d replicas %v", r.id, len(r.replicas), r.replicas)
		}
		for i, id := range r.replicas {
			if contains(r.replicas[:i], id) {
				return fmt.Errorf("r%d has two replicas on n%d", r.id, id)
			}
			reps[id-1]++
			bytes[id-1] += r.bytes
		}
		if r.leader != 0 {
			if !contains(r.replicas, r.leader) {
				return fmt.Errorf("r%d is led by n%d, not a replica %v", r.id, r.leader, r.replicas)
			}
			leads[r.leader-1]++
		}
		if r.adding != 0 && contains(r.replicas, r.adding) {
			return fmt.Errorf("r%d adds n%d, which holds a replica", r.id, r.adding)
		}
	}
	for _, m := range s.moves {
		snaps[m.sender-1]++
		snaps[m.to-1]++
	}
	for i, nd := range s.nodes {
		if nd.replicas != reps[i] || nd.leaders != leads[i] || nd.bytes != bytes[i] || nd.snaps != snaps[i] {
			return fmt.Errorf("n%d counts %d/%d/%d/%d, recount %d/%d/%d/%d (replicas/leaders/bytes/snapshots)",
				nd.id, nd.replicas, nd.leaders, nd.bytes, nd.snaps, reps[i], leads[i], bytes[i], snaps[i])
		}
		if nd.snaps > s.cfg.MaxSnapshotsPerNode {
			return fmt.Errorf("n%d has %d snapshots in flight, limit %d", nd.id, nd.snaps, s.cfg.MaxSnapshotsPerNode)
		}
	}
	return nil
}

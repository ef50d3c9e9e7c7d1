package placement

import (
	"math"
	"sort"
)

// Plan returns the actions that move s towards a placement with every
// range fully replicated on live nodes and every live node within Band of
// its fair share of replicas and leaders: first the repairs (Repair), then
// replica moves (Rebalance), then leader transfers (BalanceLeaders). An
// action never puts two replicas of a range on one node, never removes a
// leader's replica, never takes a node past MaxSnapshotsPerNode, and at
// most one action is proposed per range. The result depends only on s and
// o; s is not modified.
func Plan(s *ClusterState, o Options) []Action {
	p := newPlanner(s, o)
	p.repair()
	p.rebalance()
	p.balanceLeaders()
	return p.out
}

// Repair returns only the repairs of Plan: replacements of replicas on
// nodes dead past the timeout, additions to ranges short of replicas and
// removals from ranges with too many.
func Repair(s *ClusterState, o Options) []Action {
	p := newPlanner(s, o)
	p.repair()
	return p.out
}

// Rebalance returns only the replica moves of Plan (as if no repair were
// needed).
func Rebalance(s *ClusterState, o Options) []Action {
	p := newPlanner(s, o)
	p.rebalance()
	return p.out
}

// BalanceLeaders returns only the leader transfers of Plan.
func BalanceLeaders(s *ClusterState, o Options) []Action {
	p := newPlanner(s, o)
	p.balanceLeaders()
	return p.out
}

// planner holds the indexes of one decision. Node and range indexes are
// positions in nodes and ranges, both sorted by id; counts are updated as
// actions are chosen, so later choices see earlier ones.
type planner struct {
	o      Options
	nodes  []Node
	idx    map[NodeID]int // lookups only, never iterated
	live   []bool         // alive
	gone   []bool         // dead for at least DeadNodeTimeout
	w      [3][]float64   // weight per stat
	c      [3][]float64   // count per stat (bytes for StatBytes)
	share  [3]float64     // total / Σ live weights: the fair share of weight 1
	snaps  []int
	xfers  []int
	ranges []Range
	change []bool  // an action is in flight or was chosen for the range
	lead   []int   // node index of the range's leader, -1 if none
	rep    [][]int // node indexes of each range's replicas, -1 if unknown
	whole  []bool  // every replica of the range is on a live node
	byNode [][]int // range indexes per node index, ascending
	out    []Action
}

func newPlanner(s *ClusterState, o Options) *planner {
	o = o.withDefaults()
	p := &planner{o: o}
	p.nodes = append([]Node(nil), s.Nodes...)
	sort.SliceStable(p.nodes, func(i, j int) bool { return p.nodes[i].ID < p.nodes[j].ID })
	n := len(p.nodes)
	p.idx = make(map[NodeID]int, n)
	p.live = make([]bool, n)
	p.gone = make([]bool, n)
	p.snaps = make([]int, n)
	p.xfers = make([]int, n)
	p.byNode = make([][]int, n)
	for st := range p.w {
		p.w[st] = make([]float64, n)
		p.c[st] = make([]float64, n)
	}
	for i := range p.nodes {
		nd := &p.nodes[i]
		p.idx[nd.ID] = i
		p.live[i] = nd.Alive
		p.gone[i] = !nd.Alive && nd.DeadFor >= o.DeadNodeTimeout
		p.snaps[i] = nd.Snapshots
		for st := range p.w {
			if nd.Alive {
				w := o.Scorer.Weight(nd, Stat(st))
				if w < 0 || math.IsNaN(w) {
					w = 0
				}
				p.w[st][i] = w
			}
		}
	}
	p.ranges = s.Ranges
	if !sort.SliceIsSorted(p.ranges, func(i, j int) bool { return p.ranges[i].ID < p.ranges[j].ID }) {
		p.ranges = append([]Range(nil), s.Ranges...)
		sort.SliceStable(p.ranges, func(i, j int) bool { return p.ranges[i].ID < p.ranges[j].ID })
	}
	p.change = make([]bool, len(p.ranges))
	p.lead = make([]int, len(p.ranges))
	p.rep = make([][]int, len(p.ranges))
	p.whole = make([]bool, len(p.ranges))
	nrep := 0
	for ri := range p.ranges {
		nrep += len(p.ranges[ri].Replicas)
	}
	backing := make([]int, 0, nrep)
	dense := true // ids are 1..n: index = id-1, no map lookups
	for i := range p.nodes {
		dense = dense && p.nodes[i].ID == NodeID(i+1)
	}
	lookup := func(id NodeID) int {
		if dense {
			if id >= 1 && int(id) <= n {
				return int(id) - 1
			}
			return -1
		}
		return p.node(id)
	}
	var total [3]float64
	for ri := range p.ranges {
		r := &p.ranges[ri]
		p.change[ri] = r.Changing || r.Adding != 0 || r.Removing != 0
		p.lead[ri] = -1
		if i := lookup(r.Leader); i >= 0 && p.live[i] {
			p.lead[ri] = i
			p.c[StatLeaders][i]++
		}
		start := len(backing)
		p.whole[ri] = true
		for _, id := range r.Replicas {
			i := lookup(id)
			backing = append(backing, i)
			if i < 0 {
				p.whole[ri] = false
				continue
			}
			p.whole[ri] = p.whole[ri] && p.live[i]
			p.byNode[i] = append(p.byNode[i], ri)
			if id != r.Removing {
				p.c[StatReplicas][i]++
				p.c[StatBytes][i] += float64(r.Bytes)
			}
		}
		p.rep[ri] = backing[start:len(backing):len(backing)]
		if i := lookup(r.Adding); i >= 0 {
			p.c[StatReplicas][i]++
			p.c[StatBytes][i] += float64(r.Bytes)
		}
		total[StatReplicas] += float64(o.Replicas)
		total[StatLeaders]++
		total[StatBytes] += float64(r.Bytes) * float64(o.Replicas)
	}
	for st := range p.w {
		var sum float64
		for i := range p.nodes {
			sum += p.w[st][i]
		}
		if sum > 0 {
			p.share[st] = total[st] / sum
		}
	}
	return p
}

// node returns the index of id, -1 if the state does not know it.
func (p *planner) node(id NodeID) int {
	if i, ok := p.idx[id]; ok {
		return i
	}
	return -1
}

// load is node i's count of st per unit of weight; +Inf for a node of
// weight 0 that holds some.
func (p *planner) load(st Stat, i int) float64 {
	c, w := p.c[st][i], p.w[st][i]
	if w == 0 {
		if c == 0 {
			return 0
		}
		return math.Inf(1)
	}
	return c / w
}

const eps = 1e-9

// over: node i is above its fair share of st by more than the band.
func (p *planner) over(st Stat, i int) bool {
	return p.load(st, i) > p.share[st]*(1+p.o.Band)+eps
}

// above: node i holds more than its fair share of st. Only such a node
// gives, and only to one that is not: a node at or below its share never
// gives (that would only pass the shortage on), and a node above it never
// takes (that would only pass the excess on).
func (p *planner) above(st Stat, i int) bool {
	return p.load(st, i) > p.share[st]+eps
}

// under: node i is below its fair share of st by more than the band.
func (p *planner) under(st Stat, i int) bool {
	return p.w[st][i] > 0 && p.load(st, i) < p.share[st]*(1-p.o.Band)-eps
}

// canMove reports whether moving u of st from a to b keeps a's load at or
// above b's (Eq. 1 of the ALOR paper with weights from the scorer).
func (p *planner) canMove(st Stat, a, b int, u float64) bool {
	wa, wb := p.w[st][a], p.w[st][b]
	if wb == 0 {
		return false
	}
	if wa == 0 {
		return p.c[st][a] > 0
	}
	return (p.c[st][a]-u)/wa >= (p.c[st][b]+u)/wb-eps
}

func (p *planner) hasReplica(ri, i int) bool {
	for _, x := range p.rep[ri] {
		if x == i {
			return true
		}
	}
	return false
}

// sender returns the node index that would send a snapshot of range ri
// (its live leader) if it has a free snapshot slot, else -1.
func (p *planner) sender(ri int) int {
	l := p.lead[ri]
	if l < 0 || p.snaps[l] >= p.o.MaxSnapshotsPerNode {
		return -1
	}
	return l
}

// by is the stat replicas are placed by: Options.RebalanceBy, replicas
// or bytes; then is the other one, the tie-break.
func (p *planner) by() (by, then Stat) {
	if p.o.RebalanceBy == StatBytes {
		return StatBytes, StatReplicas
	}
	return StatReplicas, StatBytes
}

// less orders node indexes by ascending load of the stat replicas are
// placed by, then of the other, then by id.
func (p *planner) less(a, b int) bool {
	by, then := p.by()
	if la, lb := p.load(by, a), p.load(by, b); la != lb {
		return la < lb
	}
	if la, lb := p.load(then, a), p.load(then, b); la != lb {
		return la < lb
	}
	return p.nodes[a].ID < p.nodes[b].ID
}

// target returns the best live node for a new replica of range ri: not
// holding one, with a free snapshot slot, of weight > 0, least loaded
// (replicas, then bytes, then id). -1 if there is none.
func (p *planner) target(ri int) int {
	best := -1
	by, _ := p.by()
	for i := range p.nodes {
		if !p.live[i] || p.w[by][i] == 0 || p.snaps[i] >= p.o.MaxSnapshotsPerNode || p.hasReplica(ri, i) {
			continue
		}
		if best < 0 || p.less(i, best) {
			best = i
		}
	}
	return best
}

// add records a new replica of ri on node `to` (replacing node `from`,
// -1 if none), sent by node snd.
func (p *planner) add(ri, to, from, snd int, replaces NodeID, why Reason) {
	r := &p.ranges[ri]
	p.c[StatReplicas][to]++
	p.c[StatBytes][to] += float64(r.Bytes)
	if from >= 0 {
		p.c[StatReplicas][from]--
		p.c[StatBytes][from] -= float64(r.Bytes)
	}
	p.snaps[to]++
	p.snaps[snd]++
	p.change[ri] = true
	p.out = append(p.out, &AddReplica{Range: r.ID, Node: p.nodes[to].ID, Replaces: replaces, Reason: why})
}

func (p *planner) repair() {
	type need struct{ ri, healthy int }
	var needs []need
	for ri := range p.ranges {
		r := &p.ranges[ri]
		healthy, gone := 0, 0
		for _, i := range p.rep[ri] {
			switch {
			case i < 0 || p.gone[i]:
				gone++
			case p.live[i]:
				healthy++
			}
		}
		if gone > 0 || len(r.Replicas) != p.o.Replicas {
			needs = append(needs, need{ri, healthy})
		}
	}
	// The ranges closest to losing their quorum first.
	sort.SliceStable(needs, func(i, j int) bool { return needs[i].healthy < needs[j].healthy })
	for _, nd := range needs {
		ri := nd.ri
		r := &p.ranges[ri]
		if p.change[ri] || p.lead[ri] < 0 {
			continue
		}
		var dead NodeID
		for _, id := range r.Replicas {
			if i := p.node(id); i < 0 || p.gone[i] {
				dead = id
				break
			}
		}
		switch {
		case dead != 0 && len(r.Replicas) > p.o.Replicas:
			// Too many replicas anyway: drop the dead one.
			p.remove(ri, dead, ReasonDeadNode)
		case dead != 0:
			snd := p.sender(ri)
			if snd < 0 {
				continue
			}
			if to := p.target(ri); to >= 0 {
				p.add(ri, to, p.node(dead), snd, dead, ReasonDeadNode)
			}
		case len(r.Replicas) < p.o.Replicas:
			snd := p.sender(ri)
			if snd < 0 {
				continue
			}
			if to := p.target(ri); to >= 0 {
				p.add(ri, to, -1, snd, 0, ReasonUnderReplicated)
			}
		case len(r.Replicas) > p.o.Replicas:
			// Remove from a node that is not live if any, else from the
			// most loaded one; never the leader.
			var pick NodeID
			pi := -1
			for _, id := range r.Replicas {
				i := p.node(id)
				if i < 0 { // a node the state does not know: drop it first
					pick = id
					break
				}
				if i == p.lead[ri] {
					continue
				}
				if pi < 0 || (!p.live[i] && p.live[pi]) || (p.live[i] == p.live[pi] && p.less(pi, i)) {
					pick, pi = id, i
				}
			}
			if pick != 0 {
				p.remove(ri, pick, ReasonOverReplicated)
			}
		}
	}
}

func (p *planner) remove(ri int, id NodeID, why Reason) {
	r := &p.ranges[ri]
	if i := p.node(id); i >= 0 {
		p.c[StatReplicas][i]--
		p.c[StatBytes][i] -= float64(r.Bytes)
	}
	p.change[ri] = true
	p.out = append(p.out, &RemoveReplica{Range: r.ID, Node: id, Reason: why})
}

// rebalance moves replicas from nodes above their fair share to nodes
// below it, in passes until no move is allowed.
func (p *planner) rebalance() {
	st, _ := p.by()
	var srcs, tgts []int
	for i := range p.nodes {
		if p.live[i] {
			srcs = append(srcs, i)
			if p.w[st][i] > 0 {
				tgts = append(tgts, i)
			}
		}
	}
	var elig []int
	for {
		sort.SliceStable(srcs, func(x, y int) bool { return p.less(srcs[y], srcs[x]) })
		sort.SliceStable(tgts, func(x, y int) bool { return p.less(tgts[x], tgts[y]) })
		moved := false
		for _, a := range srcs {
			if !p.above(st, a) {
				break // sources descend by load: none further is above
			}
			overA := p.over(st, a)
			// The ranges a could give, whoever takes them: not changing,
			// every replica live (a range that lost one is repaired, not
			// rebalanced), led by another node with a free snapshot slot.
			elig = elig[:0]
			for _, ri := range p.byNode[a] {
				if !p.change[ri] && p.lead[ri] != a && p.sender(ri) >= 0 && p.whole[ri] {
					elig = append(elig, ri)
				}
			}
			if len(elig) == 0 {
				continue
			}
			for _, b := range tgts {
				if b == a || p.snaps[b] >= p.o.MaxSnapshotsPerNode {
					continue
				}
				if !overA && !p.under(st, b) || p.above(st, b) {
					break // targets ascend by load: none further is under (or at most at its share)
				}
				if st == StatReplicas && !p.canMove(st, a, b, 1) {
					continue // (by bytes, pickRange checks each range's size)
				}
				if ri := p.pickRange(elig, a, b); ri >= 0 {
					p.add(ri, b, a, p.lead[ri], p.nodes[a].ID, ReasonRebalance)
					moved = true
					break
				}
			}
		}
		if !moved {
			return
		}
	}
}

// pickRange chooses among elig (ranges on node a) the one to move to node
// b: one b does not hold whose sender still has a slot (and, when placing
// by bytes, whose size x keeps Eq. 1: (S_A − x)/W_A ≥ (S_B + x)/W_B, x > 0),
// that leaves the bytes per weight of a and b closest (the bytes
// tie-break), lowest id first.
func (p *planner) pickRange(elig []int, a, b int) int {
	best, bestGap := -1, math.Inf(1)
	wa, wb := p.w[StatBytes][a], p.w[StatBytes][b]
	if wa == 0 {
		wa = 1
	}
	if wb == 0 {
		wb = 1
	}
	for _, ri := range elig {
		if p.change[ri] || p.sender(ri) < 0 || p.hasReplica(ri, b) {
			continue
		}
		x := float64(p.ranges[ri].Bytes)
		if p.o.RebalanceBy == StatBytes && (x <= 0 || !p.canMove(StatBytes, a, b, x)) {
			continue
		}
		gap := math.Abs((p.c[StatBytes][a]-x)/wa - (p.c[StatBytes][b]+x)/wb)
		if gap < bestGap {
			best, bestGap = ri, gap
		}
	}
	return best
}

// balanceLeaders transfers leadership between the replicas of ranges, from
// nodes above their fair share of leaders to nodes below it.
func (p *planner) balanceLeaders() {
	var srcs []int
	for i := range p.nodes {
		if p.live[i] {
			srcs = append(srcs, i)
		}
	}
	max := p.o.MaxTransfersPerNode
	for {
		sort.SliceStable(srcs, func(x, y int) bool {
			la, lb := p.load(StatLeaders, srcs[x]), p.load(StatLeaders, srcs[y])
			if la != lb {
				return la > lb
			}
			return p.nodes[srcs[x]].ID < p.nodes[srcs[y]].ID
		})
		moved := false
		for _, a := range srcs {
			if !p.above(StatLeaders, a) {
				break
			}
			if p.xfers[a] >= max {
				continue
			}
			overA := p.over(StatLeaders, a)
			bestR, bestB := -1, -1
			for _, ri := range p.byNode[a] {
				if p.change[ri] || p.lead[ri] != a {
					continue
				}
				for _, b := range p.rep[ri] {
					if b < 0 || b == a || !p.live[b] || p.xfers[b] >= max {
						continue
					}
					if !overA && !p.under(StatLeaders, b) || p.above(StatLeaders, b) {
						continue
					}
					if !p.canMove(StatLeaders, a, b, 1) {
						continue
					}
					if bestB < 0 || p.load(StatLeaders, b) < p.load(StatLeaders, bestB) ||
						(p.load(StatLeaders, b) == p.load(StatLeaders, bestB) && p.nodes[b].ID < p.nodes[bestB].ID) {
						bestR, bestB = ri, b
					}
				}
			}
			if bestR < 0 {
				continue
			}
			p.c[StatLeaders][a]--
			p.c[StatLeaders][bestB]++
			p.xfers[a]++
			p.xfers[bestB]++
			p.lead[bestR] = bestB
			p.change[bestR] = true
			p.out = append(p.out, &TransferLeader{Range: p.ranges[bestR].ID, From: p.nodes[a].ID, To: p.nodes[bestB].ID, Reason: ReasonLeaderBalance})
			moved = true
		}
		if !moved {
			return
		}
	}
}

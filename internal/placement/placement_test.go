package placement

import (
	"fmt"
	"math/rand"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// state builds a cluster of nodes 1..n (all alive) and ranges written as
// "1,2*,3": the replicas' nodes, the leader starred. Every range is 1 MiB.
func state(n int, ranges ...string) *ClusterState {
	s := &ClusterState{}
	for i := 1; i <= n; i++ {
		s.Nodes = append(s.Nodes, Node{ID: NodeID(i), Alive: true, Capacity: 1 << 40})
	}
	for i, spec := range ranges {
		r := Range{ID: RangeID(i + 1), Bytes: 1 << 20}
		for _, f := range strings.Split(spec, ",") {
			lead := strings.HasSuffix(f, "*")
			id, err := strconv.Atoi(strings.TrimSuffix(f, "*"))
			if err != nil {
				panic(err)
			}
			r.Replicas = append(r.Replicas, NodeID(id))
			if lead {
				r.Leader = NodeID(id)
			}
		}
		s.Ranges = append(s.Ranges, r)
	}
	return s
}

func kill(s *ClusterState, id NodeID, d time.Duration) {
	for i := range s.Nodes {
		if s.Nodes[i].ID == id {
			s.Nodes[i].Alive = false
			s.Nodes[i].DeadFor = d
		}
	}
}

func strs(as []Action) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.String())
	}
	return out
}

// apply executes actions as if each completed at once, and checks the
// invariants every action must keep.
func apply(t *testing.T, s *ClusterState, o Options, as []Action) {
	t.Helper()
	o = o.withDefaults()
	seen := map[RangeID]bool{}
	snaps := map[NodeID]int{}
	for _, n := range s.Nodes {
		snaps[n.ID] = n.Snapshots
	}
	byID := map[RangeID]*Range{}
	for i := range s.Ranges {
		byID[s.Ranges[i].ID] = &s.Ranges[i]
	}
	for _, a := range as {
		r := byID[a.RangeID()]
		if seen[r.ID] {
			t.Fatalf("two actions for r%d: %v", r.ID, strs(as))
		}
		seen[r.ID] = true
		if r.Changing {
			t.Fatalf("action for changing r%d: %v", r.ID, a)
		}
		switch a := a.(type) {
		case *AddReplica:
			for _, id := range r.Replicas {
				if id == a.Node {
					t.Fatalf("%v: n%d already holds r%d %v", a, a.Node, r.ID, r.Replicas)
				}
			}
			if a.Replaces == r.Leader {
				t.Fatalf("%v removes the leader", a)
			}
			snaps[a.Node]++
			snaps[r.Leader]++
			if snaps[a.Node] > o.MaxSnapshotsPerNode || snaps[r.Leader] > o.MaxSnapshotsPerNode {
				t.Fatalf("%v: snapshot limit %d exceeded", a, o.MaxSnapshotsPerNode)
			}
			reps := append([]NodeID(nil), r.Replicas...)
			if a.Replaces != 0 {
				k := indexOf(reps, a.Replaces)
				if k < 0 {
					t.Fatalf("%v: n%d holds no replica", a, a.Replaces)
				}
				reps = append(reps[:k], reps[k+1:]...)
			}
			r.Replicas = append(reps, a.Node)
		case *RemoveReplica:
			if a.Node == r.Leader {
				t.Fatalf("%v removes the leader", a)
			}
			k := indexOf(r.Replicas, a.Node)
			if k < 0 {
				t.Fatalf("%v: no such replica", a)
			}
			r.Replicas = append(append([]NodeID(nil), r.Replicas[:k]...), r.Replicas[k+1:]...)
		case *TransferLeader:
			if a.From != r.Leader || indexOf(r.Replicas, a.To) < 0 {
				t.Fatalf("%v: leader n%d replicas %v", a, r.Leader, r.Replicas)
			}
			r.Leader = a.To
		}
	}
}

func indexOf(ids []NodeID, id NodeID) int {
	for i, x := range ids {
		if x == id {
			return i
		}
	}
	return -1
}

// converge plans and applies until Plan proposes nothing, failing after
// max rounds (placement must not oscillate).
func converge(t *testing.T, s *ClusterState, o Options, max int) (rounds, actions int) {
	t.Helper()
	for rounds = 0; rounds < max; rounds++ {
		as := Plan(s, o)
		if len(as) == 0 {
			return rounds, actions
		}
		actions += len(as)
		apply(t, s, o, as)
	}
	t.Fatalf("no fixpoint after %d rounds (%d actions)", max, actions)
	return
}

func checkBalance(t *testing.T, s *ClusterState, o Options, st Stat, limit float64) {
	t.Helper()
	for _, b := range Balance(s, o, st) {
		if !b.Within(limit) {
			t.Errorf("n%d: %v %v against a fair share of %.2f (%.2f×, limit %.2f)", b.Node, b.Count, st, b.Fair, b.Ratio, limit)
		}
	}
}

func TestBalancedNoAction(t *testing.T) {
	s := state(3, "1*,2,3", "1,2*,3", "1,2,3*")
	if as := Plan(s, Options{}); len(as) != 0 {
		t.Fatalf("balanced: %v", strs(as))
	}
	// 4 nodes, 4 ranges: 3 replicas and 1 leader each.
	s = state(4, "1*,2,3", "2*,3,4", "3*,4,1", "4*,1,2")
	if as := Plan(s, Options{}); len(as) != 0 {
		t.Fatalf("balanced: %v", strs(as))
	}
}

func TestDeadNodeReplaced(t *testing.T) {
	s := state(4, "1*,2,3", "1,2*,3", "1,2,3*")
	kill(s, 3, time.Minute)
	if as := Plan(s, Options{}); len(as) != 0 {
		t.Fatalf("dead for less than the timeout: %v", strs(as))
	}
	kill(s, 3, 5*time.Minute)
	got := strs(Plan(s, Options{}))
	// Range 3's leader is on the dead node: no action until an election.
	want := []string{"r1: add n4, remove n3 (dead-node)", "r2: add n4, remove n3 (dead-node)"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if ur := UnderReplicated(s, Options{}); !reflect.DeepEqual(ur, []RangeID{1, 2, 3}) {
		t.Fatalf("under-replicated %v", ur)
	}
	s.Ranges[2].Leader = 1 // elected
	apply(t, s, Options{}, Plan(s, Options{}))
	s.Nodes[3].Snapshots = 0
	apply(t, s, Options{}, Plan(s, Options{}))
	if ur := UnderReplicated(s, Options{}); len(ur) != 0 {
		t.Fatalf("still under-replicated: %v", ur)
	}
	for _, r := range s.Ranges {
		if indexOf(r.Replicas, 3) >= 0 || len(r.Replicas) != 3 {
			t.Fatalf("r%d: %v", r.ID, r.Replicas)
		}
	}
}

func TestReplacementPicksLeastLoaded(t *testing.T) {
	// n4 holds two replicas, n5 one: the replacement goes to n5.
	s := state(5, "1*,2,3", "2*,4,5", "1*,2,4")
	kill(s, 3, time.Hour)
	got := strs(Repair(s, Options{}))
	want := []string{"r1: add n5, remove n3 (dead-node)"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestNoPlaceForReplacement(t *testing.T) {
	// 3 nodes, one dead: there is no node without a replica of the range.
	s := state(3, "1*,2,3")
	kill(s, 3, time.Hour)
	if as := Plan(s, Options{}); len(as) != 0 {
		t.Fatalf("%v", strs(as))
	}
	if ur := UnderReplicated(s, Options{}); len(ur) != 1 {
		t.Fatalf("under-replicated %v", ur)
	}
}

func TestFiveReplicas(t *testing.T) {
	o := Options{Replicas: 5}
	s := state(7, "1*,2,3,4,5", "3*,4,5,6,7", "1,2,6*,7,3")
	kill(s, 3, time.Hour)
	as := Plan(s, o)
	apply(t, s, o, as)
	for _, r := range s.Ranges {
		if len(r.Replicas) != 5 {
			t.Fatalf("r%d: %v", r.ID, r.Replicas)
		}
	}
	// r2's leader was on n3: after an election, it is repaired too.
	s.Ranges[1].Leader = 4
	for i := range s.Nodes {
		s.Nodes[i].Snapshots = 0
	}
	converge(t, s, o, 20)
	if ur := UnderReplicated(s, o); len(ur) != 0 {
		t.Fatalf("under-replicated %v", ur)
	}
	// A range of 3 under a factor of 5 gains replicas; one of 6 loses one.
	s = state(6, "1*,2,3", "1*,2,3,4,5,6")
	got := strs(Repair(s, o))
	want := []string{"r1: add n4 (under-replicated)", "r2: remove n4 (over-replicated)"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestRebalanceToNewNode(t *testing.T) {
	// 3 nodes hold 6 ranges; n4 is new and empty. Fair share: 4.5 replicas.
	s := state(4, "1*,2,3", "1,2*,3", "1,2,3*", "1*,2,3", "1,2*,3", "1,2,3*")
	as := Rebalance(s, Options{})
	if len(as) != 2 {
		// n4 takes 2 snapshots at once, no more.
		t.Fatalf("want 2 moves (snapshot limit), got %v", strs(as))
	}
	for _, a := range as {
		if ad, ok := a.(*AddReplica); !ok || ad.Node != 4 || ad.Reason != ReasonRebalance {
			t.Fatalf("%v", a)
		}
	}
	o := Options{MaxSnapshotsPerNode: 1}
	if as := Rebalance(s, o); len(as) != 1 {
		t.Fatalf("limit 1: %v", strs(as))
	}
	s.Nodes[3].Snapshots = 1 // n4 already receives one
	if as := Rebalance(s, o); len(as) != 0 {
		t.Fatalf("n4 busy: %v", strs(as))
	}
	s.Nodes[3].Snapshots = 0
	converge(t, s, Options{}, 20)
	checkBalance(t, s, Options{}, StatReplicas, 1.2)
	checkBalance(t, s, Options{}, StatLeaders, 1.2)
}

func TestLeaderTransfers(t *testing.T) {
	// n1 leads all four ranges.
	s := state(4, "1*,2,3", "1*,3,4", "1*,2,4", "1*,2,3")
	as := BalanceLeaders(s, Options{})
	if len(as) == 0 {
		t.Fatal("no transfer")
	}
	for _, a := range as {
		if _, ok := a.(*TransferLeader); !ok {
			t.Fatalf("%v", a)
		}
	}
	apply(t, s, Options{}, as)
	checkBalance(t, s, Options{}, StatLeaders, 1.0)
	if as := BalanceLeaders(s, Options{}); len(as) != 0 {
		t.Fatalf("again: %v", strs(as))
	}
	// A limit of one transfer per node and plan.
	s = state(4, "1*,2,3", "1*,3,4", "1*,2,4", "1*,2,3")
	if as := BalanceLeaders(s, Options{MaxTransfersPerNode: 1}); len(as) != 1 {
		t.Fatalf("%v", strs(as))
	}
}

func TestSkippedRanges(t *testing.T) {
	s := state(4, "1*,2,3", "1,2*,3", "1,2,3")
	kill(s, 3, time.Hour)
	s.Ranges[0].Changing = true
	got := strs(Plan(s, Options{}))
	// r1 is changing, r3 has no leader.
	want := []string{"r2: add n4, remove n3 (dead-node)"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestDeterministic(t *testing.T) {
	s := randomState(rand.New(rand.NewSource(1)), 12, 200, 3)
	kill(s, 5, time.Hour)
	want := strs(Plan(s, Options{}))
	if len(want) == 0 {
		t.Fatal("nothing to do")
	}
	rnd := rand.New(rand.NewSource(2))
	for i := 0; i < 5; i++ {
		c := &ClusterState{Nodes: append([]Node(nil), s.Nodes...), Ranges: append([]Range(nil), s.Ranges...)}
		rnd.Shuffle(len(c.Nodes), func(i, j int) { c.Nodes[i], c.Nodes[j] = c.Nodes[j], c.Nodes[i] })
		rnd.Shuffle(len(c.Ranges), func(i, j int) { c.Ranges[i], c.Ranges[j] = c.Ranges[j], c.Ranges[i] })
		if got := strs(Plan(c, Options{})); !reflect.DeepEqual(got, want) {
			t.Fatalf("order of the input changed the plan:\n%v\n%v", got, want)
		}
	}
	// Plan did not modify its input.
	before := fmt.Sprint(s.Ranges)
	Plan(s, Options{})
	if fmt.Sprint(s.Ranges) != before {
		t.Fatal("Plan modified the state")
	}
}

// randomState places ranges on the lower half of n nodes more often than
// on the upper half.
func randomState(rnd *rand.Rand, n, ranges, rf int) *ClusterState {
	s := state(n)
	for i := 0; i < ranges; i++ {
		r := Range{ID: RangeID(i + 1), Bytes: int64(1+rnd.Intn(100)) << 20}
		for len(r.Replicas) < rf {
			id := NodeID(1 + rnd.Intn(n))
			if rnd.Intn(3) > 0 {
				id = NodeID(1 + rnd.Intn((n+1)/2))
			}
			if indexOf(r.Replicas, id) < 0 {
				r.Replicas = append(r.Replicas, id)
			}
		}
		r.Leader = r.Replicas[0]
		s.Ranges = append(s.Ranges, r)
	}
	return s
}

// TestRandomConverges: from random skewed states, with and without a dead
// node, 3 and 5 replicas, placement reaches a fixpoint in bounded rounds
// with every invariant kept along the way (apply checks them), no range
// under-replicated and every node within 1.2× of its fair share.
func TestRandomConverges(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		rnd := rand.New(rand.NewSource(seed))
		rf := 3
		if seed%4 == 0 {
			rf = 5
		}
		n := 6 + rnd.Intn(10)
		s := randomState(rnd, n, 50+rnd.Intn(300), rf)
		o := Options{Replicas: rf}
		if seed%2 == 0 {
			kill(s, NodeID(1+rnd.Intn(n)), time.Hour)
			for i := range s.Ranges { // elections
				r := &s.Ranges[i]
				for _, id := range r.Replicas {
					if s.Nodes[id-1].Alive {
						r.Leader = id
						break
					}
				}
			}
		}
		rounds, actions := converge(t, s, o, 200)
		if ur := UnderReplicated(s, o); len(ur) != 0 {
			t.Fatalf("seed %d: under-replicated %v", seed, ur)
		}
		checkBalance(t, s, o, StatReplicas, 1.2)
		checkBalance(t, s, o, StatLeaders, 1.2)
		t.Logf("seed %d: %d nodes, %d ranges, rf %d: %d actions in %d rounds", seed, n, len(s.Ranges), rf, actions, rounds)
	}
}

// TestScorerWeights: a scorer that gives n1 twice the weight of the others
// gets n1 twice their replicas and leaders, the seam issue 19 plugs into.
func TestScorerWeights(t *testing.T) {
	o := Options{Scorer: WeightFunc(func(n *Node, _ Stat) float64 {
		return n.Attrs["speed"]
	})}
	s := randomState(rand.New(rand.NewSource(7)), 7, 300, 3)
	for i := range s.Nodes {
		s.Nodes[i].Attrs = map[string]float64{"speed": 1}
	}
	s.Nodes[0].Attrs["speed"] = 2
	converge(t, s, o, 200)
	bal := Balance(s, o, StatReplicas)
	if bal[0].Fair != 2*bal[1].Fair {
		t.Fatalf("fair shares %v", bal)
	}
	checkBalance(t, s, o, StatReplicas, 1.1)
	checkBalance(t, s, o, StatLeaders, 1.2)
	// Weight 0 (a full node): it is drained and given nothing.
	s.Nodes[0].Attrs["speed"] = 0
	converge(t, s, o, 400)
	if b := Balance(s, o, StatReplicas); b[0].Count != 0 {
		t.Fatalf("n1 keeps %v replicas", b[0].Count)
	}
}

// TestInFlightCounted: a move in flight counts as done, so the next plan
// does not repeat it: n4 is receiving r1 (from n1), which balances the
// replica counts.
func TestInFlightCounted(t *testing.T) {
	s := state(4, "1,2*,3", "1,2,3*", "1*,2,4", "1,3*,4")
	if as := Rebalance(s, Options{}); len(as) == 0 {
		t.Fatal("n1 (4 replicas) against n4 (2): no move")
	}
	s.Ranges[0].Changing, s.Ranges[0].Adding, s.Ranges[0].Removing = true, 4, 1
	s.Nodes[3].Snapshots, s.Nodes[1].Snapshots = 1, 1
	if as := Rebalance(s, Options{}); len(as) != 0 {
		t.Fatalf("in flight not counted: %v", strs(as))
	}
}

// TestRebalanceByBytes: placed by bytes, a node holding a few large
// ranges and one holding many small ones end with similar bytes, not
// similar counts; placed by count (the default), the reverse.
func TestRebalanceByBytes(t *testing.T) {
	build := func() *ClusterState {
		// n1..n4 hold 40 ranges of 1 MiB, n5..n8 get 8 of 20 MiB each:
		// every range on 3 of its group of 4 nodes.
		s := state(8)
		id := RangeID(1)
		for g, n := range []int{40, 8} {
			for i := 0; i < n; i++ {
				base := NodeID(1 + 4*g)
				r := Range{ID: id, Bytes: int64(1+19*g) << 20}
				for j := 0; j < 3; j++ {
					r.Replicas = append(r.Replicas, base+NodeID((i+j)%4))
				}
				r.Leader = r.Replicas[0]
				s.Ranges = append(s.Ranges, r)
				id++
			}
		}
		return s
	}
	o := Options{RebalanceBy: StatBytes}
	s := build()
	converge(t, s, o, 300)
	checkBalance(t, s, o, StatBytes, 1.2)
	if b := Balance(s, o, StatReplicas); b[0].Count < 1.5*b[7].Count {
		t.Errorf("by bytes: n1 %v replicas, n8 %v: counts should stay apart", b[0].Count, b[7].Count)
	}
	s = build()
	converge(t, s, Options{}, 300)
	checkBalance(t, s, Options{}, StatReplicas, 1.2)
	if b := Balance(s, Options{}, StatBytes); b[0].Ratio > 0.9 {
		t.Errorf("by count: n1 at %.2f of its bytes share, should be well below", b[0].Ratio)
	}
}

// TestUnknownNode: a replica on a node the state no longer lists (removed
// from the cluster) is treated as dead past the timeout.
func TestUnknownNode(t *testing.T) {
	s := state(4, "1*,2,9", "1,2*,3,9")
	got := strs(Repair(s, Options{}))
	// r1 goes to n4 (no replica) rather than n3 (one); r2 has a fourth
	// replica anyway.
	want := []string{"r1: add n4, remove n9 (dead-node)", "r2: remove n9 (dead-node)"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

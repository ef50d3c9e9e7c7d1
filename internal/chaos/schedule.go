package chaos

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Kind is a class of fault.
type Kind string

// The fault kinds, as named on the command line (--faults).
const (
	// KindKill is kill -9 of a node, which is restarted after a while.
	KindKill Kind = "kill"
	// KindPause is SIGSTOP of a node for longer than an election timeout,
	// then SIGCONT.
	KindPause Kind = "pause"
	// KindRestart is a clean restart: SIGTERM, wait for the exit, start.
	KindRestart Kind = "restart"
	// KindPartition cuts node-to-node traffic (see Shape), then heals it.
	KindPartition Kind = "partition"
)

// AllKinds lists every fault kind in a fixed order.
var AllKinds = []Kind{KindKill, KindPause, KindRestart, KindPartition}

// ParseKinds parses a comma-separated subset of the fault kinds ("all"
// means every kind). The result is in AllKinds order, without duplicates.
func ParseKinds(s string) ([]Kind, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("no fault kinds given (want a subset of %s)", kindList(AllKinds))
	}
	want := map[Kind]bool{}
	for _, part := range strings.Split(s, ",") {
		k := Kind(strings.ToLower(strings.TrimSpace(part)))
		switch {
		case k == "all":
			for _, a := range AllKinds {
				want[a] = true
			}
		case k == "":
			return nil, fmt.Errorf("empty fault kind in %q (stray comma?)", s)
		case !knownKind(k):
			return nil, fmt.Errorf("unknown fault kind %q (want a subset of %s)", part, kindList(AllKinds))
		default:
			want[k] = true
		}
	}
	var kinds []Kind
	for _, k := range AllKinds {
		if want[k] {
			kinds = append(kinds, k)
		}
	}
	return kinds, nil
}

func knownKind(k Kind) bool {
	for _, a := range AllKinds {
		if a == k {
			return true
		}
	}
	return false
}

func kindList(ks []Kind) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, ",")
}

// Shape is the form of a network partition.
type Shape string

// Partition shapes. Every cut is between nodes only: clients keep reaching
// every node, as clients next to the minority side of a real partition do.
const (
	// ShapeIsolateLeader cuts the leader from every other node, both ways.
	ShapeIsolateLeader Shape = "isolate-leader"
	// ShapeIsolateFollower cuts one follower from every other node.
	ShapeIsolateFollower Shape = "isolate-follower"
	// ShapeSplit splits the cluster into a majority and a minority of two
	// or more nodes (5 nodes: 3 | 2); the leader is on either side.
	ShapeSplit Shape = "split"
	// ShapeOneWay cuts one direction only between the leader and a
	// follower: messages from one of them never reach the other.
	ShapeOneWay Shape = "one-way"
)

// Step is one fault of a schedule: wait, inject, hold, heal. Targets are
// given as roles (the leader, some follower) resolved when the fault is
// injected; Pick chooses deterministically among the candidates then.
type Step struct {
	// Wait is the pause before the fault, counted from the moment the
	// cluster recovered from the previous one (or the workload started).
	Wait time.Duration
	Kind Kind
	// Leader targets the leader; otherwise a follower.
	Leader bool
	// Shape of a partition (KindPartition only).
	Shape Shape
	// FromLeader: for ShapeOneWay, the cut direction is leader → follower
	// (else follower → leader). For ShapeSplit, the leader is on the
	// minority side.
	FromLeader bool
	// Pick selects among the candidate followers (and split members).
	Pick uint32
	// Hold is how long the fault lasts before it is healed (for a clean
	// restart: how long the node stays down).
	Hold time.Duration
}

// String describes the step abstractly (roles, not node ids).
func (s Step) String() string {
	role := "a follower"
	if s.Leader {
		role = "the leader"
	}
	hold := s.Hold.Round(10 * time.Millisecond)
	switch s.Kind {
	case KindKill:
		return fmt.Sprintf("after %v: kill -9 %s, restart after %v", s.Wait.Round(10*time.Millisecond), role, hold)
	case KindPause:
		return fmt.Sprintf("after %v: SIGSTOP %s for %v", s.Wait.Round(10*time.Millisecond), role, hold)
	case KindRestart:
		return fmt.Sprintf("after %v: clean restart of %s (down %v)", s.Wait.Round(10*time.Millisecond), role, hold)
	case KindPartition:
		desc := string(s.Shape)
		switch s.Shape {
		case ShapeOneWay:
			if s.FromLeader {
				desc = "one-way leader -> follower"
			} else {
				desc = "one-way follower -> leader"
			}
		case ShapeSplit:
			if s.FromLeader {
				desc = "split, leader in the minority"
			} else {
				desc = "split, leader in the majority"
			}
		}
		return fmt.Sprintf("after %v: partition %s for %v", s.Wait.Round(10*time.Millisecond), desc, hold)
	}
	return fmt.Sprintf("after %v: %s", s.Wait, s.Kind)
}

// ScheduleConfig is what a schedule is drawn from. The same config (and so
// the same seed) always yields the same schedule.
type ScheduleConfig struct {
	Seed        int64
	Nodes       int
	Kinds       []Kind
	IntervalMin time.Duration
	IntervalMax time.Duration
	// Duration the schedule must cover (waits + holds).
	Duration time.Duration
	// ElectionTimeout is the nodes' base election timeout (ticks × tick);
	// pauses last 2-3.5 of them so that a paused leader is replaced.
	ElectionTimeout time.Duration
}

// NewSchedule draws the fault schedule of a run from c.Seed. It returns
// enough steps to cover c.Duration even if every fault were healed at once;
// the runner stops injecting when the duration is used up.
func NewSchedule(c ScheduleConfig) []Step {
	if len(c.Kinds) == 0 || c.Duration <= 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(uint64(c.Seed), 0x6b766f72756d)) // "kvorum"
	between := func(lo, hi time.Duration) time.Duration {
		if hi <= lo {
			return lo
		}
		return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
	}
	et := c.ElectionTimeout
	if et <= 0 {
		et = time.Second
	}
	var steps []Step
	var covered time.Duration
	for covered < c.Duration && len(steps) < 10000 {
		s := Step{
			Wait: between(c.IntervalMin, c.IntervalMax),
			Kind: c.Kinds[rng.IntN(len(c.Kinds))],
			Pick: rng.Uint32(),
		}
		switch s.Kind {
		case KindKill:
			s.Leader = rng.IntN(2) == 0
			s.Hold = between(300*time.Millisecond, 2*time.Second)
		case KindPause:
			s.Leader = rng.IntN(4) != 0 // mostly the leader
			s.Hold = between(2*et, 7*et/2)
		case KindRestart:
			s.Leader = rng.IntN(2) == 0
			s.Hold = between(0, 500*time.Millisecond)
		case KindPartition:
			shapes := []Shape{ShapeIsolateLeader, ShapeIsolateFollower, ShapeOneWay}
			if c.Nodes >= 5 {
				shapes = append(shapes, ShapeSplit)
			}
			s.Shape = shapes[rng.IntN(len(shapes))]
			s.Leader = s.Shape == ShapeIsolateLeader
			s.FromLeader = rng.IntN(2) == 0
			s.Hold = between(time.Second, 3*time.Second)
		}
		steps = append(steps, s)
		covered += s.Wait + s.Hold
	}
	return steps
}

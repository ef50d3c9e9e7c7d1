package torture

import (
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"time"
)

// Kind is a kind of fault.
type Kind string

// The fault kinds a schedule draws from.
const (
	// Crash: a node dies at once (its unsynced writes partly lost, as a
	// crash-cloned memory filesystem decides) and restarts later.
	Crash Kind = "crash"
	// PowerLoss: every node crashes at the same instant and restarts.
	PowerLoss Kind = "powerloss"
	// Partition: links cut (isolate the leader, isolate a node, split
	// minority/majority, one-way cut, bridge), then healed.
	Partition Kind = "partition"
	// Lossy: raft messages dropped, delayed (so reordered) and duplicated
	// at random for a while.
	Lossy Kind = "lossy"
	// Transfer: leadership moved to another node while clients write.
	Transfer Kind = "transfer"
	// Membership: a follower replaced by a new node (joined through a
	// snapshot, then the old one removed).
	Membership Kind = "membership"
	// Clock: a node's wall clock jumps forward or back by up to 10 min,
	// and later back.
	Clock Kind = "clock"
	// Split: the range holding a random hash slot is split there by
	// hand (Node.SplitRange) while clients write.
	Split Kind = "split"
)

// AllKinds is every fault kind the sweep draws by default, in a fixed
// order.
var AllKinds = []Kind{Crash, PowerLoss, Partition, Lossy, Transfer, Membership, Clock, Split}

// OptInKinds are kinds a run draws only when named (-torture.kinds
// crash,...): none now. Split was one until it passed the sweep (on
// 2026-11-29, 200 of 200 seeds after the member-change fixes; see
// docs/reliability.md).
var OptInKinds = []Kind{}

// ParseKinds parses a comma-separated list of kinds ("all" for every one).
func ParseKinds(s string) ([]Kind, error) {
	if s == "" || s == "all" {
		return AllKinds, nil
	}
	var out []Kind
	for _, f := range strings.Split(s, ",") {
		k := Kind(strings.TrimSpace(f))
		ok := false
		for _, a := range append(AllKinds[:len(AllKinds):len(AllKinds)], OptInKinds...) {
			ok = ok || a == k
		}
		if !ok {
			return nil, fmt.Errorf("unknown fault kind %q (known: %v, and opt-in %v)", k, AllKinds, OptInKinds)
		}
		out = append(out, k)
	}
	return out, nil
}

// Event is one scheduled fault. Targets are drawn when the schedule is
// made; which node is "the leader" is resolved when the event fires.
type Event struct {
	At      time.Duration // since the start of the fault phase
	Kind    Kind
	Variant string        // partition shape, transfer/crash target rule
	Target  int           // node slot (0-based), -1: the leader at that moment
	Hold    time.Duration // how long the fault lasts before it is healed
	Percent int           // crash: % of unsynced data kept; lossy: drop %
	Jump    time.Duration // clock: the jump
	Slot    uint16        // split: the hash slot to split at
}

func (e Event) String() string {
	s := fmt.Sprintf("t=%v %s", e.At.Round(time.Millisecond), e.Kind)
	if e.Variant != "" {
		s += "/" + e.Variant
	}
	switch {
	case e.Target >= 0:
		s += fmt.Sprintf(" slot %d", e.Target)
	default:
		s += " leader"
	}
	if e.Hold > 0 {
		s += fmt.Sprintf(" for %v", e.Hold.Round(time.Millisecond))
	}
	switch e.Kind {
	case Crash, PowerLoss:
		s += fmt.Sprintf(" keep %d%% unsynced", e.Percent)
	case Lossy:
		s += fmt.Sprintf(" drop %d%%", e.Percent)
	case Clock:
		s += fmt.Sprintf(" jump %v", e.Jump)
	case Split:
		s += fmt.Sprintf(" at slot %d", e.Slot)
	}
	return s
}

// MakeSchedule draws the fault schedule of one run. It is a pure function
// of its arguments: the same seed gives the same schedule.
func MakeSchedule(seed int64, nodes int, phase time.Duration, kinds []Kind) []Event {
	rng := rand.New(rand.NewSource(seed))
	if len(kinds) == 0 {
		kinds = AllKinds
	}
	var evs []Event
	dur := func(lo, hi time.Duration) time.Duration {
		return lo + time.Duration(rng.Int63n(int64(hi-lo)+1))
	}
	for t := dur(50*time.Millisecond, 250*time.Millisecond); t < phase; t += dur(100*time.Millisecond, 450*time.Millisecond) {
		k := kinds[rng.Intn(len(kinds))]
		// Power loss is rarer: it stops everything for a while.
		if k == PowerLoss && rng.Intn(3) != 0 {
			k = Crash
			if !hasKind(kinds, Crash) {
				continue
			}
		}
		e := Event{At: t, Kind: k, Target: rng.Intn(nodes)}
		if rng.Intn(3) == 0 {
			e.Target = -1
		}
		switch k {
		case Crash:
			e.Hold = dur(50*time.Millisecond, 700*time.Millisecond)
			e.Percent = rng.Intn(101)
		case PowerLoss:
			e.Target = -1
			e.Hold = dur(50*time.Millisecond, 400*time.Millisecond)
			e.Percent = rng.Intn(101)
		case Partition:
			shapes := []string{"isolate", "isolate", "split", "oneway", "bridge"}
			e.Variant = shapes[rng.Intn(len(shapes))]
			e.Hold = dur(150*time.Millisecond, 900*time.Millisecond)
		case Lossy:
			e.Hold = dur(200*time.Millisecond, 900*time.Millisecond)
			e.Percent = 5 + rng.Intn(26)
		case Transfer:
			e.Target = rng.Intn(nodes)
		case Membership:
			e.Target = rng.Intn(nodes)
		case Clock:
			e.Hold = dur(200*time.Millisecond, 1200*time.Millisecond)
			e.Jump = time.Duration(rng.Int63n(int64(10*time.Minute))) + time.Second
			if rng.Intn(2) == 0 {
				e.Jump = -e.Jump
			}
			e.Jump = e.Jump.Round(time.Millisecond)
		case Split:
			e.Slot = uint16(1 + rng.Intn(16383))
		}
		evs = append(evs, e)
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].At < evs[j].At })
	return evs
}

func hasKind(kinds []Kind, k Kind) bool {
	for _, x := range kinds {
		if x == k {
			return true
		}
	}
	return false
}

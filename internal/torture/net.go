package torture

import (
	"math/rand"
	"sync"
	"time"

	"github.com/kvorum/kvorum/internal/transport"
	"go.etcd.io/raft/v3/raftpb"
)

// faultyNet is the interceptor every node's transport shares: crashed nodes
// (nothing in or out), directed link cuts, and a lossy regime that drops,
// delays (and so reorders) and duplicates raft messages. Its random draws
// come from its own seeded generator.
type faultyNet struct {
	mu      sync.Mutex
	rng     *rand.Rand
	down    map[uint64]bool
	cut     map[[2]uint64]int // directed link -> number of active cuts
	gen     int               // generation of the lossy regime
	drop    float64
	dup     float64
	delayLo time.Duration
	delayHi time.Duration
}

var (
	_ transport.Interceptor = (*faultyNet)(nil)
	_ transport.Duplicator  = (*faultyNet)(nil)
)

func newFaultyNet(seed int64) *faultyNet {
	return &faultyNet{rng: rand.New(rand.NewSource(seed)), down: map[uint64]bool{}, cut: map[[2]uint64]int{}}
}

func (f *faultyNet) setDown(id uint64, down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if down {
		f.down[id] = true
	} else {
		delete(f.down, id)
	}
}

// cutLink breaks from → to (one way) until a matching uncutLink: cuts of
// overlapping partitions add up.
func (f *faultyNet) cutLink(from, to uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cut[[2]uint64{from, to}]++
}

func (f *faultyNet) uncutLink(from, to uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := [2]uint64{from, to}
	if f.cut[k] > 1 {
		f.cut[k]--
	} else {
		delete(f.cut, k)
	}
}

// lossy starts a random regime and returns its generation, for endLossy.
func (f *faultyNet) lossy(drop, dup float64, lo, hi time.Duration) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gen++
	f.drop, f.dup, f.delayLo, f.delayHi = drop, dup, lo, hi
	return f.gen
}

// endLossy ends the regime of generation gen unless a later one replaced
// it.
func (f *faultyNet) endLossy(gen int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gen == gen {
		f.drop, f.dup, f.delayLo, f.delayHi = 0, 0, 0, 0
	}
}

// heal restores every link and ends the lossy regime. Crashed nodes stay
// down.
func (f *faultyNet) heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cut = map[[2]uint64]int{}
	f.gen++
	f.drop, f.dup, f.delayLo, f.delayHi = 0, 0, 0, 0
}

func (f *faultyNet) blocked(from, to uint64) bool {
	return f.down[from] || f.down[to] || f.cut[[2]uint64{from, to}] > 0
}

func (f *faultyNet) delay() time.Duration {
	d := f.delayLo
	if span := f.delayHi - f.delayLo; span > 0 {
		d += time.Duration(f.rng.Int63n(int64(span) + 1))
	}
	return d
}

func (f *faultyNet) Outgoing(from, to uint64, _ *raftpb.Message) (bool, time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.blocked(from, to) {
		return true, 0
	}
	if f.drop > 0 && f.rng.Float64() < f.drop {
		return true, 0
	}
	return false, f.delay()
}

func (f *faultyNet) Duplicate(from, to uint64, _ *raftpb.Message) (bool, time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dup == 0 || f.blocked(from, to) || f.rng.Float64() >= f.dup {
		return false, 0
	}
	return true, f.delay() + time.Duration(f.rng.Int63n(int64(20*time.Millisecond)))
}

// Call fails calls over a cut link or to/from a crashed node; a call needs
// both directions.
func (f *faultyNet) Call(from, to uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down[from] || (to != 0 && (f.blocked(from, to) || f.blocked(to, from))) {
		return transport.ErrPartitioned
	}
	return nil
}

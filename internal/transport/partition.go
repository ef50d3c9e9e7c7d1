package transport

import (
	"errors"
	"math/rand"
	"sync"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// Interceptor decides the fate of each outgoing raft message and call. It
// is the fault-injection seam used by tests and the chaos harness. It is
// consulted on the sender's side only, from Send (so it must be fast and
// must not block) and from Call/CallAddr.
type Interceptor interface {
	// Outgoing is asked once per raft message (MsgSnap included) sent from
	// `from` to `to`. drop discards it silently (as the network would; a
	// dropped MsgSnap is reported to raft as a failed snapshot); delay > 0
	// holds it back, without holding back later messages.
	Outgoing(from, to uint64, m *raftpb.Message) (drop bool, delay time.Duration)
	// Call is asked once per call; non-nil makes the call fail with it. For
	// CallAddr to an address that is no known peer, to is 0.
	Call(from, to uint64) error
}

// Duplicator is an optional extension of Interceptor: an interceptor that
// implements it may have a raft message (never a MsgSnap) delivered twice,
// the copy after delay, as a network that retransmits may.
type Duplicator interface {
	Duplicate(from, to uint64, m *raftpb.Message) (dup bool, delay time.Duration)
}

// ErrPartitioned is the error Partitioner makes calls fail with.
var ErrPartitioned = errors.New("transport: network partitioned (injected)")

// Partitioner is a ready-made Interceptor: cut links, isolated nodes, a
// random drop rate and a random delay. One Partitioner may be shared by
// every node of an in-process cluster (each transport passes its own id as
// `from`). The zero value is ready to use; all methods are safe for
// concurrent use.
type Partitioner struct {
	mu       sync.Mutex
	cut      map[[2]uint64]bool // directed: {from, to}
	isolated map[uint64]bool
	dropRate float64
	rng      *rand.Rand
	delayMin time.Duration
	delayMax time.Duration
}

var _ Interceptor = (*Partitioner)(nil)

// NewPartitioner returns a Partitioner with every link up.
func NewPartitioner() *Partitioner { return &Partitioner{} }

// Cut breaks the link between a and b in both directions.
func (p *Partitioner) Cut(a, b uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.init()
	p.cut[[2]uint64{a, b}] = true
	p.cut[[2]uint64{b, a}] = true
}

// CutOneWay breaks only the direction from → to.
func (p *Partitioner) CutOneWay(from, to uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.init()
	p.cut[[2]uint64{from, to}] = true
}

// Isolate cuts id off from every other node, both ways.
func (p *Partitioner) Isolate(id uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.init()
	p.isolated[id] = true
}

// Heal restores the network: no cuts, no isolation, no random drops or
// delays.
func (p *Partitioner) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = nil
	p.isolated = nil
	p.dropRate = 0
	p.delayMin, p.delayMax = 0, 0
}

// SetDropRate drops each raft message with probability prob (calls are
// not affected), drawing from a generator seeded with seed.
func (p *Partitioner) SetDropRate(prob float64, seed int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropRate = prob
	p.rng = rand.New(rand.NewSource(seed))
}

// SetDelay delays each raft message by a uniformly random duration in
// [lo, hi] (messages may then be reordered, as raft allows). Zero
// disables.
func (p *Partitioner) SetDelay(lo, hi time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if hi < lo {
		hi = lo
	}
	p.delayMin, p.delayMax = lo, hi
	if p.rng == nil {
		p.rng = rand.New(rand.NewSource(1))
	}
}

func (p *Partitioner) init() {
	if p.cut == nil {
		p.cut = map[[2]uint64]bool{}
	}
	if p.isolated == nil {
		p.isolated = map[uint64]bool{}
	}
}

// blocked reports whether from → to is down. Must hold p.mu.
func (p *Partitioner) blocked(from, to uint64) bool {
	if from == to {
		return false
	}
	return p.isolated[from] || p.isolated[to] || p.cut[[2]uint64{from, to}]
}

// Outgoing implements Interceptor.
func (p *Partitioner) Outgoing(from, to uint64, _ *raftpb.Message) (bool, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.blocked(from, to) {
		return true, 0
	}
	if p.dropRate > 0 && p.rng.Float64() < p.dropRate {
		return true, 0
	}
	var d time.Duration
	if p.delayMax > 0 {
		d = p.delayMin
		if span := p.delayMax - p.delayMin; span > 0 {
			d += time.Duration(p.rng.Int63n(int64(span) + 1))
		}
	}
	return false, d
}

// Call implements Interceptor: a call needs both directions up.
func (p *Partitioner) Call(from, to uint64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.isolated[from] || (to != 0 && (p.blocked(from, to) || p.blocked(to, from))) {
		return ErrPartitioned
	}
	return nil
}

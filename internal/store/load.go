package store

import "sync/atomic"

// Load counts the client commands executed for a replica's range on this
// node: reads and writes, each command once. The server decides what
// counts (server/ranges_load.go); the counters only add up, lock-free.
//
// It also keeps a sample of the hash slots of recent commands, for the
// split queue's splits by load (server/ranges_splitqueue.go): one command
// in LoadSampleEvery, by the read and write counters, has its slot
// recorded into a ring of the last LoadSamples samples. The ring is
// allocated at the first sample, so a node that does not sample (splits
// by load off) pays nothing for it.
type Load struct {
	reads, writes atomic.Uint64
	next          atomic.Uint64 // samples recorded
	ring          atomic.Pointer[[LoadSamples]atomic.Uint32]
}

// LoadSampleEvery is how many commands (reads and writes counted apart)
// there are for one slot sample.
const LoadSampleEvery = 8

// LoadSamples is the size of the ring of slot samples.
const LoadSamples = 512

// Add counts n commands, writes or reads.
func (l *Load) Add(write bool, n int) {
	l.AddSampled(write, n)
}

// AddSampled counts n commands, writes or reads, and returns the offset
// of the first of them to sample (the one that brings the counter to a
// multiple of LoadSampleEvery): offsets first, first+LoadSampleEvery, ...
// below n are to be recorded (RecordSlot). first >= n: none.
func (l *Load) AddSampled(write bool, n int) (first int) {
	if n <= 0 {
		return n
	}
	c := &l.reads
	if write {
		c = &l.writes
	}
	end := c.Add(uint64(n))
	start := end - uint64(n) // the counter before these: command i brings it to start+i+1
	return int((LoadSampleEvery - 1) - start%LoadSampleEvery)
}

// RecordSlot records one sampled command's hash slot.
func (l *Load) RecordSlot(sl uint16) {
	ring := l.ring.Load()
	if ring == nil {
		ring = new([LoadSamples]atomic.Uint32)
		if !l.ring.CompareAndSwap(nil, ring) {
			ring = l.ring.Load()
		}
	}
	i := l.next.Add(1) - 1
	ring[i%LoadSamples].Store(uint32(sl) + 1) // 0: empty
}

// SlotSamples returns the slots sampled, at most the last LoadSamples
// (in no particular order), appended to buf.
func (l *Load) SlotSamples(buf []uint16) []uint16 {
	ring := l.ring.Load()
	if ring == nil {
		return buf
	}
	for i := range ring {
		if v := ring[i].Load(); v != 0 {
			buf = append(buf, uint16(v-1))
		}
	}
	return buf
}

// SampleCount is the number of slot samples recorded since the replica
// was created on this node.
func (l *Load) SampleCount() uint64 { return l.next.Load() }

// Totals returns the commands counted since the replica was created on
// this node.
func (l *Load) Totals() (reads, writes uint64) {
	return l.reads.Load(), l.writes.Load()
}

// Load returns the replica's command counters.
func (r *Replica) Load() *Load { return &r.load }

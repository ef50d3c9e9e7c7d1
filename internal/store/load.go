package store

import "sync/atomic"

// Load counts the client commands executed for a replica's range on this
// node: reads and writes, each command once. The server decides what
// counts (server/ranges_load.go); the counters only add up, lock-free.
type Load struct {
	reads, writes atomic.Uint64
}

// Add counts n commands, writes or reads.
func (l *Load) Add(write bool, n int) {
	if n <= 0 {
		return
	}
	if write {
		l.writes.Add(uint64(n))
	} else {
		l.reads.Add(uint64(n))
	}
}

// Totals returns the commands counted since the replica was created on
// this node.
func (l *Load) Totals() (reads, writes uint64) {
	return l.reads.Load(), l.writes.Load()
}

// Load returns the replica's command counters.
func (r *Replica) Load() *Load { return &r.load }

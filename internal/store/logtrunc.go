package store

import "go.etcd.io/raft/v3/raftpb"

// Truncating the Raft log by size.
//
// The log is truncated once it holds SnapshotThreshold applied entries,
// down to the newest half of them; with large entries (a leader groups
// every proposal of a round into one entry: tens of KiB under pipelined
// writes) that kept hundreds of MiB of log, written once more by the
// memtable flush (values of 256 bytes or more go to blob files there)
// and moved down by compactions, only to be deleted later. So the log is
// also truncated by size: once the entries applied since the last
// truncation hold more than Config.LogBytes, down to the newest quarter
// of that; entries deleted while still in the memtable are dropped by
// its flush and never reach a table. A leader keeps what its followers
// still need (their Match index), so that a follower a little behind is
// sent entries, not a snapshot; one that is not responding does not pin
// the log (raft's RecentActive), and the count rule applies regardless.

// DefaultLogBytes is Config.LogBytes's default.
const DefaultLogBytes = 8 << 20

type entrySize struct {
	index uint64
	size  int
}

// logBudget is Config.LogBytes with its default; negative: none.
func (r *Replica) logBudget() int {
	if b := r.store.cfg.LogBytes; b != 0 {
		return b
	}
	return DefaultLogBytes
}

// noteApplied records the sizes of the entries applied in this round and
// reports whether the log is over its byte budget.
func (r *Replica) noteApplied(ents []*raftpb.Entry) bool {
	budget := r.logBudget()
	if budget < 0 {
		return false
	}
	for _, e := range ents {
		n := len(e.GetData())
		r.logSizes = append(r.logSizes, entrySize{index: e.GetIndex(), size: n})
		r.logBytes += n
	}
	return r.logBytes > budget && r.logBytes >= r.logRetryAt
}

// truncateIndex is the index up to which the log may be truncated now,
// applied the highest applied index; zero: nothing to truncate.
func (r *Replica) truncateIndex(applied uint64) uint64 {
	var index uint64
	if keep := r.store.cfg.SnapshotThreshold / 2; keep > 0 && applied > keep {
		index = applied - keep
	}
	if budget := r.logBudget(); budget > 0 && r.logBytes > budget {
		// The newest entries holding a quarter of the budget stay.
		kept, i := 0, len(r.logSizes)
		for i > 0 && kept+r.logSizes[i-1].size <= budget/4 {
			i--
			kept += r.logSizes[i].size
		}
		if i > 0 {
			bySize := min(r.logSizes[i-1].index, applied)
			if m, ok := r.followersMatch(); ok {
				bySize = min(bySize, m)
			}
			index = max(index, bySize)
		}
	}
	return index
}

// followersMatch is, on a leader, the lowest Match index among its
// responsive followers and learners; ok is false on a follower.
func (r *Replica) followersMatch() (match uint64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.mu.rn.Status()
	if st.Progress == nil {
		return 0, false
	}
	match = ^uint64(0)
	for id, pr := range st.Progress {
		if id == st.ID || !pr.RecentActive {
			continue
		}
		match = min(match, pr.Match)
	}
	return match, true
}

// sizeTruncated notes a truncation by size that was attempted: if the
// followers held it back, the next attempt waits for another quarter of
// the budget to be applied (not every round: Status copies the progress).
func (r *Replica) sizeTruncated() {
	r.logRetryAt = r.logBytes + r.logBudget()/4
}

// forgetSizes drops the sizes of the entries up to index (truncated, or
// replaced by a snapshot).
func (r *Replica) forgetSizes(index uint64) {
	i := 0
	for i < len(r.logSizes) && r.logSizes[i].index <= index {
		r.logBytes -= r.logSizes[i].size
		i++
	}
	r.logSizes = append(r.logSizes[:0], r.logSizes[i:]...)
}

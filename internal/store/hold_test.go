package store

import (
	"testing"
	"time"
)

// TestHoldProposals pins the group-commit policy of a leader: proposals
// wait while its last entry is uncommitted, for at most holdPatience and
// holdMaxCmds commands, and never when nothing is in flight or the test
// drives the clock itself (no ticker).
func TestHoldProposals(t *testing.T) {
	now := ddEpoch
	s := &Store{cfg: Config{TickInterval: 100 * time.Millisecond}, mono: func() time.Time { return now }}
	r := &Replica{store: s}
	pend := func(cmds int) {
		r.mu.pending = append(r.mu.pending, &proposal{cmds: make([][][]byte, cmds)})
	}

	pend(1)
	r.mu.appended = 7
	if r.holdProposalsLocked(7) {
		t.Fatal("held although the last entry is committed")
	}
	if !r.holdProposalsLocked(6) {
		t.Fatal("not held although the last entry is in flight")
	}
	now = now.Add(holdPatience - time.Microsecond)
	if !r.holdProposalsLocked(6) {
		t.Fatal("released before holdPatience")
	}
	now = now.Add(time.Microsecond)
	if r.holdProposalsLocked(6) {
		t.Fatal("still held after holdPatience")
	}
	// The next hold starts a new wait.
	if !r.holdProposalsLocked(6) {
		t.Fatal("a new hold after a release was refused")
	}
	if r.holdProposalsLocked(7) || !r.mu.holdSince.IsZero() {
		t.Fatal("the commit did not end the hold")
	}

	r.mu.pending = nil
	pend(holdMaxCmds - 2)
	pend(1)
	if !r.holdProposalsLocked(6) {
		t.Fatal("not held below holdMaxCmds")
	}
	pend(1)
	if r.holdProposalsLocked(6) {
		t.Fatal("held with holdMaxCmds commands waiting")
	}

	// A tick shorter than holdPatience bounds the wait.
	s.cfg.TickInterval = holdPatience / 2
	r.mu.pending = r.mu.pending[:1]
	if !r.holdProposalsLocked(6) {
		t.Fatal("not held with a short tick")
	}
	now = now.Add(holdPatience / 2)
	if r.holdProposalsLocked(6) {
		t.Fatal("held for longer than a tick")
	}

	s.cfg.TickInterval = 0
	if r.holdProposalsLocked(6) {
		t.Fatal("held without a ticker")
	}
}

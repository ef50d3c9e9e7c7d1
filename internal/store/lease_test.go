package store

import (
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// TestVoteDelay checks votesDelayed on vote requests raft itself makes: a
// pre-vote is dropped until the delay ends; the vote of a leadership
// transfer (raft's campaignTransfer context, which campaignTransferCtx
// must spell exactly) never is. The scenarios in testdata/lease_restart.txt
// show the delay in a cluster.
func TestVoteDelay(t *testing.T) {
	votes := func(transfer bool) *raftpb.Message {
		ms := raft.NewMemoryStorage()
		if err := ms.ApplySnapshot(&raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{
			ConfState: &raftpb.ConfState{Voters: []uint64{1, 2}}, Index: ptr(uint64(1)), Term: ptr(uint64(1)),
		}}); err != nil {
			t.Fatal(err)
		}
		rn, err := raft.NewRawNode(&raft.Config{ID: 2, ElectionTick: 10, HeartbeatTick: 1, Storage: ms,
			MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 16, PreVote: true, CheckQuorum: true, Logger: raftLogger{testLog()}})
		if err != nil {
			t.Fatal(err)
		}
		if transfer {
			if err := rn.Step(&raftpb.Message{Type: raftpb.MessageType_MsgTimeoutNow.Enum(), From: ptr(uint64(1)), To: ptr(uint64(2)), Term: ptr(uint64(1))}); err != nil {
				t.Fatal(err)
			}
		} else if err := rn.Campaign(); err != nil {
			t.Fatal(err)
		}
		for _, m := range rn.Ready().Messages {
			if m.GetTo() == 1 {
				return m
			}
		}
		t.Fatal("no vote request")
		return nil
	}
	preVote, transferVote := votes(false), votes(true)
	if preVote.GetType() != raftpb.MessageType_MsgPreVote || transferVote.GetType() != raftpb.MessageType_MsgVote {
		t.Fatalf("got %v and %v", preVote.GetType(), transferVote.GetType())
	}
	if string(transferVote.GetContext()) != campaignTransferCtx {
		t.Fatalf("raft marks a transfer vote with %q, campaignTransferCtx is %q", transferVote.GetContext(), campaignTransferCtx)
	}

	now := ddEpoch
	s := &Store{cfg: Config{ElectionTicks: 10, TickInterval: 100 * time.Millisecond}, mono: func() time.Time { return now }}
	r := &Replica{store: s, voteDelayUntil: now.Add(s.electionTimeout())}
	now = now.Add(999 * time.Millisecond)
	if !r.votesDelayed(preVote) {
		t.Error("a pre-vote 999ms after the start was not dropped")
	}
	if r.votesDelayed(transferVote) {
		t.Error("a leadership transfer's vote was dropped")
	}
	if r.votesDelayed(&raftpb.Message{Type: raftpb.MessageType_MsgHeartbeat.Enum()}) {
		t.Error("a heartbeat was dropped")
	}
	now = now.Add(time.Millisecond)
	if r.votesDelayed(preVote) {
		t.Error("a pre-vote an election timeout after the start was dropped")
	}
	if (&Replica{store: s}).votesDelayed(preVote) {
		t.Error("a replica with no delay (brand-new cluster) dropped a pre-vote")
	}
}

// TestLeaseDuration pins the drift bound: 1s election timeout, 100ms
// ticks: 1s - 10% - one tick.
func TestLeaseDuration(t *testing.T) {
	s := &Store{cfg: Config{ElectionTicks: 10, TickInterval: 100 * time.Millisecond, LeaseReads: true}}
	if got := s.leaseDuration(); got != 800*time.Millisecond {
		t.Fatalf("lease %v, want 800ms", got)
	}
	s.cfg.LeaseReads = false
	if got := s.leaseDuration(); got != 0 {
		t.Fatalf("lease %v with LeaseReads off", got)
	}
	s.cfg.LeaseReads, s.cfg.TickInterval = true, 0
	if got := s.leaseDuration(); got != 0 {
		t.Fatalf("lease %v without a ticker", got)
	}
}

// TestLeaseReadIndex: a read on the lease holder waits for the commit
// index only as far as anyone may have seen it: the lease's floor, the
// commit indexes sent to other nodes (MsgApp and heartbeat commits,
// ReadIndex answers, snapshots), the entries applied here; never above the
// commit index.
func TestLeaseReadIndex(t *testing.T) {
	r := &Replica{}
	r.mu.lease.floor = 10
	check := func(commit, want uint64) {
		t.Helper()
		if got := r.leaseReadIndexLocked(commit); got != want {
			t.Fatalf("commit %d, floor %d, sent %d, acked %d: read index %d, want %d",
				commit, r.mu.lease.floor, r.mu.sentCommit, r.mu.acked, got, want)
		}
	}
	check(15, 10)
	r.noteSentLocked(&raftpb.Message{Type: raftpb.MessageType_MsgApp.Enum(), Commit: ptr(uint64(12))})
	check(15, 12)
	r.noteSentLocked(&raftpb.Message{Type: raftpb.MessageType_MsgHeartbeat.Enum(), Commit: ptr(uint64(11))})
	check(15, 12) // a lower commit (heartbeat: capped at the follower's match) changes nothing
	r.mu.acked = 13
	check(15, 13)
	r.noteSentLocked(&raftpb.Message{Type: raftpb.MessageType_MsgReadIndexResp.Enum(), Index: ptr(uint64(14))})
	check(15, 14)
	r.noteSentLocked(&raftpb.Message{Type: raftpb.MessageType_MsgSnap.Enum(),
		Snapshot: &raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{Index: ptr(uint64(17))}}})
	check(15, 15) // never above the commit index
	check(20, 17)
	r.noteSentLocked(&raftpb.Message{Type: raftpb.MessageType_MsgAppResp.Enum(), Index: ptr(uint64(30))})
	check(20, 17) // a follower's answer tells no commit
}

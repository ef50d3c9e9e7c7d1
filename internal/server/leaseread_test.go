package server

import (
	"testing"
	"time"
)

// TestLeaseReads: with LeaseReads on (as `kvorum start` by default) the
// leader serves GETs from its lease, and answers a follower's ReadIndex
// from it too (no heartbeat round);
// with it off every read batch takes a ReadIndex round. Reads see the
// writes either way (the linearizability of both paths is what
// internal/torture checks under faults).
func TestLeaseReads(t *testing.T) {
	for _, lease := range []bool{true, false} {
		c := newClusterWith(t, 3, func(_ uint64, cfg *Config) { cfg.LeaseReads = lease })
		ctx := testCtx(t, 20*time.Second)
		lead := c.waitLeader()
		lc := c.client(lead)
		if err := lc.Set(ctx, "k", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 50; i++ {
			if v, err := lc.Get(ctx, "k").Result(); err != nil || v != "v" {
				t.Fatalf("lease=%v: GET on the leader: %q %v", lease, v, err)
			}
		}
		leaderLeaseReads := gauge(t, c.node(lead), "kvorum_raft_lease_reads_total")
		f := followersOf(lead, 3)[0]
		if v, err := c.client(f).Get(ctx, "k").Result(); err != nil || v != "v" {
			t.Fatalf("lease=%v: GET on a follower: %q %v", lease, v, err)
		}
		leaseReads := gauge(t, c.node(lead), "kvorum_raft_lease_reads_total")
		// The follower's ReadIndex is answered by the leader from its
		// lease (one more lease read there), not by a heartbeat round.
		if lease && leaseReads != leaderLeaseReads+1 {
			t.Errorf("a follower's read: the leader's lease reads went %v -> %v, want one more", leaderLeaseReads, leaseReads)
		}
		if !lease && leaseReads != leaderLeaseReads {
			t.Errorf("lease reads off: a follower's read counted as a lease read on the leader")
		}
		rounds := gauge(t, c.node(lead), "kvorum_raft_read_index_rounds_total")
		t.Logf("lease=%v: leader: %v lease reads, %v ReadIndex rounds", lease, leaseReads, rounds)
		if lease && (leaseReads < 40 || rounds > 10) {
			t.Errorf("lease reads on: %v of 50 GETs served from the lease, %v ReadIndex rounds", leaseReads, rounds)
		}
		if !lease && (leaseReads != 0 || rounds < 50) {
			t.Errorf("lease reads off: %v lease reads, %v ReadIndex rounds for 50 GETs", leaseReads, rounds)
		}
		if v := gauge(t, c.node(f), "kvorum_raft_lease_reads_total"); v != 0 {
			t.Errorf("lease=%v: a follower served %v lease reads", lease, v)
		}
	}
}

// TestFollowerReadsAcquireLease: a leader that serves no reads of its own
// still takes a lease once followers read, so that their ReadIndex
// requests are answered from it rather than each by a heartbeat round
// to a quorum (without it, the leader of a cluster read only through its
// followers never held a lease).
func TestFollowerReadsAcquireLease(t *testing.T) {
	c := newClusterWith(t, 3, func(_ uint64, cfg *Config) { cfg.LeaseReads = true })
	ctx := testCtx(t, 20*time.Second)
	lead := c.waitLeader()
	fc := c.client(followersOf(lead, 3)[0])
	if err := fc.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// Whatever lease the leader took so far (160 ms in this harness)
	// runs out: from here on only the follower reads.
	time.Sleep(400 * time.Millisecond)
	leaseReads0 := gauge(t, c.node(lead), "kvorum_raft_lease_reads_total")
	probes0 := gauge(t, c.node(lead), "kvorum_raft_lease_probes_total")
	const reads = 40
	for i := 0; i < reads; i++ {
		if v, err := fc.Get(ctx, "k").Result(); err != nil || v != "v" {
			t.Fatalf("GET on a follower: %q %v", v, err)
		}
	}
	leaseReads := gauge(t, c.node(lead), "kvorum_raft_lease_reads_total") - leaseReads0
	probes := gauge(t, c.node(lead), "kvorum_raft_lease_probes_total") - probes0
	t.Logf("leader: %v of %d follower reads answered from the lease, %v probes", leaseReads, reads, probes)
	if probes < 1 {
		t.Errorf("the leader sent no lease probe for its followers' reads")
	}
	// The first read (or the first few, while the probe travels) take a
	// heartbeat round; the rest are answered from the lease.
	if leaseReads < reads-5 {
		t.Errorf("%v of %d follower reads answered from the leader's lease, want at least %d", leaseReads, reads, reads-5)
	}
}

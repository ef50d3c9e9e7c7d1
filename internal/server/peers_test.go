package server

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestRestartedNodeLearnsMembersAddedWhileItWasDown: node 3 is down while
// node 4 joins, node 1 is removed and node 4 becomes leader, and the log is
// truncated past those changes. Restarted, node 3 hears from leader 4 but
// its own descriptor does not list node 4; it must learn node 4's address
// (learnPeers) to answer, get the snapshot and catch up. Before the fix it
// stayed behind forever (found by the torture harness).
func TestRestartedNodeLearnsMembersAddedWhileItWasDown(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx := testCtx(t, 60*time.Second)
	c.stop(3)
	cfg := nodeConfig(t, 4, c.net)
	cfg.Join = c.node(2).PeerAddr()
	c.cfgs[4] = cfg
	c.start(4)
	// A joining node is a learner until it has caught up and is promoted
	// (under -race on a busy machine that can outlast start): retry the
	// transfer while node 4 is still a learner.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		err := c.node(2).TransferLeader(ctx, 4)
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "is a learner") || time.Now().After(deadline) {
			t.Fatalf("transfer leader to 4: %v", err)
		}
	}
	if err := c.node(2).RemoveMember(ctx, 1); err != nil {
		t.Fatalf("remove node 1: %v", err)
	}
	c.stop(1)
	cl := c.client(4)
	for i := 0; i < 200; i++ { // several times SnapshotThreshold: the log is truncated
		if err := cl.Set(ctx, fmt.Sprintf("k%03d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if st := c.node(4).Status(); st.FirstIndex < 30 {
		t.Fatalf("log not truncated: first index %d", st.FirstIndex)
	}
	c.start(3)
	deadline := time.Now().Add(15 * time.Second)
	for {
		lead, three := c.node(4).Status(), c.node(3).Status()
		if three.AppliedIndex >= lead.CommitIndex && lead.CommitIndex > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node 3 stuck at applied %d (leader 4 commit %d); node 3 sees members %v", three.AppliedIndex, lead.CommitIndex, three.Members)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got, err := c.client(3).Get(ctx, "k199").Result(); err != nil || got != "199" {
		t.Fatalf("node 3: GET k199 = %q, %v", got, err)
	}
}

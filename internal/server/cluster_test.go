package server

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestClusterAnyNodeServesLinearizably(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx := testCtx(t, 30*time.Second)
	for id := uint64(1); id <= 3; id++ {
		key := fmt.Sprintf("k%d", id)
		if err := c.client(id).Set(ctx, key, fmt.Sprintf("v%d", id), 0).Err(); err != nil {
			t.Fatalf("set via node %d: %v", id, err)
		}
		// Every node must see the write at once (ReadIndex, not stale reads).
		for other := uint64(1); other <= 3; other++ {
			got, err := c.client(other).Get(ctx, key).Result()
			if err != nil || got != fmt.Sprintf("v%d", id) {
				t.Fatalf("get %s via node %d after write via %d: %q, %v", key, other, id, got, err)
			}
		}
	}
	// A pipeline of mixed writes and reads keeps its order.
	pipe := c.client(2).Pipeline()
	incr := make([]interface{ Val() int64 }, 0)
	for i := 0; i < 20; i++ {
		incr = append(incr, pipe.Incr(ctx, "counter"))
	}
	get := pipe.Get(ctx, "counter")
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	for i, r := range incr {
		if r.Val() != int64(i+1) {
			t.Fatalf("incr %d returned %d", i, r.Val())
		}
	}
	if get.Val() != "20" {
		t.Fatalf("get after pipelined incrs: %q", get.Val())
	}
}

// writeLoad runs writers against the given nodes until stop is closed and
// returns the keys whose SET was acknowledged.
func writeLoad(t *testing.T, c *testCluster, ids []uint64, stop chan struct{}) func() map[string]string {
	var mu sync.Mutex
	acked := map[string]string{}
	var wg sync.WaitGroup
	for w, id := range ids {
		cl := c.client(id)
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			ctx := testCtx(t, time.Minute)
			for i := 0; i < 100000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k, v := fmt.Sprintf("w%d-%d", w, i), fmt.Sprintf("val-%d-%d", w, i)
				if err := cl.Set(ctx, k, v, 0).Err(); err == nil {
					mu.Lock()
					acked[k] = v
					mu.Unlock()
				} else {
					time.Sleep(10 * time.Millisecond)
				}
			}
		}(w)
	}
	return func() map[string]string {
		close(stop)
		wg.Wait()
		return acked
	}
}

// checkAcked reads every acknowledged write back from node id, 200 keys
// per MGET: thousands of GETs one after another (one linearizable read
// each) took more than the minute allowed on a machine loaded by the
// other test packages running alongside.
func checkAcked(t *testing.T, c *testCluster, id uint64, acked map[string]string) {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	cl := c.client(id)
	keys := make([]string, 0, len(acked))
	for k := range acked {
		keys = append(keys, k)
	}
	for len(keys) > 0 {
		n := min(200, len(keys))
		got, err := cl.MGet(ctx, keys[:n]...).Result()
		if err != nil {
			t.Fatalf("reading acknowledged writes back from node %d: %v", id, err)
		}
		for i, k := range keys[:n] {
			if s, _ := got[i].(string); s != acked[k] {
				t.Fatalf("acknowledged write %s=%s lost on node %d: got %v", k, acked[k], id, got[i])
			}
		}
		keys = keys[n:]
	}
}

func TestClusterLeaderCrashLosesNoAcknowledgedWrite(t *testing.T) {
	c := newTestCluster(t, 3)
	lead := c.waitLeader()
	others := followersOf(lead, 3)
	stop := writeLoad(t, c, []uint64{1, 2, 3, others[0]}, make(chan struct{}))
	time.Sleep(500 * time.Millisecond)
	c.stop(lead)
	newLead := c.waitLeader()
	if newLead == lead {
		t.Fatalf("leader %d still leader after stop", lead)
	}
	time.Sleep(500 * time.Millisecond)
	acked := stop()
	if len(acked) == 0 {
		t.Fatal("no write was acknowledged")
	}
	t.Logf("%d acknowledged writes; leader %d crashed, new leader %d", len(acked), lead, newLead)
	checkAcked(t, c, others[0], acked)
	c.start(lead) // restart with the same (in-memory) data directory
	c.waitLeader()
	checkAcked(t, c, lead, acked)
}

// TestShutdownHandsLeadershipOver: a leader stopped with Shutdown (what
// 'kvorum start' does on SIGTERM) hands leadership to a caught-up voter
// before it stops, so the others have a leader the moment it is gone,
// where a crash leaves them leaderless for an election timeout; writes
// under way keep being acknowledged, and none is lost. A follower's
// Shutdown just stops it.
func TestShutdownHandsLeadershipOver(t *testing.T) {
	c := newTestCluster(t, 3)
	lead := c.waitLeader()
	others := followersOf(lead, 3)
	stop := writeLoad(t, c, others, make(chan struct{}))
	time.Sleep(300 * time.Millisecond)
	term := c.node(others[0]).Status().Term
	c.shutdown(lead)
	var now []string
	leaders := 0
	for _, id := range others {
		st := c.node(id).Status()
		now = append(now, fmt.Sprintf("node %d: %s, leader %d, term %d", id, st.Role, st.Leader, st.Term))
		if st.Role == "leader" {
			leaders++
			if st.Term <= term {
				t.Errorf("node %d leads in term %d, not above %d", id, st.Term, term)
			}
		}
	}
	if leaders != 1 {
		t.Fatalf("right after the leader's Shutdown returned: %v; want one of them leading already", now)
	}
	time.Sleep(300 * time.Millisecond)
	acked := stop()
	if len(acked) == 0 {
		t.Fatal("no write was acknowledged")
	}
	checkAcked(t, c, others[0], acked)

	// A follower just stops: the leader stays.
	newLead := c.waitLeader()
	var follower uint64
	for _, id := range others {
		if id != newLead {
			follower = id
		}
	}
	c.shutdown(follower)
	if st := c.node(newLead).Status(); st.Role != "leader" {
		t.Fatalf("node %d is %s after a follower's Shutdown, want still leader", newLead, st.Role)
	}
}

// shutdown stops node id with Shutdown (Stop is what stop uses).
func (c *testCluster) shutdown(id uint64) {
	c.t.Helper()
	c.mu.Lock()
	n := c.nodes[id]
	delete(c.nodes, id)
	c.mu.Unlock()
	if err := n.Shutdown(testCtx(c.t, 10*time.Second)); err != nil {
		c.t.Fatalf("shutdown node %d: %v", id, err)
	}
}

func TestClusterMinorityRefusesAndHeals(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx := testCtx(t, 30*time.Second)
	lead := c.waitLeader()
	if err := c.client(lead).Set(ctx, "before", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// Isolate the leader: it is the minority now. A write it accepted before
	// noticing is never acknowledged (the outcome is reported as unknown).
	c.net.Isolate(lead)
	if err := c.client(lead).Set(ctx, "minority", "x", 0).Err(); err == nil {
		t.Fatal("isolated leader acknowledged a write")
	}
	// Once it has stepped down (CheckQuorum), it refuses clearly.
	deadline := time.Now().Add(10 * time.Second)
	for c.node(lead).Status().Leader != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	err := c.client(lead).Set(ctx, "minority2", "x", 0).Err()
	if err == nil || !strings.Contains(err.Error(), "CLUSTERDOWN") {
		t.Fatalf("write on isolated node: want CLUSTERDOWN error, got %v", err)
	}
	if _, err := c.client(lead).Get(ctx, "before").Result(); err == nil || !strings.Contains(err.Error(), "CLUSTERDOWN") {
		t.Fatalf("read on isolated node: want CLUSTERDOWN error, got %v", err)
	}
	// The majority elects a new leader and keeps serving.
	var maj uint64 = 1
	if maj == lead {
		maj = 2
	}
	if err := c.client(maj).Set(ctx, "majority", "y", 0).Err(); err != nil {
		t.Fatalf("majority write: %v", err)
	}
	c.net.Heal()
	c.waitLeader()
	if got, err := c.client(lead).Get(ctx, "majority").Result(); err != nil || got != "y" {
		t.Fatalf("healed node: get majority = %q, %v", got, err)
	}
	if n, err := c.client(lead).Exists(ctx, "minority", "minority2").Result(); err != nil || n != 0 {
		t.Fatalf("write refused in minority must not appear: exists=%d, %v", n, err)
	}
}

func TestClusterMembershipAndSnapshotCatchUp(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx := testCtx(t, 60*time.Second)
	cl := c.client(1)
	for i := 0; i < 300; i++ { // several times SnapshotThreshold: the log is truncated
		if err := cl.Set(ctx, fmt.Sprintf("key-%03d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	st := c.node(1).Status()
	if st.FirstIndex <= 11 {
		t.Fatalf("log was not truncated: first index %d", st.FirstIndex)
	}
	// Node 4 joins through node 2; it can only catch up by snapshot.
	cfg := nodeConfig(t, 4, c.net)
	cfg.Join = c.node(2).PeerAddr()
	c.cfgs[4] = cfg
	c.start(4)
	if n := len(c.node(1).Status().Members); n != 4 {
		t.Fatalf("members after join: %d", n)
	}
	// It learned the cluster's id (sent to its peers, checked on theirs).
	if got, want := c.node(4).Status().ClusterID, c.node(1).Status().ClusterID; got != want || want == 0 {
		t.Fatalf("joined node's cluster id %016x, founders' %016x", got, want)
	}
	for _, m := range c.node(1).Status().Members {
		if m.Learner {
			t.Fatalf("member %d still a learner after join returned", m.ID)
		}
	}
	got, err := c.client(4).Get(ctx, "key-299").Result()
	if err != nil || got != "299" {
		t.Fatalf("new node: get key-299 = %q, %v", got, err)
	}
	if n, err := c.client(4).DBSize(ctx).Result(); err != nil || n != 300 {
		t.Fatalf("new node dbsize = %d, %v", n, err)
	}
	// Leader transfer to the new node, then remove it.
	if err := c.node(3).TransferLeader(ctx, 4); err != nil {
		t.Fatalf("transfer leader: %v", err)
	}
	if l := c.waitLeader(); l != 4 {
		t.Fatalf("leader after transfer: %d", l)
	}
	if err := cl.Set(ctx, "after-transfer", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.node(1).RemoveMember(ctx, 4); err != nil {
		t.Fatalf("remove member: %v", err)
	}
	c.stop(4)
	lead := c.waitLeader()
	if lead == 4 {
		t.Fatal("removed node still leader")
	}
	if n := len(c.node(lead).Status().Members); n != 3 {
		t.Fatalf("members after remove: %d", n)
	}
	if err := cl.Set(ctx, "after-remove", "1", 0).Err(); err != nil {
		t.Fatalf("write after remove: %v", err)
	}
}

func TestClusterRestartAllReadsEverythingBack(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx := testCtx(t, 60*time.Second)
	acked := map[string]string{}
	for i := 0; i < 120; i++ {
		k, v := fmt.Sprintf("r%d", i), fmt.Sprintf("v%d", i)
		if err := c.client(uint64(i%3+1)).Set(ctx, k, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
		acked[k] = v
	}
	c.stopAll()
	for id := uint64(1); id <= 3; id++ {
		cfg := c.cfgs[id]
		cfg.InitialCluster = nil // recovered from disk
		c.cfgs[id] = cfg
		c.start(id)
	}
	c.waitLeader()
	for id := uint64(1); id <= 3; id++ {
		checkAcked(t, c, id, acked)
	}
}

func TestMetricsExportRaftState(t *testing.T) {
	c := newTestCluster(t, 3)
	lead := c.waitLeader()
	ctx := testCtx(t, 10*time.Second)
	if err := c.client(lead).Set(ctx, "m", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	mfs, err := c.node(lead).Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if len(mf.GetMetric()) == 1 && mf.GetMetric()[0].GetGauge() != nil {
			got[mf.GetName()] = mf.GetMetric()[0].GetGauge().GetValue()
		}
		if n := mf.GetName(); n == "kvorum_raft_proposals_total" || strings.HasPrefix(n, "kvorum_storage_") && strings.HasSuffix(n, "_total") {
			got[n] = mf.GetMetric()[0].GetCounter().GetValue()
		}
		if mf.GetName() == "kvorum_raft_proposal_duration_seconds" {
			got[mf.GetName()] = float64(mf.GetMetric()[0].GetHistogram().GetSampleCount())
		}
	}
	if got["kvorum_raft_is_leader"] != 1 || got["kvorum_raft_leader"] != float64(lead) || got["kvorum_raft_term"] < 6 {
		t.Fatalf("raft gauges: %v", got)
	}
	if got["kvorum_raft_applied_index"] < 11 || got["kvorum_raft_proposals_total"] < 1 || got["kvorum_raft_proposal_duration_seconds"] < 1 {
		t.Fatalf("progress metrics: %v", got)
	}
	// The storage engine's figures, from pebble.DB.Metrics at scrape time.
	for _, name := range []string{"kvorum_storage_block_cache_bytes", "kvorum_storage_block_cache_hits_total",
		"kvorum_storage_block_cache_misses_total", "kvorum_storage_memtable_bytes", "kvorum_storage_flushes_total",
		"kvorum_storage_compactions_total", "kvorum_storage_read_amplification", "kvorum_storage_disk_bytes",
		"kvorum_storage_wal_written_bytes_total", "kvorum_storage_flushed_bytes_total",
		"kvorum_storage_compacted_bytes_total", "kvorum_storage_compaction_read_bytes_total"} {
		if _, ok := got[name]; !ok {
			t.Errorf("metric %s not exported", name)
		}
	}
	// The write went through the WAL and nothing was flushed yet: a
	// flushed figure taken from Metrics.Total would count the WAL's bytes.
	if got["kvorum_storage_memtable_bytes"] <= 0 || got["kvorum_storage_disk_bytes"] <= 0 ||
		got["kvorum_storage_wal_written_bytes_total"] <= 0 ||
		got["kvorum_storage_flushed_bytes_total"] >= got["kvorum_storage_wal_written_bytes_total"] {
		t.Fatalf("storage metrics: %v", got)
	}
}

// READONLY: a connection that accepts possibly stale reads is served by a
// node from its own applied state, even when that node is cut off from
// the leader and a linearizable read would fail; its writes are refused
// as before, and READWRITE restores linearizable reads.
func TestReadOnlyConnectionServesLocalState(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx := testCtx(t, 30*time.Second)
	lead := c.waitLeader()
	follower := lead%3 + 1
	if err := c.client(lead).Set(ctx, "k", "v1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// The follower has applied v1 once a linearizable read there sees it.
	if got, err := c.client(follower).Get(ctx, "k").Result(); err != nil || got != "v1" {
		t.Fatalf("follower read: %q, %v", got, err)
	}
	c.net.Isolate(follower)
	defer c.net.Heal()
	if err := c.client(lead).Set(ctx, "k", "v2", 0).Err(); err != nil {
		t.Fatalf("majority write: %v", err)
	}
	conn := c.client(follower).Conn()
	defer conn.Close()
	if err := conn.ReadOnly(ctx).Err(); err != nil {
		t.Fatalf("READONLY: %v", err)
	}
	start := time.Now()
	got, err := conn.Get(ctx, "k").Result()
	if err != nil || got != "v1" {
		t.Fatalf("READONLY read on a cut-off follower: %q, %v; want its own state v1", got, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("READONLY read took %v: it waited for a read point", d)
	}
	if err := conn.Set(ctx, "k", "v3", 0).Err(); err == nil || !strings.Contains(err.Error(), "CLUSTERDOWN") {
		t.Fatalf("write through a READONLY connection on a cut-off node: %v, want CLUSTERDOWN", err)
	}
	if err := conn.ReadWrite(ctx).Err(); err != nil {
		t.Fatalf("READWRITE: %v", err)
	}
	if _, err := conn.Get(ctx, "k").Result(); err == nil || !strings.Contains(err.Error(), "CLUSTERDOWN") {
		t.Fatalf("linearizable read on a cut-off node after READWRITE: %v, want CLUSTERDOWN", err)
	}
}

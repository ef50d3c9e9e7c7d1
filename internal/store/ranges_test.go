package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	dto "github.com/prometheus/client_model/go"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/kvorum/kvorum/internal/storage"
	"github.com/kvorum/kvorum/internal/transport"
)

// newRangesCluster starts n stores hosting ranges 1..ranges, each range on
// every store (transport.Local). The ranges share regMachine's keyspace, so
// the tests write distinct keys per range; no log truncation (a snapshot of
// one range would replace every range's keys).
func newRangesCluster(t *testing.T, n, ranges int, cfg func(*Config)) *testCluster {
	t.Helper()
	part := transport.NewPartitioner()
	c := &testCluster{t: t, net: transport.NewLocalNetwork(part), part: part, nodes: map[uint64]*testNode{}}
	var descs []*storage.Descriptor
	for k := 1; k <= ranges; k++ {
		d := &storage.Descriptor{RangeID: storage.RangeID(k)}
		if k == 1 {
			d = d.FullSlots()
		}
		for id := uint64(1); id <= uint64(n); id++ {
			d.Replicas = append(d.Replicas, storage.ReplicaDescriptor{NodeID: storage.NodeID(id), PeerAddr: transport.LocalAddr(id)})
		}
		descs = append(descs, d)
	}
	for id := uint64(1); id <= uint64(n); id++ {
		tn := &testNode{id: id, fs: vfs.NewMem()}
		db := c.openDB(tn)
		b := db.NewBatch()
		for _, d := range descs {
			if err := BootstrapRange(b, d); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Commit(pebble.Sync); err != nil {
			t.Fatal(err)
		}
		c.nodes[id] = tn
		lt := &lazyTransport{}
		sc := Config{
			NodeID: storage.NodeID(id), DB: tn.db, FS: tn.fs, Dir: "/db", Transport: lt,
			TickInterval: 10 * time.Millisecond, ElectionTicks: 10, HeartbeatTicks: 1,
			StateMachine: &regMachine{}, Logger: testLog(),
		}
		if cfg != nil {
			cfg(&sc)
		}
		s := New(sc)
		lt.t = c.net.Register(id, handler{s}, func(m *raftpb.Message) (io.ReadCloser, error) {
			return s.OpenSnapshot(m.GetSnapshot())
		})
		tn.store, tn.tr = s, lt.t
		for _, d := range descs {
			if _, err := s.AddReplica(d); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() {
		for _, tn := range c.nodes {
			c.stopNode(tn)
		}
	})
	return c
}

func (c *testCluster) start() {
	for _, tn := range c.nodes {
		tn.store.Start()
	}
}

// rangeLeader returns the running node that leads range id, or nil.
func (c *testCluster) rangeLeader(id storage.RangeID) *testNode {
	for _, tn := range c.nodes {
		if tn.store == nil || tn.store.Replica(id) == nil {
			continue
		}
		if _, local := tn.store.Replica(id).Leader(); local {
			return tn
		}
	}
	return nil
}

// waitLeaders waits until every range 1..ranges has a leader among the
// running nodes.
func (c *testCluster) waitLeaders(ranges int, within time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		missing := 0
		for k := 1; k <= ranges; k++ {
			if c.rangeLeader(storage.RangeID(k)) == nil {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%d of %d ranges have no leader after %v", missing, ranges, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// proposeRange writes key=val on range id through its leader, retrying
// while leadership moves.
func (c *testCluster) proposeRange(id storage.RangeID, key, val string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for {
		tn := c.rangeLeader(id)
		if tn != nil {
			_, err := tn.store.Replica(id).Propose(ctx, [][][]byte{{[]byte("SET"), []byte(key), []byte(val)}})
			if err == nil {
				return nil
			}
			var nl *NotLeaderError
			if !errors.As(err, &nl) && !errors.Is(err, ErrProposalDropped) {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (c *testCluster) waitQuiesced(want int, within time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok := true
		var got []string
		for _, tn := range c.nodes {
			if tn.store == nil {
				continue
			}
			q := tn.store.QuiescedReplicas()
			got = append(got, fmt.Sprintf("n%d=%d", tn.id, q))
			if q != want {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("quiesced replicas %v after %v, want %d on every node", got, within, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestQuiesceManyRanges: 201 ranges on 3 stores. Once writes stop, every
// range but range 1 quiesces on every store, a tick then ticks only range
// 1, a write to a quiesced range succeeds promptly and wakes it, and so
// does a read on a quiesced follower; then it quiesces again.
func TestQuiesceManyRanges(t *testing.T) {
	if testing.Short() {
		t.Skip("201 ranges")
	}
	const ranges = 201
	c := newRangesCluster(t, 3, ranges, nil)
	c.start()
	c.waitLeaders(ranges, 20*time.Second)
	for k := 1; k <= ranges; k++ {
		if err := c.proposeRange(storage.RangeID(k), fmt.Sprintf("r%d", k), "1", 10*time.Second); err != nil {
			t.Fatalf("range %d: %v", k, err)
		}
	}
	c.waitQuiesced(ranges-1, 10*time.Second)
	time.Sleep(50 * time.Millisecond)
	for _, tn := range c.nodes {
		if n := tn.store.TickedLast(); n != 1 {
			t.Fatalf("node %d ticked %d replicas in its last tick, want 1 (range 1)", tn.id, n)
		}
		var q, a dto.Metric
		_ = tn.store.cfg.Metrics.RangesQuiesced.Write(&q)
		_ = tn.store.cfg.Metrics.RangesAwake.Write(&a)
		if q.GetGauge().GetValue() != ranges-1 || a.GetGauge().GetValue() != 1 {
			t.Fatalf("node %d: kvorum_raft_ranges_quiesced %v, _awake %v; want %d and 1", tn.id, q.GetGauge().GetValue(), a.GetGauge().GetValue(), ranges-1)
		}
		if r := tn.store.Replica(1); r.Quiesced() {
			t.Fatalf("node %d: range 1 quiesced", tn.id)
		}
	}

	// A write to a quiesced range.
	id := storage.RangeID(ranges / 2)
	lead := c.rangeLeader(id)
	if lead == nil || !lead.store.Replica(id).Quiesced() {
		t.Fatalf("range %d: leader %v, not quiesced", id, lead)
	}
	start := time.Now()
	if err := c.proposeRange(id, "woken", "yes", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("a write to a quiesced range took %v", d)
	}
	if lead.store.Replica(id).Quiesced() && lead.store.Replica(id).AppliedIndex() == 0 {
		t.Fatal("unreachable")
	}
	// Every follower applies it (its replica woke for the MsgApp).
	for _, tn := range c.nodes {
		deadline := time.Now().Add(2 * time.Second)
		for {
			if v, ok := readKey(tn.store, "woken"); ok && v == "yes" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d did not apply the write to range %d", tn.id, id)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// A read on a quiesced follower of another range.
	rid := storage.RangeID(ranges/2 + 1)
	c.waitQuiesced(ranges-1, 5*time.Second)
	var fol *testNode
	for _, tn := range c.nodes {
		if _, local := tn.store.Replica(rid).Leader(); !local {
			fol = tn
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start = time.Now()
	if err := fol.store.Replica(rid).ReadBarrier(ctx); err != nil {
		t.Fatalf("read on a quiesced follower: %v", err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("a read on a quiesced follower took %v", d)
	}
	// And everything quiesces again.
	c.waitQuiesced(ranges-1, 5*time.Second)
}

// TestQuiescedLeaderFails: the node that leads the most quiesced ranges
// stops; the other two elect a leader for every range within a bounded
// time, and the ranges take writes.
func TestQuiescedLeaderFails(t *testing.T) {
	if testing.Short() {
		t.Skip("many ranges")
	}
	const ranges = 60
	c := newRangesCluster(t, 3, ranges, nil)
	c.start()
	c.waitLeaders(ranges, 20*time.Second)
	for k := 1; k <= ranges; k++ {
		if err := c.proposeRange(storage.RangeID(k), fmt.Sprintf("r%d", k), "1", 10*time.Second); err != nil {
			t.Fatalf("range %d: %v", k, err)
		}
	}
	c.waitQuiesced(ranges-1, 10*time.Second)
	led := map[uint64][]storage.RangeID{}
	for k := 2; k <= ranges; k++ {
		if tn := c.rangeLeader(storage.RangeID(k)); tn != nil {
			led[tn.id] = append(led[tn.id], storage.RangeID(k))
		}
	}
	var victim uint64
	for id, rs := range led {
		if victim == 0 || len(rs) > len(led[victim]) {
			victim = id
		}
	}
	if len(led[victim]) == 0 {
		t.Fatal("no node leads a quiesced range")
	}
	t.Logf("stopping node %d, leader of %d quiesced ranges", victim, len(led[victim]))
	start := time.Now()
	c.stopNode(c.nodes[victim])
	// Election timeout 100 ms, randomized to < 200 ms, plus the silence
	// detection (100 ms): a few seconds is generous on a loaded machine.
	c.waitLeaders(ranges, 5*time.Second)
	t.Logf("every range has a leader %v after the stop", time.Since(start))
	for _, id := range led[victim] {
		if err := c.proposeRange(id, fmt.Sprintf("after%d", id), "1", 5*time.Second); err != nil {
			t.Fatalf("range %d: %v", id, err)
		}
	}
}

// TestSchedulerNoStall proposes to random ranges while the stores tick at
// random moments, with quiescence on and the safety sweep off, and then
// proposes more with no tick at all: every proposal must be applied. A
// path that gives a replica work without marking it stalls that range
// until a tick (or forever, in the last phase), which fails the test.
func TestSchedulerNoStall(t *testing.T) {
	const ranges = 16
	// ElectionTicks 50: the test ticks about 120 times after the
	// elections, with a heartbeat each tick; a leader change (whose lost
	// proposals would only be resolved by later writes) needs 50 ticks
	// in a row whose heartbeats all lag, even under the race detector.
	c := newRangesCluster(t, 3, ranges, func(cfg *Config) { cfg.TickInterval, cfg.ElectionTicks = 0, 50 })
	for _, tn := range c.nodes {
		tn.store.sweepEvery = 0
	}
	c.start()
	tickAll := func() {
		for _, tn := range c.nodes {
			tn.store.Tick()
		}
	}
	var stopTicks sync.WaitGroup
	done := make(chan struct{})
	stopTicks.Add(1)
	go func() { // elections need ticks
		defer stopTicks.Done()
		for {
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
				tickAll()
			}
		}
	}()
	c.waitLeaders(ranges, 20*time.Second)
	close(done)
	stopTicks.Wait()

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	seed := rng.Uint64()
	t.Logf("seed %d", seed)
	rng = rand.New(rand.NewPCG(seed, 7))
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	propose := func(i int, within time.Duration) {
		id := storage.RangeID(1 + rng.IntN(ranges))
		lead := c.rangeLeader(id)
		if lead == nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), within)
			defer cancel()
			_, err := lead.store.Replica(id).Propose(ctx, [][][]byte{{[]byte("SET"), []byte(fmt.Sprintf("k%d", i)), []byte("v")}})
			var nl *NotLeaderError
			if err != nil && !errors.As(err, &nl) && !errors.Is(err, ErrProposalDropped) {
				mu.Lock()
				errs = append(errs, fmt.Errorf("proposal %d to range %d: %w", i, id, err))
				mu.Unlock()
			}
		}()
	}
	// Phase 1: proposals and ticks interleaved at random (ranges quiesce
	// and wake).
	for i := 0; i < 400; i++ {
		switch rng.IntN(4) {
		case 0:
			tickAll()
		case 1:
			time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond)
		default:
			propose(i, 10*time.Second)
		}
		if i%100 == 99 { // let ranges go idle and quiesce
			for j := 0; j < 4; j++ {
				time.Sleep(2 * time.Millisecond)
				tickAll()
			}
		}
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	terms := func() string {
		out := ""
		for k := 1; k <= ranges; k++ {
			out += fmt.Sprintf(" r%d:", k)
			for id := uint64(1); id <= 3; id++ {
				st := c.nodes[id].store.Replica(storage.RangeID(k)).Status()
				out += fmt.Sprintf("%s/t%d/q%v ", st.Role[:1], st.Term, c.nodes[id].store.Replica(storage.RangeID(k)).Quiesced())
			}
		}
		return out
	}
	if t.Failed() {
		t.Fatalf("ranges (role/term/quiesced per node):%s", terms())
	}
	quiesced := 0
	for _, tn := range c.nodes {
		quiesced += tn.store.QuiescedReplicas()
	}
	// Phase 2: no tick at all. Each proposal must be applied on its own
	// marks (Propose, Step, re-queue after Advance).
	for i := 1000; i < 1100; i++ {
		propose(i, 3*time.Second)
		if rng.IntN(8) == 0 {
			time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
		}
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.Logf("ranges (role/term/quiesced per node):%s", terms())
	}
	t.Logf("%d replicas quiesced before the tickless phase", quiesced)
	// No replica may keep work that nothing marked. A replica the Ready
	// loop has taken (its mark cleared) still has Ready until its round
	// ends, so work that is unmarked only for a moment is being handled:
	// a missed mark is work that stays unmarked, with no tick to sweep it.
	for _, tn := range c.nodes {
		deadline := time.Now().Add(2 * time.Second)
		for n := unmarkedWork(tn.store); n != 0; n = unmarkedWork(tn.store) {
			if time.Now().After(deadline) {
				t.Errorf("node %d: %d replicas kept work that nothing marked for 2 s", tn.id, n)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// unmarkedWork counts the replicas that have work for a Ready round and
// are not marked, without marking them (as sweep would).
func unmarkedWork(s *Store) int {
	n := 0
	for _, r := range s.replicaList() {
		r.mu.Lock()
		w := r.hasWorkLocked()
		r.mu.Unlock()
		s.sched.mu.Lock()
		queued := r.schedQueued
		s.sched.mu.Unlock()
		if w && !queued {
			n++
		}
	}
	return n
}

// TestQuiescedLeaderLease: with leader leases on, a leader serves lease
// reads while its range is busy; once the range has been quiesced for
// longer than a lease, a read there is no lease read: it wakes the range
// and pays a ReadIndex round (the lease is timed on the monotonic clock,
// and nothing renews it while quiesced).
func TestQuiescedLeaderLease(t *testing.T) {
	const ranges = 3
	c := newRangesCluster(t, 3, ranges, func(cfg *Config) { cfg.LeaseReads = true })
	c.start()
	c.waitLeaders(ranges, 20*time.Second)
	id := storage.RangeID(2)
	for k := 1; k <= ranges; k++ {
		if err := c.proposeRange(storage.RangeID(k), fmt.Sprintf("r%d", k), "1", 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	lead := c.rangeLeader(id)
	r := lead.store.Replica(id)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := 0; i < 3; i++ { // acquire the lease (a probe), then use it
		if err := r.ReadBarrier(ctx); err != nil {
			t.Fatal(err)
		}
	}
	m := lead.store.cfg.Metrics
	if counterValue(t, m.LeaseReads) == 0 {
		t.Fatal("no lease read while the range was awake")
	}
	c.waitQuiesced(ranges-1, 5*time.Second)
	if lead2 := c.rangeLeader(id); lead2 != lead || !r.Quiesced() {
		t.Fatalf("range %d: leader moved or not quiesced", id)
	}
	time.Sleep(2 * lead.store.electionTimeout())
	leases, rounds := counterValue(t, m.LeaseReads), counterValue(t, m.ReadIndexRounds)
	if err := r.ReadBarrier(ctx); err != nil {
		t.Fatal(err)
	}
	if got := counterValue(t, m.LeaseReads); got != leases {
		t.Fatalf("a quiesced leader served a lease read %v after its lease lapsed", 2*lead.store.electionTimeout())
	}
	if got := counterValue(t, m.ReadIndexRounds); got != rounds+1 {
		t.Fatalf("read index rounds %v -> %v, want one round", rounds, got)
	}
}

// TestOneRangeNoLiveness: a store that hosts range 1 only (the default
// cluster) sends no liveness message and keeps no heard-from table: its
// traffic is what it was before quiescence (v=1 frames only).
func TestOneRangeNoLiveness(t *testing.T) {
	c := newCluster(t, 3)
	c.leader()
	time.Sleep(100 * time.Millisecond) // ten ticks
	for _, tn := range c.nodes {
		s := tn.store
		if msgs := s.liveness(); len(msgs) != 0 || s.quiescible.Load() {
			t.Fatalf("node %d: %d liveness messages, quiescible %v", tn.id, len(msgs), s.quiescible.Load())
		}
		s.heard.mu.Lock()
		n := len(s.heard.at)
		s.heard.mu.Unlock()
		if n != 0 {
			t.Fatalf("node %d heard-from table has %d entries", tn.id, n)
		}
		if s.QuiescedReplicas() != 0 {
			t.Fatalf("node %d: range 1 quiesced", tn.id)
		}
	}
}

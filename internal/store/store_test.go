package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/kvorum/kvorum/internal/kv"
	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/storage"
	"github.com/kvorum/kvorum/internal/transport"
)

// regMachine is a minimal state machine for store tests: SET k v and
// INCR k on raw keys under 0x10.
type regMachine struct{}

func (regMachine) Span(*storage.Descriptor) ([]byte, []byte) { return []byte{0x10}, []byte{0x11} }

func (regMachine) Committed() {}

func (regMachine) Apply(b *pebble.Batch, args [][]byte, env kv.Env) reply.Reply {
	key := append([]byte{0x10}, args[1]...)
	switch string(args[0]) {
	case "SET":
		_ = b.Set(key, args[2], nil)
		return reply.OK
	case "INCR":
		n := 0
		if v, c, err := b.Get(key); err == nil {
			fmt.Sscan(string(v), &n)
			c.Close()
		}
		n++
		_ = b.Set(key, []byte(fmt.Sprint(n)), nil)
		return reply.Int(int64(n))
	}
	return reply.Error("ERR unknown")
}

func readKey(s *Store, key string) (string, bool) {
	v, c, err := s.DB().Get(append([]byte{0x10}, key...))
	if err != nil {
		return "", false
	}
	defer c.Close()
	return string(v), true
}

type testNode struct {
	id    uint64
	fs    vfs.FS
	db    *pebble.DB
	store *Store
	tr    *transport.Local
}

type handler struct{ s *Store }

func (h handler) HandleRaft(msgs []*raftpb.Message) {
	for _, m := range msgs {
		_ = h.s.Step(1, m)
	}
}
func (h handler) HandleSnapshot(m *raftpb.Message, data io.Reader) error {
	return h.s.ReceiveSnapshot(m, data)
}
func (h handler) HandleCall(context.Context, string, []byte) ([]byte, error) {
	return nil, errors.New("no calls")
}
func (h handler) ReportUnreachable(to uint64) { h.s.Replica(1).ReportUnreachable(to) }
func (h handler) ReportSnapshot(to uint64, ok bool) {
	h.s.Replica(1).ReportSnapshot(to, ok)
}

type lazyTransport struct{ t *transport.Local }

func (l *lazyTransport) Send(m []*raftpb.Message)    { l.t.Send(m) }
func (l *lazyTransport) SetPeer(id uint64, a string) { l.t.SetPeer(id, a) }
func (l *lazyTransport) RemovePeer(id uint64)        { l.t.RemovePeer(id) }

type testCluster struct {
	t     *testing.T
	net   *transport.LocalNetwork
	part  *transport.Partitioner
	nodes map[uint64]*testNode
}

func newCluster(t *testing.T, n int) *testCluster {
	part := transport.NewPartitioner()
	c := &testCluster{t: t, net: transport.NewLocalNetwork(part), part: part, nodes: map[uint64]*testNode{}}
	desc := &storage.Descriptor{RangeID: 1}
	for id := uint64(1); id <= uint64(n); id++ {
		desc.Replicas = append(desc.Replicas, storage.ReplicaDescriptor{NodeID: storage.NodeID(id), PeerAddr: transport.LocalAddr(id)})
	}
	for id := uint64(1); id <= uint64(n); id++ {
		tn := &testNode{id: id, fs: vfs.NewMem()}
		db := c.openDB(tn)
		b := db.NewBatch()
		if err := BootstrapRange(b, desc); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(pebble.Sync); err != nil {
			t.Fatal(err)
		}
		c.nodes[id] = tn
		c.startNode(tn, desc)
	}
	t.Cleanup(func() {
		for _, tn := range c.nodes {
			c.stopNode(tn)
		}
	})
	return c
}

func (c *testCluster) openDB(tn *testNode) *pebble.DB {
	db, err := storage.Open("/db", tn.fs, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	tn.db = db
	return db
}

func (c *testCluster) startNode(tn *testNode, desc *storage.Descriptor) {
	if tn.db == nil {
		c.openDB(tn)
	}
	lt := &lazyTransport{}
	s := New(Config{
		NodeID: storage.NodeID(tn.id), DB: tn.db, FS: tn.fs, Dir: "/db", Transport: lt,
		TickInterval: 10 * time.Millisecond, ElectionTicks: 10, HeartbeatTicks: 1,
		SnapshotThreshold: 20, StateMachine: regMachine{},
		Logger: testLog(),
	})
	lt.t = c.net.Register(tn.id, handler{s}, func(m *raftpb.Message) (io.ReadCloser, error) {
		return s.OpenSnapshot(m.GetSnapshot())
	})
	tn.store, tn.tr = s, lt.t
	if _, err := s.AddReplica(desc); err != nil {
		c.t.Fatal(err)
	}
	s.Start()
}

func (c *testCluster) stopNode(tn *testNode) {
	if tn.store == nil {
		return
	}
	_ = tn.tr.Close()
	tn.store.Stop()
	_ = tn.db.Close()
	tn.store, tn.db = nil, nil
}

func (c *testCluster) leader() *testNode {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, tn := range c.nodes {
			if tn.store == nil {
				continue
			}
			if _, local := tn.store.Replica(1).Leader(); local {
				return tn
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.t.Fatal("no leader")
	return nil
}

func propose(t *testing.T, tn *testNode, cmds ...[]string) ([]reply.Reply, error) {
	var args [][][]byte
	for _, c := range cmds {
		var a [][]byte
		for _, s := range c {
			a = append(a, []byte(s))
		}
		args = append(args, a)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return tn.store.Replica(1).Propose(ctx, args)
}

// proposeRetry proposes on whoever leads, retrying while the outcome is
// certain not to have been applied.
func (c *testCluster) proposeRetry(cmds ...[]string) []reply.Reply {
	c.t.Helper()
	for i := 0; i < 200; i++ {
		rs, err := propose(c.t, c.leader(), cmds...)
		if err == nil {
			return rs
		}
		var nle *NotLeaderError
		if !errors.Is(err, ErrProposalDropped) && !errors.As(err, &nle) {
			c.t.Fatalf("propose: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatal("propose kept failing")
	return nil
}

func barrierRead(t *testing.T, tn *testNode, key string) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		err := tn.store.Replica(1).ReadBarrier(ctx)
		if err == nil {
			return readKey(tn.store, key)
		}
		if ctx.Err() != nil {
			t.Fatalf("read barrier on %d: %v", tn.id, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestStoreReplicatesAndReadsLinearizably(t *testing.T) {
	c := newCluster(t, 3)
	lead := c.leader()
	rs, err := propose(t, lead, []string{"SET", "a", "1"}, []string{"INCR", "n"}, []string{"INCR", "n"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 || rs[2].Int != 2 {
		t.Fatalf("replies %+v", rs)
	}
	for _, tn := range c.nodes {
		if v, ok := barrierRead(t, tn, "n"); !ok || v != "2" {
			t.Fatalf("node %d: n=%q", tn.id, v)
		}
	}
	// A follower refuses to propose and names the leader.
	for _, tn := range c.nodes {
		if tn != lead {
			_, err := propose(t, tn, []string{"SET", "x", "y"})
			var nle *NotLeaderError
			if !errors.As(err, &nle) || nle.Leader != lead.id {
				t.Fatalf("follower propose: %v", err)
			}
			break
		}
	}
}

func TestStoreLeaderCrashRestartAndSnapshotCatchUp(t *testing.T) {
	c := newCluster(t, 3)
	for i := 0; i < 30; i++ {
		c.proposeRetry([]string{"INCR", "n"})
	}
	// Crash a follower, write enough to truncate the log past it, restart it:
	// it must catch up by snapshot.
	lead := c.leader()
	var f *testNode
	for _, tn := range c.nodes {
		if tn != lead {
			f = tn
			break
		}
	}
	c.stopNode(f)
	for i := 0; i < 100; i++ {
		c.proposeRetry([]string{"INCR", "n"}, []string{"SET", fmt.Sprintf("k%d", i), "v"})
	}
	st := lead.store.Replica(1).Status()
	if st.FirstIndex <= 40 {
		t.Fatalf("log not truncated: first index %d", st.FirstIndex)
	}
	c.startNode(f, &storage.Descriptor{RangeID: 1})
	if v, _ := barrierRead(t, f, "n"); v != "130" {
		t.Fatalf("restarted follower n=%q", v)
	}
	if v, ok := barrierRead(t, f, "k99"); !ok || v != "v" {
		t.Fatalf("restarted follower k99=%q", v)
	}
	// Crash the leader: the others elect a new one and keep everything.
	c.stopNode(lead)
	rs := c.proposeRetry([]string{"INCR", "n"})
	if rs[0].Int != 131 {
		t.Fatalf("after leader crash: n=%d", rs[0].Int)
	}
	c.startNode(lead, &storage.Descriptor{RangeID: 1})
	if v, _ := barrierRead(t, lead, "n"); v != "131" {
		t.Fatalf("old leader after restart: n=%q", v)
	}
}

func TestStoreIsolatedLeaderCannotCommitOrRead(t *testing.T) {
	c := newCluster(t, 3)
	lead := c.leader()
	c.proposeRetry([]string{"SET", "a", "1"})
	c.part.Isolate(lead.id)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := lead.store.Replica(1).Propose(ctx, [][][]byte{{[]byte("SET"), []byte("a"), []byte("2")}}); err == nil {
		t.Fatal("isolated leader committed a write")
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel2()
	if err := lead.store.Replica(1).ReadBarrier(ctx2); err == nil {
		t.Fatal("isolated leader passed a read barrier")
	}
	c.part.Heal()
	for _, tn := range c.nodes {
		if v, _ := barrierRead(t, tn, "a"); v != "1" && v != "2" {
			t.Fatalf("node %d: a=%q", tn.id, v)
		}
	}
}

func testLog() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func TestStoreMembershipLearnerSnapshotPromoteTransferRemove(t *testing.T) {
	c := newCluster(t, 3)
	for i := 0; i < 60; i++ { // past SnapshotThreshold: the new node needs a snapshot
		c.proposeRetry([]string{"INCR", "n"})
	}
	tn := &testNode{id: 4, fs: vfs.NewMem()}
	c.nodes[4] = tn
	c.startNode(tn, &storage.Descriptor{RangeID: 1})
	for id := uint64(1); id <= 3; id++ {
		tn.tr.SetPeer(id, transport.LocalAddr(id))
	}
	lead := c.leader()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := lead.store.Replica(1).AddMember(ctx, 4, transport.LocalAddr(4)); err != nil {
		t.Fatalf("add member: %v", err)
	}
	d := lead.store.Replica(1).Descriptor()
	if rep, ok := d.Replica(4); !ok || rep.Learner {
		t.Fatalf("node 4 not a voter: %+v", d)
	}
	if err := lead.store.Replica(1).AddMember(ctx, 4, transport.LocalAddr(4)); !errors.Is(err, ErrMemberExists) {
		t.Fatalf("second add: %v", err)
	}
	if v, _ := barrierRead(t, tn, "n"); v != "60" {
		t.Fatalf("new member n=%q", v)
	}
	if err := lead.store.Replica(1).TransferLeader(ctx, 4); err != nil {
		t.Fatalf("transfer: %v", err)
	}
	if l := c.leader(); l.id != 4 {
		t.Fatalf("leader after transfer: %d", l.id)
	}
	c.proposeRetry([]string{"INCR", "n"})
	if err := tn.store.Replica(1).RemoveMember(ctx, 1); err != nil {
		t.Fatalf("remove 1: %v", err)
	}
	if _, ok := tn.store.Replica(1).Descriptor().Replica(1); ok {
		t.Fatal("node 1 still a member")
	}
	c.stopNode(c.nodes[1])
	delete(c.nodes, 1)
	rs := c.proposeRetry([]string{"INCR", "n"})
	if rs[0].Int != 62 {
		t.Fatalf("n after remove = %d", rs[0].Int)
	}
}

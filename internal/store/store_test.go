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

	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/storage"
	"github.com/kvorum/kvorum/internal/transport"
)

// regMachine is a minimal state machine for store tests: SET k v and
// INCR k on raw keys under 0x10. With record set, its effects are the
// writes it applied, as "key=value" strings in log order ([]string).
type regMachine struct {
	record  bool
	effects []string // since the last TakeEffects
	// counts caches INCR's counters, as kv's RecordCache caches records:
	// a snapshot that replaced the data without Replaced leaves it stale
	// (snapshot.txt shows what INCR then writes).
	counts map[string]int
}

func (*regMachine) Span(*storage.Descriptor) ([]byte, []byte) { return []byte{0x10}, []byte{0x11} }

func (m *regMachine) Replaced(start, end []byte) { clear(m.counts) }
func (m *regMachine) Committed()                 {}

func (m *regMachine) TakeEffects() Effects {
	if len(m.effects) == 0 {
		return nil
	}
	fx := m.effects
	m.effects = nil
	return fx
}

func (m *regMachine) Apply(b *pebble.Batch, args [][]byte, env ApplyEnv) reply.Reply {
	key := append([]byte{0x10}, args[1]...)
	var val []byte
	var r reply.Reply
	switch string(args[0]) {
	case "SET":
		val, r = args[2], reply.OK
		delete(m.counts, string(key))
	case "INCR":
		n, ok := m.counts[string(key)]
		if !ok {
			if v, c, err := b.Get(key); err == nil {
				fmt.Sscan(string(v), &n)
				c.Close()
			}
		}
		n++
		if m.counts == nil {
			m.counts = map[string]int{}
		}
		m.counts[string(key)] = n
		val, r = []byte(fmt.Sprint(n)), reply.Int(int64(n))
	default:
		return reply.Error("ERR unknown")
	}
	_ = b.Set(key, val, nil)
	if m.record {
		m.effects = append(m.effects, string(args[1])+"="+string(val))
	}
	return r
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

func (h handler) HandleRaft(msgs []RaftMessage) {
	for _, m := range msgs {
		h.s.StepMessage(m)
	}
}
func (h handler) HandleSnapshot(m RaftMessage, data io.Reader) error {
	return h.s.ReceiveSnapshot(m, data)
}
func (h handler) HandleCall(context.Context, string, []byte) ([]byte, error) {
	return nil, errors.New("no calls")
}
func (h handler) ReportUnreachable(to uint64) { h.s.ReportUnreachable(to) }
func (h handler) ReportSnapshot(rangeID storage.RangeID, to uint64, ok bool) {
	h.s.ReportSnapshot(rangeID, to, ok)
}

type lazyTransport struct{ t *transport.Local }

func (l *lazyTransport) Send(m []RaftMessage)        { l.t.Send(m) }
func (l *lazyTransport) SetPeer(id uint64, a string) { l.t.SetPeer(id, a) }
func (l *lazyTransport) RemovePeer(id uint64)        { l.t.RemovePeer(id) }

type testCluster struct {
	t *testing.T
	// cfg, if set, adjusts each node's store configuration.
	cfg   func(*Config)
	net   *transport.LocalNetwork
	part  *transport.Partitioner
	nodes map[uint64]*testNode
}

func newCluster(t *testing.T, n int) *testCluster { return newClusterWith(t, n, nil) }

func newClusterWith(t *testing.T, n int, cfg func(*Config)) *testCluster {
	part := transport.NewPartitioner()
	c := &testCluster{t: t, cfg: cfg, net: transport.NewLocalNetwork(part), part: part, nodes: map[uint64]*testNode{}}
	desc := (&storage.Descriptor{RangeID: 1}).FullSlots()
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
	db, err := storage.Open("/db", storage.Options{FS: tn.fs})
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
	cfg := Config{
		NodeID: storage.NodeID(tn.id), DB: tn.db, FS: tn.fs, Dir: "/db", Transport: lt,
		TickInterval: 10 * time.Millisecond, ElectionTicks: 10, HeartbeatTicks: 1,
		SnapshotThreshold: 20, StateMachine: &regMachine{},
		Logger: testLog(),
	}
	if c.cfg != nil {
		c.cfg(&cfg)
	}
	s := New(cfg)
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
	return proposeOn(tn.store, cmds...)
}

// proposeOn proposes cmds, each a command's words, on range 1 of s, and
// waits at most 5 s for their replies.
func proposeOn(s *Store, cmds ...[]string) ([]reply.Reply, error) {
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
	return s.Replica(1).Propose(ctx, args)
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

// TestStoreReplicatesAndReadsLinearizably runs the store's own goroutines
// (Start: ticker and Ready loop) over transport.Local, which the scenarios
// of TestDataDriven replace by the harness.
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

func testLog() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

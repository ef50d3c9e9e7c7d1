package store

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/kvorum/kvorum/internal/storage"
	"github.com/kvorum/kvorum/internal/transport"
)

// lateTransport is the store's Transport over a transport.Transport, which
// is created after the store (it needs the store's handler).
type lateTransport struct{ t *transport.Transport }

func (l *lateTransport) Send(m []RaftMessage)        { l.t.Send(m) }
func (l *lateTransport) SetPeer(id uint64, a string) { l.t.SetPeer(id, a) }
func (l *lateTransport) RemovePeer(id uint64)        { l.t.RemovePeer(id) }

// tcpCluster starts n stores of range 1 that talk over the real transport
// (framed TCP streams on 127.0.0.1), and returns them and their
// transports.
func tcpCluster(t *testing.T, n int) ([]*Store, []*transport.Transport) {
	t.Helper()
	desc := &storage.Descriptor{RangeID: 1}
	ls := make([]net.Listener, n)
	for i := range ls {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls[i] = l
		desc.Replicas = append(desc.Replicas, storage.ReplicaDescriptor{NodeID: storage.NodeID(i + 1), PeerAddr: l.Addr().String()})
	}
	stores := make([]*Store, n)
	trs := make([]*transport.Transport, n)
	for i := range stores {
		id := uint64(i + 1)
		fs := vfs.NewMem()
		db, err := storage.Open("/db", storage.Options{FS: fs})
		if err != nil {
			t.Fatal(err)
		}
		b := db.NewBatch()
		if err := BootstrapRange(b, desc); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(pebble.Sync); err != nil {
			t.Fatal(err)
		}
		lt := &lateTransport{}
		s := New(Config{
			NodeID: storage.NodeID(id), DB: db, FS: fs, Dir: "/db", Transport: lt,
			TickInterval: 10 * time.Millisecond, ElectionTicks: 10, HeartbeatTicks: 1,
			StateMachine: &regMachine{}, Logger: testLog(),
		})
		lt.t = transport.New(transport.Config{NodeID: id}, handler{s}, func(m *raftpb.Message) (io.ReadCloser, error) {
			return s.OpenSnapshot(m.GetSnapshot())
		})
		done := make(chan error, 1)
		go func(l net.Listener) { done <- lt.t.Serve(l) }(ls[i])
		if _, err := s.AddReplica(desc); err != nil {
			t.Fatal(err)
		}
		s.Start()
		stores[i], trs[i] = s, lt.t
		t.Cleanup(func() {
			_ = lt.t.Close()
			<-done
			s.Stop()
			_ = db.Close()
		})
	}
	return stores, trs
}

// TestStepUnknownRange: a message for a range the store has no replica of
// is dropped and counted, not stepped anywhere.
func TestStepUnknownRange(t *testing.T) {
	c := newCluster(t, 1)
	s := c.nodes[1].store
	before := s.Replica(1).Status()
	s.Step(2, &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), From: proto.Uint64(2), To: proto.Uint64(1), Term: proto.Uint64(before.Term + 5)})
	if got := counterValue(t, s.cfg.Metrics.UnknownRangeMessages); got != 1 {
		t.Fatalf("unknown-range messages counted: %v, want 1", got)
	}
	if after := s.Replica(1).Status(); after.Term != before.Term {
		t.Fatalf("range 1 stepped a message of range 2: term %d → %d", before.Term, after.Term)
	}
}

// TestUnknownRangeOverStream: messages of range 2 sent over the TCP
// stream to a node that has only range 1 are dropped there without
// breaking the stream (which carries range 1's messages in the same
// frames): nothing is dropped on the sending side, and range 1 goes on
// replicating.
func TestUnknownRangeOverStream(t *testing.T) {
	stores, trs := tcpCluster(t, 2)
	leader := func() int {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			for i, s := range stores {
				if _, local := s.Replica(1).Leader(); local {
					return i
				}
			}
			if time.Now().After(deadline) {
				t.Fatal("no leader")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// write sets a=v through the leader, and waits until every node reads it.
	write := func(v string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for {
			if _, err := proposeOn(stores[leader()], []string{"SET", "a", v}); err == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("SET a %s never committed", v)
			}
			time.Sleep(10 * time.Millisecond)
		}
		for _, s := range stores {
			for {
				if err := s.Replica(1).ReadBarrier(ctx); err == nil {
					if got, _ := readKey(s, "a"); got == v {
						break
					}
				}
				if ctx.Err() != nil {
					t.Fatalf("node %d never read a=%s", s.NodeID(), v)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	write("1")
	lead := leader()
	follow := 1 - lead
	dropped := trs[lead].Stats().MessagesDropped

	// Heartbeats of a term far ahead: range 1 would take the term if it
	// stepped one of them.
	const n = 20
	term := stores[lead].Replica(1).Status().Term
	var msgs []RaftMessage
	for i := 0; i < n; i++ {
		rangeID := storage.RangeID(2)
		if i%2 == 1 {
			rangeID = 1 << 40
		}
		msgs = append(msgs, RaftMessage{Range: rangeID, Msg: &raftpb.Message{
			Type: raftpb.MsgHeartbeat.Enum(), From: proto.Uint64(uint64(lead + 1)), To: proto.Uint64(uint64(follow + 1)),
			Term: proto.Uint64(term + 100),
		}})
	}
	trs[lead].Send(msgs)
	counted := stores[follow].cfg.Metrics.UnknownRangeMessages
	deadline := time.Now().Add(5 * time.Second)
	for counterValue(t, counted) < n {
		if time.Now().After(deadline) {
			t.Fatalf("unknown-range messages counted: %v, want %d", counterValue(t, counted), n)
		}
		time.Sleep(5 * time.Millisecond)
	}

	write("2")
	if got := counterValue(t, counted); got != n {
		t.Fatalf("unknown-range messages counted: %v, want %d", got, n)
	}
	if d := trs[lead].Stats().MessagesDropped; d != dropped {
		t.Fatalf("sender dropped %d messages (the stream broke?)", d-dropped)
	}
	for _, s := range stores {
		if st := s.Replica(1).Status(); st.Term >= term+100 {
			t.Fatalf("node %d took term %d of a range 2 message", s.NodeID(), st.Term)
		}
	}
}

// A snapshot must arrive as the range its data names: one sent as
// another range is refused (its stream read to the end) and never staged.
func TestReceiveSnapshotRangeMismatch(t *testing.T) {
	c := newCluster(t, 1)
	s := c.nodes[1].store
	data := make([]byte, 16)
	data[7] = 1 // the data names range 1
	m := &raftpb.Message{Type: raftpb.MsgSnap.Enum(), From: proto.Uint64(2), To: proto.Uint64(1), Term: proto.Uint64(100),
		Snapshot: &raftpb.Snapshot{Data: data, Metadata: &raftpb.SnapshotMetadata{Index: proto.Uint64(1000), Term: proto.Uint64(100)}}}
	stream := strings.NewReader("not read by anyone")
	err := s.ReceiveSnapshot(RaftMessage{Range: 2, Msg: m}, stream)
	if err == nil || !strings.Contains(err.Error(), "sent as range 2") {
		t.Fatalf("snapshot of range 1 sent as range 2: %v", err)
	}
	if stream.Len() != 0 {
		t.Fatalf("%d bytes of the stream left unread", stream.Len())
	}
	if st := s.Replica(1).Status(); st.Term >= 100 {
		t.Fatalf("range 1 stepped the snapshot: term %d", st.Term)
	}
}

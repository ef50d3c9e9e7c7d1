package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/kvorum/kvorum/internal/storage"
)

const waitTimeout = 10 * time.Second

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkLeaks fails the test if, once every cleanup registered after it has
// run, goroutines started during the test are still running.
func checkLeaks(t *testing.T) {
	t.Helper()
	base := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(waitTimeout)
		for runtime.NumGoroutine() > base {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				n := runtime.Stack(buf, true)
				t.Errorf("goroutines leaked: %d > %d\n%s", runtime.NumGoroutine(), base, buf[:n])
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// recorder is a Handler that records everything.
type recorder struct {
	mu          sync.Mutex
	msgs        []*raftpb.Message
	ranges      []storage.RangeID // of msgs
	batches     int
	snaps       []*raftpb.Message
	snapRanges  []storage.RangeID // of snaps
	snapData    [][]byte
	unreachable map[uint64]int
	snapReports []snapReport

	// Optional behaviour.
	raftGate   chan struct{} // if set, HandleRaft waits on it
	snapHandle func(m *raftpb.Message, r io.Reader) ([]byte, error)
	call       func(ctx context.Context, method string, payload []byte) ([]byte, error)
}

func newRecorder() *recorder { return &recorder{unreachable: map[uint64]int{}} }

func (r *recorder) HandleRaft(msgs []storage.RaftMessage) {
	if r.raftGate != nil {
		<-r.raftGate
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range msgs {
		r.msgs = append(r.msgs, m.Msg)
		r.ranges = append(r.ranges, m.Range)
	}
	r.batches++
}

func (r *recorder) HandleSnapshot(m storage.RaftMessage, data io.Reader) error {
	var b []byte
	var err error
	if r.snapHandle != nil {
		b, err = r.snapHandle(m.Msg, data)
	} else {
		b, err = io.ReadAll(data)
	}
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.snaps = append(r.snaps, m.Msg)
	r.snapRanges = append(r.snapRanges, m.Range)
	r.snapData = append(r.snapData, b)
	return nil
}

func (r *recorder) HandleCall(ctx context.Context, method string, payload []byte) ([]byte, error) {
	if r.call != nil {
		return r.call(ctx, method, payload)
	}
	return append([]byte(method+":"), payload...), nil
}

func (r *recorder) ReportUnreachable(to uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unreachable[to]++
}

func (r *recorder) ReportSnapshot(rangeID storage.RangeID, to uint64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.snapReports = append(r.snapReports, snapReport{rangeID, to, ok})
}

func (r *recorder) received() []*raftpb.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*raftpb.Message(nil), r.msgs...)
}

// receivedRanges returns the range of each message received, in order.
func (r *recorder) receivedRanges() []storage.RangeID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]storage.RangeID(nil), r.ranges...)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.msgs)
}

func (r *recorder) unreachableCount(id uint64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unreachable[id]
}

func (r *recorder) snapReportsCopy() []snapReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]snapReport(nil), r.snapReports...)
}

func (r *recorder) receivedSnaps() ([]*raftpb.Message, [][]byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*raftpb.Message(nil), r.snaps...), append([][]byte(nil), r.snapData...)
}

// waitSnapReport waits for the first snapshot report and returns it.
func waitSnapReport(t *testing.T, r *recorder) snapReport {
	t.Helper()
	var rep []snapReport
	waitFor(t, "ReportSnapshot", func() bool { rep = r.snapReportsCopy(); return len(rep) > 0 })
	return rep[0]
}

// ofRange1 gives each message range 1, as every message of a node with one
// range has.
func ofRange1(msgs ...*raftpb.Message) []storage.RaftMessage {
	out := make([]storage.RaftMessage, len(msgs))
	for i, m := range msgs {
		out[i] = storage.RaftMessage{Range: 1, Msg: m}
	}
	return out
}

// bytesSource serves the same data for every snapshot.
func bytesSource(data []byte) SnapshotSource {
	return func(*raftpb.Message) (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}
}

func u64(v uint64) *uint64 { return proto.Uint64(v) }

// msg builds a message with the common fields set.
func msg(typ raftpb.MessageType, from, to, term, index uint64) *raftpb.Message {
	return &raftpb.Message{Type: typ.Enum(), From: u64(from), To: u64(to), Term: u64(term), Index: u64(index)}
}

func heartbeat(from, to uint64) *raftpb.Message {
	return msg(raftpb.MsgHeartbeat, from, to, 1, 0)
}

// everyKind returns one message of every type except MsgSnap, with all the
// fields that type uses populated.
func everyKind(from, to uint64) []*raftpb.Message {
	var out []*raftpb.Message
	for v := range raftpb.MessageType_name {
		typ := raftpb.MessageType(v)
		if typ == raftpb.MsgSnap {
			continue
		}
		m := msg(typ, from, to, 7, uint64(100+v))
		m.LogTerm = u64(6)
		m.Commit = u64(99)
		m.Vote = u64(from)
		m.Reject = proto.Bool(v%2 == 0)
		m.RejectHint = u64(uint64(v))
		m.Context = []byte(fmt.Sprintf("ctx-%d", v))
		m.Entries = []*raftpb.Entry{
			{Term: u64(7), Index: u64(uint64(101 + v)), Type: raftpb.EntryNormal.Enum(), Data: []byte("hello")},
			{Term: u64(7), Index: u64(uint64(102 + v)), Type: raftpb.EntryConfChangeV2.Enum(), Data: bytes.Repeat([]byte{byte(v)}, 1000)},
		}
		if typ == raftpb.MsgStorageAppend || typ == raftpb.MsgStorageApply {
			m.Responses = []*raftpb.Message{msg(raftpb.MsgAppResp, to, from, 7, 5)}
		}
		out = append(out, m)
	}
	// Deterministic order (map iteration above is random).
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j].GetType() < out[i].GetType() {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func snapMsg(from, to uint64) *raftpb.Message {
	m := msg(raftpb.MsgSnap, from, to, 3, 0)
	m.Snapshot = &raftpb.Snapshot{
		Data: []byte("snapshot-id-42"),
		Metadata: &raftpb.SnapshotMetadata{
			Index:     u64(500),
			Term:      u64(3),
			ConfState: &raftpb.ConfState{Voters: []uint64{1, 2, 3}, Learners: []uint64{4}},
		},
	}
	return m
}

func sameMessages(t *testing.T, got, want []*raftpb.Message) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d messages, want %d", len(got), len(want))
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Fatalf("message %d differs:\ngot  %v\nwant %v", i, got[i], want[i])
		}
	}
}

// ---- gRPC fixtures ----

type node struct {
	t    *Transport
	rec  *recorder
	addr string
	done chan error
}

func listen(t *testing.T, addr string) net.Listener {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var l net.Listener
	var err error
	// Re-binding a just-closed port may briefly fail.
	waitFor(t, "listen on "+addr, func() bool {
		l, err = net.Listen("tcp", addr)
		return err == nil
	})
	return l
}

// startNode runs a transport for id on addr ("" = a random port).
func startNode(t *testing.T, id uint64, addr string, rec *recorder, cfg Config, snaps SnapshotSource) *node {
	t.Helper()
	l := listen(t, addr)
	cfg.NodeID = id
	tr := New(cfg, rec, snaps)
	n := &node{t: tr, rec: rec, addr: l.Addr().String(), done: make(chan error, 1)}
	go func() { n.done <- tr.Serve(l) }()
	t.Cleanup(func() { n.stop(t) })
	return n
}

func (n *node) stop(t *testing.T) {
	t.Helper()
	if err := n.t.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	select {
	case err := <-n.done:
		if err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Serve: %v", err)
		}
		n.done <- nil // let a second stop return at once
	case <-time.After(waitTimeout):
		t.Errorf("Serve did not return after Close")
	}
}

// pair starts nodes 1 and 2, each knowing the other.
func pair(t *testing.T, cfg Config, snaps SnapshotSource) (a, b *node) {
	t.Helper()
	a = startNode(t, 1, "", newRecorder(), cfg, snaps)
	b = startNode(t, 2, "", newRecorder(), cfg, snaps)
	a.t.SetPeer(2, b.addr)
	b.t.SetPeer(1, a.addr)
	return a, b
}

func isStatus(err error, code string) bool {
	return err != nil && strings.Contains(err.Error(), code)
}

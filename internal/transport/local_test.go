package transport

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// localCluster registers nodes 1..n, each knowing all the others.
func localCluster(t *testing.T, ic Interceptor, n int, snaps SnapshotSource) (*LocalNetwork, []*Local, []*recorder) {
	t.Helper()
	net := NewLocalNetwork(ic)
	ls := make([]*Local, n+1)
	recs := make([]*recorder, n+1)
	for id := 1; id <= n; id++ {
		recs[id] = newRecorder()
		ls[id] = net.Register(uint64(id), recs[id], snaps)
		l := ls[id]
		t.Cleanup(func() { l.Close() })
	}
	for id := 1; id <= n; id++ {
		for peer := 1; peer <= n; peer++ {
			if peer != id {
				ls[id].SetPeer(uint64(peer), LocalAddr(uint64(peer)))
			}
		}
	}
	return net, ls, recs
}

func TestLocalEveryMessageKind(t *testing.T) {
	checkLeaks(t)
	_, ls, recs := localCluster(t, nil, 3, bytesSource([]byte("data")))
	want := everyKind(1, 2)
	ls[1].Send(ofRange1(want...))
	waitFor(t, "all messages", func() bool { return recs[2].count() == len(want) })
	got := recs[2].received()
	sameMessages(t, got, want)
	// Copies, not the sender's messages.
	if got[0] == want[0] {
		t.Fatal("Local delivered the sender's message itself")
	}
	ls[1].Send(ofRange1(snapMsg(1, 3)))
	if rep := waitSnapReport(t, recs[1]); rep != (snapReport{1, 3, true}) {
		t.Fatalf("report %+v", rep)
	}
	snaps, datas := recs[3].receivedSnaps()
	if len(snaps) != 1 || !proto.Equal(snaps[0], snapMsg(1, 3)) || string(datas[0]) != "data" {
		t.Fatalf("snapshot %v %q", snaps, datas)
	}
	if recs[3].count() != 0 {
		t.Fatal("node 3 got raft messages for node 2")
	}
}

func TestLocalDeliveryIsAsynchronous(t *testing.T) {
	checkLeaks(t)
	net := NewLocalNetwork(nil)
	gate := make(chan struct{})
	r2 := newRecorder()
	r2.raftGate = gate
	r1 := newRecorder()
	l1 := net.Register(1, r1, nil)
	l2 := net.Register(2, r2, nil)
	defer l2.Close()
	defer l1.Close()
	l1.SetPeer(2, "")
	// The receiver blocks: Send must not.
	done := make(chan struct{})
	go func() {
		for i := 0; i < 3*DefaultQueueSize; i++ {
			l1.Send(ofRange1(heartbeat(1, 2)))
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(waitTimeout):
		t.Fatal("Send blocked on a slow receiver")
	}
	if l1.Stats().MessagesDropped == 0 {
		t.Fatal("overflow dropped nothing")
	}
	waitFor(t, "unreachable report", func() bool { return r1.unreachableCount(2) > 0 })
	close(gate)
	waitFor(t, "queued messages", func() bool { return r2.count() > 0 })
}

func TestLocalSnapshot(t *testing.T) {
	checkLeaks(t)
	data := make([]byte, 5<<20)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	_, ls, recs := localCluster(t, nil, 2, bytesSource(data))
	ls[1].Send(ofRange1(snapMsg(1, 2)))
	if rep := waitSnapReport(t, recs[1]); rep != (snapReport{1, 2, true}) {
		t.Fatalf("report %+v", rep)
	}
	_, datas := recs[2].receivedSnaps()
	if len(datas) != 1 || !bytes.Equal(datas[0], data) {
		t.Fatal("snapshot data differs")
	}

	// A failing handler is reported as a failed snapshot.
	recs[1].snapHandle = func(*raftpb.Message, io.Reader) ([]byte, error) { return nil, errors.New("nope") }
	ls[2].Send(ofRange1(snapMsg(2, 1)))
	if rep := waitSnapReport(t, recs[2]); rep != (snapReport{1, 1, false}) {
		t.Fatalf("report %+v", rep)
	}
	// As is a snapshot to a node that is down.
	ls[2].Close()
	ls[1].Send(ofRange1(snapMsg(1, 2)))
	waitFor(t, "second report", func() bool { return len(recs[1].snapReportsCopy()) == 2 })
	if rep := recs[1].snapReportsCopy()[1]; rep != (snapReport{1, 2, false}) {
		t.Fatalf("report %+v", rep)
	}
}

func TestLocalCall(t *testing.T) {
	checkLeaks(t)
	net, ls, recs := localCluster(t, nil, 2, nil)
	recs[2].call = func(ctx context.Context, method string, payload []byte) ([]byte, error) {
		switch method {
		case "fail":
			return nil, errors.New("boom")
		case "slow":
			<-ctx.Done()
			return nil, ctx.Err()
		}
		payload[0] = 'X' // must not reach the caller's buffer
		return payload, nil
	}
	ctx := context.Background()
	in := []byte("abc")
	out, err := ls[1].Call(ctx, 2, "echo", in)
	if err != nil || string(out) != "Xbc" || string(in) != "abc" {
		t.Fatalf("echo: %q %q %v", out, in, err)
	}
	_, err = ls[1].Call(ctx, 2, "fail", nil)
	if s, _ := status.FromError(err); s.Code() != codes.Unknown || s.Message() != "boom" {
		t.Fatalf("fail: %v", err)
	}
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err = ls[1].Call(tctx, 2, "slow", nil); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("slow: %v", err)
	}
	if _, err = ls[1].Call(ctx, 9, "echo", nil); !errors.Is(err, ErrUnknownPeer) {
		t.Fatalf("unknown: %v", err)
	}
	// CallAddr to a node registered at a custom address.
	r3 := newRecorder()
	l3 := net.RegisterAddr(3, "10.0.0.3:7000", r3, nil)
	defer l3.Close()
	out, err = ls[1].CallAddr(ctx, "10.0.0.3:7000", "join", []byte("1"))
	if err != nil || string(out) != "join:1" {
		t.Fatalf("CallAddr: %q %v", out, err)
	}
	if _, err = ls[1].CallAddr(ctx, "nowhere:1", "join", nil); status.Code(err) != codes.Unavailable {
		t.Fatalf("CallAddr nowhere: %v", err)
	}
	// A stopped node is unavailable.
	l3.Close()
	ls[1].SetPeer(3, "")
	if _, err = ls[1].Call(ctx, 3, "x", nil); status.Code(err) != codes.Unavailable {
		t.Fatalf("call to stopped node: %v", err)
	}
}

func TestLocalPartitioner(t *testing.T) {
	checkLeaks(t)
	p := NewPartitioner()
	_, ls, recs := localCluster(t, p, 3, nil)
	ctx := context.Background()
	broadcast := func() {
		for from := uint64(1); from <= 3; from++ {
			var msgs []*raftpb.Message
			for to := uint64(1); to <= 3; to++ {
				if to != from {
					msgs = append(msgs, heartbeat(from, to))
				}
			}
			ls[from].Send(ofRange1(msgs...))
		}
	}
	// from→to pairs seen by each receiver.
	seen := func(id int) map[uint64]int {
		out := map[uint64]int{}
		for _, m := range recs[id].received() {
			out[m.GetFrom()]++
		}
		return out
	}
	broadcast()
	waitFor(t, "full mesh", func() bool { return recs[1].count() == 2 && recs[2].count() == 2 && recs[3].count() == 2 })

	p.Isolate(1)
	broadcast()
	waitFor(t, "2<->3", func() bool { return seen(2)[3] == 2 && seen(3)[2] == 2 })
	time.Sleep(50 * time.Millisecond)
	if seen(1)[2] != 1 || seen(1)[3] != 1 || seen(2)[1] != 1 || seen(3)[1] != 1 {
		t.Fatalf("isolated node exchanged messages: %v %v %v", seen(1), seen(2), seen(3))
	}
	if _, err := ls[2].Call(ctx, 1, "x", nil); !errors.Is(err, ErrPartitioned) {
		t.Fatalf("call to isolated: %v", err)
	}
	p.Heal()

	p.CutOneWay(2, 3)
	broadcast()
	waitFor(t, "3->2", func() bool { return seen(2)[3] == 3 })
	time.Sleep(50 * time.Millisecond)
	if seen(3)[2] != 2 {
		t.Fatalf("one-way cut let 2->3 through: %v", seen(3))
	}
	// Calls need both directions.
	if _, err := ls[3].Call(ctx, 2, "x", nil); !errors.Is(err, ErrPartitioned) {
		t.Fatalf("call over a one-way cut: %v", err)
	}
	p.Heal()
	broadcast()
	waitFor(t, "healed", func() bool { return seen(3)[2] == 3 && seen(1)[2] == 3 })
	if _, err := ls[3].Call(ctx, 2, "x", nil); err != nil {
		t.Fatalf("call after heal: %v", err)
	}
}

func TestLocalRestart(t *testing.T) {
	checkLeaks(t)
	net, ls, recs := localCluster(t, nil, 2, nil)
	ls[1].Send(ofRange1(heartbeat(1, 2)))
	waitFor(t, "first", func() bool { return recs[2].count() == 1 })
	ls[2].Close()
	waitFor(t, "unreachable", func() bool {
		ls[1].Send(ofRange1(heartbeat(1, 2)))
		time.Sleep(5 * time.Millisecond)
		return recs[1].unreachableCount(2) > 0
	})
	r2 := newRecorder()
	l2 := net.Register(2, r2, nil)
	defer l2.Close()
	waitFor(t, "delivered after restart", func() bool {
		ls[1].Send(ofRange1(heartbeat(1, 2)))
		time.Sleep(5 * time.Millisecond)
		return r2.count() > 0
	})
	if recs[2].count() != 1 {
		t.Fatal("closed node still received messages")
	}
}

func TestLocalCloseWaitsForHandlers(t *testing.T) {
	checkLeaks(t)
	_, ls, recs := localCluster(t, nil, 2, nil)
	inCall := make(chan struct{})
	recs[2].call = func(ctx context.Context, _ string, _ []byte) ([]byte, error) {
		close(inCall)
		<-ctx.Done() // released when node 2 closes
		return nil, ctx.Err()
	}
	errc := make(chan error, 1)
	go func() {
		_, err := ls[1].Call(context.Background(), 2, "block", nil)
		errc <- err
	}()
	<-inCall
	closed := make(chan struct{})
	go func() { ls[2].Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(waitTimeout):
		t.Fatal("Close hung")
	}
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("call to a closing node succeeded")
		}
	case <-time.After(waitTimeout):
		t.Fatal("call never returned")
	}
}

func TestPartitionerDropRate(t *testing.T) {
	p := NewPartitioner()
	p.SetDropRate(0.3, 42)
	dropped := 0
	for i := 0; i < 10000; i++ {
		if drop, _ := p.Outgoing(1, 2, nil); drop {
			dropped++
		}
	}
	if dropped < 2500 || dropped > 3500 {
		t.Fatalf("dropped %d of 10000 at rate 0.3", dropped)
	}
	if err := p.Call(1, 2); err != nil {
		t.Fatalf("drop rate affects calls: %v", err)
	}
	p.SetDelay(10*time.Millisecond, 20*time.Millisecond)
	p.SetDropRate(0, 1)
	for i := 0; i < 100; i++ {
		drop, d := p.Outgoing(1, 2, nil)
		if drop || d < 10*time.Millisecond || d > 20*time.Millisecond {
			t.Fatalf("drop=%v delay=%v", drop, d)
		}
	}
	p.Heal()
	if drop, d := p.Outgoing(1, 2, nil); drop || d != 0 {
		t.Fatalf("after Heal: drop=%v delay=%v", drop, d)
	}
	var zero Partitioner // the zero value works
	zero.Cut(1, 2)
	if drop, _ := zero.Outgoing(2, 1, nil); !drop {
		t.Fatal("Cut is not symmetric")
	}
	if drop, _ := zero.Outgoing(1, 3, nil); drop {
		t.Fatal("Cut(1,2) cut 1->3")
	}
}

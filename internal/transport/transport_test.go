package transport

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

func TestEveryMessageKindArrives(t *testing.T) {
	checkLeaks(t)
	snap := snapMsg(1, 2)
	data := []byte("the snapshot data")
	a, b := pair(t, Config{Registerer: prometheus.NewRegistry()}, bytesSource(data))

	want := everyKind(1, 2)
	a.t.Send(ofRange1(want...))
	waitFor(t, "all messages", func() bool { return b.rec.count() >= len(want) })
	sameMessages(t, b.rec.received(), want)

	// And the other way.
	back := everyKind(2, 1)
	b.t.Send(ofRange1(back...))
	waitFor(t, "all messages back", func() bool { return a.rec.count() >= len(back) })
	sameMessages(t, a.rec.received(), back)

	a.t.Send(ofRange1(snap))
	if rep := waitSnapReport(t, a.rec); rep != (snapReport{1, 2, true}) {
		t.Fatalf("snapshot report = %+v", rep)
	}
	snaps, datas := b.rec.receivedSnaps()
	if len(snaps) != 1 || !proto.Equal(snaps[0], snap) || !bytes.Equal(datas[0], data) {
		t.Fatalf("snapshot: got %v %q", snaps, datas)
	}
	st := a.t.Stats()
	if st.MessagesSent != uint64(len(want))+1 || st.MessagesDropped != 0 || st.SnapshotsSent != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestBatching(t *testing.T) {
	checkLeaks(t)
	a, b := pair(t, Config{}, nil)
	const rounds, per = 50, 40
	for i := 0; i < rounds; i++ {
		var msgs []*raftpb.Message
		for j := 0; j < per; j++ {
			msgs = append(msgs, msg(raftpb.MsgApp, 1, 2, 1, uint64(i*per+j)))
		}
		a.t.Send(ofRange1(msgs...))
	}
	waitFor(t, "all messages", func() bool { return b.rec.count() == rounds*per })
	// One stream from one peer: order is preserved.
	for i, m := range b.rec.received() {
		if m.GetIndex() != uint64(i) {
			t.Fatalf("message %d has index %d", i, m.GetIndex())
		}
	}
	st := a.t.Stats()
	t.Logf("%d messages in %d frames", st.MessagesSent, st.FramesSent)
	if st.FramesSent == 0 || st.FramesSent > rounds || st.MessagesSent != rounds*per {
		t.Fatalf("no batching: %+v", st)
	}
	if got := b.t.Stats().MessagesReceived; got != rounds*per {
		t.Fatalf("received %d", got)
	}
}

func TestReconnectAfterReceiverRestarts(t *testing.T) {
	checkLeaks(t)
	a, b := pair(t, Config{}, nil)
	a.t.Send(ofRange1(heartbeat(1, 2)))
	waitFor(t, "first message", func() bool { return b.rec.count() == 1 })

	addr := b.addr
	b.stop(t)
	// Sending to a dead peer is reported.
	waitFor(t, "unreachable report", func() bool {
		a.t.Send(ofRange1(heartbeat(1, 2)))
		time.Sleep(10 * time.Millisecond)
		return a.rec.unreachableCount(2) > 0
	})

	b2 := startNode(t, 2, addr, newRecorder(), Config{}, nil)
	waitFor(t, "message after restart", func() bool {
		a.t.Send(ofRange1(heartbeat(1, 2)))
		time.Sleep(10 * time.Millisecond)
		return b2.rec.count() > 0
	})
}

func TestSetPeerNewAddress(t *testing.T) {
	checkLeaks(t)
	a, b := pair(t, Config{}, nil)
	a.t.SetPeer(2, b.addr) // idempotent
	a.t.Send(ofRange1(heartbeat(1, 2)))
	waitFor(t, "first message", func() bool { return b.rec.count() == 1 })
	b.stop(t)
	b2 := startNode(t, 2, "", newRecorder(), Config{}, nil)
	a.t.SetPeer(2, b2.addr)
	waitFor(t, "message at new address", func() bool {
		a.t.Send(ofRange1(heartbeat(1, 2)))
		time.Sleep(10 * time.Millisecond)
		return b2.rec.count() > 0
	})
	out, err := a.t.Call(context.Background(), 2, "m", nil)
	if err != nil || string(out) != "m:" {
		t.Fatalf("call at new address: %q %v", out, err)
	}
}

func TestWrongNodeRejected(t *testing.T) {
	checkLeaks(t)
	a := startNode(t, 1, "", newRecorder(), Config{}, nil)
	c := startNode(t, 3, "", newRecorder(), Config{}, nil)
	a.t.SetPeer(2, c.addr) // node 3 listens where a believes node 2 is
	waitFor(t, "unreachable report", func() bool {
		a.t.Send(ofRange1(heartbeat(1, 2)))
		time.Sleep(10 * time.Millisecond)
		return a.rec.unreachableCount(2) > 0
	})
	if c.rec.count() != 0 {
		t.Fatalf("node 3 accepted messages for node 2")
	}
}

// A malformed frame on a Raft stream closes that stream, delivers nothing,
// and leaves the server serving; so does a connection that is neither a
// framed stream nor gRPC.
func TestRaftStreamMalformedFrame(t *testing.T) {
	checkLeaks(t)
	a, b := pair(t, Config{}, nil)
	for _, bad := range [][]byte{nil, {9}, {wireVersion, 1, 2, 3, 200}} {
		st, err := a.t.dialStream(context.Background(), b.addr, kindRaft)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SendMsg(&frame{b: bad}); err != nil {
			t.Fatal(err)
		}
		if err := st.RecvMsg(&frame{}); err == nil {
			t.Fatalf("frame %q: stream not closed", bad)
		}
		st.cancel()
	}
	c, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
	_ = c.Close()
	if b.rec.count() != 0 {
		t.Fatal("a malformed frame delivered messages")
	}
	a.t.Send(ofRange1(heartbeat(1, 2)))
	waitFor(t, "delivery after bad streams", func() bool { return b.rec.count() == 1 })
}

func TestQueueOverflowDropsWithoutBlocking(t *testing.T) {
	checkLeaks(t)
	// Nothing listens at the peer's address: every attempt fails and the
	// peer loop backs off while Send keeps queueing.
	dead := listen(t, "")
	deadAddr := dead.Addr().String()
	dead.Close()
	a := startNode(t, 1, "", newRecorder(), Config{QueueSize: 64}, nil)
	a.t.SetPeer(2, deadAddr)
	msgs := make([]*raftpb.Message, 10000)
	for i := range msgs {
		msgs[i] = msg(raftpb.MsgApp, 1, 2, 1, uint64(i))
	}
	start := time.Now()
	for i := 0; i < 10; i++ {
		a.t.Send(ofRange1(msgs...))
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Send blocked for %v", d)
	}
	st := a.t.Stats()
	if st.MessagesDropped < 90000 {
		t.Fatalf("expected most messages dropped: %+v", st)
	}
	waitFor(t, "unreachable report", func() bool { return a.rec.unreachableCount(2) > 0 })
}

func TestQueueOverflowSlowReceiver(t *testing.T) {
	checkLeaks(t)
	gate := make(chan struct{})
	rb := newRecorder()
	rb.raftGate = gate
	a := startNode(t, 1, "", newRecorder(), Config{QueueSize: 16}, nil)
	b := startNode(t, 2, "", rb, Config{}, nil)
	a.t.SetPeer(2, b.addr)
	big := bytes.Repeat([]byte("x"), 64<<10)
	start := time.Now()
	for i := 0; i < 2000; i++ {
		m := msg(raftpb.MsgApp, 1, 2, 1, uint64(i))
		m.Entries = []*raftpb.Entry{{Data: big}}
		a.t.Send(ofRange1(m))
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Send blocked for %v", d)
	}
	waitFor(t, "drops", func() bool { return a.t.Stats().MessagesDropped > 0 })
	close(gate)
}

func TestSnapshot5MiB(t *testing.T) {
	checkLeaks(t)
	data := make([]byte, 5<<20+12345)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	a, b := pair(t, Config{}, bytesSource(data))
	// Raft messages keep flowing while the snapshot streams.
	a.t.Send(ofRange1(snapMsg(1, 2), heartbeat(1, 2)))
	if rep := waitSnapReport(t, a.rec); rep != (snapReport{1, 2, true}) {
		t.Fatalf("report %+v", rep)
	}
	snaps, datas := b.rec.receivedSnaps()
	if len(snaps) != 1 || !proto.Equal(snaps[0], snapMsg(1, 2)) || !bytes.Equal(datas[0], data) {
		t.Fatalf("snapshot data differs (%d snaps, %d bytes)", len(snaps), len(datas))
	}
	waitFor(t, "heartbeat", func() bool { return b.rec.count() == 1 })
}

func TestSnapshotHandlerErrorReportsFailure(t *testing.T) {
	for _, readFirst := range []int{0, 3 << 20} {
		t.Run("", func(t *testing.T) {
			checkLeaks(t)
			data := make([]byte, 5<<20)
			rb := newRecorder()
			rb.snapHandle = func(m *raftpb.Message, r io.Reader) ([]byte, error) {
				if _, err := io.CopyN(io.Discard, r, int64(readFirst)); err != nil {
					return nil, err
				}
				return nil, errors.New("disk full")
			}
			a := startNode(t, 1, "", newRecorder(), Config{}, bytesSource(data))
			b := startNode(t, 2, "", rb, Config{}, nil)
			a.t.SetPeer(2, b.addr)
			a.t.Send(ofRange1(snapMsg(1, 2)))
			if rep := waitSnapReport(t, a.rec); rep != (snapReport{1, 2, false}) {
				t.Fatalf("report %+v", rep)
			}
			if st := a.t.Stats(); st.SnapshotsFailed != 1 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// failingReader yields n bytes, then, once wait is closed, an error.
type failingReader struct {
	n    int
	wait <-chan struct{}
}

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		<-r.wait
		return 0, errors.New("source broke")
	}
	k := min(len(p), r.n)
	r.n -= k
	return k, nil
}

func TestSnapshotSourceErrorAbortsReceiver(t *testing.T) {
	checkLeaks(t)
	var recvErr = make(chan error, 1)
	// The source breaks only once the receiver has the stream: with the
	// flow-control window larger than the data, a sender that gave up
	// earlier could cancel the stream before it reached the receiver,
	// which then never hears of it (fine for raft, but not this test).
	receiving := make(chan struct{})
	rb := newRecorder()
	rb.snapHandle = func(m *raftpb.Message, r io.Reader) ([]byte, error) {
		close(receiving)
		_, err := io.Copy(io.Discard, r)
		recvErr <- err
		return nil, err
	}
	src := func(*raftpb.Message) (io.ReadCloser, error) {
		return io.NopCloser(&failingReader{n: 2 << 20, wait: receiving}), nil
	}
	a := startNode(t, 1, "", newRecorder(), Config{}, src)
	b := startNode(t, 2, "", rb, Config{}, nil)
	a.t.SetPeer(2, b.addr)
	a.t.Send(ofRange1(snapMsg(1, 2)))
	if rep := waitSnapReport(t, a.rec); rep.ok {
		t.Fatalf("report %+v", rep)
	}
	select {
	case err := <-recvErr:
		if err == nil {
			t.Fatal("receiver saw a clean end of a broken snapshot")
		}
	case <-time.After(waitTimeout):
		t.Fatal("receiver never finished")
	}
}

func TestSnapshotToUnknownPeer(t *testing.T) {
	checkLeaks(t)
	a := startNode(t, 1, "", newRecorder(), Config{}, bytesSource(nil))
	a.t.Send(ofRange1(snapMsg(1, 9), heartbeat(1, 8)))
	if rep := waitSnapReport(t, a.rec); rep != (snapReport{1, 9, false}) {
		t.Fatalf("report %+v", rep)
	}
	waitFor(t, "unreachable 8", func() bool { return a.rec.unreachableCount(8) == 1 })
}

func TestCall(t *testing.T) {
	checkLeaks(t)
	a, b := pair(t, Config{}, nil)
	b.rec.call = func(ctx context.Context, method string, payload []byte) ([]byte, error) {
		switch method {
		case "echo":
			return payload, nil
		case "fail":
			return nil, errors.New("boom")
		case "notfound":
			return nil, status.Error(codes.NotFound, "no such thing")
		case "slow":
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return nil, nil
	}
	ctx := context.Background()
	big := bytes.Repeat([]byte("y"), 8<<20)
	out, err := a.t.Call(ctx, 2, "echo", big)
	if err != nil || !bytes.Equal(out, big) {
		t.Fatalf("echo: %d bytes, %v", len(out), err)
	}
	out, err = a.t.Call(ctx, 2, "empty", nil)
	if err != nil || len(out) != 0 {
		t.Fatalf("empty: %q %v", out, err)
	}
	_, err = a.t.Call(ctx, 2, "fail", nil)
	if s, _ := status.FromError(err); s.Code() != codes.Unknown || s.Message() != "boom" {
		t.Fatalf("fail: %v", err)
	}
	_, err = a.t.Call(ctx, 2, "notfound", nil)
	if status.Code(err) != codes.NotFound {
		t.Fatalf("notfound: %v", err)
	}
	tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = a.t.Call(tctx, 2, "slow", nil)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("slow: %v", err)
	}
	if _, err = a.t.Call(ctx, 7, "echo", nil); !errors.Is(err, ErrUnknownPeer) {
		t.Fatalf("unknown peer: %v", err)
	}
	// CallAddr, to a known peer's address and to an address only.
	out, err = a.t.CallAddr(ctx, b.addr, "echo", []byte("hi"))
	if err != nil || string(out) != "hi" {
		t.Fatalf("CallAddr: %q %v", out, err)
	}
	c := startNode(t, 3, "", newRecorder(), Config{}, nil)
	out, err = a.t.CallAddr(ctx, c.addr, "join", []byte("me"))
	if err != nil || string(out) != "join:me" {
		t.Fatalf("CallAddr: %q %v", out, err)
	}
	a.t.RemovePeer(2)
	if _, err = a.t.Call(ctx, 2, "echo", nil); !errors.Is(err, ErrUnknownPeer) {
		t.Fatalf("removed peer: %v", err)
	}
	a.t.Send(ofRange1(heartbeat(1, 2)))
	waitFor(t, "unreachable after remove", func() bool { return a.rec.unreachableCount(2) > 0 })
}

func TestPartitionerOverGRPC(t *testing.T) {
	checkLeaks(t)
	p := NewPartitioner()
	a, b := pair(t, Config{Interceptor: p}, nil)
	ctx := context.Background()
	exchange := func() {
		a.t.Send(ofRange1(heartbeat(1, 2)))
		b.t.Send(ofRange1(heartbeat(2, 1)))
	}
	exchange()
	waitFor(t, "both ways", func() bool { return a.rec.count() == 1 && b.rec.count() == 1 })

	p.Cut(1, 2)
	for i := 0; i < 20; i++ {
		exchange()
	}
	if _, err := a.t.Call(ctx, 2, "x", nil); !errors.Is(err, ErrPartitioned) {
		t.Fatalf("call across cut: %v", err)
	}
	if _, err := b.t.CallAddr(ctx, a.addr, "x", nil); !errors.Is(err, ErrPartitioned) {
		t.Fatalf("CallAddr across cut: %v", err)
	}
	time.Sleep(100 * time.Millisecond)
	if a.rec.count() != 1 || b.rec.count() != 1 {
		t.Fatalf("messages crossed the cut: %d %d", a.rec.count(), b.rec.count())
	}
	if d := a.t.Stats().MessagesDropped; d != 20 {
		t.Fatalf("dropped %d", d)
	}

	p.Heal()
	exchange()
	waitFor(t, "healed", func() bool { return a.rec.count() == 2 && b.rec.count() == 2 })
	if _, err := a.t.Call(ctx, 2, "x", nil); err != nil {
		t.Fatalf("call after heal: %v", err)
	}

	// A cut MsgSnap is reported failed.
	p.Isolate(2)
	a.t.Send(ofRange1(snapMsg(1, 2)))
	if rep := waitSnapReport(t, a.rec); rep != (snapReport{1, 2, false}) {
		t.Fatalf("report %+v", rep)
	}
}

type delayAll time.Duration

func (d delayAll) Outgoing(_, _ uint64, m *raftpb.Message) (bool, time.Duration) {
	if m.GetIndex() == 0 {
		return false, time.Duration(d)
	}
	return false, 0
}
func (delayAll) Call(_, _ uint64) error { return nil }

func TestInterceptorDelayDoesNotHoldBackOthers(t *testing.T) {
	checkLeaks(t)
	a, b := pair(t, Config{Interceptor: delayAll(300 * time.Millisecond)}, nil)
	start := time.Now()
	a.t.Send(ofRange1(msg(raftpb.MsgApp, 1, 2, 1, 0), msg(raftpb.MsgApp, 1, 2, 1, 1)))
	waitFor(t, "undelayed", func() bool { return b.rec.count() >= 1 })
	if got := b.rec.received()[0].GetIndex(); got != 1 {
		t.Fatalf("first message to arrive has index %d", got)
	}
	waitFor(t, "delayed", func() bool { return b.rec.count() == 2 })
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("delayed message arrived after %v", d)
	}
}

func TestCloseIsIdempotentAndServeAfterClose(t *testing.T) {
	checkLeaks(t)
	tr := New(Config{NodeID: 1}, newRecorder(), nil)
	tr.SetPeer(2, "127.0.0.1:1")
	tr.Send(ofRange1(heartbeat(1, 2)))
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tr.Serve(listen(t, "")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Serve after Close: %v", err)
	}
	tr.Send(ofRange1(heartbeat(1, 2))) // no panic, no effect
	if _, err := tr.Call(context.Background(), 2, "x", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Call after Close: %v", err)
	}
}

func TestCloseWaitsForSnapshotInFlight(t *testing.T) {
	checkLeaks(t)
	started := make(chan struct{})
	rb := newRecorder()
	rb.snapHandle = func(m *raftpb.Message, r io.Reader) ([]byte, error) {
		close(started)
		_, err := io.Copy(io.Discard, r) // ends when the sender goes away
		return nil, err
	}
	// The source never ends.
	src := func(*raftpb.Message) (io.ReadCloser, error) {
		return io.NopCloser(zeroReader{}), nil
	}
	a := startNode(t, 1, "", newRecorder(), Config{}, src)
	b := startNode(t, 2, "", rb, Config{}, nil)
	a.t.SetPeer(2, b.addr)
	a.t.Send(ofRange1(snapMsg(1, 2)))
	select {
	case <-started:
	case <-time.After(waitTimeout):
		t.Fatal("snapshot never started")
	}
	done := make(chan struct{})
	go func() { a.stop(t); b.stop(t); close(done) }()
	select {
	case <-done:
	case <-time.After(waitTimeout):
		t.Fatal("Close hung with a snapshot in flight")
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestMetricsRegisterTwice(t *testing.T) {
	checkLeaks(t)
	reg := prometheus.NewRegistry()
	a := New(Config{NodeID: 1, Registerer: reg}, newRecorder(), nil)
	b := New(Config{NodeID: 2, Registerer: reg}, newRecorder(), nil)
	a.Send(ofRange1(heartbeat(1, 5)))
	b.Send(ofRange1(heartbeat(2, 5)))
	a.Close()
	b.Close()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() == "kvorum_transport_messages_dropped_total" {
			found = mf.GetMetric()[0].GetCounter().GetValue() == 2
		}
	}
	if !found {
		t.Fatalf("dropped counter not shared/registered")
	}
}

// detailErr is a handler error with a wire encoding.
type detailErr struct{ msg, detail string }

func (e *detailErr) Error() string      { return e.msg }
func (e *detailErr) WireDetail() []byte { return []byte(e.detail) }

// wireDetailHandler answers "detail" with a WireError (wrapped), "plain"
// with an error without one, "deadline" with a WireError that also wraps
// context.DeadlineExceeded (the handler's own deadline, not the caller's).
func wireDetailHandler(_ context.Context, method string, _ []byte) ([]byte, error) {
	switch method {
	case "detail":
		return nil, fmt.Errorf("wrapped: %w", &detailErr{msg: "boom", detail: "\x07code"})
	case "deadline":
		return nil, fmt.Errorf("%w: %w", &detailErr{msg: "late", detail: "\x08"}, context.DeadlineExceeded)
	}
	return nil, errors.New("plain")
}

// checkWireDetail runs the calls of wireDetailHandler through call.
func checkWireDetail(t *testing.T, call func(ctx context.Context, method string) error) {
	t.Helper()
	ctx := context.Background()
	err := call(ctx, "detail")
	if d, ok := WireDetail(err); !ok || string(d) != "\x07code" {
		t.Fatalf("detail: %q %v (%v)", d, ok, err)
	}
	if s, _ := status.FromError(err); s.Code() != codes.Unknown || s.Message() != "wrapped: boom" {
		t.Fatalf("detail: the status is %v", err)
	}
	err = call(ctx, "plain")
	if d, ok := WireDetail(err); ok || err == nil {
		t.Fatalf("plain: %q %v (%v)", d, ok, err)
	}
	err = call(ctx, "deadline")
	if d, ok := WireDetail(err); !ok || string(d) != "\x08" || status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("deadline: %q %v (%v)", d, ok, err)
	}
	if d, ok := WireDetail(nil); ok || d != nil {
		t.Fatal("WireDetail(nil) reports a detail")
	}
}

func TestCallWireDetail(t *testing.T) {
	checkLeaks(t)
	a, b := pair(t, Config{}, nil)
	b.rec.call = wireDetailHandler
	checkWireDetail(t, func(ctx context.Context, method string) error {
		_, err := a.t.Call(ctx, 2, method, nil)
		return err
	})
}

func TestLocalCallWireDetail(t *testing.T) {
	checkLeaks(t)
	_, ls, recs := localCluster(t, nil, 2, nil)
	recs[2].call = wireDetailHandler
	checkWireDetail(t, func(ctx context.Context, method string) error {
		_, err := ls[1].Call(ctx, 2, method, nil)
		return err
	})
}

// encodeBatch splits big batches into frames, carves them out of the
// buffer it is given when that has room, and every frame decodes to its
// share of the messages, in order; a reused buffer gives the same frames.
func TestEncodeBatchFramesAndReuse(t *testing.T) {
	var msgs []*raftpb.Message
	for i := 0; i < 12; i++ {
		m := msg(raftpb.MsgApp, 1, 2, 3, uint64(i))
		m.Entries = []*raftpb.Entry{{Data: bytes.Repeat([]byte{byte(i)}, maxFrameBytes/5)}}
		msgs = append(msgs, m)
	}
	var buf []byte
	for round := 0; round < 2; round++ {
		frames, counts, out, err := encodeBatch(buf[:0], 1, 2, ofRange1(msgs...))
		if err != nil {
			t.Fatal(err)
		}
		if len(frames) < 2 || len(frames) != len(counts) {
			t.Fatalf("round %d: %d frames, counts %v", round, len(frames), counts)
		}
		var got []*raftpb.Message
		for i, f := range frames {
			from, to, ms, err := decodeBatch(f)
			if err != nil || from != 1 || to != 2 || len(ms) != counts[i] {
				t.Fatalf("round %d frame %d: %d→%d %d msgs (want %d), %v", round, i, from, to, len(ms), counts[i], err)
			}
			for _, m := range ms {
				if m.Range != 1 {
					t.Fatalf("round %d frame %d: a message of range %d", round, i, m.Range)
				}
				got = append(got, m.Msg)
			}
		}
		for _, f := range frames {
			clear(f) // what was decoded must not alias the frame (RecvMsg reuses it)
		}
		sameMessages(t, got, msgs)
		buf = out
	}
	if cap(buf) < maxFrameBytes {
		t.Fatalf("buffer not kept for reuse: cap %d", cap(buf))
	}
}

// Sending a frame on a framed stream allocates nothing (it runs once per
// batch on every peer loop).
func TestConnStreamSendAllocs(t *testing.T) {
	l := listen(t, "")
	go func() {
		c, err := l.Accept()
		if err == nil {
			_, _ = io.Copy(io.Discard, c)
			_ = c.Close()
		}
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	st := newConnStream(context.Background(), c)
	defer st.cancel()
	f := &frame{b: make([]byte, 512)}
	if n := testing.AllocsPerRun(200, func() {
		if err := st.SendMsg(f); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("SendMsg: %v allocations per frame", n)
	}
}

// A node refuses the Raft and call streams of a node of another cluster
// (their preface names its cluster): node ids repeat from cluster to
// cluster and addresses get reused, and a node that answered another
// cluster's appends and votes would break that cluster's quorums. A node
// whose cluster is not known (0: it joined) talks to any.
func TestStreamsFromAnotherClusterRefused(t *testing.T) {
	checkLeaks(t)
	for _, c := range []struct {
		from, to uint64
		ok       bool
	}{{7, 7, true}, {7, 8, false}, {0, 8, true}, {7, 0, true}} {
		a := startNode(t, 1, "", newRecorder(), Config{ClusterID: c.from}, nil)
		b := startNode(t, 2, "", newRecorder(), Config{ClusterID: c.to}, nil)
		a.t.SetPeer(2, b.addr)
		_, err := a.t.dialStream(context.Background(), b.addr, kindCalls)
		if (err == nil) != c.ok {
			t.Fatalf("cluster %d to %d: call stream opened %v (err %v), want %v", c.from, c.to, err == nil, err, c.ok)
		}
		// Unary calls (and snapshots, which check the same header) too.
		_, err = a.t.Call(context.Background(), 2, "ping", nil)
		if refused := isStatus(err, "PermissionDenied"); refused == c.ok {
			t.Fatalf("cluster %d to %d: call refused %v (err %v), want %v", c.from, c.to, refused, err, !c.ok)
		}
		a.t.Send(ofRange1(heartbeat(1, 2)))
		if c.ok {
			waitFor(t, "delivery within a cluster", func() bool { return b.rec.count() == 1 })
		} else {
			waitFor(t, "the sender told its peer is unreachable", func() bool { return a.rec.unreachableCount(2) > 0 })
			if n := b.rec.count(); n != 0 {
				t.Fatalf("cluster %d to %d: %d messages delivered across clusters", c.from, c.to, n)
			}
		}
		a.stop(t)
		b.stop(t)
	}
}

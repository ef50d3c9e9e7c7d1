package transport

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Many concurrent callers share one stream: requests go out several to a
// frame, run concurrently on the peer (each handler waits until all have
// arrived) and complete in reverse order.
func TestCallPipelinedConcurrent(t *testing.T) {
	checkLeaks(t)
	a, b := pair(t, Config{}, nil)
	const n = 200
	var arrived atomic.Int32
	all := make(chan struct{})
	b.rec.call = func(ctx context.Context, method string, payload []byte) ([]byte, error) {
		if arrived.Add(1) == n {
			close(all)
		}
		select {
		case <-all:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		i, _ := strconv.Atoi(method)
		time.Sleep(time.Duration(n-i) * 50 * time.Microsecond)
		return append([]byte(method+":"), payload...), nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			m := strconv.Itoa(i)
			p := bytes.Repeat([]byte{byte(i)}, i)
			out, err := a.t.CallPipelined(ctx, 2, m, p)
			if err != nil {
				errs <- fmt.Errorf("call %d: %w", i, err)
				return
			}
			if want := append([]byte(m+":"), p...); !bytes.Equal(out, want) {
				errs <- fmt.Errorf("call %d: got %q", i, out)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st := a.t.Stats()
	t.Logf("%d calls in %d frames", st.CallsSent, st.CallFramesSent)
	if st.CallsSent != n || st.CallFramesSent == 0 || st.CallFramesSent >= st.CallsSent {
		t.Fatalf("no batching: %+v", st)
	}
	// The stream stays open for later calls.
	if out, err := a.t.CallPipelined(context.Background(), 2, "0", nil); err != nil || string(out) != "0:" {
		t.Fatalf("later call: %q %v", out, err)
	}
	if st := a.t.Stats(); st.CallsSent != n+1 {
		t.Fatalf("later call: %+v", st)
	}
}

func TestCallPipelinedErrors(t *testing.T) {
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
		}
		return nil, nil
	}
	ctx := context.Background()
	big := bytes.Repeat([]byte("y"), 8<<20) // more than one frame's worth
	out, err := a.t.CallPipelined(ctx, 2, "echo", big)
	if err != nil || !bytes.Equal(out, big) {
		t.Fatalf("echo: %d bytes, %v", len(out), err)
	}
	out, err = a.t.CallPipelined(ctx, 2, "empty", nil)
	if err != nil || len(out) != 0 {
		t.Fatalf("empty: %q %v", out, err)
	}
	_, err = a.t.CallPipelined(ctx, 2, "fail", nil)
	if s, _ := status.FromError(err); s.Code() != codes.Unknown || s.Message() != "boom" || errors.Is(err, ErrNotSent) {
		t.Fatalf("fail: %v", err)
	}
	_, err = a.t.CallPipelined(ctx, 2, "notfound", nil)
	if status.Code(err) != codes.NotFound {
		t.Fatalf("notfound: %v", err)
	}
	if _, err = a.t.CallPipelined(ctx, 7, "echo", nil); !errors.Is(err, ErrUnknownPeer) || !errors.Is(err, ErrNotSent) {
		t.Fatalf("unknown peer: %v", err)
	}
}

func TestCallPipelinedWireDetail(t *testing.T) {
	checkLeaks(t)
	a, b := pair(t, Config{}, nil)
	b.rec.call = wireDetailHandler
	checkWireDetail(t, func(ctx context.Context, method string) error {
		_, err := a.t.CallPipelined(ctx, 2, method, nil)
		return err
	})
}

// The caller's deadline bounds the handler's context on the peer.
func TestCallPipelinedDeadline(t *testing.T) {
	checkLeaks(t)
	a, b := pair(t, Config{}, nil)
	handlerErr := make(chan error, 1)
	b.rec.call = func(ctx context.Context, method string, _ []byte) ([]byte, error) {
		switch method {
		case "left":
			dl, ok := ctx.Deadline()
			if !ok {
				return []byte("none"), nil
			}
			return []byte(time.Until(dl).String()), nil
		case "none":
			if _, ok := ctx.Deadline(); ok {
				return []byte("deadline"), nil
			}
			return []byte("none"), nil
		case "slow":
			<-ctx.Done()
			handlerErr <- ctx.Err()
			return nil, ctx.Err()
		}
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	out, err := a.t.CallPipelined(ctx, 2, "left", nil)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := time.ParseDuration(string(out)); err != nil || d <= 0 || d > 2*time.Second {
		t.Fatalf("deadline seen by the handler: %q", out)
	}
	if out, err := a.t.CallPipelined(context.Background(), 2, "none", nil); err != nil || string(out) != "none" {
		t.Fatalf("no deadline: %q %v", out, err)
	}
	sctx, scancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer scancel()
	start := time.Now()
	_, err = a.t.CallPipelined(sctx, 2, "slow", nil)
	if status.Code(err) != codes.DeadlineExceeded || errors.Is(err, ErrNotSent) {
		t.Fatalf("slow: %v", err)
	}
	select {
	case herr := <-handlerErr:
		if !errors.Is(herr, context.DeadlineExceeded) {
			t.Fatalf("handler's context ended with %v", herr)
		}
	case <-time.After(waitTimeout):
		t.Fatal("the handler's context did not end")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("slow took %v", d)
	}
}

// A caller that cancels returns at once; the late response is dropped and
// the stream keeps working.
func TestCallPipelinedCancel(t *testing.T) {
	checkLeaks(t)
	a, b := pair(t, Config{}, nil)
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	b.rec.call = func(ctx context.Context, method string, _ []byte) ([]byte, error) {
		if method == "block" {
			entered <- struct{}{}
			<-release
			return []byte("late"), nil
		}
		return []byte("ok"), nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := a.t.CallPipelined(ctx, 2, "block", nil)
		errc <- err
	}()
	<-entered
	cancel()
	select {
	case err := <-errc:
		// Written, so not ErrNotSent: the peer is running it.
		if status.Code(err) != codes.Canceled || errors.Is(err, ErrNotSent) {
			t.Fatalf("canceled call: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("canceled call did not return")
	}
	close(release)
	if out, err := a.t.CallPipelined(context.Background(), 2, "x", nil); err != nil || string(out) != "ok" {
		t.Fatalf("after cancel: %q %v", out, err)
	}
	// A context already done: not sent.
	if _, err := a.t.CallPipelined(ctx, 2, "x", nil); !errors.Is(err, ErrNotSent) || status.Code(err) != codes.Canceled {
		t.Fatalf("done context: %v", err)
	}
}

func TestCallPipelinedPeerDown(t *testing.T) {
	checkLeaks(t)
	a, b := pair(t, Config{}, nil)
	if _, err := a.t.CallPipelined(context.Background(), 2, "x", nil); err != nil {
		t.Fatal(err)
	}
	addr := b.addr
	b.stop(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	// The stream breaks when b goes; once a knows, nothing can be sent.
	waitFor(t, "ErrNotSent from a dead peer", func() bool {
		_, err := a.t.CallPipelined(ctx, 2, "x", nil)
		if err == nil {
			t.Fatal("call to a stopped peer succeeded")
		}
		return errors.Is(err, ErrNotSent)
	})
	// It comes back.
	b2 := startNode(t, 2, addr, newRecorder(), Config{}, nil)
	waitFor(t, "call after restart", func() bool {
		out, err := a.t.CallPipelined(ctx, 2, "x", []byte("y"))
		return err == nil && string(out) == "x:y"
	})
	_ = b2
}

// A stream that breaks with calls in flight fails them as ambiguous.
func TestCallPipelinedBrokenMidCall(t *testing.T) {
	checkLeaks(t)
	a, b := pair(t, Config{}, nil)
	var entered atomic.Int32
	b.rec.call = func(ctx context.Context, _ string, _ []byte) ([]byte, error) {
		entered.Add(1)
		<-ctx.Done()
		return nil, errors.New("never answered")
	}
	const n = 5
	errc := make(chan error, n)
	for range n {
		go func() {
			_, err := a.t.CallPipelined(context.Background(), 2, "x", nil)
			errc <- err
		}()
	}
	waitFor(t, "handlers running", func() bool { return entered.Load() == n })
	b.stop(t)
	for range n {
		select {
		case err := <-errc:
			if err == nil || errors.Is(err, ErrNotSent) {
				t.Fatalf("in-flight call on a broken stream: %v", err)
			}
		case <-time.After(waitTimeout):
			t.Fatal("in-flight call did not fail")
		}
	}
}

func TestCallPipelinedInterceptor(t *testing.T) {
	checkLeaks(t)
	part := NewPartitioner()
	a, _ := pair(t, Config{Interceptor: part}, nil)
	part.Cut(1, 2)
	_, err := a.t.CallPipelined(context.Background(), 2, "x", nil)
	if !errors.Is(err, ErrNotSent) || !errors.Is(err, ErrPartitioned) {
		t.Fatalf("cut link: %v", err)
	}
	part.Heal()
	if out, err := a.t.CallPipelined(context.Background(), 2, "x", nil); err != nil || string(out) != "x:" {
		t.Fatalf("healed: %q %v", out, err)
	}
}

// silentListener accepts connections and never answers: a gRPC stream to it
// cannot open until the dial timeout.
func silentListener(t *testing.T) string {
	t.Helper()
	l := listen(t, "")
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().String()
}

// Calls that never left (the stream could not open, or was opening when
// the peer was removed) fail with ErrNotSent.
func TestCallPipelinedNotSent(t *testing.T) {
	checkLeaks(t)
	addr := silentListener(t)
	a := startNode(t, 1, "", newRecorder(), Config{DialTimeout: 300 * time.Millisecond}, nil)
	a.t.SetPeer(2, addr)
	_, err := a.t.CallPipelined(context.Background(), 2, "x", nil)
	if !errors.Is(err, ErrNotSent) {
		t.Fatalf("stream that cannot open: %v", err)
	}

	a.t.SetPeer(3, addr)
	const n = 5
	errc := make(chan error, n)
	for range n {
		go func() {
			_, err := a.t.CallPipelined(context.Background(), 3, "x", nil)
			errc <- err
		}()
	}
	time.Sleep(50 * time.Millisecond)
	a.t.RemovePeer(3)
	for range n {
		select {
		case err := <-errc:
			if !errors.Is(err, ErrNotSent) {
				t.Fatalf("call to a removed peer that never connected: %v", err)
			}
		case <-time.After(waitTimeout):
			t.Fatal("call did not fail")
		}
	}
}

// RemovePeer and Close fail calls in flight as ambiguous, at once.
func TestCallPipelinedRemoveAndClose(t *testing.T) {
	for _, how := range []string{"remove", "close"} {
		t.Run(how, func(t *testing.T) {
			checkLeaks(t)
			a, b := pair(t, Config{}, nil)
			var entered atomic.Int32
			release := make(chan struct{})
			defer close(release)
			b.rec.call = func(ctx context.Context, _ string, _ []byte) ([]byte, error) {
				entered.Add(1)
				<-release
				return nil, nil
			}
			const n = 5
			errc := make(chan error, n)
			for range n {
				go func() {
					_, err := a.t.CallPipelined(context.Background(), 2, "x", nil)
					errc <- err
				}()
			}
			waitFor(t, "handlers running", func() bool { return entered.Load() == n })
			if how == "remove" {
				a.t.RemovePeer(2)
			} else {
				a.stop(t)
			}
			for range n {
				select {
				case err := <-errc:
					if err == nil || errors.Is(err, ErrNotSent) {
						t.Fatalf("in-flight call: %v", err)
					}
				case <-time.After(waitTimeout):
					t.Fatal("in-flight call did not fail")
				}
			}
			_, err := a.t.CallPipelined(context.Background(), 2, "x", nil)
			if !errors.Is(err, ErrNotSent) {
				t.Fatalf("call after %s: %v", how, err)
			}
		})
	}
}

// A peer that sends garbage on the Calls stream, or frames meant for
// another node, gets the stream closed; the server goes on serving.
func TestCallsMalformedRequest(t *testing.T) {
	checkLeaks(t)
	a, b := pair(t, Config{}, nil)
	bad := [][]byte{nil, {9}, {wireVersion, 1, 2, 200}, {wireVersion, 1, 2, 1, 1, 0, 5, 'a'},
		encodeCallReqs(1, 9, []callReq{{id: 1, method: "x"}})[0]} // meant for node 9
	for _, f := range bad {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		st, err := a.t.dialStream(ctx, b.addr, kindCalls)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SendMsg(&frame{b: f}); err != nil {
			t.Fatal(err)
		}
		var resp frame
		err = st.RecvMsg(&resp)
		st.cancel()
		cancel()
		if err == nil {
			t.Fatalf("frame %q answered %q, want the stream closed", f, resp.b)
		}
	}
	// A stream of an unknown kind is refused.
	if st, err := a.t.dialStream(context.Background(), b.addr, 'Z'); err == nil {
		st.cancel()
		t.Fatal("stream of unknown kind opened")
	}
	if out, err := a.t.CallPipelined(context.Background(), 2, "x", nil); err != nil || string(out) != "x:" {
		t.Fatalf("after bad frames: %q %v", out, err)
	}
}

// serveBadCalls accepts framed streams on l and answers every request
// frame with resp.
func serveBadCalls(t *testing.T, l net.Listener, resp []byte) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			head := make([]byte, prefaceLen)
			if _, err := io.ReadFull(c, head); err != nil {
				return
			}
			if _, err := c.Write([]byte(streamMagic)); err != nil {
				return
			}
			st := newConnStream(context.Background(), c)
			defer st.cancel()
			for {
				var f frame
				if err := st.RecvMsg(&f); err != nil {
					return
				}
				if err := st.SendMsg(&frame{b: resp}); err != nil {
					return
				}
			}
		}()
	}
}

// A malformed response frame closes the stream: the calls on it fail as
// ambiguous, nothing panics.
func TestCallsMalformedResponse(t *testing.T) {
	checkLeaks(t)
	a := startNode(t, 1, "", newRecorder(), Config{}, nil)
	for _, bad := range [][]byte{
		{9},
		{wireVersion, 1, 1, 7, 0},                // unknown kind
		{wireVersion, 1, 1, callStatus, 2, 8, 0}, // status with code OK
		{wireVersion, 1, 1, callStatus, 2, 0xff, 1}, // not a status
		{wireVersion, 2, 1, 0, 0},                   // truncated
	} {
		l := listen(t, "")
		done := make(chan struct{})
		go func() { defer close(done); serveBadCalls(t, l, bad) }()
		a.t.SetPeer(2, l.Addr().String())
		_, err := a.t.CallPipelined(context.Background(), 2, "x", nil)
		if err == nil || errors.Is(err, ErrNotSent) {
			t.Fatalf("response %q: %v", bad, err)
		}
		a.t.RemovePeer(2)
		_ = l.Close()
		<-done
	}
}

func TestCallFramesRoundTrip(t *testing.T) {
	reqs := []callReq{
		{id: 1, method: "exec", payload: []byte("abc")},
		{id: 1 << 40, timeout: 1500 * time.Microsecond, method: "", payload: nil},
		{id: 3, timeout: time.Hour, method: "m", payload: bytes.Repeat([]byte("z"), maxFrameBytes)},
		{id: 4, method: "after", payload: []byte("big")},
	}
	frames := encodeCallReqs(5, 6, reqs)
	if len(frames) != 2 {
		t.Fatalf("%d frames", len(frames))
	}
	var got []callReq
	for _, f := range frames {
		from, to, rs, err := decodeCallReqs(f)
		if err != nil || from != 5 || to != 6 {
			t.Fatalf("decode: %d %d %v", from, to, err)
		}
		got = append(got, rs...)
	}
	if len(got) != len(reqs) {
		t.Fatalf("%d requests", len(got))
	}
	for i := range reqs {
		if got[i].id != reqs[i].id || got[i].timeout != reqs[i].timeout || got[i].method != reqs[i].method || !bytes.Equal(got[i].payload, reqs[i].payload) {
			t.Fatalf("request %d differs", i)
		}
	}
	resps := []callResp{{id: 9, kind: callOK, body: []byte("r")}, {id: 2, kind: callStatus, body: nil}}
	rf := encodeCallResps(resps)
	if len(rf) != 1 {
		t.Fatalf("%d frames", len(rf))
	}
	rs, err := decodeCallResps(rf[0])
	if err != nil || len(rs) != 2 || rs[0].id != 9 || string(rs[0].body) != "r" || rs[1].kind != callStatus {
		t.Fatalf("responses: %+v %v", rs, err)
	}
}

// Every truncation and many corruptions of valid frames decode to an
// error or to something, never a panic.
func TestCallFramesCorrupt(t *testing.T) {
	req := encodeCallReqs(1, 2, []callReq{{id: 1, timeout: time.Second, method: "exec", payload: []byte("payload")}, {id: 2, method: "x"}})[0]
	resp := encodeCallResps([]callResp{{id: 1, kind: callOK, body: []byte("ok")}, {id: 2, kind: callStatus, body: []byte{8, 5}}})[0]
	rng := rand.New(rand.NewSource(1))
	for _, f := range [][]byte{req, resp} {
		for i := range len(f) {
			_, _, _, _ = decodeCallReqs(f[:i])
			_, _, _ = decodeResults(f[:i])
		}
		for range 2000 {
			g := bytes.Clone(f)
			for range 1 + rng.Intn(3) {
				g[rng.Intn(len(g))] = byte(rng.Intn(256))
			}
			_, _, _, _ = decodeCallReqs(g)
			_, _, _ = decodeResults(g)
		}
	}
	// A count larger than the frame could hold.
	huge := binary.AppendUvarint([]byte{wireVersion, 1, 2}, 1<<62)
	if _, _, _, err := decodeCallReqs(huge); err == nil {
		t.Fatal("huge count accepted")
	}
	if _, err := decodeCallResps(binary.AppendUvarint([]byte{wireVersion}, 1<<62)); err == nil {
		t.Fatal("huge count accepted")
	}
}

func FuzzDecodeCallFrames(f *testing.F) {
	f.Add(encodeCallReqs(1, 2, []callReq{{id: 1, timeout: time.Second, method: "exec", payload: []byte("p")}})[0])
	f.Add(encodeCallResps([]callResp{{id: 1, kind: callStatus, body: []byte{8, 5}}})[0])
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, _, _ = decodeCallReqs(b)
		_, _, _ = decodeResults(b)
	})
}

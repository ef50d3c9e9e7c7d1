package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Pipelined calls: CallPipelined sends calls to a peer over one long-lived
// bidirectional stream (the Calls method) instead of one unary RPC each.
//
// Client side, per peer (a pipe): callers queue requests and wait; one
// sender goroutine (pipe.run, started with the peer) takes everything
// queued and writes it as one frame, opening the stream first if there is
// none (lazily, and again after a failure); one receiver goroutine per open
// stream reads response frames and completes the waiting callers by
// request id. A stream that fails fails the calls written on it (an
// ambiguous error: the peer may have run them); calls still queued are not
// affected, they go out on the next stream.
//
// Server side (serveCalls, on the stream's goroutine): the reader
// runs each request's HandleCall on a goroutine of its own (a forwarded
// write blocks until it commits: they must run concurrently, and finish in
// any order); one writer goroutine sends every response ready at once in
// one frame.

// CallPipelined is Call over the peer's call stream: many concurrent calls
// to one peer share one gRPC stream and go out batched, several requests
// to a frame. The contract is Call's:
//
//   - an error wrapping ErrNotSent means the request certainly never left
//     this node (unknown peer, refused by the Interceptor, the stream could
//     not be opened, the call was still queued when the stream failed or
//     when the caller gave up): retrying cannot duplicate it;
//   - any other failure once the request may have been written (the stream
//     broke, the peer was removed, the transport closed) is ambiguous;
//   - a handler error comes back as the same gRPC status Call returns
//     (status.Code and WireDetail work on it);
//   - the caller's deadline travels with the request and bounds the
//     handler's context on the peer; the caller's cancellation or deadline
//     returns at once with the context's status. A request already written
//     is not canceled on the peer: its handler runs until it returns or its
//     deadline passes.
func (t *Transport) CallPipelined(ctx context.Context, to uint64, method string, payload []byte) ([]byte, error) {
	p, err := t.callPeer(to)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotSent, status.FromContextError(err).Err())
	}
	start := time.Now()
	resp, err := p.calls.call(ctx, method, payload)
	result := "ok"
	if err != nil {
		result = "error"
	}
	t.m.callDur.WithLabelValues(method, result).Observe(time.Since(start).Seconds())
	return resp, err
}

// States of a pending call (pending.state, guarded by pipe.mu).
const (
	callQueued  = iota // in pipe.queue
	callTaken          // taken by the sender, not written
	callWritten        // registered on a stream and handed to SendMsg
	callDone           // completed or abandoned by its caller
)

// pending is one call between CallPipelined and its response.
type pending struct {
	id       uint64
	method   string
	payload  []byte
	deadline time.Time // zero: none
	done     chan struct{}

	// Guarded by pipe.mu.
	state int
	cs    *callStream // once written
	resp  []byte      // set before done is closed
	err   error
}

// complete ends pd with a result; pipe.mu must be held.
func (pd *pending) complete(resp []byte, err error) {
	if pd.state == callDone {
		return
	}
	pd.state = callDone
	pd.resp, pd.err = resp, err
	close(pd.done)
}

// callStream is one open Calls stream of a pipe.
type callStream struct {
	addr string // the address it was opened to
	st   *connStream

	// Guarded by pipe.mu.
	inflight map[uint64]*pending // written, waiting for a response
	failed   bool
}

// pipe is the client side of the call stream to one peer.
type pipe struct {
	p    *peer
	wake chan struct{} // capacity 1: "the queue is not empty"

	mu     sync.Mutex
	closed bool // the peer is gone: nothing can be queued
	queue  []*pending
	nextID uint64
	cur    *callStream // nil: none open; written by the sender only
}

func newPipe(p *peer) *pipe {
	return &pipe{p: p, wake: make(chan struct{}, 1)}
}

func (pp *pipe) call(ctx context.Context, method string, payload []byte) ([]byte, error) {
	pd := &pending{method: method, payload: payload, done: make(chan struct{})}
	if dl, ok := ctx.Deadline(); ok {
		pd.deadline = dl
	}
	pp.mu.Lock()
	if pp.closed {
		pp.mu.Unlock()
		return nil, fmt.Errorf("%w: peer %d: %w", ErrNotSent, pp.p.id, ErrClosed)
	}
	pp.nextID++
	pd.id = pp.nextID
	pp.queue = append(pp.queue, pd)
	pp.mu.Unlock()
	select {
	case pp.wake <- struct{}{}:
	default:
	}

	select {
	case <-pd.done:
		return pd.result(ctx)
	case <-ctx.Done():
	}
	pp.mu.Lock()
	state := pd.state
	switch state {
	case callDone: // the result came in meanwhile
		pp.mu.Unlock()
		return pd.result(ctx)
	case callQueued:
		for i, q := range pp.queue {
			if q == pd {
				pp.queue = append(pp.queue[:i], pp.queue[i+1:]...)
				break
			}
		}
	case callWritten:
		delete(pd.cs.inflight, pd.id)
	}
	pd.state = callDone
	pp.mu.Unlock()
	cerr := status.FromContextError(ctx.Err()).Err()
	if state != callWritten {
		return nil, fmt.Errorf("%w: %w", ErrNotSent, cerr)
	}
	return nil, cerr
}

// result is pd's outcome as its caller sees it: as with Call, the caller's
// own deadline or cancellation wins over a failure (but not over a
// failure that is certainly not sent).
func (pd *pending) result(ctx context.Context) ([]byte, error) {
	if pd.err != nil {
		if cerr := ctx.Err(); cerr != nil && !errors.Is(pd.err, ErrNotSent) {
			return nil, status.FromContextError(cerr).Err()
		}
		return nil, pd.err
	}
	return pd.resp, nil
}

// run is the pipe's sender goroutine: it lives as long as the peer.
func (pp *pipe) run() {
	defer pp.p.t.wg.Done()
	var batch []*pending
	for {
		select {
		case <-pp.p.ctx.Done():
			pp.shutdown()
			return
		case <-pp.wake:
		}
		runtime.Gosched() // let callers that are about to queue join this frame
		pp.mu.Lock()
		batch = append(batch[:0], pp.queue...)
		clear(pp.queue)
		pp.queue = pp.queue[:0]
		for _, pd := range batch {
			pd.state = callTaken
		}
		pp.mu.Unlock()
		if len(batch) > 0 {
			pp.send(batch)
			clear(batch)
		}
	}
}

// failTaken fails the calls of batch that are still unwritten with
// ErrNotSent; pipe.mu must be held.
func failTaken(batch []*pending, err error) {
	for _, pd := range batch {
		if pd.state == callTaken {
			pd.complete(nil, fmt.Errorf("%w: %w", ErrNotSent, err))
		}
	}
}

// send writes batch (one frame, unless it is larger than maxFrameBytes).
func (pp *pipe) send(batch []*pending) {
	t := pp.p.t
	cs, err := pp.stream()
	pp.mu.Lock()
	if err == nil && cs.failed {
		err = errors.New("transport: call stream failed")
	}
	if err != nil {
		failTaken(batch, err)
		pp.mu.Unlock()
		t.log.Debug("cannot open call stream", "peer", pp.p.id, "err", err)
		return
	}
	reqs := make([]callReq, 0, len(batch))
	now := time.Now()
	for _, pd := range batch {
		if pd.state != callTaken {
			continue // its caller gave up
		}
		var timeout time.Duration
		if !pd.deadline.IsZero() {
			if timeout = pd.deadline.Sub(now); timeout <= 0 {
				pd.complete(nil, fmt.Errorf("%w: %w", ErrNotSent, status.FromContextError(context.DeadlineExceeded).Err()))
				continue
			}
			timeout = max(timeout, time.Microsecond)
		}
		pd.state, pd.cs = callWritten, cs
		cs.inflight[pd.id] = pd
		reqs = append(reqs, callReq{id: pd.id, timeout: timeout, method: pd.method, payload: pd.payload})
	}
	pp.mu.Unlock()
	if len(reqs) == 0 {
		return
	}
	for _, f := range encodeCallReqs(t.cfg.NodeID, pp.p.id, reqs) {
		if err := cs.st.SendMsg(&frame{b: f}); err != nil {
			if err == io.EOF {
				// The stream ended; the receiver gets its status.
				err = errors.New("transport: call stream closed by peer")
			}
			pp.fail(cs, err)
			return
		}
		t.m.callFrames.Inc()
		t.m.callFramesSent.Add(1)
	}
	t.m.callsPipelined.Add(float64(len(reqs)))
	t.m.callsSent.Add(uint64(len(reqs)))
}

// stream returns the open call stream, opening one if there is none or the
// peer's connection changed. Called by the sender only.
func (pp *pipe) stream() (*callStream, error) {
	addr, err := pp.p.dialAddr()
	if err != nil {
		return nil, err
	}
	pp.mu.Lock()
	cs := pp.cur
	pp.mu.Unlock()
	if cs != nil {
		if cs.addr == addr {
			return cs, nil
		}
		pp.fail(cs, errors.New("transport: peer address changed"))
	}
	st, err := pp.p.t.dialStream(pp.p.ctx, addr, kindCalls)
	if err != nil {
		return nil, err
	}
	cs = &callStream{addr: addr, st: st, inflight: map[uint64]*pending{}}
	pp.mu.Lock()
	pp.cur = cs
	pp.mu.Unlock()
	pp.p.t.wg.Add(1) // the sender is counted: never from zero
	go pp.receive(cs)
	return cs, nil
}

// receive is the receiver goroutine of one call stream.
func (pp *pipe) receive(cs *callStream) {
	defer pp.p.t.wg.Done()
	for {
		var f frame
		if err := cs.st.RecvMsg(&f); err != nil {
			if err == io.EOF {
				err = errors.New("transport: call stream closed by peer")
			}
			pp.fail(cs, err)
			return
		}
		resps, errs, err := decodeResults(f.b)
		if err != nil {
			pp.p.t.log.Warn("bad call response frame", "peer", pp.p.id, "err", err)
			pp.fail(cs, err)
			return
		}
		pp.mu.Lock()
		for i, r := range resps {
			pd := cs.inflight[r.id]
			if pd == nil {
				continue // its caller gave up
			}
			delete(cs.inflight, r.id)
			if errs[i] != nil {
				pd.complete(nil, errs[i])
			} else {
				pd.complete(r.body, nil)
			}
		}
		pp.mu.Unlock()
	}
}

// decodeResults decodes a response frame and the statuses in it.
func decodeResults(b []byte) ([]callResp, []error, error) {
	resps, err := decodeCallResps(b)
	if err != nil {
		return nil, nil, err
	}
	errs := make([]error, len(resps))
	for i, r := range resps {
		if r.kind != callStatus {
			continue
		}
		var sp spb.Status
		if err := proto.Unmarshal(r.body, &sp); err != nil {
			return nil, nil, fmt.Errorf("%w: status: %v", errBadFrame, err)
		}
		if codes.Code(sp.GetCode()) == codes.OK {
			return nil, nil, fmt.Errorf("%w: error response with status OK", errBadFrame)
		}
		errs[i] = status.ErrorProto(&sp)
	}
	return resps, errs, nil
}

// fail closes cs: the calls written on it fail with an ambiguous error.
func (pp *pipe) fail(cs *callStream, err error) {
	pp.mu.Lock()
	if cs.failed {
		pp.mu.Unlock()
		return
	}
	cs.failed = true
	if pp.cur == cs {
		pp.cur = nil
	}
	for id, pd := range cs.inflight {
		delete(cs.inflight, id)
		pd.complete(nil, fmt.Errorf("transport: call stream to peer %d failed: %w", pp.p.id, err))
	}
	pp.mu.Unlock()
	cs.st.cancel()
}

// shutdown runs when the peer is removed or the transport closes.
func (pp *pipe) shutdown() {
	pp.mu.Lock()
	pp.closed = true
	for _, pd := range pp.queue {
		pd.complete(nil, fmt.Errorf("%w: peer %d removed or transport closed", ErrNotSent, pp.p.id))
	}
	pp.queue = nil
	cs := pp.cur
	pp.mu.Unlock()
	if cs != nil {
		pp.fail(cs, fmt.Errorf("peer removed or transport closed: %w", ErrClosed))
	}
}

// ---- server side ----

// serveCalls runs on the goroutine of an incoming Calls stream. It returns
// once every handler it started has returned.
func (t *Transport) serveCalls(st frameStream) error {
	ctx, cancel := context.WithCancel(st.Context())
	defer cancel()
	w := &callWriter{wake: make(chan struct{}, 1)}
	writerDone := make(chan error, 1)
	go func() { writerDone <- t.writeCalls(ctx, st, w) }()
	var handlers sync.WaitGroup
	err := t.readCalls(ctx, st, w, &handlers)
	if err == nil {
		// The caller closed its side: answer what it asked, then end.
		handlers.Wait()
		w.mu.Lock()
		w.closing = true
		w.mu.Unlock()
		w.signal()
		return <-writerDone // ends at once if ctx is canceled
	}
	cancel()
	handlers.Wait()
	<-writerDone
	return err
}

// readCalls reads request frames and starts a handler per request. It
// returns nil when the client closed its side, else the stream's error.
func (t *Transport) readCalls(ctx context.Context, st frameStream, w *callWriter, handlers *sync.WaitGroup) error {
	return readFrames(t, st, "call", decodeCallReqs, func(_ int, reqs []callReq) {
		for _, q := range reqs {
			handlers.Add(1)
			go func() {
				defer handlers.Done()
				w.push(t.runCall(ctx, q))
			}()
		}
	})
}

// runCall runs one request's handler under the caller's deadline.
func (t *Transport) runCall(ctx context.Context, q callReq) callResp {
	if q.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, q.timeout)
		defer cancel()
	}
	resp, err := t.h.HandleCall(ctx, q.method, q.payload)
	if err == nil {
		return callResp{id: q.id, kind: callOK, body: resp}
	}
	b, merr := proto.Marshal(status.Convert(toStatus(err)).Proto())
	if merr != nil {
		b, _ = proto.Marshal(status.New(codes.Internal, "transport: cannot encode status: "+merr.Error()).Proto())
	}
	return callResp{id: q.id, kind: callStatus, body: b}
}

// callWriter collects the responses of one Calls stream for its writer.
type callWriter struct {
	wake    chan struct{}
	mu      sync.Mutex
	q       []callResp
	closing bool // write what is queued, then stop
}

func (w *callWriter) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *callWriter) push(r callResp) {
	w.mu.Lock()
	w.q = append(w.q, r)
	w.mu.Unlock()
	w.signal()
}

// writeCalls is the writer goroutine of one Calls stream: every response
// ready when it wakes goes out in one frame.
func (t *Transport) writeCalls(ctx context.Context, st frameStream, w *callWriter) error {
	var batch []callResp
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.wake:
		}
		w.mu.Lock()
		batch, w.q = w.q, batch[:0]
		closing := w.closing
		w.mu.Unlock()
		for _, f := range encodeCallResps(batch) {
			if err := st.SendMsg(&frame{b: f}); err != nil {
				return err
			}
		}
		clear(batch)
		if closing {
			return nil
		}
	}
}

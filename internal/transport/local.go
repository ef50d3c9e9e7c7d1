package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/kvorum/kvorum/internal/storage"
)

// LocalNetwork connects in-process transports (Local), for a cluster
// harness without sockets. Nodes register a Handler by id; a node that
// closes its Local and registers again under the same id is a restarted
// node. Semantics follow Transport: delivery is asynchronous (one goroutine
// per sender and destination), messages are copied, queues are bounded,
// an unregistered destination is unreachable, handler errors come back to
// callers as gRPC status errors, and the Interceptor is consulted on the
// sending side.
type LocalNetwork struct {
	ic Interceptor

	mu    sync.RWMutex
	nodes map[uint64]*Local
	addrs map[string]uint64
}

// NewLocalNetwork returns an empty network; ic may be nil.
func NewLocalNetwork(ic Interceptor) *LocalNetwork {
	return &LocalNetwork{ic: ic, nodes: map[uint64]*Local{}, addrs: map[string]uint64{}}
}

// LocalAddr is the address Register gives node id.
func LocalAddr(id uint64) string { return "local:" + strconv.FormatUint(id, 10) }

// Register attaches node id to the network at LocalAddr(id) and returns
// its transport. A previous registration of id is replaced (messages then
// go to the new handler).
func (n *LocalNetwork) Register(id uint64, h Handler, snaps SnapshotSource) *Local {
	return n.RegisterAddr(id, LocalAddr(id), h, snaps)
}

// RegisterAddr is Register at a chosen address (what CallAddr resolves).
func (n *LocalNetwork) RegisterAddr(id uint64, addr string, h Handler, snaps SnapshotSource) *Local {
	l := &Local{
		net:   n,
		id:    id,
		addr:  addr,
		h:     h,
		snaps: snaps,
		m:     newMetrics(nil),
		rep:   newReporter(),
		peers: map[uint64]*localPeer{},
		stop:  make(chan struct{}),
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	n.mu.Lock()
	for a, i := range n.addrs {
		if i == id {
			delete(n.addrs, a)
		}
	}
	n.nodes[id] = l
	n.addrs[addr] = id
	n.mu.Unlock()
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		l.rep.run(l.stop, h)
	}()
	return l
}

func (n *LocalNetwork) node(id uint64) *Local {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.nodes[id]
}

func (n *LocalNetwork) resolve(addr string) (uint64, bool) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	id, ok := n.addrs[addr]
	return id, ok
}

func (n *LocalNetwork) unregister(l *Local) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.nodes[l.id] == l {
		delete(n.nodes, l.id)
		if n.addrs[l.addr] == l.id {
			delete(n.addrs, l.addr)
		}
	}
}

var errLocalDown = status.Error(codes.Unavailable, "transport: local peer is down")

// Local is an in-process transport with the same methods as *Transport.
type Local struct {
	net   *LocalNetwork
	id    uint64
	addr  string
	h     Handler
	snaps SnapshotSource
	m     *metrics
	rep   *reporter

	ctx    context.Context // canceled by Close: aborts inbound calls and snapshots
	cancel context.CancelFunc
	stop   chan struct{}

	mu     sync.RWMutex
	closed bool
	peers  map[uint64]*localPeer
	wg     sync.WaitGroup // outgoing loops, snapshot senders, reporter, call waiters

	inMu     sync.Mutex
	inClosed bool
	inWG     sync.WaitGroup // Handler methods running on behalf of senders
}

type localPeer struct {
	id   uint64
	out  *outbox
	stop chan struct{}
}

// Addr is the address the Local is registered at.
func (l *Local) Addr() string { return l.addr }

// Stats returns cumulative counters.
func (l *Local) Stats() Stats { return l.m.get() }

// enter admits one Handler invocation on l (as the destination); false if
// l is closed.
func (l *Local) enter() bool {
	l.inMu.Lock()
	defer l.inMu.Unlock()
	if l.inClosed {
		return false
	}
	l.inWG.Add(1)
	return true
}

func (l *Local) exit() { l.inWG.Done() }

// SetPeer makes id a known destination; the address is ignored (the
// network routes by id). Idempotent.
func (l *Local) SetPeer(id uint64, _ string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.peers[id] != nil {
		return
	}
	p := &localPeer{id: id, out: newOutbox(DefaultQueueSize), stop: make(chan struct{})}
	l.peers[id] = p
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		p.out.run(p.stop, func(batch []storage.RaftMessage) error { return l.deliver(p.id, batch) })
	}()
}

// RemovePeer forgets id; queued messages are discarded.
func (l *Local) RemovePeer(id uint64) {
	l.mu.Lock()
	p := l.peers[id]
	delete(l.peers, id)
	l.mu.Unlock()
	if p != nil {
		close(p.stop)
	}
}

// deliver runs on the (l → to) loop goroutine.
func (l *Local) deliver(to uint64, batch []storage.RaftMessage) error {
	dst := l.net.node(to)
	if dst == nil || !dst.enter() {
		l.m.dropAll(batch, dropSendFailed)
		l.rep.unreachable(to)
		return errLocalDown
	}
	defer dst.exit()
	msgs := make([]storage.RaftMessage, len(batch))
	for i, m := range batch {
		msgs[i] = storage.RaftMessage{Range: m.Range, Msg: proto.Clone(m.Msg).(*raftpb.Message), Kind: m.Kind}
	}
	l.m.framesSent.Add(1)
	l.m.sentMsgs(msgs)
	dst.m.receivedMsgs(msgs)
	dst.h.HandleRaft(msgs)
	return nil
}

// Send is Transport.Send for the in-process network.
func (l *Local) Send(msgs []storage.RaftMessage) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return
	}
	route(msgs, l.id, l.net.ic, l.m, l.rep,
		func(to uint64) (*outbox, bool) {
			p := l.peers[to]
			if p == nil {
				return nil, false
			}
			return p.out, true
		},
		func(to uint64, m storage.RaftMessage, delay time.Duration) {
			l.wg.Add(1)
			go l.sendSnapshot(l.peers[to], m, delay)
		})
}

func (l *Local) sendSnapshot(p *localPeer, m storage.RaftMessage, delay time.Duration) {
	defer l.wg.Done()
	if delay > 0 {
		sleep(delay, p.stop, l.stop)
	}
	err := l.streamSnapshot(p, m)
	l.m.snapshotDone("sent", err == nil)
	select {
	case <-p.stop: // removed
	default:
		l.rep.snapshot(m.Range, p.id, err == nil)
	}
}

func (l *Local) streamSnapshot(p *localPeer, m storage.RaftMessage) error {
	select {
	case <-p.stop:
		return ErrClosed
	case <-l.stop:
		return ErrClosed
	default:
	}
	if l.snaps == nil {
		return errors.New("transport: no SnapshotSource")
	}
	dst := l.net.node(p.id)
	if dst == nil || !dst.enter() {
		return errLocalDown
	}
	defer dst.exit()
	rc, err := l.snaps(m.Msg)
	if err != nil {
		return fmt.Errorf("open snapshot: %w", err)
	}
	defer rc.Close()
	r := &localSnapReader{r: rc, stops: []<-chan struct{}{p.stop, l.stop, dst.stop}}
	err = dst.h.HandleSnapshot(storage.RaftMessage{Range: m.Range, Msg: proto.Clone(m.Msg).(*raftpb.Message)}, r)
	if err == nil {
		if _, derr := io.Copy(io.Discard, r); derr != nil {
			err = derr
		}
	}
	dst.m.snapshotDone("received", err == nil)
	if err != nil {
		return toStatus(err)
	}
	return nil
}

// localSnapReader fails once the sender, the destination or the link goes
// away, as a broken stream would.
type localSnapReader struct {
	r     io.Reader
	stops []<-chan struct{}
	err   error
}

func (r *localSnapReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	for _, s := range r.stops {
		select {
		case <-s:
			r.err = errors.New("transport: snapshot stream: peer went away")
			return 0, r.err
		default:
		}
	}
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		// The sender's source failed: the receiver sees an aborted stream.
		err = fmt.Errorf("transport: snapshot stream: %w", err)
	}
	return n, err
}

// Call is Transport.Call for the in-process network.
func (l *Local) Call(ctx context.Context, to uint64, method string, payload []byte) ([]byte, error) {
	l.mu.RLock()
	closed, known := l.closed, l.peers[to] != nil
	l.mu.RUnlock()
	if closed {
		return nil, ErrClosed
	}
	if !known {
		return nil, fmt.Errorf("%w %d", ErrUnknownPeer, to)
	}
	return l.call(ctx, to, method, payload)
}

// CallAddr is Transport.CallAddr: addr is resolved among registered nodes.
func (l *Local) CallAddr(ctx context.Context, addr string, method string, payload []byte) ([]byte, error) {
	l.mu.RLock()
	closed := l.closed
	l.mu.RUnlock()
	if closed {
		return nil, ErrClosed
	}
	to, ok := l.net.resolve(addr)
	if !ok {
		if ic := l.net.ic; ic != nil {
			if err := ic.Call(l.id, 0); err != nil {
				return nil, err
			}
		}
		return nil, status.Errorf(codes.Unavailable, "transport: no local node at %q", addr)
	}
	return l.call(ctx, to, method, payload)
}

func (l *Local) call(ctx context.Context, to uint64, method string, payload []byte) ([]byte, error) {
	if ic := l.net.ic; ic != nil {
		if err := ic.Call(l.id, to); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	resp, err := l.doCall(ctx, to, method, payload)
	result := "ok"
	if err != nil {
		result = "error"
	}
	l.m.callDur.WithLabelValues(method, result).Observe(time.Since(start).Seconds())
	return resp, err
}

func (l *Local) doCall(ctx context.Context, to uint64, method string, payload []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	dst := l.net.node(to)
	if dst == nil || !dst.enter() {
		return nil, errLocalDown
	}
	// The handler runs on its own goroutine (as on a server) with a context
	// canceled when the caller gives up or either side closes.
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop1 := context.AfterFunc(dst.ctx, cancel)
	defer stop1()
	stop2 := context.AfterFunc(l.ctx, cancel)
	defer stop2()
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	in := bytes.Clone(payload)
	go func() {
		defer dst.exit()
		b, err := dst.h.HandleCall(hctx, method, in)
		if err != nil {
			done <- result{nil, toStatus(err)}
			return
		}
		done <- result{bytes.Clone(b), nil}
	}()
	var r result
	select {
	case r = <-done:
	case <-hctx.Done():
		select {
		case r = <-done:
		default:
			r.err = status.Error(codes.Unavailable, "transport: local peer closed")
		}
	}
	if r.err != nil {
		// As over gRPC: the caller's own deadline or cancellation wins.
		if err := ctx.Err(); err != nil {
			return nil, status.FromContextError(err).Err()
		}
	}
	return r.b, r.err
}

// Close detaches l from the network, stops its goroutines and waits until
// none of its Handler methods is executing. Safe to call twice.
func (l *Local) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	peers := l.peers
	l.peers = nil
	l.mu.Unlock()
	l.net.unregister(l)
	l.cancel()
	close(l.stop)
	for _, p := range peers {
		close(p.stop)
	}
	l.wg.Wait()
	l.inMu.Lock()
	l.inClosed = true
	l.inMu.Unlock()
	l.inWG.Wait()
	return nil
}

// String identifies the transport in logs.
func (l *Local) String() string { return fmt.Sprintf("local(%d@%s)", l.id, l.addr) }

package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	grpcpeer "google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/kvorum/kvorum/internal/storage"
)

// Handler is the node as the transport sees it.
type Handler interface {
	// HandleRaft receives a batch of messages from a peer, each with the
	// range it belongs to (may be called concurrently from several peers).
	HandleRaft(msgs []storage.RaftMessage)
	// HandleSnapshot receives an incoming MsgSnap of a range and its data
	// stream; it must consume data fully before returning; returning nil
	// means success.
	HandleSnapshot(msg storage.RaftMessage, data io.Reader) error
	// HandleCall serves a unary call. Its error reaches the caller as a
	// gRPC status (see Transport.Call); an error that is (or wraps) a
	// WireError also carries its WireDetail to the caller.
	HandleCall(ctx context.Context, method string, payload []byte) ([]byte, error)
	// ReportUnreachable / ReportSnapshot feed back send failures to Raft.
	// They are never called on the goroutine that called Send. A node is
	// unreachable for every range (the queue and stream to it are shared);
	// a snapshot is of one range.
	ReportUnreachable(to uint64)
	ReportSnapshot(rangeID storage.RangeID, to uint64, ok bool)
}

// SnapshotSource opens the data for an outgoing MsgSnap (the caller
// closes it).
type SnapshotSource func(msg *raftpb.Message) (io.ReadCloser, error)

// Sender is what a node needs from a transport; *Transport and *Local
// implement it.
type Sender interface {
	SetPeer(id uint64, addr string)
	RemovePeer(id uint64)
	Send(msgs []storage.RaftMessage)
	Call(ctx context.Context, to uint64, method string, payload []byte) ([]byte, error)
	CallAddr(ctx context.Context, addr string, method string, payload []byte) ([]byte, error)
	Close() error
}

var (
	_ Sender = (*Transport)(nil)
	_ Sender = (*Local)(nil)
)

var (
	// ErrClosed is returned by a closed transport (and by Serve once the
	// transport is closed, if it was not serving yet).
	ErrClosed = errors.New("transport: closed")
	// ErrUnknownPeer: Call to an id that was never SetPeer (or was removed).
	ErrUnknownPeer = errors.New("transport: unknown peer")
	// ErrNotSent is wrapped by errors of a Call that certainly never
	// reached the peer (unknown peer, link cut by the interceptor, dial
	// refused): the caller may retry without risking a duplicate.
	ErrNotSent = errors.New("transport: call not sent")
)

// Config configures a Transport.
type Config struct {
	NodeID uint64
	// ClusterID is sent in the preface of every framed stream this node
	// opens and in a header of its gRPC calls and snapshots, and those of
	// a node of another cluster are refused (see streamMagic). 0: not
	// known yet (a node about to join: SetClusterID); matches any.
	ClusterID uint64
	Logger    *slog.Logger
	// Registerer may be nil; metrics: messages sent/received/dropped by
	// type, bytes, frames, snapshot transfers, call latency.
	Registerer prometheus.Registerer
	// DialTimeout bounds one connection attempt (default 1s).
	DialTimeout time.Duration
	// Dial opens the TCP connection of every dial to a peer, given its
	// address as set (SetPeer, CallAddr): a host name in it is resolved
	// by Dial at each dial, never cached, so that a peer restarted at a
	// new IP under the same name (a container) is reached again once its
	// old connection breaks. Default: a net.Dialer with DialTimeout.
	// Tests inject a resolver through it.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Interceptor may be nil; fault-injection seam.
	Interceptor Interceptor
	// QueueSize bounds the raft messages waiting for one peer (default
	// 4096); beyond it Send drops.
	QueueSize int
	// SnapshotChunkSize is the size of snapshot data frames (default 1 MiB).
	SnapshotChunkSize int
	// TLS, when set, makes every connection of the peer port, accepted
	// and dialed, mutual TLS with the certificates it holds (tls.go); nil:
	// plain TCP. Nodes of one cluster must agree: a node with TLS refuses
	// plaintext peers and the other way round (ErrPeerTLS).
	TLS *PeerTLS
}

// Transport carries raft messages, snapshots and calls between nodes over
// gRPC. See the package documentation for which goroutine does what.
type Transport struct {
	cfg Config
	// cluster is the cluster id sent and checked (Config.ClusterID, or
	// SetClusterID's); 0: unknown, matches any.
	cluster atomic.Uint64
	h       Handler
	snaps   SnapshotSource
	log     *slog.Logger
	m       *metrics
	srv     *grpc.Server
	rep     *reporter

	// With Config.TLS: the configurations of accepted and dialed
	// connections, the gRPC server that answers plaintext gRPC callers
	// with refusePlaintext, and the rate limits of the log lines about
	// refused connections (one per kind of refusal).
	srvTLS, cliTLS *tls.Config
	refuse         *grpc.Server
	refusedLog     [numRefusals]logLimiter

	ctx    context.Context // canceled by Close
	cancel context.CancelFunc

	mu        sync.RWMutex
	closed    bool
	peers     map[uint64]*peer
	listeners []net.Listener // given to Serve
	wg        sync.WaitGroup // peer loops, snapshot senders, the reporter
	// serverConns counts accepted connections being sniffed or served as
	// framed streams (stream.go); added to under mu while not closed.
	serverConns sync.WaitGroup
}

// New creates a transport. It does not listen: call Serve.
func New(cfg Config, h Handler, snaps SnapshotSource) *Transport {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = time.Second
	}
	if cfg.Dial == nil {
		d := &net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 10 * time.Second}
		cfg.Dial = d.DialContext
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = DefaultQueueSize
	}
	if cfg.SnapshotChunkSize <= 0 {
		cfg.SnapshotChunkSize = 1 << 20
	}
	t := &Transport{
		cfg:   cfg,
		h:     h,
		snaps: snaps,
		log:   cfg.Logger.With("component", "transport"),
		m:     newMetrics(cfg.Registerer),
		rep:   newReporter(),
		peers: map[uint64]*peer{},
	}
	t.cluster.Store(cfg.ClusterID)
	t.ctx, t.cancel = context.WithCancel(context.Background())
	t.srv = grpc.NewServer(
		grpc.ForceServerCodecV2(rawCodec{}),
		grpc.MaxRecvMsgSize(maxWireMsg),
		grpc.MaxSendMsgSize(maxWireMsg),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 10 * time.Second, Timeout: 5 * time.Second}),
		grpc.WaitForHandlers(true),
		grpc.InitialWindowSize(windowSize),
		grpc.InitialConnWindowSize(connWindowSize),
	)
	t.srv.RegisterService(&serviceDesc, t)
	for i := range t.refusedLog {
		t.refusedLog[i].interval = refusedLogInterval
	}
	if cfg.TLS != nil {
		t.srvTLS, t.cliTLS = cfg.TLS.serverConfig(), cfg.TLS.clientConfig()
		t.refuse = grpc.NewServer(grpc.UnknownServiceHandler(func(any, grpc.ServerStream) error {
			return status.Error(codes.Unauthenticated, refusePlaintext)
		}))
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		t.rep.run(t.ctx.Done(), h)
	}()
	return t
}

// Stats returns cumulative counters.
func (t *Transport) Stats() Stats { return t.m.get() }

// Flow control windows, fixed. With gRPC's default (64 KiB, grown by its
// bandwidth-delay estimator) the receiver answers data with estimator
// PINGs, one more frame and wake-up each way on links whose messages are
// a few hundred bytes; a window set here turns the estimator off. A
// stream window holds a whole frame (maxFrameBytes). Measured with
// 'kvorum bench locks --procs 5', three interleaved pairs of runs: own
// key 4.55-5.08 ms against 4.88-6.22 ms average acquire, shared key
// 21.9-23.2 against 22.7-25.7 ms.
const (
	windowSize     = maxFrameBytes
	connWindowSize = 4 * maxFrameBytes
)

// newConn creates a (lazily connecting) client connection to addr.
func (t *Transport) newConn(addr string) (*grpc.ClientConn, error) {
	dialTimeout := t.cfg.DialTimeout
	return grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(t.dialPeer), // TCP, and TLS with Config.TLS
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: minBackoff, Multiplier: 2, Jitter: 0.2, MaxDelay: maxBackoff},
			MinConnectTimeout: dialTimeout,
		}),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}),
		grpc.WithInitialWindowSize(windowSize),
		grpc.WithInitialConnWindowSize(connWindowSize),
		grpc.WithDefaultCallOptions(
			grpc.ForceCodecV2(rawCodec{}),
			grpc.MaxCallRecvMsgSize(maxWireMsg),
			grpc.MaxCallSendMsgSize(maxWireMsg),
		),
	)
}

// SetPeer adds a peer or updates its address; idempotent.
func (t *Transport) SetPeer(id uint64, addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	if p := t.peers[id]; p != nil {
		p.setAddr(addr)
		return
	}
	p := &peer{t: t, id: id, out: newOutbox(t.cfg.QueueSize)}
	p.ctx, p.cancel = context.WithCancel(t.ctx)
	p.setAddr(addr)
	p.calls = newPipe(p)
	t.peers[id] = p
	t.wg.Add(2)
	go p.loop()
	go p.calls.run()
}

// HasPeer reports whether the transport knows an address for peer id.
func (t *Transport) HasPeer(id uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.peers[id] != nil
}

// RemovePeer forgets a peer: queued messages are discarded, its streams and
// any snapshot in flight to it are canceled; pipelined calls still queued
// fail with ErrNotSent, those already written with an ambiguous error. It does not block.
func (t *Transport) RemovePeer(id uint64) {
	t.mu.Lock()
	p := t.peers[id]
	delete(t.peers, id)
	t.mu.Unlock()
	if p != nil {
		p.cancel() // the peer loop closes the connection on its way out
	}
}

// Send routes each message to the queue of its destination (m.Msg.To),
// whatever its range: the messages of every range to one node share its
// queue, stream and frames. It never blocks; a message that cannot be
// queued is dropped (raft tolerates loss) and its destination reported
// unreachable. MsgSnap is sent on its own goroutine. Send keeps references
// to the messages until they are sent: callers must not modify them.
func (t *Transport) Send(msgs []storage.RaftMessage) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed {
		return
	}
	route(msgs, t.cfg.NodeID, t.cfg.Interceptor, t.m, t.rep,
		func(to uint64) (*outbox, bool) {
			p := t.peers[to]
			if p == nil {
				return nil, false
			}
			return p.out, true
		},
		func(to uint64, m storage.RaftMessage, delay time.Duration) {
			t.wg.Add(1)
			go t.sendSnapshot(t.peers[to], m, delay)
		})
}

func (t *Transport) peer(id uint64) (*peer, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed {
		return nil, ErrClosed
	}
	if p := t.peers[id]; p != nil {
		return p, nil
	}
	return nil, fmt.Errorf("%w %d", ErrUnknownPeer, id)
}

// callPeer is the peer a call to node to goes to, once the Interceptor
// lets it through; an error wraps ErrNotSent.
func (t *Transport) callPeer(to uint64) (*peer, error) {
	p, err := t.peer(to)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	if ic := t.cfg.Interceptor; ic != nil {
		if err := ic.Call(t.cfg.NodeID, to); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNotSent, err)
		}
	}
	return p, nil
}

// Call invokes method on peer `to`. A failure of the remote handler comes
// back as a gRPC status error carrying its message (status.Code tells it
// apart from transport failures such as codes.Unavailable).
func (t *Transport) Call(ctx context.Context, to uint64, method string, payload []byte) ([]byte, error) {
	p, err := t.callPeer(to)
	if err != nil {
		return nil, err
	}
	conn, err := p.getConn()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	return t.invoke(ctx, conn, method, payload)
}

// CallAddr is Call to an address rather than a peer id (to join a cluster
// before having a peer id for its members). If addr is a known peer's
// address, that peer's connection is used.
func (t *Transport) CallAddr(ctx context.Context, addr string, method string, payload []byte) ([]byte, error) {
	t.mu.RLock()
	if t.closed {
		t.mu.RUnlock()
		return nil, ErrClosed
	}
	var known *peer
	for _, p := range t.peers {
		if p.getAddr() == addr {
			known = p
			break
		}
	}
	t.mu.RUnlock()
	var to uint64
	if known != nil {
		to = known.id
	}
	if ic := t.cfg.Interceptor; ic != nil {
		if err := ic.Call(t.cfg.NodeID, to); err != nil {
			return nil, err
		}
	}
	if known != nil {
		if conn, err := known.getConn(); err == nil {
			return t.invoke(ctx, conn, method, payload)
		}
	}
	conn, err := t.newConn(addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	// A transport closing meanwhile cancels the call.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(t.ctx, cancel)
	defer stop()
	return t.invoke(ctx, conn, method, payload)
}

func (t *Transport) invoke(ctx context.Context, conn *grpc.ClientConn, method string, payload []byte) ([]byte, error) {
	start := time.Now()
	var resp frame
	err := conn.Invoke(t.withCluster(ctx), methodCall, &frame{b: encodeCall(t.cfg.NodeID, method, payload)}, &resp)
	result := "ok"
	if err != nil {
		result = "error"
	}
	t.m.callDur.WithLabelValues(method, result).Observe(time.Since(start).Seconds())
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			// The caller's own deadline or cancellation wins.
			return nil, status.FromContextError(cerr).Err()
		}
		if st, ok := status.FromError(err); ok && (st.Code() == codes.Unavailable && statusIsTLSMismatch(st.Message()) ||
			st.Code() == codes.Unauthenticated && st.Message() == refusePlaintext) {
			// Refused by the peer's TLS or by ours before any call was
			// served.
			if strings.Contains(st.Message(), tlsMismatchHint) { // the dialer's error says it
				return nil, fmt.Errorf("%w: %w: %w", ErrNotSent, ErrPeerTLS, err)
			}
			return nil, fmt.Errorf("%w: %w: %w (%s)", ErrNotSent, ErrPeerTLS, err, tlsMismatchHint)
		}
		if st, ok := status.FromError(err); ok && st.Code() == codes.Unavailable &&
			(strings.Contains(st.Message(), "while dialing") || strings.Contains(st.Message(), "connection refused")) {
			// gRPC fails an RPC this way only before it is written to a
			// connection.
			return nil, fmt.Errorf("%w: %w", ErrNotSent, err)
		}
		return nil, err
	}
	return resp.b, nil
}

// Close stops serving, cancels everything in flight and waits until no
// goroutine of the transport runs and no Handler method is executing.
// Handler methods must not call Close. Safe to call twice.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.peers = nil
	listeners := t.listeners
	t.mu.Unlock()
	t.cancel() // peer loops, streams both ways, snapshot sends, the reporter
	for _, l := range listeners {
		_ = l.Close()
	}
	t.srv.Stop() // gRPC's connections; waits for its handlers to return
	if t.refuse != nil {
		t.refuse.Stop()
	}
	t.serverConns.Wait() // framed stream servers and their handlers
	t.wg.Wait()          // peer loops close their connections on the way out
	return nil
}

// ---- server side ----

func (t *Transport) checkTo(to uint64) error {
	if t.cfg.NodeID != 0 && to != t.cfg.NodeID {
		return status.Errorf(codes.FailedPrecondition, "transport: message for node %d reached node %d", to, t.cfg.NodeID)
	}
	return nil
}

// serveRaft runs on the goroutine of an incoming Raft stream (one per
// sending peer): it hands every frame to HandleRaft in order.
func (t *Transport) serveRaft(st frameStream) error {
	err := readFrames(t, st, "raft", decodeBatch, func(size int, msgs []storage.RaftMessage) {
		t.m.bytesRecv.Add(float64(size))
		t.m.receivedMsgs(msgs)
		t.h.HandleRaft(msgs)
	})
	if err != nil {
		return err
	}
	return st.SendMsg(&frame{})
}

// readFrames receives frames from st until the peer closes its side (nil)
// or the stream fails (its error): each is decoded with decode, checked
// to be addressed to this node and handed to handle with its size. A
// frame that does not decode or is addressed to another node ends the
// stream with an error status (kind names the stream in the log).
func readFrames[T any](t *Transport, st frameStream, kind string,
	decode func([]byte) (from, to uint64, v T, err error), handle func(size int, v T)) error {
	for {
		var f frame
		if err := st.RecvMsg(&f); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
		from, to, v, err := decode(f.b)
		if err != nil {
			t.log.Warn("bad "+kind+" frame", "err", err)
			return status.Error(codes.InvalidArgument, err.Error())
		}
		if err := t.checkTo(to); err != nil {
			t.log.Warn(kind+" frame for another node", "from", from, "to", to)
			return err
		}
		handle(len(f.b), v)
	}
}

// SetClusterID sets the cluster id of a transport created without one (a
// node that learns it when it joins); it never changes a known id.
func (t *Transport) SetClusterID(id uint64) {
	t.cluster.CompareAndSwap(0, id)
}

// clusterHeader is the gRPC metadata key that carries the caller's
// cluster id (hex) on snapshot streams and unary calls, as the framed
// streams' preface does (see streamMagic).
const clusterHeader = "kvorum-cluster"

// withCluster adds this node's cluster id to an outgoing gRPC call.
func (t *Transport) withCluster(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, clusterHeader, strconv.FormatUint(t.cluster.Load(), 16))
}

// checkCluster refuses a gRPC call from a node of another cluster (no
// header, from an older node, counts as unknown: it matches any).
func (t *Transport) checkCluster(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	v := md.Get(clusterHeader)
	if len(v) == 0 {
		return nil
	}
	from, err := strconv.ParseUint(v[0], 16, 64)
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "transport: bad %s header %q", clusterHeader, v[0])
	}
	remote := ""
	if p, ok := grpcpeer.FromContext(ctx); ok {
		remote = p.Addr.String()
	}
	if t.foreign(from, "call", remote) {
		return status.Errorf(codes.PermissionDenied, "transport: caller belongs to cluster %016x, this node to %016x", from, t.cluster.Load())
	}
	return nil
}

// serveSnapshot runs on a gRPC server goroutine: it hands the MsgSnap and a
// reader over the following data frames to HandleSnapshot.
func (t *Transport) serveSnapshot(st grpc.ServerStream) error {
	if err := t.checkCluster(st.Context()); err != nil {
		return err
	}
	var f frame
	if err := st.RecvMsg(&f); err != nil {
		return err
	}
	from, to, m, err := decodeSnapHeader(f.b)
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	if err := t.checkTo(to); err != nil {
		return err
	}
	t.m.receivedMsgs([]storage.RaftMessage{m})
	r := &snapReader{st: st}
	err = t.h.HandleSnapshot(m, r)
	if err == nil {
		// The handler should have read everything; make sure the stream
		// ended cleanly (a sender that gave up is an error, not a success).
		if _, derr := io.Copy(io.Discard, r); derr != nil {
			err = derr
		}
	}
	t.m.snapBytes.WithLabelValues("received").Add(float64(r.n))
	t.m.snapshotDone("received", err == nil)
	if err != nil {
		t.log.Warn("incoming snapshot failed", "from", from, "range", uint64(m.Range), "index", m.Msg.GetSnapshot().GetMetadata().GetIndex(), "err", err)
		if _, ok := status.FromError(err); ok {
			return err
		}
		return status.Error(codes.Aborted, err.Error())
	}
	return st.SendMsg(&frame{})
}

// snapReader reads the data frames of a Snapshot stream. It returns io.EOF
// only if the sender finished cleanly.
type snapReader struct {
	st  grpc.ServerStream
	buf []byte
	err error
	n   int64
}

func (r *snapReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		var f frame
		if err := r.st.RecvMsg(&f); err != nil {
			if err != io.EOF {
				err = fmt.Errorf("transport: snapshot stream: %w", err)
			}
			r.err = err
			continue
		}
		r.buf = f.b
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	r.n += int64(n)
	return n, nil
}

// serveCall runs on a gRPC server goroutine.
func (t *Transport) serveCall(ctx context.Context, req []byte) ([]byte, error) {
	if err := t.checkCluster(ctx); err != nil {
		return nil, err
	}
	_, method, payload, err := decodeCall(req)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	resp, err := t.h.HandleCall(ctx, method, payload)
	if err != nil {
		return nil, toStatus(err)
	}
	return resp, nil
}

// WireError is a Handler error that carries an encoding of itself to the
// caller: HandleCall returns it (or an error wrapping it), the bytes of
// WireDetail travel with the call's gRPC status (as a status detail, a
// google.protobuf.BytesValue), and the caller reads them back with
// WireDetail. The transport does not interpret them: the handler's package
// defines the encoding, and both ends run that package. A peer that does
// not know about details ignores them and still sees the error's text.
type WireError interface {
	error
	WireDetail() []byte
}

// WireDetail returns the WireDetail of the remote handler error that a Call
// or CallAddr failed with, and false when err carries none (a transport
// failure, a context error of the caller, a handler error that is not a
// WireError, or a peer that sends no details).
func WireDetail(err error) ([]byte, bool) {
	st, ok := status.FromError(err)
	if !ok || st == nil {
		return nil, false
	}
	for _, d := range st.Details() {
		if b, ok := d.(*wrapperspb.BytesValue); ok {
			return b.GetValue(), true
		}
	}
	return nil, false
}

// toStatus turns a handler's error into the status the caller receives:
// status errors travel as they are, context errors with their codes,
// anything else as codes.Unknown with the error's text. A WireError's
// detail rides along in every case.
func toStatus(err error) error {
	st, isStatus := status.FromError(err)
	if !isStatus {
		code := codes.Unknown
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			code = status.FromContextError(err).Code()
		}
		st = status.New(code, err.Error())
	}
	var we WireError
	if errors.As(err, &we) {
		if withDetail, derr := st.WithDetails(wrapperspb.Bytes(we.WireDetail())); derr == nil {
			return withDetail.Err()
		}
	}
	if isStatus {
		return err
	}
	return st.Err()
}

// route is the body of Send shared by Transport and Local: a message
// without a range is dropped (no frame could say where it goes), unknown
// peers and interceptor drops are reported (and failed snapshots reported failed),
// MsgSnap goes to its own sender, everything else into the peer's outbox
// (dropped, and the peer reported unreachable, when it is full).
func route(msgs []storage.RaftMessage, from uint64, ic Interceptor, mt *metrics, rep *reporter,
	outboxOf func(to uint64) (*outbox, bool), sendSnap func(to uint64, m storage.RaftMessage, delay time.Duration)) {
	now := time.Now()
	for _, rm := range msgs {
		m := rm.Msg
		to := m.GetTo()
		isSnap := m.GetType() == raftpb.MsgSnap
		failSnap := func() {
			if isSnap {
				mt.snapshotDone("sent", false)
				rep.snapshot(rm.Range, to, false)
			}
		}
		if rm.Range == 0 {
			mt.drop(m, dropNoRange)
			failSnap()
			continue
		}
		out, ok := outboxOf(to)
		if !ok {
			mt.drop(m, dropUnknownPeer)
			rep.unreachable(to)
			failSnap()
			continue
		}
		var delay time.Duration
		if ic != nil {
			var drop bool
			if drop, delay = ic.Outgoing(from, to, m); drop {
				mt.drop(m, dropInterceptor)
				failSnap()
				continue
			}
		}
		if isSnap {
			sendSnap(to, rm, delay)
			continue
		}
		var due time.Time
		if delay > 0 {
			due = now.Add(delay)
		}
		if !out.push(rm, due) {
			mt.drop(m, dropQueueFull)
			rep.unreachable(to)
		}
		if d, ok := ic.(Duplicator); ok {
			if dup, delay := d.Duplicate(from, to, m); dup {
				// Messages are immutable once sent; the copy may share m.
				out.push(rm, now.Add(delay))
			}
		}
	}
}

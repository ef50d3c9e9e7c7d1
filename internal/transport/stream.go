package transport

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Framed streams: the Raft and Calls streams, the two that carry every
// write, run on plain TCP connections of their own rather than on gRPC.
// Under load, gRPC cost about 70 µs of CPU per message on each side (HTTP/2
// framing, flow-control window updates, a hand-off to its writer goroutine
// and another from its reader goroutine), and every replicated write
// crosses a stream at least four times; a framed connection costs one
// write system call per frame on the sending side and one read on the
// receiving side, on the goroutines that produce and consume the frames.
// Snapshots and unary calls (rare: joins, membership changes) stay on gRPC.
//
// Both share the peer port: a framed connection opens with streamMagic and
// a kind byte, which an HTTP/2 client preface ("PRI * HTTP/2.0...") never
// does, so the accept loop (Transport.Serve) reads the first bytes of each
// connection and hands it either to a framed stream server or to gRPC.
// A hand-written sniff rather than a connection multiplexer library: it is
// one comparison of four bytes, and gRPC sees a plain net.Listener.
//
// On the connection, after the preface, each frame is a 4-byte big-endian
// length and the frame's bytes (the layouts of wire.go). The client ends a
// stream by closing its writing side (the server then answers what it was
// asked and closes); any error closes the connection: the other side sees
// it as a failed stream, as it saw a gRPC status before.
//
// The preface is streamMagic, the kind byte and the sender's cluster id
// (8 bytes, big-endian; 0 when unknown, as on a node that has not joined
// yet, or joined through an older member). A
// server whose cluster id is known and differs from a known sender's
// closes the stream without answering: node ids repeat from cluster to
// cluster and addresses are reused (a restarted container, a port freed
// by a stopped node), and a node of another cluster that got Raft
// messages meant for a node with its id would answer them, acknowledge
// appends it does not keep and vote. (Found when a test cluster's nodes
// replicated to a node of another test process that had taken the peer
// port of a node they had stopped: writes acknowledged with its help
// were missing afterwards.) Snapshot streams and unary calls (gRPC) carry
// the same id in a header (clusterHeader) and are refused alike.
const streamMagic = "KVR\x02"

// prefaceLen is the length of a framed stream's preface: streamMagic, the
// kind byte and the cluster id.
const prefaceLen = len(streamMagic) + 1 + 8

// Kinds of framed stream (the byte after streamMagic).
const (
	kindRaft  = 'R'
	kindCalls = 'C'
)

// streamWriteTimeout bounds one frame write: a peer that accepts no data
// for this long (gone without a reset, or stuck) fails the stream, which
// is then reopened; gRPC's keepalive (10 s, 5 s timeout) did that before.
const streamWriteTimeout = 10 * time.Second

// sniffTimeout bounds how long an accepted connection may take to send its
// first bytes.
const sniffTimeout = 10 * time.Second

// frameStream is what the stream code needs from a stream: gRPC's streams
// and connStream both provide it.
type frameStream interface {
	SendMsg(m any) error
	RecvMsg(m any) error
	Context() context.Context
}

// connStream is one framed stream on a TCP connection. SendMsg and RecvMsg
// may run concurrently with each other, but neither with itself.
type connStream struct {
	c      net.Conn
	r      *bufio.Reader
	ctx    context.Context
	cancel context.CancelFunc // closes c
	hdr    [4]byte            // SendMsg's length prefix
	vec    [2][]byte          // SendMsg's writev: hdr and the frame
	bufs   net.Buffers        // over vec (WriteTo consumes it)
	rhdr   [4]byte            // RecvMsg's
	// reuse: RecvMsg reads every frame into rbuf, so a frame is valid only
	// until the next RecvMsg (the Raft stream's frames are decoded into
	// copies at once; a Calls frame's payloads alias it, so not there).
	reuse bool
	rbuf  []byte
	// single: write the length prefix and the frame with one Write (a TLS
	// connection would make them two records), through wbuf.
	single bool
	wbuf   []byte
}

// newConnStream makes a stream of c that ends (c closed) when ctx is
// canceled or its cancel function is called.
func newConnStream(ctx context.Context, c net.Conn) *connStream {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	_, isTLS := c.(*tlsConn)
	return &connStream{
		c:      c,
		single: isTLS,
		r:      bufio.NewReaderSize(c, 64<<10),
		ctx:    ctx,
		cancel: func() {
			cancel()
			if stop() { // AfterFunc had not run: close here, synchronously
				_ = c.Close()
			}
		},
	}
}

func (s *connStream) Context() context.Context { return s.ctx }

// SendMsg writes one frame (m is a *frame) in one system call.
func (s *connStream) SendMsg(m any) error {
	f := m.(*frame)
	if len(f.b) > maxWireMsg {
		return fmt.Errorf("transport: frame of %d bytes exceeds %d", len(f.b), maxWireMsg)
	}
	binary.BigEndian.PutUint32(s.hdr[:], uint32(len(f.b)))
	if err := s.c.SetWriteDeadline(time.Now().Add(streamWriteTimeout)); err != nil {
		return err
	}
	if s.single {
		s.wbuf = append(append(s.wbuf[:0], s.hdr[:]...), f.b...)
		_, err := s.c.Write(s.wbuf)
		if cap(s.wbuf) > maxReusedFrame {
			s.wbuf = nil
		}
		return err
	}
	s.vec = [2][]byte{s.hdr[:], f.b}
	s.bufs = s.vec[:]
	_, err := s.bufs.WriteTo(s.c)
	s.vec[1] = nil // the frame is the caller's
	return err
}

// RecvMsg reads one frame into m (a *frame). It returns io.EOF when the
// other side closed its writing side between frames.
func (s *connStream) RecvMsg(m any) error {
	f := m.(*frame)
	if _, err := io.ReadFull(s.r, s.rhdr[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return fmt.Errorf("transport: stream ended inside a frame header")
		}
		return err
	}
	n := binary.BigEndian.Uint32(s.rhdr[:])
	if n > maxWireMsg {
		return fmt.Errorf("%w: frame of %d bytes", errBadFrame, n)
	}
	var b []byte
	if s.reuse && n <= maxReusedFrame {
		if uint32(cap(s.rbuf)) < n {
			s.rbuf = make([]byte, n)
		}
		b = s.rbuf[:n]
	} else {
		b = make([]byte, n)
	}
	if _, err := io.ReadFull(s.r, b); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("transport: stream ended inside a frame: %w", err)
	}
	f.b = b
	return nil
}

// maxReusedFrame: a larger frame (a burst of big entries) gets a buffer
// of its own, not kept.
const maxReusedFrame = 1 << 20

// CloseSend closes the writing side: the other end reads io.EOF.
func (s *connStream) CloseSend() error {
	if cw, ok := s.c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return s.c.Close()
}

// dialPeer opens a connection to a peer's port: TCP, and with Config.TLS
// the TLS handshake too (bounded by the dial timeout). A handshake that
// the two nodes' TLS settings or certificates make fail wraps ErrPeerTLS.
// It dials the framed streams and is gRPC's dialer (whose passthrough
// resolver hands it the address as given): every dial goes through
// Config.Dial, which resolves a host name anew.
func (t *Transport) dialPeer(ctx context.Context, addr string) (net.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, t.cfg.DialTimeout)
	defer cancel()
	c, err := t.cfg.Dial(dctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	if t.cliTLS == nil {
		return c, nil
	}
	tc := tls.Client(c, t.cliTLS)
	hctx, cancel := context.WithTimeout(ctx, t.cfg.DialTimeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		_ = c.Close()
		return nil, tlsDialError(addr, err)
	}
	// The server's verdict on our certificate: with TLS 1.3 the handshake
	// returns before the server checked it, and a refusal would only come
	// with the first read, after gRPC or the stream had written (which
	// the closed connection then fails with a bare EPIPE): wait for
	// tlsAccepted, or the alert, before anything is written.
	if dl, ok := hctx.Deadline(); ok {
		_ = c.SetReadDeadline(dl)
	}
	if err := awaitAccepted(addr, tc, c); err != nil {
		return nil, err
	}
	_ = c.SetReadDeadline(time.Time{})
	return &tlsConn{Conn: tc, raw: c}, nil
}

// awaitAccepted reads the node's verdict on our certificate from tc, the
// TLS side of raw: tlsAccepted, or else raw is closed and the dial error
// returned.
func awaitAccepted(addr string, tc *tls.Conn, raw net.Conn) error {
	var ok [1]byte
	if _, err := io.ReadFull(tc, ok[:]); err != nil || ok[0] != tlsAccepted {
		_ = raw.Close()
		if err == nil {
			err = fmt.Errorf("%w: bad answer %q to the TLS handshake", errBadFrame, ok[:])
		}
		return tlsDialError(addr, err)
	}
	return nil
}

// tlsAccepted is the byte a node with peer TLS writes first on a
// connection whose handshake succeeded: it tells the dialing node that
// its certificate was accepted.
const tlsAccepted = 0x06

// tlsDialError is the error of a TLS connection to addr that failed in or
// right after the handshake.
func tlsDialError(addr string, err error) error {
	if isTLSMismatch(err) {
		return fmt.Errorf("%w: TLS with %s: %w (%s)", ErrPeerTLS, addr, err, tlsMismatchHint)
	}
	return fmt.Errorf("transport: TLS with %s: %w", addr, err)
}

// dialStream opens a framed stream of kind to addr; canceling ctx or the
// stream's cancel closes it.
func (t *Transport) dialStream(ctx context.Context, addr string, kind byte) (*connStream, error) {
	c, err := t.dialPeer(ctx, addr)
	if err != nil {
		return nil, err
	}
	// The preface, then the server's answer (streamMagic back) within the
	// dial timeout: a peer that accepts connections but does not serve
	// them (stuck, or not kvorum) fails here, before anything is sent.
	_ = c.SetDeadline(time.Now().Add(t.cfg.DialTimeout))
	var ack [len(streamMagic)]byte
	preface := binary.BigEndian.AppendUint64(append([]byte(streamMagic), kind), t.cluster.Load())
	if _, err := c.Write(preface); err != nil {
		_ = c.Close()
		return nil, err
	}
	if _, err := io.ReadFull(c, ack[:]); err != nil || string(ack[:]) != streamMagic {
		_ = c.Close()
		switch {
		case err == nil && string(ack[:]) == tlsRequiredAnswer:
			return nil, fmt.Errorf("%w: opening stream to %s: %w", ErrPeerTLS, addr, errTLSRequired)
		case err == nil:
			err = fmt.Errorf("%w: bad stream answer %q", errBadFrame, ack[:])
		case t.cliTLS != nil && isTLSMismatch(err):
			// (dialPeer waited for the server's verdict: not expected.)
			return nil, tlsDialError(addr, err)
		}
		return nil, fmt.Errorf("transport: opening stream to %s: %w", addr, err)
	}
	_ = c.SetDeadline(time.Time{})
	return newConnStream(ctx, c), nil
}

// Serve accepts peer connections on l until Close: framed streams are
// served here, everything else by the gRPC server. It returns nil after
// Close, or ErrClosed if the transport was already closed.
func (t *Transport) Serve(l net.Listener) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		_ = l.Close()
		return ErrClosed
	}
	t.listeners = append(t.listeners, l)
	t.mu.Unlock()
	gl := &grpcListener{addr: l.Addr(), conns: make(chan net.Conn), done: make(chan struct{})}
	grpcDone := make(chan error, 1)
	go func() { grpcDone <- t.srv.Serve(gl) }()
	// With peer TLS, plaintext gRPC callers get a refusal they can read.
	var rl *grpcListener
	refuseDone := make(chan error, 1)
	if t.refuse != nil {
		rl = &grpcListener{addr: l.Addr(), conns: make(chan net.Conn), done: make(chan struct{})}
		go func() { refuseDone <- t.refuse.Serve(rl) }()
	} else {
		refuseDone <- nil
	}
	var err error
	for {
		var c net.Conn
		c, err = l.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			break
		}
		if !t.track(c) {
			_ = c.Close()
			break
		}
		go t.sniff(c, gl, rl)
	}
	gl.Close()
	if rl != nil {
		rl.Close()
	}
	t.mu.RLock()
	closed := t.closed
	t.mu.RUnlock()
	<-grpcDone
	<-refuseDone
	if closed {
		return nil
	}
	return err
}

// track counts c as an open server-side connection (Close waits for its
// goroutine); false once the transport is closed.
func (t *Transport) track(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.serverConns.Add(1)
	return true
}

// sniff reads the first bytes of an accepted connection and serves it as a
// framed stream, or hands it to gRPC. With peer TLS it first completes
// the TLS handshake (the bytes classified are then the first ones inside
// TLS) and refuses plaintext peers (rl: where plaintext gRPC callers are
// answered); without, it refuses TLS peers.
func (t *Transport) sniff(c net.Conn, gl, rl *grpcListener) {
	defer t.serverConns.Done()
	// Close closes the connection until it is handed over (gRPC's Stop
	// closes those it serves).
	raw := c
	stop := context.AfterFunc(t.ctx, func() { _ = raw.Close() })
	defer stop()
	_ = c.SetDeadline(time.Now().Add(sniffTimeout)) // the TLS handshake writes too
	var head [prefaceLen]byte
	n, err := io.ReadFull(c, head[:len(streamMagic)])
	if err != nil {
		_ = c.Close()
		return
	}
	switch {
	case t.srvTLS != nil && head[0] != tlsHandshakeRecord:
		t.refusePlaintext(c, head[:n], rl, stop)
		return
	case t.srvTLS != nil:
		tc := tls.Server(&prefixConn{Conn: c, r: io.MultiReader(bytes.NewReader(head[:n]), c)}, t.srvTLS)
		if err := tc.HandshakeContext(t.ctx); err != nil {
			_ = c.Close()
			if t.ctx.Err() == nil {
				t.refused(refusedHandshake, "refused a peer connection: TLS handshake failed (a node without a certificate of this cluster's CA?)",
					"remote", c.RemoteAddr().String(), "err", err)
			}
			return
		}
		c = &tlsConn{Conn: tc, raw: raw}
		if _, err := c.Write([]byte{tlsAccepted}); err != nil {
			_ = c.Close()
			return
		}
		if n, err = io.ReadFull(c, head[:len(streamMagic)]); err != nil {
			_ = c.Close()
			return
		}
	case head[0] == tlsHandshakeRecord:
		t.refused(refusedTLS, "refused a TLS peer connection: this node has no peer TLS configured (started without --peer-cert-file, --peer-key-file and --peer-trusted-ca-file, while the peer has them)",
			"remote", c.RemoteAddr().String())
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = c.Write(alertHandshakeFailure)
		_ = c.Close()
		return
	}
	if string(head[:n]) != streamMagic {
		_ = c.SetDeadline(time.Time{})
		if !stop() {
			return // closed meanwhile
		}
		pc := &prefixConn{Conn: c, r: io.MultiReader(bytes.NewReader(head[:n]), c)}
		select {
		case gl.conns <- pc:
		case <-gl.done:
			_ = c.Close()
		}
		return
	}
	if _, err := io.ReadFull(c, head[n:]); err != nil {
		_ = c.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	st := newConnStream(t.ctx, c)
	defer st.cancel()
	kind := head[n]
	if kind != kindRaft && kind != kindCalls {
		t.log.Warn("peer stream of unknown kind", "remote", c.RemoteAddr().String(), "kind", kind)
		return
	}
	if t.foreign(binary.BigEndian.Uint64(head[n+1:]), "stream", c.RemoteAddr().String()) {
		return
	}
	_ = c.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	if _, err := c.Write([]byte(streamMagic)); err != nil {
		return
	}
	if kind == kindRaft {
		st.reuse = true // decodeBatch copies what it keeps
		err = t.serveRaft(st)
	} else {
		err = t.serveCalls(st)
	}
	if err != nil && t.ctx.Err() == nil {
		t.log.Debug("peer stream ended", "remote", c.RemoteAddr().String(), "err", err)
	}
}

// Kinds of refused connection (a log line of each at most every
// refusedLogInterval, and the reason label of
// kvorum_transport_tls_refused_total).
const (
	refusedHandshake = iota // the TLS handshake failed
	refusedPlaintext        // a plaintext peer on a TLS port
	refusedTLS              // a TLS peer on a plaintext port
	numRefusals
)

var refusalReasons = [numRefusals]string{"handshake", "plaintext", "tls_unexpected"}

// refused counts a refused connection and logs it, rate-limited.
func (t *Transport) refused(kind int, msg string, args ...any) {
	t.m.tlsRefused.WithLabelValues(refusalReasons[kind]).Inc()
	if ok, held := t.refusedLog[kind].allow(); ok {
		if held > 0 {
			args = append(args, "similar_refusals_not_logged", held)
		}
		t.log.Warn(msg, args...)
	}
}

// refusePlaintext answers a plaintext connection to a node with peer TLS:
// a framed stream gets tlsRequiredAnswer, a gRPC client (HTTP/2 preface)
// the refusal server's status, anything else a closed connection.
func (t *Transport) refusePlaintext(c net.Conn, head []byte, rl *grpcListener, stop func() bool) {
	t.refused(refusedPlaintext, "refused a plaintext peer connection: this node requires mutual TLS on its peer port (is the peer started without --peer-cert-file, --peer-key-file and --peer-trusted-ca-file?)",
		"remote", c.RemoteAddr().String())
	switch {
	case string(head) == streamMagic:
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = c.Write([]byte(tlsRequiredAnswer))
	case string(head) == http2Preface[:len(head)] && rl != nil:
		_ = c.SetDeadline(time.Now().Add(sniffTimeout)) // the refusal takes no longer
		if !stop() {
			return
		}
		pc := &prefixConn{Conn: c, r: io.MultiReader(bytes.NewReader(head), c)}
		select {
		case rl.conns <- pc:
		case <-rl.done:
			_ = c.Close()
		}
		return
	}
	_ = c.Close()
}

// http2Preface starts every HTTP/2 (gRPC) client connection.
const http2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// sameCluster reports whether a stream from a node of cluster from may be
// served by one of cluster ours (0: not known, which matches any).
func sameCluster(from, ours uint64) bool {
	return from == 0 || ours == 0 || from == ours
}

// foreign reports whether a stream or call (what) from a node of cluster
// from must be refused, counting and logging it if so.
func (t *Transport) foreign(from uint64, what, remote string) bool {
	ours := t.cluster.Load()
	if sameCluster(from, ours) {
		return false
	}
	t.m.foreignStreams.Inc()
	t.log.Warn("refused a peer "+what+" from another cluster (is an old address of this cluster's nodes reused?)",
		"remote", remote, "their_cluster", fmt.Sprintf("%016x", from), "our_cluster", fmt.Sprintf("%016x", ours))
	return true
}

// prefixConn is a connection whose first bytes were already read: Read
// returns them first.
type prefixConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// grpcListener is the listener the gRPC server accepts from: the
// connections sniff did not keep.
type grpcListener struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *grpcListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *grpcListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *grpcListener) Addr() net.Addr { return l.addr }

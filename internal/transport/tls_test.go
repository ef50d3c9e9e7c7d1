package transport

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/devca"
	"github.com/kvorum/kvorum/internal/testport"
)

// ---- fixtures ----

func newCA(t testing.TB, name string) *devca.CA {
	t.Helper()
	ca, err := devca.New(name)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func issue(t testing.TB, ca *devca.CA, name string) *devca.Issued {
	t.Helper()
	c, err := ca.Issue(name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// writeTLS writes cert (with ca's certificate as the CA file) into dir
// and returns the files.
func writeTLS(t testing.TB, dir, name string, ca *devca.CA, cert *devca.Issued) TLSFiles {
	t.Helper()
	f, err := ca.WriteFiles(dir, name, cert)
	if err != nil {
		t.Fatal(err)
	}
	return TLSFiles{CertFile: f.Cert, KeyFile: f.Key, CAFile: f.CA}
}

// newPeerTLS loads files, looking at them again every 10 ms.
func newPeerTLS(t testing.TB, files TLSFiles, log *slog.Logger) *PeerTLS {
	t.Helper()
	p, err := NewPeerTLS(files, log)
	if err != nil {
		t.Fatal(err)
	}
	p.interval = 10 * time.Millisecond
	return p
}

// tlsNode starts a transport for id with a fresh certificate of ca; its
// files are in their own directory.
func tlsNode(t *testing.T, id uint64, ca *devca.CA, cfg Config, snaps SnapshotSource) (*node, TLSFiles) {
	t.Helper()
	files := writeTLS(t, t.TempDir(), "node", ca, issue(t, ca, "node"))
	cfg.TLS = newPeerTLS(t, files, cfg.Logger)
	return startNode(t, id, testAddr(t), newRecorder(), cfg, snaps), files
}

func testAddr(t *testing.T) string {
	t.Helper()
	addr, err := testport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// logBuf is a concurrency-safe log sink.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

func (l *logBuf) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// servedSerial connects to a node's peer port as a peer presenting client
// (nil: no certificate) and trusting roots (ProbeTLS), opens a framed
// stream (answered only once the node accepted the certificate) and
// returns the serial number of the certificate the node presented.
func servedSerial(addr string, client *devca.Issued, roots *x509.CertPool) (*big.Int, error) {
	var cert *tls.Certificate
	if client != nil {
		pair, err := client.TLS()
		if err != nil {
			return nil, err
		}
		cert = &pair
	}
	c, err := ProbeTLS(addr, cert, roots, time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if _, err := c.Write(append([]byte(streamMagic), kindRaft, 0, 0, 0, 0, 0, 0, 0, 0)); err != nil {
		return nil, err
	}
	var ack [len(streamMagic)]byte
	if _, err := io.ReadFull(c, ack[:]); err != nil || string(ack[:]) != streamMagic {
		return nil, fmt.Errorf("answers %q, %v", ack[:], err)
	}
	return c.ConnectionState().PeerCertificates[0].SerialNumber, nil
}

// clientSerials runs a TLS server on a testport address that records the
// serial number of every client certificate it is shown (any CA) and
// closes the connection after the handshake.
func clientSerials(t *testing.T, serverCert *devca.Issued) (addr string, seen func() []*big.Int) {
	t.Helper()
	pair, err := tls.X509KeyPair(serverCert.CertPEM, serverCert.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var serials []*big.Int
	l := listen(t, testAddr(t))
	tl := tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAnyClientCert})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := tl.Accept()
			if err != nil {
				return
			}
			tc := c.(*tls.Conn)
			_ = tc.SetDeadline(time.Now().Add(time.Second))
			if tc.Handshake() == nil {
				mu.Lock()
				serials = append(serials, tc.ConnectionState().PeerCertificates[0].SerialNumber)
				mu.Unlock()
			}
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = l.Close(); <-done })
	return l.Addr().String(), func() []*big.Int {
		mu.Lock()
		defer mu.Unlock()
		return append([]*big.Int(nil), serials...)
	}
}

// ---- tests ----

// With peer TLS every kind of traffic works: Raft streams both ways,
// unary calls, pipelined calls, snapshots; the fault seam still cuts.
func TestTLSPeersTalk(t *testing.T) {
	checkLeaks(t)
	ca := newCA(t, "cluster")
	p := NewPartitioner()
	data := bytes.Repeat([]byte("snapshot data "), 200000) // ~2.8 MB: several chunks
	a, _ := tlsNode(t, 1, ca, Config{Interceptor: p}, bytesSource(data))
	b, _ := tlsNode(t, 2, ca, Config{Interceptor: p}, bytesSource(data))
	a.t.SetPeer(2, b.addr)
	b.t.SetPeer(1, a.addr)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()

	a.t.Send(ofRange1(everyKind(1, 2)...))
	b.t.Send(ofRange1(heartbeat(2, 1)))
	waitFor(t, "raft messages both ways", func() bool { return b.rec.count() == len(everyKind(1, 2)) && a.rec.count() == 1 })
	sameMessages(t, b.rec.received(), everyKind(1, 2))

	if out, err := a.t.Call(ctx, 2, "ping", []byte("x")); err != nil || string(out) != "ping:x" {
		t.Fatalf("unary call: %q, %v", out, err)
	}
	if out, err := b.t.CallAddr(ctx, a.addr, "members", nil); err != nil || string(out) != "members:" {
		t.Fatalf("CallAddr: %q, %v", out, err)
	}
	if out, err := a.t.CallPipelined(ctx, 2, "exec", []byte("SET k v")); err != nil || string(out) != "exec:SET k v" {
		t.Fatalf("pipelined call: %q, %v", out, err)
	}
	a.t.Send(ofRange1(snapMsg(1, 2)))
	if rep := waitSnapReport(t, a.rec); rep != (snapReport{1, 2, true}) {
		t.Fatalf("snapshot report %+v", rep)
	}
	if _, datas := b.rec.receivedSnaps(); len(datas) != 1 || !bytes.Equal(datas[0], data) {
		t.Fatal("snapshot data differs")
	}

	// The Interceptor still decides, above TLS.
	p.Cut(1, 2)
	if _, err := a.t.Call(ctx, 2, "x", nil); !errors.Is(err, ErrPartitioned) {
		t.Fatalf("call across a cut: %v", err)
	}
	before := b.rec.count()
	a.t.Send(ofRange1(heartbeat(1, 2)))
	time.Sleep(50 * time.Millisecond)
	if b.rec.count() != before {
		t.Fatal("a message crossed the cut")
	}
	p.Heal()
	a.t.Send(ofRange1(heartbeat(1, 2)))
	waitFor(t, "delivery after heal", func() bool { return b.rec.count() == before+1 })
}

// A node whose certificate another CA issued can neither send Raft
// messages to a node of the cluster, nor call it, nor stream it a
// snapshot; nor can the cluster's node reach it. The refusing side says
// why in its log, once however often it refuses.
func TestTLSForeignCARefused(t *testing.T) {
	checkLeaks(t)
	var alog logBuf
	a, _ := tlsNode(t, 1, newCA(t, "cluster"), Config{Logger: alog.logger()}, nil)
	x, _ := tlsNode(t, 2, newCA(t, "intruder"), Config{}, bytesSource([]byte("evil")))
	x.t.SetPeer(1, a.addr)
	a.t.SetPeer(2, x.addr)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()

	for i := 0; i < 5; i++ {
		x.t.Send(ofRange1(heartbeat(2, 1)))
		time.Sleep(10 * time.Millisecond)
	}
	waitFor(t, "the intruder told its peer is unreachable", func() bool { return x.rec.unreachableCount(1) > 0 })
	if _, err := x.t.Call(ctx, 1, "join", nil); !errors.Is(err, ErrPeerTLS) || !errors.Is(err, ErrNotSent) {
		t.Fatalf("call from another CA's node: %v", err)
	}
	_, err := x.t.CallAddr(ctx, a.addr, "join", nil)
	if !errors.Is(err, ErrPeerTLS) || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("CallAddr from another CA's node: %v", err)
	}
	t.Logf("the joining side sees: %v", err)
	if _, err := x.t.CallPipelined(ctx, 1, "exec", nil); !errors.Is(err, ErrPeerTLS) || !errors.Is(err, ErrNotSent) {
		t.Fatalf("pipelined call from another CA's node: %v", err)
	}
	x.t.Send(ofRange1(snapMsg(2, 1)))
	if rep := waitSnapReport(t, x.rec); rep != (snapReport{1, 1, false}) {
		t.Fatalf("snapshot report %+v", rep)
	}
	// The other way: the cluster's node does not accept the intruder's
	// certificate as a server's either.
	if _, err := a.t.Call(ctx, 2, "x", nil); !errors.Is(err, ErrPeerTLS) {
		t.Fatalf("call to another CA's node: %v", err)
	}
	a.t.Send(ofRange1(heartbeat(1, 2)))
	waitFor(t, "the intruder unreachable", func() bool { return a.rec.unreachableCount(2) > 0 })

	if n := a.rec.count(); n != 0 {
		t.Fatalf("%d raft messages delivered from another CA's node", n)
	}
	if snaps, _ := a.rec.receivedSnaps(); len(snaps) != 0 {
		t.Fatal("snapshot delivered from another CA's node")
	}
	if n := x.rec.count(); n != 0 {
		t.Fatalf("%d raft messages delivered to another CA's node", n)
	}
	if n := alog.count("refused a peer connection: TLS handshake failed"); n != 1 {
		t.Fatalf("%d log lines about refused handshakes, want 1 (rate-limited)", n)
	}
}

// A node without peer TLS and a node with it refuse each other, with an
// error that says so on the dialing side and a log line on the refusing
// one; a TLS client without a certificate is refused too.
func TestTLSAndPlaintextRefuseEachOther(t *testing.T) {
	checkLeaks(t)
	ca := newCA(t, "cluster")
	var alog, plog logBuf
	a, _ := tlsNode(t, 1, ca, Config{Logger: alog.logger()}, nil)
	pl := startNode(t, 2, testAddr(t), newRecorder(), Config{Logger: plog.logger()}, bytesSource([]byte("data")))
	pl.t.SetPeer(1, a.addr)
	a.t.SetPeer(2, pl.addr)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()

	// Plaintext to TLS.
	for i := 0; i < 5; i++ {
		pl.t.Send(ofRange1(heartbeat(2, 1)))
		time.Sleep(10 * time.Millisecond)
	}
	waitFor(t, "the plaintext node told its peer is unreachable", func() bool { return pl.rec.unreachableCount(1) > 0 })
	_, err := pl.t.CallAddr(ctx, a.addr, "join", nil)
	if !errors.Is(err, ErrPeerTLS) || !errors.Is(err, ErrNotSent) || !strings.Contains(err.Error(), "requires mutual TLS") {
		t.Fatalf("plaintext CallAddr to a TLS node: %v", err)
	}
	t.Logf("the plaintext joining side sees: %v", err)
	_, err = pl.t.CallPipelined(ctx, 1, "exec", nil)
	if !errors.Is(err, ErrPeerTLS) || !strings.Contains(err.Error(), "requires mutual TLS") {
		t.Fatalf("plaintext pipelined call to a TLS node: %v", err)
	}
	pl.t.Send(ofRange1(snapMsg(2, 1)))
	if rep := waitSnapReport(t, pl.rec); rep != (snapReport{1, 1, false}) {
		t.Fatalf("snapshot report %+v", rep)
	}
	if n := alog.count("refused a plaintext peer connection"); n != 1 {
		t.Fatalf("%d log lines about refused plaintext peers, want 1 (rate-limited)", n)
	}

	// TLS to plaintext.
	_, err = a.t.Call(ctx, 2, "x", nil)
	if !errors.Is(err, ErrPeerTLS) || !errors.Is(err, ErrNotSent) {
		t.Fatalf("TLS call to a plaintext node: %v", err)
	}
	t.Logf("a TLS node calling a plaintext one sees: %v", err)
	if _, err := a.t.CallPipelined(ctx, 2, "x", nil); !errors.Is(err, ErrPeerTLS) {
		t.Fatalf("TLS pipelined call to a plaintext node: %v", err)
	}
	a.t.Send(ofRange1(heartbeat(1, 2)))
	waitFor(t, "the plaintext node unreachable", func() bool { return a.rec.unreachableCount(2) > 0 })
	if plog.count("refused a TLS peer connection") != 1 {
		t.Fatalf("plaintext node's log: %d lines about refused TLS peers, want 1", plog.count("refused a TLS peer connection"))
	}

	// A TLS client with no certificate.
	if _, err := servedSerial(a.addr, nil, ca.Pool()); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	if a.rec.count() != 0 || pl.rec.count() != 0 {
		t.Fatalf("messages delivered across the TLS mismatch: %d, %d", a.rec.count(), pl.rec.count())
	}
}

// Certificates rotate without a restart: new connections, accepted and
// dialed, present the new certificate, and streams opened before keep
// going. A certificate of another CA written over the node's is not
// taken (the node keeps its valid one); a whole new set of another CA
// (certificate and CA file) is, and then new connections fail.
func TestTLSRotation(t *testing.T) {
	checkLeaks(t)
	ca := newCA(t, "cluster")
	var alog logBuf
	dir := t.TempDir()
	first := issue(t, ca, "node-1")
	files := writeTLS(t, dir, "node", ca, first)
	a := startNode(t, 1, testAddr(t), newRecorder(), Config{TLS: newPeerTLS(t, files, alog.logger())}, nil)
	b, _ := tlsNode(t, 2, ca, Config{}, nil)
	a.t.SetPeer(2, b.addr)
	b.t.SetPeer(1, a.addr)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()

	// What a presents as a server, and as a client (to a recording
	// server standing in for node 3).
	probe := issue(t, ca, "probe")
	served := func() *big.Int {
		t.Helper()
		s, err := servedSerial(a.addr, probe, ca.Pool())
		if err != nil {
			t.Fatalf("handshake with node 1: %v", err)
		}
		return s
	}
	recAddr, shown := clientSerials(t, probe)
	a.t.SetPeer(3, recAddr)
	presented := func() *big.Int {
		t.Helper()
		n := len(shown())
		a.t.Send(ofRange1(heartbeat(1, 3)))
		waitFor(t, "node 1 dialing node 3", func() bool { return len(shown()) > n })
		s := shown()
		return s[len(s)-1]
	}
	if s := served(); s.Cmp(first.Cert.SerialNumber) != 0 {
		t.Fatalf("served serial %v, want %v", s, first.Cert.SerialNumber)
	}
	if s := presented(); s.Cmp(first.Cert.SerialNumber) != 0 {
		t.Fatalf("presented serial %v, want %v", s, first.Cert.SerialNumber)
	}
	// A stream opened before the rotation.
	old, err := b.t.dialStream(ctx, a.addr, kindRaft)
	if err != nil {
		t.Fatal(err)
	}
	defer old.cancel()

	// Rotation to a new certificate of the same CA.
	second := issue(t, ca, "node-1")
	writeTLS(t, dir, "node", ca, second)
	waitFor(t, "the new certificate served", func() bool { return served().Cmp(second.Cert.SerialNumber) == 0 })
	if s := presented(); s.Cmp(second.Cert.SerialNumber) != 0 {
		t.Fatalf("presented serial after rotation %v, want %v", s, second.Cert.SerialNumber)
	}
	if out, err := b.t.Call(ctx, 1, "ping", nil); err != nil || string(out) != "ping:" {
		t.Fatalf("call after rotation: %q, %v", out, err)
	}
	frames, _, _, err := encodeBatch(nil, 2, 1, ofRange1(heartbeat(2, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := old.SendMsg(&frame{b: frames[0]}); err != nil {
		t.Fatalf("stream opened before the rotation: %v", err)
	}
	waitFor(t, "delivery on the old stream", func() bool { return a.rec.count() == 1 })

	// A certificate of another CA over the node's: refused, logged once,
	// the node keeps presenting the valid one.
	intruder := newCA(t, "intruder")
	foreign := issue(t, intruder, "node-1")
	writeTLS(t, dir, "node", ca, foreign) // the cluster's CA file stays
	waitFor(t, "the refused reload logged", func() bool {
		served() // the files are looked at when a handshake needs them
		return alog.count("peer TLS files changed but cannot be used") == 1
	})
	if s := served(); s.Cmp(second.Cert.SerialNumber) != 0 {
		t.Fatalf("served serial after a bad rotation %v, want %v", s, second.Cert.SerialNumber)
	}
	for i := 0; i < 5; i++ { // more looks at the unchanged files
		time.Sleep(15 * time.Millisecond)
		served()
	}
	if n := alog.count("peer TLS files changed but cannot be used"); n != 1 {
		t.Fatalf("refused reload logged %d times", n)
	}

	// A whole set of another CA: taken; the cluster's nodes and node 1
	// now refuse each other's new connections, the old stream still runs.
	writeTLS(t, dir, "node", intruder, foreign)
	intruderProbe := issue(t, intruder, "probe")
	waitFor(t, "the foreign set served", func() bool {
		s, err := servedSerial(a.addr, intruderProbe, intruder.Pool())
		return err == nil && s.Cmp(foreign.Cert.SerialNumber) == 0
	})
	// (b's gRPC connection to node 1 was made before: a new node.)
	c, _ := tlsNode(t, 4, ca, Config{}, nil)
	c.t.SetPeer(1, a.addr)
	if _, err := c.t.Call(ctx, 1, "ping", nil); !errors.Is(err, ErrPeerTLS) {
		t.Fatalf("call from the cluster to a node rotated to another CA: %v", err)
	}
	a.t.SetPeer(4, c.addr)
	if _, err := a.t.Call(ctx, 4, "ping", nil); !errors.Is(err, ErrPeerTLS) {
		t.Fatalf("call from a node rotated to another CA: %v", err)
	}
	if err := old.SendMsg(&frame{b: frames[0]}); err != nil {
		t.Fatalf("stream opened before the rotations: %v", err)
	}
	waitFor(t, "delivery on the old stream", func() bool { return a.rec.count() == 2 })
}

// NewPeerTLS says what is wrong with the files.
func TestNewPeerTLSErrors(t *testing.T) {
	ca := newCA(t, "cluster")
	other := newCA(t, "other")
	dir := t.TempDir()
	good := writeTLS(t, dir, "good", ca, issue(t, ca, "good"))
	bad := writeTLS(t, filepath.Join(dir, "bad"), "bad", ca, issue(t, other, "bad"))
	for _, c := range []struct {
		files TLSFiles
		want  string
	}{
		{TLSFiles{CertFile: good.CertFile, KeyFile: good.KeyFile}, "all three"},
		{TLSFiles{CertFile: good.CertFile, KeyFile: good.KeyFile, CAFile: filepath.Join(dir, "missing")}, "no such file"},
		{TLSFiles{CertFile: good.CertFile, KeyFile: bad.KeyFile, CAFile: good.CAFile}, "private key does not match"},
		{TLSFiles{CertFile: good.CertFile, KeyFile: good.KeyFile, CAFile: good.KeyFile}, "no PEM certificate"},
		{bad, "does not verify against the CA file"},
	} {
		if _, err := NewPeerTLS(c.files, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.files, err, c.want)
		}
	}
	if _, err := NewPeerTLS(good, nil); err != nil {
		t.Fatal(err)
	}
}

// A node that trusts the cluster's CA but presents a certificate of
// another one (NewPeerTLS refuses such files: the PeerTLS is made by
// hand) passes its own check of the server and is refused by the
// server's check of its certificate, which with TLS 1.3 it learns only
// when it reads: that refusal is a TLS mismatch too.
func TestTLSClientCertOfAnotherCARefused(t *testing.T) {
	checkLeaks(t)
	ca := newCA(t, "cluster")
	a, _ := tlsNode(t, 1, ca, Config{}, nil)
	foreign := issue(t, newCA(t, "intruder"), "node-2")
	pair, err := tls.X509KeyPair(foreign.CertPEM, foreign.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	files := writeTLS(t, t.TempDir(), "node", ca, foreign)
	xt := &PeerTLS{files: files, log: slog.New(slog.DiscardHandler), interval: time.Hour, checked: time.Now(), cert: &pair, pool: ca.Pool()}
	if xt.stamps, err = xt.stat(); err != nil {
		t.Fatal(err)
	}
	x := startNode(t, 2, testAddr(t), newRecorder(), Config{TLS: xt}, bytesSource([]byte("x")))
	x.t.SetPeer(1, a.addr)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()

	if _, err := x.t.dialStream(ctx, a.addr, kindRaft); !errors.Is(err, ErrPeerTLS) {
		t.Fatalf("raft stream with a certificate of another CA: %v", err)
	}
	_, err = x.t.CallAddr(ctx, a.addr, "join", nil)
	if !errors.Is(err, ErrPeerTLS) || !errors.Is(err, ErrNotSent) {
		t.Fatalf("call with a certificate of another CA: %v", err)
	}
	t.Logf("the joining side sees: %v", err)
	if _, err := x.t.CallPipelined(ctx, 1, "exec", nil); !errors.Is(err, ErrPeerTLS) {
		t.Fatalf("pipelined call with a certificate of another CA: %v", err)
	}
	x.t.Send(ofRange1(heartbeat(2, 1), snapMsg(2, 1)))
	if rep := waitSnapReport(t, x.rec); rep != (snapReport{1, 1, false}) {
		t.Fatalf("snapshot report %+v", rep)
	}
	waitFor(t, "node 1 unreachable", func() bool { return x.rec.unreachableCount(1) > 0 })
	if n := a.rec.count(); n != 0 {
		t.Fatalf("%d messages delivered", n)
	}
	if snaps, _ := a.rec.receivedSnaps(); len(snaps) != 0 {
		t.Fatal("snapshot delivered")
	}
}

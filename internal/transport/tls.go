package transport

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"
)

// Peer TLS: with Config.TLS set, every connection on the peer port, both
// the ones this node accepts and the ones it dials (Raft and Calls
// streams, gRPC's snapshot streams and unary calls), is TLS 1.2 or later
// with a certificate required and verified on both sides against the
// cluster's CA. The handshake runs before a connection's first bytes are
// classified (stream.go), so nothing on the port is served to a peer
// without a certificate of the cluster's CA.
//
// Verification checks the chain to the CA bundle (and the key usage:
// serverAuth for the node that accepts, clientAuth for the one that
// dials), not the peer's host name: every certificate the cluster's CA
// issued is a member's. Use a CA dedicated to the cluster.
//
// Certificates, key and CA bundle are re-read from disk when one of the
// files changes (checked at most once a second, by the handshakes that
// need them), so certificates rotate without a restart: established
// connections keep going, new ones present the new certificate and
// verify against the new bundle. A reload that fails (a key that does not
// match its certificate, a half-written file, a certificate that does not
// chain to the new bundle) is logged and the previous set stays in use
// until the files change again.

// TLSFiles names the PEM files of a node's peer TLS.
type TLSFiles struct {
	// CertFile: this node's certificate (leaf first, then any
	// intermediates). It must allow both serverAuth and clientAuth key
	// usage (or none), since a node both accepts and dials.
	CertFile string
	// KeyFile: the certificate's private key.
	KeyFile string
	// CAFile: the CA certificates (one or more) that every peer's
	// certificate, this node's own included, must chain to.
	CAFile string
}

// Enabled reports whether any file is set.
func (f TLSFiles) Enabled() bool { return f.CertFile != "" || f.KeyFile != "" || f.CAFile != "" }

// ErrPeerTLS is wrapped by the errors of streams and calls that failed
// because this node's peer TLS and the peer's do not fit: a certificate
// that one side's CA did not issue, a peer that requires TLS while this
// node has none, or the other way round. Retrying does not help until a
// configuration or certificate changes. Such errors also wrap ErrNotSent
// (the peer served nothing).
var ErrPeerTLS = errors.New("transport: peer TLS mismatch")

// errTLSRequired is the refusal a node with peer TLS answers a plaintext
// framed stream with (tlsRequiredAnswer, see stream.go) and, through the
// gRPC status refusePlaintext, a plaintext gRPC call.
var errTLSRequired = errors.New("the peer requires mutual TLS on its peer port (a certificate of the cluster's CA), and this node has no peer TLS configured")

// tlsRequiredAnswer is what a node with peer TLS writes back to a plaintext
// framed stream's preface before closing it (instead of streamMagic).
const tlsRequiredAnswer = "KVRt"

// refusePlaintext is the message of the gRPC status (codes.Unauthenticated)
// a node with peer TLS answers plaintext gRPC calls with.
const refusePlaintext = "transport: this node requires mutual TLS on its peer port (a certificate of the cluster's CA); the caller has no peer TLS configured"

// tlsHandshakeRecord is the first byte of a TLS ClientHello (the record
// type "handshake"): a framed stream starts with 'K', HTTP/2 with 'P'.
const tlsHandshakeRecord = 0x16

// alertHandshakeFailure is a TLS alert record (fatal, handshake_failure)
// that a node without peer TLS answers a TLS ClientHello with, so that the
// dialing node fails at once with "remote error: tls: handshake failure"
// rather than a bare EOF.
var alertHandshakeFailure = []byte{0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 40}

// DefaultTLSReloadInterval is how often, at most, PeerTLS looks at its
// files' modification times.
const DefaultTLSReloadInterval = time.Second

// PeerTLS is a node's peer TLS material: its certificate and key and the
// cluster CA bundle, re-read when the files change. Safe for concurrent
// use.
type PeerTLS struct {
	files    TLSFiles
	log      *slog.Logger
	interval time.Duration

	mu      sync.Mutex
	checked time.Time      // last look at the files
	stamps  [3]os.FileInfo // of the files the current set was read from
	failed  [3]os.FileInfo // of a set whose reload failed (logged once)
	// statFailed: a file could not be looked at (logged once).
	statFailed bool
	cert       *tls.Certificate
	pool       *x509.CertPool
}

// NewPeerTLS reads the files; an error names what is wrong with them
// (missing, unreadable, not PEM, key and certificate not a pair, the
// certificate not issued by the CA bundle, expired).
func NewPeerTLS(files TLSFiles, log *slog.Logger) (*PeerTLS, error) {
	if files.CertFile == "" || files.KeyFile == "" || files.CAFile == "" {
		return nil, errors.New("peer TLS needs a certificate, its key and the cluster CA file, all three")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &PeerTLS{files: files, log: log.With("component", "peer-tls"), interval: DefaultTLSReloadInterval}
	stamps, err := p.stat()
	if err != nil {
		return nil, err
	}
	cert, pool, err := p.load()
	if err != nil {
		return nil, err
	}
	p.stamps, p.cert, p.pool, p.checked = stamps, cert, pool, time.Now()
	return p, nil
}

func (p *PeerTLS) paths() [3]string {
	return [3]string{p.files.CertFile, p.files.KeyFile, p.files.CAFile}
}

func (p *PeerTLS) stat() ([3]os.FileInfo, error) {
	var st [3]os.FileInfo
	for i, path := range p.paths() {
		fi, err := os.Stat(path)
		if err != nil {
			return st, fmt.Errorf("peer TLS: %w", err)
		}
		st[i] = fi
	}
	return st, nil
}

// load reads and checks the three files.
func (p *PeerTLS) load() (*tls.Certificate, *x509.CertPool, error) {
	f := p.files
	certPEM, err := os.ReadFile(f.CertFile)
	if err != nil {
		return nil, nil, fmt.Errorf("peer TLS certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(f.KeyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("peer TLS key: %w", err)
	}
	caPEM, err := os.ReadFile(f.CAFile)
	if err != nil {
		return nil, nil, fmt.Errorf("peer TLS CA: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("peer TLS: certificate %s and key %s: %w", f.CertFile, f.KeyFile, err)
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, nil, fmt.Errorf("peer TLS: certificate %s: %w", f.CertFile, err)
		}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, nil, fmt.Errorf("peer TLS: no PEM certificate in the CA file %s", f.CAFile)
	}
	// The node's own certificate must be one its peers accept: a node
	// whose certificate its own CA bundle does not vouch for is
	// misconfigured (or being rotated to the wrong file).
	if err := verifyChain(cert.Leaf, intermediates(cert.Certificate[1:]), pool, x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth); err != nil {
		return nil, nil, fmt.Errorf("peer TLS: certificate %s (subject %q) does not verify against the CA file %s: %w",
			f.CertFile, cert.Leaf.Subject.String(), f.CAFile, err)
	}
	return &cert, pool, nil
}

func intermediates(ders [][]byte) *x509.CertPool {
	pool := x509.NewCertPool()
	for _, der := range ders {
		if c, err := x509.ParseCertificate(der); err == nil {
			pool.AddCert(c)
		}
	}
	return pool
}

// verifyChain checks that leaf chains to roots with every one of usages.
func verifyChain(leaf *x509.Certificate, inter, roots *x509.CertPool, usages ...x509.ExtKeyUsage) error {
	for _, u := range usages {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{u}}); err != nil {
			return err
		}
	}
	return nil
}

func sameFile(a, b os.FileInfo) bool {
	return a != nil && b != nil && os.SameFile(a, b) && a.ModTime().Equal(b.ModTime()) && a.Size() == b.Size()
}

func sameFiles(a, b [3]os.FileInfo) bool {
	for i := range a {
		if !sameFile(a[i], b[i]) {
			return false
		}
	}
	return true
}

// current returns the certificate and CA pool to use now, re-reading the
// files first if they changed (looked at no more than once per interval).
func (p *PeerTLS) current() (*tls.Certificate, *x509.CertPool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if now := time.Now(); now.Sub(p.checked) >= p.interval {
		p.checked = now
		p.reloadLocked()
	}
	return p.cert, p.pool
}

func (p *PeerTLS) reloadLocked() {
	stamps, err := p.stat()
	if err != nil {
		if !p.statFailed {
			p.statFailed = true // logged once until the files are back
			p.log.Error("cannot look at the peer TLS files; keeping the certificates in use", "err", err)
		}
		return
	}
	p.statFailed = false
	if sameFiles(stamps, p.stamps) || sameFiles(stamps, p.failed) {
		return
	}
	cert, pool, err := p.load()
	if err != nil {
		p.failed = stamps
		p.log.Error("peer TLS files changed but cannot be used; keeping the certificates in use until they change again", "err", err)
		return
	}
	p.stamps, p.failed, p.cert, p.pool = stamps, [3]os.FileInfo{}, cert, pool
	p.log.Info("peer TLS certificates reloaded", "cert", p.files.CertFile,
		"subject", cert.Leaf.Subject.String(), "serial", cert.Leaf.SerialNumber.String(),
		"not_after", cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
}

// serverConfig is the configuration of accepted connections: each
// handshake takes the current certificate and CA bundle.
func (p *PeerTLS) serverConfig() *tls.Config {
	return &tls.Config{
		MinVersion:             tls.VersionTLS12,
		SessionTicketsDisabled: true,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool := p.current()
			return &tls.Config{
				MinVersion:             tls.VersionTLS12,
				SessionTicketsDisabled: true,
				Certificates:           []tls.Certificate{*cert},
				ClientAuth:             tls.RequireAndVerifyClientCert,
				ClientCAs:              pool,
			}, nil
		},
	}
}

// clientConfig is the configuration of dialed connections: the current
// certificate is presented, the peer's verified against the current CA
// bundle (the chain only: see the top of this file).
func (p *PeerTLS) clientConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The chain is verified by VerifyConnection, against the bundle
		// read now and without the host name check.
		InsecureSkipVerify: true,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, _ := p.current()
			return cert, nil
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("tls: the peer presented no certificate")
			}
			_, pool := p.current()
			leaf := cs.PeerCertificates[0]
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			if err := verifyChain(leaf, inter, pool, x509.ExtKeyUsageServerAuth); err != nil {
				return &tls.CertificateVerificationError{UnverifiedCertificates: cs.PeerCertificates,
					Err: fmt.Errorf("peer certificate (subject %q, issuer %q) is not one of the cluster CA's (%s): %w",
						leaf.Subject.String(), leaf.Issuer.String(), p.files.CAFile, err)}
			}
			return nil
		},
	}
}

// tlsConn is a TLS connection whose Close closes the TCP connection at
// once, without the close_notify alert tls.Conn.Close would first try to
// write (for up to 5 s to a peer that reads nothing); the framing says
// where a stream ends.
type tlsConn struct {
	*tls.Conn
	raw net.Conn
}

func (c *tlsConn) Close() error { return c.raw.Close() }

// isTLSMismatch reports whether err (from a dial, a handshake or the first
// read after it) means the two nodes' peer TLS do not fit, rather than a
// network failure.
func isTLSMismatch(err error) bool {
	if err == nil {
		return false
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "remote error" { // an alert from the peer
		return true
	}
	var cv *tls.CertificateVerificationError
	var rh tls.RecordHeaderError
	var ua x509.UnknownAuthorityError
	var ci x509.CertificateInvalidError
	return errors.As(err, &cv) || errors.As(err, &rh) || errors.As(err, &ua) || errors.As(err, &ci) ||
		errors.Is(err, errTLSRequired)
}

// statusIsTLSMismatch is isTLSMismatch for the text of a gRPC status (the
// dialer's error reaches the caller only as text).
func statusIsTLSMismatch(msg string) bool {
	return strings.Contains(msg, refusePlaintext) || strings.Contains(msg, "remote error: tls:") ||
		strings.Contains(msg, "tls: failed to verify") || strings.Contains(msg, "not one of the cluster CA's") ||
		strings.Contains(msg, "tls: first record does not look like a TLS handshake")
}

// tlsMismatchHint is appended to the errors wrapping ErrPeerTLS.
const tlsMismatchHint = "peer TLS of the two nodes does not fit: both need certificates of the same CA, or both none"

// logLimiter lets one log line through per interval, counting those it
// held back.
type logLimiter struct {
	mu       sync.Mutex
	interval time.Duration
	last     time.Time
	held     int
}

// allow reports whether to log now, and how many lines were held back
// since the last one logged.
func (l *logLimiter) allow() (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if !l.last.IsZero() && now.Sub(l.last) < l.interval {
		l.held++
		return false, 0
	}
	held := l.held
	l.last, l.held = now, 0
	return true, held
}

// refusedLogInterval: at most one line per kind of refusal this often.
const refusedLogInterval = 10 * time.Second

// Package tlsconf builds the TLS configurations of a node's client port
// and admin port from certificate files, and re-reads those files when
// they change, so that a rotated certificate (or CA) takes effect on the
// next connection without a restart.
//
// A Files names the PEM files: a certificate chain, its private key and,
// optionally, the CA certificates that client certificates must chain
// to. Server loads them once, failing with an error that names the file
// and the flag that gave it (missing, unreadable, not PEM, key that does
// not match the certificate), and returns a tls.Config whose
// GetConfigForClient checks the files' modification times and sizes at
// most once a second: when one changed, the files are loaded again; if
// that fails (a half-written file, a key not yet replaced), the previous
// configuration stays in force and the failure is logged, once per
// change.
//
// The configuration is Go's defaults (its cipher suites and curves) with
// TLS 1.2 as the oldest version, as Redis's default tls-protocols.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
)

// ClientAuth is Redis's tls-auth-clients: whether clients must present a
// certificate signed by the CA.
type ClientAuth string

const (
	// AuthYes: a client certificate is required and verified against the
	// CA (Redis's default when tls-auth-clients is not set).
	AuthYes ClientAuth = "yes"
	// AuthOptional: a certificate is verified if the client sends one.
	AuthOptional ClientAuth = "optional"
	// AuthNo: no certificate is asked for.
	AuthNo ClientAuth = "no"
)

// ParseClientAuth parses yes, no or optional (case-insensitive).
func ParseClientAuth(s string) (ClientAuth, error) {
	switch a := ClientAuth(strings.ToLower(strings.TrimSpace(s))); a {
	case AuthYes, AuthOptional, AuthNo:
		return a, nil
	}
	return "", fmt.Errorf("%q: want yes, no or optional", s)
}

func (a ClientAuth) goType() tls.ClientAuthType {
	switch a {
	case AuthYes:
		return tls.RequireAndVerifyClientCert
	case AuthOptional:
		return tls.VerifyClientCertIfGiven
	}
	return tls.NoClientCert
}

// Files names a server's certificate files and the flags they came from
// (for error messages).
type Files struct {
	Cert, Key, CA string
	// ClientAuth applies when CA is set; without a CA no client
	// certificate is asked for.
	ClientAuth ClientAuth
	// CertFlag, KeyFlag and CAFlag name the options in errors, e.g.
	// "--tls-cert-file". Default: "certificate file", "key file", "CA file".
	CertFlag, KeyFlag, CAFlag string
}

func (f *Files) names() (cert, key, ca string) {
	cert, key, ca = f.CertFlag, f.KeyFlag, f.CAFlag
	if cert == "" {
		cert = "certificate file"
	}
	if key == "" {
		key = "key file"
	}
	if ca == "" {
		ca = "CA file"
	}
	return
}

// reloadEvery is how often, at most, the files' metadata is checked.
const reloadEvery = time.Second

// Server loads f and returns a server tls.Config that follows changes to
// the files. log receives reload failures and successes (nil: discard).
func Server(f Files, log *slog.Logger) (*tls.Config, error) {
	if f.Cert == "" || f.Key == "" {
		c, k, _ := f.names()
		return nil, fmt.Errorf("TLS needs both %s and %s", c, k)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &reloader{f: f, log: log}
	cfg, err := r.load()
	if err != nil {
		return nil, err
	}
	r.cfg, r.stamp, r.checked = cfg, r.stat(), time.Now()
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return r.current(), nil },
	}, nil
}

type fileStamp struct {
	mod  time.Time
	size int64
	err  bool
}

type reloader struct {
	f   Files
	log *slog.Logger

	mu      sync.Mutex
	cfg     *tls.Config
	stamp   [3]fileStamp // cert, key, CA as last loaded or tried
	checked time.Time
}

func (r *reloader) stat() [3]fileStamp {
	var s [3]fileStamp
	for i, p := range []string{r.f.Cert, r.f.Key, r.f.CA} {
		if p == "" {
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			s[i].err = true
			continue
		}
		s[i] = fileStamp{mod: fi.ModTime(), size: fi.Size()}
	}
	return s
}

// current returns the configuration for a new connection, reloading the
// files first if they changed (checked at most once per reloadEvery).
func (r *reloader) current() *tls.Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); now.Sub(r.checked) >= reloadEvery {
		r.checked = now
		if st := r.stat(); st != r.stamp {
			r.stamp = st
			cfg, err := r.load()
			if err != nil {
				r.log.Warn("TLS files changed but cannot be loaded; keeping the previous certificate", "err", err)
			} else {
				r.cfg = cfg
				r.log.Info("TLS certificate files reloaded", "cert", r.f.Cert)
			}
		}
	}
	return r.cfg
}

// load reads the files into a complete server configuration.
func (r *reloader) load() (*tls.Config, error) {
	certName, keyName, caName := r.f.names()
	certPEM, err := os.ReadFile(r.f.Cert)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", certName, err)
	}
	keyPEM, err := os.ReadFile(r.f.Key)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keyName, err)
	}
	if !hasBlock(certPEM, "CERTIFICATE") {
		return nil, fmt.Errorf("%s %s holds no PEM CERTIFICATE block", certName, r.f.Cert)
	}
	if !hasBlock(keyPEM, "PRIVATE KEY") {
		return nil, fmt.Errorf("%s %s holds no PEM private key", keyName, r.f.Key)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		msg := err.Error()
		if strings.Contains(msg, "does not match") {
			return nil, fmt.Errorf("%s %s does not match the certificate in %s %s", keyName, r.f.Key, certName, r.f.Cert)
		}
		return nil, fmt.Errorf("%s %s / %s %s: %s", certName, r.f.Cert, keyName, r.f.Key, strings.TrimPrefix(msg, "tls: "))
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}
	if r.f.CA != "" {
		pool, err := LoadCA(r.f.CA)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", caName, err)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = r.f.ClientAuth.goType()
	}
	return cfg, nil
}

// LoadCA reads a PEM file of CA certificates into a pool.
func LoadCA(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

func hasBlock(b []byte, suffix string) bool {
	for len(b) > 0 {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return false
		}
		if strings.HasSuffix(blk.Type, suffix) {
			return true
		}
	}
	return false
}

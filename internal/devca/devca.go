// Package devca makes throwaway certificate authorities and the
// certificates they sign, with crypto/x509: node certificates for peer
// TLS (package transport), server and client certificates for the TLS
// client and admin ports (package tlsconf); for tests, and for `kvorum
// demo --tls` and `--peer-tls`. Keys are ECDSA P-256; nothing here is
// meant for a production CA. Standard library only.
package devca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a certificate authority: its certificate and key.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	key     *ecdsa.PrivateKey
}

// New makes a self-signed CA named name, valid from an hour ago for a
// year.
func New(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"kvorum devca"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, CertPEM: pemBlock("CERTIFICATE", der), key: key}, nil
}

// Issued is a certificate the CA issued, with its key.
type Issued struct {
	Cert    *x509.Certificate
	CertPEM []byte
	KeyPEM  []byte
}

// Issue makes a node certificate named name, usable by a server and a
// client (serverAuth and clientAuth), for 127.0.0.1, ::1, localhost and
// hosts (IP addresses or DNS names).
func (ca *CA) Issue(name string, hosts ...string) (*Issued, error) {
	return ca.issue(name, append([]string{"127.0.0.1", "::1", "localhost"}, hosts...),
		x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
}

// Server signs a server certificate for the given DNS names and IP
// addresses (127.0.0.1, ::1 and localhost when hosts is empty).
func (ca *CA) Server(cn string, hosts ...string) (*Issued, error) {
	if len(hosts) == 0 {
		hosts = []string{"127.0.0.1", "::1", "localhost"}
	}
	return ca.issue(cn, hosts, x509.ExtKeyUsageServerAuth)
}

// Client signs a client certificate.
func (ca *CA) Client(cn string) (*Issued, error) {
	return ca.issue(cn, nil, x509.ExtKeyUsageClientAuth)
}

// ExpiredClient signs a client certificate that has already expired: valid
// from two days ago until a day ago, otherwise like Client's (for tests
// of a server refusing it).
func (ca *CA) ExpiredClient(cn string) (*Issued, error) {
	now := time.Now()
	return ca.issueValid(cn, nil, now.Add(-48*time.Hour), now.Add(-24*time.Hour), x509.ExtKeyUsageClientAuth)
}

func (ca *CA) issue(cn string, hosts []string, usage ...x509.ExtKeyUsage) (*Issued, error) {
	now := time.Now()
	return ca.issueValid(cn, hosts, now.Add(-time.Hour), now.Add(365*24*time.Hour), usage...)
}

func (ca *CA) issueValid(cn string, hosts []string, notBefore, notAfter time.Time, usage ...x509.ExtKeyUsage) (*Issued, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"kvorum devca"}},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &Issued{Cert: cert, CertPEM: pemBlock("CERTIFICATE", der), KeyPEM: pemBlock("PRIVATE KEY", kder)}, nil
}

// Pool returns a pool holding the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// WriteCA writes the CA certificate to path (replaced atomically).
func (ca *CA) WriteCA(path string) error { return writeAtomic(path, ca.CertPEM, 0o644) }

// TLS returns the certificate as a tls.Certificate (for a client's config).
func (c *Issued) TLS() (tls.Certificate, error) { return tls.X509KeyPair(c.CertPEM, c.KeyPEM) }

// Write writes the certificate and key to certFile and keyFile (the key
// readable by the owner only), each replaced atomically, so that a reader
// sees the old file or the new one.
func (c *Issued) Write(certFile, keyFile string) error {
	if err := writeAtomic(certFile, c.CertPEM, 0o644); err != nil {
		return err
	}
	return writeAtomic(keyFile, c.KeyPEM, 0o600)
}

// Files are the paths WriteFiles wrote.
type Files struct{ Cert, Key, CA string }

// WriteFiles writes the certificate, its key (mode 0600) and the CA
// certificate as dir/name.crt, dir/name.key and dir/ca.crt, each
// replaced atomically (written aside, then renamed), so that a node
// reading them meanwhile sees either the old file or the new one.
func (ca *CA) WriteFiles(dir, name string, c *Issued) (Files, error) {
	f := Files{
		Cert: filepath.Join(dir, name+".crt"),
		Key:  filepath.Join(dir, name+".key"),
		CA:   filepath.Join(dir, "ca.crt"),
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return f, err
	}
	for _, w := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{{f.Key, c.KeyPEM, 0o600}, {f.Cert, c.CertPEM, 0o644}, {f.CA, ca.CertPEM, 0o644}} {
		if err := writeAtomic(w.path, w.data, w.mode); err != nil {
			return f, err
		}
	}
	return f, nil
}

func writeAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".devca-*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(name, mode)
	}
	if err == nil {
		err = os.Rename(name, path)
	}
	if err != nil {
		_ = os.Remove(name)
		return fmt.Errorf("devca: writing %s: %w", path, err)
	}
	return nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err)
	}
	return n
}

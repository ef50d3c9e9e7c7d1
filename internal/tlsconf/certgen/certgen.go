// Package certgen makes throwaway certificates with crypto/x509: a CA and
// the server and client certificates it signs, as PEM files. The tests of
// the TLS ports use it, and so does `kvorum demo --tls`. Keys are ECDSA
// P-256; nothing here is meant for production certificates.
package certgen

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
	"time"
)

// CA is a certificate authority that signs leaf certificates.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	key     *ecdsa.PrivateKey
}

// Leaf is a signed certificate and its key.
type Leaf struct {
	CertPEM, KeyPEM []byte
}

// NewCA makes a self-signed CA named name, valid for a day.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
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
	return &CA{Cert: cert, CertPEM: pemOf("CERTIFICATE", der), key: key}, nil
}

// Server signs a server certificate for the given DNS names and IP
// addresses (127.0.0.1 and localhost when hosts is empty).
func (ca *CA) Server(cn string, hosts ...string) (Leaf, error) {
	if len(hosts) == 0 {
		hosts = []string{"127.0.0.1", "::1", "localhost"}
	}
	return ca.issue(cn, hosts, x509.ExtKeyUsageServerAuth)
}

// Client signs a client certificate.
func (ca *CA) Client(cn string) (Leaf, error) {
	return ca.issue(cn, nil, x509.ExtKeyUsageClientAuth)
}

func (ca *CA) issue(cn string, hosts []string, usage x509.ExtKeyUsage) (Leaf, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Leaf{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
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
		return Leaf{}, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Leaf{}, err
	}
	return Leaf{CertPEM: pemOf("CERTIFICATE", der), KeyPEM: pemOf("PRIVATE KEY", kder)}, nil
}

// Pool returns a pool holding the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// TLS returns the leaf as a tls.Certificate (for a client's config).
func (l Leaf) TLS() (tls.Certificate, error) { return tls.X509KeyPair(l.CertPEM, l.KeyPEM) }

// Write writes the certificate and key to certFile and keyFile (the key
// readable by the owner only). It writes each to a temporary file first
// and renames it, so that a reader sees the old file or the new one.
func (l Leaf) Write(certFile, keyFile string) error {
	if err := writeAtomic(certFile, l.CertPEM, 0o644); err != nil {
		return err
	}
	return writeAtomic(keyFile, l.KeyPEM, 0o600)
}

// WriteCA writes the CA certificate to path.
func (ca *CA) WriteCA(path string) error { return writeAtomic(path, ca.CertPEM, 0o644) }

func writeAtomic(path string, b []byte, mode os.FileMode) error {
	tmp := fmt.Sprintf("%s.tmp%d", path, time.Now().UnixNano())
	if err := os.WriteFile(tmp, b, mode); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

func pemOf(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}

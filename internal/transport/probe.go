package transport

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"time"
)

// ProbeTLS connects to a node's peer port as a node with peer TLS dials
// it, presenting cert (nil: none): the handshake (the node's certificate verified
// against roots, the chain only, as peers verify it), then the node's
// verdict on cert (tlsAccepted). It returns the connection, with a
// deadline of timeout from now, ready for a framed stream; its
// ConnectionState has the certificate the node serves. For tests and
// diagnostics: which certificate a node serves after a rotation, whether
// it accepts a client's.
func ProbeTLS(addr string, cert *tls.Certificate, roots *x509.CertPool, timeout time.Duration) (*tls.Conn, error) {
	raw, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	_ = raw.SetDeadline(time.Now().Add(timeout))
	cfg := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // the chain is verified below, without the host name check
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("tls: the peer presented no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			return verifyChain(cs.PeerCertificates[0], inter, roots, x509.ExtKeyUsageServerAuth)
		},
	}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	c := tls.Client(raw, cfg)
	if err := awaitAccepted(addr, c, raw); err != nil {
		return nil, err
	}
	return c, nil
}

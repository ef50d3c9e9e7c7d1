package devca

import (
	"crypto/x509"
	"errors"
	"testing"
	"time"
)

// ExpiredClient's certificate chains to the CA but has expired: a
// verifier refuses it for that reason alone (the same certificate
// verifies at a time inside its validity), while Client's verifies now.
func TestExpiredClient(t *testing.T) {
	ca, err := New("devca test CA")
	if err != nil {
		t.Fatal(err)
	}
	opts := x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	good, err := ca.Client("good")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := good.Cert.Verify(opts); err != nil {
		t.Fatalf("a fresh client certificate does not verify: %v", err)
	}
	old, err := ca.ExpiredClient("old")
	if err != nil {
		t.Fatal(err)
	}
	if !old.Cert.NotAfter.Before(time.Now()) {
		t.Fatalf("ExpiredClient's certificate is valid until %v, after now", old.Cert.NotAfter)
	}
	if _, err := old.TLS(); err != nil {
		t.Fatalf("ExpiredClient's certificate and key do not make a pair: %v", err)
	}
	_, err = old.Cert.Verify(opts)
	var inv x509.CertificateInvalidError
	if !errors.As(err, &inv) || inv.Reason != x509.Expired {
		t.Fatalf("verifying the expired certificate: %v, want an x509.Expired error", err)
	}
	if err := old.Cert.CheckSignatureFrom(ca.Cert); err != nil {
		t.Fatalf("the expired certificate is not signed by the CA: %v", err)
	}
}

package tlsconf

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/devca"
)

func mustCA(t *testing.T, name string) *devca.CA {
	t.Helper()
	ca, err := devca.New(name)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func mustServer(t *testing.T, ca *devca.CA, cn string) *devca.Issued {
	t.Helper()
	l, err := ca.Server(cn)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestParseClientAuth(t *testing.T) {
	for in, want := range map[string]ClientAuth{"yes": AuthYes, "YES": AuthYes, "no": AuthNo, "optional": AuthOptional} {
		if got, err := ParseClientAuth(in); err != nil || got != want {
			t.Errorf("ParseClientAuth(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseClientAuth("maybe"); err == nil {
		t.Error("maybe accepted")
	}
}

func TestServerErrors(t *testing.T) {
	dir := t.TempDir()
	ca := mustCA(t, "ca")
	a, b := mustServer(t, ca, "a"), mustServer(t, ca, "b")
	cert, key := filepath.Join(dir, "a.crt"), filepath.Join(dir, "a.key")
	if err := a.Write(cert, key); err != nil {
		t.Fatal(err)
	}
	bkey := filepath.Join(dir, "b.key")
	if err := os.WriteFile(bkey, b.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	names := Files{CertFlag: "--tls-cert-file", KeyFlag: "--tls-key-file", CAFlag: "--tls-ca-cert-file"}
	for _, c := range []struct {
		cert, key, ca string
		want          string
	}{
		{"", key, "", "TLS needs both --tls-cert-file and --tls-key-file"},
		{filepath.Join(dir, "missing.crt"), key, "", "--tls-cert-file: open " + filepath.Join(dir, "missing.crt") + ": no such file"},
		{cert, filepath.Join(dir, "missing.key"), "", "--tls-key-file: open"},
		{cert, bkey, "", "--tls-key-file " + bkey + " does not match the certificate in --tls-cert-file " + cert},
		{garbage, key, "", "--tls-cert-file " + garbage + " holds no PEM CERTIFICATE block"},
		{cert, garbage, "", "--tls-key-file " + garbage + " holds no PEM private key"},
		{cert, key, garbage, "--tls-ca-cert-file: " + garbage + " holds no PEM certificate"},
		{cert, key, filepath.Join(dir, "missing.ca"), "--tls-ca-cert-file: open"},
	} {
		f := names
		f.Cert, f.Key, f.CA, f.ClientAuth = c.cert, c.key, c.ca, AuthYes
		if _, err := Server(f, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Server(%s, %s, %s) = %v, want %q", c.cert, c.key, c.ca, err, c.want)
		}
	}
	f := names
	f.Cert, f.Key = cert, key
	if _, err := Server(f, nil); err != nil {
		t.Errorf("good files: %v", err)
	}
}

// serverCN returns the common name of the certificate that cfg presents
// to a new connection.
func serverCN(t *testing.T, cfg *tls.Config, ca *devca.CA) string {
	t.Helper()
	got, err := cfg.GetConfigForClient(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	leaf := got.Certificates[0].Leaf
	if leaf == nil {
		t.Fatal("no parsed leaf")
	}
	return leaf.Subject.CommonName
}

func TestReload(t *testing.T) {
	dir := t.TempDir()
	ca := mustCA(t, "ca")
	cert, key := filepath.Join(dir, "s.crt"), filepath.Join(dir, "s.key")
	if err := mustServer(t, ca, "first").Write(cert, key); err != nil {
		t.Fatal(err)
	}
	cfg, err := Server(Files{Cert: cert, Key: key}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinVersion != tls.VersionTLS12 {
		t.Errorf("MinVersion %x", cfg.MinVersion)
	}
	if cn := serverCN(t, cfg, ca); cn != "first" {
		t.Fatalf("cn %q", cn)
	}
	// A half-done rotation (new certificate, old key) keeps the old pair.
	second := mustServer(t, ca, "second")
	if err := os.WriteFile(cert, second.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(reloadEvery + 50*time.Millisecond)
	if cn := serverCN(t, cfg, ca); cn != "first" {
		t.Fatalf("after a mismatched rotation: cn %q, want first", cn)
	}
	if err := os.WriteFile(key, second.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for serverCN(t, cfg, ca) != "second" {
		if time.Now().After(deadline) {
			t.Fatal("the rotated certificate was not picked up within 5s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCerts: kvorum certs writes a CA, node certificates that chain to it
// for the loopback names and --hosts (usable as server and client), a
// client certificate, keys readable by their owner only, and a token; a
// second run refuses to overwrite without --force.
func TestCerts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	var out strings.Builder
	if err := runCerts(context.Background(), []string{"--out", dir, "--nodes", "2", "--hosts", "kvorum-1, 10.1.2.3"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(read(t, filepath.Join(dir, "ca.crt"))) {
		t.Fatal("ca.crt holds no certificate")
	}
	parse := func(name string) *x509.Certificate {
		b, _ := pem.Decode(read(t, filepath.Join(dir, name)))
		if b == nil {
			t.Fatalf("%s: not PEM", name)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, node := range []string{"node-1", "node-2"} {
		c := parse(node + ".crt")
		for _, host := range []string{"127.0.0.1", "localhost", "kvorum-1", "10.1.2.3"} {
			for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
				if _, err := c.Verify(x509.VerifyOptions{Roots: pool, DNSName: host, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
					t.Errorf("%s for %s (usage %v): %v", node, host, usage, err)
				}
			}
		}
		if fi, err := os.Stat(filepath.Join(dir, node+".key")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s.key: %v %v, want mode 0600", node, fi.Mode(), err)
		}
	}
	if _, err := parse("client.crt").Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client.crt: %v", err)
	}
	if tok := strings.TrimSpace(string(read(t, filepath.Join(dir, "admin.token")))); len(tok) != 64 {
		t.Errorf("admin.token %q: want 64 hex digits", tok)
	}
	if !strings.Contains(out.String(), "--peer-cert-file") {
		t.Errorf("no usage printed:\n%s", out.String())
	}
	err := runCerts(context.Background(), []string{"--out", dir, "--nodes", "2"}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("second run without --force: %v", err)
	}
	if err := runCerts(context.Background(), []string{"--out", dir, "--nodes", "2", "--force"}, &out, &out); err != nil {
		t.Fatalf("--force: %v", err)
	}
	for _, args := range [][]string{{}, {"--out", dir, "--nodes", "0"}, {"--out", dir, "extra"}} {
		if err := runCerts(context.Background(), args, &out, &out); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

package main

import (
	"strings"
	"testing"

	"github.com/kvorum/kvorum/internal/transport"
)

func TestParseStartPeerTLS(t *testing.T) {
	f, err := parseStart([]string{"--data-dir", "d", "--peer-cert-file", "n.crt", "--peer-key-file", "n.key", "--peer-trusted-ca-file", "ca.crt"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := (transport.TLSFiles{CertFile: "n.crt", KeyFile: "n.key", CAFile: "ca.crt"}); f.cfg.PeerTLS != want {
		t.Fatalf("PeerTLS %+v, want %+v", f.cfg.PeerTLS, want)
	}
	if f, err := parseStart([]string{"--data-dir", "d"}, nil); err != nil || f.cfg.PeerTLS.Enabled() {
		t.Fatalf("peer TLS without flags: %+v, %v", f.cfg.PeerTLS, err)
	}
	for _, args := range [][]string{
		{"--peer-cert-file", "n.crt"},
		{"--peer-cert-file", "n.crt", "--peer-key-file", "n.key"},
		{"--peer-trusted-ca-file", "ca.crt"},
	} {
		_, err := parseStart(append([]string{"--data-dir", "d"}, args...), nil)
		if err == nil || !strings.Contains(err.Error(), "set all three") {
			t.Errorf("%v: %v", args, err)
		}
		if _, ok := err.(*usageError); err != nil && !ok {
			t.Errorf("%v: %T is not a usage error", args, err)
		}
	}
}

func TestHelpMentionsPeerTLS(t *testing.T) {
	_, out, _ := runCmd("start", "--help")
	for _, want := range []string{"Peer TLS", "--peer-cert-file FILE", "--peer-key-file FILE", "--peer-trusted-ca-file FILE"} {
		if !strings.Contains(out, want) {
			t.Errorf("start --help lacks %q", want)
		}
	}
}

// The demo's throwaway certificates load (each verifies against the CA
// file) and every node's config uses its own.
func TestDemoPeerTLS(t *testing.T) {
	dir := t.TempDir()
	cfgs := demoNodeConfigs(3, 16379, dir)
	tlsDir, err := demoPeerTLS(dir, cfgs)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range cfgs {
		if !strings.HasPrefix(c.PeerTLS.CertFile, tlsDir) || seen[c.PeerTLS.CertFile] {
			t.Fatalf("node %d: peer TLS files %+v", c.ID, c.PeerTLS)
		}
		seen[c.PeerTLS.CertFile] = true
		if _, err := transport.NewPeerTLS(c.PeerTLS, nil); err != nil {
			t.Fatalf("node %d: %v", c.ID, err)
		}
		c.EnsureDefaults()
		if err := c.Validate(); err != nil {
			t.Fatalf("node %d: %v", c.ID, err)
		}
	}
	if resumed, err := checkDemoDir(dir, 3); err != nil || resumed {
		t.Fatalf("the certificates look like nodes' data: %v, %v", resumed, err)
	}
}

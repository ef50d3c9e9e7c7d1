package process

import (
	"context"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/devca"
	"github.com/kvorum/kvorum/internal/transport"
)

// servedPeerSerial is the serial number of the certificate the node at
// addr presents on its peer port to a peer with cert (after it accepted
// that certificate: transport.ProbeTLS).
func servedPeerSerial(addr string, cert *devca.Issued, ca *devca.CA) (*big.Int, error) {
	pair, err := cert.TLS()
	if err != nil {
		return nil, err
	}
	c, err := transport.ProbeTLS(addr, &pair, ca.Pool(), 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber, nil
}

// `kvorum start` with --peer-cert-file, --peer-key-file and
// --peer-trusted-ca-file: the processes replicate over mutual TLS; a
// process without the flags cannot join (it exits with the reason, the
// member logs the refusal); the certificate file rewritten under the
// running processes is served on new connections, and a node with a
// certificate of the CA joins through them.
func TestPeerTLSProcesses(t *testing.T) {
	ca, err := devca.New("process test CA")
	if err != nil {
		t.Fatal(err)
	}
	tlsDir := t.TempDir()
	first, err := ca.Issue("kvorum-node")
	if err != nil {
		t.Fatal(err)
	}
	files, err := ca.WriteFiles(tlsDir, "node", first) // one certificate for all: host names are not checked
	if err != nil {
		t.Fatal(err)
	}
	tlsFlags := []string{"--peer-cert-file", files.Cert, "--peer-key-file", files.Key, "--peer-trusted-ca-file", files.CA}
	c := newCluster(t, 3, tlsFlags...)
	lead := c.waitLeader()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	follower := c.procs[lead.id%3]
	for i := 0; i < 50; i++ {
		if err := client(follower).Set(ctx, fmt.Sprintf("k%d", i), i, 0).Err(); err != nil {
			c.dumpLogs()
			t.Fatalf("set via follower %d: %v", follower.id, err)
		}
	}
	for _, p := range c.procs {
		if got, err := client(p).Get(ctx, "k49").Result(); err != nil || got != "49" {
			t.Fatalf("node %d: get k49 = %q, %v", p.id, got, err)
		}
	}

	// A node without peer TLS cannot join.
	host := "127.0.0.4"
	p4 := &proc{id: 4, host: host, dataDir: filepath.Join(t.TempDir(), "node-4"),
		client: freePort(t, host), peer: freePort(t, host), admin: freePort(t, host)}
	jctx, jcancel := context.WithTimeout(ctx, 30*time.Second)
	defer jcancel()
	out, err := exec.CommandContext(jctx, binary, "start", "--id", "4", "--data-dir", p4.dataDir+"-plain",
		"--client-addr", p4.client, "--peer-addr", p4.peer, "--admin-addr", p4.admin,
		"--join", c.procs[0].peer).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "refused by peer TLS") {
		t.Fatalf("a node without peer TLS joining: %v\n%s", err, out)
	}
	if jctx.Err() != nil {
		t.Fatal("the refused join did not give up by itself")
	}
	if b, _ := os.ReadFile(c.procs[0].dataDir + ".log"); !strings.Contains(string(b), "refused a plaintext peer connection") {
		t.Fatalf("node 1 did not log the refusal:\n%s", b)
	}

	// Rotation: a new certificate of the CA in the same files.
	second, err := ca.Issue("kvorum-node")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.WriteFiles(tlsDir, "node", second); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range c.procs {
		for {
			s, err := servedPeerSerial(p.peer, first, ca)
			if err == nil && s.Cmp(second.Cert.SerialNumber) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d serves serial %v (%v), want the rotated %v", p.id, s, err, second.Cert.SerialNumber)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// A node with a certificate of the CA joins through them.
	c.procs = append(c.procs, p4)
	c.start(p4, append([]string{"--join", c.procs[0].peer}, tlsFlags...)...)
	c.waitLeader()
	if n, err := client(p4).DBSize(ctx).Result(); err != nil || n != 50 {
		c.dumpLogs()
		t.Fatalf("joined node: dbsize %d, %v", n, err)
	}
}

package server

import (
	"fmt"
	"io"
	"math/big"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/devca"
	"github.com/kvorum/kvorum/internal/transport"
)

// writePeerTLS writes a fresh certificate of ca for node name into dir
// (with ca as the CA file) and returns the files and the certificate.
func writePeerTLS(t *testing.T, dir, name string, ca, certCA *devca.CA) (transport.TLSFiles, *devca.Issued) {
	t.Helper()
	cert, err := certCA.Issue(name)
	if err != nil {
		t.Fatal(err)
	}
	f, err := ca.WriteFiles(dir, name, cert)
	if err != nil {
		t.Fatal(err)
	}
	return transport.TLSFiles{CertFile: f.Cert, KeyFile: f.Key, CAFile: f.CA}, cert
}

// peerServedSerial connects to a node's peer port as a peer with cert
// (transport.ProbeTLS), opens a framed stream (the node answers it only
// once it accepted the certificate) and returns the serial number of the
// node's certificate.
func peerServedSerial(addr string, cert *devca.Issued, ca *devca.CA) (*big.Int, error) {
	pair, err := cert.TLS()
	if err != nil {
		return nil, err
	}
	c, err := transport.ProbeTLS(addr, &pair, ca.Pool(), 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if _, err := c.Write([]byte("KVR\x02R\x00\x00\x00\x00\x00\x00\x00\x00")); err != nil {
		return nil, err
	}
	var ack [4]byte
	if _, err := io.ReadFull(c, ack[:]); err != nil || string(ack[:]) != "KVR\x02" {
		return nil, fmt.Errorf("answers %q, %v", ack[:], err)
	}
	return c.ConnectionState().PeerCertificates[0].SerialNumber, nil
}

// counterSum is the sum of a counter family's values in n's registry.
func counterSum(t *testing.T, n *Node, name string) float64 {
	t.Helper()
	mfs, err := n.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// A cluster whose peer port is mutual TLS: writes replicate, a follower
// forwards writes, a node with a certificate of the cluster's CA joins
// and catches up by snapshot, through a member whose certificate was
// rotated meanwhile (no restart); a node with a certificate of another
// CA, or none, cannot join (a clear error, at once, and the members are
// unchanged), and one posing as a member with such a certificate gets
// no Raft message through.
func TestPeerMTLSCluster(t *testing.T) {
	ca, err := devca.New("cluster")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := newClusterWith(t, 3, func(id uint64, cfg *Config) {
		cfg.PeerTLS, _ = writePeerTLS(t, filepath.Join(dir, fmt.Sprint(id)), fmt.Sprintf("node-%d", id), ca, ca)
	})
	ctx := testCtx(t, 90*time.Second)
	lead := c.waitLeader()
	follower := lead%3 + 1

	// The peer port speaks TLS only: a plaintext stream is answered with
	// the refusal.
	pc, err := net.DialTimeout("tcp", c.node(1).PeerAddr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = pc.SetDeadline(time.Now().Add(2 * time.Second))
	_, _ = pc.Write([]byte("KVR\x02R\x00\x00\x00\x00\x00\x00\x00\x00"))
	ack := make([]byte, 4)
	_, err = io.ReadFull(pc, ack)
	_ = pc.Close()
	if err != nil || string(ack) != "KVRt" {
		t.Fatalf("plaintext stream to a TLS peer port: answer %q, %v", ack, err)
	}

	// Writes through a follower are forwarded to the leader and
	// replicated; enough of them that the log is truncated and a new
	// node needs a snapshot.
	cl := c.client(follower)
	for i := 0; i < 150; i++ {
		if err := cl.Set(ctx, fmt.Sprintf("key-%03d", i), i, 0).Err(); err != nil {
			t.Fatalf("set via follower %d: %v", follower, err)
		}
	}
	if n := c.node(follower).trans.Stats().CallsSent; n == 0 {
		t.Fatalf("follower %d forwarded no call", follower)
	}
	for id := uint64(1); id <= 3; id++ {
		if got, err := c.client(id).Get(ctx, "key-149").Result(); err != nil || got != "149" {
			t.Fatalf("node %d: get key-149 = %q, %v", id, got, err)
		}
	}
	if st := c.node(lead).Status(); st.FirstIndex <= 11 {
		t.Fatalf("log was not truncated: first index %d", st.FirstIndex)
	}

	// Rotation: node 2's certificate replaced on disk; new connections get
	// the new one, without a restart.
	probe, err := ca.Issue("probe")
	if err != nil {
		t.Fatal(err)
	}
	_, rotated := writePeerTLS(t, filepath.Join(dir, "2"), "node-2", ca, ca)
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := peerServedSerial(c.node(2).PeerAddr(), probe, ca)
		if err == nil && s.Cmp(rotated.Cert.SerialNumber) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node 2 still serves serial %v (err %v), want the rotated %v", s, err, rotated.Cert.SerialNumber)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// A node with a certificate of the cluster's CA joins through node 2
	// and catches up by snapshot.
	cfg4 := nodeConfig(t, 4, c.net)
	cfg4.Join = c.node(2).PeerAddr()
	cfg4.PeerTLS, _ = writePeerTLS(t, filepath.Join(dir, "4"), "node-4", ca, ca)
	c.cfgs[4] = cfg4
	c.start(4)
	if n := len(c.node(1).Status().Members); n != 4 {
		t.Fatalf("members after join: %d", n)
	}
	if n, err := c.client(4).DBSize(ctx).Result(); err != nil || n != 150 {
		t.Fatalf("new node dbsize = %d, %v", n, err)
	}
	if err := c.client(4).Set(ctx, "from-4", "x", 0).Err(); err != nil {
		t.Fatalf("write via the new node: %v", err)
	}

	// Nodes that cannot join: a certificate of another CA (with that CA's
	// file, so that it starts), no peer TLS at all; both are told at once.
	intruder, err := devca.New("intruder")
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		name string
		tls  func(cfg *Config)
		want string
	}{
		{"another CA", func(cfg *Config) {
			cfg.PeerTLS, _ = writePeerTLS(t, filepath.Join(dir, "5"), "node-5", intruder, intruder)
		}, "refused by peer TLS"},
		{"no TLS", func(*Config) {}, "refused by peer TLS"},
		// With the cluster's CA file and a certificate of another CA, the
		// node does not even start.
		{"another CA's certificate, the cluster's CA file", func(cfg *Config) {
			cfg.PeerTLS, _ = writePeerTLS(t, filepath.Join(dir, "5b"), "node-5", ca, intruder)
		}, "does not verify against the CA file"},
	} {
		cfg := nodeConfig(t, 5, c.net)
		cfg.Join = c.node(1).PeerAddr()
		bad.tls(&cfg)
		start := time.Now()
		n, err := Start(cfg)
		if err == nil {
			_ = n.Stop()
			t.Fatalf("%s: a node joined", bad.name)
		}
		if !strings.Contains(err.Error(), bad.want) {
			t.Fatalf("%s: join error %q, want %q", bad.name, err, bad.want)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Fatalf("%s: the refused join took %v", bad.name, took)
		}
		t.Logf("%s: %v", bad.name, err)
	}
	if n := len(c.node(1).Status().Members); n != 4 {
		t.Fatalf("members after the refused joins: %d", n)
	}

	// An impostor of node 3 with the cluster's members and id (so the same
	// cluster id) but a certificate of another CA: its Raft messages do
	// not get through, it never learns a leader.
	refusedBefore := counterSum(t, c.node(1), "kvorum_transport_tls_refused_total")
	imp := nodeConfig(t, 3, c.net)
	imp.PeerInterceptor = nil // not the cluster's partitioner: its own id would clash
	imp.InitialCluster = map[uint64]string{}
	for id, cfg := range c.cfgs {
		if id <= 3 {
			imp.InitialCluster[id] = cfg.PeerAddr
		}
	}
	imp.PeerTLS, _ = writePeerTLS(t, filepath.Join(dir, "impostor"), "node-3", intruder, intruder)
	impostor, err := Start(imp)
	if err != nil {
		t.Fatalf("start impostor: %v", err)
	}
	defer impostor.Stop()
	time.Sleep(time.Second) // several election timeouts of the impostor
	if l := impostor.Status().Leader; l != 0 {
		t.Fatalf("the impostor learned leader %d", l)
	}
	if after := counterSum(t, c.node(1), "kvorum_transport_tls_refused_total"); after <= refusedBefore {
		t.Fatalf("node 1 refused no connection of the impostor (%v, before %v)", after, refusedBefore)
	}
	if err := c.client(1).Set(ctx, "after-impostor", "1", 0).Err(); err != nil {
		t.Fatalf("write with the impostor around: %v", err)
	}
	if n := len(c.node(1).Status().Members); n != 4 {
		t.Fatalf("members with the impostor around: %d", n)
	}
}

// The other way round: a node with peer TLS cannot join a cluster without
// it, and is told so at once.
func TestPeerTLSNodeCannotJoinPlaintextCluster(t *testing.T) {
	c := newTestCluster(t, 1)
	ca, err := devca.New("cluster")
	if err != nil {
		t.Fatal(err)
	}
	cfg := nodeConfig(t, 2, c.net)
	cfg.Join = c.node(1).PeerAddr()
	cfg.PeerTLS, _ = writePeerTLS(t, t.TempDir(), "node-2", ca, ca)
	start := time.Now()
	n, err := Start(cfg)
	if err == nil {
		_ = n.Stop()
		t.Fatal("a node with peer TLS joined a cluster without")
	}
	if !strings.Contains(err.Error(), "refused by peer TLS") || time.Since(start) > 10*time.Second {
		t.Fatalf("join error after %v: %v", time.Since(start), err)
	}
	if got := len(c.node(1).Status().Members); got != 1 {
		t.Fatalf("members: %d", got)
	}
}

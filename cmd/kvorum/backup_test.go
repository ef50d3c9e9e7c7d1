package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvorum/kvorum/internal/server"
	"github.com/kvorum/kvorum/internal/testport"
)

// startSingle starts a one-node cluster on disk in dir (a new one, or the
// one a restore seeded, with its peer address).
func startSingle(t *testing.T, dir, peer string) *server.Node {
	t.Helper()
	client, err := testport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{ID: 1, DataDir: dir, ClientAddr: client, PeerAddr: peer, AdminAddr: "127.0.0.1:0",
		TickInterval: 10 * time.Millisecond, InitialCluster: map[uint64]string{1: peer}}
	n, err := server.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	return n
}

// `kvorum ctl backup` then `kvorum restore`: the restored node serves the
// data; damaged files and wrong command lines are refused with a clear
// message and exit status.
func TestCtlBackupAndRestore(t *testing.T) {
	dir := t.TempDir()
	peer, err := testport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	n := startSingle(t, filepath.Join(dir, "src"), peer)
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: n.ClientAddr()})
	defer c.Close()
	if err := c.Set(ctx, "greeting", "hello", 0).Err(); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "b.kvb")
	code, stdout, stderr := runCmd("ctl", "--addr", n.AdminAddr(), "backup", "--out", out)
	if code != 0 || !strings.Contains(stdout, "backup "+out+": ") || !strings.Contains(stdout, "sha256 ") {
		t.Fatalf("ctl backup: exit %d\n%s%s", code, stdout, stderr)
	}
	if _, err := os.Stat(out + ".part"); !os.IsNotExist(err) {
		t.Fatalf("%s.part left: %v", out, err)
	}
	code, _, stderr = runCmd("ctl", "--addr", n.AdminAddr(), "backup", "--out", out)
	if code != 1 || !strings.Contains(stderr, "exists") {
		t.Fatalf("backup over an existing file: exit %d: %s", code, stderr)
	}
	code, _, stderr = runCmd("ctl", "--addr", n.AdminAddr(), "backup")
	if code != 2 || !strings.Contains(stderr, "backup needs --out FILE") {
		t.Fatalf("backup without --out: exit %d: %s", code, stderr)
	}
	n.Stop()

	good, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.kvb")
	os.WriteFile(bad, good[:len(good)-100], 0o600)
	ic := "1=" + peer
	code, _, stderr = runCmd("restore", "--from", bad, "--id", "1", "--data-dir", filepath.Join(dir, "x"), "--initial-cluster", ic)
	if code != 1 || !strings.Contains(stderr, "truncated") || !strings.Contains(stderr, "nothing was written") {
		t.Fatalf("restore of a truncated backup: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); !os.IsNotExist(err) {
		t.Fatal("a refused restore created the data directory")
	}
	code, _, stderr = runCmd("restore", "--from", out, "--id", "2", "--data-dir", filepath.Join(dir, "x"), "--initial-cluster", ic)
	if code != 2 || !strings.Contains(stderr, "does not list this node's id 2") {
		t.Fatalf("restore with an id not in the cluster: exit %d: %s", code, stderr)
	}
	code, stdout, stderr = runCmd("restore", "--from", out, "--id", "1", "--data-dir", filepath.Join(dir, "dst"), "--initial-cluster", ic)
	if code != 0 || !strings.Contains(stdout, "restored ") {
		t.Fatalf("restore: exit %d\n%s%s", code, stdout, stderr)
	}
	m := startSingle(t, filepath.Join(dir, "dst"), peer)
	c2 := redis.NewClient(&redis.Options{Addr: m.ClientAddr()})
	defer c2.Close()
	if v, err := c2.Get(ctx, "greeting").Result(); err != nil || v != "hello" {
		t.Fatalf("restored node: GET greeting = %q, %v", v, err)
	}
}

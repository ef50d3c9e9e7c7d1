package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvorum/kvorum/internal/devca"
	"github.com/kvorum/kvorum/internal/kvdiff"
	"github.com/kvorum/kvorum/internal/localsrv"
	"github.com/kvorum/kvorum/internal/server"
	"github.com/kvorum/kvorum/internal/testport"
)

// startTestCluster starts an in-process 3-node cluster under t's temporary
// directory and returns a node's client address; the nodes stop when the
// test ends. mod, if not nil, changes each node's configuration first.
func startTestCluster(t *testing.T, mod func(*server.Config)) *server.Node {
	t.Helper()
	dir := t.TempDir()
	cluster := map[uint64]string{}
	cfgs := make([]server.Config, 3)
	for i := range cfgs {
		var addrs [3]string
		for j := range addrs {
			a, err := testport.Addr()
			if err != nil {
				t.Fatal(err)
			}
			addrs[j] = a
		}
		id := uint64(i + 1)
		cluster[id] = addrs[1]
		cfgs[i] = server.Config{ID: id, DataDir: filepath.Join(dir, fmt.Sprint(id)), ClientAddr: addrs[0], PeerAddr: addrs[1], AdminAddr: addrs[2], LeaseReads: true}
	}
	var nodes []*server.Node
	t.Cleanup(func() {
		if err := stopAll(nodes); err != nil {
			t.Error(err)
		}
	})
	for i := range cfgs {
		cfgs[i].InitialCluster = cluster
		if mod != nil {
			mod(&cfgs[i])
		}
		n, err := server.Start(cfgs[i])
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	if err := waitLeaders(context.Background(), nodes, 20*time.Second, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	return nodes[0]
}

// runImportCmd runs kvorum import with args and returns its exit code and
// output.
func runImportCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(append([]string{"import", "--progress", "never"}, args...), &out, &errOut)
	t.Logf("kvorum import %s: exit %d\nstdout:\n%sstderr:\n%s", strings.Join(args, " "), code, out.String(), errOut.String())
	return code, out.String(), errOut.String()
}

// TestImportRDB: redis-server SAVEs an RDB file with keys of every type
// and encoding (kvdiff.EveryType), TTLs, a key that expires before the
// import, a key in database 1 and a function library; kvorum import loads
// it into a cluster, where every key is what redis-server has (deadlines
// included); skipped keys and errors are counted; a truncated or corrupt
// file, or one of an unknown version, exits 1 saying how far it got.
func TestImportRDB(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server not found: apt-get install redis-server (make test does this, via scripts/ensure-test-deps.sh)")
	}
	ctx := context.Background()
	dir := t.TempDir()
	addrs, procs, err := localsrv.RedisServers(ctx, "redis-server", dir, "src", 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = localsrv.StopAll(procs) })
	ref := redis.NewClient(&redis.Options{Addr: addrs[0], Protocol: 2})
	defer ref.Close()
	db1 := redis.NewClient(&redis.Options{Addr: addrs[0], Protocol: 2, DB: 1})
	defer db1.Close()
	if err := kvdiff.Fill(ctx, ref); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		ref.Set(ctx, "soon", "gone", 300*time.Millisecond).Err(),
		db1.Set(ctx, "other", "db1", 0).Err(),
		ref.FunctionLoad(ctx, "#!lua name=lib\nredis.register_function('f', function() return 1 end)").Err(),
		ref.Save(ctx).Err(),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "src-1", "dump.rdb")
	kvAddr := startTestCluster(t, nil).ClientAddr()
	kv := redis.NewClient(&redis.Options{Addr: kvAddr, Protocol: 2})
	defer kv.Close()
	time.Sleep(400 * time.Millisecond) // "soon" has expired in the file

	keys := kvdiff.EveryTypeKeys()
	code, out, _ := runImportCmd(t, "--rdb", file, "--addr", kvAddr, "--batch", "7")
	if code != 0 {
		t.Fatalf("import: exit %d", code)
	}
	for _, want := range []string{
		fmt.Sprintf("imported %d keys from %s (RDB version 10)", len(keys), file),
		"by type: string 6, list 2, set 4, zset 3, hash 3, stream 2",
		"skipped: 1 expired keys, 1 function libraries, 1 keys of other databases (db 1: 1; --all-dbs imports them)",
		"errors: 0",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q", want)
		}
	}
	for _, k := range keys {
		// What redis-server answers after a RESTORE: the key restored
		// over itself (a PFADD's string is "raw", a restored one
		// "embstr").
		if err := kvdiff.Move(ctx, ref, ref, k, true); err != nil {
			t.Fatal(err)
		}
		want, err := kvdiff.Describe(ctx, ref, k)
		if err != nil {
			t.Fatal(err)
		}
		got, err := kvdiff.Describe(ctx, kv, k)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("key %s differs\nredis-server:\n%s\nkvorum:\n%s", k, want, got)
		}
	}
	if n, err := kv.Exists(ctx, "soon", "other").Result(); err != nil || n != 0 {
		t.Errorf("skipped keys: EXISTS = %d %v", n, err)
	}

	// Again: every key exists (BUSYKEY) unless --replace.
	code, out, errOut := runImportCmd(t, "--rdb", file, "--addr", kvAddr)
	if code != 1 || !strings.Contains(out, fmt.Sprintf("errors: %d", len(keys))) || !strings.Contains(out, "BUSYKEY") ||
		!strings.Contains(errOut, fmt.Sprintf("%d keys failed", len(keys))) {
		t.Errorf("second import without --replace: exit %d", code)
	}
	code, out, errOut = runImportCmd(t, "--rdb", file, "--addr", kvAddr, "--replace", "--all-dbs", "--progress", "always")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("imported %d keys", len(keys)+1)) || !strings.Contains(errOut, "MiB read (100%), 21 keys imported") {
		t.Errorf("import --replace --all-dbs: exit %d", code)
	}
	if v, err := kv.Get(ctx, "other").Result(); err != nil || v != "db1" {
		t.Errorf("--all-dbs: GET other = %q %v", v, err)
	}

	// Damaged files.
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	flipped := bytes.Clone(data)
	flipped[len(flipped)-20] ^= 0xff
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"truncated.rdb", data[:len(data)*2/3], "keys were imported before the error"},
		{"flipped.rdb", flipped, "keys were imported before the error"},
		{"version.rdb", append([]byte("REDIS0099"), data[9:]...), "(0 keys were imported before the error)"},
		{"notrdb.rdb", []byte("hello, world"), "(0 keys were imported before the error)"},
	} {
		code, _, errOut := runImportCmd(t, "--rdb", write(c.name, c.data), "--addr", kvAddr, "--replace")
		if code != 1 || !strings.Contains(errOut, c.want) || !strings.Contains(errOut, c.name) {
			t.Errorf("%s: exit %d, stderr %q, want 1 and %q", c.name, code, errOut, c.want)
		}
	}
	if code, _, errOut := runImportCmd(t, "--rdb", filepath.Join(dir, "nope.rdb"), "--addr", kvAddr); code != 1 || !strings.Contains(errOut, "no such file") {
		t.Errorf("missing file: exit %d, %q", code, errOut)
	}
}

func TestImportBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "--rdb FILE is required"},
		{[]string{"--rdb", "x", "extra"}, `unexpected argument "extra"`},
		{[]string{"--rdb", "x", "--batch", "0"}, "--batch must be between 1 and 10000"},
		{[]string{"--rdb", "x", "--db", "1", "--all-dbs"}, "--db and --all-dbs exclude each other"},
		{[]string{"--rdb", "x", "--cert", "c"}, "--cert and --key go together"},
		{[]string{"--rdb", "x", "--cacert", "c"}, "need --tls"},
		{[]string{"--rdb", "x", "--progress", "sometimes"}, "--progress must be"},
	} {
		var out, errOut bytes.Buffer
		code := run(append([]string{"import"}, c.args...), &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("import %v: exit %d, %q; want 2 and %q", c.args, code, errOut.String(), c.want)
		}
	}
}

// kvorum import reaches a node that wants a password, over TLS: --tls
// --cacert and --password (or REDISCLI_AUTH); a wrong password or no
// TLS is "cannot reach", exit 1.
func TestImportTLSAndPassword(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server not found: apt-get install redis-server")
	}
	ctx := context.Background()
	dir := t.TempDir()
	addrs, procs, err := localsrv.RedisServers(ctx, "redis-server", dir, "src", 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = localsrv.StopAll(procs) })
	ref := redis.NewClient(&redis.Options{Addr: addrs[0], Protocol: 2})
	defer ref.Close()
	for _, err := range []error{ref.Set(ctx, "a", "1", 0).Err(), ref.RPush(ctx, "l", "x", "y").Err(), ref.Save(ctx).Err()} {
		if err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "src-1", "dump.rdb")
	ca, err := devca.New("import test CA")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Server("kvorum", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	caFile, cert, key := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "node.crt"), filepath.Join(dir, "node.key")
	if err := ca.WriteCA(caFile); err != nil {
		t.Fatal(err)
	}
	if err := leaf.Write(cert, key); err != nil {
		t.Fatal(err)
	}
	node := startTestCluster(t, func(c *server.Config) {
		a, err := testport.Addr()
		if err != nil {
			t.Fatal(err)
		}
		c.TLSClientAddr, c.TLSCertFile, c.TLSKeyFile = a, cert, key
		c.RequirePass = "secret"
	})
	tlsAddr := node.TLSClientAddr()
	if code, _, errOut := runImportCmd(t, "--rdb", file, "--addr", tlsAddr, "--tls", "--cacert", caFile, "--password", "wrong"); code != 1 || !strings.Contains(errOut, "cannot reach kvorum") {
		t.Errorf("wrong password: exit %d, %q", code, errOut)
	}
	if code, _, errOut := runImportCmd(t, "--rdb", file, "--addr", tlsAddr, "--password", "secret"); code != 1 || !strings.Contains(errOut, "cannot reach kvorum") {
		t.Errorf("no --tls on the TLS port: exit %d, %q", code, errOut)
	}
	t.Setenv("REDISCLI_AUTH", "secret")
	if code, out, _ := runImportCmd(t, "--rdb", file, "--addr", tlsAddr, "--tls", "--cacert", caFile); code != 0 || !strings.Contains(out, "imported 2 keys") {
		t.Errorf("TLS and REDISCLI_AUTH: exit %d", code)
	}
	kv := redis.NewClient(&redis.Options{Addr: node.ClientAddr(), Password: "secret", Protocol: 2})
	defer kv.Close()
	if v, err := kv.LRange(ctx, "l", 0, -1).Result(); err != nil || strings.Join(v, ",") != "x,y" {
		t.Errorf("LRANGE l = %v %v", v, err)
	}
}

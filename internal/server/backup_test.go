package server

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/redis/go-redis/v9"

	"github.com/kvorum/kvorum/internal/storage"
)

// takeBackup streams a backup from node id of c.
func takeBackup(t *testing.T, c *testCluster, id uint64) []byte {
	t.Helper()
	b, err := c.node(id).Backup(testCtx(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var buf bytes.Buffer
	if _, err := b.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// restoredCluster seeds n nodes on disk from the backups (backups[i] for
// node i+1; the last one for the rest) and starts them.
func restoredCluster(t *testing.T, n int, backups ...[]byte) *testCluster {
	t.Helper()
	dir := t.TempDir()
	return newClusterSeeded(t, n, func(id uint64, cfg *Config) {
		cfg.FS, cfg.DataDir = vfs.Default, filepath.Join(dir, fmt.Sprintf("node-%d", id))
	}, func(id uint64, cfg Config) {
		b := backups[min(int(id), len(backups))-1]
		if _, err := Restore(RestoreConfig{From: bytes.NewReader(b), DataDir: cfg.DataDir, ID: id, InitialCluster: cfg.InitialCluster}); err != nil {
			t.Fatalf("restore node %d: %v", id, err)
		}
	})
}

// A backup taken through any node holds every write acknowledged before
// it and nothing after; a cluster restored from it serves that data,
// users included, and goes on from there.
func TestBackupRestoreCluster(t *testing.T) {
	src := newTestCluster(t, 3)
	ctx := testCtx(t, 60*time.Second)
	lead := src.waitLeader()
	other := lead%3 + 1
	w := src.client(other)
	for i := 0; i < 300; i++ {
		if err := w.Set(ctx, fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i), 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	w.RPush(ctx, "list", "a", "b", "c")
	w.HSet(ctx, "hash", "f", "1", "g", "2")
	w.ZAdd(ctx, "zset", redis.Z{Score: 1, Member: "m"})
	w.Set(ctx, "ttl", "x", time.Hour)
	if err := w.Do(ctx, "ACL", "SETUSER", "alice", "on", ">pw", "~*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	// Replicated configuration, a lease and a lock held under it.
	if err := w.Do(ctx, "CONFIG", "SET", "hash-max-listpack-entries", "7").Err(); err != nil {
		t.Fatal(err)
	}
	lease, err := w.Do(ctx, "LEASE", "GRANT", "600000").Int64()
	if err != nil {
		t.Fatal(err)
	}
	token, err := w.Do(ctx, "LOCK", "ACQUIRE", "app:lock", lease).Int64()
	if err != nil {
		t.Fatal(err)
	}
	// From a follower that did not take the writes itself: the read
	// barrier makes it wait for them.
	from := other%3 + 1
	if from == lead {
		from = from%3 + 1
	}
	b := takeBackup(t, src, from)
	if err := w.Set(ctx, "after", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	info, err := storage.ReadBackup(bytes.NewReader(b), nil)
	if err != nil {
		t.Fatal(err)
	}
	if info.Header.NodeID != from || info.Header.ClusterID != src.node(from).clusterID {
		t.Fatalf("header %+v", info.Header)
	}
	src.stopAll()

	dst := restoredCluster(t, 3, b)
	dst.waitLeader()
	r := dst.client(2)
	if n, err := r.DBSize(ctx).Result(); err != nil || n != 304 {
		t.Fatalf("DBSIZE %d, %v; want 304", n, err)
	}
	for _, k := range []int{0, 150, 299} {
		if v, err := r.Get(ctx, fmt.Sprintf("k%d", k)).Result(); err != nil || v != fmt.Sprintf("v%d", k) {
			t.Fatalf("k%d = %q, %v", k, v, err)
		}
	}
	if l, _ := r.LRange(ctx, "list", 0, -1).Result(); strings.Join(l, ",") != "a,b,c" {
		t.Fatalf("list %v", l)
	}
	if ttl, _ := r.TTL(ctx, "ttl").Result(); ttl <= 50*time.Minute {
		t.Fatalf("ttl %v", ttl)
	}
	if n, _ := r.Exists(ctx, "after").Result(); n != 0 {
		t.Fatal("a write made after the backup is in it")
	}
	if u, err := r.Do(ctx, "ACL", "GETUSER", "alice").Result(); err != nil || u == nil {
		t.Fatalf("ACL GETUSER alice: %v, %v", u, err)
	}
	if cfg, err := r.ConfigGet(ctx, "hash-max-listpack-entries").Result(); err != nil || cfg["hash-max-listpack-entries"] != "7" {
		t.Fatalf("CONFIG GET hash-max-listpack-entries: %v, %v; want 7", cfg, err)
	}
	if ttl, err := r.Do(ctx, "LEASE", "TTL", lease).Int64(); err != nil || ttl <= 0 {
		t.Fatalf("LEASE TTL %d: %d, %v", lease, ttl, err)
	}
	if info, err := r.Do(ctx, "LOCK", "INFO", "app:lock").Result(); err != nil || !strings.Contains(fmt.Sprint(info), fmt.Sprint(token)) {
		t.Fatalf("LOCK INFO app:lock: %v, %v; want the holder's token %d", info, err, token)
	}
	if err := r.Set(ctx, "new", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	st := dst.node(1).Status()
	if st.CommitIndex <= info.Header.Index || st.ClusterID == info.Header.ClusterID {
		t.Fatalf("restored cluster: commit %d (backup at %d), cluster id %x (source's %x)", st.CommitIndex, info.Header.Index, st.ClusterID, info.Header.ClusterID)
	}
}

// Nodes seeded from different backups are different clusters: the odd
// one is never admitted, and never receives the others' data.
func TestRestoreFromDifferentBackupsDoNotMix(t *testing.T) {
	src := newTestCluster(t, 3)
	ctx := testCtx(t, 30*time.Second)
	src.waitLeader()
	w := src.client(1)
	w.Set(ctx, "a", "1", 0)
	b1 := takeBackup(t, src, 1)
	w.Set(ctx, "b", "2", 0)
	b2 := takeBackup(t, src, 1)
	src.stopAll()

	dst := restoredCluster(t, 3, b1, b1, b2)
	ids := []uint64{dst.node(1).clusterID, dst.node(2).clusterID, dst.node(3).clusterID}
	if ids[0] != ids[1] || ids[2] == ids[0] {
		t.Fatalf("cluster ids %x", ids)
	}
	deadline := time.Now().Add(10 * time.Second)
	for dst.node(1).Status().Leader == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if dst.node(1).Status().Leader == 0 {
		t.Fatal("nodes 1 and 2 (same backup) elected no leader")
	}
	dst.client(1).Set(ctx, "c", "3", 0)
	time.Sleep(time.Second)
	if st := dst.node(3).Status(); st.Leader != 0 || st.Term > 5 && st.Role == "follower" {
		t.Fatalf("node 3, seeded from another backup, follows: %+v", st)
	}
}

func TestRestoreRefuses(t *testing.T) {
	good := testBackupBytes(t)
	dir := t.TempDir()
	members := map[uint64]string{1: "127.0.0.1:1"}
	cases := []struct {
		name, dir, want string
		from            []byte
		id              uint64
	}{
		{"truncated", "a", "truncated", good[:len(good)/2], 1},
		{"altered", "b", "", flip(good, len(good)-40), 1},
		{"not a backup", "c", "not a kvorum backup", []byte("REDIS0010\xfa"), 1},
		{"id not a member", "d", "does not list", good, 2},
	}
	for _, tc := range cases {
		d := filepath.Join(dir, tc.dir)
		_, err := Restore(RestoreConfig{From: bytes.NewReader(tc.from), DataDir: d, ID: tc.id, InitialCluster: members})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", tc.name, err)
		}
		if names, _ := os.ReadDir(dir); len(names) != 0 {
			t.Errorf("%s: left %d entries in %s", tc.name, len(names), dir)
		}
	}
	// A directory in use is never touched.
	used := filepath.Join(dir, "used")
	os.MkdirAll(used, 0o755)
	os.WriteFile(filepath.Join(used, "MANIFEST"), []byte("x"), 0o644)
	if _, err := Restore(RestoreConfig{From: bytes.NewReader(good), DataDir: used, ID: 1, InitialCluster: members}); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("non-empty dir: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(used, "MANIFEST")); string(b) != "x" {
		t.Fatal("the directory in use was changed")
	}
}

func flip(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 1
	return c
}

// testBackupBytes is a backup of a one-node cluster with one key.
func testBackupBytes(t *testing.T) []byte {
	c := newTestCluster(t, 1)
	c.client(1).Set(testCtx(t, 10*time.Second), "k", "v", 0)
	return takeBackup(t, c, 1)
}

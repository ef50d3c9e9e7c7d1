package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/kv"
	"github.com/kvorum/kvorum/internal/storage"
)

// toFormat1 rewrites a stopped node's store as the release before format 2
// left it: user keys under kv.V1Key, no store format marker.
func toFormat1(t *testing.T, cfg Config) {
	t.Helper()
	db, err := storage.Open(cfg.DataDir, storage.Options{FS: cfg.FS})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := db.NewBatch()
	n := 0
	if err := storage.EmitSpan(db, []byte{0x11}, []byte{0x12}, func(k, v []byte) error {
		n++
		return b.Set(kv.V1Key(k), v, nil)
	}); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no format 2 user keys")
	}
	if err := b.DeleteRange([]byte{0x11}, []byte{0x12}, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete([]byte{0x01, 'i', 'f'}, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if f, err := storage.LoadStoreFormat(db); err != nil || f != 1 {
		t.Fatalf("format %d %v", f, err)
	}
}

// Nodes restarted on stores of the release before format 2 convert them
// at start (kv.MigrateV2 in Start) and serve everything written before,
// TTLs and collections included; one node is converted and restarted
// while the others run (a rolling upgrade) and catches up by the log.
func TestStartMigratesFormat1Stores(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx := testCtx(t, 60*time.Second)
	acked := map[string]string{}
	lead := c.waitLeader()
	cl := c.client(lead)
	for i := 0; i < 100; i++ {
		k, v := fmt.Sprintf("m%d", i), fmt.Sprintf("v%d", i)
		if err := cl.Set(ctx, k, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
		acked[k] = v
	}
	if err := cl.HSet(ctx, "h", "f", "1", "g", "2").Err(); err != nil {
		t.Fatal(err)
	}
	if err := cl.Set(ctx, "t", "x", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	// A rolling step: one follower stops, is converted, restarts.
	var follower uint64
	for id := uint64(1); id <= 3; id++ {
		if id != lead {
			follower = id
			break
		}
	}
	c.stop(follower)
	toFormat1(t, c.cfgs[follower])
	if err := cl.Set(ctx, "while-down", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	acked["while-down"] = "1"
	cfg := c.cfgs[follower]
	cfg.InitialCluster = nil // recovered from disk
	c.cfgs[follower] = cfg
	c.start(follower)
	checkAcked(t, c, follower, acked)
	// Then all of them.
	c.stopAll()
	for id := uint64(1); id <= 3; id++ {
		toFormat1(t, c.cfgs[id])
		cfg := c.cfgs[id]
		cfg.InitialCluster = nil
		c.cfgs[id] = cfg
		c.start(id)
	}
	c.waitLeader()
	for id := uint64(1); id <= 3; id++ {
		checkAcked(t, c, id, acked)
		cl := c.client(id)
		if got, err := cl.HGetAll(ctx, "h").Result(); err != nil || len(got) != 2 || got["f"] != "1" || got["g"] != "2" {
			t.Fatalf("node %d: HGETALL h = %v %v", id, got, err)
		}
		if ttl, err := cl.TTL(ctx, "t").Result(); err != nil || ttl <= 0 || ttl > time.Hour {
			t.Fatalf("node %d: TTL t = %v %v", id, ttl, err)
		}
		n := c.node(id)
		if f, err := storage.LoadStoreFormat(n.db); err != nil || f != 2 {
			t.Fatalf("node %d: format %d %v", id, f, err)
		}
		if err := storage.EmitSpan(n.db, []byte{0x10, 0x00, 0x01}, []byte{0x11}, func(k, _ []byte) error {
			return fmt.Errorf("format 1 key %x left", k)
		}); err != nil {
			t.Fatalf("node %d: %v", id, err)
		}
	}
}

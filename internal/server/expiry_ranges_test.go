package server

import (
	"bytes"
	"encoding/binary"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/kv"
	"github.com/kvorum/kvorum/internal/slot"
	"github.com/kvorum/kvorum/internal/storage"
)

// TestRangesExpiryPerSlot: on a cluster of several ranges, one of them
// led by another node than range 1's, keys with a TTL in every range are
// deleted on every replica by the sweep of their own range's leader (the
// per-slot index, kv.Deadlines), their index entries go with them while
// those of keys with a later deadline stay in their slot's span, and
// every range's leader collects its own WATCH tombstones (KVORUM.TOMBGC),
// advancing that range's floor, not only range 1's.
func TestRangesExpiryPerSlot(t *testing.T) {
	var skew atomic.Int64 // ms added to every node's clock
	now := func() int64 { return time.Now().UnixMilli() + skew.Load() }
	c := newRangeClusterWith(t, testRangeCount, func(_ uint64, cfg *Config) { cfg.Now = now })
	ctx := testCtx(t, 2*time.Minute)
	n1 := c.node(1)
	lead1, _ := n1.store.Replica(1).Leader()
	to := lead1%3 + 1
	if err := n1.transferLeaderOf(ctx, 3, to); err != nil {
		t.Fatalf("transfer range 3 to node %d: %v", to, err)
	}
	cl := c.client(to)
	var short, kept []string
	for rg := storage.RangeID(1); rg <= testRangeCount; rg++ {
		for i := 0; i < 20; i++ {
			k := keyIn("ttl", rg, i)
			short = append(short, k)
			if err := cl.Set(ctx, k, "v", 200*time.Millisecond).Err(); err != nil {
				t.Fatal(err)
			}
		}
		for _, k := range []string{keyIn("keep", rg, 0), keyIn("later", rg, 0)} {
			kept = append(kept, k)
			if err := cl.Set(ctx, k, "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		// A deletion: a WATCH tombstone in the key's slot.
		if err := cl.Del(ctx, keyIn("later", rg, 0)).Err(); err != nil {
			t.Fatal(err)
		}
		if err := cl.Set(ctx, keyIn("later", rg, 0), "v", 10*time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for id := uint64(1); id <= 3; id++ {
		for {
			n, err := c.client(id).DBSize(ctx).Result()
			if err == nil && n == int64(len(kept)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d DBSIZE %d, %v: want %d, the expired keys deleted", id, n, err, len(kept))
			}
			time.Sleep(50 * time.Millisecond)
		}
		for i, k := range append(short, kept...) {
			want := int64(0)
			if i >= len(short) {
				want = 1
			}
			if n, err := c.client(id).Exists(ctx, k).Result(); err != nil || n != want {
				t.Fatalf("node %d EXISTS %s: %d, %v; want %d", id, k, n, err, want)
			}
		}
		db := c.node(id).store.DB()
		if due, err := kv.ExpiredKeys(db, 1<<62, 1000); err != nil || len(due) != testRangeCount {
			t.Fatalf("node %d: index entries %q, %v; want the %d keys of 10 h", id, due, err, testRangeCount)
		}
		// Each remaining entry is in its range's slot span: what a
		// snapshot of the range carries.
		for rg := storage.RangeID(1); rg <= testRangeCount; rg++ {
			d := c.node(id).store.Replica(rg).Descriptor()
			start, end := kv.SlotSpan(d.StartSlot, d.EndSlot)
			k := []byte(keyIn("later", rg, 0))
			var found bool
			if err := storage.EmitSpan(db, start, end, func(sk, _ []byte) error {
				found = found || (len(sk) > 6 && sk[5] == 'e' && bytes.HasSuffix(sk, k) && binary.BigEndian.Uint16(sk[1:]) == slot.Of(k))
				return nil
			}); err != nil || !found {
				t.Fatalf("node %d: no index entry of %s in range %d's span (%v)", id, k, rg, err)
			}
		}
	}
	// TOMBGC per range: each range's floor is set (its first sweep finds
	// none), then moves on when the clock enters a later epoch.
	floors := func(id uint64) (fs []uint32) {
		for rg := storage.RangeID(1); rg <= testRangeCount; rg++ {
			v, closer, err := c.node(id).store.DB().Get(storage.ReplicatedRangeKey(rg, []byte{'D'}))
			if errors.Is(err, pebble.ErrNotFound) {
				fs = append(fs, 0)
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			fs = append(fs, binary.BigEndian.Uint32(v))
			closer.Close()
		}
		return fs
	}
	waitFloors := func(atLeast uint32) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for id := uint64(1); id <= 3; id++ {
			for {
				fs := floors(id)
				ok := true
				for _, f := range fs {
					ok = ok && f >= atLeast
				}
				if ok {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("node %d: tombstone floors %v, want every range's at %d or more", id, fs, atLeast)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	const epochMs = 10 * 60 * 1000 // kv/tomb.go's tombstone epoch
	waitFloors(uint32(now()/epochMs) - 1)
	skew.Store(3 * epochMs)
	waitFloors(uint32(now()/epochMs) - 1)
}

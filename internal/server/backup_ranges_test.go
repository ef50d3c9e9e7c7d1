package server

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvorum/kvorum/internal/storage"
)

// maxRangeValue returns the largest value of replicated range-local key
// name over ranges 1..ranges of node n (nil: none has it).
func maxRangeValue(t *testing.T, n *Node, ranges int, name string) []byte {
	t.Helper()
	var out []byte
	for rg := storage.RangeID(1); rg <= storage.RangeID(ranges); rg++ {
		v, c, err := n.db.Get(storage.ReplicatedRangeKey(rg, []byte(name)))
		if err != nil {
			continue
		}
		if bytes.Compare(v, out) > 0 {
			out = append([]byte(nil), v...)
		}
		_ = c.Close()
	}
	return out
}

func maxApplied(n *Node) uint64 {
	var m uint64
	for _, r := range n.store.Replicas() {
		m = max(m, r.AppliedIndex())
	}
	return m
}

// TestBackupRestoreRanges: a backup of a cluster split into 4 ranges
// holds every range's keys, read from one snapshot; restored into a new
// 3-node cluster it is one range over every slot, at the highest applied
// index of the ranges, with the ranges' version counters, FLUSHALL
// indexes and tombstone floors merged to their max. Every key and TTL is
// there, collections take new elements, and WATCH aborts on a change and
// only then.
func TestBackupRestoreRanges(t *testing.T) {
	src := newRangeCluster(t, testRangeCount)
	ctx := testCtx(t, 2*time.Minute)
	w := src.client(1)
	// A FLUSHALL in every range (at a different index in each).
	if err := w.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	strs, hashes, sets := map[string]string{}, []string{}, []string{}
	for rg := storage.RangeID(1); rg <= testRangeCount; rg++ {
		for i := 0; i < 30; i++ {
			k := keyIn(fmt.Sprintf("s%d:", rg), rg, i)
			strs[k] = fmt.Sprintf("v%d-%d", rg, i)
			ttl := time.Duration(0)
			if i%3 == 0 {
				ttl = time.Hour
			}
			if err := w.Set(ctx, k, strs[k], ttl).Err(); err != nil {
				t.Fatal(err)
			}
		}
		// Range 3 creates many more collections: its version counter
		// ends highest.
		nColl := 2
		if rg == 3 {
			nColl = 20
		}
		for i := 0; i < nColl; i++ {
			h, s := keyIn(fmt.Sprintf("h%d:", rg), rg, i), keyIn(fmt.Sprintf("set%d:", rg), rg, i)
			if err := w.HSet(ctx, h, "a", "1", "b", "2").Err(); err != nil {
				t.Fatal(err)
			}
			if err := w.SAdd(ctx, s, "x", "y").Err(); err != nil {
				t.Fatal(err)
			}
			hashes, sets = append(hashes, h), append(sets, s)
		}
	}
	from := uint64(2)
	before := maxApplied(src.node(from))
	b := takeBackup(t, src, from)
	after := maxApplied(src.node(from))
	info, err := storage.ReadBackup(bytes.NewReader(b), nil)
	if err != nil {
		t.Fatal(err)
	}
	if info.Header.Index < before || info.Header.Index > after {
		t.Fatalf("backup index %d, ranges' applied max %d before and %d after", info.Header.Index, before, after)
	}
	if !info.Desc.IsFull() || info.Desc.RangeID != 1 || info.Header.RangeID != 1 {
		t.Fatalf("backup descriptor %+v, header range %d: want range 1 over every slot", info.Desc, info.Header.RangeID)
	}
	wantMax := map[string][]byte{}
	for _, name := range []string{"v", "f", "D"} {
		wantMax[name] = maxRangeValue(t, src.node(from), testRangeCount, name)
	}
	if wantMax["v"] == nil || wantMax["f"] == nil {
		t.Fatalf("source has no version counter or FLUSHALL index: %v", wantMax)
	}
	if v1, c, err := src.node(from).db.Get(storage.ReplicatedRangeKey(1, []byte("v"))); err == nil {
		if bytes.Equal(v1, wantMax["v"]) {
			t.Fatalf("range 1's version counter is already the max: the test proves nothing")
		}
		_ = c.Close()
	}
	src.stopAll()

	dst := restoredCluster(t, 3, b)
	dst.waitLeader()
	n1 := dst.node(1)
	if n1.store.ReplicaCount() != 1 || !n1.store.Replica(1).Descriptor().IsFull() {
		t.Fatalf("restored node: %d ranges, range 1 %+v", n1.store.ReplicaCount(), n1.store.Replica(1).Descriptor())
	}
	for name, want := range wantMax {
		got := maxRangeValue(t, n1, 1, name)
		if !bytes.Equal(got, want) {
			t.Errorf("restored %q = %x, want the ranges' max %x", name, got, want)
		}
	}
	r := dst.client(3)
	if n, err := r.DBSize(ctx).Result(); err != nil || n != int64(len(strs)+len(hashes)+len(sets)) {
		t.Fatalf("DBSIZE %d, %v; want %d", n, err, len(strs)+len(hashes)+len(sets))
	}
	withTTL := 0
	for k, v := range strs {
		if got, err := r.Get(ctx, k).Result(); err != nil || got != v {
			t.Fatalf("GET %s = %q, %v; want %q", k, got, err, v)
		}
		ttl, err := r.TTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl > 50*time.Minute {
			withTTL++
		} else if ttl != -1 {
			t.Fatalf("TTL %s = %v", k, ttl)
		}
	}
	if withTTL != 4*10 {
		t.Fatalf("%d keys kept their TTL, want 40", withTTL)
	}
	for _, h := range hashes {
		if err := r.HSet(ctx, h, "c", "3").Err(); err != nil {
			t.Fatal(err)
		}
		m, err := r.HGetAll(ctx, h).Result()
		if err != nil || len(m) != 3 || m["a"] != "1" || m["c"] != "3" {
			t.Fatalf("HGETALL %s = %v, %v", h, m, err)
		}
	}
	for _, s := range sets {
		if n, err := r.SAdd(ctx, s, "z", "x").Result(); err != nil || n != 1 {
			t.Fatalf("SADD %s: %d, %v", s, n, err)
		}
		m, err := r.SMembers(ctx, s).Result()
		sort.Strings(m)
		if err != nil || fmt.Sprint(m) != "[x y z]" {
			t.Fatalf("SMEMBERS %s = %v, %v", s, m, err)
		}
	}
	// A collection deleted and created again after the restore starts
	// empty (its new version is above its old elements').
	if err := r.Del(ctx, hashes[0]).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.HSet(ctx, hashes[0], "n", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if m, err := r.HGetAll(ctx, hashes[0]).Result(); err != nil || len(m) != 1 {
		t.Fatalf("re-created hash: %v, %v", m, err)
	}
	// WATCH: a change by another client aborts EXEC; no change commits.
	var k1, k2 string
	for k := range strs {
		if k1 == "" {
			k1 = k
		} else if k2 == "" {
			k2 = k
		}
	}
	watch := func(key string, change bool) error {
		return r.Watch(ctx, func(tx *redis.Tx) error {
			if change {
				if err := dst.client(1).Set(ctx, key, "other", 0).Err(); err != nil {
					return err
				}
			}
			_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Set(ctx, key, "tx", 0)
				return nil
			})
			return err
		}, key)
	}
	if err := watch(k1, true); err != redis.TxFailedErr {
		t.Fatalf("WATCH %s with a change: %v, want the transaction aborted", k1, err)
	}
	if err := watch(k2, false); err != nil {
		t.Fatalf("WATCH %s without a change: %v", k2, err)
	}
	if v, _ := r.Get(ctx, k2).Result(); v != "tx" {
		t.Fatalf("%s = %q after the transaction", k2, v)
	}
	// An absent key watched, created meanwhile: aborted.
	if err := watch("absent-key", true); err != redis.TxFailedErr {
		t.Fatalf("WATCH of an absent key created meanwhile: %v", err)
	}
}

// TestMergeRangeKeys: the counters take the max over ranges (by value,
// a longer tombstone floor over a shorter one), any other name range 1's
// value, else the lowest range's; every key is renamed to the target
// range, in key order.
func TestMergeRangeKeys(t *testing.T) {
	u64 := func(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
	floor := func(e uint32, at uint64) []byte {
		return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint32(nil, e), at)
	}
	p := func(rg storage.RangeID, name string, v []byte) kvPair {
		return kvPair{storage.ReplicatedRangeKey(rg, []byte(name)), v}
	}
	got := mergeRangeKeys(1, [][]kvPair{
		{p(1, "D", floor(7, 100)), p(1, "f", u64(300)), p(1, "v", u64(9))},
		{p(2, "D", floor(8, 50)), p(2, "c", []byte("two")), p(2, "f", u64(20)), p(2, "v", u64(1000))},
		{p(5, "D", floor(8, 40)[:4]), p(5, "c", []byte("five")), p(5, "v", u64(256))},
	})
	want := []kvPair{p(1, "D", floor(8, 50)), p(1, "c", []byte("two")), p(1, "f", u64(300)), p(1, "v", u64(1000))}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("merged\n%v\nwant\n%v", got, want)
	}
	// A later epoch wins over a longer value of an earlier one.
	got = mergeRangeKeys(1, [][]kvPair{{p(1, "D", floor(5, 900))}, {p(2, "D", floor(9, 0)[:4])}})
	if len(got) != 1 || !bytes.Equal(got[0].v, floor(9, 0)[:4]) {
		t.Fatalf("tombstone floor: %v", got)
	}
	got = mergeRangeKeys(1, [][]kvPair{{p(1, "c", []byte("one"))}, {p(2, "c", []byte("two"))}})
	if len(got) != 1 || string(got[0].v) != "one" {
		t.Fatalf("range 1's copy not kept: %v", got)
	}
}

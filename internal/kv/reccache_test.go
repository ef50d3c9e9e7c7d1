package kv

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/kvdiff"
	"github.com/kvorum/kvorum/internal/reccache"
)

// TestRecordCacheMatchesStore applies the same seeded random command
// sequences (every data type, kvdiff.Gen) to a store with a RecordCache and
// to one without, several commands per indexed batch as a Ready round
// applies them, with a clock that moves so that keys expire. Replies must be
// identical command by command and the stores identical key by key at the
// end. The caches are tiny (constant eviction) and large (everything kept).
//
// The cached store also has a read cache (reccache.Shared) that its record
// cache publishes to after every commit, as a node does, and every read
// goes through it (ReadCached): a read cache that kept a record a write
// replaced, or took a fill it should have refused, answers differently.
// Tiny read caches evict constantly and refuse records bigger than 128
// bytes; large ones keep everything.
func TestRecordCacheMatchesStore(t *testing.T) {
	for _, size := range []struct {
		records int
		shared  int64
	}{{4, 64 << 10}, {1 << 20, 64 << 20}} {
		for seed := uint64(1); seed <= 6; seed++ {
			t.Run(fmt.Sprintf("cache=%d/seed=%d", size.records, seed), func(t *testing.T) {
				cache, shared := reccache.New(size.records), reccache.NewShared(size.shared)
				cache.Share(shared)
				checkCacheSeq(t, seed, cache, shared)
			})
		}
	}
}

func checkCacheSeq(t *testing.T, seed uint64, cache *reccache.Cache, shared *reccache.Shared) {
	plain, cached := openMem(t), openMem(t)
	g := kvdiff.NewGen(seed, true)
	now := int64(1_700_000_000_000)
	var pb, cb *pebble.Batch
	commit := func() {
		if pb == nil {
			return
		}
		for _, b := range []*pebble.Batch{pb, cb} {
			if err := b.Commit(pebble.NoSync); err != nil {
				t.Fatal(err)
			}
			b.Close()
		}
		cache.Publish()
		pb, cb = nil, nil
	}
	index := uint64(0)
	for i := 0; i < 1500; i++ {
		c := g.Next()
		if i%7 == 0 {
			now += 400 // keys set with PX/EX expire along the way
		}
		args := toArgs(c...)
		if _, ok := Check(args, Limits{}); !ok {
			continue
		}
		if !Lookup(args[0]).Write {
			commit()
			if want, got := Read(plain, args, now), ReadCached(cached, shared, args, now); !reflect.DeepEqual(want, got) {
				t.Fatalf("command %d %v: read without cache %v, with cache %v", i, c, want, got)
			}
			continue
		}
		if pb == nil {
			pb, cb = plain.NewIndexedBatch(), cached.NewIndexedBatch()
		}
		index++
		want := Apply(pb, args, Env{Now: now, Index: index})
		got := Apply(cb, args, Env{Now: now, Index: index, Records: cache})
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("command %d %v: reply without cache %v, with cache %v", i, c, want, got)
		}
		if i%5 == 4 {
			commit()
		}
	}
	commit()
	if cache.Len() == 0 {
		t.Fatal("the cache never held a record")
	}
	if st := shared.Stats(); st.Hits == 0 || st.Keys == 0 {
		t.Fatalf("the read cache never answered a read: %+v", st)
	}
	sameStores(t, plain, cached)
}

func sameStores(t *testing.T, a, b *pebble.DB) {
	t.Helper()
	ia, err := a.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ia.Close()
	ib, err := b.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ib.Close()
	va, vb := ia.First(), ib.First()
	n := 0
	for ; va && vb; va, vb = ia.Next(), ib.Next() {
		if !bytes.Equal(ia.Key(), ib.Key()) || !bytes.Equal(ia.Value(), ib.Value()) {
			t.Fatalf("stores differ at pair %d: %q=%q without cache, %q=%q with", n, ia.Key(), ia.Value(), ib.Key(), ib.Value())
		}
		n++
	}
	if va != vb {
		t.Fatalf("stores differ in length after %d pairs (without cache more: %v)", n, va)
	}
	if n == 0 {
		t.Fatal("empty stores: the sequence wrote nothing")
	}
}

// TestRecordCacheKeptByWrites: kv keeps the cache exact through writes:
// a SET caches the new record (a small value with it, a large one header
// only), DEL caches the key as absent, FLUSHALL empties the cache.
func TestRecordCacheKeptByWrites(t *testing.T) {
	c := reccache.New(100)
	db := openMem(t)
	b := db.NewIndexedBatch()
	defer b.Close()
	env := func(i uint64) Env { return Env{Now: 1, Index: i, Records: c} }
	Apply(b, toArgs("SET", "small", "12345"), env(1))
	Apply(b, toArgs("SET", "large", string(make([]byte, 4096))), env(2))
	Apply(b, toArgs("SET", "gone", "x"), env(3))
	Apply(b, toArgs("DEL", "gone"), env(4))
	if enc, full, ok := c.Get(metaKey([]byte("small"))); !ok || !full || string(enc[recordHeader:]) != "12345" {
		t.Fatalf("small value: cached %q full=%v ok=%v", enc, full, ok)
	}
	if enc, full, ok := c.Get(metaKey([]byte("large"))); !ok || full || len(enc) != recordHeader {
		t.Fatalf("large value: cached %d bytes full=%v ok=%v", len(enc), full, ok)
	}
	if enc, _, ok := c.Get(metaKey([]byte("gone"))); !ok || enc != nil {
		t.Fatalf("deleted key: cached %q ok=%v", enc, ok)
	}
	Apply(b, toArgs("FLUSHALL"), env(5))
	if c.Len() != 0 {
		t.Fatalf("FLUSHALL left %d keys", c.Len())
	}
}

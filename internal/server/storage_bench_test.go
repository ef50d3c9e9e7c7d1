package server

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/kv"
	"github.com/kvorum/kvorum/internal/kvbench"
	"github.com/kvorum/kvorum/internal/reccache"
	"github.com/kvorum/kvorum/internal/storage"
)

// BenchmarkStoreZipfian measures the state machine's cost per operation on
// a node's real store (storage.Open with its defaults, on disk): 100,000
// records of 1 KiB loaded and flushed, then YCSB's scrambled zipfian keys.
// GET is a read (kv.Read on the DB), GET-cached one through the read cache
// as a node reads; SET is an update applied into an
// indexed batch of 64 commands, committed without sync, as a Ready round
// does, without and with the record cache (SET-records, as a node applies).
func BenchmarkStoreZipfian(b *testing.B) {
	const records = 100_000
	db, err := storage.Open(b.TempDir(), storage.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	value := []byte(strings.Repeat("v", 1024))
	key := func(n uint64) []byte { return kvbench.AppendKey(nil, n) }
	for i := uint64(0); i < records; i += 1000 {
		batch := db.NewIndexedBatch()
		for j := i; j < i+1000; j++ {
			kv.Apply(batch, [][]byte{[]byte("SET"), key(j), value}, kv.Env{Now: 1000})
		}
		if err := batch.Commit(pebble.NoSync); err != nil {
			b.Fatal(err)
		}
		batch.Close()
	}
	if err := db.Flush(); err != nil {
		b.Fatal(err)
	}
	gen := kvbench.NewScrambled(records)
	rng := rand.New(rand.NewPCG(1, 2))
	keys := make([][]byte, 1<<16)
	for i := range keys {
		keys[i] = key(gen.Next(rng.Float64()))
	}
	b.Run("GET", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			kv.Read(db, [][]byte{[]byte("GET"), keys[i%len(keys)]}, 1000)
		}
	})
	// The node's read path: through the read cache (Config.ReadCache).
	b.Run("GET-cached", func(b *testing.B) {
		shared := reccache.NewShared(DefaultReadCache)
		for i := 0; b.Loop(); i++ {
			kv.ReadCached(db, shared, [][]byte{[]byte("GET"), keys[i%len(keys)]}, 1000)
		}
		st := shared.Stats()
		b.ReportMetric(float64(st.Hits)/float64(st.Hits+st.Misses), "hits/op")
	})
	set := func(b *testing.B, records *reccache.Cache) {
		batch := db.NewIndexedBatch()
		for i := 0; b.Loop(); i++ {
			kv.Apply(batch, [][]byte{[]byte("SET"), keys[i%len(keys)], value}, kv.Env{Now: 1000, Records: records})
			if i%64 == 63 {
				if err := batch.Commit(pebble.NoSync); err != nil {
					b.Fatal(err)
				}
				batch.Close()
				batch = db.NewIndexedBatch()
			}
		}
		batch.Close()
	}
	b.Run("SET", func(b *testing.B) { set(b, nil) })
	// The node's apply path: with the record cache (kvMachine's size).
	b.Run("SET-records", func(b *testing.B) { set(b, reccache.New(DefaultRecordCache)) })
}

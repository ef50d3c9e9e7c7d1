package kv

import (
	"context"
	"flag"
	"reflect"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/redis/go-redis/v9"

	"github.com/kvorum/kvorum/internal/kvdiff"
)

var (
	diffSeeds = flag.Int("kv.seeds", 12, "TestRandomDiffAllTypes: number of seeds to run")
	diffSeed  = flag.Uint64("kv.seed", 0, "TestRandomDiffAllTypes: run only this seed (0: seeds 1..kv.seeds)")
	diffCmds  = flag.Int("kv.cmds", 600, "TestRandomDiffAllTypes: commands per seed")
)

// TestRandomDiffAllTypes sends seeded random command sequences over every
// data type (kvdiff.Gen) to redis-server and to the state machine and
// requires identical replies. A mismatch reports the seed and a minimal
// sequence that still shows it. Run many seeds with
//
//	go test ./internal/kv -run TestRandomDiffAllTypes -kv.seeds 500
func TestRandomDiffAllTypes(t *testing.T) {
	rc := kvdiff.StartRedis(t)
	seeds := []uint64{}
	if *diffSeed != 0 {
		seeds = append(seeds, *diffSeed)
	} else {
		for s := 1; s <= *diffSeeds; s++ {
			seeds = append(seeds, uint64(s))
		}
	}
	total := 0
	for _, seed := range seeds {
		g := kvdiff.NewGen(seed, true)
		seq := make([][]string, *diffCmds)
		for i := range seq {
			seq[i] = g.Next()
		}
		n, ok := diffRun(t, rc, seq)
		total += n
		if ok {
			continue
		}
		min := minimize(seq[:n], func(s [][]string) bool { _, ok := diffRun(t, rc, s); return !ok })
		var b strings.Builder
		for _, c := range min {
			b.WriteString("  " + kvdiff.String(c) + "\n")
		}
		want, got := replay(t, rc, min)
		t.Fatalf("seed %d: kvorum and redis-server differ after %d commands; minimal sequence (%d commands, from an empty database):\n%s  redis: %#v\n  kv:    %#v\nrerun: go test ./internal/kv -run TestRandomDiffAllTypes -kv.seed %d",
			seed, n, len(min), b.String(), want, got, seed)
	}
	t.Logf("%d seeds, %d commands compared", len(seeds), total)
}

// diffRun runs seq on fresh databases; it returns how many commands ran
// and false at the first mismatch (n includes the mismatching command).
func diffRun(t *testing.T, rc *redis.Client, seq [][]string) (int, bool) {
	ctx := context.Background()
	if err := rc.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	rc.ScriptFlush(ctx)
	db, closeDB := openMemDB(t)
	defer closeDB()
	for i, c := range seq {
		want, got := diffOne(ctx, rc, db, c)
		if !reflect.DeepEqual(want, got) {
			return i + 1, false
		}
	}
	checkExpiryIndex(t, db)
	return len(seq), true
}

func diffOne(ctx context.Context, rc *redis.Client, db *pebble.DB, c []string) (want, got any) {
	iargs := make([]any, len(c))
	for j, a := range c {
		iargs[j] = a
	}
	name := strings.ToUpper(c[0])
	wv, werr := rc.Do(ctx, iargs...).Result()
	return kvdiff.Normalize(name, wv, werr), kvdiff.NormalizeReply(name, runKV(db, c))
}

// replay returns the replies of the last command of seq on both sides.
func replay(t *testing.T, rc *redis.Client, seq [][]string) (want, got any) {
	ctx := context.Background()
	rc.FlushAll(ctx)
	rc.ScriptFlush(ctx)
	db, closeDB := openMemDB(t)
	defer closeDB()
	for _, c := range seq {
		want, got = diffOne(ctx, rc, db, c)
	}
	return want, got
}

// minimize shrinks a failing sequence (delta debugging: drop chunks, then
// single commands, while failing(seq) stays true).
func minimize(seq [][]string, failing func([][]string) bool) [][]string {
	for chunk := len(seq) / 2; chunk >= 1; chunk /= 2 {
		for i := 0; i+chunk <= len(seq); {
			cand := append(append([][]string{}, seq[:i]...), seq[i+chunk:]...)
			if len(cand) > 0 && failing(cand) {
				seq = cand
			} else {
				i += chunk
			}
		}
	}
	return seq
}

// openMemDB is openMem with an explicit close, for many databases in one test.
func openMemDB(t testing.TB) (*pebble.DB, func()) {
	t.Helper()
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem(), Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	return db, func() { db.Close() }
}

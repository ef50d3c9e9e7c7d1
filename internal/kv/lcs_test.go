package kv

import (
	"context"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"

	"github.com/kvorum/kvorum/internal/kvdiff"
	"github.com/kvorum/kvorum/internal/reply"
)

// TestLCSRandomAgainstRedis compares LCS (the string, LEN, and the IDX
// ranges with MINMATCHLEN and WITHMATCHLEN, whose order and boundaries
// depend on Redis's walk back through the table) on random strings with
// redis-server.
func TestLCSRandomAgainstRedis(t *testing.T) {
	rc := kvdiff.StartRedis(t)
	db := openMem(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 5))
	word := func(alpha string) string {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = alpha[rng.IntN(len(alpha))]
		}
		return string(b)
	}
	total := 0
	for round := 0; round < 300; round++ {
		alpha := []string{"ab", "abc", "abcdefgh", "a"}[rng.IntN(4)]
		for _, c := range [][]string{
			{"SET", "a", word(alpha)}, {"SET", "b", word(alpha)},
			{"LCS", "a", "b"}, {"LCS", "b", "a", "LEN"},
			{"LCS", "a", "b", "IDX", "WITHMATCHLEN"},
			{"LCS", "b", "a", "IDX", "MINMATCHLEN", strconv.Itoa(rng.IntN(5)), "WITHMATCHLEN"},
			{"LCS", "a", "b", "IDX", "MINMATCHLEN", strconv.Itoa(rng.IntN(5))},
		} {
			want, got := diffOne(ctx, rc, db, c)
			total++
			if !reflect.DeepEqual(want, got) {
				a, _ := rc.Get(ctx, "a").Result()
				b, _ := rc.Get(ctx, "b").Result()
				t.Fatalf("a=%q b=%q %q\n  redis: %#v\n  kv:    %#v", a, b, c, want, got)
			}
		}
	}
	t.Logf("%d commands compared", total)
}

// The IDX reply is a map (RESP3 %2, RESP2 a flat array, as Redis).
func TestLCSReplyKinds(t *testing.T) {
	db := openMem(t)
	run(t, db, 0, "MSET", "a", "ohmytext", "b", "mynewtext")
	r := run(t, db, 0, "LCS", "a", "b", "IDX", "MINMATCHLEN", "4", "WITHMATCHLEN")
	if r.Kind != reply.KindMap || show(r) != "[matches [[[4 7] [5 8] 4]] len 6]" {
		t.Fatalf("LCS IDX: kind %d %s", r.Kind, show(r))
	}
	if r := run(t, db, 0, "LCS", "a", "b", "LEN"); r.Kind != reply.KindInt || r.Int != 6 {
		t.Fatalf("LCS LEN: %s", show(r))
	}
	if r := run(t, db, 0, "LCS", "a", "b"); r.Kind != reply.KindBulk || string(r.Str) != "mytext" {
		t.Fatalf("LCS: %s", show(r))
	}
}

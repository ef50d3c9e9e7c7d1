package server

import (
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvorum/kvorum/internal/storage"
)

// TestRangesEvalShaEveryRange: a script loaded once (range 1 keeps the
// cache) runs by EVALSHA on keys of every range, through every node: the
// node resolves EVALSHA to EVAL of the cached body before proposing it to
// a range other than range 1, whose replicas cannot read the cache (kv's
// systemState answers NOSCRIPT there). An unknown sha still answers
// NOSCRIPT, and go-redis's Script.Run falls back to EVAL.
func TestRangesEvalShaEveryRange(t *testing.T) {
	c := newRangeCluster(t, testRangeCount)
	ctx := testCtx(t, time.Minute)
	body := "return redis.call('INCRBY', KEYS[1], ARGV[1])"
	sha, err := c.client(1).ScriptLoad(ctx, body).Result()
	if err != nil {
		t.Fatal(err)
	}
	for rg := storage.RangeID(1); rg <= testRangeCount; rg++ {
		k := keyIn("evalsha:", rg, 0)
		for id := uint64(1); id <= 3; id++ {
			if err := c.client(id).EvalSha(ctx, sha, []string{k}, 2).Err(); err != nil {
				t.Fatalf("EVALSHA on a key of range %d through node %d: %v", rg, id, err)
			}
		}
		if got, err := c.client(1).Get(ctx, k).Int(); err != nil || got != 6 {
			t.Fatalf("range %d: %s = %d, %v; want 6", rg, k, got, err)
		}
		if err := c.client(2).EvalSha(ctx, "0000000000000000000000000000000000000000", []string{k}, 1).Err(); err == nil || err.Error() != "NOSCRIPT No matching script. Please use EVAL." {
			t.Fatalf("EVALSHA of an unknown script in range %d: %v", rg, err)
		}
		s := redis.NewScript("return redis.call('INCRBY', KEYS[1], 10)")
		if got, err := s.Run(ctx, c.client(3), []string{k}).Int(); err != nil || got != 16 {
			t.Fatalf("Script.Run of a new script in range %d: %d, %v", rg, got, err)
		}
	}
}

// TestRangesEvalShaInMulti: EVALSHA queued in MULTI/EXEC (go-redis
// TxPipeline) runs on keys of every range, through every node, as it
// does outside a transaction: the node resolves it inside the
// transaction's KVORUM.EXEC before proposing it to a range other than
// range 1. An unknown sha answers NOSCRIPT in its place of EXEC's reply,
// and the transaction's other commands run (as in Redis).
func TestRangesEvalShaInMulti(t *testing.T) {
	c := newRangeCluster(t, testRangeCount)
	ctx := testCtx(t, time.Minute)
	body := "return redis.call('INCRBY', KEYS[1], ARGV[1])"
	sha, err := c.client(2).ScriptLoad(ctx, body).Result()
	if err != nil {
		t.Fatal(err)
	}
	roSha, err := c.client(3).ScriptLoad(ctx, "return redis.call('GET', KEYS[1])").Result()
	if err != nil {
		t.Fatal(err)
	}
	for rg := storage.RangeID(1); rg <= testRangeCount; rg++ {
		k := keyIn("txsha:", rg, 0)
		for id := uint64(1); id <= 3; id++ {
			tx := c.client(id).TxPipeline()
			a := tx.EvalSha(ctx, sha, []string{k}, 2)
			b := tx.EvalShaRO(ctx, roSha, []string{k})
			if _, err := tx.Exec(ctx); err != nil {
				t.Fatalf("range %d, node %d: MULTI EVALSHA EXEC: %v (%v, %v)", rg, id, err, a.Err(), b.Err())
			}
			if got, err := a.Int(); err != nil || got != 2*int(id) {
				t.Fatalf("range %d, node %d: EVALSHA in MULTI = %d, %v; want %d", rg, id, got, err, 2*id)
			}
			if got, err := b.Text(); err != nil || got != strconv.Itoa(2*int(id)) {
				t.Fatalf("range %d, node %d: EVALSHA_RO in MULTI = %q, %v; want %d", rg, id, got, err, 2*id)
			}
		}
		tx := c.client(3).TxPipeline()
		unk := tx.EvalSha(ctx, "0000000000000000000000000000000000000000", []string{k}, 1)
		incr := tx.IncrBy(ctx, k, 10)
		if _, err := tx.Exec(ctx); err == nil {
			t.Fatalf("range %d: a transaction with an unknown sha answered no error", rg)
		}
		if err := unk.Err(); err == nil || err.Error() != "NOSCRIPT No matching script. Please use EVAL." {
			t.Fatalf("range %d: EVALSHA of an unknown script in MULTI: %v", rg, err)
		}
		if got, err := incr.Result(); err != nil || got != 16 {
			t.Fatalf("range %d: INCRBY after the NOSCRIPT in the transaction: %d, %v", rg, got, err)
		}
	}
}

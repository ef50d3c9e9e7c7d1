package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvorum/kvorum/internal/kvdiff"
)

// TestDumpRestoreWithRedis moves keys of every type and encoding
// (kvdiff.EveryType: big encodings, TTLs, streams with groups, pending
// entries and consumers) both ways between redis-server and a 3-node
// cluster with DUMP and RESTORE ... ABSTTL, through a follower: after
// each move the two servers describe every key alike (type, OBJECT
// ENCODING, contents, deadline, XINFO STREAM FULL, XPENDING). Corrupted
// payloads (a flipped byte, truncated) get Redis's error from both and
// leave the key as it was.
func TestDumpRestoreWithRedis(t *testing.T) {
	if !kvdiff.HaveRedis() {
		t.Skip("redis-server not installed")
	}
	ctx := context.Background()
	ref := redis.NewClient(&redis.Options{Addr: kvdiff.StartServer(t), Protocol: 2})
	defer ref.Close()
	c := newTestCluster(t, 3)
	lead := c.waitLeader()
	kv := c.client(followersOf(lead, 3)[0])
	compare := func(dir string, a, b *redis.Client) {
		t.Helper()
		for _, k := range kvdiff.EveryTypeKeys() {
			want, err := kvdiff.Describe(ctx, a, k)
			if err != nil {
				t.Fatalf("%s: describe %s at the source: %v", dir, k, err)
			}
			got, err := kvdiff.Describe(ctx, b, k)
			if err != nil {
				t.Fatalf("%s: describe %s at the destination: %v", dir, k, err)
			}
			if got != want {
				t.Errorf("%s: key %s differs\nsource:\n%s\ndestination:\n%s", dir, k, want, got)
			}
		}
	}

	// Redis -> kvorum.
	if err := kvdiff.Fill(ctx, ref); err != nil {
		t.Fatal(err)
	}
	for _, k := range kvdiff.EveryTypeKeys() {
		if err := kvdiff.Move(ctx, ref, kv, k, false); err != nil {
			t.Fatalf("redis -> kvorum: %v", err)
		}
		// What Redis answers after a RESTORE (a PFADD's string is
		// "raw", a restored one of that size "embstr"): the key
		// restored over itself.
		if err := kvdiff.Move(ctx, ref, ref, k, true); err != nil {
			t.Fatalf("redis -> redis: %v", err)
		}
	}
	compare("redis -> kvorum", ref, kv)

	// kvorum -> Redis: kvorum's own keys, built by the same commands.
	for _, cl := range []*redis.Client{ref, kv} {
		if err := cl.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := kvdiff.Fill(ctx, kv); err != nil {
		t.Fatal(err)
	}
	for _, k := range kvdiff.EveryTypeKeys() {
		if err := kvdiff.Move(ctx, kv, ref, k, false); err != nil {
			t.Fatalf("kvorum -> redis: %v", err)
		}
	}
	compare("kvorum -> redis", kv, ref)

	// Bad payloads: the same error from both, the key unchanged.
	payload, err := kv.Dump(ctx, "bighash").Result()
	if err != nil {
		t.Fatal(err)
	}
	flipped := []byte(payload)
	flipped[len(flipped)/2] ^= 0x40
	for name, bad := range map[string]string{"flipped": string(flipped), "truncated": payload[:len(payload)-3], "cut in half": payload[:len(payload)/2], "empty": ""} {
		want := ref.Restore(ctx, "str", 0, bad).Err()
		got := kv.Restore(ctx, "str", 0, bad).Err()
		wantR := ref.RestoreReplace(ctx, "str", 0, bad).Err()
		gotR := kv.RestoreReplace(ctx, "str", 0, bad).Err()
		if want == nil || got == nil || got.Error() != want.Error() || wantR == nil || gotR == nil || gotR.Error() != wantR.Error() {
			t.Errorf("%s payload: kvorum %v / %v, redis-server %v / %v", name, got, gotR, want, wantR)
		}
	}
	for _, cl := range []*redis.Client{ref, kv} {
		if v, err := cl.Get(ctx, "str").Result(); err != nil || v != "hello" {
			t.Errorf("after bad RESTOREs: GET str = %q %v", v, err)
		}
	}

	// DUMP follows the encoding thresholds (cluster-wide in kvorum): with
	// hash-max-listpack-entries 0 a one-field hash is a hashtable, and
	// both write it so, byte for byte.
	for _, cl := range []*redis.Client{ref, kv} {
		if err := cl.ConfigSet(ctx, "hash-max-listpack-entries", "0").Err(); err != nil {
			t.Fatal(err)
		}
		if err := cl.HSet(ctx, "tiny", "f", "v").Err(); err != nil {
			t.Fatal(err)
		}
	}
	want, err := ref.Dump(ctx, "tiny").Result()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := kv.Dump(ctx, "tiny").Result(); err != nil || got != want {
		t.Errorf("DUMP of a hashtable hash: kvorum %q %v, redis-server %q", got, err, want)
	}
	for _, cl := range []*redis.Client{ref, kv} {
		if err := cl.ConfigSet(ctx, "hash-max-listpack-entries", "512").Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// A RESTOREd list serves a client blocked in BLPOP on its key, as any
// push does (Redis: dbAdd signals the key as ready).
func TestRestoreWakesBlockedPop(t *testing.T) {
	ctx := context.Background()
	c := newTestCluster(t, 3)
	lead := c.waitLeader()
	kv := c.client(lead)
	if err := kv.RPush(ctx, "src", "a", "b").Err(); err != nil {
		t.Fatal(err)
	}
	payload, err := kv.Dump(ctx, "src").Result()
	if err != nil {
		t.Fatal(err)
	}
	waiter := c.client(followersOf(lead, 3)[0])
	got := make(chan []string, 1)
	go func() {
		v, err := waiter.BLPop(ctx, 10*time.Second, "dst").Result()
		if err != nil {
			v = []string{err.Error()}
		}
		got <- v
	}()
	time.Sleep(300 * time.Millisecond) // let BLPOP block
	if err := kv.Restore(ctx, "dst", 0, payload).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case v := <-got:
		if strings.Join(v, " ") != "dst a" {
			t.Fatalf("BLPOP = %v", v)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("BLPOP still blocked after RESTORE")
	}
	if v, err := kv.LRange(ctx, "dst", 0, -1).Result(); err != nil || strings.Join(v, ",") != "b" {
		t.Fatalf("LRANGE dst = %v %v", v, err)
	}
}

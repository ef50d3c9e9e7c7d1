package kv

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/reply"
)

// showEffects renders fx as "written=[...] published=[...] leases=[...]".
func showEffects(fx *Effects) string {
	var w, p, l []string
	for _, k := range fx.Written {
		w = append(w, string(k))
	}
	for _, m := range fx.Published {
		s := string(m.Channel) + ":" + string(m.Payload)
		if m.Shard {
			s = "shard " + s
		}
		p = append(p, s)
	}
	for _, e := range fx.Leases {
		l = append(l, fmt.Sprintf("%d@%d/%d", e.ID, e.RenewIdx, e.TTLMs))
	}
	return fmt.Sprintf("written=%v published=%v leases=%v", w, p, l)
}

// TestEffectsOfNestedCommandsInOrder: a transaction, a script and a
// FENCED write append what their commands did to the entry's Effects, in
// the order the commands ran, after what earlier entries recorded.
func TestEffectsOfNestedCommandsInOrder(t *testing.T) {
	db := openMem(t)
	var fx Effects
	index := uint64(10)
	apply := func(args [][]byte) Reply {
		t.Helper()
		index++
		b := db.NewIndexedBatch()
		defer b.Close()
		r := Apply(b, args, Env{Now: 1000, Index: index, Effects: &fx})
		if err := b.Commit(pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		return r
	}

	tx := EncodeExec(nil, nil, [][][]byte{
		toArgs("SET", "a", "1"),
		toArgs("PUBLISH", "ch", "m1"),
		toArgs("RPUSH", "l", "x"),
		toArgs("SPUBLISH", "sh", "m2"),
		toArgs("DEL", "a"),
		toArgs("PUBLISH", "ch", "m3"),
	})
	if r := apply(tx); show(r) != "[OK 0 1 0 1 0]" {
		t.Fatalf("EXEC: %s", show(r))
	}
	want := "written=[a l a] published=[ch:m1 shard sh:m2 ch:m3] leases=[]"
	if got := showEffects(&fx); got != want {
		t.Fatalf("after EXEC:\n got %s\nwant %s", got, want)
	}

	// A script appends to the same Effects, after the transaction.
	script := "redis.call('set', KEYS[1], 'v'); redis.call('publish', 'ch', 'lua1'); " +
		"redis.call('lpush', KEYS[2], 'z'); redis.call('spublish', 'sh', 'lua2'); return 1"
	if r := apply(toArgs("EVAL", script, "2", "k", "q")); show(r) != "1" {
		t.Fatalf("EVAL: %s", show(r))
	}
	want = "written=[a l a k q] published=[ch:m1 shard sh:m2 ch:m3 ch:lua1 shard sh:lua2] leases=[]"
	if got := showEffects(&fx); got != want {
		t.Fatalf("after EVAL:\n got %s\nwant %s", got, want)
	}

	// A lease and a lock: the grant, the lock's wait key, then FENCED's write.
	fx.Reset()
	lease := apply(toArgs("LEASE", "GRANT", "5000"))
	leaseID := fmt.Sprint(lease.Int)
	tok := apply(toArgs("LOCK", "ACQUIRE", "x", leaseID))
	if r := apply(toArgs("LOCK", "FENCED", "x", fmt.Sprint(tok.Int), "SET", "res", "a")); show(r) != "OK" {
		t.Fatalf("FENCED: %s", show(r))
	}
	want = fmt.Sprintf("written=[%s res] published=[] leases=[%s@%d/5000]", LockWaitKey([]byte("x")), leaseID, index-2)
	if got := showEffects(&fx); got != want {
		t.Fatalf("after LEASE, LOCK, FENCED:\n got %s\nwant %s", got, want)
	}
}

// TestEffectsOwnTheirBytes: what Effects holds does not change when the
// command's arguments are reused, and Reset empties it for the next round.
func TestEffectsOwnTheirBytes(t *testing.T) {
	db := openMem(t)
	var fx Effects
	b := db.NewIndexedBatch()
	defer b.Close()
	args := toArgs("PUBLISH", "chan", "payload")
	Apply(b, args, Env{Now: 1000, Index: 1, Effects: &fx})
	set := toArgs("SET", "key", "v")
	Apply(b, set, Env{Now: 1000, Index: 1, Seq: 1, Effects: &fx})
	copy(args[1], "XXXX")
	copy(args[2], "YYYYYYY")
	copy(set[1], "ZZZ")
	if got := showEffects(&fx); got != "written=[key] published=[chan:payload] leases=[]" {
		t.Fatalf("effects changed with the arguments: %s", got)
	}
	fx.Reset()
	if !fx.Empty() {
		t.Fatalf("after Reset: %s", showEffects(&fx))
	}
	if (*Effects)(nil).Empty() != true {
		t.Fatal("nil Effects not empty")
	}
}

// TestEffectsSetAllocatesNothingMore: recording a SET's key in a reused
// Effects costs no allocation.
func TestEffectsSetAllocatesNothingMore(t *testing.T) {
	db := openMem(t)
	args := toArgs("SET", "key:000001", strings.Repeat("v", 64))
	measure := func(fx *Effects) float64 {
		b := db.NewIndexedBatch()
		defer b.Close()
		for i := 0; i < 100; i++ { // warm up the batch and fx
			Apply(b, args, Env{Now: 1000, Effects: fx})
		}
		if fx != nil {
			fx.Reset()
		}
		return testing.AllocsPerRun(200, func() {
			Apply(b, args, Env{Now: 1000, Effects: fx})
			if fx != nil && len(fx.Written) == 100 {
				fx.Reset()
			}
		})
	}
	without, with := measure(nil), measure(new(Effects))
	if with > without {
		t.Fatalf("SET allocates %.2f times with Effects, %.2f without", with, without)
	}
}

// TestForEachPublish finds the replies a node fills with its receiver
// count: PUBLISH and SPUBLISH at top level and inside a transaction.
func TestForEachPublish(t *testing.T) {
	tx := EncodeExec([][]byte{[]byte("w")}, []uint64{3}, [][][]byte{
		toArgs("SET", "a", "1"),
		toArgs("SPUBLISH", "s", "m"),
		toArgs("PUBLISH", "c", "m"),
	})
	cmds := [][][]byte{toArgs("PUBLISH", "c1", "m"), toArgs("SET", "k", "v"), tx, toArgs("spublish", "s2", "m"), EncodeExec(nil, nil, [][][]byte{toArgs("PUBLISH", "c", "m")})}
	replies := []Reply{Int(0), OK, Array(OK, Int(0), Int(0)), Int(0), NilArray}
	var seen []string
	n := int64(0)
	ForEachPublish(cmds, replies, func(shard bool, channel []byte, r *Reply) {
		seen = append(seen, fmt.Sprintf("%v:%s", shard, channel))
		n++
		*r = Int(n * 10)
	})
	if fmt.Sprint(seen) != "[false:c1 true:s false:c true:s2]" {
		t.Fatalf("seen %v", seen)
	}
	var got []string
	for _, r := range replies {
		got = append(got, show(r))
	}
	if fmt.Sprint(got) != "[10 OK [OK 20 30] 40 ]" || replies[4].Kind != reply.KindNilArray {
		t.Fatalf("replies %v", got)
	}
}

// BenchmarkApplySetEffects is BenchmarkApplySet recording effects as the
// node does: one Effects reused round after round (a round = 1000 SETs).
func BenchmarkApplySetEffects(b *testing.B) {
	benchApply(b, openMem(b), new(Effects), toArgs("SET", "key:000001", strings.Repeat("v", 1024)))
}

// BenchmarkApplySetGetEffects: SET ... GET, a write that reads its key
// (keyspace_hits, keymiss), recording effects on a node that counts no
// lookups and emits no keymiss events (a follower, class m off).
func BenchmarkApplySetGetEffects(b *testing.B) {
	benchApply(b, openMem(b), new(Effects), toArgs("SET", "key:000001", strings.Repeat("v", 1024), "GET"))
}

// BenchmarkApplySetGetEffectsLeader is BenchmarkApplySetGetEffects on the
// node that counts the lookups (the leader): it looks the key up.
func BenchmarkApplySetGetEffectsLeader(b *testing.B) {
	benchApplyEnv(b, openMem(b), Env{Now: 1000, Effects: new(Effects), CountLookups: true},
		toArgs("SET", "key:000001", strings.Repeat("v", 1024), "GET"))
}

package kv

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvorum/kvorum/internal/reply"
)

// TestWatchSeesEveryChangeOfAnAbsentKey: a key absent at WATCH and absent
// again at EXEC aborts the transaction if it was created and deleted (or
// flushed) in between, as in Redis; it does not when nothing touched it.
// The torture harness found this ABA: a CAS whose GET saw a value written
// after WATCH committed over a DEL that followed.
func TestWatchSeesEveryChangeOfAnAbsentKey(t *testing.T) {
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem(), Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	index := uint64(10)
	apply := func(s ...string) Reply {
		index++
		b := db.NewIndexedBatch()
		defer b.Close()
		r := Apply(b, toArgs(s...), Env{Now: 1000, Index: index})
		if err := b.Commit(pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		return r
	}
	// stamp is WATCH as the node does it: the stamp at the applied index,
	// then the registration of an absent key.
	stamp := func(k string) uint64 {
		s, register, err := WatchStamp(db, []byte(k), 1000, index)
		if err != nil {
			t.Fatal(err)
		}
		if register {
			apply("KVORUM.WATCHREG", k)
		}
		return s
	}
	run := func(k string, st uint64) Reply {
		args := EncodeExec([][]byte{[]byte(k)}, []uint64{st}, [][][]byte{toArgs("SET", k, "tx")})
		s := make([]string, len(args))
		for i, a := range args {
			s[i] = string(a)
		}
		return apply(s...)
	}
	aborted := func(r Reply) bool { return r.Kind == reply.KindNil || r.Kind == reply.KindNilArray }

	// Untouched absent key: EXEC runs.
	st := stamp("a")
	apply("SET", "other", "1")
	if r := run("a", st); aborted(r) {
		t.Fatalf("EXEC on an untouched absent key aborted: %s", show(r))
	}
	// Created and deleted in between: aborted.
	apply("DEL", "a")
	st = stamp("a")
	apply("SET", "a", "x")
	apply("DEL", "a")
	if r := run("a", st); !aborted(r) {
		t.Fatalf("EXEC after SET+DEL of the watched absent key ran: %s", show(r))
	}
	// Created in between and still there: aborted.
	apply("DEL", "a")
	st = stamp("a")
	apply("SET", "a", "y")
	if r := run("a", st); !aborted(r) {
		t.Fatalf("EXEC after the watched absent key was created ran: %s", show(r))
	}
	// FLUSHALL in between, key created after WATCH: aborted.
	apply("DEL", "a")
	st = stamp("a")
	apply("SET", "a", "z")
	apply("FLUSHALL")
	if r := run("a", st); !aborted(r) {
		t.Fatalf("EXEC after SET+FLUSHALL of the watched absent key ran: %s", show(r))
	}
	// FLUSHALL in between, key absent throughout: EXEC runs (Redis
	// touches only the watched keys FLUSHALL deletes).
	apply("DEL", "a")
	st = stamp("a")
	apply("SET", "other", "1")
	apply("FLUSHALL")
	if r := run("a", st); aborted(r) {
		t.Fatalf("EXEC after a FLUSHALL that did not delete the watched absent key aborted: %s", show(r))
	}
	// The same without the registration (it failed): aborted, conservatively.
	apply("DEL", "u")
	st, _, _ = WatchStamp(db, []byte("u"), 1000, index)
	apply("FLUSHALL")
	if r := run("u", st); !aborted(r) {
		t.Fatalf("EXEC after a FLUSHALL, watched key never registered, ran: %s", show(r))
	}
	// Created after WATCH with a TTL that passed before EXEC: aborted
	// (the key was written).
	st = stamp("e")
	apply("SET", "e", "v", "PX", "1")
	index++
	b := db.NewIndexedBatch()
	args := EncodeExec([][]byte{[]byte("e")}, []uint64{st}, [][][]byte{toArgs("SET", "e", "tx")})
	if r := Apply(b, args, Env{Now: 5000, Index: index}); !aborted(r) {
		t.Fatalf("EXEC after the watched absent key was created and expired ran: %s", show(r))
	}
	b.Close()
	// A list emptied by a pop is deleted: aborted.
	st = stamp("l")
	apply("RPUSH", "l", "1")
	apply("LPOP", "l")
	if r := run("l", st); !aborted(r) {
		t.Fatalf("EXEC after RPUSH+LPOP of the watched absent list ran: %s", show(r))
	}
	// Live key changed and changed back: aborted.
	apply("SET", "b", "1")
	st = stamp("b")
	apply("SET", "b", "1")
	if r := run("b", st); !aborted(r) {
		t.Fatalf("EXEC after the watched key was rewritten ran: %s", show(r))
	}
}

// TestWatchAbsentKeyIgnoresOtherDeletions: a transaction watching an
// absent key is not aborted by deletions of other keys (they were tracked
// in 4,096 buckets, so 5,000 deletions aborted it for certain), nor by
// the collection of old tombstones that are not its key's; its own
// key's deletion still aborts it, and tombstones of old epochs go.
func TestWatchAbsentKeyIgnoresOtherDeletions(t *testing.T) {
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem(), Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	index, now := uint64(10), int64(1_000_000_000_000)
	apply := func(s ...string) Reply {
		index++
		b := db.NewIndexedBatch()
		defer b.Close()
		r := Apply(b, toArgs(s...), Env{Now: now, Index: index})
		if err := b.Commit(pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		return r
	}
	stamp := func(k string) uint64 {
		s, register, err := WatchStamp(db, []byte(k), now, index)
		if err != nil {
			t.Fatal(err)
		}
		if register {
			apply("KVORUM.WATCHREG", k)
		}
		return s
	}
	run := func(k string, st uint64) bool {
		args := EncodeExec([][]byte{[]byte(k)}, []uint64{st}, [][][]byte{toArgs("SET", "out", "tx")})
		s := make([]string, len(args))
		for i, a := range args {
			s[i] = string(a)
		}
		r := apply(s...)
		return r.Kind == reply.KindNil || r.Kind == reply.KindNilArray
	}
	apply("KVORUM.TOMBGC")
	st := stamp("watched")
	for i := 0; i < 5000; i++ {
		k := fmt.Sprintf("other-%d", i)
		apply("SET", k, "v")
		apply("DEL", k)
	}
	if run("watched", st) {
		t.Fatal("EXEC watching an absent key aborted by deletions of other keys")
	}
	// Its own deletion still aborts, in the same epoch and across a
	// collection that keeps the epoch.
	st = stamp("watched")
	apply("SET", "watched", "1")
	apply("DEL", "watched")
	now += tombEpochMs
	apply("KVORUM.TOMBGC")
	if !run("watched", st) {
		t.Fatal("EXEC ran after the watched absent key was created and deleted")
	}
	// Two epochs later its tombstone is gone.
	if _, c, err := db.Get(tombKey(tombEpoch(now-tombEpochMs), []byte("watched"))); err != nil {
		t.Fatalf("no tombstone in the epoch of the deletion: %v", err)
	} else {
		c.Close()
	}
	now += tombEpochMs
	if due, err := TombGCDue(db, now); err != nil || !due {
		t.Fatalf("collection due %v %v", due, err)
	}
	apply("KVORUM.TOMBGC")
	if _, c, err := db.Get(tombKey(tombEpoch(now-2*tombEpochMs), []byte("watched"))); err == nil {
		c.Close()
		t.Fatal("the tombstone of an epoch two back is still there")
	}
}

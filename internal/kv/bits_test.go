package kv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/kvdiff"
)

// TestBitfieldReadOnlyRouting: a BITFIELD of GETs (and OVERFLOWs) is served
// as a read; one that writes, or does not parse, goes through the log.
func TestBitfieldReadOnlyRouting(t *testing.T) {
	for _, c := range []struct {
		cmd   string
		write bool
	}{
		{"BITFIELD k", false},
		{"BITFIELD k GET u8 0", false},
		{"bitfield k get i64 #3 OVERFLOW SAT GET u1 7", false},
		{"BITFIELD k GET u8 0 SET u8 0 1", true},
		{"BITFIELD k INCRBY u8 0 1", true},
		{"BITFIELD k OVERFLOW FAIL INCRBY u8 0 1", true},
		{"BITFIELD k GET u8", true},    // syntax error: Check answers it
		{"BITFIELD k GET u64 0", true}, // bad type
		{"BITFIELD_RO k GET u8 0", false},
		{"SETBIT k 0 1", true},
		{"GETBIT k 0", false},
		{"BITOP NOT d k", true},
		{"BITCOUNT k", false},
		{"BITPOS k 1", false},
	} {
		if got := IsWrite(toArgs(strings.Fields(c.cmd)...)); got != c.write {
			t.Errorf("IsWrite(%s) = %v", c.cmd, got)
		}
	}
	db := openMem(t)
	run(t, db, 1000, "SET", "k", "hello")
	r := Read(db, toArgs("BITFIELD", "k", "GET", "u8", "0", "GET", "i4", "#1", "GET", "u16", "1000"), 1000)
	if got := show(r); got != "[104 -8 0]" {
		t.Fatalf("BITFIELD GET as a read: %s", got)
	}
	r = Read(db, toArgs("BITFIELD", "k", "SET", "u8", "0", "1"), 1000)
	if !r.IsError() {
		t.Fatalf("BITFIELD SET served as a read: %s", show(r))
	}
}

// TestBitOffsetLimits: offsets up to 2^32-1 bits are accepted, larger ones
// are refused by Check (nothing allocated, nothing logged); a read at the
// largest offset allocates nothing either.
func TestBitOffsetLimits(t *testing.T) {
	for _, c := range []struct {
		cmd string
		ok  bool
	}{
		{"SETBIT k 4294967295 1", true},
		{"SETBIT k 4294967296 1", false},
		{"SETBIT k 9223372036854775807 1", false},
		{"SETBIT k 0 2", false},
		{"GETBIT k 4294967296", false},
		{"BITFIELD k SET u8 4294967295 1", true},
		{"BITFIELD k SET u8 #536870911 1", true},
		{"BITFIELD k SET u8 #536870912 1", false},
		{"BITFIELD k SET i64 #288230376151711745 1", true}, // wraps to 64, as in Redis
		{"BITFIELD_RO k SET u8 0 1", false},
		{"BITOP NOT d a b", false},
		{"BITOP NAND d a b", false},
		{"BITPOS k 2", false},
	} {
		_, ok := Check(toArgs(strings.Fields(c.cmd)...), Limits{})
		if ok != c.ok {
			t.Errorf("Check(%s) ok = %v", c.cmd, ok)
		}
	}
	db := openMem(t)
	run(t, db, 1000, "SET", "k", "x")
	args := toArgs("GETBIT", "k", "4294967295")
	if n := testing.AllocsPerRun(20, func() { Read(db, args, 1000) }); n > 20 {
		t.Fatalf("GETBIT far past the end allocates %v times", n)
	}
	if got := show(Read(db, toArgs("BITFIELD", "k", "GET", "i64", "4294967295"), 1000)); got != "[0]" {
		t.Fatalf("BITFIELD GET at the last offset: %s", got)
	}
}

// TestBitWritesOnlyWhenChanged: SETBIT and BITFIELD leave a key they do
// not change untouched (no write in the batch, WATCH stamp kept), as Redis
// does not signal it as modified; they keep its TTL when they do change it.
func TestBitWritesOnlyWhenChanged(t *testing.T) {
	db := openMem(t)
	index := uint64(10)
	apply := func(s ...string) (Reply, uint32) {
		t.Helper()
		index++
		b := db.NewIndexedBatch()
		defer b.Close()
		r := Apply(b, toArgs(s...), Env{Now: 1000, Index: index})
		n := b.Count()
		if err := b.Commit(pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		return r, n
	}
	apply("SET", "k", "a", "PX", "5000")
	stamp, _, _ := WatchStamp(db, []byte("k"), 1000, 0)
	for _, c := range [][]string{
		{"SETBIT", "k", "1", "1"},                                         // already set
		{"SETBIT", "k", "0", "0"},                                         // already clear
		{"BITFIELD", "k", "SET", "u8", "0", "97"},                         // same value
		{"BITFIELD", "k", "INCRBY", "u4", "0", "0"},                       // + 0
		{"BITFIELD", "k", "OVERFLOW", "FAIL", "INCRBY", "u8", "0", "200"}, // fails
	} {
		if r, n := apply(c...); r.IsError() || n != 0 {
			t.Fatalf("%q: %s, %d writes", c, show(r), n)
		}
	}
	if s, _, _ := WatchStamp(db, []byte("k"), 1000, 0); s != stamp {
		t.Fatal("an unchanged key's WATCH stamp moved")
	}
	if r, n := apply("SETBIT", "k", "3", "1"); show(r) != "0" || n == 0 {
		t.Fatalf("SETBIT that changes a bit: %s, %d writes", show(r), n)
	}
	if r, n := apply("SETBIT", "k", "15", "0"); show(r) != "0" || n == 0 {
		t.Fatalf("SETBIT that grows the string: %s, %d writes", show(r), n)
	}
	if r := Read(db, toArgs("GET", "k"), 1000); string(r.Str) != "q\x00" {
		t.Fatalf("GET: %q", r.Str)
	}
	if r := Read(db, toArgs("PTTL", "k"), 1000); r.Int != 5000 {
		t.Fatalf("TTL lost: %s", show(r))
	}
	// A failing BITFIELD still creates (and pads) the key, as in Redis.
	if r, n := apply("BITFIELD", "new", "OVERFLOW", "FAIL", "INCRBY", "u2", "100", "5"); show(r) != "[(nil)]" || n == 0 {
		t.Fatalf("BITFIELD FAIL on a new key: %s, %d writes", show(r), n)
	}
	if r := Read(db, toArgs("STRLEN", "new"), 1000); r.Int != 13 {
		t.Fatalf("STRLEN new = %s", show(r))
	}
}

// TestBitsAgainstRedis sends random bit commands over a few short strings
// (and one list, for WRONGTYPE) to redis-server and to the state machine.
func TestBitsAgainstRedis(t *testing.T) {
	rc := kvdiff.StartRedis(t)
	db := openMem(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(11, 12))
	pick := func(s ...string) string { return s[rng.IntN(len(s))] }
	key := func() string { return pick("a", "b", "c", "d", "l") }
	num := func(lo, hi int) string { return fmt.Sprint(lo + rng.IntN(hi-lo+1)) }
	idx := func() string {
		if rng.IntN(10) == 0 {
			return pick("x", "-9223372036854775808", "9223372036854775807")
		}
		return num(-30, 30)
	}
	off := func() string {
		if rng.IntN(10) == 0 {
			return pick("#"+num(0, 8), "-1", "4294967296", "x")
		}
		return num(0, 90)
	}
	typ := func() string {
		if rng.IntN(20) == 0 {
			return pick("u64", "i65", "i0", "x8")
		}
		if rng.IntN(2) == 0 {
			return "i" + num(1, 64)
		}
		return "u" + num(1, 63)
	}
	val := func() string {
		switch rng.IntN(4) {
		case 0:
			return pick("9223372036854775807", "-9223372036854775808", "x", "4611686018427387904")
		case 1:
			return num(-300, 300)
		}
		return num(-5, 5)
	}
	unit := func(args []string) []string {
		switch rng.IntN(4) {
		case 0:
			return append(args, "BIT")
		case 1:
			return append(args, "BYTE")
		case 2:
			if rng.IntN(5) == 0 {
				return append(args, "FOO")
			}
		}
		return args
	}
	bitfield := func() []string {
		args := []string{pick("BITFIELD", "BITFIELD", "BITFIELD_RO"), key()}
		for n := rng.IntN(4); n > 0; n-- {
			switch rng.IntN(5) {
			case 0:
				args = append(args, "OVERFLOW", pick("WRAP", "SAT", "FAIL", "wrap", "sat", "fail"))
			case 1, 2:
				args = append(args, "GET", typ(), off())
			case 3:
				args = append(args, "SET", typ(), off(), val())
			default:
				args = append(args, "INCRBY", typ(), off(), val())
			}
		}
		return args
	}
	gens := []func() []string{
		func() []string {
			return []string{"SET", key(), pick("", "a", "foobar", "\x00\x00", "12", "hello world", "\x7f~")}
		},
		func() []string { return []string{"SETBIT", key(), off(), pick("0", "1", "1", "2")} },
		func() []string { return []string{"GETBIT", key(), off()} },
		func() []string { return []string{"BITCOUNT", key()} },
		func() []string { return unit([]string{"BITCOUNT", key(), idx(), idx()}) },
		func() []string { return []string{"BITPOS", key(), pick("0", "1", "1", "0", "2")} },
		func() []string { return []string{"BITPOS", key(), pick("0", "1"), idx()} },
		func() []string { return unit([]string{"BITPOS", key(), pick("0", "1"), idx(), idx()}) },
		func() []string {
			args := []string{"BITOP", pick("AND", "OR", "XOR", "NOT", "and"), key()}
			for n := 1 + rng.IntN(3); n > 0; n-- {
				args = append(args, key())
			}
			return args
		},
		bitfield, bitfield, bitfield,
		func() []string { return []string{"GET", key()} },
		func() []string { return []string{"DEL", key()} },
	}
	rc.FlushAll(ctx)
	runKV(db, []string{"FLUSHALL"})
	rc.RPush(ctx, "l", "x")
	runKV(db, []string{"RPUSH", "l", "x"})
	for i := 0; i < 12000; i++ {
		args := gens[rng.IntN(len(gens))]()
		// Keep the list a list: never deleted, overwritten or a BITOP destination.
		if (args[0] == "DEL" || args[0] == "SET") && args[1] == "l" {
			continue
		}
		if args[0] == "BITOP" && args[2] == "l" {
			args[2] = "a"
		}
		want, got := diffOne(ctx, rc, db, args)
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("command %d: %q\n  redis: %#v\n  kv:    %#v", i, args, want, got)
		}
	}
}

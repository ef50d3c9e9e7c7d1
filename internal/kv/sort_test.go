package kv

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/kvdiff"
)

// SORT without STORE is served as a read; STORE (as an option, not as a
// GET or BY pattern) makes it a write. SORT_RO is always a read.
func TestSortRouting(t *testing.T) {
	for _, c := range []struct {
		cmd   []string
		write bool
	}{
		{[]string{"SORT", "l"}, false},
		{[]string{"sort", "l", "DESC", "LIMIT", "0", "1", "ALPHA"}, false},
		{[]string{"SORT", "l", "STORE", "d"}, true},
		{[]string{"SORT", "l", "store", "d", "GET", "#"}, true},
		{[]string{"SORT", "l", "GET", "STORE"}, false},
		{[]string{"SORT", "l", "BY", "STORE", "GET", "store"}, false},
		{[]string{"SORT", "STORE", "LIMIT", "0", "1"}, false},
		{[]string{"SORT", "l", "FOO", "STORE", "d"}, true}, // a syntax error: the write path refuses it
		{[]string{"SORT_RO", "l"}, false},
		{[]string{"SORT_RO", "l", "STORE", "d"}, false},
	} {
		if got := IsWrite(toArgs(c.cmd...)); got != c.write {
			t.Errorf("IsWrite(%q) = %v, want %v", c.cmd, got, c.write)
		}
	}
	db := openMem(t)
	run(t, db, 0, "RPUSH", "l", "3", "1", "2")
	if got := show(Read(db, toArgs("SORT", "l", "DESC"), 0)); got != "[3 2 1]" {
		t.Fatalf("SORT as a read: %s", got)
	}
	if got := show(Read(db, toArgs("SORT", "l", "STORE", "d"), 0)); !strings.HasPrefix(got, "ERR<ERR internal") {
		t.Fatalf("SORT STORE as a read: %s", got)
	}
	if got := show(Read(db, toArgs("SORT_RO", "l", "STORE", "d"), 0)); got != "ERR<ERR syntax error>" {
		t.Fatalf("SORT_RO STORE: %s", got)
	}
	if r, ok := Check(toArgs("SORT", "l", "LIMIT", "x", "1"), Limits{}); ok || show(r) != "ERR<ERR value is not an integer or out of range>" {
		t.Fatalf("Check of a bad LIMIT: %v %s", ok, show(r))
	}
}

// SORT ... STORE writes the same batch on every replica, also where Redis
// leaves the order unspecified (ALPHA BY with every value missing: the
// stable sort keeps the set's byte order).
func TestSortStoreIsDeterministic(t *testing.T) {
	script := [][]string{
		{"SADD", "s", "c", "a", "b", "10", "9"}, {"SORT", "s", "BY", "nope_*", "ALPHA", "STORE", "d"},
		{"SORT", "s", "BY", "nosort", "DESC", "STORE", "d2"}, {"SORT", "s", "BY", "nope_*", "STORE", "d3", "GET", "#", "GET", "x_*"},
		{"ZADD", "z", "1", "x", "1", "y", "0", "w"}, {"SORT", "z", "BY", "nope_*", "ALPHA", "STORE", "d4"},
		{"COPY", "z", "z2"}, {"COPY", "s", "d", "REPLACE"},
	}
	var reprs [2][]byte
	var lists [2]string
	for rep := 0; rep < 2; rep++ {
		db := openMem(t)
		for i, c := range script {
			b := db.NewIndexedBatch()
			r := Apply(b, toArgs(c...), Env{Now: int64(1000 + i), Index: uint64(10 + i)})
			reprs[rep] = append(reprs[rep], b.Repr()...)
			reprs[rep] = r.AppendBinary(reprs[rep])
			if err := b.Commit(pebble.NoSync); err != nil {
				t.Fatal(err)
			}
		}
		lists[rep] = show(Read(db, toArgs("LRANGE", "d2", "0", "-1"), 0)) + show(Read(db, toArgs("LRANGE", "d3", "0", "-1"), 0)) +
			show(Read(db, toArgs("LRANGE", "d4", "0", "-1"), 0)) + show(Read(db, toArgs("SORT", "d", "ALPHA"), 0))
	}
	if !bytes.Equal(reprs[0], reprs[1]) {
		t.Fatal("two replicas applied the same log differently")
	}
	if want := "[c b a 9 10][10  9  a  b  c ][w x y][10 9 a b c]"; lists[0] != want {
		t.Fatalf("stored %s, want %s", lists[0], want)
	}
}

// A SORT that fails changes nothing, and SORT reads a BY/GET key that
// expired as absent.
func TestSortErrorsAndExpiry(t *testing.T) {
	db := openMem(t)
	run(t, db, 1000, "RPUSH", "l", "b", "a", "c")
	run(t, db, 1000, "SET", "w_a", "1", "PX", "100")
	run(t, db, 1000, "MSET", "w_b", "2", "w_c", "3", "d", "keep")
	for _, c := range []struct {
		now  int64
		cmd  []string
		want string
	}{
		{1000, []string{"SORT", "l", "BY", "w_*", "GET", "w_*"}, "[1 2 3]"},
		{1100, []string{"SORT", "l", "BY", "w_*", "GET", "w_*"}, "[(nil) 2 3]"},
		{1100, []string{"SORT", "l", "BY", "w_*", "DESC", "GET", "#", "GET", "w_*", "STORE", "d"}, "6"},
		{1100, []string{"LRANGE", "d", "0", "-1"}, "[c 3 b 2 a ]"},
		{1100, []string{"SET", "w_b", "x"}, "OK"},
		{1100, []string{"SORT", "l", "BY", "w_*", "STORE", "d"}, "ERR<ERR One or more scores can't be converted into double>"},
		{1100, []string{"LRANGE", "d", "0", "-1"}, "[c 3 b 2 a ]"},
		{1100, []string{"SORT", "l", "STORE", "d"}, "ERR<ERR One or more scores can't be converted into double>"},
		{1100, []string{"SORT", "l", "LIMIT", "0", "0", "STORE", "d"}, "ERR<ERR One or more scores can't be converted into double>"},
		{1100, []string{"TYPE", "d"}, "list"},
		{1100, []string{"EXPIRE", "l", "1"}, "1"},
		{2100, []string{"SORT", "l", "ALPHA"}, "[]"},
		{2100, []string{"SORT", "l", "STORE", "d"}, "0"},
		{2100, []string{"EXISTS", "d"}, "0"},
	} {
		if got := show(run(t, db, c.now, c.cmd...)); got != c.want {
			t.Errorf("%q at %d = %s, want %s", c.cmd, c.now, got, c.want)
		}
	}
}

// TestSortRandomAgainstRedis compares random SORTs of lists, sets and
// sorted sets (BY, GET, LIMIT, ASC/DESC, ALPHA, STORE) with redis-server.
// Cases whose order Redis leaves unspecified are avoided: ALPHA with a BY
// pattern only where the BY values are distinct, BY nosort on a set only
// on a set of integers. Words sorted as numbers fail on both sides.
func TestSortRandomAgainstRedis(t *testing.T) {
	rc := kvdiff.StartRedis(t)
	db := openMem(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 11))
	num := func() string {
		switch rng.IntN(5) {
		case 0:
			return strconv.Itoa(rng.IntN(20) - 5)
		case 1:
			return strconv.FormatFloat(float64(rng.IntN(400)-100)/8, 'f', -1, 64)
		case 2:
			return []string{"1", "1.0", "01", " 1", "+1", "1e0", "0x1", "-0", "0", "inf", "-inf", "1e10"}[rng.IntN(12)]
		case 3:
			return strconv.Itoa(rng.IntN(1000))
		default:
			return strconv.FormatFloat(rng.NormFloat64()*1e6, 'g', -1, 64)
		}
	}
	word := func() string {
		b := make([]byte, 1+rng.IntN(3))
		for i := range b {
			b[i] = "abAB01"[rng.IntN(6)]
		}
		return string(b)
	}
	total := 0
	do := func(c ...string) {
		t.Helper()
		want, got := diffOne(ctx, rc, db, c)
		total++
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("%q\n  redis: %#v\n  kv:    %#v", c, want, got)
		}
	}
	for round := 0; round < 60; round++ {
		rc.FlushAll(ctx)
		runKV(db, []string{"FLUSHALL"})
		// Elements: numbers (numeric sorts) or words (ALPHA only).
		numeric := rng.IntN(3) > 0
		typ := []string{"list", "set", "zset"}[rng.IntN(3)]
		intsOnly := typ == "set" && rng.IntN(3) == 0
		n := rng.IntN(25)
		elems := map[string]bool{}
		var add []string
		for i := 0; i < n; i++ {
			e := word()
			switch {
			case intsOnly:
				e = strconv.Itoa(rng.IntN(2000) - 1000)
			case numeric:
				e = num()
			}
			elems[e] = true
			add = append(add, e)
		}
		switch typ {
		case "list":
			if n > 0 {
				do(append([]string{"RPUSH", "k"}, add...)...)
			}
		case "set":
			if n > 0 {
				do(append([]string{"SADD", "k"}, add...)...)
			}
		case "zset":
			for _, e := range add {
				do("ZADD", "k", strconv.Itoa(rng.IntN(5)), e)
			}
		}
		// BY values: numbers, distinct (for ALPHA BY), some missing.
		byDistinct := rng.IntN(2) == 0
		i := 0
		for e := range elems {
			i++
			if rng.IntN(6) == 0 && !byDistinct {
				continue
			}
			v := num()
			if byDistinct {
				v = fmt.Sprintf("%d.%d", rng.IntN(50), i) // distinct as strings and as numbers
			}
			do("SET", "w_"+e, v)
			do("HSET", "h_"+e, "f", v, "g", word())
		}
		for q := 0; q < 12; q++ {
			cmd := []string{"SORT", "k"}
			if rng.IntN(4) == 0 {
				cmd[0] = "SORT_RO"
			}
			by := ""
			switch rng.IntN(5) {
			case 0:
				by = "w_*"
			case 1:
				by = "h_*->f"
			case 2:
				if typ != "set" || intsOnly {
					by = "nosort"
				}
			}
			if by != "" {
				cmd = append(cmd, "BY", by)
			}
			if (!numeric && !intsOnly) || rng.IntN(4) == 0 {
				// ALPHA BY needs distinct BY values (and none missing).
				if by == "" || by == "nosort" || byDistinct {
					cmd = append(cmd, "ALPHA")
				}
			}
			if rng.IntN(2) == 0 {
				cmd = append(cmd, []string{"ASC", "DESC"}[rng.IntN(2)])
			}
			if rng.IntN(2) == 0 {
				cmd = append(cmd, "LIMIT", strconv.Itoa(rng.IntN(n+3)-1), strconv.Itoa(rng.IntN(n+3)-1))
			}
			for g := rng.IntN(3); g > 0; g-- {
				cmd = append(cmd, "GET", []string{"#", "w_*", "h_*->f", "h_*->g", "nope_*"}[rng.IntN(5)])
			}
			store := cmd[0] == "SORT" && rng.IntN(3) == 0
			if store {
				cmd = append(cmd, "STORE", "dst")
			}
			do(cmd...)
			if store {
				do("LRANGE", "dst", "0", "-1")
			}
		}
	}
	t.Logf("%d commands compared", total)
}

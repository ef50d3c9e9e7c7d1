package kv

import (
	"fmt"
	"strconv"
	"testing"
)

// The copy of a key attached to a lease is a plain key: revoking the lease
// deletes the source only. A destination attached to a lease is detached
// by being overwritten.
func TestCopyIsNotAttachedToTheLease(t *testing.T) {
	l := newLockLog(t)
	a := l.id("LEASE", "GRANT", "10000")
	b := l.id("LEASE", "GRANT", "10000")
	l.want("OK", "SET", "k", "v", "LEASE", a)
	l.want("1", "COPY", "k", "k2")
	l.want("OK", "SET", "k3", "old", "LEASE", b)
	l.want("1", "COPY", "k", "k3", "REPLACE")
	l.want("1", "LEASE", "REVOKE", a)
	l.want("0", "EXISTS", "k")
	l.want("v", "GET", "k2")
	l.want("1", "LEASE", "REVOKE", b)
	l.want("v", "GET", "k3")
}

// COPY stamps the destination for WATCH (Effects.Written) and not the source; a
// COPY that copies nothing writes nothing.
func TestCopyWakesOnlyTheDestination(t *testing.T) {
	l := newLockLog(t)
	l.want("3", "RPUSH", "src", "a", "b", "c")
	l.woken = map[string]int{}
	l.want("1", "COPY", "src", "dst")
	l.want("0", "COPY", "src", "dst")
	l.want("0", "COPY", "nope", "dst2")
	l.want("1", "COPY", "src", "dst", "REPLACE")
	if fmt.Sprint(l.woken) != "map[dst:2]" {
		t.Fatalf("woken %v", l.woken)
	}
}

// An expired destination is absent (no REPLACE needed) and its elements go.
func TestCopyOverExpiredDestination(t *testing.T) {
	db := openMem(t)
	run(t, db, 1000, "HSET", "d", "a", "1", "b", "2")
	run(t, db, 1000, "PEXPIRE", "d", "100")
	run(t, db, 1000, "HSET", "s", "x", "1")
	run(t, db, 1000, "RPUSH", "l", "p", "q")
	run(t, db, 1000, "PEXPIRE", "l", "500")
	for _, c := range []struct {
		now  int64
		cmd  []string
		want string
	}{
		{1050, []string{"COPY", "s", "d"}, "0"},
		{1050, []string{"COPY", "l", "l2"}, "1"},
		{1050, []string{"PTTL", "l2"}, "450"},
		{2000, []string{"COPY", "s", "d"}, "1"},
		{2000, []string{"HGETALL", "d"}, "[x 1]"},
		{2000, []string{"HLEN", "d"}, "1"},
		{2000, []string{"TTL", "d"}, "-1"},
		{2000, []string{"COPY", "l", "l3"}, "0"}, // the source expired
		{2000, []string{"EXISTS", "l2", "l3"}, "0"},
		{2000, []string{"TOUCH", "d", "s", "l", "l2"}, "2"},
	} {
		if got := show(run(t, db, c.now, c.cmd...)); got != c.want {
			t.Errorf("%q at %d = %s, want %s", c.cmd, c.now, got, c.want)
		}
	}
}

// Copies of large collections have every element and are independent.
func TestCopyBigCollections(t *testing.T) {
	db := openMem(t)
	args := []string{"RPUSH", "l"}
	for i := 0; i < 3000; i++ {
		args = append(args, strconv.Itoa(i))
	}
	run(t, db, 0, args...)
	args[0], args[1] = "SADD", "s"
	run(t, db, 0, args...)
	zargs := []string{"ZADD", "z"}
	for i := 0; i < 3000; i++ {
		zargs = append(zargs, strconv.Itoa(i%7), "m"+strconv.Itoa(i))
	}
	run(t, db, 0, zargs...)
	for _, k := range []string{"l", "s", "z"} {
		if got := show(run(t, db, 0, "COPY", k, k+"2")); got != "1" {
			t.Fatalf("COPY %s: %s", k, got)
		}
	}
	for _, c := range [][2]string{{"LLEN", "3000"}, {"SCARD", "3000"}, {"ZCARD", "3000"}} {
		k := map[string]string{"LLEN": "l2", "SCARD": "s2", "ZCARD": "z2"}[c[0]]
		if got := show(run(t, db, 0, c[0], k)); got != c[1] {
			t.Fatalf("%s %s = %s", c[0], k, got)
		}
	}
	if a, b := show(run(t, db, 0, "LRANGE", "l", "0", "-1")), show(run(t, db, 0, "LRANGE", "l2", "0", "-1")); a != b {
		t.Fatal("list copy differs")
	}
	if a, b := show(run(t, db, 0, "ZRANGE", "z", "0", "-1", "WITHSCORES")), show(run(t, db, 0, "ZRANGE", "z2", "0", "-1", "WITHSCORES")); a != b {
		t.Fatal("sorted set copy differs")
	}
	if a, b := show(run(t, db, 0, "SORT", "s")), show(run(t, db, 0, "SORT", "s2")); a != b {
		t.Fatal("set copy differs")
	}
	run(t, db, 0, "DEL", "l", "s", "z")
	if got := show(run(t, db, 0, "LINDEX", "l2", "2999")); got != "2999" {
		t.Fatalf("LINDEX after deleting the source: %s", got)
	}
	if got := show(run(t, db, 0, "ZSCORE", "z2", "m13")); got != "6" {
		t.Fatalf("ZSCORE after deleting the source: %s", got)
	}
	if got := show(run(t, db, 0, "SISMEMBER", "s2", "1234")); got != "1" {
		t.Fatalf("SISMEMBER after deleting the source: %s", got)
	}
}

func TestCopyCheckRefusesBeforeTheLog(t *testing.T) {
	for _, c := range []struct {
		cmd  []string
		want string
	}{
		{[]string{"COPY", "a", "a"}, "ERR<ERR source and destination objects are the same>"},
		{[]string{"COPY", "a", "b", "DB", "1"}, "ERR<ERR DB index is out of range>"},
		{[]string{"COPY", "a", "b", "DB", "x"}, "ERR<ERR value is not an integer or out of range>"},
		{[]string{"COPY", "a", "b", "DB", "2147483648"}, "ERR<ERR value is out of range, value must between -2147483648 and 2147483647>"},
		{[]string{"COPY", "a", "b", "REPLACE", "X"}, "ERR<ERR syntax error>"},
	} {
		r, ok := Check(toArgs(c.cmd...), Limits{})
		if ok || show(r) != c.want {
			t.Errorf("Check(%q) = %v %s, want %s", c.cmd, ok, show(r), c.want)
		}
	}
	if _, ok := Check(toArgs("COPY", "a", "b", "db", "0", "replace"), Limits{}); !ok {
		t.Error("COPY a b DB 0 REPLACE refused")
	}
}

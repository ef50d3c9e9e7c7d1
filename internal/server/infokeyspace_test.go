package server

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/kvdiff"
)

// infoField returns field's value in c's INFO section, failing the test
// if it is absent.
func infoField(t *testing.T, c *kvdiff.Conn, section, field string) string {
	t.Helper()
	v, err := c.Do("INFO", section)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(v.Str), "\r\n") {
		if val, ok := strings.CutPrefix(line, field+":"); ok {
			return val
		}
	}
	t.Fatalf("INFO %s has no %s: %q", section, field, v.Str)
	return ""
}

func infoInt(t *testing.T, c *kvdiff.Conn, section, field string) int64 {
	t.Helper()
	v := infoField(t, c, section, field)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("INFO %s %s: %q", section, field, v)
	}
	return n
}

func dialT(t *testing.T, addr string) *kvdiff.Conn {
	t.Helper()
	c, err := kvdiff.Dial(addr, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func doT(t *testing.T, c *kvdiff.Conn, args ...string) kvdiff.Value {
	t.Helper()
	v, err := c.Do(args...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// keyspaceSetup is the state keyspaceLookups' commands read.
var keyspaceSetup = [][]string{
	{"SET", "s", "v"}, {"HSET", "h", "f", "v"}, {"RPUSH", "l", "a", "b"},
	{"SADD", "set", "m"}, {"ZADD", "z", "1", "m"}, {"SET", "t", "v", "EX", "100"},
	{"XADD", "x", "1-1", "f", "v"},
}

// keyspaceLookups are commands whose keyspace_hits and keyspace_misses
// TestInfoKeyspaceHitsLikeRedis compares one by one.
var keyspaceLookups = [][]string{
	{"GET", "s"}, {"GET", "nokey"}, {"MGET", "s", "nokey", "s"},
	{"HGET", "nokey", "f"}, {"HGET", "h", "f"}, {"HGET", "h", "nofield"}, {"HGETALL", "h"},
	{"HEXISTS", "h", "f"}, {"HLEN", "nokey"},
	{"LRANGE", "l", "0", "-1"}, {"LRANGE", "nokey", "0", "-1"}, {"LLEN", "l"}, {"LINDEX", "l", "0"},
	{"EXISTS", "s", "nokey", "s"}, {"EXISTS", "nokey"}, {"TOUCH", "s", "nokey"},
	{"TYPE", "s"}, {"TYPE", "nokey"}, {"TTL", "t"}, {"PTTL", "nokey"}, {"EXPIRETIME", "t"},
	{"STRLEN", "s"}, {"GETRANGE", "s", "0", "1"}, {"GETBIT", "s", "1"}, {"BITCOUNT", "s"},
	{"SMEMBERS", "set"}, {"SISMEMBER", "set", "m"}, {"SCARD", "nokey"},
	{"SINTER", "set", "nokey"}, {"SUNION", "set", "nokey"}, {"SDIFF", "set", "nokey"},
	{"ZSCORE", "z", "m"}, {"ZRANGE", "z", "0", "-1"}, {"ZCARD", "nokey"},
	{"XLEN", "x"}, {"XRANGE", "x", "-", "+"},
	{"SCAN", "0"}, {"KEYS", "*"}, {"DBSIZE"}, {"RANDOMKEY"},
	{"SET", "s", "v2"}, {"INCR", "n"}, {"DEL", "nokey"}, {"HSET", "h", "g", "w"},
	{"RPUSH", "l", "c"}, {"SADD", "set", "q"}, {"EXPIRE", "s", "100"},
}

// TestInfoKeyspaceHitsLikeRedis: INFO stats keyspace_hits and
// keyspace_misses count, command by command, the key lookups redis-server
// 7.0 counts: one per key a read looks up, a hit if it exists; none for a
// write's lookups, SCAN, KEYS, DBSIZE or RANDOMKEY. On kvorum they are
// the counts of the node that served the read (a follower here, another
// node's are not changed), and CONFIG RESETSTAT zeroes them.
func TestInfoKeyspaceHitsLikeRedis(t *testing.T) {
	ref := dialT(t, kvdiff.StartServer(t))
	c := newTestCluster(t, 3)
	lead := c.waitLeader()
	fol := followersOf(lead, 3)
	kc := dialT(t, c.node(fol[0]).ClientAddr())
	other := dialT(t, c.node(fol[1]).ClientAddr())
	for _, conn := range []*kvdiff.Conn{ref, kc} {
		for _, args := range keyspaceSetup {
			if v := doT(t, conn, args...); v.Type == '-' {
				t.Fatalf("%v: %s", args, v.Str)
			}
		}
	}
	doT(t, other, "CONFIG", "RESETSTAT")
	counts := func(conn *kvdiff.Conn, args []string) string {
		doT(t, conn, "CONFIG", "RESETSTAT")
		if v := doT(t, conn, args...); v.Type == '-' {
			t.Fatalf("%v: %s", args, v.Str)
		}
		return fmt.Sprintf("hits=%d misses=%d",
			infoInt(t, conn, "stats", "keyspace_hits"), infoInt(t, conn, "stats", "keyspace_misses"))
	}
	for _, args := range keyspaceLookups {
		want := counts(ref, args)
		if got := counts(kc, args); got != want {
			t.Errorf("%v: kvorum %s, redis-server %s", args, got, want)
		}
	}
	// The sequence as a whole, without a reset in between.
	total := func(conn *kvdiff.Conn) string {
		doT(t, conn, "CONFIG", "RESETSTAT")
		for _, args := range keyspaceLookups {
			doT(t, conn, args...)
		}
		return fmt.Sprintf("hits=%d misses=%d",
			infoInt(t, conn, "stats", "keyspace_hits"), infoInt(t, conn, "stats", "keyspace_misses"))
	}
	want := total(ref)
	if got := total(kc); got != want {
		t.Errorf("whole sequence: kvorum %s, redis-server %s", got, want)
	}
	if want == "hits=0 misses=0" {
		t.Fatal("redis-server counted nothing: the sequence did not run")
	}
	if got := fmt.Sprintf("%d/%d", infoInt(t, other, "stats", "keyspace_hits"), infoInt(t, other, "stats", "keyspace_misses")); got != "0/0" {
		t.Errorf("a node that served none of the reads counts hits/misses %s", got)
	}
}

// TestInfoExpiredKeysLikeRedis: INFO stats expired_keys counts the keys
// deleted because their TTL passed, as redis-server's active expiry does
// (keys nobody reads), on every node of kvorum (each applies the
// deletions), and CONFIG RESETSTAT zeroes it. evicted_keys stays 0.
func TestInfoExpiredKeysLikeRedis(t *testing.T) {
	ref := dialT(t, kvdiff.StartServer(t))
	c := newTestCluster(t, 3)
	lead := c.waitLeader()
	conns := []*kvdiff.Conn{ref}
	for id := uint64(1); id <= 3; id++ {
		conns = append(conns, dialT(t, c.node(id).ClientAddr()))
	}
	for _, conn := range conns {
		doT(t, conn, "CONFIG", "RESETSTAT")
	}
	for _, conn := range []*kvdiff.Conn{ref, conns[lead]} {
		for _, args := range [][]string{
			{"SET", "e1", "v", "PX", "50"}, {"SET", "e2", "v", "PX", "50"}, {"SET", "e3", "v", "PX", "50"},
			{"SET", "kept", "v", "EX", "1000"}, {"SET", "plain", "v"},
			{"SET", "e4", "v", "PX", "5000"}, {"PERSIST", "e4"}, // never expires
		} {
			doT(t, conn, args...)
		}
	}
	for i, conn := range conns {
		deadline := time.Now().Add(15 * time.Second)
		for infoInt(t, conn, "stats", "expired_keys") < 3 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond) // nothing more comes
		if got := infoInt(t, conn, "stats", "expired_keys"); got != 3 {
			t.Errorf("server %d (0: redis-server): expired_keys %d, want 3", i, got)
		}
		if got := infoField(t, conn, "stats", "evicted_keys"); got != "0" {
			t.Errorf("server %d: evicted_keys %s", i, got)
		}
		doT(t, conn, "CONFIG", "RESETSTAT")
		if got := infoInt(t, conn, "stats", "expired_keys"); got != 0 {
			t.Errorf("server %d: expired_keys %d after CONFIG RESETSTAT", i, got)
		}
	}
}

// rdbChangesSequence is what TestInfoChangesSinceSaveLikeRedis runs: each
// changes the keys Redis counts in rdb_changes_since_last_save (its
// "dirty" count), and kvorum the same.
var rdbChangesSequence = [][]string{
	{"SET", "a", "1"}, {"SET", "b", "2"}, {"INCR", "a"}, {"GET", "a"},
	{"LPUSH", "a", "x"}, // WRONGTYPE: nothing changed
	{"DEL", "a", "b", "nokey"}, {"MSET", "x", "1", "y", "2"}, {"EXPIRE", "x", "100"},
	{"SET", "x", "3", "NX"}, // not set: nothing changed
	{"HSET", "h", "f", "v"}, {"RPUSH", "l", "a"}, {"SADD", "s", "m"},
}

// TestInfoChangesSinceSaveLikeRedis: INFO persistence
// rdb_changes_since_last_save counts the changes a sequence of writes
// makes as redis-server (with no save configured) counts them, on every
// node of kvorum (with a log that is not truncated meanwhile), and
// CONFIG RESETSTAT leaves it. rdb_last_save_time is the node's start
// while nothing was saved.
func TestInfoChangesSinceSaveLikeRedis(t *testing.T) {
	ref := dialT(t, kvdiff.StartServer(t))
	start := time.Now().Unix()
	c := newClusterWith(t, 3, func(_ uint64, cfg *Config) { cfg.SnapshotThreshold = 100_000 })
	lead := c.waitLeader()
	kc := dialT(t, c.node(followersOf(lead, 3)[0]).ClientAddr())
	changes := func(conn *kvdiff.Conn) int64 {
		return infoInt(t, conn, "persistence", "rdb_changes_since_last_save")
	}
	refBefore, kvBefore := changes(ref), changes(kc)
	for _, conn := range []*kvdiff.Conn{ref, kc} {
		for _, args := range rdbChangesSequence {
			doT(t, conn, args...)
		}
		doT(t, conn, "CONFIG", "RESETSTAT")
	}
	want := changes(ref) - refBefore
	if want != 11 {
		t.Fatalf("redis-server counted %d changes", want)
	}
	for id := uint64(1); id <= 3; id++ {
		conn := dialT(t, c.node(id).ClientAddr())
		deadline := time.Now().Add(5 * time.Second)
		got := changes(conn) - kvBefore
		for got != want && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
			got = changes(conn) - kvBefore
		}
		if got != want {
			t.Errorf("node %d: rdb_changes_since_last_save grew by %d, redis-server's by %d", id, got, want)
		}
		if saved := infoInt(t, conn, "persistence", "rdb_last_save_time"); saved < start-1 || saved > time.Now().Unix() {
			t.Errorf("node %d: rdb_last_save_time %d, want the node's start (%d)", id, saved, start)
		}
	}
}

// TestInfoChangesSinceSaveResetByTruncation: a node's
// rdb_changes_since_last_save counts from its last log truncation
// (kvorum's save), whose time rdb_last_save_time is: with the test
// cluster's SnapshotThreshold of 50, a few hundred writes are never all
// counted, and the save time moves forward.
func TestInfoChangesSinceSaveResetByTruncation(t *testing.T) {
	c := newTestCluster(t, 3)
	kc := dialT(t, c.node(c.waitLeader()).ClientAddr())
	first := infoInt(t, kc, "persistence", "rdb_last_save_time")
	time.Sleep(1100 * time.Millisecond)
	for i := 0; i < 300; i++ {
		doT(t, kc, "SET", "k"+strconv.Itoa(i), "v")
	}
	if got := infoInt(t, kc, "persistence", "rdb_changes_since_last_save"); got <= 0 || got >= 300 {
		t.Errorf("rdb_changes_since_last_save %d after 300 writes and log truncations, want 0 < n < 300", got)
	}
	if got := infoInt(t, kc, "persistence", "rdb_last_save_time"); got <= first {
		t.Errorf("rdb_last_save_time %d, not after the start's %d though the log was truncated", got, first)
	}
}

// TestInfoCachedScripts: INFO memory number_of_cached_scripts counts the
// scripts of the replicated script cache, on every node, as redis-server
// counts its own: EVAL and SCRIPT LOAD add one (once per body), SCRIPT
// FLUSH empties it. (EVAL_RO, served as a read, caches nothing on kvorum:
// not compared.)
func TestInfoCachedScripts(t *testing.T) {
	ref := dialT(t, kvdiff.StartServer(t))
	c := newTestCluster(t, 3)
	lead := c.waitLeader()
	kc := dialT(t, c.node(lead).ClientAddr())
	fc := dialT(t, c.node(followersOf(lead, 3)[0]).ClientAddr())
	scripts := func(conn *kvdiff.Conn) int64 { return infoInt(t, conn, "memory", "number_of_cached_scripts") }
	for _, step := range []struct {
		args []string
		want int64
	}{
		{[]string{"EVAL", "return 1", "0"}, 1},
		{[]string{"EVAL", "return 1", "0"}, 1},
		{[]string{"SCRIPT", "LOAD", "return 2"}, 2},
		{[]string{"EVALSHA", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "0"}, 2},
		{[]string{"SCRIPT", "FLUSH"}, 0},
		{[]string{"SCRIPT", "LOAD", "return 4"}, 1},
	} {
		doT(t, ref, step.args...)
		doT(t, kc, step.args...)
		if got := scripts(ref); got != step.want {
			t.Fatalf("%v: redis-server counts %d scripts, the test says %d", step.args, got, step.want)
		}
		if got := scripts(kc); got != step.want {
			t.Errorf("%v: kvorum's leader counts %d scripts, redis-server %d", step.args, got, step.want)
		}
		doT(t, fc, "GET", "sync") // a read barrier: the follower has applied the step
		if got := scripts(fc); got != step.want {
			t.Errorf("%v: a follower counts %d scripts, redis-server %d", step.args, got, step.want)
		}
	}
}

// TestInfoStatsFieldsLikeRedis: INFO stats lists the fields redis-server
// 7.0 lists, in its order (kvorum's own, protocol_errors, after them).
func TestInfoStatsFieldsLikeRedis(t *testing.T) {
	ref := dialT(t, kvdiff.StartServer(t))
	c := newTestCluster(t, 3)
	kc := dialT(t, c.node(c.waitLeader()).ClientAddr())
	names := func(conn *kvdiff.Conn, section string) []string {
		var n []string
		for _, line := range strings.Split(string(doT(t, conn, "INFO", section).Str), "\r\n") {
			if name, _, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "#") {
				n = append(n, name)
			}
		}
		return n
	}
	want := names(ref, "stats")
	got := names(kc, "stats")
	if len(got) < len(want) || strings.Join(got[:len(want)], ",") != strings.Join(want, ",") {
		t.Errorf("INFO stats fields:\nkvorum       %s\nredis-server %s", strings.Join(got, ","), strings.Join(want, ","))
	}
}

// keyspaceApplyLookups are commands whose read lookups kvorum makes at
// apply: reads queued in MULTI or run by a script, and writes that read a
// key. Each is a list of commands run between two RESETSTATs.
var keyspaceApplyLookups = [][][]string{
	{{"MULTI"}, {"GET", "s"}, {"GET", "nokey"}, {"HGET", "h", "f"}, {"EXEC"}},
	{{"EVAL", "return redis.call('GET', KEYS[1])", "1", "nokey"}},
	{{"EVAL", "return redis.call('MGET', KEYS[1], KEYS[2])", "2", "s", "nokey"}},
	{{"SET", "s2", "v"}, {"GETDEL", "s2"}, {"GETDEL", "s2"}},
	{{"GETEX", "s", "PERSIST"}, {"GETEX", "nokey"}},
	{{"SET", "s", "v3", "GET"}, {"SET", "nokey2", "v", "GET"}, {"DEL", "nokey2"}},
	{{"SUNIONSTORE", "dst", "set", "nokey"}, {"ZUNIONSTORE", "zdst", "2", "z", "nokey"}},
	{{"COPY", "s", "s3"}, {"COPY", "nokey", "s4"}},
}

// TestInfoKeyspaceHitsAtApplyLikeRedis: the read lookups kvorum makes at
// apply (MULTI/EXEC, scripts, writes that read a key) are counted as
// redis-server counts them, by the leader (it computes the replies; a
// follower that forwards the command does not count them).
func TestInfoKeyspaceHitsAtApplyLikeRedis(t *testing.T) {
	ref := dialT(t, kvdiff.StartServer(t))
	c := newTestCluster(t, 3)
	lead := c.waitLeader()
	kc := dialT(t, c.node(lead).ClientAddr())
	fol := dialT(t, c.node(followersOf(lead, 3)[0]).ClientAddr())
	for _, conn := range []*kvdiff.Conn{ref, kc} {
		for _, args := range keyspaceSetup {
			if v := doT(t, conn, args...); v.Type == '-' {
				t.Fatalf("%v: %s", args, v.Str)
			}
		}
	}
	stats := func(conn *kvdiff.Conn) string {
		return fmt.Sprintf("hits=%d misses=%d",
			infoInt(t, conn, "stats", "keyspace_hits"), infoInt(t, conn, "stats", "keyspace_misses"))
	}
	for _, cmds := range keyspaceApplyLookups {
		doT(t, ref, "CONFIG", "RESETSTAT")
		for _, args := range cmds {
			doT(t, ref, args...)
		}
		want := stats(ref)
		doT(t, kc, "CONFIG", "RESETSTAT")
		doT(t, fol, "CONFIG", "RESETSTAT")
		for _, args := range cmds {
			doT(t, kc, args...)
		}
		// The leader counts them when it acts on the committed round,
		// just after the reply: wait a little for it.
		got := stats(kc)
		for deadline := time.Now().Add(3 * time.Second); got != want && time.Now().Before(deadline); got = stats(kc) {
			time.Sleep(10 * time.Millisecond)
		}
		if got != want {
			t.Errorf("%v: kvorum %s, redis-server %s", cmds, got, want)
		}
		if f := stats(fol); f != "hits=0 misses=0" {
			t.Errorf("%v: a follower that served nothing counts %s", cmds, f)
		}
	}
}

package resp

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestConfigKvorumValues: the parameters whose value differs from a
// default redis-server's answer kvorum's truth (the others are in
// internal/server/testdata/diff/config.txt, against redis-server), and
// the durability parameters refuse any change but to the value they have.
func TestConfigKvorumValues(t *testing.T) {
	_, addr := startServer(t, Config{}, newFakeBackend())
	c := dialRaw(t, addr)
	c.expect([]exchange{
		{[]string{"CONFIG", "GET", "appendonly"}, "*2\r\n$10\r\nappendonly\r\n$3\r\nyes\r\n"},
		{[]string{"CONFIG", "GET", "appendfsync"}, "*2\r\n$11\r\nappendfsync\r\n$6\r\nalways\r\n"},
		{[]string{"CONFIG", "GET", "save"}, "*2\r\n$4\r\nsave\r\n$0\r\n\r\n"},
		{[]string{"CONFIG", "GET", "databases"}, "*2\r\n$9\r\ndatabases\r\n$1\r\n1\r\n"},
		{[]string{"CONFIG", "GET", "append*", "save"}, "*6\r\n$11\r\nappendfsync\r\n$6\r\nalways\r\n$10\r\nappendonly\r\n$3\r\nyes\r\n$4\r\nsave\r\n$0\r\n\r\n"},
		{[]string{"CONFIG", "SET", "appendfsync", "always"}, "+OK\r\n"},
		{[]string{"CONFIG", "SET", "appendonly", "no"}, "-ERR CONFIG SET failed (possibly related to argument 'appendonly') - " + fixedDurability + "\r\n"},
		{[]string{"CONFIG", "SET", "save", "3600 1"}, "-ERR CONFIG SET failed (possibly related to argument 'save') - " + fixedDurability + "\r\n"},
		{[]string{"CONFIG", "SET", "port", "1"}, "-ERR CONFIG SET failed (possibly related to argument 'port') - can't set immutable config\r\n"},
		{[]string{"CONFIG", "SET", "timeout", "-1"}, "-ERR CONFIG SET failed (possibly related to argument 'timeout') - argument must be between 0 and 2147483647 inclusive\r\n"},
		{[]string{"CONFIG", "SET", "timeout", "0"}, "+OK\r\n"},
		// Atomic: a refused parameter leaves the others unchanged.
		{[]string{"CONFIG", "SET", "maxclients", "7", "maxmemory-policy", "allkeys-lru"}, "-ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - kvorum does not evict keys (its data lives on disk): only noeviction is supported, and writes that add data are refused over maxmemory\r\n"},
		{[]string{"CONFIG", "SET", "maxmemory-policy", "lru"}, "-ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction\r\n"},
		{[]string{"CONFIG", "SET", "maxmemory-policy", "NoEviction"}, "+OK\r\n"},
		{[]string{"CONFIG", "GET", "maxclients"}, "*2\r\n$10\r\nmaxclients\r\n$5\r\n10000\r\n"},
	})
}

// TestConfigSetMaxClients: CONFIG SET maxclients takes effect on the next
// connection, and INFO reports it.
func TestConfigSetMaxClients(t *testing.T) {
	_, addr := startServer(t, Config{}, newFakeBackend())
	c1 := dialRaw(t, addr)
	c1.cmd("CONFIG", "SET", "maxclients", "1")
	if r := c1.reply(); r != "+OK\r\n" {
		t.Fatal(r)
	}
	c2 := dialRaw(t, addr)
	if r := c2.reply(); r != "-ERR max number of clients reached\r\n" {
		t.Fatalf("a second client with maxclients 1: %q", r)
	}
	c1.cmd("INFO", "clients")
	if r := c1.reply(); !strings.Contains(r, "maxclients:1\r\n") {
		t.Fatalf("INFO clients: %q", r)
	}
	c1.cmd("CONFIG", "SET", "maxclients", "10")
	c1.reply()
	c3 := dialRaw(t, addr)
	c3.send("PING\r\n")
	if r := c3.reply(); r != "+PONG\r\n" {
		t.Fatalf("after maxclients 10: %q", r)
	}
}

// TestConfigResetStat: CONFIG RESETSTAT zeroes INFO's counters.
func TestConfigResetStat(t *testing.T) {
	_, addr := startServer(t, Config{}, newFakeBackend())
	c := dialRaw(t, addr)
	for i := 0; i < 20; i++ {
		c.send("PING\r\n")
		c.reply()
	}
	stat := func(field string) string {
		c.cmd("INFO", "stats")
		r := c.reply()
		i := strings.Index(r, field+":")
		if i < 0 {
			t.Fatalf("no %s in %q", field, r)
		}
		v := r[i+len(field)+1:]
		return v[:strings.Index(v, "\r\n")]
	}
	if v := stat("total_commands_processed"); v == "0" || v == "1" {
		t.Fatalf("total_commands_processed %s after 20 commands", v)
	}
	c.cmd("CONFIG", "RESETSTAT")
	if r := c.reply(); r != "+OK\r\n" {
		t.Fatal(r)
	}
	// The INFO that reads it counts itself, as in Redis.
	if v := stat("total_commands_processed"); v != "0" && v != "1" {
		t.Fatalf("total_commands_processed %s after CONFIG RESETSTAT", v)
	}
	if v := stat("total_connections_received"); v != "0" {
		t.Fatalf("total_connections_received %s after CONFIG RESETSTAT", v)
	}
}

// TestInfoStatsReset: CONFIG RESETSTAT zeroes commandstats and
// errorstats too; INFO cpu and the resident memory come from the OS.
func TestInfoStatsReset(t *testing.T) {
	_, addr := startServer(t, Config{}, newFakeBackend())
	c := dialRaw(t, addr)
	for _, args := range [][]string{{"PING"}, {"ECHO"}, {"CLIENT", "ID"}, {"NOSUCHCMD"}} {
		c.cmd(args...)
		c.reply()
	}
	info := func(section string) string {
		c.cmd("INFO", section)
		return c.reply()
	}
	if r := info("commandstats"); !strings.Contains(r, "cmdstat_ping:calls=1,") ||
		!strings.Contains(r, "cmdstat_echo:calls=0,usec=0,usec_per_call=0.00,rejected_calls=1,failed_calls=0") ||
		!strings.Contains(r, "cmdstat_client|id:calls=1,") {
		t.Fatalf("commandstats before the reset: %q", r)
	}
	if r := info("errorstats"); !strings.Contains(r, "errorstat_ERR:count=2") {
		t.Fatalf("errorstats (wrong arity, unknown command): %q", r)
	}
	c.cmd("CONFIG", "RESETSTAT")
	c.reply()
	if r := info("commandstats"); strings.Contains(r, "cmdstat_ping") || !strings.Contains(r, "cmdstat_config|resetstat:calls=1,") {
		t.Fatalf("commandstats after the reset: %q", r)
	}
	if r := info("errorstats"); strings.Contains(r, "errorstat_") {
		t.Fatalf("errorstats after the reset: %q", r)
	}
	if r := info("cpu"); !strings.Contains(r, "used_cpu_user:") || !strings.Contains(r, "used_cpu_sys:") {
		t.Fatalf("INFO cpu: %q", r)
	}
	r := info("memory")
	i := strings.Index(r, "used_memory_rss:")
	if i < 0 {
		t.Fatalf("INFO memory: %q", r)
	}
	v := r[i+len("used_memory_rss:"):]
	if rss, err := strconv.ParseUint(v[:strings.Index(v, "\r\n")], 10, 64); err != nil || rss < 1<<20 {
		t.Fatalf("used_memory_rss %q: %v", v[:strings.Index(v, "\r\n")], err)
	}
}

// TestConfigTimeoutClosesIdleClients: CONFIG SET timeout N closes a
// client idle for N seconds, as Redis does, but not a subscriber, nor a
// client that keeps talking; 0 turns it off again.
func TestConfigTimeoutClosesIdleClients(t *testing.T) {
	_, addr := startServer(t, Config{}, newFakeBackend())
	admin := dialRaw(t, addr)
	admin.cmd("CONFIG", "SET", "timeout", "1")
	if got := admin.reply(); got != "+OK\r\n" {
		t.Fatalf("CONFIG SET timeout 1: %q", got)
	}
	admin.cmd("CONFIG", "GET", "timeout")
	if got := admin.reply(); got != "*2\r\n$7\r\ntimeout\r\n$1\r\n1\r\n" {
		t.Fatalf("CONFIG GET timeout: %q", got)
	}
	idle, busy, sub := dialRaw(t, addr), dialRaw(t, addr), dialRaw(t, addr)
	for _, c := range []*rawConn{idle, busy} {
		c.cmd("PING")
		if got := c.reply(); got != "+PONG\r\n" {
			t.Fatalf("PING: %q", got)
		}
	}
	sub.cmd("SUBSCRIBE", "ch")
	sub.reply()
	for i := 0; i < 5; i++ { // 2.5 s: the busy one talks every half second
		time.Sleep(500 * time.Millisecond)
		busy.cmd("PING")
		if got := busy.reply(); got != "+PONG\r\n" {
			t.Fatalf("a client talking every 0.5 s was closed: %q", got)
		}
	}
	if _, err := idle.br.ReadByte(); err == nil {
		t.Fatal("a client idle for 2.5 s with timeout 1 is still open")
	}
	sub.cmd("PING")
	if got := sub.reply(); !strings.Contains(got, "pong") {
		t.Fatalf("a subscriber was closed by the idle timeout: %q", got)
	}
	admin = dialRaw(t, addr) // the first one was idle too: closed
	admin.cmd("CONFIG", "SET", "timeout", "0")
	if got := admin.reply(); got != "+OK\r\n" {
		t.Fatalf("CONFIG SET timeout 0: %q", got)
	}
	quiet := dialRaw(t, addr)
	quiet.cmd("PING")
	quiet.reply()
	time.Sleep(1500 * time.Millisecond)
	quiet.cmd("PING")
	if got := quiet.reply(); got != "+PONG\r\n" {
		t.Fatalf("timeout 0 still closed an idle client: %q", got)
	}
}

// TestConfigSetProtoMaxBulkLen: CONFIG SET proto-max-bulk-len takes
// effect on the node's connections, already open ones included, at their
// next read: a larger bulk is refused with Redis's protocol error (and the
// connection closed, as Redis closes it); below 1mb is refused as Redis
// refuses it, and CONFIG GET answers the value set.
func TestConfigSetProtoMaxBulkLen(t *testing.T) {
	_, addr := startServer(t, Config{}, newFakeBackend())
	c := dialRaw(t, addr)
	other := dialRaw(t, addr) // open before the change
	big := strings.Repeat("x", 1<<20+5)
	c.expect([]exchange{
		{[]string{"CONFIG", "SET", "proto-max-bulk-len", "100"}, "-ERR CONFIG SET failed (possibly related to argument 'proto-max-bulk-len') - argument must be between 1048576 and 9223372036854775807 inclusive\r\n"},
		{[]string{"ECHO", big}, "$1048581\r\n" + big + "\r\n"},
		{[]string{"CONFIG", "SET", "proto-max-bulk-len", "1mb"}, "+OK\r\n"},
		{[]string{"CONFIG", "GET", "proto-max-bulk-len"}, "*2\r\n$18\r\nproto-max-bulk-len\r\n$7\r\n1048576\r\n"},
	})
	if t.Failed() {
		t.FailNow()
	}
	other.cmd("PING")
	if got := other.reply(); got != "+PONG\r\n" {
		t.Fatalf("PING: %q", got)
	}
	// Only the header: the node refuses the frame at its "$len" line and
	// closes the connection, so a client still sending the body could see
	// its write reset.
	other.send("*2\r\n$4\r\nECHO\r\n$1048581\r\n")
	if got := other.reply(); got != "-ERR Protocol error: invalid bulk length\r\n" {
		t.Fatalf("a bulk over the new limit on a connection opened before: %.80q", got)
	}
	c.cmd("CONFIG", "SET", "proto-max-bulk-len", "512mb")
	if got := c.reply(); got != "+OK\r\n" {
		t.Fatal(got)
	}
	c.cmd("ECHO", big)
	if got := c.reply(); got != "$1048581\r\n"+big+"\r\n" {
		t.Fatalf("after raising the limit again: %.80q", got)
	}
}

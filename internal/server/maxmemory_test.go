package server

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/kvdiff"
)

const oomError = "OOM command not allowed when used memory > 'maxmemory'."

// TestMaxMemory: maxmemory is the cluster's (CONFIG SET through Raft). On
// a 3-node cluster, with a small maxmemory, writes through a follower
// succeed until the data set estimate passes it, then SET is refused with
// Redis's OOM error on every node while DEL, GET and EXPIRE still run,
// MULTI refuses what it would queue and EXEC aborts, EXEC of a transaction
// that queued a SET before is refused; INFO memory shows the setting; an
// eviction policy is refused. Raising maxmemory lets writes through again.
func TestMaxMemory(t *testing.T) {
	c := newTestCluster(t, 3)
	lead := c.waitLeader()
	fc := dialT(t, c.node(followersOf(lead, 3)[0]).ClientAddr())
	kc := dialT(t, c.node(lead).ClientAddr())
	txc := dialT(t, c.node(lead).ClientAddr())
	isOOM := func(v kvdiff.Value) bool { return v.Type == '-' && string(v.Str) == oomError }
	ok := func(conn *kvdiff.Conn, args ...string) kvdiff.Value {
		t.Helper()
		v := doT(t, conn, args...)
		if v.Type == '-' {
			t.Fatalf("%v: %s", args, v.Str)
		}
		return v
	}

	if got := infoField(t, fc, "memory", "maxmemory"); got != "0" {
		t.Fatalf("maxmemory %s before any CONFIG SET", got)
	}
	ok(fc, "FUNCTION", "LOAD", "#!lua name=lib\nredis.register_function('f', function(keys, args) return redis.call('set','k','v') end)\n"+
		"redis.register_function{function_name='g', callback=function(keys, args) return redis.call('get','k0') end, flags={'no-writes'}}\n"+
		"redis.register_function{function_name='h', callback=function(keys, args) return redis.call('set','k','v') end, flags={'allow-oom'}}")
	// A transaction queued before the limit is passed, executed after.
	ok(txc, "MULTI")
	ok(txc, "SET", "queued", "v")

	ok(fc, "CONFIG", "SET", "maxmemory", "1mb")
	if v := ok(kc, "CONFIG", "GET", "maxmemory"); len(v.Elems) != 2 || string(v.Elems[1].Str) != "1048576" {
		t.Fatalf("CONFIG GET maxmemory on the leader: %v", v)
	}
	value := strings.Repeat("x", 64<<10)
	written := 0
	deadline := time.Now().Add(30 * time.Second)
	for {
		v := doT(t, fc, "SET", "k"+strconv.Itoa(written), value)
		if isOOM(v) {
			break
		}
		if v.Type == '-' {
			t.Fatalf("SET: %s", v.Str)
		}
		written++
		if time.Now().After(deadline) {
			t.Fatalf("%d writes of 64 KiB and no OOM with maxmemory 1mb (INFO used_memory_dataset %s)",
				written, infoField(t, fc, "memory", "used_memory_dataset"))
		}
	}
	if written < 2 {
		t.Fatalf("OOM after %d writes: the 1 MiB limit was passed too early", written)
	}
	if n := infoInt(t, fc, "memory", "used_memory_dataset"); n <= 1<<20 {
		t.Errorf("OOM with used_memory_dataset %d <= maxmemory", n)
	}
	t.Logf("OOM after %d writes of 64 KiB", written)
	for _, f := range [][2]string{{"maxmemory", "1048576"}, {"maxmemory_human", "1.00M"}, {"maxmemory_policy", "noeviction"}} {
		if got := infoField(t, fc, "memory", f[0]); got != f[1] {
			t.Errorf("INFO memory %s: %q, want %q", f[0], got, f[1])
		}
	}
	// Every node refuses (each samples its own data set, within a second).
	for time.Now().Before(deadline) && !isOOM(doT(t, kc, "SET", "k", "v")) {
		time.Sleep(100 * time.Millisecond)
	}
	for _, conn := range []*kvdiff.Conn{fc, kc} {
		for _, args := range [][]string{{"SET", "k", "v"}, {"INCR", "n"}, {"XADD", "s", "*", "f", "v"}, {"SET", "k", "v", "BADOPTION"}} {
			if v := doT(t, conn, args...); !isOOM(v) {
				t.Errorf("%v over maxmemory: %v, want OOM", args, v)
			}
		}
		if v := doT(t, conn, "SET", "k"); v.Type != '-' || !strings.Contains(string(v.Str), "wrong number of arguments") {
			t.Errorf("SET k over maxmemory: %v, want the arity error first", v)
		}
		if v := ok(conn, "GET", "k0"); string(v.Str) != value {
			t.Errorf("GET k0 over maxmemory: %d bytes", len(v.Str))
		}
		ok(conn, "EXPIRE", "k1", "1000")
		ok(conn, "PUBLISH", "ch", "m")
	}
	// Scripts, as redis-server 7.0 answers them over maxmemory (recorded).
	for _, conn := range []*kvdiff.Conn{fc, kc} {
		for _, s := range []struct {
			args []string
			want string
		}{
			{[]string{"EVAL", "return redis.call('set','k','v')", "0"}, "-" + oomError + " script: d223ed8c7345b684e8ed044ed472601f536fa58b, on @user_script:1."},
			{[]string{"EVAL", "redis.call('del','zz'); return redis.call('set','k','v')", "0"}, "+OK"},
			{[]string{"EVAL", "redis.pcall('set','k','v'); return redis.call('get','k0')", "0"}, "$" + value},
			{[]string{"EVAL", "#!lua\nreturn 1", "0"}, "-" + oomError},
			{[]string{"EVAL", "#!lua flags=no-writes\nreturn redis.call('get','k0')", "0"}, "$" + value},
			{[]string{"EVAL", "#!lua flags=allow-oom\nreturn redis.call('set','k','v')", "0"}, "+OK"},
			{[]string{"EVALSHA", "d223ed8c7345b684e8ed044ed472601f536fa58b", "0"}, "-" + oomError + " script: d223ed8c7345b684e8ed044ed472601f536fa58b, on @user_script:1."},
			{[]string{"FCALL", "f", "0"}, "-" + oomError},
			{[]string{"FCALL", "g", "0"}, "$" + value},
			{[]string{"FCALL_RO", "g", "0"}, "$" + value},
			{[]string{"FCALL", "h", "0"}, "+OK"},
			{[]string{"FUNCTION", "LOAD", "#!lua name=lib2\nredis.register_function('h', function() return 1 end)"}, "-" + oomError},
		} {
			v := doT(t, conn, s.args...)
			if got := string(v.Type) + string(v.Str); got != s.want {
				t.Errorf("%q over maxmemory: %.120q, want %.120q", s.args, got, s.want)
			}
		}
	}
	if v := ok(fc, "DEL", "k0"); v.Int != 1 {
		t.Errorf("DEL k0 over maxmemory: %v", v)
	}
	// EXEC of the transaction queued before: refused, and discarded.
	if v := doT(t, txc, "EXEC"); !isOOM(v) {
		t.Errorf("EXEC with a queued SET over maxmemory: %v, want OOM", v)
	}
	if v := doT(t, txc, "EXEC"); v.Type != '-' || !strings.Contains(string(v.Str), "EXEC without MULTI") {
		t.Errorf("EXEC again: %v, want the transaction discarded", v)
	}
	// Inside MULTI nothing is queued, not even a read; EXEC aborts.
	ok(fc, "MULTI")
	for _, args := range [][]string{{"SET", "k", "v"}, {"GET", "k1"}, {"DEL", "k1"}} {
		if v := doT(t, fc, args...); !isOOM(v) {
			t.Errorf("%v in MULTI over maxmemory: %v, want OOM", args, v)
		}
	}
	if v := doT(t, fc, "EXEC"); v.Type != '-' || !strings.HasPrefix(string(v.Str), "EXECABORT") {
		t.Errorf("EXEC after refused commands: %v, want EXECABORT", v)
	}
	if v := doT(t, fc, "CONFIG", "SET", "maxmemory-policy", "allkeys-lru"); v.Type != '-' || !strings.Contains(string(v.Str), "does not evict") {
		t.Errorf("CONFIG SET maxmemory-policy allkeys-lru: %v", v)
	}
	ok(fc, "CONFIG", "SET", "maxmemory-policy", "noeviction")

	// Raised: writes go through again on every node once it has applied
	// the change.
	ok(fc, "CONFIG", "SET", "maxmemory", "1gb")
	for _, conn := range []*kvdiff.Conn{fc, kc} {
		for i := 0; ; i++ {
			v := doT(t, conn, "SET", "after", "v")
			if v.Type != '-' {
				break
			}
			if !isOOM(v) || i == 50 {
				t.Fatalf("SET after raising maxmemory: %s", v.Str)
			}
			time.Sleep(20 * time.Millisecond) // the follower applies the CONFIG SET
		}
	}
	if got := infoField(t, kc, "memory", "maxmemory_human"); got != "1.00G" {
		t.Errorf("maxmemory_human %q after CONFIG SET maxmemory 1gb", got)
	}
	ok(fc, "CONFIG", "SET", "maxmemory", "0")
	ok(fc, "SET", "k", "v")
}

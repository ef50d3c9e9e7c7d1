package kv

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/script"
)

const testLib = "#!lua name=tlib\n" +
	"redis.register_function('tset', function(keys, args) return redis.call('SET', keys[1], args[1]) end)\n" +
	"redis.register_function{function_name='tget', callback=function(keys) return redis.call('GET', keys[1]) end, flags={'no-writes'}, description='reads'}"

// A library loaded through Apply is in the replicated keyspace: it
// survives closing and reopening the database and is callable after.
func TestFunctionSurvivesReopen(t *testing.T) {
	fs := vfs.NewMem()
	open := func() *pebble.DB {
		db, err := pebble.Open("db", &pebble.Options{FS: fs, Logger: quietLogger{}})
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	db := open()
	if got := show(run(t, db, 0, "FUNCTION", "LOAD", testLib)); got != "tlib" {
		t.Fatalf("load: %s", got)
	}
	if got := show(run(t, db, 0, "FCALL", "tset", "1", "k", "v")); got != "OK" {
		t.Fatalf("fcall: %s", got)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = open()
	defer db.Close()
	if got := show(run(t, db, 0, "FCALL_RO", "tget", "1", "k")); got != "v" {
		t.Fatalf("fcall_ro after reopen: %s", got)
	}
	if got := show(run(t, db, 0, "FCALL", "TSET", "1", "k", "w")); got != "OK" {
		t.Fatalf("fcall after reopen: %s", got)
	}
	list := Read(db, toArgs("FUNCTION", "LIST", "LIBRARYNAME", "tlib"), 0)
	if got := show(list); !strings.Contains(got, "tget description reads flags") {
		t.Fatalf("list after reopen: %s", got)
	}
	if fl := list.Elems[0].Elems[5].Elems[1].Elems[5]; fl.Kind != reply.KindSet || len(fl.Elems) != 1 || string(fl.Elems[0].Str) != "no-writes" {
		t.Fatalf("flags after reopen: %+v", fl)
	}
	if got := show(Read(db, toArgs("FUNCTION", "STATS"), 0)); got != "[running_script (nil) engines [LUA [libraries_count 1 functions_count 2]]]" {
		t.Fatalf("stats: %s", got)
	}
}

// The records live under the hidden prefix (snapshots carry them,
// FLUSHALL keeps them); FUNCTION FLUSH removes them all.
func TestFunctionStorage(t *testing.T) {
	if !bytes.HasPrefix(fnLibKey("x"), hiddenPrefix) || !bytes.HasPrefix(fnNameKey("x"), hiddenPrefix) {
		t.Fatal("function keys outside the hidden prefix")
	}
	start, end := UserSpan()
	if bytes.Compare(fnPrefix, start) < 0 || bytes.Compare(prefixEnd(fnPrefix), end) > 0 || bytes.Compare(prefixEnd(fnPrefix), firstUserKey) > 0 {
		t.Fatal("function keys outside the hidden part of UserSpan")
	}
	for _, p := range [][]byte{scriptPrefix, alivePrefix, counterKey, leasePrefix, ownedPrefix, lockPrefix, queuePrefix} {
		if bytes.HasPrefix(p, fnPrefix) || bytes.HasPrefix(fnPrefix, p) {
			t.Fatalf("function prefix overlaps %q", p)
		}
	}
	db := openMem(t)
	run(t, db, 0, "FUNCTION", "LOAD", testLib)
	run(t, db, 0, "SET", "a", "1")
	run(t, db, 0, "FLUSHALL")
	if got := show(run(t, db, 0, "DBSIZE")); got != "0" {
		t.Fatalf("dbsize %s: function records visible as keys", got)
	}
	if got := show(run(t, db, 0, "FCALL", "tset", "1", "k", "v")); got != "OK" {
		t.Fatalf("after FLUSHALL: %s", got)
	}
	run(t, db, 0, "FUNCTION", "FLUSH")
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: fnPrefix, UpperBound: prefixEnd(fnPrefix)})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if it.First() {
		t.Fatalf("FUNCTION FLUSH left %q", it.Key())
	}
}

// FCALL is replicated like EVAL; FCALL_RO, FUNCTION LIST/STATS/HELP/KILL
// are reads; FUNCTION LOAD/DELETE/FLUSH are writes.
func TestFunctionRouting(t *testing.T) {
	cases := map[string]bool{
		"FCALL f 0": true, "fcall_ro f 0": false,
		"FUNCTION LOAD x": true, "function delete x": true, "FUNCTION FLUSH": true, "FUNCTION Flush SYNC": true,
		"FUNCTION LIST": false, "FUNCTION STATS": false, "FUNCTION HELP": false, "FUNCTION KILL": false,
		"FUNCTION DUMP": false,
	}
	for c, want := range cases {
		if got := IsWrite(toArgs(strings.Fields(c)...)); got != want {
			t.Errorf("IsWrite(%s) = %v, want %v", c, got, want)
		}
	}
	db := openMem(t)
	run(t, db, 0, "FUNCTION", "LOAD", testLib)
	// Reads work through Read, writes are refused there.
	if got := show(Read(db, toArgs("FCALL_RO", "tget", "1", "k"), 0)); got != "(nil)" {
		t.Fatalf("fcall_ro: %s", got)
	}
	if r := Read(db, toArgs("FCALL", "tget", "1", "k"), 0); !r.IsError() {
		t.Fatalf("FCALL through Read: %s", show(r))
	}
	if r := Read(db, toArgs("FUNCTION", "FLUSH"), 0); !r.IsError() {
		t.Fatalf("FUNCTION FLUSH through Read: %s", show(r))
	}
}

// Syntax errors and bad code never reach the log when Check can tell.
func TestFunctionCheck(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"FUNCTION", "LOAD", "no shebang"}, "ERR Missing library metadata"},
		{[]string{"FUNCTION", "LOAD", "#!lua name=a b\n"}, "ERR Invalid metadata value given: b"},
		{[]string{"FUNCTION", "LOAD", "REPLACE", "#!lua name=a\nthis is not lua"}, "ERR Error compiling function: "},
		{[]string{"FUNCTION", "LOAD", "REPLACE", "#!lua name=a\nlocal x = 1"}, "ERR No functions registered"},
		{[]string{"FUNCTION", "LOAD", "REPLACE", "#!lua name=a\nredis.call('ping')"}, "ERR Error registering functions: ERR user_function:2: Script attempted to access nonexistent global variable 'call'"},
		{[]string{"FUNCTION", "RESTORE", "x"}, "ERR DUMP payload version or checksum are wrong"},
		{[]string{"FUNCTION", "RESTORE", "x", "NOPE"}, "ERR Wrong restore policy given"},
		{[]string{"FUNCTION", "FLUSH", "x"}, "ERR FUNCTION FLUSH only supports SYNC|ASYNC option"},
		{[]string{"FUNCTION", "LIST", "x"}, "ERR Unknown argument x"},
		{[]string{"FUNCTION", "NOPE"}, "ERR unknown subcommand 'NOPE'. Try FUNCTION HELP."},
	} {
		r, ok := Check(toArgs(c.args...), Limits{})
		if ok || !strings.HasPrefix(string(r.Str), c.want) {
			t.Errorf("Check(%q) = %v %q, want %q", c.args, ok, r.Str, c.want)
		}
	}
	// Without REPLACE, code errors come at apply time (after the "already
	// exists" check, as in Redis) and change nothing.
	if _, ok := Check(toArgs("FUNCTION", "LOAD", "#!lua name=a\nthis is not lua"), Limits{}); !ok {
		t.Fatal("Check refused a LOAD without REPLACE")
	}
	db := openMem(t)
	if r := run(t, db, 0, "FUNCTION", "LOAD", "#!lua name=a\nthis is not lua"); !strings.HasPrefix(string(r.Str), "ERR Error compiling function: ") {
		t.Fatalf("bad code: %s", show(r))
	}
	if got := show(Read(db, toArgs("FUNCTION", "LIST"), 0)); got != "[]" {
		t.Fatalf("bad code changed the libraries: %s", got)
	}
}

// Functions are deterministic: state kept in a library's upvalues does
// not survive between calls (every call rebuilds the closures), and
// register_function cannot be called outside a load.
func TestFunctionIsolation(t *testing.T) {
	db := openMem(t)
	run(t, db, 0, "FUNCTION", "LOAD", "#!lua name=c\nlocal n = 0\nlocal rf = redis.register_function\n"+
		"redis.register_function('count', function() n = n + 1 return n end)\n"+
		"redis.register_function('again', function() rf('x', function() end) end)")
	for i := 0; i < 3; i++ {
		if got := show(run(t, db, 0, "FCALL", "count", "0")); got != "1" {
			t.Fatalf("call %d: %s", i, got)
		}
	}
	want := "ERR<ERR redis.register_function can only be called on FUNCTION LOAD command script: again, on @user_function:5.>"
	if got := show(run(t, db, 0, "FCALL", "again", "0")); got != want {
		t.Fatalf("register_function at run time: %s", got)
	}
	// Scripts still run with the ordinary globals afterwards.
	if got := show(run(t, db, 0, "EVAL", "return string.len(KEYS[1])", "1", "abc")); got != "3" {
		t.Fatalf("eval after functions: %s", got)
	}
}

func TestFunctionBudget(t *testing.T) {
	db := openMem(t)
	r := run(t, db, 0, "FUNCTION", "LOAD", "#!lua name=b\nwhile true do end")
	if !strings.Contains(string(r.Str), "exceeded its budget") {
		t.Fatalf("endless load: %s", show(r))
	}
	run(t, db, 0, "FUNCTION", "LOAD", "#!lua name=b\nredis.register_function('spin', function() while true do end end)")
	r = run(t, db, 0, "FCALL", "spin", "0")
	if !strings.Contains(string(r.Str), "exceeded its budget") {
		t.Fatalf("endless function: %s", show(r))
	}
	if got := show(Read(db, toArgs("FUNCTION", "STATS"), 0)); !strings.Contains(got, "libraries_count 1") {
		t.Fatalf("stats: %s", got)
	}
}

// TestFunctionStatsRunningOnlyWhenBusy: FUNCTION STATS shows a running
// function only when the node asks for it (it is busy with it, Redis's
// only state in which FUNCTION STATS can see one); a run the read path
// merely overlaps (a follower still applying an FCALL whose reply the
// client already has) is not shown. The differential test through a
// follower saw that run under the race detector's load.
func TestFunctionStatsRunningOnlyWhenBusy(t *testing.T) {
	db := openMem(t)
	var m script.Monitor
	run := &script.Running{Name: "f", Command: [][]byte{[]byte("FCALL"), []byte("f"), []byte("0")}, Function: true}
	m.Begin(run)
	defer m.End(run)
	stats := func(show bool) Reply {
		r, _ := ReadIn(db, ReadEnv{Scripts: &m, RunningScript: show}, [][]byte{[]byte("FUNCTION"), []byte("STATS")}, 1000)
		return r
	}
	if r := stats(false); r.Kind != reply.KindMap || r.Elems[1].Kind != reply.KindNil {
		t.Fatalf("not busy: running_script = %s, want nil", show(r))
	}
	if r := stats(true); r.Kind != reply.KindMap || r.Elems[1].Kind != reply.KindMap {
		t.Fatalf("busy: running_script = %s, want the run", show(r))
	}
}

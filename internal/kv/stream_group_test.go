package kv

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/reply"
)

type groupStep struct {
	now  int64
	args []string
	want string
}

func runGroupSteps(t *testing.T, db *pebble.DB, steps []groupStep) {
	t.Helper()
	for i, c := range steps {
		if got := showGroup(run(t, db, c.now, c.args...)); got != c.want {
			t.Fatalf("step %d: %v = %s, want %s", i, c.args, got, c.want)
		}
	}
}

func sa(s ...string) []string { return s }

// showGroup is show with XREADGROUP's NestedMap shown as RESP2 sends it:
// an array of [key, entries] pairs.
func showGroup(r Reply) string {
	if r.Kind == reply.KindNestedMap {
		pairs := make([]Reply, 0, len(r.Elems)/2)
		for i := 0; i+1 < len(r.Elems); i += 2 {
			pairs = append(pairs, Array(r.Elems[i], r.Elems[i+1]))
		}
		return show(Array(pairs...))
	}
	return show(r)
}

// TestStreamGroupBookkeeping checks the PELs, consumers and the
// time-dependent fields with fixed clocks.
func TestStreamGroupBookkeeping(t *testing.T) {
	db := openMem(t)
	runGroupSteps(t, db, []groupStep{
		{1000, sa("XADD", "s", "1-1", "a", "1"), "1-1"},
		{1000, sa("XADD", "s", "2-1", "b", "2"), "2-1"},
		{1000, sa("XADD", "s", "3-1", "c", "3"), "3-1"},
		{1000, sa("XGROUP", "CREATE", "s", "g", "0"), "OK"},
		{1000, sa("XINFO", "STREAM", "s"), "[length 3 radix-tree-keys 1 radix-tree-nodes 2 last-generated-id 3-1 max-deleted-entry-id 0-0 entries-added 3 recorded-first-entry-id 1-1 groups 1 first-entry [1-1 [a 1]] last-entry [3-1 [c 3]]]"},
		{2000, sa("XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "s", ">"), "[[s [[1-1 [a 1]] [2-1 [b 2]]]]]"},
		{3000, sa("XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">"), "[[s [[3-1 [c 3]]]]]"},
		{3000, sa("XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">"), ""},
		{4000, sa("XPENDING", "s", "g"), "[3 1-1 3-1 [[alice 2] [bob 1]]]"},
		{4000, sa("XPENDING", "s", "g", "-", "+", "10"), "[[1-1 alice 2000 1] [2-1 alice 2000 1] [3-1 bob 1000 1]]"},
		{4000, sa("XPENDING", "s", "g", "IDLE", "1500", "-", "+", "10"), "[[1-1 alice 2000 1] [2-1 alice 2000 1]]"},
		{4000, sa("XPENDING", "s", "g", "-", "+", "10", "bob"), "[[3-1 bob 1000 1]]"},
		{4000, sa("XPENDING", "s", "g", "(1-1", "+", "1"), "[[2-1 alice 2000 1]]"},
		{3500, sa("XPENDING", "s", "g", "-", "+", "10", "bob"), "[[3-1 bob 500 1]]"},
		{2500, sa("XPENDING", "s", "g", "-", "+", "10", "bob"), "[[3-1 bob 0 1]]"}, // a clock behind: idle 0
		{5000, sa("XINFO", "CONSUMERS", "s", "g"), "[[name alice pending 2 idle 3000] [name bob pending 1 idle 2000]]"},
		// History re-reads bump the delivery count and time.
		{6000, sa("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"), "[[s [[1-1 [a 1]] [2-1 [b 2]]]]]"},
		{7000, sa("XPENDING", "s", "g", "-", "+", "10", "alice"), "[[1-1 alice 1000 2] [2-1 alice 1000 2]]"},
		// XCLAIM: min idle, IDLE, TIME, RETRYCOUNT.
		{7000, sa("XCLAIM", "s", "g", "carol", "2000", "1-1", "3-1", "JUSTID"), "[3-1]"},
		{7000, sa("XPENDING", "s", "g", "-", "+", "10"), "[[1-1 alice 1000 2] [2-1 alice 1000 2] [3-1 carol 0 1]]"},
		{7000, sa("XCLAIM", "s", "g", "carol", "0", "1-1", "IDLE", "500"), "[[1-1 [a 1]]]"},
		{7000, sa("XCLAIM", "s", "g", "carol", "0", "2-1", "TIME", "6900", "RETRYCOUNT", "9"), "[[2-1 [b 2]]]"},
		{7000, sa("XPENDING", "s", "g", "-", "+", "10"), "[[1-1 carol 500 3] [2-1 carol 100 9] [3-1 carol 0 1]]"},
		{7000, sa("XCLAIM", "s", "g", "carol", "0", "2-1", "TIME", "99999"), "[[2-1 [b 2]]]"}, // future: now
		{7000, sa("XPENDING", "s", "g", "-", "+", "1", "carol"), "[[1-1 carol 500 3]]"},
		{7000, sa("XINFO", "GROUPS", "s"), "[[name g consumers 3 pending 3 last-delivered-id 3-1 entries-read 3 lag 0]]"},
		{8000, sa("XINFO", "CONSUMERS", "s", "g"), "[[name alice pending 0 idle 2000] [name bob pending 0 idle 5000] [name carol pending 3 idle 1000]]"},
		// XAUTOCLAIM with a min idle.
		{9000, sa("XAUTOCLAIM", "s", "g", "dave", "2100", "0", "JUSTID"), "[0-0 [1-1] []]"},
		{9000, sa("XPENDING", "s", "g", "-", "+", "10"), "[[1-1 dave 0 3] [2-1 carol 2000 10] [3-1 carol 2000 1]]"},
		{9000, sa("XINFO", "STREAM", "s", "FULL", "COUNT", "1"), "[length 3 radix-tree-keys 1 radix-tree-nodes 2 last-generated-id 3-1 max-deleted-entry-id 0-0 entries-added 3 recorded-first-entry-id 1-1 entries [[1-1 [a 1]]] groups [[name g last-delivered-id 3-1 entries-read 3 lag 0 pel-count 3 pending [[1-1 dave 9000 3]] consumers [[name alice seen-time 6000 pel-count 0 pending []] [name bob seen-time 3000 pel-count 0 pending []] [name carol seen-time 7000 pel-count 2 pending [[2-1 7000 10]]] [name dave seen-time 9000 pel-count 1 pending [[1-1 9000 3]]]]]]]"},
		{9000, sa("XACK", "s", "g", "1-1", "2-1"), "2"},
		{9000, sa("XGROUP", "DELCONSUMER", "s", "g", "carol"), "1"},
		{9000, sa("XPENDING", "s", "g"), "[0 (nil) (nil) ]"},
		{9000, sa("XINFO", "GROUPS", "s"), "[[name g consumers 3 pending 0 last-delivered-id 3-1 entries-read 3 lag 0]]"},
		{9000, sa("XGROUP", "DESTROY", "s", "g"), "1"},
		{9000, sa("XINFO", "STREAM", "s"), "[length 3 radix-tree-keys 1 radix-tree-nodes 2 last-generated-id 3-1 max-deleted-entry-id 0-0 entries-added 3 recorded-first-entry-id 1-1 groups 0 first-entry [1-1 [a 1]] last-entry [3-1 [c 3]]]"},
	})
	// DESTROY removed every group record: 3 entries + 1 node record remain.
	if n := countElems(t, db, "s"); n != 4 {
		t.Fatalf("after DESTROY: %d element keys", n)
	}
}

// TestStreamGroupKeyspace: DEL, RENAME, COPY and expiry with groups.
func TestStreamGroupKeyspace(t *testing.T) {
	db := openMem(t)
	runGroupSteps(t, db, []groupStep{
		{1000, sa("XADD", "s", "1-1", "a", "1"), "1-1"},
		{1000, sa("XGROUP", "CREATE", "s", "g", "0"), "OK"},
		{1000, sa("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"), "[[s [[1-1 [a 1]]]]]"},
		{1000, sa("RENAME", "s", "r"), "OK"},
		{2000, sa("XPENDING", "r", "g", "-", "+", "10"), "[[1-1 c 1000 1]]"},
		{2000, sa("COPY", "r", "k"), "1"},
		{2000, sa("XACK", "k", "g", "1-1"), "1"},
		{2000, sa("XPENDING", "k", "g"), "[0 (nil) (nil) ]"},
		{2000, sa("XPENDING", "r", "g"), "[1 1-1 1-1 [[c 1]]]"},
		{2000, sa("XINFO", "STREAM", "k"), "[length 1 radix-tree-keys 1 radix-tree-nodes 2 last-generated-id 1-1 max-deleted-entry-id 0-0 entries-added 1 recorded-first-entry-id 1-1 groups 1 first-entry [1-1 [a 1]] last-entry [1-1 [a 1]]]"},
		{2000, sa("DEL", "r"), "1"},
		{2000, sa("XADD", "r", "1-1", "a", "1"), "1-1"},
		{2000, sa("XINFO", "GROUPS", "r"), "[]"},
		{2000, sa("PEXPIRE", "k", "1000"), "1"},
		{3000, sa("XINFO", "GROUPS", "k"), "ERR<ERR no such key>"},
		{3000, sa("XADD", "k", "1-1", "a", "1"), "1-1"},
		{3000, sa("XINFO", "GROUPS", "k"), "[]"},
		{3000, sa("XPENDING", "k", "g"), "ERR<NOGROUP No such key 'k' or consumer group 'g'>"},
	})
	run(t, db, 3000, "DEL", "k", "r")
	for _, k := range []string{"k", "r", "s"} {
		if n := countElems(t, db, k); n != 0 {
			t.Fatalf("%s: %d element keys left", k, n)
		}
	}
}

// TestStreamGroupDeterminism applies the same log to two replicas and
// compares every byte they store.
func TestStreamGroupDeterminism(t *testing.T) {
	cmds := [][]string{
		sa("XADD", "s", "*", "a", "1"),
		sa("XADD", "s", "*", "b", "2"),
		sa("XGROUP", "CREATE", "s", "g", "0"),
		sa("XGROUP", "CREATE", "t", "g", "$", "MKSTREAM"),
		sa("XREADGROUP", "GROUP", "g", "alice", "COUNT", "1", "STREAMS", "s", ">"),
		sa("XADD", "t", "*", "c", "3"),
		sa("XREADGROUP", "GROUP", "g", "bob", "BLOCK", "100", "STREAMS", "s", "t", ">", ">"),
		sa("XCLAIM", "s", "g", "carol", "0", "0-1", "FORCE"),
		sa("XAUTOCLAIM", "s", "g", "dave", "10", "0"),
		sa("XACK", "t", "g", "0-1"),
		sa("XGROUP", "CREATECONSUMER", "s", "g", "erin"),
		sa("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"),
		sa("XGROUP", "DELCONSUMER", "s", "g", "bob"),
		sa("XGROUP", "SETID", "s", "g", "0", "ENTRIESREAD", "0"),
		sa("XREADGROUP", "GROUP", "g", "frank", "NOACK", "STREAMS", "s", ">"),
	}
	dbs := []*pebble.DB{openMem(t), openMem(t)}
	var replies [2][]string
	for r, db := range dbs {
		for i, c := range cmds {
			args := toArgs(c...)
			if rep, ok := Check(args, Limits{}); !ok {
				t.Fatalf("%v: %s", c, show(rep))
			}
			b := db.NewIndexedBatch()
			rep := Apply(b, args, Env{Now: 5000 + int64(i)*100, Index: uint64(10 + i)})
			if err := b.Commit(pebble.NoSync); err != nil {
				t.Fatal(err)
			}
			replies[r] = append(replies[r], showGroup(rep))
		}
	}
	if fmt.Sprint(replies[0]) != fmt.Sprint(replies[1]) {
		t.Fatalf("replies differ:\n%v\n%v", replies[0], replies[1])
	}
	dump := func(db *pebble.DB) [][2][]byte {
		it, err := db.NewIter(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		var kvs [][2][]byte
		for ok := it.First(); ok; ok = it.Next() {
			kvs = append(kvs, [2][]byte{append([]byte(nil), it.Key()...), append([]byte(nil), it.Value()...)})
		}
		return kvs
	}
	a, b := dump(dbs[0]), dump(dbs[1])
	if len(a) != len(b) || len(a) == 0 {
		t.Fatalf("%d vs %d keys", len(a), len(b))
	}
	for i := range a {
		if !bytes.Equal(a[i][0], b[i][0]) || !bytes.Equal(a[i][1], b[i][1]) {
			t.Fatalf("key %d differs: %q=%q vs %q=%q", i, a[i][0], a[i][1], b[i][0], b[i][1])
		}
	}
	t.Logf("replies: %v", replies[0])
}

func TestStreamGroupBlockingHelpers(t *testing.T) {
	for _, c := range []struct {
		args    []string
		ok      bool
		timeout time.Duration
		keys    string
	}{
		{sa("XREADGROUP", "GROUP", "g", "c", "BLOCK", "150", "STREAMS", "a", "b", ">", ">"), true, 150 * time.Millisecond, "[a b]"},
		{sa("xreadgroup", "block", "0", "group", "g", "c", "count", "2", "streams", "a", ">"), true, 0, "[a]"},
		{sa("XREADGROUP", "GROUP", "g", "c", "STREAMS", "a", ">"), false, 0, ""},
		{sa("XREADGROUP", "GROUP", "g", "c", "BLOCK", "-1", "STREAMS", "a", ">"), false, 0, ""},
		{sa("XREADGROUP", "BLOCK", "1", "STREAMS", "a", ">", "x", "y"), false, 0, ""},
	} {
		d, keys, ok := BlockingTimeout(toArgs(c.args...))
		if ok != c.ok || d != c.timeout || (ok && fmt.Sprintf("%s", keys) != c.keys) {
			t.Errorf("BlockingTimeout(%q) = %v %s %v", c.args, d, keys, ok)
		}
		if ok != Blocks(toArgs(c.args...)) {
			t.Errorf("Blocks(%q) != %v", c.args, ok)
		}
	}
	got := XReadGroupRetry(toArgs("XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "a", ">"))
	if fmt.Sprintf("%s", got) != "[XREADGROUP COUNT 1000 GROUP g c BLOCK 0 STREAMS a >]" {
		t.Fatalf("retry: %s", got)
	}
	got = XReadGroupRetry(toArgs("XREADGROUP", "GROUP", "g", "c", "COUNT", "5", "BLOCK", "0", "STREAMS", "a", ">"))
	if len(got) != 11 {
		t.Fatalf("retry with COUNT: %s", got)
	}
	if got := XReadGroupRetry(toArgs("BLPOP", "a", "0")); len(got) != 3 {
		t.Fatalf("retry BLPOP: %s", got)
	}
	// Inside MULTI a blocking XREADGROUP never blocks: the kernel replies null.
	db := openMem(t)
	run(t, db, 1000, "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
	if r := run(t, db, 1000, "XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">"); r.Kind != reply.KindNilArray {
		t.Fatalf("empty XREADGROUP: %s", showGroup(r))
	}
	if n := countElems(t, db, "s"); n != 1 { // only the group: no consumer was created
		t.Fatalf("%d elements", n)
	}
}

// TestStreamGroupWatchAndWake: group changes do not change the key's WATCH
// stamp (as in Redis, where they never touch the key), except XGROUP
// CREATE MKSTREAM creating the stream; they still report the key in
// Effects.Written so that blocked XREADGROUP clients are woken.
func TestStreamGroupWatchAndWake(t *testing.T) {
	db := openMem(t)
	index := uint64(10)
	apply := func(s ...string) (Reply, []string) {
		index++
		b := db.NewIndexedBatch()
		defer b.Close()
		var fx Effects
		r := Apply(b, toArgs(s...), Env{Now: 1000, Index: index, Effects: &fx})
		if err := b.Commit(pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		var written []string
		for _, k := range fx.Written {
			written = append(written, string(k))
		}
		return r, written
	}
	stamp := func() uint64 {
		st, _, err := WatchStamp(db, []byte("s"), 1000, 0)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	apply("XGROUP", "CREATE", "s", "g0", "$", "MKSTREAM")
	apply("XADD", "s", "1-1", "a", "1")
	st := stamp()
	for _, c := range [][]string{
		sa("XGROUP", "CREATE", "s", "g", "0"),
		sa("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"),
		sa("XCLAIM", "s", "g", "d", "0", "1-1"),
		sa("XAUTOCLAIM", "s", "g", "e", "0", "0"),
		sa("XACK", "s", "g", "1-1"),
		sa("XGROUP", "SETID", "s", "g", "0"),
		sa("XGROUP", "CREATECONSUMER", "s", "g", "f"),
		sa("XGROUP", "DELCONSUMER", "s", "g", "f"),
		sa("XGROUP", "DESTROY", "s", "g"),
	} {
		r, written := apply(c...)
		if r.IsError() {
			t.Fatalf("%v: %s", c, show(r))
		}
		if fmt.Sprint(written) != "[s]" {
			t.Fatalf("%v: Effects.Written got %v", c, written)
		}
		if stamp() != st {
			t.Fatalf("%v changed the WATCH stamp", c)
		}
	}
	// Nothing to deliver: no write at all.
	if r, written := apply("XREADGROUP", "GROUP", "g0", "c", "STREAMS", "s", "0"); r.IsError() || len(written) != 1 {
		t.Fatalf("history read: %s %v", showGroup(r), written)
	}
	apply("XREADGROUP", "GROUP", "g0", "c", "STREAMS", "s", ">")
	if r, written := apply("XREADGROUP", "GROUP", "g0", "c", "STREAMS", "s", ">"); r.Kind != reply.KindNilArray || len(written) != 0 {
		t.Fatalf("empty read: %s %v", showGroup(r), written)
	}
	if r := run(t, db, 1000, "XINFO", "STREAM", "s"); !strings.Contains(show(r), "groups 1 ") {
		t.Fatalf("XINFO STREAM: %s", show(r))
	}
}

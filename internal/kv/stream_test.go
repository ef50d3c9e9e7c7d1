package kv

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/kvdiff"
	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/streamid"
	"github.com/kvorum/kvorum/internal/streamrec"
)

// Auto IDs come from the log's clock (Env.Now); when it is behind the last
// ID (a new leader with a slower clock), the last ms with seq+1 is used, as
// Redis does when its clock goes backwards.
func TestStreamAutoIDsFollowTheLogClock(t *testing.T) {
	db := openMem(t)
	steps := []struct {
		now  int64
		args []string
		want string
	}{
		{1000, []string{"XADD", "s", "*", "a", "1"}, "1000-0"},
		{1000, []string{"XADD", "s", "*", "a", "1"}, "1000-1"},
		{500, []string{"XADD", "s", "*", "a", "1"}, "1000-2"}, // the clock went backwards
		{999, []string{"XADD", "s", "*", "a", "1"}, "1000-3"},
		{1001, []string{"XADD", "s", "*", "a", "1"}, "1001-0"},
		{1001, []string{"XADD", "s", "1001-*", "a", "1"}, "1001-1"},
		{1001, []string{"XADD", "s", "2000-*", "a", "1"}, "2000-0"},
		{1500, []string{"XADD", "s", "*", "a", "1"}, "2000-1"},
		{0, []string{"XADD", "s", "*", "a", "1"}, "2000-2"},
		{-5, []string{"XADD", "s2", "*", "a", "1"}, "0-1"}, // a clock before 1970 counts as 0
		{1001, []string{"XADD", "s", "1500-*", "a", "1"}, "ERR<ERR The ID specified in XADD is equal or smaller than the target stream top item>"},
		{3000, []string{"XADD", "s", "NOMKSTREAM", "MAXLEN", "3", "*", "a", "1"}, "3000-0"},
		{3000, []string{"XLEN", "s"}, "3"},
		{3000, []string{"XADD", "nope", "NOMKSTREAM", "*", "a", "1"}, "(nil)"},
		{3000, []string{"XSETID", "s", "5000-7"}, "OK"},
		{4000, []string{"XADD", "s", "*", "a", "1"}, "5000-8"},
		{6000, []string{"XADD", "s", "*", "a", "1"}, "6000-0"},
	}
	var last streamid.ID
	for i, s := range steps {
		got := show(run(t, db, s.now, s.args...))
		if got != s.want {
			t.Fatalf("step %d: %v at %d = %s, want %s", i, s.args, s.now, got, s.want)
		}
		if s.args[1] == "s" && s.args[0] == "XADD" && !strings.HasPrefix(got, "ERR") {
			id, ok := streamid.ParseStrict([]byte(got))
			if !ok || id.Cmp(last) <= 0 {
				t.Fatalf("step %d: %s is not after %v", i, got, last)
			}
			last = id
		}
	}
}

// Two replicas applying the same log produce the same bytes and replies.
func TestStreamApplyIsDeterministic(t *testing.T) {
	script := [][]string{
		{"XADD", "s", "*", "a", "1"}, {"XADD", "s", "*", "b", "2", "c", "3"}, {"XADD", "s", "MAXLEN", "~", "1", "*", "d", "4"},
		{"XADD", "s", "MINID", "0-5", "*", "e", "5"}, {"XDEL", "s", "1001-0"}, {"XTRIM", "s", "MAXLEN", "1"},
		{"XSETID", "s", "99999-0", "ENTRIESADDED", "50", "MAXDELETEDID", "5-5"}, {"XADD", "s", "*", "f", "6"},
		{"COPY", "s", "c"}, {"RENAME", "c", "r"}, {"XADD", "r", "*", "g", "7"}, {"EXPIRE", "r", "1"},
		{"XADD", "r", "*", "h", "8"}, {"DEL", "s"}, {"XADD", "s", "*", "i", "9"},
	}
	for i := 0; i < 250; i++ {
		script = append(script, []string{"XADD", "big", "*", "n", fmt.Sprint(i)})
		if i%37 == 0 {
			script = append(script, []string{"XTRIM", "big", "MAXLEN", "~", "60"}, []string{"XDEL", "big", fmt.Sprintf("%d-0", 1000+i-3)})
		}
	}
	var reprs [2][]byte
	for rep := 0; rep < 2; rep++ {
		db := openMem(t)
		for i, c := range script {
			b := db.NewIndexedBatch()
			r := Apply(b, toArgs(c...), Env{Now: int64(1000 + i), Index: uint64(i + 1)})
			if r.IsError() {
				t.Fatalf("%v: %s", c, show(r))
			}
			reprs[rep] = append(reprs[rep], b.Repr()...)
			reprs[rep] = r.AppendBinary(reprs[rep])
			if err := b.Commit(pebble.NoSync); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !bytes.Equal(reprs[0], reprs[1]) {
		t.Fatal("two replicas applied the same log differently")
	}
}

// countElems counts the storage keys of k's elements (every incarnation).
func countElems(t *testing.T, db *pebble.DB, k string) int {
	t.Helper()
	lo := append(appendEscaped(appendKeyHead(nil, []byte(k)), []byte(k)), suffixElem)
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	return n
}

func TestStreamWithGenericCommands(t *testing.T) {
	db := openMem(t)
	for i, c := range []struct {
		now  int64
		args []string
		want string
	}{
		{1000, []string{"XADD", "s", "1-1", "a", "1"}, "1-1"},
		{1000, []string{"XADD", "s", "2-1", "b", "2"}, "2-1"},
		{1000, []string{"TYPE", "s"}, "stream"},
		{1000, []string{"OBJECT", "ENCODING", "s"}, "stream"},
		{1000, []string{"SCAN", "0", "TYPE", "stream"}, "[0 [s]]"},
		{1000, []string{"SCAN", "0", "TYPE", "STREAM"}, "[0 [s]]"},
		{1000, []string{"SCAN", "0", "TYPE", "list"}, "[0 []]"},
		{1000, []string{"KEYS", "*"}, "[s]"},
		{1000, []string{"DBSIZE"}, "1"},
		{1000, []string{"EXPIRE", "s", "10"}, "1"},
		{1000, []string{"TTL", "s"}, "10"},
		{5000, []string{"XLEN", "s"}, "2"},
		{11000, []string{"XLEN", "s"}, "0"}, // expired by the log clock
		{11000, []string{"TYPE", "s"}, "none"},
		{11000, []string{"XRANGE", "s", "-", "+"}, "[]"},
		{11000, []string{"XADD", "s", "1-1", "fresh", "1"}, "1-1"}, // a new incarnation: last ID starts over
		{11000, []string{"TTL", "s"}, "-1"},
		{11000, []string{"XRANGE", "s", "-", "+"}, "[[1-1 [fresh 1]]]"},
		{11000, []string{"XDEL", "s", "1-1"}, "1"},
		{11000, []string{"EXISTS", "s"}, "1"}, // emptied streams stay
		{11000, []string{"XADD", "s", "1-1", "a", "1"}, "ERR<ERR The ID specified in XADD is equal or smaller than the target stream top item>"},
		{11000, []string{"XADD", "s", "3-1", "a", "1", "b", "2"}, "3-1"},
		{11000, []string{"RENAME", "s", "r"}, "OK"},
		{11000, []string{"XADD", "r", "3-1", "a", "1"}, "ERR<ERR The ID specified in XADD is equal or smaller than the target stream top item>"},
		{11000, []string{"COPY", "r", "c"}, "1"},
		{11000, []string{"XADD", "c", "4-1", "z", "9"}, "4-1"},
		{11000, []string{"XRANGE", "r", "-", "+"}, "[[3-1 [a 1 b 2]]]"},
		{11000, []string{"XRANGE", "c", "-", "+"}, "[[3-1 [a 1 b 2]] [4-1 [z 9]]]"},
		{11000, []string{"XDEL", "c", "3-1", "4-1"}, "2"},
		{11000, []string{"COPY", "c", "r", "REPLACE"}, "1"},
		{11000, []string{"XLEN", "r"}, "0"},
		{11000, []string{"TYPE", "r"}, "stream"},
		{11000, []string{"XADD", "r", "4-1", "z", "9"}, "ERR<ERR The ID specified in XADD is equal or smaller than the target stream top item>"},
		{11000, []string{"SORT", "r"}, "ERR<WRONGTYPE Operation against a key holding the wrong kind of value>"},
		{11000, []string{"LLEN", "r"}, "ERR<WRONGTYPE Operation against a key holding the wrong kind of value>"},
		{11000, []string{"XLEN", "nope"}, "0"},
		{11000, []string{"SET", "str", "v"}, "OK"},
		{11000, []string{"XLEN", "str"}, "ERR<WRONGTYPE Operation against a key holding the wrong kind of value>"},
		{11000, []string{"XINFO", "GROUPS", "r"}, "[]"},
		{11000, []string{"XGROUP", "CREATE", "r", "g", "$"}, "OK"},
		{11000, []string{"XINFO", "GROUPS", "r"}, "[[name g consumers 0 pending 0 last-delivered-id 4-1 entries-read (nil) lag 0]]"},
	} {
		if got := show(run(t, db, c.now, c.args...)); got != c.want {
			t.Fatalf("step %d: %v = %s, want %s", i, c.args, got, c.want)
		}
	}
	if _, ok := Unsupported([]byte("xreadgroup")); ok {
		t.Fatal("XREADGROUP is implemented")
	}
	// DEL and overwrites drop the elements.
	for i := 0; i < 10; i++ {
		run(t, db, 11000, "XADD", "big", fmt.Sprintf("%d-1", i+1), "f", "v")
	}
	if n := countElems(t, db, "big"); n != 11 { // 10 entries + 1 node record
		t.Fatalf("big has %d element keys", n)
	}
	run(t, db, 11000, "DEL", "big")
	if n := countElems(t, db, "big"); n != 0 {
		t.Fatalf("after DEL: %d element keys", n)
	}
	run(t, db, 11000, "XADD", "big", "1-1", "f", "v")
	run(t, db, 11000, "SET", "big", "v")
	if n := countElems(t, db, "big"); n != 0 {
		t.Fatalf("after SET: %d element keys", n)
	}
}

func TestStreamBlockingHelpers(t *testing.T) {
	for _, c := range []struct {
		args    []string
		ok      bool
		timeout time.Duration
		keys    string
	}{
		{[]string{"XREAD", "BLOCK", "150", "STREAMS", "a", "b", "$", "0"}, true, 150 * time.Millisecond, "[a b]"},
		{[]string{"xread", "count", "2", "block", "0", "streams", "a", "$"}, true, 0, "[a]"},
		{[]string{"XREAD", "STREAMS", "a", "$"}, false, 0, ""},
		{[]string{"XREAD", "BLOCK", "-1", "STREAMS", "a", "$"}, false, 0, ""},
		{[]string{"XREAD", "BLOCK", "1", "STREAMS", "a"}, false, 0, ""},
		{[]string{"XRANGE", "a", "-", "+"}, false, 0, ""},
		{[]string{"BLPOP", "a", "0"}, false, 0, ""},
	} {
		d, keys, ok := StreamBlocking(toArgs(c.args...))
		var ks []string
		for _, k := range keys {
			ks = append(ks, string(k))
		}
		if ok != c.ok || (ok && (d != c.timeout || fmt.Sprint(ks) != c.keys)) {
			t.Errorf("StreamBlocking(%q) = %v %v %v", c.args, d, ks, ok)
		}
		if ok != Blocks(toArgs(c.args...)) && c.args[0] != "BLPOP" {
			t.Errorf("Blocks(%q) != %v", c.args, ok)
		}
	}
	db := openMem(t)
	run(t, db, 0, "XADD", "a", "5-5", "f", "v")
	run(t, db, 0, "SET", "str", "v")
	join := func(a [][]byte) string { return string(bytes.Join(a, []byte(" "))) }
	first, retry := XReadResolve(db, toArgs("XREAD", "BLOCK", "0", "STREAMS", "a", "b", "c", "$", "$", "3-3"), 0)
	if join(first) != "XREAD BLOCK 0 STREAMS a b c 5-5 0-0 3-3" || join(retry) != "XREAD COUNT 1000 BLOCK 0 STREAMS a b c 5-5 0-0 3-3" {
		t.Fatalf("resolved %q, retry %q", join(first), join(retry))
	}
	first, retry = XReadResolve(db, toArgs("XREAD", "COUNT", "1", "BLOCK", "0", "STREAMS", "a", "$"), 0)
	if join(first) != "XREAD COUNT 1 BLOCK 0 STREAMS a 5-5" || join(retry) != join(first) {
		t.Fatalf("resolved %q, retry %q", join(first), join(retry))
	}
	first, _ = XReadResolve(db, toArgs("XREAD", "BLOCK", "0", "STREAMS", "str", "$"), 0)
	if got := show(Read(db, first, 0)); got != "ERR<WRONGTYPE Operation against a key holding the wrong kind of value>" {
		t.Fatalf("wrong type: %s", got)
	}
	// The kernel never blocks: with nothing to read it answers a null array.
	if r := run(t, db, 0, "XREAD", "BLOCK", "0", "STREAMS", "a", "$"); r.Kind != reply.KindNilArray {
		t.Fatalf("XREAD BLOCK $ = %s", show(r))
	}
}

// streamInfo returns XINFO STREAM as field -> normalized value, without
// radix-tree-nodes (Redis's internal radix tree shape is not modelled).
func streamInfo(v any) map[string]any {
	out := map[string]any{}
	arr, ok := v.([]any)
	if !ok {
		return map[string]any{"reply": v}
	}
	for i := 0; i+1 < len(arr); i += 2 {
		k := fmt.Sprint(arr[i])
		if k != "radix-tree-nodes" {
			out[k] = arr[i+1]
		}
	}
	return out
}

// TestStreamAgainstRedis drives redis-server and the state machine with
// the same random stream commands (small entries: Redis's nodes then hold
// 100 entries each, which kvorum models) and compares every reply, XINFO
// STREAM included (but radix-tree-nodes), so approximate trimming with
// more than one node is checked too.
func TestStreamAgainstRedis(t *testing.T) {
	rc := kvdiff.StartRedis(t)
	db := openMem(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(11, 12))
	ms := 1
	id := func() string { return fmt.Sprintf("%d-%d", rng.IntN(ms+2), rng.IntN(3)) }
	trim := func() []string {
		var a []string
		if rng.IntN(2) == 0 {
			a = []string{"MAXLEN"}
		} else {
			a = []string{"MINID"}
		}
		mod := []string{"", "=", "~", "~", "~"}[rng.IntN(5)]
		if mod != "" {
			a = append(a, mod)
		}
		if a[0] == "MAXLEN" {
			a = append(a, fmt.Sprint(rng.IntN(400)))
		} else {
			a = append(a, id())
		}
		if mod == "~" && rng.IntN(3) == 0 {
			a = append(a, "LIMIT", fmt.Sprint(rng.IntN(300)))
		}
		return a
	}
	var history []string
	var maxLen int64
	defer func() { t.Logf("longest stream seen: %d entries", maxLen) }()
	for step := 0; step < 6000; step++ {
		var c []string
		switch k := rng.IntN(100); {
		case k < 70:
			ms++
			c = []string{"XADD", "s"}
			if rng.IntN(30) == 0 {
				c = append(c, trim()...)
			}
			c = append(c, fmt.Sprintf("%d-%d", ms, rng.IntN(2)), "f", fmt.Sprint(rng.IntN(100)))
		case k < 80:
			c = []string{"XDEL", "s", id(), id(), id()}
			if rng.IntN(4) == 0 { // delete a run, so whole nodes empty
				base := rng.IntN(ms + 1)
				c = []string{"XDEL", "s"}
				for j := 0; j < 60; j++ {
					c = append(c, fmt.Sprintf("%d-%d", base+j, j%2))
				}
			}
		case k < 83:
			c = append([]string{"XTRIM", "s"}, trim()...)
		case k < 86:
			c = []string{"XLEN", "s"}
		case k < 90:
			c = []string{"XRANGE", "s", id(), id(), "COUNT", fmt.Sprint(rng.IntN(5))}
		case k < 93:
			c = []string{"XREVRANGE", "s", "+", id(), "COUNT", "3"}
		case k < 96:
			c = []string{"XREAD", "COUNT", "2", "STREAMS", "s", id()}
		case k < 97:
			c = []string{"XSETID", "s", fmt.Sprintf("%d-5", ms), "ENTRIESADDED", fmt.Sprint(rng.IntN(3000)), "MAXDELETEDID", id()}
		default:
			c = []string{"XINFO", "STREAM", "s"}
		}
		history = append(history, kvdiff.String(c))
		if len(history) > 5 {
			history = history[1:]
		}
		args := make([]any, len(c))
		for i, a := range c {
			args[i] = a
		}
		wv, werr := rc.Do(ctx, args...).Result()
		want := kvdiff.Normalize(strings.ToUpper(c[0]), wv, werr)
		got := kvdiff.NormalizeReply(strings.ToUpper(c[0]), runKV(db, c))
		if c[0] == "XINFO" {
			want, got = streamInfo(want), streamInfo(got)
		}
		if n, ok := got.(int64); ok && c[0] == "XLEN" {
			maxLen = max(maxLen, n)
		}
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("step %d: %s\n  redis: %v\n  kv:    %v", step, kvdiff.String(c), want, got)
		}
		// Compare the whole state now and then.
		if step%25 == 0 {
			for _, q := range [][]string{{"XINFO", "STREAM", "s"}, {"XRANGE", "s", "-", "+"}} {
				qa := []any{q[0], q[1], q[2]}
				if len(q) > 3 {
					qa = append(qa, q[3])
				}
				wv, werr := rc.Do(ctx, qa...).Result()
				want := kvdiff.Normalize(q[0], wv, werr)
				got := kvdiff.NormalizeReply(q[0], runKV(db, q))
				if q[0] == "XINFO" {
					want, got = streamInfo(want), streamInfo(got)
				}
				if !reflect.DeepEqual(want, got) {
					t.Fatalf("after step %d (%s): %s\n  redis: %v\n  kv:    %v\n  %s", step, strings.Join(history, "; "), kvdiff.String(q), want, got, dumpNodes(t, db, "s"))
				}
			}
		}
	}
}

// dumpNodes describes k's state and node records, for failure messages.
func dumpNodes(t *testing.T, db *pebble.DB, k string) string {
	x := getCtx(db, nil, 0)
	defer putCtx(x)
	s, ok, e := x.loadStream([]byte(k))
	if e != nil || !ok {
		return "no stream"
	}
	out := fmt.Sprintf("state %+v;", s.st)
	_ = x.iterElems(s.c, []byte{streamrec.KindNode}, nil, false, func(elem, v []byte) bool {
		out += fmt.Sprintf(" node %d live %d last %v;", streamid.Get(append(elem[1:], make([]byte, 8)...)).Ms, streamid.Get(v).Ms, streamid.Get(v[8:]))
		return true
	})
	return out
}

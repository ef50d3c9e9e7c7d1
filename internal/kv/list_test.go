package kv

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/redis/go-redis/v9"

	"github.com/kvorum/kvorum/internal/kvdiff"
	"github.com/kvorum/kvorum/internal/reply"
)

// countingReader records the point reads and iterators a read command uses.
type countingReader struct {
	pebble.Reader
	gets  int
	iters []pebble.IterOptions
}

func (r *countingReader) Get(k []byte) ([]byte, io.Closer, error) {
	r.gets++
	return r.Reader.Get(k)
}

func (r *countingReader) NewIter(o *pebble.IterOptions) (*pebble.Iterator, error) {
	r.iters = append(r.iters, *o)
	return r.Reader.NewIter(o)
}

// listElemIndex returns the list index an element storage key ends with.
func listElemIndex(t testing.TB, k []byte) uint64 {
	t.Helper()
	if len(k) < 8 {
		t.Fatalf("short element key %q", k)
	}
	return binary.BigEndian.Uint64(k[len(k)-8:])
}

// pushMany RPUSHes (or LPUSHes) vals in commands of up to 1000 elements.
func pushMany(t testing.TB, db *pebble.DB, cmd, key string, vals []string) {
	t.Helper()
	for len(vals) > 0 {
		n := min(len(vals), 1000)
		r := runKV(db, append([]string{cmd, key}, vals[:n]...))
		if r.IsError() {
			t.Fatalf("%s: %s", cmd, r.Str)
		}
		vals = vals[n:]
	}
}

func replyStrings(t testing.TB, r Reply) []string {
	t.Helper()
	if r.Kind != reply.KindArray {
		t.Fatalf("not an array: %s", show(r))
	}
	out := make([]string, len(r.Elems))
	for i, e := range r.Elems {
		out[i] = string(e.Str)
	}
	return out
}

// applyCount applies one write command in its own batch and reports the
// reply and how many mutations it put in the batch.
func applyCount(t testing.TB, db *pebble.DB, args ...string) (Reply, uint32) {
	t.Helper()
	b := db.NewIndexedBatch()
	defer b.Close()
	testIndex++
	r := Apply(b, toArgs(args...), Env{Now: time.Now().UnixMilli(), Index: testIndex})
	n := b.Count()
	if err := b.Commit(pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	return r, n
}

func TestListPushManyThenIndex(t *testing.T) {
	db := openMem(t)
	const n = 3000
	var left, right []string
	for i := 0; i < n; i++ {
		left = append(left, "L"+strconv.Itoa(i))
		right = append(right, "R"+strconv.Itoa(i))
	}
	pushMany(t, db, "LPUSH", "l", left)
	pushMany(t, db, "RPUSH", "l", right)
	// The list is L2999 ... L0 R0 ... R2999.
	want := func(i int) string {
		if i < n {
			return "L" + strconv.Itoa(n-1-i)
		}
		return "R" + strconv.Itoa(i-n)
	}
	if got := show(runKV(db, []string{"LLEN", "l"})); got != strconv.Itoa(2*n) {
		t.Fatalf("LLEN = %s", got)
	}
	for _, i := range []int{0, 1, n - 1, n, n + 1, n + n/2, 2*n - 1} {
		if got := show(runKV(db, []string{"LINDEX", "l", strconv.Itoa(i)})); got != want(i) {
			t.Errorf("LINDEX %d = %s, want %s", i, got, want(i))
		}
		if got := show(runKV(db, []string{"LINDEX", "l", strconv.Itoa(i - 2*n)})); got != want(i) {
			t.Errorf("LINDEX %d = %s, want %s", i-2*n, got, want(i))
		}
	}
	got := replyStrings(t, runKV(db, []string{"LRANGE", "l", strconv.Itoa(n - 2), strconv.Itoa(n + 1)}))
	if fmt.Sprint(got) != "[L1 L0 R0 R1]" {
		t.Fatalf("LRANGE across the origin: %v", got)
	}
	// Storage holds exactly one key per element, contiguous.
	rec, ok, err := getCtx(db, nil, 0).loadHeader([]byte("l"))
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	start, end := elemSpan([]byte("l"), rec.version)
	it, _ := db.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: end})
	count, prev := 0, uint64(0)
	for valid := it.First(); valid; valid = it.Next() {
		idx := listElemIndex(t, it.Key())
		if count > 0 && idx != prev+1 {
			t.Fatalf("indices not contiguous: %d after %d", idx, prev)
		}
		if want := want(count); string(it.Value()) != want {
			t.Fatalf("element %d = %q, want %q", count, it.Value(), want)
		}
		prev = idx
		count++
	}
	it.Close()
	if count != 2*n {
		t.Fatalf("%d element keys, want %d", count, 2*n)
	}
}

// listModel is the in-memory reference for the random test.
type listModel map[string][]string

func (m listModel) remove(key string, i int) {
	m[key] = slices.Delete(m[key], i, i+1)
	if len(m[key]) == 0 {
		delete(m, key)
	}
}

// TestListAgainstModel runs a few thousand random list commands, many of
// them in the middle of a 5,000-element list, against an in-memory model.
func TestListAgainstModel(t *testing.T) {
	db := openMem(t)
	rng := rand.New(rand.NewPCG(11, 12))
	uniq := 0
	val := func() string {
		if rng.IntN(2) == 0 {
			return "d" + strconv.Itoa(rng.IntN(200))
		}
		uniq++
		return "u" + strconv.Itoa(uniq)
	}
	m := listModel{}
	var init []string
	for i := 0; i < 5000; i++ {
		init = append(init, val())
	}
	pushMany(t, db, "RPUSH", "l", init)
	m["l"] = slices.Clone(init)
	keys := []string{"l", "l", "l", "m"}
	pick := func(key string) string { // an element of key, or an absent value
		if l := m[key]; len(l) > 0 && rng.IntN(10) > 0 {
			return l[rng.IntN(len(l))]
		}
		return val()
	}
	check := func(step int, args []string, got Reply, want string) {
		t.Helper()
		if s := show(got); s != want {
			t.Fatalf("step %d: %q = %s, want %s", step, args, s, want)
		}
	}
	const steps = 3000
	for step := 0; step < steps; step++ {
		key := keys[rng.IntN(len(keys))]
		l := m[key]
		var args []string
		var want string
		switch op := rng.IntN(9); op {
		case 0, 1: // LPUSH, RPUSH
			v1, v2 := val(), val()
			if op == 0 {
				args = []string{"LPUSH", key, v1, v2}
				m[key] = append([]string{v2, v1}, l...)
			} else {
				args = []string{"RPUSH", key, v1, v2}
				m[key] = append(l, v1, v2)
			}
			want = strconv.Itoa(len(m[key]))
		case 2: // LPOP, RPOP
			left := rng.IntN(2) == 0
			args = []string{"RPOP", key}
			if left {
				args[0] = "LPOP"
			}
			want = "(nil)"
			if len(l) > 0 {
				i := len(l) - 1
				if left {
					i = 0
				}
				want = l[i]
				m.remove(key, i)
			}
		case 3: // LINSERT
			pivot, v := pick(key), val()
			where := "BEFORE"
			if rng.IntN(2) == 0 {
				where = "AFTER"
			}
			args = []string{"LINSERT", key, where, pivot, v}
			i := slices.Index(l, pivot)
			switch {
			case len(l) == 0:
				want = "0"
			case i < 0:
				want = "-1"
			default:
				if where == "AFTER" {
					i++
				}
				m[key] = slices.Insert(l, i, v)
				want = strconv.Itoa(len(m[key]))
			}
		case 4: // LREM
			v := pick(key)
			count := rng.IntN(7) - 3
			args = []string{"LREM", key, strconv.Itoa(count), v}
			removed := 0
			if count >= 0 {
				for i := 0; i < len(m[key]); {
					if m[key][i] == v && (count == 0 || removed < count) {
						m.remove(key, i)
						removed++
						continue
					}
					i++
				}
			} else {
				for i := len(m[key]) - 1; i >= 0; i-- {
					if m[key][i] == v && removed < -count {
						m.remove(key, i)
						removed++
					}
				}
			}
			want = strconv.Itoa(removed)
		case 5: // LSET
			if len(l) == 0 {
				args = []string{"LSET", key, "0", "x"}
				want = "ERR<ERR no such key>"
				break
			}
			i := rng.IntN(len(l))
			v := val()
			idx := i
			if rng.IntN(2) == 0 {
				idx = i - len(l)
			}
			args = []string{"LSET", key, strconv.Itoa(idx), v}
			l[i] = v
			want = "OK"
		case 6: // LTRIM, mostly shaving a few elements off the ends
			start, end := rng.IntN(2), -1-rng.IntN(2)
			if key == "m" && rng.IntN(10) == 0 {
				start, end = rng.IntN(len(l)+2)-1, rng.IntN(len(l)+2)-1
			}
			args = []string{"LTRIM", key, strconv.Itoa(start), strconv.Itoa(end)}
			want = "OK"
			from, to := indexRange{int64(start), int64(end)}.span(int64(len(l)))
			if len(l) > 0 {
				m[key] = slices.Clone(l[from:to])
				if len(m[key]) == 0 {
					delete(m, key)
				}
			}
		case 7, 8: // LMOVE
			dst := keys[rng.IntN(len(keys))]
			from, to := []string{"LEFT", "RIGHT"}[rng.IntN(2)], []string{"LEFT", "RIGHT"}[rng.IntN(2)]
			args = []string{"LMOVE", key, dst, from, to}
			want = "(nil)"
			if len(l) > 0 {
				i := 0
				if from == "RIGHT" {
					i = len(l) - 1
				}
				v := l[i]
				m.remove(key, i)
				if to == "LEFT" {
					m[dst] = append([]string{v}, m[dst]...)
				} else {
					m[dst] = append(m[dst], v)
				}
				want = v
			}
		}
		check(step, args, runKV(db, args), want)
		if step%100 == 99 || step == steps-1 {
			for _, k := range []string{"l", "m"} {
				got := replyStrings(t, runKV(db, []string{"LRANGE", k, "0", "-1"}))
				if !slices.Equal(got, m[k]) && !(len(got) == 0 && len(m[k]) == 0) {
					t.Fatalf("step %d: LRANGE %s 0 -1: %d elements, model %d", step, k, len(got), len(m[k]))
				}
				check(step, []string{"LLEN", k}, runKV(db, []string{"LLEN", k}), strconv.Itoa(len(m[k])))
			}
		}
	}
	t.Logf("%d elements at the end", len(m["l"]))
	if len(m["l"]) < 4000 {
		t.Fatalf("the list shrank to %d elements: the test no longer works in the middle of a big list", len(m["l"]))
	}
}

// TestListShiftsTheShorterSide: LINSERT and LREM near an end of a
// 5,000-element list rewrite only the elements between it and that end.
func TestListShiftsTheShorterSide(t *testing.T) {
	db := openMem(t)
	var vals []string
	for i := 0; i < 5000; i++ {
		vals = append(vals, strconv.Itoa(i))
	}
	pushMany(t, db, "RPUSH", "l", vals)
	steps := []struct {
		args     []string
		want     string
		maxCount uint32
	}{
		{[]string{"LINSERT", "l", "AFTER", "4990", "x"}, "5001", 15},     // 9 elements move right
		{[]string{"LINSERT", "l", "BEFORE", "10", "y"}, "5002", 15},      // 10 move left
		{[]string{"LREM", "l", "0", "x"}, "1", 15},                       // from the tail side
		{[]string{"LREM", "l", "1", "y"}, "1", 15},                       // from the head side
		{[]string{"LINSERT", "l", "AFTER", "2500", "mid"}, "5001", 2600}, // the middle: about half
		{[]string{"LREM", "l", "0", "mid"}, "1", 2600},
		{[]string{"LSET", "l", "2500", "z"}, "OK", 2},      // one element, the metadata
		{[]string{"LPUSH", "l", "h"}, "5001", 2},           // one element, the metadata
		{[]string{"LTRIM", "l", "1000", "-1001"}, "OK", 3}, // two range deletions, the metadata
	}
	for _, s := range steps {
		r, n := applyCount(t, db, s.args...)
		if show(r) != s.want || n > s.maxCount {
			t.Fatalf("%q = %s with %d mutations, want %s with at most %d", s.args, show(r), n, s.want, s.maxCount)
		}
	}
	got := replyStrings(t, runKV(db, []string{"LRANGE", "l", "0", "-1"}))
	if len(got) != 3001 || got[0] != "999" || got[3000] != "3999" || got[1501] != "z" || got[1500] != "2499" {
		t.Fatalf("after the edits: %d elements, %v ... %v", len(got), got[:3], got[len(got)-3:])
	}
}

// TestListBig: a 100,000-element list; LLEN reads the metadata only,
// LRANGE 0 9 and LINDEX read only what they return, DEL leaves nothing
// visible and a new list under the same name starts empty.
func TestListBig(t *testing.T) {
	db := openMem(t)
	const n = 100000
	vals := make([]string, n)
	for i := range vals {
		vals[i] = "e" + strconv.Itoa(i)
	}
	pushMany(t, db, "RPUSH", "big", vals)

	cr := &countingReader{Reader: db}
	if got := show(Read(cr, toArgs("LLEN", "big"), 0)); got != "100000" {
		t.Fatalf("LLEN = %s", got)
	}
	if cr.gets != 1 || len(cr.iters) != 0 {
		t.Fatalf("LLEN: %d gets, %d iterators", cr.gets, len(cr.iters))
	}

	cr = &countingReader{Reader: db}
	start := time.Now()
	got := replyStrings(t, Read(cr, toArgs("LRANGE", "big", "0", "9"), 0))
	if fmt.Sprint(got) != "[e0 e1 e2 e3 e4 e5 e6 e7 e8 e9]" {
		t.Fatalf("LRANGE 0 9 = %v", got)
	}
	if len(cr.iters) != 1 {
		t.Fatalf("LRANGE 0 9 used %d iterators", len(cr.iters))
	}
	lo, hi := listElemIndex(t, cr.iters[0].LowerBound), listElemIndex(t, cr.iters[0].UpperBound)
	if hi-lo != 10 || lo != listOrigin {
		t.Fatalf("LRANGE 0 9 iterated indices [%d, %d)", lo, hi)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("LRANGE 0 9 took %v", d)
	}

	cr = &countingReader{Reader: db}
	if got := show(Read(cr, toArgs("LINDEX", "big", "-50000"), 0)); got != "e50000" {
		t.Fatalf("LINDEX = %s", got)
	}
	if cr.gets != 2 || len(cr.iters) != 0 {
		t.Fatalf("LINDEX: %d gets, %d iterators", cr.gets, len(cr.iters))
	}
	got = replyStrings(t, runKV(db, []string{"LRANGE", "big", "-3", "-1"}))
	if fmt.Sprint(got) != "[e99997 e99998 e99999]" {
		t.Fatalf("LRANGE -3 -1 = %v", got)
	}

	// LPOP with a count reads and deletes only the range.
	r, cnt := applyCount(t, db, "LPOP", "big", "3")
	if show(r) != "[e0 e1 e2]" || cnt > 5 {
		t.Fatalf("LPOP 3 = %s, %d mutations", show(r), cnt)
	}

	rec, _, _ := getCtx(db, nil, 0).loadHeader([]byte("big"))
	if got := show(runKV(db, []string{"DEL", "big"})); got != "1" {
		t.Fatalf("DEL = %s", got)
	}
	for _, c := range [][]string{{"EXISTS", "big"}, {"LLEN", "big"}, {"LRANGE", "big", "0", "-1"}, {"LINDEX", "big", "5"}, {"DBSIZE"}} {
		if got := show(runKV(db, c)); got != "0" && got != "[]" && got != "(nil)" {
			t.Fatalf("%v after DEL = %s", c, got)
		}
	}
	lower, upper := elemSpan([]byte("big"), rec.version)
	it, _ := db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if it.First() {
		t.Fatalf("element key %q still visible after DEL", it.Key())
	}
	it.Close()
	if got := show(runKV(db, []string{"RPUSH", "big", "new"})); got != "1" {
		t.Fatalf("re-created RPUSH = %s", got)
	}
	if got := show(runKV(db, []string{"LRANGE", "big", "0", "-1"})); got != "[new]" {
		t.Fatalf("re-created list = %s", got)
	}
	if got := show(runKV(db, []string{"LINDEX", "big", "1"})); got != "(nil)" {
		t.Fatalf("re-created LINDEX 1 = %s", got)
	}
}

// The blocking kernels and POP with a count distinguish a null array, a
// null and an empty array (RESP3 shows the difference).
func TestListNullReplies(t *testing.T) {
	db := openMem(t)
	runKV(db, []string{"RPUSH", "l", "a"})
	for _, c := range []struct {
		args []string
		kind reply.Kind
		n    int
	}{
		{[]string{"LPOP", "none"}, reply.KindNil, 0},
		{[]string{"LPOP", "none", "0"}, reply.KindNilArray, 0},
		{[]string{"RPOP", "none", "2"}, reply.KindNilArray, 0},
		{[]string{"LPOP", "l", "0"}, reply.KindArray, 0},
		{[]string{"BLPOP", "none", "none2", "0"}, reply.KindNilArray, 0},
		{[]string{"BRPOP", "none", "1.5"}, reply.KindNilArray, 0},
		{[]string{"BLMOVE", "none", "l", "LEFT", "LEFT", "0"}, reply.KindNil, 0},
		{[]string{"BRPOPLPUSH", "none", "l", "0"}, reply.KindNil, 0},
		{[]string{"LMOVE", "none", "l", "LEFT", "LEFT"}, reply.KindNil, 0},
		{[]string{"BLMPOP", "0", "1", "none", "LEFT"}, reply.KindNilArray, 0},
		{[]string{"LMPOP", "1", "none", "LEFT"}, reply.KindNilArray, 0},
		{[]string{"LPOS", "none", "a"}, reply.KindNil, 0},
		{[]string{"LPOS", "none", "a", "COUNT", "0"}, reply.KindArray, 0},
		{[]string{"LRANGE", "none", "0", "-1"}, reply.KindArray, 0},
		{[]string{"BRPOP", "none", "l", "0"}, reply.KindArray, 2},
		{[]string{"LLEN", "l"}, reply.KindInt, 0},
	} {
		r := runKV(db, c.args)
		if r.Kind != c.kind || len(r.Elems) != c.n {
			t.Errorf("%q = kind %d, %d elements: %s", c.args, r.Kind, len(r.Elems), show(r))
		}
	}
}

// A command that fails writes nothing, even after looking at several keys.
func TestListErrorsWriteNothing(t *testing.T) {
	db := openMem(t)
	runKV(db, []string{"RPUSH", "l", "a", "b"})
	runKV(db, []string{"SET", "s", "v"})
	for _, c := range [][]string{
		{"LMOVE", "l", "s", "LEFT", "LEFT"}, {"RPOPLPUSH", "l", "s"}, {"BLMOVE", "l", "s", "LEFT", "LEFT", "0"},
		{"BLPOP", "none", "s", "l", "0"}, {"LMPOP", "2", "none", "s", "LEFT"}, {"LPUSH", "s", "x"},
		{"LSET", "l", "5", "x"}, {"LSET", "none", "0", "x"}, {"LINDEX", "l", "x"}, {"LSET", "l", "x", "y"},
	} {
		if !Lookup([]byte(c[0])).Write {
			r := runKV(db, c)
			if !r.IsError() {
				t.Fatalf("%q = %s", c, show(r))
			}
			continue
		}
		r, n := applyCount(t, db, c...)
		if !r.IsError() || n != 0 {
			t.Fatalf("%q = %s with %d mutations", c, show(r), n)
		}
	}
	if got := show(runKV(db, []string{"LRANGE", "l", "0", "-1"})); got != "[a b]" {
		t.Fatalf("list changed: %s", got)
	}
}

// Apply is deterministic: the same commands with the same Env on two fresh
// databases give the same replies and the same bytes.
func TestListApplyIsDeterministic(t *testing.T) {
	checkDeterministic(t, 2000, 3, func(rng *rand.Rand) []string {
		k := []string{"a", "b", "c"}[rng.IntN(3)]
		k2 := []string{"a", "b", "c"}[rng.IntN(3)]
		v := strconv.Itoa(rng.IntN(10))
		var args []string
		switch rng.IntN(8) {
		case 0:
			args = []string{"LPUSH", k, v, v + "x"}
		case 1:
			args = []string{"RPUSH", k, v}
		case 2:
			args = []string{"LINSERT", k, "BEFORE", v, "i"}
		case 3:
			args = []string{"LREM", k, strconv.Itoa(rng.IntN(5) - 2), v}
		case 4:
			args = []string{"LMOVE", k, k2, "LEFT", "RIGHT"}
		case 5:
			args = []string{"BLMPOP", "0", "2", k, k2, "RIGHT", "COUNT", "2"}
		case 6:
			args = []string{"LTRIM", k, "1", "-1"}
		default:
			args = []string{"BLPOP", k, k2, "0"}
		}
		return args
	})
}

// checkDeterministic applies n commands from next (its rng seeded alike
// for both) to two fresh databases, and fails unless the replies and the
// stored states agree.
func checkDeterministic(t *testing.T, n int, seed uint64, next func(rng *rand.Rand) []string) {
	t.Helper()
	dbs := []*pebble.DB{openMem(t), openMem(t)}
	var replies [2][]string
	for d, db := range dbs {
		rng := rand.New(rand.NewPCG(seed, seed+1))
		for i := 0; i < n; i++ {
			b := db.NewIndexedBatch()
			r := Apply(b, toArgs(next(rng)...), Env{Now: 1000 + int64(i), Index: uint64(10 + i)})
			if err := b.Commit(pebble.NoSync); err != nil {
				t.Fatal(err)
			}
			b.Close()
			replies[d] = append(replies[d], show(r))
		}
	}
	if !slices.Equal(replies[0], replies[1]) {
		t.Fatal("replies differ")
	}
	h0, n0, err0 := StateHash(dbs[0])
	h1, n1, err1 := StateHash(dbs[1])
	if err0 != nil || err1 != nil || h0 != h1 || n0 != n1 {
		t.Fatalf("storage differs: %x (%d keys) vs %x (%d keys)", h0, n0, h1, n1)
	}
}

func TestBlockingTimeout(t *testing.T) {
	forever := time.Duration(math.MaxInt64)
	for _, c := range []struct {
		args    []string
		ok      bool
		timeout time.Duration
		keys    string
	}{
		{[]string{"BLPOP", "a", "0"}, true, 0, "[a]"},
		{[]string{"blpop", "a", "b", "c", "1.5"}, true, 1500 * time.Millisecond, "[a b c]"},
		{[]string{"BRPOP", "a", "0.0001"}, true, time.Millisecond, "[a]"}, // ceil
		{[]string{"BRPOP", "a", "-0.0001"}, true, 0, "[a]"},               // ceil gives -0
		{[]string{"BRPOP", "a", "2"}, true, 2 * time.Second, "[a]"},
		{[]string{"BRPOP", "a", "1e3"}, true, 1000 * time.Second, "[a]"},
		{[]string{"BLMOVE", "src", "dst", "LEFT", "RIGHT", "7"}, true, 7 * time.Second, "[src]"},
		{[]string{"BRPOPLPUSH", "src", "dst", "0.25"}, true, 250 * time.Millisecond, "[src]"},
		{[]string{"BLMPOP", "3", "2", "a", "b", "LEFT", "COUNT", "5"}, true, 3 * time.Second, "[a b]"},
		{[]string{"BLMPOP", "0", "1", "a", "RIGHT"}, true, 0, "[a]"},
		{[]string{"BLPOP", "a", "9223372036854775"}, true, forever, "[a]"},
		{[]string{"BLPOP", "a", "-1"}, false, 0, "[]"},
		{[]string{"BLPOP", "a", "x"}, false, 0, "[]"},
		{[]string{"BLPOP", "a", "inf"}, false, 0, "[]"},
		{[]string{"BLPOP", "a"}, false, 0, "[]"},
		{[]string{"BLMOVE", "a", "b", "UP", "LEFT", "0"}, false, 0, "[]"},
		{[]string{"BLMOVE", "a", "b", "LEFT", "LEFT"}, false, 0, "[]"},
		{[]string{"BRPOPLPUSH", "a", "b", "-2"}, false, 0, "[]"},
		{[]string{"BLMPOP", "0", "2", "a", "LEFT"}, false, 0, "[]"},
		{[]string{"BLMPOP", "0", "0", "a", "LEFT"}, false, 0, "[]"},
		{[]string{"BLMPOP", "-1", "1", "a", "LEFT"}, false, 0, "[]"},
		{[]string{"LPOP", "a"}, false, 0, "[]"},
		{[]string{"LMPOP", "1", "a", "LEFT"}, false, 0, "[]"},
		{[]string{"GET", "a"}, false, 0, "[]"},
		{[]string{"NOPE", "a", "0"}, false, 0, "[]"},
		{nil, false, 0, "[]"},
	} {
		d, keys, ok := BlockingTimeout(toArgs(c.args...))
		ks := make([]string, len(keys))
		for i, k := range keys {
			ks[i] = string(k)
		}
		if ok != c.ok || d != c.timeout || fmt.Sprint(ks) != c.keys {
			t.Errorf("BlockingTimeout(%q) = %v %v %v, want %v %v %v", c.args, d, ks, ok, c.timeout, c.keys, c.ok)
		}
	}
}

func BenchmarkListPushPop(b *testing.B) {
	db := openMem(b)
	args := [][]byte{[]byte("RPUSH"), []byte("l"), []byte("value")}
	pop := [][]byte{[]byte("LPOP"), []byte("l")}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		batch := db.NewIndexedBatch()
		Apply(batch, args, Env{Index: uint64(i)})
		Apply(batch, args, Env{Index: uint64(i)})
		Apply(batch, pop, Env{Index: uint64(i)})
		_ = batch.Commit(pebble.NoSync)
		batch.Close()
	}
}

// TestListRandomAgainstRedis sends random list commands (edge indices and
// counts, wrong types, options in any order, blocking kernels with a short
// timeout) to redis-server and to the state machine.
func TestListRandomAgainstRedis(t *testing.T) {
	rc := kvdiff.StartRedis(t)
	db := openMem(t)
	rng := rand.New(rand.NewPCG(21, 22))
	pick := func(s ...string) string { return s[rng.IntN(len(s))] }
	key := func() string { return pick("a", "b", "c", "a", "b", "s", "") }
	val := func() string { return pick("x", "y", "z", "", "0", "1", "x y", "\x00", "abc") }
	idx := func() string {
		return pick("0", "1", "2", "-1", "-2", "3", "5", "-5", "10", "-100", "100", "x", "9223372036854775807", "-9223372036854775808")
	}
	cnt := func() string { return pick("0", "1", "2", "3", "-1", "10", "x", "9223372036854775807") }
	side := func() string { return pick("LEFT", "RIGHT", "left", "right", "UP") }
	vals := func() []string {
		out := []string{}
		for i := 0; i <= rng.IntN(5); i++ {
			out = append(out, val())
		}
		return out
	}
	gens := []func() []string{
		func() []string { return append([]string{pick("LPUSH", "RPUSH"), key()}, vals()...) },
		func() []string { return append([]string{pick("LPUSH", "RPUSH"), key()}, vals()...) },
		func() []string { return append([]string{pick("LPUSHX", "RPUSHX"), key()}, vals()...) },
		func() []string { return []string{pick("LPOP", "RPOP"), key()} },
		func() []string { return []string{pick("LPOP", "RPOP"), key(), cnt()} },
		func() []string { return []string{"LLEN", key()} },
		func() []string { return []string{"LRANGE", key(), idx(), idx()} },
		func() []string { return []string{"LINDEX", key(), idx()} },
		func() []string { return []string{"LSET", key(), idx(), val()} },
		func() []string {
			return []string{"LINSERT", key(), pick("BEFORE", "AFTER", "after", "x"), val(), val()}
		},
		func() []string {
			return []string{"LREM", key(), pick("0", "1", "-1", "2", "-2", "x", "-9223372036854775808"), val()}
		},
		func() []string { return []string{"LTRIM", key(), idx(), idx()} },
		func() []string {
			args := []string{"LPOS", key(), val()}
			for i := rng.IntN(4); i > 0; i-- {
				switch rng.IntN(4) {
				case 0:
					args = append(args, "RANK", pick("1", "2", "-1", "-2", "0", "3", "x", "-9223372036854775808"))
				case 1:
					args = append(args, "COUNT", pick("0", "1", "2", "-1", "x"))
				case 2:
					args = append(args, "MAXLEN", pick("0", "1", "2", "5", "-1"))
				default:
					args = append(args, pick("RANK", "COUNT", "FOO"))
				}
			}
			return args
		},
		func() []string { return []string{"LMOVE", key(), key(), side(), side()} },
		func() []string { return []string{"RPOPLPUSH", key(), key()} },
		func() []string {
			args := []string{"LMPOP", pick("1", "2", "3", "0", "x")}
			for i := rng.IntN(3) + 1; i > 0; i-- {
				args = append(args, key())
			}
			args = append(args, side())
			if rng.IntN(2) == 0 {
				args = append(args, "COUNT", pick("1", "2", "5", "0", "-1", "x"))
			}
			return args
		},
		func() []string {
			// Redis waits for the timeout on empty lists: keep these rare.
			switch rng.IntN(4) {
			case 0:
				return []string{pick("BLPOP", "BRPOP"), key(), key(), pick("0.01", "-1", "x", "inf")}
			case 1:
				return []string{"BLMOVE", key(), key(), side(), side(), pick("0.01", "-1", "x")}
			case 2:
				return []string{"BRPOPLPUSH", key(), key(), pick("0.01", "-1")}
			}
			return []string{"BLMPOP", pick("0.01", "-1", "x"), "2", key(), key(), side(), "COUNT", cnt()}
		},
		func() []string { return []string{"SET", "s", val()} },
		func() []string { return []string{"DEL", key()} },
		func() []string { return []string{"TYPE", key()} },
	}
	diffRandom(t, rc, db, 6000, 1000, func() []string { return gens[rng.IntN(len(gens))]() })
}

// diffRandom sends n commands from next to redis-server and to the state
// machine, both flushed every flush commands, and fails at the first
// reply that differs.
func diffRandom(t *testing.T, rc *redis.Client, db *pebble.DB, n, flush int, next func() []string) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < n; i++ {
		if i%flush == 0 {
			rc.FlushAll(ctx)
			runKV(db, []string{"FLUSHALL"})
		}
		args := next()
		want, got := diffOne(ctx, rc, db, args)
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("command %d: %q\n  redis: %#v\n  kv:    %#v", i, args, want, got)
		}
	}
}

// An expired list is absent to every list command, and a new list under
// its name starts empty (the old incarnation's elements are not seen).
func TestListExpiry(t *testing.T) {
	db := openMem(t)
	for _, s := range []struct {
		now  int64
		cmd  []string
		want string
	}{
		{1000, []string{"RPUSH", "l", "a", "b", "c"}, "3"},
		{1000, []string{"PEXPIRE", "l", "10"}, "1"},
		{1005, []string{"LPUSH", "l", "z"}, "4"},
		{1005, []string{"PTTL", "l"}, "5"},
		{1010, []string{"LLEN", "l"}, "0"},
		{1010, []string{"LRANGE", "l", "0", "-1"}, "[]"},
		{1010, []string{"LPUSHX", "l", "x"}, "0"},
		{1010, []string{"LMOVE", "l", "m", "LEFT", "LEFT"}, "(nil)"},
		{1010, []string{"BLPOP", "l", "0"}, ""}, // a null array
		{1010, []string{"LINDEX", "l", "0"}, "(nil)"},
		{1010, []string{"RPUSH", "l", "new"}, "1"},
		{1010, []string{"LRANGE", "l", "0", "-1"}, "[new]"},
		{1010, []string{"LINDEX", "l", "1"}, "(nil)"},
		{1010, []string{"PTTL", "l"}, "-1"},
	} {
		if got := show(run(t, db, s.now, s.cmd...)); got != s.want {
			t.Fatalf("at %d: %v = %s, want %s", s.now, s.cmd, got, s.want)
		}
	}
}

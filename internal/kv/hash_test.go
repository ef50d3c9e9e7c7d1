package kv

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/kvdiff"
	"github.com/kvorum/kvorum/internal/reply"
)

// Tests of hashes and sets (hash.go, set.go) for what the differential
// files cannot see: storage layout, costs, determinism, scans under
// changes, random replies.

// hsRun runs one command (Check, then Apply or Read) and fails the test on
// a storage-level failure.
func hsRun(t testing.TB, db *pebble.DB, args ...string) Reply {
	t.Helper()
	return runKV(db, args)
}

// hsShow renders any reply kind, sets and maps included.
func hsShow(r Reply) string {
	switch r.Kind {
	case reply.KindNil, reply.KindNilArray:
		return "(nil)"
	case reply.KindInt:
		return strconv.FormatInt(r.Int, 10)
	case reply.KindError:
		return "ERR<" + string(r.Str) + ">"
	case reply.KindArray, reply.KindSet, reply.KindMap, reply.KindPairs:
		parts := make([]string, len(r.Elems))
		for i, e := range r.Elems {
			parts[i] = hsShow(e)
		}
		open := map[reply.Kind]string{reply.KindArray: "[", reply.KindSet: "~[", reply.KindMap: "%[", reply.KindPairs: "pairs["}[r.Kind]
		return open + strings.Join(parts, " ") + "]"
	}
	return string(r.Str)
}

// hsStrings returns the bulk strings of an array, set or map reply.
func hsStrings(t testing.TB, r Reply) []string {
	t.Helper()
	if r.Kind != reply.KindArray && r.Kind != reply.KindSet && r.Kind != reply.KindMap && r.Kind != reply.KindPairs {
		t.Fatalf("not an aggregate: %s", hsShow(r))
	}
	out := make([]string, len(r.Elems))
	for i, e := range r.Elems {
		out[i] = string(e.Str)
	}
	return out
}

// hsFill adds n elements named prefix+i (hash: value "v"+i) in commands of
// up to 1000 elements.
func hsFill(t testing.TB, db *pebble.DB, cmd, key, prefix string, n int) {
	t.Helper()
	for i := 0; i < n; {
		args := []string{cmd, key}
		for j := 0; j < 1000 && i < n; j, i = j+1, i+1 {
			args = append(args, prefix+strconv.Itoa(i))
			if cmd == "HSET" {
				args = append(args, "v"+strconv.Itoa(i))
			}
		}
		if r := hsRun(t, db, args...); r.IsError() {
			t.Fatal(hsShow(r))
		}
	}
}

// hsElemKeys counts the live element storage keys of key's current
// incarnation and of every incarnation (all element keys under the key).
func hsElemKeys(t testing.TB, db *pebble.DB, key string) (current, all int) {
	t.Helper()
	x := getCtx(db, nil, time.Now().UnixMilli())
	defer putCtx(x)
	rec, ok, err := x.loadHeader([]byte(key))
	if err != nil {
		t.Fatal(err)
	}
	prefix := append(appendEscaped(appendKeyHead(nil, []byte(key)), []byte(key)), suffixElem)
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var cur []byte
	if ok {
		cur = appendElemPrefix(nil, []byte(key), rec.version)
	}
	for valid := it.First(); valid; valid = it.Next() {
		all++
		if cur != nil && bytes.HasPrefix(it.Key(), cur) {
			current++
		}
	}
	return current, all
}

// One storage key per element: a big hash and a big set hold one element
// key each per field/member, and a point write changes one element key and
// the metadata record, never the rest.
func TestHashSetOneKeyPerElement(t *testing.T) {
	db := openMem(t)
	const n = 10000
	hsFill(t, db, "HSET", "h", "f", n)
	hsFill(t, db, "SADD", "s", "m", n)
	for _, k := range []string{"h", "s"} {
		if cur, all := hsElemKeys(t, db, k); cur != n || all != n {
			t.Fatalf("%s: %d element keys (%d in all), want %d", k, cur, all, n)
		}
	}
	for _, c := range []struct {
		args  []string
		reply string
		muts  uint32
	}{
		{[]string{"HSET", "h", "f5000", "new"}, "0", 2},
		{[]string{"HSET", "h", "fnew", "x"}, "1", 2},
		{[]string{"HSETNX", "h", "f1", "x"}, "0", 0},
		{[]string{"HINCRBY", "h", "cnt", "5"}, "5", 2},
		{[]string{"HINCRBYFLOAT", "h", "cnt", "0.5"}, "5.5", 2},
		{[]string{"HDEL", "h", "f7"}, "1", 2},
		{[]string{"HDEL", "h", "nope"}, "0", 0},
		{[]string{"SADD", "s", "m5000"}, "0", 0},
		{[]string{"SADD", "s", "new"}, "1", 2},
		{[]string{"SREM", "s", "m9"}, "1", 2},
		{[]string{"SMOVE", "s", "s2", "m10"}, "1", 5}, // src elem+meta, version counter, dst elem+meta
		{[]string{"SPOP", "s"}, "", 2},
	} {
		r, muts := applyCount(t, db, c.args...)
		if r.IsError() || (c.reply != "" && hsShow(r) != c.reply) || muts != c.muts {
			t.Errorf("%q = %s with %d mutations, want %s with %d", c.args, hsShow(r), muts, c.reply, c.muts)
		}
	}
	if got := hsShow(hsRun(t, db, "HGET", "h", "f5000")); got != "new" {
		t.Fatalf("HGET = %s", got)
	}
	if got := hsShow(hsRun(t, db, "HLEN", "h")); got != strconv.Itoa(n+1) {
		t.Fatalf("HLEN = %s", got)
	}
	if cur, _ := hsElemKeys(t, db, "h"); cur != n+1 {
		t.Fatalf("hash has %d element keys, want %d", cur, n+1)
	}
	if got := hsShow(hsRun(t, db, "SCARD", "s")); got != strconv.Itoa(n-2) {
		t.Fatalf("SCARD = %s", got)
	}
	if cur, _ := hsElemKeys(t, db, "s"); cur != n-2 {
		t.Fatalf("set has %d element keys, want %d", cur, n-2)
	}
}

// HLEN, SCARD, HGET, SISMEMBER... of a big collection are point reads of
// the metadata (and the element): no iteration.
func TestHashSetBigPointReads(t *testing.T) {
	db := openMem(t)
	const n = 20000
	hsFill(t, db, "HSET", "h", "f", n)
	hsFill(t, db, "SADD", "s", "m", n)
	for _, c := range []struct {
		args []string
		want string
		gets int
	}{
		{[]string{"HLEN", "h"}, strconv.Itoa(n), 1},
		{[]string{"SCARD", "s"}, strconv.Itoa(n), 1},
		{[]string{"HGET", "h", "f19999"}, "v19999", 2},
		{[]string{"HEXISTS", "h", "f3"}, "1", 2},
		{[]string{"HSTRLEN", "h", "f123"}, "4", 2},
		{[]string{"HMGET", "h", "f1", "zz"}, "[v1 (nil)]", 3},
		{[]string{"SISMEMBER", "s", "m777"}, "1", 2},
		{[]string{"SMISMEMBER", "s", "m1", "x"}, "[1 0]", 3},
		{[]string{"HLEN", "s"}, "ERR<WRONGTYPE Operation against a key holding the wrong kind of value>", 1},
	} {
		cr := &countingReader{Reader: db}
		r := Read(cr, toArgs(c.args...), time.Now().UnixMilli())
		if got := hsShow(r); got != c.want || cr.gets != c.gets || len(cr.iters) != 0 {
			t.Errorf("%q = %s with %d gets, %d iterators; want %s with %d gets, none", c.args, got, cr.gets, len(cr.iters), c.want, c.gets)
		}
	}
	// SINTER iterates the smallest set only and probes the big one.
	hsRun(t, db, "SADD", "small", "m1", "m2", "nope")
	cr := &countingReader{Reader: db}
	r := Read(cr, toArgs("SINTER", "s", "small"), time.Now().UnixMilli())
	if got := hsShow(r); got != "~[m1 m2]" || len(cr.iters) != 1 || cr.gets != 2+3 {
		t.Fatalf("SINTER = %s with %d gets, %d iterators", got, cr.gets, len(cr.iters))
	}
	// HGETALL returns everything, in byte order.
	all := hsStrings(t, hsRun(t, db, "HGETALL", "h"))
	var fields []string
	for i := 0; i < len(all); i += 2 {
		fields = append(fields, all[i])
	}
	if len(all) != 2*n || !slices.IsSorted(fields) {
		t.Fatalf("HGETALL: %d strings, sorted %v", len(all), slices.IsSorted(fields))
	}
}

// DEL (and overwriting, and expiry) of a big collection leaves no element
// visible, and a re-created key does not resurrect old elements.
func TestHashSetDeleteAndRecreate(t *testing.T) {
	db := openMem(t)
	const n = 5000
	for _, c := range []struct{ add, key, prefix, read, count string }{
		{"HSET", "h", "f", "HGETALL", "HLEN"},
		{"SADD", "s", "m", "SMEMBERS", "SCARD"},
	} {
		hsFill(t, db, c.add, c.key, c.prefix, n)
		if got := hsShow(hsRun(t, db, "DEL", c.key)); got != "1" {
			t.Fatalf("DEL = %s", got)
		}
		if _, all := hsElemKeys(t, db, c.key); all != 0 {
			t.Fatalf("%s: %d element keys visible after DEL", c.key, all)
		}
		args := []string{c.add, c.key, c.prefix + "1"}
		if c.add == "HSET" {
			args = append(args, "new")
		}
		hsRun(t, db, args...)
		want := "~[m1]"
		if c.add == "HSET" {
			want = "%[f1 new]"
		}
		if got := hsShow(hsRun(t, db, c.read, c.key)); got != want {
			t.Fatalf("%s after re-create = %s, want %s", c.read, got, want)
		}
		if got := hsShow(hsRun(t, db, c.count, c.key)); got != "1" {
			t.Fatalf("%s after re-create = %s", c.count, got)
		}
		// Overwritten by a string, then re-created.
		hsFill(t, db, c.add, c.key, c.prefix, 100)
		hsRun(t, db, "SET", c.key, "str")
		if _, all := hsElemKeys(t, db, c.key); all != 0 {
			t.Fatalf("%s: %d element keys visible after SET", c.key, all)
		}
		hsRun(t, db, "DEL", c.key)
		hsRun(t, db, args...)
		if got := hsShow(hsRun(t, db, c.count, c.key)); got != "1" {
			t.Fatalf("%s after SET and re-create = %s", c.count, got)
		}
		// Expired, then re-created by a write at a later time.
		hsFill(t, db, c.add, c.key, c.prefix, 100)
		x := getCtx(db, nil, 0)
		rec, _, _ := x.load([]byte(c.key))
		putCtx(x)
		rec.expire = 1
		if err := db.Set(metaKey([]byte(c.key)), rec.encode(), pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		if got := hsShow(hsRun(t, db, c.count, c.key)); got != "0" {
			t.Fatalf("%s of an expired key = %s", c.count, got)
		}
		hsRun(t, db, args...)
		if got := hsShow(hsRun(t, db, c.read, c.key)); got != want {
			t.Fatalf("%s after expiry and re-create = %s", c.read, got)
		}
		if cur, all := hsElemKeys(t, db, c.key); cur != 1 || all != 1 {
			t.Fatalf("%s: %d/%d element keys after expiry and re-create", c.key, cur, all)
		}
	}
}

// hsApply applies args with env on db in its own batch.
func hsApply(t testing.TB, db *pebble.DB, env Env, args ...string) Reply {
	t.Helper()
	b := db.NewIndexedBatch()
	defer b.Close()
	r := Apply(b, toArgs(args...), env)
	if err := b.Commit(pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	return r
}

// SPOP draws from the log position: the same commands with the same Env on
// two databases pop the same members and leave the same bytes.
func TestSPopIsDeterministic(t *testing.T) {
	dbs := []*pebble.DB{openMem(t), openMem(t)}
	var replies [2][]string
	for d, db := range dbs {
		// Fill with fixed log positions: runKV's would differ between the
		// databases (and so would the records' mod stamps).
		for i := 0; i < 20; i++ {
			args := []string{"SADD", "big"}
			for j := 0; j < 1000; j++ {
				args = append(args, "m"+strconv.Itoa(i*1000+j))
			}
			hsApply(t, db, Env{Now: 1, Index: uint64(10 + i)}, args...)
		}
		hsApply(t, db, Env{Now: 1, Index: 50}, "SADD", "small", "a", "b", "c", "d", "e", "f", "g", "h")
		for i := 0; i < 300; i++ {
			env := Env{Now: 1000 + int64(i), Index: uint64(1000 + i), Seq: i % 3}
			var args []string
			switch i % 5 {
			case 0:
				args = []string{"SPOP", "small"}
			case 1:
				args = []string{"SPOP", "big"}
			case 2:
				args = []string{"SPOP", "big", "7"}
			case 3:
				args = []string{"SPOP", "small", "2"}
			default:
				args = []string{"SADD", "small", "n" + strconv.Itoa(i)}
			}
			replies[d] = append(replies[d], hsShow(hsApply(t, db, env, args...)))
		}
	}
	if !slices.Equal(replies[0], replies[1]) {
		t.Fatal("SPOP replies differ between the databases")
	}
	h0, n0, err0 := StateHash(dbs[0])
	h1, n1, err1 := StateHash(dbs[1])
	if err0 != nil || err1 != nil || h0 != h1 || n0 != n1 {
		t.Fatalf("storage differs: %x (%d keys) vs %x (%d keys)", h0, n0, h1, n1)
	}
	// Popped members are gone and the count is right.
	popped := map[string]bool{}
	for i, r := range replies[0] {
		if i%5 == 1 || i%5 == 2 { // SPOP big, SPOP big 7
			for _, m := range strings.Fields(strings.Trim(r, "~[]")) {
				if popped[m] {
					t.Fatalf("%s popped twice", m)
				}
				popped[m] = true
			}
		}
	}
	if got := hsShow(hsRun(t, dbs[0], "SCARD", "big")); got != strconv.Itoa(20000-len(popped)) {
		t.Fatalf("SCARD big = %s after popping %d", got, len(popped))
	}
	for m := range popped {
		if got := hsShow(hsRun(t, dbs[0], "SISMEMBER", "big", m)); got != "0" {
			t.Fatalf("popped %s still a member", m)
		}
	}
	// Another log position draws differently (with overwhelming odds).
	a := hsShow(hsApply(t, dbs[0], Env{Index: 5000}, "SPOP", "big", "5"))
	b := hsShow(hsApply(t, dbs[1], Env{Index: 5001}, "SPOP", "big", "5"))
	if a == b {
		t.Fatalf("different log positions popped the same members %s", a)
	}
}

// HSCAN and SSCAN with a small COUNT return every element present for the
// whole scan while elements come and go between calls, and end with cursor
// 0, also when the node forgets its cursors (the stateless fallback).
func TestHashSetScanUnderChanges(t *testing.T) {
	for _, c := range []struct{ add, rem, scan string }{
		{"HSET", "HDEL", "HSCAN"},
		{"SADD", "SREM", "SSCAN"},
	} {
		for _, forget := range []bool{false, true} {
			db := openMem(t)
			rng := rand.New(rand.NewPCG(5, 6))
			const n = 3000
			hsFill(t, db, c.add, "k", "e", n)
			stable := map[string]bool{}
			for i := 0; i < n/2; i++ {
				stable["e"+strconv.Itoa(i)] = true
			}
			add := func(e string) {
				args := []string{c.add, "k", e}
				if c.add == "HSET" {
					args = append(args, "v")
				}
				hsRun(t, db, args...)
			}
			seen := map[string]int{}
			cursor := "0"
			calls := 0
			for ; calls < 10000; calls++ {
				r := hsRun(t, db, c.scan, "k", cursor, "COUNT", "37")
				if r.IsError() {
					t.Fatal(hsShow(r))
				}
				page := r.Elems[1].Elems
				step := 1
				if c.scan == "HSCAN" {
					step = 2
				}
				for i := 0; i < len(page); i += step {
					seen[string(page[i].Str)]++
				}
				if cursor = string(r.Elems[0].Str); cursor == "0" {
					break
				}
				e := "e" + strconv.Itoa(n/2+rng.IntN(n/2))
				switch rng.IntN(3) {
				case 0:
					hsRun(t, db, c.rem, "k", e)
				case 1:
					add(e)
				default:
					add("new" + strconv.Itoa(calls))
				}
				if forget && calls%5 == 0 {
					cursors.Forget()
				}
			}
			if cursor != "0" {
				t.Fatalf("%s (forget=%v) did not finish", c.scan, forget)
			}
			for e := range stable {
				if seen[e] == 0 {
					t.Fatalf("%s (forget=%v) missed %s", c.scan, forget, e)
				}
			}
			repeats := 0
			for _, k := range seen {
				repeats += k - 1
			}
			if !forget && repeats != 0 {
				t.Fatalf("%s returned %d elements more than once with remembered cursors", c.scan, repeats)
			}
			if calls < n/37 {
				t.Fatalf("%s took %d calls for %d elements with COUNT 37", c.scan, calls, n)
			}
		}
	}
}

// MATCH filters what COUNT visited; a cursor of another key or a made-up
// one is accepted (resumes from its prefix); small collections come back
// whole.
func TestHashSetScanCursors(t *testing.T) {
	db := openMem(t)
	hsFill(t, db, "HSET", "h", "f", 1000)
	r := hsRun(t, db, "HSCAN", "h", "0", "COUNT", "100", "MATCH", "f1*")
	if len(r.Elems[1].Elems) == 0 || string(r.Elems[0].Str) == "0" {
		t.Fatalf("first page: %s", hsShow(r))
	}
	for i := 0; i < len(r.Elems[1].Elems); i += 2 {
		if f := string(r.Elems[1].Elems[i].Str); !strings.HasPrefix(f, "f1") {
			t.Fatalf("MATCH f1* returned %s", f)
		}
	}
	// A made-up cursor resumes at its 4-byte prefix: "f5" then zeros.
	made := strconv.FormatUint(uint64(0x66350000)<<32|1, 10)
	r = hsRun(t, db, "HSCAN", "h", made, "COUNT", "1")
	if got := hsShow(r.Elems[1]); got != "[f5 v5]" {
		t.Fatalf("made-up cursor page = %s", got)
	}
	// A cursor handed out for another key falls back to its prefix.
	hsFill(t, db, "HSET", "h2", "f", 1000)
	r = hsRun(t, db, "HSCAN", "h", "0", "COUNT", "10")
	r2 := hsRun(t, db, "HSCAN", "h2", string(r.Elems[0].Str), "COUNT", "1")
	if len(r2.Elems[1].Elems) != 2 {
		t.Fatalf("foreign cursor page = %s", hsShow(r2))
	}
	// Small collections are returned whole whatever the cursor and COUNT.
	hsRun(t, db, "SADD", "s", "a", "b", "c")
	for _, cur := range []string{"0", "12345", "18446744073709551615"} {
		if got := hsShow(hsRun(t, db, "SSCAN", "s", cur, "COUNT", "1")); got != "[0 [a b c]]" {
			t.Fatalf("SSCAN s %s = %s", cur, got)
		}
	}
}

// HRANDFIELD and SRANDMEMBER: distinct elements for a positive count,
// repeats allowed for a negative one, the whole collection for a count at
// least its size, values paired with their fields.
func TestHashSetRandomShapes(t *testing.T) {
	db := openMem(t)
	hsRun(t, db, "HSET", "h3", "a", "1", "b", "2", "c", "3")
	hsRun(t, db, "SADD", "s3", "a", "b", "c")
	hsFill(t, db, "HSET", "hbig", "f", 5000)
	hsFill(t, db, "SADD", "sbig", "m", 5000)
	// content[key][element] = value ("" for set members).
	content := map[string]map[string]string{}
	for _, k := range []string{"h3", "hbig"} {
		all := hsStrings(t, hsRun(t, db, "HGETALL", k))
		content[k] = map[string]string{}
		for i := 0; i < len(all); i += 2 {
			content[k][all[i]] = all[i+1]
		}
	}
	for _, k := range []string{"s3", "sbig"} {
		content[k] = map[string]string{}
		for _, m := range hsStrings(t, hsRun(t, db, "SMEMBERS", k)) {
			content[k][m] = ""
		}
	}
	for _, c := range []struct {
		key  string
		size int
		hash bool
	}{{"h3", 3, true}, {"s3", 3, false}, {"hbig", 5000, true}, {"sbig", 5000, false}} {
		cmd := "SRANDMEMBER"
		if c.hash {
			cmd = "HRANDFIELD"
		}
		for _, count := range []int{1, 2, 3, 10, 50, 2000, 4999, 5000, 6000, -1, -5, -100, -20000} {
			args := []string{cmd, c.key, strconv.Itoa(count)}
			withValues := c.hash && count%2 == 0
			if withValues {
				args = append(args, "WITHVALUES")
			}
			r := hsRun(t, db, args...)
			got := hsStrings(t, r)
			var elems []string
			if withValues {
				for i := 0; i < len(got); i += 2 {
					elems = append(elems, got[i])
					if want := content[c.key][got[i]]; got[i+1] != want {
						t.Fatalf("%q: %s paired with %s, not %s", args, got[i], got[i+1], want)
					}
				}
			} else {
				elems = got
			}
			want := count
			if count < 0 {
				want = -count
			} else if count > c.size {
				want = c.size
			}
			if len(elems) != want {
				t.Fatalf("%q: %d elements, want %d", args, len(elems), want)
			}
			distinct := map[string]bool{}
			for _, e := range elems {
				distinct[e] = true
				if _, ok := content[c.key][e]; !ok {
					t.Fatalf("%q returned %s, not an element", args, e)
				}
			}
			if count > 0 && len(distinct) != len(elems) {
				t.Fatalf("%q repeated elements", args)
			}
			if count >= c.size && !slices.IsSorted(elems) {
				t.Fatalf("%q: the whole collection, not in byte order", args)
			}
			if count <= -100 && len(distinct) == len(elems) && c.size == 3 {
				t.Fatalf("%q: no repeats among %d draws from 3", args, len(elems))
			}
		}
		// Without a count: one element.
		r := hsRun(t, db, cmd, c.key)
		if r.Kind != reply.KindBulk {
			t.Fatalf("%s %s = %s", cmd, c.key, hsShow(r))
		}
	}
	// Every element of a small collection is reachable.
	seen := map[string]bool{}
	for i := 0; i < 200 && len(seen) < 3; i++ {
		seen[hsShow(hsRun(t, db, "SRANDMEMBER", "s3"))] = true
	}
	if len(seen) != 3 {
		t.Fatalf("SRANDMEMBER reached only %v", seen)
	}
	// A negative count beyond the cap is refused.
	for _, args := range [][]string{{"HRANDFIELD", "h3", "-1048577"}, {"SRANDMEMBER", "s3", "-1048577"}} {
		if got := hsShow(hsRun(t, db, args...)); !strings.Contains(got, "too large") {
			t.Fatalf("%q = %.80s", args, got)
		}
	}
}

// Random choices are uniform over ranks whatever the spread of the element
// bytes (unpadded numbers here), distinct when asked, and in random order.
func TestRandomElemsUniform(t *testing.T) {
	db := openMem(t)
	const n = 200
	hsFill(t, db, "SADD", "s", "m", n)
	x := getCtx(db, nil, time.Now().UnixMilli())
	defer putCtx(x)
	c, ok, err := x.loadColl([]byte("s"), typeSet)
	if !ok || err != nil {
		t.Fatal("no set")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const draws = 200000
	picks, err := x.randomElems(c, rng, -draws)
	if err != nil || len(picks) != draws {
		t.Fatal(err, len(picks))
	}
	counts := map[string]int{}
	for _, p := range picks {
		counts[string(p.elem)]++
	}
	if len(counts) != n {
		t.Fatalf("%d distinct members drawn, want %d", len(counts), n)
	}
	for m, k := range counts {
		if k < draws/n*8/10 || k > draws/n*12/10 {
			t.Fatalf("%s drawn %d times of %d (expected %d)", m, k, draws, draws/n)
		}
	}
	// Distinct draws: k different members, not in byte order.
	for _, k := range []int64{1, 2, 150, 199, 200, 500} {
		picks, err := x.randomElems(c, rng, k)
		if err != nil || int64(len(picks)) != min(k, n) {
			t.Fatal(err, k, len(picks))
		}
		seen := map[string]bool{}
		var order []string
		for _, p := range picks {
			if seen[string(p.elem)] {
				t.Fatalf("k=%d: %s twice", k, p.elem)
			}
			seen[string(p.elem)] = true
			order = append(order, string(p.elem))
		}
		if k >= 150 && slices.IsSorted(order) {
			t.Fatalf("k=%d: draws in byte order", k)
		}
	}
	// Positions: the first of 2 distinct draws is either member equally often.
	firsts := map[string]int{}
	hsRun(t, db, "SADD", "two", "a", "b")
	c2, _, _ := x.loadColl([]byte("two"), typeSet)
	for i := 0; i < 2000; i++ {
		picks, _ := x.randomElems(c2, rng, 2)
		firsts[string(picks[0].elem)]++
	}
	if firsts["a"] < 800 || firsts["b"] < 800 {
		t.Fatalf("first of two draws: %v", firsts)
	}
}

// A command that replies with an error writes nothing (not even the
// version counter).
func TestHashSetErrorsWriteNothing(t *testing.T) {
	db := openMem(t)
	hsRun(t, db, "SET", "str", "v")
	hsRun(t, db, "HSET", "h", "s", "abc", "n", "9223372036854775807", "inf", "inf")
	hsRun(t, db, "SADD", "s", "a", "b")
	for _, args := range [][]string{
		{"HSET", "str", "f", "v"}, {"HSETNX", "str", "f", "v"}, {"HDEL", "str", "f"},
		{"HINCRBY", "h", "s", "1"}, {"HINCRBY", "h", "n", "1"}, {"HINCRBY", "str", "f", "1"},
		{"HINCRBYFLOAT", "h", "s", "1"}, {"HINCRBYFLOAT", "h", "inf", "1"}, {"HINCRBYFLOAT", "h", "x", "inf"},
		{"HINCRBYFLOAT", "str", "f", "1"}, {"HINCRBYFLOAT", "new", "f", "x"}, {"HINCRBY", "new", "f", "x"},
		{"SADD", "str", "a"}, {"SREM", "str", "a"}, {"SPOP", "str"}, {"SPOP", "s", "-1"},
		{"SMOVE", "s", "str", "a"}, {"SMOVE", "str", "s", "a"}, {"SMOVE", "h", "s", "a"},
		{"SINTERSTORE", "d", "s", "str"}, {"SUNIONSTORE", "d", "s", "str"}, {"SDIFFSTORE", "d", "s", "str"},
		{"SUNIONSTORE", "s", "s", "h"}, {"SDIFFSTORE", "new", "nokey", "h"},
	} {
		r, muts := applyCount(t, db, args...)
		if !r.IsError() || muts != 0 {
			t.Errorf("%q = %s with %d mutations, want an error and none", args, hsShow(r), muts)
		}
	}
	// No-ops write nothing either.
	for _, args := range [][]string{
		{"HDEL", "h", "nope"}, {"HDEL", "nokey", "f"}, {"SADD", "s", "a", "b"}, {"SREM", "s", "x"},
		{"SREM", "nokey", "x"}, {"SPOP", "nokey"}, {"SPOP", "s", "0"}, {"SMOVE", "nokey", "s", "a"},
		{"SMOVE", "s", "d", "nope"}, {"SMOVE", "s", "s", "a"}, {"SINTERSTORE", "nokey2", "s", "nokey"},
		{"HSETNX", "h", "s", "x"},
	} {
		r, muts := applyCount(t, db, args...)
		if r.IsError() || muts != 0 {
			t.Errorf("%q = %s with %d mutations, want none", args, hsShow(r), muts)
		}
	}
}

// The *STORE commands stream into a new incarnation of the destination,
// which may be a source; the result replaces what was there.
func TestSetStoreIntoSource(t *testing.T) {
	db := openMem(t)
	hsFill(t, db, "SADD", "a", "m", 3000)
	hsFill(t, db, "SADD", "b", "m", 1500)
	hsRun(t, db, "SADD", "b", "extra")
	if got := hsShow(hsRun(t, db, "SUNIONSTORE", "a", "a", "b")); got != "3001" {
		t.Fatalf("SUNIONSTORE = %s", got)
	}
	if cur, all := hsElemKeys(t, db, "a"); cur != 3001 || all != 3001 {
		t.Fatalf("a: %d/%d element keys", cur, all)
	}
	if got := hsShow(hsRun(t, db, "SDIFFSTORE", "a", "a", "b")); got != "1500" {
		t.Fatalf("SDIFFSTORE = %s", got)
	}
	if got := hsShow(hsRun(t, db, "SINTERSTORE", "b", "b", "a")); got != "0" {
		t.Fatalf("SINTERSTORE = %s", got)
	}
	if got := hsShow(hsRun(t, db, "EXISTS", "b")); got != "0" {
		t.Fatalf("EXISTS b after an empty SINTERSTORE = %s", got)
	}
	if _, all := hsElemKeys(t, db, "b"); all != 0 {
		t.Fatalf("b: %d element keys left", all)
	}
	if got := hsShow(hsRun(t, db, "SINTERCARD", "1", "a", "LIMIT", "10")); got != "10" {
		t.Fatalf("SINTERCARD LIMIT 10 = %s", got)
	}
	members := hsStrings(t, hsRun(t, db, "SMEMBERS", "a"))
	if len(members) != 1500 || !slices.IsSorted(members) || members[0] != "m1500" {
		t.Fatalf("SMEMBERS a: %d members, first %q", len(members), members[0])
	}
}

// Reply kinds: sets for whole-set replies, a map for HGETALL, arrays for
// the rest.
func TestHashSetReplyKinds(t *testing.T) {
	db := openMem(t)
	hsRun(t, db, "HSET", "h", "f", "v")
	hsRun(t, db, "SADD", "s", "a")
	for _, c := range []struct {
		args []string
		kind reply.Kind
	}{
		{[]string{"HGETALL", "h"}, reply.KindMap}, {[]string{"HGETALL", "nokey"}, reply.KindMap},
		{[]string{"HKEYS", "h"}, reply.KindArray}, {[]string{"HVALS", "nokey"}, reply.KindArray},
		{[]string{"HMGET", "h", "f"}, reply.KindArray}, {[]string{"HRANDFIELD", "h", "1"}, reply.KindArray},
		{[]string{"HSCAN", "h", "0"}, reply.KindArray}, {[]string{"SSCAN", "s", "0"}, reply.KindArray},
		{[]string{"SMEMBERS", "s"}, reply.KindSet}, {[]string{"SMEMBERS", "nokey"}, reply.KindSet},
		{[]string{"SINTER", "s", "nokey"}, reply.KindSet}, {[]string{"SUNION", "s"}, reply.KindSet},
		{[]string{"SDIFF", "s"}, reply.KindSet}, {[]string{"SRANDMEMBER", "s", "2"}, reply.KindArray},
		{[]string{"SMISMEMBER", "s", "a"}, reply.KindArray}, {[]string{"SPOP", "nokey", "1"}, reply.KindSet},
		{[]string{"SPOP", "s", "0"}, reply.KindSet}, {[]string{"SPOP", "s", "5"}, reply.KindSet},
		{[]string{"HRANDFIELD", "nokey"}, reply.KindNil}, {[]string{"SPOP", "nokey"}, reply.KindNil},
	} {
		if r := hsRun(t, db, c.args...); r.Kind != c.kind {
			t.Errorf("%q: kind %d (%s), want %d", c.args, r.Kind, hsShow(r), c.kind)
		}
	}
}

// TestHashSetRandomAgainstRedis sends seeded random hash, set and keyspace
// commands (kvdiff's generator, deterministic replies only, no scripts) to
// redis-server and to the state machine; SPOP of a whole set is compared
// sorted (Redis replies in its hash table's order).
func TestHashSetRandomAgainstRedis(t *testing.T) {
	rc := kvdiff.StartRedis(t)
	ctx := context.Background()
	keep := func(name string) bool {
		switch name {
		case "SET", "GET", "APPEND", "INCR", "DEL", "EXISTS", "TYPE", "RENAME", "RENAMENX", "EXPIRE", "TTL",
			"PERSIST", "SCAN", "DBSIZE", "ZADD", "LPUSH", "RPUSH":
			return true
		}
		return strings.HasPrefix(name, "H") || strings.HasPrefix(name, "S")
	}
	total := 0
	for seed := uint64(1); seed <= 30; seed++ {
		rc.FlushAll(ctx)
		db, closeDB := openMemDB(t)
		g := kvdiff.NewGen(seed, true)
		for i := 0; i < 800; {
			args := g.Next()
			name := strings.ToUpper(args[0])
			if !keep(name) {
				continue
			}
			i++
			iargs := make([]any, len(args))
			for j, a := range args {
				iargs[j] = a
			}
			wv, werr := rc.Do(ctx, iargs...).Result()
			want := kvdiff.Normalize(name, wv, werr)
			got := kvdiff.NormalizeReply(name, runKV(db, args))
			if name == "SPOP" {
				for _, v := range []any{want, got} {
					if s, ok := v.([]any); ok {
						sort.Slice(s, func(i, j int) bool { return fmt.Sprint(s[i]) < fmt.Sprint(s[j]) })
					}
				}
			}
			total++
			if !reflect.DeepEqual(want, got) {
				closeDB()
				t.Fatalf("seed %d, command %d: %s\n  redis: %#v\n  kv:    %#v", seed, i, kvdiff.String(args), want, got)
			}
		}
		closeDB()
	}
	t.Logf("%d commands compared", total)
}

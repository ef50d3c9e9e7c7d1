package kv

import (
	"bytes"
	"context"
	"fmt"
	"math"
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
	"github.com/kvorum/kvorum/internal/redisnum"
	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/zrange"
)

// zfmt formats a score as ZSCORE replies it.
func zfmt(f float64) string { return string(redisnum.AppendDouble(nil, f)) }

// zRun runs a command and fails the test on an error reply.
func zRun(t testing.TB, db *pebble.DB, args ...string) Reply {
	t.Helper()
	r := runKV(db, args)
	if r.IsError() {
		t.Fatalf("%q: %s", args, r.Str)
	}
	return r
}

// zAddMany ZADDs members with scores in commands of up to 1000 pairs.
func zAddMany(t testing.TB, db *pebble.DB, key string, members []string, score func(i int) string) {
	t.Helper()
	for i := 0; i < len(members); {
		args := []string{"ZADD", key}
		for j := 0; j < 1000 && i < len(members); j, i = j+1, i+1 {
			args = append(args, score(i), members[i])
		}
		zRun(t, db, args...)
	}
}

// zSAdd adds members to the set key: with SADD once the set commands are
// registered, else by writing the set's storage directly (element = member,
// empty value, the length in the metadata).
func zSAdd(t testing.TB, db *pebble.DB, key string, members ...string) {
	t.Helper()
	if Lookup([]byte("sadd")) != nil {
		zRun(t, db, append([]string{"SADD", key}, members...)...)
		return
	}
	b := db.NewIndexedBatch()
	defer b.Close()
	x := getCtx(b, b, time.Now().UnixMilli())
	defer putCtx(x)
	testIndex++
	x.index = testIndex
	c, e := x.loadOrCreate([]byte(key), typeSet)
	if e != nil {
		t.Fatal(e)
	}
	n := c.length()
	for _, m := range members {
		has, err := x.hasElem(c, []byte(m))
		if err != nil {
			t.Fatal(err)
		}
		if !has {
			if err := x.setElem(c, []byte(m), []byte{}); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	c.setLength(n)
	if err := x.saveColl(c); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		t.Fatal(err)
	}
}

// zElemKeys counts the storage keys of key's current incarnation.
func zElemKeys(t testing.TB, r pebble.Reader, key string) (members, index int) {
	t.Helper()
	rec, ok, err := getCtx(r, nil, 0).loadHeader([]byte(key))
	if err != nil || !ok {
		t.Fatalf("%s: %v %v", key, ok, err)
	}
	lo, hi := elemSpan([]byte(key), rec.version)
	it, _ := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	defer it.Close()
	for valid := it.First(); valid; valid = it.Next() {
		switch it.Key()[len(lo)] {
		case 'm':
			members++
		case 's':
			index++
		default:
			t.Fatalf("unexpected element key %q", it.Key())
		}
	}
	return members, index
}

// Negative scores, both zeros and infinities sort numerically, equal
// scores by member bytes, and the index keys are in that order.
func TestZSetOrderOfSpecialScores(t *testing.T) {
	db := openMem(t)
	zRun(t, db, "ZADD", "z", "inf", "pinf", "-inf", "ninf", "-0", "nz", "0", "pz", "-1e-300", "tiny-", "1e-300", "tiny+",
		"-1", "m1", "1", "p1", "-1e300", "big-", "1e300", "big+", "0", "a0", "-0", "b0")
	want := "[ninf -inf big- -1.0000000000000001e+300 m1 -1 tiny- -1e-300 a0 0 b0 0 nz 0 pz 0 tiny+ 1e-300 p1 1 big+ 1.0000000000000001e+300 pinf inf]"
	if got := show(zRun(t, db, "ZRANGE", "z", "0", "-1", "WITHSCORES")); got != want {
		t.Fatalf("ZRANGE = %s\nwant    %s", got, want)
	}
	if got := show(zRun(t, db, "ZRANGEBYSCORE", "z", "-0", "0")); got != "[a0 b0 nz pz]" {
		t.Fatalf("ZRANGEBYSCORE -0 0 = %s", got)
	}
	if got := show(zRun(t, db, "ZRANGEBYSCORE", "z", "(-inf", "(inf")); strings.Contains(got, "inf") {
		t.Fatalf("exclusive infinities: %s", got)
	}
	// The index keys are in reply order.
	rec, _, _ := getCtx(db, nil, 0).loadHeader([]byte("z"))
	lo, _ := elemSpan([]byte("z"), rec.version)
	it, _ := db.NewIter(&pebble.IterOptions{LowerBound: append(bytes.Clone(lo), 's'), UpperBound: append(bytes.Clone(lo), 't')})
	var members []string
	for valid := it.First(); valid; valid = it.Next() {
		members = append(members, string(it.Key()[len(lo)+9:]))
	}
	it.Close()
	if got := fmt.Sprint(members); got != "[ninf big- m1 tiny- a0 b0 nz pz tiny+ p1 big+ pinf]" {
		t.Fatalf("index order %s", got)
	}
	for i, m := range members {
		if got := show(zRun(t, db, "ZRANK", "z", m)); got != strconv.Itoa(i) {
			t.Fatalf("ZRANK %s = %s, want %d", m, got, i)
		}
		if got := show(zRun(t, db, "ZREVRANK", "z", m)); got != strconv.Itoa(len(members)-1-i) {
			t.Fatalf("ZREVRANK %s = %s", m, got)
		}
	}
}

// zModel is the in-memory reference: member -> score (never -0).
type zModel map[string]float64

func (m zModel) sorted() []zent {
	out := make([]zent, 0, len(m))
	for k, v := range m {
		out = append(out, zent{member: []byte(k), score: v})
	}
	zSortEnts(out)
	return out
}

func zShowEnts(ents []zent, withScores bool) string {
	var parts []string
	for _, e := range ents {
		parts = append(parts, string(e.member))
		if withScores {
			parts = append(parts, zfmt(e.score))
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// TestZSetAgainstModel runs a few thousand random ZADD (all options),
// ZINCRBY, ZREM, ZPOPMIN/ZPOPMAX, ZREMRANGEBYSCORE and ZREMRANGEBYRANK
// commands against an in-memory model; after every batch it compares the
// whole set, ZCARD, ranks, scores and score ranges.
func TestZSetAgainstModel(t *testing.T) {
	db := openMem(t)
	rng := rand.New(rand.NewPCG(21, 22))
	model := zModel{}
	scores := []string{"0", "-0", "1", "-1", "2.5", "-2.5", "0.1", "1e10", "-1e10", "inf", "-inf", "3", "7", "100", "0.3"}
	member := func() string { return "m" + strconv.Itoa(rng.IntN(300)) }
	score := func() (string, float64) {
		s := scores[rng.IntN(len(scores))]
		if rng.IntN(3) == 0 {
			s = strconv.Itoa(rng.IntN(50) - 25)
		}
		f, _ := redisnum.ParseDouble([]byte(s))
		return s, f
	}
	norm := func(f float64) float64 {
		if f == 0 {
			return 0
		}
		return f
	}
	for step := 0; step < 4000; step++ {
		var args []string
		var want string
		switch op := rng.IntN(10); {
		case op < 4: // ZADD with options
			var nx, xx, gt, lt, ch bool
			args = []string{"ZADD", "z"}
			for _, o := range []string{"NX", "XX", "GT", "LT", "CH"} {
				if rng.IntN(5) == 0 {
					args = append(args, o)
					switch o {
					case "NX":
						nx = true
					case "XX":
						xx = true
					case "GT":
						gt = true
					case "LT":
						lt = true
					case "CH":
						ch = true
					}
				}
			}
			if (nx && (xx || gt || lt)) || (gt && lt) {
				args = []string{"ZADD", "z"}
				nx, xx, gt, lt = false, false, false, false
				if ch {
					args = append(args, "CH")
				}
			}
			var added, changed int64
			for i := 1 + rng.IntN(3); i > 0; i-- {
				s, f := score()
				m := member()
				args = append(args, s, m)
				cur, had := model[m]
				switch {
				case had && nx, !had && xx:
				case had:
					if (lt && f >= cur) || (gt && f <= cur) {
						continue
					}
					if f != cur {
						model[m] = norm(f)
						changed++
					}
				default:
					model[m] = norm(f)
					added++
				}
			}
			if ch {
				added += changed
			}
			want = strconv.FormatInt(added, 10)
		case op < 5: // ZINCRBY
			s, f := score()
			m := member()
			args = []string{"ZINCRBY", "z", s, m}
			sum := f // a new member's score is the increment itself (-0 stays -0)
			if cur, had := model[m]; had {
				sum = cur + f
			}
			if math.IsNaN(sum) {
				want = "ERR<ERR resulting score is not a number (NaN)>"
			} else {
				want = zfmt(sum)
				model[m] = norm(sum)
			}
		case op < 7: // ZREM
			args = []string{"ZREM", "z"}
			n := 0
			for i := 1 + rng.IntN(4); i > 0; i-- {
				m := member()
				args = append(args, m)
				if _, ok := model[m]; ok {
					delete(model, m)
					n++
				}
			}
			want = strconv.Itoa(n)
		case op < 8: // ZPOPMIN / ZPOPMAX
			count := rng.IntN(4)
			args = []string{[]string{"ZPOPMIN", "ZPOPMAX"}[rng.IntN(2)], "z", strconv.Itoa(count)}
			ents := model.sorted()
			if args[0] == "ZPOPMAX" {
				slices.Reverse(ents)
			}
			ents = ents[:min(count, len(ents))]
			for _, e := range ents {
				delete(model, string(e.member))
			}
			want = zShowEnts(ents, true)
		case op < 9: // ZREMRANGEBYSCORE
			a, fa := score()
			b, fb := score()
			exa, exb := rng.IntN(3) == 0, rng.IntN(3) == 0
			if exa {
				a = "(" + a
			}
			if exb {
				b = "(" + b
			}
			args = []string{"ZREMRANGEBYSCORE", "z", a, b}
			spec := zrange.Score{Min: fa, Max: fb, MinEx: exa, MaxEx: exb}
			n := 0
			for m, v := range model {
				if !spec.Empty() && spec.GteMin(v) && spec.LteMax(v) {
					delete(model, m)
					n++
				}
			}
			want = strconv.Itoa(n)
		default: // ZREMRANGEBYRANK
			n := len(model)
			start, end := rng.IntN(2*n+3)-n-1, rng.IntN(2*n+3)-n-1
			args = []string{"ZREMRANGEBYRANK", "z", strconv.Itoa(start), strconv.Itoa(end)}
			if start < 0 {
				start += n
			}
			if end < 0 {
				end += n
			}
			start = max(start, 0)
			end = min(end, n-1)
			del := 0
			if start <= end && start < n {
				for _, e := range model.sorted()[start : end+1] {
					delete(model, string(e.member))
					del++
				}
			}
			want = strconv.Itoa(del)
		}
		if got := show(runKV(db, args)); got != want {
			t.Fatalf("step %d: %q = %s, want %s", step, args, got, want)
		}
		if step%20 != 19 {
			continue
		}
		ents := model.sorted()
		if got, want := show(runKV(db, []string{"ZRANGE", "z", "0", "-1", "WITHSCORES"})), zShowEnts(ents, true); got != want {
			t.Fatalf("step %d: ZRANGE\n  got  %s\n  want %s", step, got, want)
		}
		if got := show(runKV(db, []string{"ZCARD", "z"})); got != strconv.Itoa(len(ents)) {
			t.Fatalf("step %d: ZCARD = %s, want %d", step, got, len(ents))
		}
		for i := 0; i < 5 && len(ents) > 0; i++ {
			r := rng.IntN(len(ents))
			m := string(ents[r].member)
			if got := show(runKV(db, []string{"ZRANK", "z", m})); got != strconv.Itoa(r) {
				t.Fatalf("step %d: ZRANK %s = %s, want %d", step, m, got, r)
			}
			if got := show(runKV(db, []string{"ZREVRANK", "z", m})); got != strconv.Itoa(len(ents)-1-r) {
				t.Fatalf("step %d: ZREVRANK %s = %s", step, m, got)
			}
			if got := show(runKV(db, []string{"ZSCORE", "z", m})); got != zfmt(ents[r].score) {
				t.Fatalf("step %d: ZSCORE %s = %s", step, m, got)
			}
			from, to := r, min(r+rng.IntN(5), len(ents)-1)
			if got, want := show(runKV(db, []string{"ZRANGE", "z", strconv.Itoa(from), strconv.Itoa(to)})), zShowEnts(ents[from:to+1], false); got != want {
				t.Fatalf("step %d: ZRANGE %d %d = %s, want %s", step, from, to, got, want)
			}
			rev := slices.Clone(ents)
			slices.Reverse(rev)
			if got, want := show(runKV(db, []string{"ZREVRANGE", "z", strconv.Itoa(from), strconv.Itoa(to)})), zShowEnts(rev[from:to+1], false); got != want {
				t.Fatalf("step %d: ZREVRANGE %d %d = %s, want %s", step, from, to, got, want)
			}
		}
		a, fa := score()
		b, fb := score()
		spec := zrange.Score{Min: fa, Max: fb}
		var in []zent
		for _, e := range ents {
			if !spec.Empty() && spec.GteMin(e.score) && spec.LteMax(e.score) {
				in = append(in, e)
			}
		}
		if got := show(runKV(db, []string{"ZCOUNT", "z", a, b})); got != strconv.Itoa(len(in)) {
			t.Fatalf("step %d: ZCOUNT %s %s = %s, want %d", step, a, b, got, len(in))
		}
		if got, want := show(runKV(db, []string{"ZRANGEBYSCORE", "z", a, b, "WITHSCORES"})), zShowEnts(in, true); got != want {
			t.Fatalf("step %d: ZRANGEBYSCORE %s %s = %s, want %s", step, a, b, got, want)
		}
		if n := len(ents); n > 0 {
			m, idx := zElemKeys(t, db, "z")
			if m != n || idx != n {
				t.Fatalf("step %d: %d member keys, %d index keys for %d members", step, m, idx, n)
			}
		} else if got := show(runKV(db, []string{"EXISTS", "z"})); got != "0" {
			t.Fatalf("step %d: empty sorted set still exists", step)
		}
	}
}

// TestZSetBig: a 50,000-member sorted set. ZCARD reads the metadata only,
// the top 10 come from a seek at the end, a point update writes only that
// member, DEL leaves no element visible and a new set under the same name
// starts empty, ZSCAN returns every member.
func TestZSetBig(t *testing.T) {
	db := openMem(t)
	const n = 50000
	members := make([]string, n)
	for i := range members {
		members[i] = fmt.Sprintf("member:%06d", i)
	}
	zAddMany(t, db, "big", members, func(i int) string { return strconv.Itoa(i * 10) })
	if m, idx := zElemKeys(t, db, "big"); m != n || idx != n {
		t.Fatalf("%d member keys, %d index keys", m, idx)
	}

	cr := &countingReader{Reader: db}
	if got := show(Read(cr, toArgs("ZCARD", "big"), 0)); got != "50000" {
		t.Fatalf("ZCARD = %s", got)
	}
	if cr.gets != 1 || len(cr.iters) != 0 {
		t.Fatalf("ZCARD: %d gets, %d iterators", cr.gets, len(cr.iters))
	}

	// The top 10 (both spellings) and the bottom 10 are fast; a whole scan
	// of the set is the yardstick.
	start := time.Now()
	zRun(t, db, "ZRANGE", "big", "0", "-1")
	whole := time.Since(start)
	for _, c := range [][]string{
		{"ZREVRANGE", "big", "0", "9", "WITHSCORES"}, {"ZRANGE", "big", "-10", "-1"}, {"ZRANGE", "big", "0", "9"},
		{"ZRANGE", "big", "+inf", "-inf", "BYSCORE", "REV", "LIMIT", "0", "10"}, {"ZREVRANK", "big", "member:049995"},
		{"ZRANK", "big", "member:000003"}, {"ZRANGEBYSCORE", "big", "(499800", "+inf"},
	} {
		start := time.Now()
		for i := 0; i < 20; i++ {
			zRun(t, db, c...)
		}
		if d := time.Since(start) / 20; d > whole/20+2*time.Millisecond {
			t.Errorf("%q took %v (whole set %v)", c, d, whole)
		}
	}
	if got := show(zRun(t, db, "ZREVRANGE", "big", "0", "2", "WITHSCORES")); got != "[member:049999 499990 member:049998 499980 member:049997 499970]" {
		t.Fatalf("top 3 = %s", got)
	}
	if got := show(zRun(t, db, "ZRANGE", "big", "25000", "25001")); got != "[member:025000 member:025001]" {
		t.Fatalf("middle = %s", got)
	}
	if got := show(zRun(t, db, "ZRANK", "big", "member:025000")); got != "25000" {
		t.Fatalf("ZRANK middle = %s", got)
	}
	if got := show(zRun(t, db, "ZCOUNT", "big", "1000", "(2000")); got != "100" {
		t.Fatalf("ZCOUNT = %s", got)
	}

	// A point update writes the member's two keys and the metadata.
	r, cnt := applyCount(t, db, "ZADD", "big", "-5", "member:030000")
	if show(r) != "0" || cnt > 4 {
		t.Fatalf("ZADD update = %s with %d mutations", show(r), cnt)
	}
	if got := show(zRun(t, db, "ZRANGE", "big", "0", "1", "WITHSCORES")); got != "[member:030000 -5 member:000000 0]" {
		t.Fatalf("after the update: %s", got)
	}
	r, cnt = applyCount(t, db, "ZINCRBY", "big", "1", "member:000001")
	if show(r) != "11" || cnt > 4 {
		t.Fatalf("ZINCRBY = %s with %d mutations", show(r), cnt)
	}
	r, cnt = applyCount(t, db, "ZPOPMAX", "big", "2")
	if show(r) != "[member:049999 499990 member:049998 499980]" || cnt > 5 {
		t.Fatalf("ZPOPMAX 2 = %s with %d mutations", show(r), cnt)
	}

	// ZSCAN visits every member exactly once when its cursors are
	// remembered, at least once when they are forgotten.
	for _, forget := range []bool{false, true} {
		seen := map[string]int{}
		cursor := "0"
		for calls := 0; ; calls++ {
			if calls > 20000 {
				t.Fatal("ZSCAN does not end")
			}
			r := zRun(t, db, "ZSCAN", "big", cursor, "COUNT", "500")
			page := r.Elems[1].Elems
			for i := 0; i+1 < len(page); i += 2 {
				seen[string(page[i].Str)]++
			}
			cursor = string(r.Elems[0].Str)
			if cursor == "0" {
				break
			}
			if forget {
				cursors.Forget()
			}
		}
		if len(seen) != n-2 {
			t.Fatalf("forget=%v: ZSCAN returned %d distinct members, want %d", forget, len(seen), n-2)
		}
		for m, c := range seen {
			if c != 1 && !forget {
				t.Fatalf("ZSCAN returned %s %d times", m, c)
			}
		}
	}

	rec, _, _ := getCtx(db, nil, 0).loadHeader([]byte("big"))
	r, cnt = applyCount(t, db, "DEL", "big")
	if show(r) != "1" || cnt > 3 {
		t.Fatalf("DEL = %s with %d mutations", show(r), cnt)
	}
	for _, c := range [][]string{{"EXISTS", "big"}, {"ZCARD", "big"}, {"ZRANGE", "big", "0", "-1"}, {"ZSCORE", "big", "member:000005"}, {"DBSIZE"}} {
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
	if got := show(zRun(t, db, "ZADD", "big", "1", "member:000005")); got != "1" {
		t.Fatalf("re-created ZADD = %s", got)
	}
	if got := show(zRun(t, db, "ZRANGE", "big", "0", "-1", "WITHSCORES")); got != "[member:000005 1]" {
		t.Fatalf("re-created set = %s", got)
	}
	if got := show(zRun(t, db, "ZCARD", "big")); got != "1" {
		t.Fatalf("re-created ZCARD = %s", got)
	}
}

// ZSCAN returns every member present for the whole scan even while the
// set changes between calls (scores move, members come and go).
func TestZSetScanUnderChanges(t *testing.T) {
	db := openMem(t)
	rng := rand.New(rand.NewPCG(5, 6))
	const n = 3000
	members := make([]string, n)
	for i := range members {
		members[i] = "s" + strconv.Itoa(i)
	}
	zAddMany(t, db, "z", members, func(i int) string { return strconv.Itoa(rng.IntN(100)) })
	stable := map[string]bool{}
	for _, m := range members[:n/2] {
		stable[m] = true
	}
	seen := map[string]bool{}
	cursor := "0"
	for calls := 0; calls < 10000; calls++ {
		r := zRun(t, db, "ZSCAN", "z", cursor, "COUNT", "37")
		page := r.Elems[1].Elems
		for i := 0; i < len(page); i += 2 {
			seen[string(page[i].Str)] = true
		}
		if cursor = string(r.Elems[0].Str); cursor == "0" {
			break
		}
		// Churn among the unstable half, and new members.
		m := members[n/2+rng.IntN(n/2)]
		switch rng.IntN(3) {
		case 0:
			zRun(t, db, "ZREM", "z", m)
		case 1:
			zRun(t, db, "ZADD", "z", strconv.Itoa(rng.IntN(100)), m)
		default:
			zRun(t, db, "ZADD", "z", strconv.Itoa(rng.IntN(100)), "new"+strconv.Itoa(calls))
		}
		if calls%7 == 0 {
			cursors.Forget()
		}
	}
	if cursor != "0" {
		t.Fatal("ZSCAN did not finish")
	}
	for m := range stable {
		if !seen[m] {
			t.Fatalf("ZSCAN missed %s", m)
		}
	}
}

// Point writes touch only the member's keys; every write that changes a
// set stamps it, a no-op does not; emptied sets are deleted.
func TestZSetWrites(t *testing.T) {
	db := openMem(t)
	members := make([]string, 10000)
	for i := range members {
		members[i] = "m" + strconv.Itoa(i)
	}
	zAddMany(t, db, "z", members, func(i int) string { return strconv.Itoa(i % 7) })
	for _, c := range []struct {
		args []string
		want string
		max  uint32
	}{
		{[]string{"ZADD", "z", "3", "m5"}, "0", 4},       // m5 moves from 5 to 3
		{[]string{"ZADD", "z", "3", "m5"}, "0", 0},       // unchanged: nothing written
		{[]string{"ZADD", "z", "NX", "9", "m5"}, "0", 0}, // blocked
		{[]string{"ZADD", "z", "XX", "1", "nope"}, "0", 0},
		{[]string{"ZADD", "z", "GT", "1", "m5"}, "0", 0},
		{[]string{"ZADD", "z", "-0", "new"}, "1", 3},
		{[]string{"ZREM", "z", "nope"}, "0", 0},
		{[]string{"ZREM", "z", "m1", "m2"}, "2", 5},
		{[]string{"ZINCRBY", "z", "0", "m3"}, "3", 3},
		{[]string{"ZREMRANGEBYSCORE", "z", "100", "200"}, "0", 0},
		{[]string{"ZREMRANGEBYLEX", "z", "[zz", "+"}, "0", 0},
		{[]string{"ZPOPMIN", "z", "0"}, "[]", 0},
		{[]string{"ZADD", "xx", "XX", "1", "a"}, "0", 0},
		{[]string{"ZADD", "xx", "XX", "INCR", "1", "a"}, "(nil)", 0},
	} {
		r, n := applyCount(t, db, c.args...)
		if show(r) != c.want || n > c.max {
			t.Errorf("%q = %s with %d mutations, want %s with at most %d", c.args, show(r), n, c.want, c.max)
		}
	}
	if got := show(zRun(t, db, "ZSCORE", "z", "new")); got != "0" {
		t.Fatalf("-0 stored as %s", got)
	}
	if got := show(zRun(t, db, "EXISTS", "xx")); got != "0" {
		t.Fatal("ZADD XX created a key")
	}
	// Removing everything deletes the key, whatever command empties it.
	for _, c := range [][]string{
		{"ZREMRANGEBYRANK", "k", "0", "-1"}, {"ZREMRANGEBYSCORE", "k", "-inf", "+inf"}, {"ZREMRANGEBYLEX", "k", "-", "+"},
		{"ZPOPMIN", "k", "10"}, {"ZPOPMAX", "k", "10"}, {"ZREM", "k", "a", "b", "c"}, {"ZRANGESTORE", "k", "k", "5", "6"},
		{"ZINTERSTORE", "k", "2", "k", "none"}, {"ZDIFFSTORE", "k", "2", "k", "k"},
	} {
		zRun(t, db, "ZADD", "k", "1", "a", "1", "b", "2", "c")
		zRun(t, db, c...)
		if got := show(zRun(t, db, "EXISTS", "k")); got != "0" {
			t.Fatalf("%q left the key", c)
		}
		if got := show(zRun(t, db, "DBSIZE")); got != "1" {
			t.Fatalf("%q: DBSIZE %s", c, got)
		}
	}
}

// A command that fails writes nothing.
func TestZSetErrorsWriteNothing(t *testing.T) {
	db := openMem(t)
	zRun(t, db, "ZADD", "z", "inf", "a", "1", "b")
	zRun(t, db, "SET", "s", "v")
	for _, c := range [][]string{
		{"ZADD", "z", "INCR", "-inf", "a"}, {"ZINCRBY", "z", "-inf", "a"}, {"ZADD", "s", "1", "a"}, {"ZADD", "z", "1", "a", "x", "b"},
		{"ZADD", "new", "NX", "XX", "1", "a"}, {"ZINCRBY", "new", "x", "a"}, {"ZREM", "s", "a"}, {"ZPOPMIN", "s"},
		{"ZUNIONSTORE", "out", "2", "z", "s"}, {"ZUNIONSTORE", "out", "1", "z", "WEIGHTS", "x"},
		{"ZINTERSTORE", "out", "1", "z", "AGGREGATE", "avg"}, {"ZRANGESTORE", "out", "s", "0", "-1"},
		{"ZRANGESTORE", "out", "z", "0", "-1", "LIMIT", "0", "1"}, {"ZREMRANGEBYSCORE", "z", "x", "1"},
		{"ZREMRANGEBYRANK", "s", "0", "1"}, {"ZDIFFSTORE", "out", "1", "z", "WITHSCORES"},
	} {
		r, n := applyCount(t, db, c...)
		if !r.IsError() || n != 0 {
			t.Fatalf("%q = %s with %d mutations", c, show(r), n)
		}
	}
	if got := show(zRun(t, db, "ZRANGE", "z", "0", "-1", "WITHSCORES")); got != "[b 1 a inf]" {
		t.Fatalf("set changed: %s", got)
	}
}

// Apply is deterministic: the same commands with the same Env on two fresh
// databases give the same replies and the same bytes.
func TestZSetApplyIsDeterministic(t *testing.T) {
	checkDeterministic(t, 3000, 7, func(rng *rand.Rand) []string {
		k := []string{"a", "b", "c"}[rng.IntN(3)]
		k2 := []string{"a", "b", "c"}[rng.IntN(3)]
		m := strconv.Itoa(rng.IntN(30))
		s := strconv.Itoa(rng.IntN(10) - 3)
		var args []string
		switch rng.IntN(9) {
		case 0, 1:
			args = []string{"ZADD", k, s, m, s + "5", m + "x"}
		case 2:
			args = []string{"ZINCRBY", k, s, m}
		case 3:
			args = []string{"ZREM", k, m}
		case 4:
			args = []string{"ZPOPMIN", k, "2"}
		case 5:
			args = []string{"ZUNIONSTORE", k, "2", k, k2, "WEIGHTS", "2", "0.5"}
		case 6:
			args = []string{"ZINTERSTORE", k2, "2", k, k2, "AGGREGATE", "MAX"}
		case 7:
			args = []string{"ZRANGESTORE", k2, k, "0", s}
		default:
			args = []string{"ZREMRANGEBYSCORE", k, "-inf", s}
		}
		return args
	})
}

// ZRANDMEMBER: distinct members for a positive count, repeats allowed for
// a negative one, scores paired with their members, every member reachable.
func TestZSetRandMember(t *testing.T) {
	db := openMem(t)
	members := make([]string, 200)
	for i := range members {
		members[i] = "r" + strconv.Itoa(i)
	}
	zAddMany(t, db, "z", members, func(i int) string { return strconv.Itoa(i) })
	hits := map[string]int{}
	for i := 0; i < 300; i++ {
		r := zRun(t, db, "ZRANDMEMBER", "z", "7", "WITHSCORES")
		if len(r.Elems) != 14 {
			t.Fatalf("ZRANDMEMBER 7 WITHSCORES: %s", show(r))
		}
		seen := map[string]bool{}
		for j := 0; j < 14; j += 2 {
			m, s := string(r.Elems[j].Str), show(r.Elems[j+1])
			if seen[m] || "r"+s != m {
				t.Fatalf("ZRANDMEMBER 7: %s", show(r))
			}
			seen[m] = true
			hits[m]++
		}
		one := zRun(t, db, "ZRANDMEMBER", "z")
		if one.Kind != reply.KindBulk || !strings.HasPrefix(string(one.Str), "r") {
			t.Fatalf("ZRANDMEMBER = %s", show(one))
		}
		hits[string(one.Str)]++
	}
	if len(hits) < 190 {
		t.Fatalf("only %d of 200 members ever picked", len(hits))
	}
	r := zRun(t, db, "ZRANDMEMBER", "z", "-500")
	if len(r.Elems) != 500 {
		t.Fatalf("ZRANDMEMBER -500 returned %d", len(r.Elems))
	}
	distinct := map[string]bool{}
	for _, e := range r.Elems {
		distinct[string(e.Str)] = true
	}
	if len(distinct) == 500 || len(distinct) < 100 {
		t.Fatalf("ZRANDMEMBER -500: %d distinct", len(distinct))
	}
	if got := show(runKV(db, []string{"ZRANDMEMBER", "z", "-2000000"})); !strings.Contains(got, "too large") {
		t.Fatalf("ZRANDMEMBER -2000000 = %.80s", got)
	}
	if got := len(zRun(t, db, "ZRANDMEMBER", "z", "199").Elems); got != 199 {
		t.Fatalf("ZRANDMEMBER 199 returned %d", got)
	}
}

// TestZSetSetsAsInputs: ZUNIONSTORE and friends read sets (score 1),
// compared with redis-server.
func TestZSetSetsAsInputs(t *testing.T) {
	rc := kvdiff.StartRedis(t)
	db := openMem(t)
	ctx := context.Background()
	do := func(args ...string) {
		t.Helper()
		iargs := make([]any, len(args))
		for i, a := range args {
			iargs[i] = a
		}
		wv, werr := rc.Do(ctx, iargs...).Result()
		name := strings.ToUpper(args[0])
		want := kvdiff.Normalize(name, wv, werr)
		var got any
		if name == "SADD" {
			zSAdd(t, db, args[1], args[2:]...)
			got = want
		} else {
			got = kvdiff.NormalizeReply(name, runKV(db, args))
		}
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("%q\n  redis: %#v\n  kv:    %#v", args, want, got)
		}
	}
	do("SADD", "s1", "a", "b", "c", "x")
	do("SADD", "s2", "c", "d")
	do("ZADD", "z1", "5", "a", "7", "b", "-inf", "y", "inf", "z")
	for _, c := range [][]string{
		{"ZUNIONSTORE", "out", "2", "s1", "z1"}, {"ZRANGE", "out", "0", "-1", "WITHSCORES"},
		{"ZINTERSTORE", "out", "2", "s1", "z1", "WEIGHTS", "10", "1"}, {"ZRANGE", "out", "0", "-1", "WITHSCORES"},
		{"ZDIFFSTORE", "out", "2", "s1", "z1"}, {"ZRANGE", "out", "0", "-1", "WITHSCORES"},
		{"ZDIFFSTORE", "out", "2", "z1", "s1"}, {"ZRANGE", "out", "0", "-1", "WITHSCORES"},
		{"ZUNIONSTORE", "out", "1", "s1"}, {"ZRANGE", "out", "0", "-1", "WITHSCORES"},
		{"ZUNION", "3", "s1", "s2", "z1", "WITHSCORES", "WEIGHTS", "1", "2", "3"},
		{"ZUNION", "3", "s1", "s2", "z1", "WEIGHTS", "1", "2", "3", "AGGREGATE", "MIN", "WITHSCORES"},
		{"ZINTER", "2", "s1", "s2", "WITHSCORES"}, {"ZINTER", "3", "z1", "s1", "s2", "WITHSCORES"},
		{"ZINTER", "2", "s1", "z1", "WEIGHTS", "0", "1", "WITHSCORES"},
		{"ZDIFF", "2", "s1", "s2", "WITHSCORES"}, {"ZDIFF", "1", "s1"}, {"ZDIFF", "2", "s1", "s1"},
		{"ZINTERCARD", "2", "s1", "z1"}, {"ZINTERCARD", "2", "s1", "s2", "LIMIT", "1"},
		{"ZUNIONSTORE", "s1", "2", "s1", "s2"}, {"TYPE", "s1"}, {"ZRANGE", "s1", "0", "-1", "WITHSCORES"},
		{"ZRANGESTORE", "out", "s2", "0", "-1"}, {"ZSCORE", "s2", "c"}, {"ZCARD", "s2"}, {"ZRANK", "s2", "c"},
		{"ZADD", "s2", "1", "c"}, {"ZSCAN", "s2", "0"},
	} {
		do(c...)
	}
}

// TestZSetScoresAgainstRedis compares score parsing and formatting with
// redis-server over random numbers in many notations: ZADD, ZSCORE,
// ZINCRBY, ZSCAN's listpack format and score range bounds.
func TestZSetScoresAgainstRedis(t *testing.T) {
	rc := kvdiff.StartRedis(t)
	db := openMem(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(9, 10))
	num := func() string {
		switch rng.IntN(10) {
		case 0:
			return strconv.FormatFloat(math.Float64frombits(rng.Uint64()), 'g', -1, 64)
		case 1:
			return fmt.Sprintf("%d.%d", rng.IntN(2000)-1000, rng.IntN(1000000))
		case 2:
			return fmt.Sprintf("%de%d", rng.IntN(100)-50, rng.IntN(700)-350)
		case 3:
			return fmt.Sprintf("0x%xp%d", rng.Uint32(), rng.IntN(100)-50)
		case 4:
			return strconv.FormatInt(rng.Int64()>>rng.IntN(64), 10)
		case 5:
			return fmt.Sprintf("%.*g", 1+rng.IntN(20), rng.NormFloat64()*math.Pow(10, float64(rng.IntN(40)-20)))
		case 6:
			return []string{"inf", "-inf", "+inf", "Infinity", "-0", "0", "nan", "", " 1", "1e-400", "5e-324", "4611686018427387904", "-4611686018427387905", "1e17", "9007199254740993"}[rng.IntN(15)]
		case 7:
			return fmt.Sprintf(".%de%d", rng.IntN(1000), rng.IntN(40)-20)
		case 8:
			return strconv.FormatFloat(float64(rng.IntN(1<<20))/float64(int(1)<<rng.IntN(20)), 'f', -1, 64)
		default:
			return fmt.Sprintf("%d", rng.IntN(1000)-500)
		}
	}
	cmp := func(args ...string) {
		t.Helper()
		want, got := diffOne(ctx, rc, db, args)
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("%q\n  redis: %#v\n  kv:    %#v", args, want, got)
		}
	}
	for i := 0; i < 1500; i++ {
		if i%50 == 0 {
			cmp("DEL", "z")
		}
		m := "m" + strconv.Itoa(rng.IntN(60))
		switch rng.IntN(6) {
		case 0, 1:
			cmp("ZADD", "z", num(), m)
			cmp("ZSCORE", "z", m)
		case 2:
			cmp("ZINCRBY", "z", num(), m)
		case 3:
			b1, b2 := num(), num()
			if rng.IntN(2) == 0 {
				b1 = "(" + b1
			}
			cmp("ZRANGEBYSCORE", "z", b1, b2, "WITHSCORES")
			cmp("ZCOUNT", "z", b2, b1)
		case 4:
			cmp("ZSCAN", "z", "0")
		default:
			cmp("ZRANGE", "z", "0", "-1", "WITHSCORES")
		}
	}
}

// TestZSetRandomAgainstRedis sends random sorted set commands (every
// command, option and edge value; sets stay under Redis's listpack limit,
// where its order and lex semantics are defined) to redis-server and to the
// state machine.
func TestZSetRandomAgainstRedis(t *testing.T) {
	rc := kvdiff.StartRedis(t)
	db := openMem(t)
	rng := rand.New(rand.NewPCG(31, 32))
	pick := func(s ...string) string { return s[rng.IntN(len(s))] }
	key := func() string { return pick("a", "b", "c", "s") }
	member := func() string { return pick("a", "b", "c", "d", "e", "f", "", "1", "x y", "\xff", "aa", "b\x00") }
	score := func() string {
		return pick("0", "1", "2", "-1", "1.5", "2.5", "-0", "inf", "-inf", "+inf", "1e3", "3", "x", "nan", "0.1", "10", "(1")
	}
	bound := func() string {
		return pick("-inf", "+inf", "0", "1", "(1", "2", "(2", "-1", "1.5", "(0", "x", "3", "10", "(inf", "(-inf", "")
	}
	lex := func() string {
		return pick("-", "+", "[a", "(a", "[c", "(c", "[", "(", "a", "[b", "(e", "[aa", "(b\x00")
	}
	idx := func() string { return pick("0", "1", "2", "-1", "-2", "3", "-100", "100", "5", "x") }
	count := func() string { return pick("0", "1", "2", "3", "-1", "10", "x") }
	keys := func() []string {
		ks := []string{key()}
		for rng.IntN(2) == 0 {
			ks = append(ks, key())
		}
		return append([]string{strconv.Itoa(len(ks))}, ks...)
	}
	gens := []func() []string{
		func() []string {
			args := []string{"ZADD", key()}
			for i := 1 + rng.IntN(4); i > 0; i-- {
				args = append(args, score(), member())
			}
			return args
		},
		func() []string {
			args := []string{"ZADD", key()}
			for i := rng.IntN(3); i >= 0; i-- {
				args = append(args, pick("NX", "XX", "GT", "LT", "CH", "INCR"))
			}
			return append(args, score(), member())
		},
		func() []string { return []string{"ZINCRBY", key(), score(), member()} },
		func() []string { return []string{"ZREM", key(), member(), member()} },
		func() []string { return []string{"ZSCORE", key(), member()} },
		func() []string { return []string{"ZMSCORE", key(), member(), member()} },
		func() []string { return []string{"ZCARD", key()} },
		func() []string { return []string{"ZCOUNT", key(), bound(), bound()} },
		func() []string { return []string{"ZLEXCOUNT", key(), lex(), lex()} },
		func() []string { return []string{pick("ZRANK", "ZREVRANK"), key(), member()} },
		func() []string {
			args := []string{pick("ZRANGE", "ZREVRANGE"), key(), idx(), idx()}
			if rng.IntN(2) == 0 {
				args = append(args, "WITHSCORES")
			}
			if rng.IntN(3) == 0 {
				args = append(args, "REV")
			}
			return args
		},
		func() []string {
			args := []string{"ZRANGE", key(), bound(), bound(), "BYSCORE"}
			if rng.IntN(2) == 0 {
				args = append(args, "REV")
			}
			if rng.IntN(2) == 0 {
				args = append(args, "LIMIT", pick("0", "1", "-1", "3"), pick("1", "2", "-1", "0"))
			}
			if rng.IntN(2) == 0 {
				args = append(args, "WITHSCORES")
			}
			return args
		},
		func() []string {
			args := []string{"ZRANGE", key(), lex(), lex(), "BYLEX"}
			if rng.IntN(2) == 0 {
				args = append(args, "REV")
			}
			if rng.IntN(2) == 0 {
				args = append(args, "LIMIT", pick("0", "1", "-1", "3"), pick("1", "2", "-1", "0"))
			}
			return args
		},
		func() []string {
			args := []string{pick("ZRANGEBYSCORE", "ZREVRANGEBYSCORE"), key(), bound(), bound()}
			if rng.IntN(2) == 0 {
				args = append(args, "WITHSCORES")
			}
			if rng.IntN(2) == 0 {
				args = append(args, "LIMIT", pick("0", "1", "-1"), pick("1", "2", "-1"))
			}
			return args
		},
		func() []string {
			args := []string{pick("ZRANGEBYLEX", "ZREVRANGEBYLEX"), key(), lex(), lex()}
			if rng.IntN(2) == 0 {
				args = append(args, "LIMIT", pick("0", "1", "-1"), pick("1", "2", "-1"))
			}
			return args
		},
		func() []string {
			switch rng.IntN(3) {
			case 0:
				return []string{"ZRANGESTORE", key(), key(), idx(), idx()}
			case 1:
				return []string{"ZRANGESTORE", key(), key(), bound(), bound(), "BYSCORE", "LIMIT", "1", "2"}
			}
			return []string{"ZRANGESTORE", key(), key(), lex(), lex(), "BYLEX", "REV"}
		},
		func() []string { return []string{pick("ZPOPMIN", "ZPOPMAX"), key()} },
		func() []string { return []string{pick("ZPOPMIN", "ZPOPMAX"), key(), count()} },
		func() []string { return []string{"ZREMRANGEBYRANK", key(), idx(), idx()} },
		func() []string { return []string{"ZREMRANGEBYSCORE", key(), bound(), bound()} },
		func() []string { return []string{"ZREMRANGEBYLEX", key(), lex(), lex()} },
		func() []string {
			ks := keys()
			args := append([]string{pick("ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"), key()}, ks...)
			if rng.IntN(3) == 0 {
				args = append(args, "WEIGHTS")
				for range len(ks) - 1 {
					args = append(args, pick("1", "2", "-1", "0.5", "0", "inf", "x"))
				}
			}
			if rng.IntN(3) == 0 {
				args = append(args, "AGGREGATE", pick("SUM", "MIN", "MAX", "AVG"))
			}
			return args
		},
		func() []string {
			ks := keys()
			args := append([]string{pick("ZUNION", "ZINTER", "ZDIFF")}, ks...)
			if rng.IntN(3) == 0 {
				args = append(args, "WEIGHTS")
				for range len(ks) - 1 {
					args = append(args, pick("1", "2", "-1", "0.5", "0", "-inf"))
				}
			}
			if rng.IntN(3) == 0 {
				args = append(args, "AGGREGATE", pick("SUM", "MIN", "MAX"))
			}
			if rng.IntN(2) == 0 {
				args = append(args, "WITHSCORES")
			}
			return args
		},
		func() []string {
			args := append([]string{"ZINTERCARD"}, keys()...)
			if rng.IntN(2) == 0 {
				args = append(args, "LIMIT", pick("0", "1", "2", "-1"))
			}
			return args
		},
		func() []string {
			args := []string{"ZSCAN", key(), "0"}
			if rng.IntN(2) == 0 {
				args = append(args, "MATCH", pick("*", "a*", "?", "[a-c]"))
			}
			return append(args, "COUNT", pick("1", "10", "1000"))
		},
		func() []string { return []string{"ZRANDMEMBER", key(), pick("100", "0", "-0"), "WITHSCORES"} },
		func() []string { return []string{"SET", "s", "v"} },
		func() []string { return []string{"DEL", key()} },
		func() []string { return []string{"EXPIRE", key(), "1000"} },
		func() []string { return []string{"TTL", key()} },
		func() []string { return []string{"TYPE", key()} },
	}
	diffRandom(t, rc, db, 6000, 1500, func() []string { return gens[rng.IntN(len(gens))]() })
}

// Scores are Doubles, score lists are Pairs (nested in RESP3), a single
// ZPOPMIN without a count is a flat pair; nil and empty replies have
// Redis's kinds.
func TestZSetReplyKinds(t *testing.T) {
	db := openMem(t)
	zRun(t, db, "ZADD", "z", "1.5", "a")
	for _, c := range []struct {
		args []string
		kind reply.Kind
		n    int
	}{
		{[]string{"ZSCORE", "z", "a"}, reply.KindDouble, 0},
		{[]string{"ZRANGE", "z", "0", "-1", "WITHSCORES"}, reply.KindPairs, 2},
		{[]string{"ZRANGE", "z", "0", "-1"}, reply.KindArray, 1},
		{[]string{"ZRANDMEMBER", "z", "1", "WITHSCORES"}, reply.KindPairs, 2},
		{[]string{"ZMSCORE", "z", "a"}, reply.KindArray, 1},
		{[]string{"ZSCORE", "z", "nope"}, reply.KindNil, 0},
		{[]string{"ZSCORE", "none", "a"}, reply.KindNil, 0},
		{[]string{"ZINCRBY", "z", "1", "a"}, reply.KindDouble, 0},
		{[]string{"ZADD", "z", "NX", "INCR", "1", "a"}, reply.KindNil, 0},
		{[]string{"ZMSCORE", "none", "a", "b"}, reply.KindArray, 2},
		{[]string{"ZRANK", "none", "a"}, reply.KindNil, 0},
		{[]string{"ZRANK", "z", "nope"}, reply.KindNil, 0},
		{[]string{"ZPOPMIN", "none"}, reply.KindArray, 0},
		{[]string{"ZPOPMIN", "none", "3"}, reply.KindArray, 0},
		{[]string{"ZRANGE", "none", "0", "-1"}, reply.KindArray, 0},
		{[]string{"ZRANDMEMBER", "none"}, reply.KindNil, 0},
		{[]string{"ZRANDMEMBER", "none", "3"}, reply.KindArray, 0},
		{[]string{"ZSCAN", "none", "0"}, reply.KindArray, 2},
		{[]string{"ZADD", "z", "1", "b", "2", "c"}, reply.KindInt, 0},
		{[]string{"ZPOPMAX", "z", "1"}, reply.KindPairs, 2},
		{[]string{"ZPOPMAX", "z"}, reply.KindArray, 2},
	} {
		r := runKV(db, c.args)
		if r.Kind != c.kind || len(r.Elems) != c.n {
			t.Errorf("%q = kind %d, %d elements: %s", c.args, r.Kind, len(r.Elems), show(r))
		}
	}
}

// Members sort by raw bytes (memcmp, shorter first), as Redis's sdscmp.
func TestZSetSortEnts(t *testing.T) {
	ents := []zent{{[]byte("b"), 1}, {[]byte("a\x00"), 1}, {[]byte("a"), 1}, {[]byte("\xff"), 1}, {[]byte(""), 1}, {[]byte("z"), -1}}
	zSortEnts(ents)
	var got []string
	for _, e := range ents {
		got = append(got, strconv.Quote(string(e.member)))
	}
	if want := []string{`"z"`, `""`, `"a"`, `"a\x00"`, `"b"`, `"\xff"`}; !slices.Equal(got, want) {
		t.Fatalf("order %v", got)
	}
	if !sort.SliceIsSorted(ents, func(i, j int) bool { return ents[i].score < ents[j].score }) {
		t.Fatal("not sorted by score")
	}
}

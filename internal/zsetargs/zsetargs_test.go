package zsetargs

import (
	"math"
	"strings"
	"testing"

	"github.com/kvorum/kvorum/internal/argtest"
)

var args = argtest.Fields

func TestParseZAdd(t *testing.T) {
	for _, c := range []struct {
		in    string
		flags int
		first int
		err   string
	}{
		{"zadd k 1 a 2 b", 0, 2, ""},
		{"zadd k nx ch 1 a", NX | CH, 4, ""},
		{"zadd k gt lt 1 a", 0, 0, "ERR GT, LT, and/or NX"},
		{"zadd k nx xx 1 a", 0, 0, "ERR XX and NX"},
		{"zadd k incr 1 a 2 b", 0, 0, "ERR INCR option supports"},
		{"zadd k 1 a 2", 0, 0, "ERR syntax error"},
		{"zadd k x a", 0, 0, "ERR value is not a valid float"},
		{"zincrby k 2.5 a", Incr, 2, ""},
	} {
		a, r, ok := ParseZAdd(args(c.in))
		if c.err != "" {
			if ok || !strings.HasPrefix(string(r.Str), c.err) {
				t.Errorf("%s: got %v %q, want %q", c.in, ok, r.Str, c.err)
			}
			continue
		}
		if !ok || a.Flags != c.flags || a.First != c.first || len(a.Scores) != (len(args(c.in))-c.first)/2 {
			t.Errorf("%s: got %+v %v %q", c.in, a, ok, r.Str)
		}
	}
}

func TestParsePop(t *testing.T) {
	if n, _, ok := ParsePop(args("zpopmin k")); !ok || n != 1 {
		t.Fatalf("default count: %d %v", n, ok)
	}
	if n, _, ok := ParsePop(args("zpopmin k 5")); !ok || n != 5 {
		t.Fatalf("count: %d %v", n, ok)
	}
	if _, r, ok := ParsePop(args("zpopmin k -1")); ok || string(r.Str) != "ERR value is out of range, must be positive" {
		t.Fatalf("negative: %q", r.Str)
	}
	if _, r, ok := ParsePop(args("zpopmin k 1 2")); ok || string(r.Str) != "ERR syntax error" {
		t.Fatalf("extra: %q", r.Str)
	}
}

func TestParseRange(t *testing.T) {
	q, _, ok := ParseRange(args("zrange k 0 -1 withscores"))
	if !ok || q.Kind != ByRank || q.Start != 0 || q.Stop != -1 || !q.WithScores || q.Limit != -1 {
		t.Fatalf("rank: %+v %v", q, ok)
	}
	q, _, ok = ParseRange(args("zrevrangebyscore k (5 -inf limit 1 2"))
	if !ok || q.Kind != ByScore || !q.Rev || q.Offset != 1 || q.Limit != 2 || !math.IsInf(q.Span.Score.Min, -1) || !q.Span.Score.MaxEx {
		t.Fatalf("revbyscore: %+v %v", q, ok)
	}
	q, _, ok = ParseRange(args("zrangestore d k [a + bylex rev"))
	if !ok || q.Src != 2 || !q.Store || q.Kind != ByLex || !q.Rev || !q.Span.ByLex {
		t.Fatalf("store bylex: %+v %v", q, ok)
	}
	for in, want := range map[string]string{
		"zrange k 0 1 limit 0 1":         "ERR syntax error, LIMIT is only supported",
		"zrange k a b bylex withscores":  "ERR syntax error, WITHSCORES not supported",
		"zrangestore d k 0 1 withscores": "ERR syntax error",
		"zrange k x 1":                   "ERR value is not an integer",
		"zrangebyscore k x 1":            "ERR min or max is not a float",
		"zrangebylex k x 1":              "ERR min or max not valid string range item",
	} {
		if _, r, ok := ParseRange(args(in)); ok || !strings.HasPrefix(string(r.Str), want) {
			t.Errorf("%s: got %v %q, want %q", in, ok, r.Str, want)
		}
	}
}

func TestParseSetOp(t *testing.T) {
	o, _, ok := ParseSetOp(args("zunionstore d 2 a b weights 2 3 aggregate max"))
	if !ok || o.Op != Union || !o.Store || o.NumIdx != 2 || o.NumKeys != 2 {
		t.Fatalf("%+v %v", o, ok)
	}
	p, _, ok := o.ParseOptions(args("zunionstore d 2 a b weights 2 3 aggregate max"))
	if !ok || len(p.Weights) != 2 || p.Weights[1] != 3 || p.Agg != Max {
		t.Fatalf("options %+v %v", p, ok)
	}
	if _, r, ok := o.ParseOptions(args("zunionstore d 2 a b withscores")); ok || string(r.Str) != "ERR syntax error" {
		t.Fatalf("store withscores: %q", r.Str)
	}
	o, _, _ = ParseSetOp(args("zintercard 1 a limit 3"))
	if p, _, ok := o.ParseOptions(args("zintercard 1 a limit 3")); !ok || !o.CardOnly || p.Limit != 3 {
		t.Fatalf("intercard %+v %+v", o, p)
	}
	if _, r, ok := o.ParseOptions(args("zintercard 1 a limit -1")); ok || string(r.Str) != "ERR LIMIT can't be negative" {
		t.Fatalf("limit: %q", r.Str)
	}
	if _, r, ok := ParseSetOp(args("zunion 0 a")); ok || string(r.Str) != "ERR at least 1 input key is needed for 'zunion' command" {
		t.Fatalf("numkeys 0: %q", r.Str)
	}
	if _, r, ok := ParseSetOp(args("zunion 3 a")); ok || string(r.Str) != "ERR syntax error" {
		t.Fatalf("too few keys: %q", r.Str)
	}
}

func TestAggregate(t *testing.T) {
	inf := math.Inf(1)
	for _, c := range []struct {
		a, b float64
		agg  int
		want float64
	}{{1, 2, Sum, 3}, {1, 2, Min, 1}, {1, 2, Max, 2}, {inf, -inf, Sum, 0}} {
		if got := Aggregate(c.a, c.b, c.agg); got != c.want {
			t.Errorf("Aggregate(%v, %v, %d) = %v, want %v", c.a, c.b, c.agg, got, c.want)
		}
	}
}

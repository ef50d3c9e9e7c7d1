package listargs

import (
	"strings"
	"testing"

	"github.com/kvorum/kvorum/internal/argtest"
)

var args = argtest.Fields

var errText = argtest.ErrText

func TestParsePopAndInsert(t *testing.T) {
	if n, _, ok := ParsePop(args("lpop k")); !ok || n != -1 {
		t.Fatalf("no count: %d %v", n, ok)
	}
	if _, r, ok := ParsePop(args("RPOP k 1 2")); errText(ok, r.Str) != "ERR wrong number of arguments for 'rpop' command" {
		t.Fatalf("arity: %q", r.Str)
	}
	if _, r, ok := ParsePop(args("lpop k -1")); errText(ok, r.Str) != "ERR value is out of range, must be positive" {
		t.Fatalf("negative: %q", r.Str)
	}
	if after, _, ok := ParseInsert(args("linsert k AFTER p v")); !ok || !after {
		t.Fatal("AFTER")
	}
	if _, r, ok := ParseInsert(args("linsert k middle p v")); errText(ok, r.Str) != "ERR syntax error" {
		t.Fatalf("bad where: %q", r.Str)
	}
}

func TestParsePos(t *testing.T) {
	o, _, ok := ParsePos(args("lpos k v rank -2 count 0 maxlen 10"))
	if !ok || o != (Pos{Rank: -2, Count: 0, MaxLen: 10}) {
		t.Fatalf("%+v %v", o, ok)
	}
	if o, _, _ := ParsePos(args("lpos k v")); o != (Pos{Rank: 1, Count: -1}) {
		t.Fatalf("defaults %+v", o)
	}
	for in, want := range map[string]string{
		"lpos k v rank 0":    "ERR RANK can't be zero",
		"lpos k v rank x":    "ERR value is not an integer",
		"lpos k v count -1":  "ERR COUNT can't be negative",
		"lpos k v maxlen -1": "ERR MAXLEN can't be negative",
		"lpos k v rank":      "ERR syntax error",
	} {
		if _, r, ok := ParsePos(args(in)); !strings.HasPrefix(errText(ok, r.Str), want) {
			t.Errorf("%s: %q, want %q", in, r.Str, want)
		}
	}
}

func TestParseMove(t *testing.T) {
	if a, _, ok := ParseMove(args("rpoplpush s d")); !ok || a.From || !a.To {
		t.Fatalf("rpoplpush %+v", a)
	}
	if a, _, ok := ParseMove(args("blmove s d left right 1.5")); !ok || !a.From || a.To || a.Timeout != 1500 {
		t.Fatalf("blmove %+v", a)
	}
	if _, r, ok := ParseMove(args("lmove s d up right")); errText(ok, r.Str) != "ERR syntax error" {
		t.Fatalf("bad end: %q", r.Str)
	}
	if _, r, ok := ParseMove(args("blmove s d left right -1")); errText(ok, r.Str) != "ERR timeout is negative" {
		t.Fatalf("negative timeout: %q", r.Str)
	}
	if _, r, ok := ParseBlockingPop(args("blpop a b x")); errText(ok, r.Str) != "ERR timeout is not a float or out of range" {
		t.Fatalf("bad timeout: %q", r.Str)
	}
}

func TestParseMPop(t *testing.T) {
	a, _, ok := ParseLMPop(args("lmpop 2 a b right count 3"))
	if !ok || len(a.Keys) != 2 || a.Head || a.Count != 3 {
		t.Fatalf("lmpop %+v", a)
	}
	a, _, ok = ParseZMPop(args("bzmpop 0.5 1 z min"))
	if !ok || len(a.Keys) != 1 || !a.Head || a.Count != 1 || a.Timeout != 500 {
		t.Fatalf("bzmpop %+v", a)
	}
	for in, want := range map[string]string{
		"lmpop 0 a left":         "ERR numkeys should be greater than 0",
		"lmpop 2 a left":         "ERR syntax error",
		"lmpop 1 a min":          "ERR syntax error",
		"lmpop 1 a left count 0": "ERR count should be greater than 0",
		"lmpop 1 a left count":   "ERR syntax error",
		"blmpop -1 1 a left":     "ERR timeout is negative",
	} {
		if _, r, ok := ParseLMPop(args(in)); errText(ok, r.Str) != want {
			t.Errorf("%s: %q, want %q", in, r.Str, want)
		}
	}
}

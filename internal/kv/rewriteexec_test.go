package kv

import (
	"slices"
	"strings"
	"testing"
)

// TestRewriteExec: the queued commands f changes are replaced, the
// watched keys and stamps and the other commands stay; nothing changed
// (or a malformed KVORUM.EXEC) returns args itself.
func TestRewriteExec(t *testing.T) {
	b := func(ss ...string) [][]byte {
		out := make([][]byte, len(ss))
		for i, s := range ss {
			out[i] = []byte(s)
		}
		return out
	}
	args := EncodeExec(b("w1"), []uint64{7}, [][][]byte{b("SET", "k", "v"), b("EVALSHA", "abc", "1", "k"), b("GET", "k")})
	out, ok := RewriteExec(args, func(c [][]byte) ([][]byte, bool) {
		if strings.EqualFold(string(c[0]), "evalsha") {
			return b("EVAL", "return 1", "1", "k", "extra"), true
		}
		return c, false
	})
	want := EncodeExec(b("w1"), []uint64{7}, [][][]byte{b("SET", "k", "v"), b("EVAL", "return 1", "1", "k", "extra"), b("GET", "k")})
	if !ok || !slices.EqualFunc(out, want, slices.Equal) {
		t.Fatalf("RewriteExec = %q, %v\nwant %q", out, ok, want)
	}
	if q := execQueued(out); len(q) != 3 || string(q[1][0]) != "EVAL" || len(q[1]) != 5 {
		t.Fatalf("rewritten queue %q", q)
	}
	same, ok := RewriteExec(args, func(c [][]byte) ([][]byte, bool) { return c, false })
	if ok || &same[0] != &args[0] {
		t.Fatal("nothing changed, but RewriteExec rebuilt the command")
	}
	bad := b("KVORUM.EXEC", "1")
	if out, ok := RewriteExec(bad, func(c [][]byte) ([][]byte, bool) { return nil, true }); ok || len(out) != 2 {
		t.Fatalf("malformed: %q %v", out, ok)
	}
}

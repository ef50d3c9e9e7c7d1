package server

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/kvorum/kvorum/internal/kvdiff"
)

// TestDifferentialAgainstRedisThroughCluster is the end-to-end differential
// test: the commands of internal/kv/testdata/diff/*.txt and of
// testdata/diff/*.txt (connection-level sequences: MULTI/EXEC/WATCH, which
// the state machine alone cannot run) are sent to a 3-node kvorum cluster
// through a follower (so forwarding is exercised too), over one connection
// per protocol version, and each reply must be the one recorded from
// redis-server in the file (format: internal/kv/testdata/diff/README.md).
// It needs no redis-server.
//
// With -rewrite, the replies in this package's own files are recorded again
// from redis-server (internal/kv's files are internal/kv's
// TestDifferentialKV's to rewrite). Without -rewrite but with redis-server
// installed, the test also checks that redis-server still gives them.
func TestDifferentialAgainstRedisThroughCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("a long comparison with redis-server, run by make unit; skipped under make race's -short (CI time)")
	}
	files, _ := filepath.Glob("../kv/testdata/diff/*.txt")
	own, _ := filepath.Glob("testdata/diff/*.txt")
	if len(files) == 0 || len(own) == 0 {
		t.Fatal("no differential test data in internal/kv/testdata/diff or internal/server/testdata/diff")
	}
	files = append(files, own...)
	switch {
	case kvdiff.HaveRedis():
		t.Run("redis-server", func(t *testing.T) {
			ref := kvdiff.StartReference(t)
			for _, file := range own {
				t.Run(filepath.Base(file), func(t *testing.T) { ref.CheckFile(t, file) })
			}
		})
	case kvdiff.Rewriting():
		t.Fatal("-rewrite records redis-server's replies, and redis-server is not installed: apt-get install redis-server")
	default:
		t.Log("redis-server not installed: comparing with the recorded replies only")
	}
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) { differentialThroughCluster(t, files, proto) })
	}
}

// differentialThroughCluster runs the files' sequences over one connection
// speaking protocol version proto and compares each reply with the
// recorded one for that version, exactly (types included) but for the
// order of replies Redis leaves unspecified (kvdiff.Canonical). Each file
// starts without keys, scripts or functions, as when it was recorded.
func differentialThroughCluster(t *testing.T, files []string, proto int) {
	c := newTestCluster(t, 3)
	lead := c.waitLeader()
	follower := uint64(1)
	if follower == lead {
		follower = 2
	}
	kc, err := kvdiff.Dial(c.node(follower).ClientAddr(), proto)
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	do := func(args ...string) kvdiff.Value {
		v, err := kc.Do(args...)
		if err != nil {
			t.Fatalf("%s: %v", kvdiff.String(args), err)
		}
		return v
	}
	total := 0
	for _, file := range files {
		seqs, err := kvdiff.Load(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, reset := range [][]string{{"SCRIPT", "FLUSH"}, {"FUNCTION", "FLUSH"}} {
			if v := do(reset...); v.Type != '+' {
				t.Fatalf("%s: %s", kvdiff.String(reset), kvdiff.Render(v))
			}
		}
		for _, seq := range seqs {
			do("DISCARD")
			do("UNWATCH")
			if v := do("FLUSHALL"); v.Type != '+' {
				t.Fatalf("FLUSHALL: %s", kvdiff.Render(v))
			}
			for _, cmd := range seq {
				v := do(cmd.Args...)
				got := kvdiff.Render(kvdiff.Canonical(cmd.Args[0], v)) + "\n"
				want := kvdiff.ExpectedFor(cmd.Expected, proto)
				total++
				if got != want {
					t.Errorf("%s:%d: %s\nrecorded (redis-server):\n%skvorum:\n%s", file, cmd.Line, cmd.Text, want, got)
				}
			}
		}
	}
	t.Logf("%d commands compared", total)
}

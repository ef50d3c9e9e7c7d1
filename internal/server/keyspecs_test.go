package server

import (
	"testing"

	"github.com/kvorum/kvorum/internal/kvdiff"
)

// TestCommandInfoKeySpecsLikeRedis: COMMAND INFO's key specifications
// (its ninth element: flags, begin_search, find_keys, notes) of every
// command and subcommand that kvorum and redis-server both have are the
// same, in RESP3 (cluster clients and proxies find keys with them).
func TestCommandInfoKeySpecsLikeRedis(t *testing.T) {
	ref, err := kvdiff.Dial(kvdiff.StartServer(t), 3)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	c := newTestCluster(t, 1)
	c.waitLeader()
	kc, err := kvdiff.Dial(c.node(1).ClientAddr(), 3)
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	specs := func(conn *kvdiff.Conn) map[string]string {
		v, err := conn.Do("COMMAND")
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		var walk func(e kvdiff.Value)
		walk = func(e kvdiff.Value) {
			if len(e.Elems) < 10 {
				t.Fatalf("COMMAND entry %s", kvdiff.Render(e))
			}
			out[string(e.Elems[0].Str)] = kvdiff.Render(kvdiff.Canonical("", e.Elems[8]))
			for _, sub := range e.Elems[9].Elems {
				walk(sub)
			}
		}
		for _, e := range v.Elems {
			walk(e)
		}
		return out
	}
	want, got := specs(ref), specs(kc)
	n := 0
	for name, g := range got {
		w, ok := want[name]
		if !ok {
			continue // kvorum's own command
		}
		n++
		if g != w {
			t.Errorf("%s: key specs\nredis-server:\n%s\nkvorum:\n%s", name, w, g)
		}
	}
	if n < 200 {
		t.Fatalf("only %d commands compared", n)
	}
	t.Logf("%d commands compared", n)
}

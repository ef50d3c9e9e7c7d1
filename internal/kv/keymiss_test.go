package kv

import (
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// TestReadKeysWired: the write commands that read keys have their
// cmdspec.ReadKeys finder on their definition, decided once at
// registration; no other command has one.
func TestReadKeysWired(t *testing.T) {
	want := map[string]bool{}
	for _, n := range []string{"getdel", "getex", "getset", "copy", "set", "sunionstore", "sinterstore", "sdiffstore",
		"bitop", "pfmerge", "zunionstore", "zinterstore", "zdiffstore", "zrangestore", "geosearchstore",
		"sort", "georadius", "georadiusbymember"} {
		want[n] = true
	}
	for name, d := range table {
		if got := d.readKeys != nil; got != want[name] {
			t.Errorf("%s: readKeys set %v, want %v", name, got, want[name])
		}
		if d.readKeys != nil && !d.spec.Write {
			t.Errorf("%s: readKeys on a read command", name)
		}
	}
}

// TestReadLookupsOnlyWhereNeeded: the read lookups of a write (SET ...
// GET, GETDEL) are counted in Effects.Looked on a node that reports them
// (Env.CountLookups) and emit keymiss while the m class is on; on a node
// that does neither (a follower, class m off) they are not made.
func TestReadLookupsOnlyWhereNeeded(t *testing.T) {
	db := openMem(t)
	for _, c := range []struct {
		count  bool
		events string // notify-keyspace-events
		want   string
	}{
		{false, "", "looked=0/0 published=0"},
		{true, "", "looked=1/1 published=0"},
		{false, "Em", "looked=1/1 published=1"},
		{true, "Em", "looked=1/1 published=1"},
	} {
		s := &Settings{}
		var fx Effects
		apply := func(args ...string) Reply {
			t.Helper()
			testIndex++
			b := db.NewIndexedBatch()
			defer b.Close()
			r := Apply(b, toArgs(args...), Env{Now: time.Now().UnixMilli(), Index: testIndex, Settings: s, Effects: &fx, CountLookups: c.count})
			if err := b.Commit(pebble.NoSync); err != nil {
				t.Fatal(err)
			}
			return r
		}
		apply("KVORUM.CONFIG", "SET", "notify-keyspace-events", c.events)
		apply("SET", "k", "v")
		fx.Reset()
		apply("SET", "k", "v2", "GET") // a hit
		apply("GETDEL", "nokey")       // a miss
		got := fmt.Sprintf("looked=%d/%d published=%d", fx.Looked.Hits, fx.Looked.Misses, len(fx.Published))
		if got != c.want {
			t.Errorf("count=%v events=%q: %s, want %s", c.count, c.events, got, c.want)
		}
	}
}

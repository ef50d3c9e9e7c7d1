package kv

import (
	"strconv"
	"strings"
	"testing"

	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/script"
	"github.com/kvorum/kvorum/internal/storage"
)

// TestSystemStateOnlyInRangeOne: a command of a range other than range 1
// never reads or writes what range 1 owns (the script cache, leases,
// locks), since its replicas would see it at different points of range
// 1's log. EVALSHA answers NOSCRIPT there (the node resolves it to EVAL
// first), EVAL does not cache its script, SET ... LEASE and LOCK FENCED
// are refused; in range 1 all of them work.
func TestSystemStateOnlyInRangeOne(t *testing.T) {
	db := rangeFixture(t)
	body := "return redis.call('SET', KEYS[1], ARGV[1])"
	r := run(t, db, 1000, "SCRIPT", "LOAD", body)
	if r.Kind != reply.KindBulk {
		t.Fatalf("SCRIPT LOAD: %v", r)
	}
	sha := string(r.Str)
	lease := run(t, db, 1000, "LEASE", "GRANT", "60000")
	if lease.Kind != reply.KindInt {
		t.Fatalf("LEASE GRANT: %v", lease.Str)
	}
	r2 := lowHalf() // range 2
	r1 := &storage.Descriptor{RangeID: 1, StartSlot: 0, EndSlot: 8192, Generation: 7}
	for _, c := range []struct {
		desc *storage.Descriptor
		args []string
		want string // reply prefix; "" = not an error
	}{
		{r2, []string{"EVALSHA", sha, "1", "{bar}e", "v"}, "NOSCRIPT"},
		{r1, []string{"EVALSHA", sha, "1", "{bar}e", "v"}, ""},
		{r2, []string{"SET", "{bar}l", "v", "LEASE", strconv.FormatInt(lease.Int, 10)}, "CROSSRANGE"},
		{r1, []string{"SET", "{bar}l", "v", "LEASE", strconv.FormatInt(lease.Int, 10)}, ""},
		{r2, []string{"LOCK", "FENCED", "lk", "1", "SET", "{bar}f", "v"}, "CROSSRANGE"},
	} {
		got, b := applyIn(t, db, c.desc, c.args...)
		switch {
		case c.want == "" && got.Kind == reply.KindError:
			t.Errorf("range %d %q: %s", c.desc.RangeID, c.args, got.Str)
		case c.want != "" && (got.Kind != reply.KindError || !strings.HasPrefix(string(got.Str), c.want)):
			t.Errorf("range %d %q: %v, want %s...", c.desc.RangeID, c.args, got, c.want)
		case c.want != "" && !b.Empty():
			t.Errorf("range %d %q: refused but wrote %d keys", c.desc.RangeID, c.args, b.Count())
		}
	}
	// EVAL of a new script in range 2 runs it but caches nothing: range 1
	// keeps the cache.
	newBody := "return redis.call('SET', KEYS[1], 'x')"
	got, b := applyIn(t, db, r2, "EVAL", newBody, "1", "{bar}n")
	if got.Kind == reply.KindError {
		t.Fatalf("EVAL in range 2: %s", got.Str)
	}
	if _, ok, err := ScriptBody(b, []byte(script.SHA1Hex([]byte(newBody)))); err != nil || ok {
		t.Fatalf("EVAL in range 2 cached its script (%v, %v)", ok, err)
	}
	got, b = applyIn(t, db, r1, "EVAL", newBody, "1", "{bar}n")
	if _, ok, err := ScriptBody(b, []byte(script.SHA1Hex([]byte(newBody)))); got.Kind == reply.KindError || err != nil || !ok {
		t.Fatalf("EVAL in range 1: %v; cached %v, %v", got, ok, err)
	}
}

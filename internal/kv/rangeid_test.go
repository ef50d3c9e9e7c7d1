package kv

import (
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/slot"
	"github.com/kvorum/kvorum/internal/storage"
)

// TestNextRangeID: KVORUM.NEXTRANGEID replies ids above its floor and
// above every id it replied before, and runs on range 1 only.
func TestNextRangeID(t *testing.T) {
	db := openMem(t)
	r1 := &storage.Descriptor{RangeID: 1, StartSlot: 0, EndSlot: slot.Count}
	next := func(floor string) Reply {
		t.Helper()
		rep, b := applyIn(t, db, r1, "KVORUM.NEXTRANGEID", floor)
		if err := b.Commit(pebble.Sync); err != nil {
			t.Fatal(err)
		}
		return rep
	}
	for _, c := range []struct {
		floor string
		want  int64
	}{{"1", 2}, {"1", 3}, {"10", 11}, {"4", 12}} {
		if got := next(c.floor); got.Kind != reply.KindInt || got.Int != c.want {
			t.Fatalf("floor %s: %+v, want %d", c.floor, got, c.want)
		}
	}
	if got := next("x"); got.Kind != reply.KindError {
		t.Fatalf("bad floor: %+v", got)
	}
	r2 := &storage.Descriptor{RangeID: 2, StartSlot: 8192, EndSlot: slot.Count}
	if got, _ := applyIn(t, db, r2, "KVORUM.NEXTRANGEID", "1"); got.Kind != reply.KindError {
		t.Fatalf("on range 2: %+v", got)
	}
}

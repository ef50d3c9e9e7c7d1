package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvorum/kvorum/internal/admin"
)

// TestSplitRefusedDiskLow: a split is a write (it copies range-local
// state and creates a range): a node whose disk is nearly full refuses
// it up front with the disk gate's error (HTTP 507), before allocating a
// range id; a leader whose disk is nearly full refuses the splits other
// nodes send it. Nothing changes; once space is back, the split works.
func TestSplitRefusedDiskLow(t *testing.T) {
	mems := map[uint64]*vfs.MemFS{}
	c := newClusterWith(t, 3, fakeDisks(mems))
	ctx := testCtx(t, time.Minute)
	lead := c.waitLeader()
	f := followersOf(lead, 3)[0]
	setUsage := func(id uint64, avail uint64) { setDiskAvail(t, c, mems, id, avail) }
	unchanged := func() {
		t.Helper()
		for id := uint64(1); id <= 3; id++ {
			if n := c.node(id).store.ReplicaCount(); n != 1 {
				t.Fatalf("node %d holds %d ranges after a refused split", id, n)
			}
			if d := c.node(id).store.Replica(firstRange).Descriptor(); !d.IsFull() {
				t.Fatalf("node %d: range 1 is %+v after a refused split", id, d)
			}
		}
	}
	refused := func(by, refuser uint64) {
		t.Helper()
		_, _, err := c.node(by).SplitRange(ctx, 1, 8192)
		want := fmt.Sprintf("ERR disk full on node %d: 120 MiB free, below --min-free-disk 256 MiB", refuser)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("split through node %d while node %d's disk is low: %v\nwant %s", by, refuser, err, want)
		}
		if code := admin.StatusCode(err); code != http.StatusInsufficientStorage {
			t.Fatalf("split refused for a full disk: HTTP %d, want 507", code)
		}
		unchanged()
	}

	// The node that runs the split is low: refused before anything is
	// proposed, the range id allocation included.
	setUsage(f, 120<<20)
	before := c.node(lead).store.Replica(firstRange).Status().Applied
	refused(f, f)
	if after := c.node(lead).store.Replica(firstRange).Status().Applied; after != before {
		t.Fatalf("a split refused up front proposed something: range 1 applied %d -> %d", before, after)
	}
	setUsage(f, 5<<30)

	// The leader is low: it refuses the split (and its id allocation).
	setUsage(lead, 120<<20)
	refused(f, lead)
	refused(lead, lead)
	setUsage(lead, 5<<30)

	// Space is back.
	l, r, err := c.node(f).SplitRange(ctx, 1, 8192)
	if err != nil {
		t.Fatal(err)
	}
	if l.EndSlot != 8192 || r.StartSlot != 8192 {
		t.Fatalf("split after space was freed: %+v %+v", l, r)
	}
	waitRanges(t, c, map[uint64][2]uint32{1: {0, 8192}, uint64(r.RangeID): {8192, 16384}})
}

// TestSplitRefusedRangeLeaderDiskLow: the leader of the range to split
// (not range 1's leader, whose disk is fine: the range id allocation
// works) refuses the split while its disk is nearly full (the store's
// WriteGate in Replica.Split); nothing changes.
func TestSplitRefusedRangeLeaderDiskLow(t *testing.T) {
	mems := map[uint64]*vfs.MemFS{}
	c := newRangeClusterWith(t, 2, fakeDisks(mems))
	ctx := testCtx(t, time.Minute)
	lead1, _ := c.node(1).store.Replica(firstRange).Leader()
	lead2 := lead1%3 + 1
	if _, _, err := c.node(1).TransferRangeLeader(ctx, 2, lead2); err != nil {
		t.Fatal(err)
	}
	setDiskAvail(t, c, mems, lead2, 120<<20)
	_, _, err := c.node(lead1).SplitRange(ctx, 2, 12288)
	want := fmt.Sprintf("ERR disk full on node %d:", lead2)
	if err == nil || !strings.Contains(err.Error(), want) || admin.StatusCode(err) != http.StatusInsufficientStorage {
		t.Fatalf("split of range 2 while its leader's disk is low: %v (HTTP %d), want %q and 507", err, admin.StatusCode(err), want)
	}
	for id := uint64(1); id <= 3; id++ {
		if n := c.node(id).store.ReplicaCount(); n != 2 {
			t.Fatalf("node %d holds %d ranges after a refused split", id, n)
		}
	}
	if lead, _ := c.node(lead1).store.Replica(2).Leader(); lead != lead2 {
		t.Fatalf("range 2's leader moved to %d; the test needs %d", lead, lead2)
	}
}

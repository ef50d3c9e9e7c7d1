package server

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/slot"
	"github.com/kvorum/kvorum/internal/storage"
)

// keyInSlots returns the i-th key of prefix whose slot is in [lo, hi).
func keyInSlots(prefix string, lo, hi uint16, i int) string {
	for j := 0; ; j++ {
		k := prefix + strconv.Itoa(j)
		if s := slot.Of([]byte(k)); s >= lo && s < hi {
			if i == 0 {
				return k
			}
			i--
		}
	}
}

const splitFnLib = "#!lua name=slib\n" +
	"redis.register_function('sset', function(keys, args) return redis.call('SET', keys[1], args[1]) end)\n" +
	"redis.register_function{function_name='sget', callback=function(keys) return redis.call('GET', keys[1]) end, flags={'no-writes'}}"

// TestSplitCarriesFunctions: a range split off range 1 has the function
// libraries from the split entry itself (range 1 keeps no mirror of its
// own, so the copy of the range-local keys did not carry them): FCALL and
// FCALL_RO of a key of the new range work from every node right after the
// split, without waiting for the config queue (slowed down here so that
// it cannot hide a window).
func TestSplitCarriesFunctions(t *testing.T) {
	old := configCopyTick
	configCopyTick = time.Hour
	t.Cleanup(func() { configCopyTick = old })
	c := newClusterWith(t, 3, func(uint64, *Config) {})
	t.Cleanup(c.stopAll)
	ctx := testCtx(t, time.Minute)
	if err := c.client(2).FunctionLoad(ctx, splitFnLib).Err(); err != nil {
		t.Fatal(err)
	}
	check := func(lo, hi uint16, round int) {
		t.Helper()
		for id := uint64(1); id <= 3; id++ {
			k := keyInSlots("sf:", lo, hi, int(id)+3*round)
			v := "v" + strconv.Itoa(int(id))
			if err := c.client(id).FCall(ctx, "sset", []string{k}, v).Err(); err != nil {
				t.Fatalf("node %d: FCALL of %s (slot %d) right after the split: %v", id, k, slot.Of([]byte(k)), err)
			}
			if got, err := c.client(id).FCallRO(ctx, "sget", []string{k}).Text(); err != nil || got != v {
				t.Fatalf("node %d: FCALL_RO of %s right after the split: %q, %v", id, k, got, err)
			}
		}
	}
	// Split from a follower of range 1, then from another node.
	lead := c.waitLeader()
	_, r, err := c.node(lead%3+1).SplitRange(ctx, 1, 8192)
	if err != nil {
		t.Fatal(err)
	}
	check(8192, slot.Count, 0)
	// A split of the new range (its mirror is copied as range-local
	// state) and another of range 1.
	if _, _, err := c.node(lead).SplitRange(ctx, r.RangeID, 12288); err != nil {
		t.Fatal(err)
	}
	check(12288, slot.Count, 1)
	if _, _, err := c.node((lead+1)%3+1).SplitRange(ctx, 1, 4096); err != nil {
		t.Fatal(err)
	}
	check(4096, 8192, 2)
	rangesConverge(t, c)
}

// TestSplitDuringFunctionLoad: FUNCTION LOADs and splits (of range 1 and
// of ranges split off it) run concurrently, then range 1 splits once more;
// right after, every library loaded is callable in every range, through
// every node.
func TestSplitDuringFunctionLoad(t *testing.T) {
	old := configCopyTick
	configCopyTick = time.Hour
	t.Cleanup(func() { configCopyTick = old })
	c := newClusterWith(t, 3, func(uint64, *Config) {})
	t.Cleanup(c.stopAll)
	ctx := testCtx(t, 2*time.Minute)
	c.waitLeader()
	splits := []uint16{8192, 4096, 12288, 2048, 10240}
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(splits))
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i, s := range splits {
			// Each split is of the range that owns s (range 1, or a
			// range split off it earlier).
			var rg storage.RangeID
			for _, x := range c.node(uint64(i%3) + 1).localReplicas() {
				if x.Descriptor().ContainsSlot(s) {
					rg = x.RangeID()
				}
			}
			if _, _, err := c.node(uint64(i%3)+1).SplitRange(ctx, rg, s); err != nil {
				errs <- err
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for i := range 2 * len(splits) {
			lib := strings.ReplaceAll(strings.ReplaceAll(splitFnLib, "slib", "slib"+strconv.Itoa(i)), "'s", "'s"+strconv.Itoa(i))
			if err := c.client(uint64(i%3)+1).FunctionLoad(ctx, lib).Err(); err != nil {
				errs <- err
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// One more split of range 1, after every load: its new range too.
	if _, _, err := c.node(2).SplitRange(ctx, 1, 1024); err != nil {
		t.Fatal(err)
	}
	for s := 0; s < slot.Count; s += 1024 {
		for id := uint64(1); id <= 3; id++ {
			k := keyInSlots("sl:", uint16(s), uint16(s+1024), int(id))
			for i := range 2 * len(splits) {
				fn := "s" + strconv.Itoa(i) + "set"
				if err := c.client(id).FCall(ctx, fn, []string{k}, "v").Err(); err != nil {
					t.Fatalf("node %d: FCALL %s of a key of slot %d: %v", id, fn, slot.Of([]byte(k)), err)
				}
			}
		}
	}
}

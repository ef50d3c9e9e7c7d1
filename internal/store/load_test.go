package store

import (
	"slices"
	"testing"
)

// TestLoadSampling: AddSampled names one command in LoadSampleEvery,
// reads and writes apart, whatever the batch sizes; the ring keeps the
// last LoadSamples slots and is not allocated before the first.
func TestLoadSampling(t *testing.T) {
	var l Load
	if got := l.SlotSamples(nil); len(got) != 0 || l.ring.Load() != nil {
		t.Fatalf("fresh Load: samples %v", got)
	}
	sampled := map[bool]int{}
	var counted [2]int
	for i, k := range []int{1, 3, 8, 7, 64, 1, 1, 1, 1, 1, 1, 1, 1, 100, 2, 9, 0, 5} {
		write := i%3 == 0
		w := 0
		if write {
			w = 1
		}
		for j := l.AddSampled(write, k); j < k; j += LoadSampleEvery {
			if j < 0 {
				t.Fatalf("negative offset %d", j)
			}
			sampled[write]++
			// Command j of this batch brings the counter to a multiple
			// of LoadSampleEvery.
			if (counted[w]+j+1)%LoadSampleEvery != 0 {
				t.Fatalf("batch %d: offset %d after %d counted", i, j, counted[w])
			}
		}
		counted[w] += k
	}
	rd, wr := l.Totals()
	if int(rd) != counted[0] || int(wr) != counted[1] {
		t.Fatalf("totals %d, %d; want %v", rd, wr, counted)
	}
	if sampled[false] != counted[0]/LoadSampleEvery || sampled[true] != counted[1]/LoadSampleEvery {
		t.Fatalf("sampled %v of %v", sampled, counted)
	}

	for i := 0; i < LoadSamples+100; i++ {
		l.RecordSlot(uint16(i % 16384))
	}
	got := l.SlotSamples(nil)
	slices.Sort(got)
	if len(got) != LoadSamples || got[0] != 100 || got[len(got)-1] != LoadSamples+99 {
		t.Fatalf("%d samples from %d to %d; want the last %d", len(got), got[0], got[len(got)-1], LoadSamples)
	}
	if l.SampleCount() != LoadSamples+100 {
		t.Fatalf("SampleCount %d", l.SampleCount())
	}
	var m Load
	m.RecordSlot(16383)
	m.RecordSlot(0)
	if got := m.SlotSamples(nil); len(got) != 2 || !slices.Contains(got, 16383) || !slices.Contains(got, 0) {
		t.Fatalf("samples %v, want 0 and 16383", got)
	}
}

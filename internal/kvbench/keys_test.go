package kvbench

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestAppendKey(t *testing.T) {
	seen := map[string]bool{}
	for n := range uint64(10000) {
		k := string(AppendKey(nil, n))
		if !strings.HasPrefix(k, "user") || len(k) < 5 || seen[k] {
			t.Fatalf("key %d: %q (seen %v)", n, k, seen[k])
		}
		seen[k] = true
	}
	// YCSB's FNV-1a 64 of record 0: the offset basis hashed with eight
	// zero bytes.
	h := uint64(0xCBF29CE484222325)
	for range 8 {
		h *= 1099511628211
	}
	if int64(h) < 0 {
		h = uint64(-int64(h))
	}
	if got := fnv64(0); got != h {
		t.Errorf("fnv64(0) = %d, want %d", got, h)
	}
	if string(AppendKey([]byte("x"), 0)) != "xuser"+strings.TrimPrefix(string(AppendKey(nil, 0)), "user") {
		t.Errorf("AppendKey does not append")
	}
}

// The exact zipfian generator puts item i's share close to
// (1/(i+1)^theta) / zeta(n, theta), stays in range and is deterministic.
func TestZipfianSkew(t *testing.T) {
	const n, draws = 1000, 400_000
	z := NewZipfian(n, ZipfianConstant)
	rng := rand.New(rand.NewPCG(7, 7))
	counts := make([]int, n)
	for range draws {
		v := z.Next(rng.Float64())
		if v >= n {
			t.Fatalf("draw %d out of [0, %d)", v, n)
		}
		counts[v]++
	}
	zn := zeta(n, ZipfianConstant)
	// Items 0 and 1 are exact in Gray's method; beyond, it approximates
	// the distribution, so check the share of the 10 and 100 hottest.
	for _, i := range []int{0, 1} {
		want := draws / math.Pow(float64(i+1), ZipfianConstant) / zn
		if math.Abs(float64(counts[i])-want) > 0.05*want {
			t.Errorf("item %d drawn %d times, want about %.0f", i, counts[i], want)
		}
	}
	for _, k := range []int{10, 100} {
		got, want := 0, 0.0
		for i := range k {
			got += counts[i]
			want += draws / math.Pow(float64(i+1), ZipfianConstant) / zn
		}
		if math.Abs(float64(got)-want) > 0.1*want {
			t.Errorf("the %d hottest items drawn %d times, want about %.0f", k, got, want)
		}
	}
	// Edges of u.
	if z.Next(0) != 0 || z.Next(math.Nextafter(1, 0)) >= n {
		t.Errorf("edges: %d %d", z.Next(0), z.Next(math.Nextafter(1, 0)))
	}
}

// The scrambled generator (what the benchmark uses) is skewed the same way
// but its popular items are spread over the range; it is deterministic
// for a seed and stays in range.
func TestScrambledZipfian(t *testing.T) {
	const n, draws = 100_000, 500_000
	s := NewScrambled(n)
	run := func(seed uint64) []int {
		rng := rand.New(rand.NewPCG(seed, 1))
		counts := make([]int, n)
		for range draws {
			v := s.Next(rng.Float64())
			if v >= n {
				t.Fatalf("draw %d out of [0, %d)", v, n)
			}
			counts[v]++
		}
		return counts
	}
	counts := run(42)
	// Skew: the hottest 1% of the keys take far more than 1% of the draws
	// (about 30% with theta 0.99 over 10^10 items hashed down to 10^5,
	// more with this few draws); uniform
	// draws would give the hottest 1% only a little over 1%.
	sorted := append([]int(nil), counts...)
	slicesSortDesc(sorted)
	top := 0
	for _, c := range sorted[:n/100] {
		top += c
	}
	if frac := float64(top) / draws; frac < 0.25 || frac > 0.6 {
		t.Errorf("hottest 1%% of keys got %.1f%% of draws", 100*frac)
	}
	// Scrambled: the hottest key is not item 0, and the 10 hottest are not
	// clustered at the start.
	hot := 0
	for i := range counts {
		if counts[i] > counts[hot] {
			hot = i
		}
	}
	if hot == 0 || counts[0] == sorted[0] {
		t.Errorf("hottest item is 0: not scrambled")
	}
	// Deterministic by seed, different across seeds.
	again, other := run(42), run(43)
	same, diff := true, false
	for i := range counts {
		same = same && counts[i] == again[i]
		diff = diff || counts[i] != other[i]
	}
	if !same || !diff {
		t.Errorf("same seed gives the same draws: %v; another seed differs: %v", same, diff)
	}
}

func slicesSortDesc(a []int) { slices.Sort(a); slices.Reverse(a) }

package kvbench

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// Every bucket's bounds contain exactly the values that map to it, and
// the buckets tile the range without gaps.
func TestHistBuckets(t *testing.T) {
	prevHi := uint64(0)
	for i := 0; i < histBuckets-1; i++ {
		lo, hi := histBounds(i)
		if i > 0 && lo != prevHi+1 {
			t.Fatalf("bucket %d starts at %d, previous ended at %d", i, lo, prevHi)
		}
		if histIndex(lo) != i || histIndex(hi) != i {
			t.Fatalf("bucket %d [%d, %d]: indexes %d, %d", i, lo, hi, histIndex(lo), histIndex(hi))
		}
		if lo >= histSub && float64(hi-lo+1)/float64(lo) > 1.0/histSub {
			t.Fatalf("bucket %d [%d, %d] wider than 1/%d of its value", i, lo, hi, histSub)
		}
		prevHi = hi
	}
	if histIndex(math.MaxUint64) != histBuckets-1 {
		t.Fatalf("huge value not in the top bucket")
	}
}

// Percentiles agree with a sorted-slice reference within the bucket
// precision, for several shapes of data.
func TestHistQuantiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	shapes := map[string]func() time.Duration{
		"uniform µs":  func() time.Duration { return time.Duration(rng.IntN(1000)) * time.Microsecond },
		"exponential": func() time.Duration { return time.Duration(rng.ExpFloat64() * float64(200*time.Microsecond)) },
		"lognormal tail": func() time.Duration {
			return time.Duration(math.Exp(rng.NormFloat64()*1.5) * float64(100*time.Microsecond))
		},
		"small exact": func() time.Duration { return time.Duration(rng.IntN(100)) },
		"bimodal": func() time.Duration {
			if rng.IntN(100) == 0 {
				return time.Duration(50+rng.IntN(50)) * time.Millisecond
			}
			return time.Duration(100+rng.IntN(100)) * time.Microsecond
		},
	}
	for name, gen := range shapes {
		for _, n := range []int{1, 7, 1000, 100_000} {
			h := NewHistogram()
			ref := make([]time.Duration, n)
			var sum time.Duration
			for i := range ref {
				ref[i] = gen()
				sum += ref[i]
				h.Record(ref[i])
			}
			slices.Sort(ref)
			if h.Count() != uint64(n) || h.Min() != ref[0] || h.Max() != ref[n-1] || h.Mean() != sum/time.Duration(n) {
				t.Errorf("%s n=%d: count %d min %v max %v mean %v; want %d %v %v %v", name, n, h.Count(), h.Min(), h.Max(), h.Mean(), n, ref[0], ref[n-1], sum/time.Duration(n))
			}
			for _, q := range []float64{0.001, 0.5, 0.9, 0.95, 0.99, 0.999, 1} {
				want := ref[max(0, int(math.Ceil(q*float64(n)))-1)]
				got := h.Quantile(q)
				tol := float64(want)/(2*histSub) + 1
				if math.Abs(float64(got-want)) > tol {
					t.Errorf("%s n=%d q=%v: %v, reference %v (tolerance %.0fns)", name, n, q, got, want, tol)
				}
			}
		}
	}
}

func TestHistMerge(t *testing.T) {
	a, b, all := NewHistogram(), NewHistogram(), NewHistogram()
	for i := range 1000 {
		d := time.Duration(i*i) * time.Nanosecond
		all.Record(d)
		if i%3 == 0 {
			a.Record(d)
		} else {
			b.Record(d)
		}
	}
	a.Merge(b)
	for _, q := range []float64{0.5, 0.99, 1} {
		if a.Quantile(q) != all.Quantile(q) {
			t.Errorf("q %v: merged %v, direct %v", q, a.Quantile(q), all.Quantile(q))
		}
	}
	if a.Count() != all.Count() || a.Min() != all.Min() || a.Max() != all.Max() || a.Mean() != all.Mean() {
		t.Errorf("merged summary differs")
	}
	e := NewHistogram()
	if e.Quantile(0.5) != 0 || e.Min() != 0 || e.Max() != 0 || e.Mean() != 0 {
		t.Errorf("empty histogram not all zero")
	}
	e.Merge(NewHistogram())
	if e.Min() != 0 {
		t.Errorf("merge of empties has min %v", e.Min())
	}
}

func BenchmarkHistRecord(b *testing.B) {
	h := NewHistogram()
	for i := range b.N {
		h.Record(time.Duration(i&0xfffff) * 97)
	}
}

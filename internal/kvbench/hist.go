package kvbench

import (
	"math"
	"math/bits"
	"time"
)

// Histogram is an HDR-style latency histogram: values (nanoseconds) below
// 2^histSubBits are counted exactly; above, every power-of-two range is
// split into 2^histSubBits linear sub-buckets, so a percentile is off by
// less than 1/2^(histSubBits+1) (0.4%) of its value. Recording is an
// index computation and an increment; count, sum, min and max are exact.
// The zero value is not usable: call NewHistogram.
type Histogram struct {
	counts        []uint64
	n, sum        uint64
	minV, maxV    uint64
	overflowCount uint64 // values clamped to histMax
}

const (
	histSubBits = 7
	histSub     = 1 << histSubBits
	// histMaxExp bounds the range: values up to 2^(histMaxExp+histSubBits+1)
	// ns (about 18 minutes) are bucketed; larger ones count in the top
	// bucket (max stays exact).
	histMaxExp  = 32
	histBuckets = histSub + (histMaxExp+1)*histSub
)

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram {
	return &Histogram{counts: make([]uint64, histBuckets), minV: math.MaxUint64}
}

func histIndex(v uint64) int {
	if v < histSub {
		return int(v)
	}
	e := bits.Len64(v) - histSubBits - 1 // v>>e in [histSub, 2*histSub)
	if e > histMaxExp {
		return histBuckets - 1
	}
	return histSub + e*histSub + int(v>>e) - histSub
}

// histBounds is the range [lo, hi] of values counted in bucket i.
func histBounds(i int) (lo, hi uint64) {
	if i < histSub {
		return uint64(i), uint64(i)
	}
	e := (i - histSub) / histSub
	m := uint64(histSub + (i-histSub)%histSub)
	return m << e, (m+1)<<e - 1
}

// Record adds one value.
func (h *Histogram) Record(d time.Duration) {
	v := uint64(0)
	if d > 0 {
		v = uint64(d)
	}
	h.counts[histIndex(v)]++
	h.n++
	h.sum += v
	if v < h.minV {
		h.minV = v
	}
	if v > h.maxV {
		h.maxV = v
	}
}

// Merge adds every value of o.
func (h *Histogram) Merge(o *Histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
	h.minV = min(h.minV, o.minV)
	h.maxV = max(h.maxV, o.maxV)
}

// Count is the number of values recorded.
func (h *Histogram) Count() uint64 { return h.n }

// Max is the largest value recorded (0 if none).
func (h *Histogram) Max() time.Duration { return time.Duration(h.maxV) }

// Min is the smallest value recorded (0 if none).
func (h *Histogram) Min() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.minV)
}

// Mean is the exact average (0 if none).
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / h.n)
}

// Quantile returns the value at quantile q (0 < q <= 1): the smallest
// recorded value v such that at least q of the values are <= v, to the
// histogram's precision (the middle of its bucket, kept within [Min,
// Max]). 0 if nothing was recorded.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = max(1, min(rank, h.n))
	var cum uint64
	for i, c := range h.counts {
		cum += c
		if cum >= rank {
			lo, hi := histBounds(i)
			v := lo + (hi-lo)/2
			v = max(h.minV, min(v, h.maxV))
			return time.Duration(v)
		}
	}
	return time.Duration(h.maxV)
}

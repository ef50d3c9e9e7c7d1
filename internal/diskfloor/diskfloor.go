// Package diskfloor measures the floor that every fsynced write on this
// machine pays: the latency of appending a small record to a file and
// fdatasyncing it, in the directory where the servers keep their data.
// The benchmarks report it next to their figures, measured in the same run,
// so that a latency target such as "a lock hand-off within one fsync plus
// 0.3 ms" can be checked against the disk it ran on.
package diskfloor

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// Result is the distribution of Count fdatasync latencies, in ms.
type Result struct {
	Count    int     `json:"count"`
	Bytes    int     `json:"bytes_per_write"`
	P50Ms    float64 `json:"p50_ms"`
	P90Ms    float64 `json:"p90_ms"`
	P99Ms    float64 `json:"p99_ms"`
	MaxMs    float64 `json:"max_ms"`
	MeanMs   float64 `json:"mean_ms"`
	Dir      string  `json:"dir"`
	Measured string  `json:"measured"` // when, RFC 3339
}

// Measure appends n records of size bytes to a new file in dir, each
// followed by an fdatasync (as a WAL commit does), and returns the
// distribution of the sync latencies. The file is removed.
func Measure(dir string, n, size int) (Result, error) {
	if n <= 0 || size <= 0 {
		return Result{}, errors.New("diskfloor: count and size must be positive")
	}
	f, err := os.CreateTemp(dir, "kvorum-fsync-probe-*")
	if err != nil {
		return Result{}, fmt.Errorf("diskfloor: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = byte(i)
	}
	lat := make([]float64, 0, n)
	for range n {
		if _, err := f.Write(buf); err != nil {
			return Result{}, fmt.Errorf("diskfloor: write: %w", err)
		}
		start := time.Now()
		if err := fdatasync(f); err != nil {
			return Result{}, fmt.Errorf("diskfloor: sync: %w", err)
		}
		lat = append(lat, float64(time.Since(start))/float64(time.Millisecond))
	}
	return summarize(lat, size, dir), nil
}

func summarize(lat []float64, size int, dir string) Result {
	sort.Float64s(lat)
	sum := 0.0
	for _, v := range lat {
		sum += v
	}
	at := func(p float64) float64 { return lat[int(p*float64(len(lat)-1)+0.5)] }
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	return Result{
		Count: len(lat), Bytes: size, P50Ms: at(0.50), P90Ms: at(0.90), P99Ms: at(0.99),
		MaxMs: lat[len(lat)-1], MeanMs: sum / float64(len(lat)), Dir: abs,
		Measured: time.Now().UTC().Format(time.RFC3339),
	}
}

// String is a one-line summary.
func (r Result) String() string {
	return fmt.Sprintf("disk floor: fdatasync of a %d-byte append in %s: p50 %.3f ms, p90 %.3f ms, p99 %.3f ms (%d syncs)",
		r.Bytes, r.Dir, r.P50Ms, r.P90Ms, r.P99Ms, r.Count)
}

// ForBenchmark measures the floor as the benchmarks do (200 syncs of 4 KiB
// in dir) and writes its summary, or why it could not be measured, to
// progress; nil if it could not.
func ForBenchmark(dir string, progress io.Writer) *Result {
	r, err := Measure(dir, 200, 4096)
	if err != nil {
		fmt.Fprintf(progress, "disk floor not measured: %v\n", err)
		return nil
	}
	fmt.Fprintln(progress, r.String())
	return &r
}

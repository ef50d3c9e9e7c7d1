package diskfloor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMeasure(t *testing.T) {
	dir := t.TempDir()
	r, err := Measure(dir, 20, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if r.Count != 20 || r.Bytes != 4096 {
		t.Fatalf("count %d bytes %d", r.Count, r.Bytes)
	}
	if !(r.P50Ms > 0 && r.P50Ms <= r.P90Ms && r.P90Ms <= r.P99Ms && r.P99Ms <= r.MaxMs) {
		t.Fatalf("percentiles out of order: %+v", r)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("probe file left behind: %v", ents)
	}
	if !strings.Contains(r.String(), "p50") {
		t.Fatalf("summary %q", r.String())
	}
	if _, err := Measure(filepath.Join(dir, "missing"), 1, 1); err == nil {
		t.Fatal("a missing directory was accepted")
	}
	if _, err := Measure(dir, 0, 1); err == nil {
		t.Fatal("count 0 accepted")
	}
}

func TestSummarize(t *testing.T) {
	lat := []float64{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	r := summarize(lat, 1, ".")
	if r.P50Ms != 6 || r.MaxMs != 10 || r.MeanMs != 5.5 || r.P99Ms != 10 {
		t.Fatalf("%+v", r)
	}
}

func TestForBenchmark(t *testing.T) {
	var out strings.Builder
	if r := ForBenchmark(t.TempDir(), &out); r == nil || r.Count != 200 || !strings.Contains(out.String(), "disk floor: fdatasync") {
		t.Fatalf("ForBenchmark: %+v, said %q", r, out.String())
	}
	out.Reset()
	if r := ForBenchmark(filepath.Join(t.TempDir(), "missing"), &out); r != nil || !strings.Contains(out.String(), "not measured") {
		t.Fatalf("ForBenchmark on a missing dir: %+v, said %q", r, out.String())
	}
}

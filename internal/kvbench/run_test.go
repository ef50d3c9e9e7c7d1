package kvbench

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/localsrv"
)

func shortConfig(t *testing.T, workloads string) Config {
	t.Helper()
	w, err := ParseWorkloads(workloads)
	if err != nil {
		t.Fatal(err)
	}
	return Config{Workloads: w, Distribution: DistZipfian, Records: 1000, ValueSize: 100, Clients: []int{2},
		Pipeline: 1, Duration: time.Second, KvorumNodes: KvorumNodesAll, Seed: 1}
}

// checkCells fails the test for a failed cell or one without throughput.
func checkCells(t *testing.T, rep *Report, want int) {
	t.Helper()
	if len(rep.Cells) != want {
		t.Fatalf("%d cells, want %d", len(rep.Cells), want)
	}
	for _, c := range rep.Cells {
		if c.Failed || c.Errors != 0 || c.OtherErrors != 0 || c.Ops == 0 || c.OpsPerSec <= 0 || c.P99Ms <= 0 || c.P50Ms > c.P99Ms {
			t.Errorf("cell %s/%d/%s: %+v", c.Workload, c.Clients, c.Target, c)
		}
		for _, k := range c.Kinds {
			if !(0 < k.P50Ms && k.P50Ms <= k.P95Ms && k.P95Ms <= k.P99Ms && k.P99Ms <= k.P999Ms && k.P999Ms <= k.MaxMs) {
				t.Errorf("cell %s/%s %s: percentiles out of order: %+v", c.Workload, c.Target, k.Kind, k)
			}
		}
		if c.Workload != "load" && c.Misses != 0 {
			t.Errorf("cell %s/%s: %d reads missed after the load", c.Workload, c.Target, c.Misses)
		}
	}
}

// End to end on a redis-server the benchmark starts: load then a mixed
// workload on 1 and 3 clients with a pipeline; a missing etcd binary is
// skipped with a note; the report, tables, JSON and chart are complete;
// the server is gone afterwards.
func TestRunStartRedis(t *testing.T) {
	cfg := shortConfig(t, "load,a")
	cfg.Clients, cfg.Pipeline, cfg.Warmup, cfg.Duration = []int{1, 3}, 4, 0, 1500*time.Millisecond
	cfg.Start = []string{StartRedis, StartEtcd}
	cfg.EtcdBin = filepath.Join(t.TempDir(), "no-etcd")
	cfg.Dir = t.TempDir()
	var progress bytes.Buffer
	cfg.Progress, cfg.Ticker = &progress, true
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	t.Logf("progress:\n%s", progress.String())
	checkCells(t, rep, 4)
	load := rep.Cells[0]
	if load.Workload != "load" || load.Ops != 1000 || len(load.Kinds) != 1 || load.Kinds[0].Kind != "insert" {
		t.Errorf("load cell %+v", load)
	}
	a := rep.Cells[3]
	if a.Workload != "a" || a.Clients != 3 || len(a.Kinds) != 2 || a.Kinds[0].Kind != "read" || a.Kinds[1].Kind != "update" {
		t.Errorf("a cell %+v", a)
	}
	if r := float64(a.Kinds[0].Ops) / float64(a.Ops); r < 0.4 || r > 0.6 {
		t.Errorf("a: %.2f of the ops are reads", r)
	}
	if a.ServerCPUS <= 0 || a.CPUUsPerOp <= 0 || a.RSSMiB <= 0 || len(a.RSS) != 1 || a.BenchCPUS <= 0 {
		t.Errorf("no server CPU/memory figures: %+v", a)
	}
	if a.AnonMiB <= 0 || a.AnonMiB > a.RSSMiB || a.RSS[0].AnonMiB != a.AnonMiB {
		t.Errorf("anonymous memory %v of RSS %v (per process %+v)", a.AnonMiB, a.RSSMiB, a.RSS)
	}
	if len(rep.Targets) != 2 || rep.Targets[1].Skipped == "" || !strings.Contains(rep.Targets[1].Skipped, "no-etcd") {
		t.Errorf("targets %+v", rep.Targets)
	}
	if !regexp.MustCompile(`\] a, 3 clients, redis: +1s +\d+ ops/s  0 errors\n`).MatchString(progress.String()) ||
		!strings.Contains(progress.String(), "etcd: skipped") {
		t.Errorf("progress lacks per-second lines or the skip note")
	}
	var text bytes.Buffer
	rep.WriteText(&text)
	if rep.Disk == nil || rep.Disk.Count != 200 || rep.Disk.P50Ms <= 0 {
		t.Errorf("disk floor not measured: %+v", rep.Disk)
	}
	for _, want := range []string{"| a | 3 | redis | ", "| load | 1 | redis | insert | 1000 |", "**etcd**: skipped", "disk floor: fdatasync"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil || !strings.Contains(js.String(), `"ops_per_sec"`) {
		t.Errorf("JSON: %v", err)
	}
	pngPath := filepath.Join(t.TempDir(), "chart.png")
	if err := rep.WritePNG(pngPath); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(pngPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil || img.Bounds().Dx() < 600 {
		t.Errorf("chart: %v", err)
	}
	// The server was stopped.
	if _, err := os.Stat(fmt.Sprintf("/proc/%d/status", rep.Targets[0].PIDs[0])); err == nil {
		t.Errorf("redis-server pid %d still running", rep.Targets[0].PIDs[0])
	}
}

// A given target (by URL, with --pids) next to a started one, with a
// baseline; --ops caps a cell exactly; an insert-only workload writes new
// records.
func TestRunGivenTargetOpsCap(t *testing.T) {
	bin := "redis-server"
	addrs, procs, err := localsrv.RedisServers(context.Background(), mustLookPath(t, bin), t.TempDir(), "given", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer localsrv.StopAll(procs)
	cfg := shortConfig(t, "insert,c")
	cfg.Duration, cfg.Ops, cfg.Warmup = 0, 500, 100*time.Millisecond
	cfg.Targets = []Target{{Name: "given", Scheme: SchemeRedis, Addrs: addrs}}
	cfg.PIDs = map[string][]int{"given": {procs[0].Pid()}}
	cfg.Start, cfg.Baseline = []string{StartRedis}, "redis"
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Cells) != 4 {
		t.Fatalf("%d cells", len(rep.Cells))
	}
	for _, c := range rep.Cells {
		if c.Failed || c.Ops != 500 || c.Errors != 0 {
			t.Errorf("cell %s/%s: ops %d, failed %v (%s)", c.Workload, c.Target, c.Ops, c.Failed, c.Error)
		}
		if c.Target == "redis" && (c.Ratio != 1 || c.P99Ratio != 1) {
			t.Errorf("baseline's own ratio %v %v", c.Ratio, c.P99Ratio)
		}
		if c.Target == "given" && (c.Ratio <= 0 || c.RSSMiB <= 0) {
			t.Errorf("given target: ratio %v, rss %v", c.Ratio, c.RSSMiB)
		}
		// Nothing was loaded: reads of records 0..999 miss, the inserted
		// records (1000 and up) are not read.
		if c.Workload == "c" && c.Misses != c.Ops {
			t.Errorf("c on an empty server: %d misses of %d", c.Misses, c.Ops)
		}
	}
	c, err := dialRESP(context.Background(), addrs[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	// 500 measured inserts after the warmup's.
	if n, err := c.do("DBSIZE"); err != nil || len(n) < 3 || n < "500" && len(n) == 3 {
		t.Errorf("DBSIZE after 500 inserts and a warmup: %q %v", n, err)
	}
	if n, err := c.do("EXISTS", string(AppendKey(nil, 1000))); err != nil || n != "1" {
		t.Errorf("record 1000 (the first insert) exists: %q %v", n, err)
	}
}

func mustLookPath(t *testing.T, bin string) string {
	t.Helper()
	p, err := exec.LookPath(bin)
	if err != nil {
		t.Fatalf("%s not found: apt-get install redis-server (make test does this)", bin)
	}
	return p
}

// End to end on a 3-member etcd cluster the benchmark starts (Debian's
// etcd-server; .ci/run installs it).
func TestRunStartEtcd(t *testing.T) {
	if _, err := os.Stat(DefaultEtcd); err != nil {
		if _, err := exec.LookPath("etcd"); err != nil {
			t.Fatal("etcd not found: apt-get install etcd-server (.ci/run and scripts/ensure-test-deps.sh do this)")
		}
	}
	cfg := shortConfig(t, "load,a")
	cfg.Records, cfg.Warmup, cfg.Pipeline = 300, 0, 2
	cfg.Start = []string{StartEtcd}
	var progress bytes.Buffer
	cfg.Progress = &progress
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	checkCells(t, rep, 2)
	if tg := rep.Targets[0]; len(tg.PIDs) != 3 || len(tg.Addrs) != 3 || tg.Scheme != SchemeEtcd {
		t.Errorf("etcd target %+v", tg)
	}
}

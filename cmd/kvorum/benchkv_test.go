package main

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestBenchKVHelp(t *testing.T) {
	for _, args := range [][]string{{"bench", "kv", "--help"}, {"bench", "kv", "-h"}} {
		code, out, errOut := runCmd(args...)
		if code != 0 || errOut != "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
		if !strings.HasPrefix(out, "Usage:\n  kvorum bench kv") {
			t.Errorf("%v: output does not start with usage:\n%s", args, out)
		}
		for _, want := range []string{"YCSB", "paper 002", "90/10", "5/95", "scrambled zipfian", "redis-aof", "appendfsync always",
			"etcd-server", "/proc/PID/stat", "RSS", "Exit status", "Examples:", "--pipeline", "round-robin", "bench CPU",
			"load, a, b, c, 90/10, 5/95, insert (default load,a,b,c)"} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: help lacks %q", args, want)
			}
		}
	}
	_, out, _ := runCmd("bench", "kv", "--help")
	checkFlagHelp(t, newBenchKVFlags().fs, out, "bench")
}

// checkBenchKVError runs `kvorum bench kv args...`, which must exit 2 with
// msg and the pointer to --help on stderr.
func checkBenchKVError(t *testing.T, args []string, msg string) {
	t.Helper()
	code, out, errOut := runCmd(append([]string{"bench", "kv"}, args...)...)
	if code != 2 || out != "" {
		t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2", args, code, out, errOut)
		return
	}
	if !strings.Contains(errOut, "kvorum bench kv: "+msg) || !strings.Contains(errOut, "Run 'kvorum bench kv --help' for usage") {
		t.Errorf("%v: stderr %q lacks %q", args, errOut, msg)
	}
}

func TestBenchKVBadArgs(t *testing.T) {
	cases := []struct {
		args []string
		msg  string
	}{
		{nil, "nothing to measure: give --target NAME=URL or --start kvorum,redis,redis-aof,etcd"},
		{[]string{"--start", "redis", "--bogus"}, "flag provided but not defined: --bogus"},
		{[]string{"--start", "redis", "extra"}, `unexpected argument "extra"`},
		{[]string{"--start", "mysql"}, `--start: unknown server "mysql"`},
		{[]string{"--start", "redis,redis"}, `target "redis" given twice`},
		{[]string{"--start", "redis", "--workloads", "a,z"}, `--workloads: unknown workload "z"`},
		{[]string{"--start", "redis", "--workloads", ""}, "--workloads: no workload"},
		{[]string{"--start", "redis", "--clients", "4,x"}, `--clients: "x" is not a number`},
		{[]string{"--start", "redis", "--clients", "0"}, "--clients: 0 is not between 1 and 1024"},
		{[]string{"--start", "redis", "--distribution", "latest"}, `--distribution: "latest" is neither uniform nor zipfian`},
		{[]string{"--start", "redis", "--records", "0"}, "--records must be at least 1"},
		{[]string{"--start", "redis", "--value-size", "big"}, `invalid value "big" for flag --value-size`},
		{[]string{"--start", "redis", "--pipeline", "0"}, "--pipeline must be between 1 and 1024"},
		{[]string{"--start", "redis", "--duration", "0s"}, "--duration must be positive (or give --ops)"},
		{[]string{"--start", "redis", "--warmup", "soon"}, `invalid value "soon" for flag --warmup`},
		{[]string{"--start", "redis", "--baseline", "etcd"}, `--baseline "etcd" is not a target (targets: redis)`},
		{[]string{"--start", "redis", "--kvorum-nodes", "two"}, `--kvorum-nodes: "two" is neither all nor leader`},
		{[]string{"--target", "redis://127.0.0.1:6379"}, `--target: "redis://127.0.0.1:6379" is not NAME=URL`},
		{[]string{"--target", "x=http://h:1"}, `--target: "http://h:1": unknown scheme "http"`},
		{[]string{"--target", "x=redis://h"}, `--target: "redis://h": address "h" is not host:port`},
		{[]string{"--target", "redis=redis://h:1", "--start", "redis"}, `target "redis" given twice`},
		{[]string{"--target", "x=redis://h:1", "--pids", "x=12,y"}, `--pids: "x=12,y": "y" is not a process id`},
		{[]string{"--target", "x=redis://h:1", "--pids", "z=12"}, "--pids z: no --target of that name"},
		{[]string{"--start", "redis", "--pids", "redis=12"}, "--pids redis: the benchmark starts redis itself"},
	}
	for _, c := range cases {
		checkBenchKVError(t, c.args, c.msg)
	}
}

func TestParseBenchKV(t *testing.T) {
	f, err := parseBenchKV([]string{"--start", "redis"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := f.cfg
	if len(c.Workloads) != 4 || c.Workloads[0].Name != "load" || c.Distribution != "zipfian" || c.Records != 100000 ||
		c.ValueSize != 1024 || len(c.Clients) != 1 || c.Clients[0] != 16 || c.Pipeline != 1 || c.Duration != 10*time.Second ||
		c.Warmup != 2*time.Second || c.Ops != 0 || c.Seed != 1 || c.KvorumNodes != "all" || c.Executable == "" || f.json || f.png != "" {
		t.Errorf("defaults: %+v", c)
	}
	f, err = parseBenchKV([]string{"--target", "a=redis://h:1,h:2,b=etcd://h:3", "--target", "c=redis://h:4", "--pids", "a=1,2",
		"--pids", "c=3", "--workloads", "5/95, 90/10", "--clients", "1, 32", "--value-size", "4KiB", "--pipeline", "8",
		"--duration", "0", "--ops", "1000", "--warmup", "0", "--seed", "7", "--distribution", "uniform", "--baseline", "c",
		"--kvorum-nodes", "leader", "--json", "--png", "x.png", "--progress"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c = f.cfg
	if len(c.Targets) != 3 || c.Targets[0].Name != "a" || len(c.Targets[0].Addrs) != 2 || c.Targets[1].Scheme != "etcd" ||
		len(c.PIDs["a"]) != 2 || c.PIDs["c"][0] != 3 || c.Workloads[1].Name != "90/10" || c.Clients[1] != 32 ||
		c.ValueSize != 4096 || c.Pipeline != 8 || c.Duration != 0 || c.Ops != 1000 || c.Seed != 7 || c.Distribution != "uniform" ||
		c.Baseline != "c" || c.KvorumNodes != "leader" || c.Executable != "" || !f.json || f.png != "x.png" || !f.progress {
		t.Errorf("parsed: %+v", c)
	}
}

// benchKVReport is the part of `kvorum bench kv --json` the test checks.
type benchKVReport struct {
	Targets []struct {
		Name    string `json:"name"`
		Started bool   `json:"started_locally"`
		Addrs   []string
		PIDs    []int `json:"pids"`
		Skipped string
	} `json:"targets"`
	Cells []struct {
		Workload  string  `json:"workload"`
		Clients   int     `json:"clients"`
		Target    string  `json:"target"`
		Ops       int     `json:"ops"`
		OpsPerSec float64 `json:"ops_per_sec"`
		Ratio     float64 `json:"ratio_to_baseline"`
		Errors    int     `json:"errors"`
		Failed    bool    `json:"failed"`
		ServerCPU float64 `json:"server_cpu_s"`
		RSS       float64 `json:"rss_mib"`
		Kinds     []struct {
			Kind  string  `json:"kind"`
			Ops   int     `json:"ops"`
			P99Ms float64 `json:"p99_ms"`
		} `json:"kinds"`
	} `json:"cells"`
}

// The built binary runs the benchmark in small on its own 3-node kvorum
// cluster and a redis-server: complete JSON, a chart, and nothing left
// running or on disk.
func TestBenchKVCommand(t *testing.T) {
	bin := buildBinary(t)
	tmp := t.TempDir()
	chart := filepath.Join(t.TempDir(), "kv.png")
	var rep benchKVReport
	_, stderr := runJSON(t, bin, []string{"TMPDIR=" + tmp}, &rep, "bench", "kv", "--start", "kvorum,redis",
		"--workloads", "load,a", "--records", "500", "--value-size", "256", "--clients", "4", "--duration", "1s",
		"--warmup", "0", "--baseline", "redis", "--json", "--png", chart)
	if len(rep.Targets) != 2 || rep.Targets[0].Name != "kvorum" || len(rep.Targets[0].PIDs) != 3 || len(rep.Targets[0].Addrs) != 3 {
		t.Fatalf("targets %+v", rep.Targets)
	}
	if len(rep.Cells) != 4 {
		t.Fatalf("%d cells, want 4", len(rep.Cells))
	}
	for i, c := range rep.Cells {
		wantW, wantT := []string{"load", "a"}[i/2], []string{"kvorum", "redis"}[i%2]
		if c.Workload != wantW || c.Target != wantT || c.Clients != 4 {
			t.Errorf("cell %d is %s/%s/%d, want %s/%s/4", i, c.Workload, c.Target, c.Clients, wantW, wantT)
		}
		// (Redis loads 500 records in a few ms: less than the 10 ms tick
		// of /proc's CPU times.)
		if c.Failed || c.Errors != 0 || c.Ops <= 0 || c.OpsPerSec <= 0 || c.Ratio <= 0 || c.RSS <= 0 || len(c.Kinds) == 0 ||
			(c.ServerCPU <= 0 && (c.Target == "kvorum" || c.Workload == "a")) {
			t.Errorf("cell %d: %+v", i, c)
		}
	}
	if rep.Cells[0].Ops != 500 {
		t.Errorf("load inserted %d records", rep.Cells[0].Ops)
	}
	for _, want := range []string{"kvorum: starting a local 3-node cluster", "[4/4] a, 4 clients, redis:", "chart written to"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
	f, err := os.Open(chart)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Errorf("chart: %v", err)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("left in TMPDIR: %v", ents)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), tmp) {
			t.Errorf("still running: %s", strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestBenchHelp(t *testing.T) {
	for _, args := range [][]string{{"bench", "--help"}, {"help", "bench"}, {"bench", "help"}} {
		code, out, errOut := runCmd(args...)
		if code != 0 || errOut != "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
		for _, want := range []string{"Usage:\n  kvorum bench locks [flags]\n  kvorum bench kv [flags]\n  kvorum bench failover [flags]\n", "Redlock", "YCSB", "etcd",
			"paper 003", "'kvorum bench <benchmark> --help'"} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: overview lacks %q:\n%s", args, want, out)
			}
		}
	}
	code, out, _ := runCmd("bench", "failover", "--help")
	for _, want := range []string{"Usage:\n  kvorum bench failover", "--rate", "--env", "docker kill", "read back"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("bench failover --help: exit %d, lacks %q", code, want)
		}
	}
	for _, args := range [][]string{{"bench", "failover", "--env", "vm"}, {"bench", "failover", "--rate", "0", "--capacity", "0"}, {"bench", "failover", "x"}} {
		if code, _, errOut := runCmd(args...); code != 2 || !strings.Contains(errOut, "kvorum bench:") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
	for _, args := range [][]string{{"bench", "locks", "--help"}, {"bench", "locks", "-h"}} {
		code, out, errOut := runCmd(args...)
		if code != 0 || errOut != "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
		if !strings.HasPrefix(out, "Usage:\n  kvorum bench locks") {
			t.Errorf("%v: output does not start with usage:\n%s", args, out)
		}
		for _, want := range []string{"Redlock", "Tables 1 and 2", "redis-server", "Exit status", "own", "shared",
			"zookeeper", "fair lock recipe", "forceSync=yes", "kvorum, redlock, zookeeper (default kvorum,redlock)"} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: help lacks %q", args, want)
			}
		}
	}
	_, out, _ = runCmd("bench", "locks", "--help")
	checkFlagHelp(t, newBenchFlags().fs, out, "bench")
	_, out, _ = runCmd("bench", "failover", "--help")
	checkFlagHelp(t, newBenchFailoverFlags().fs, out, "bench")
}

func TestBenchBadArgs(t *testing.T) {
	cases := []struct {
		args []string
		msg  string
	}{
		{nil, "missing the benchmark: kvorum bench locks [flags] or kvorum bench kv [flags]"},
		{[]string{"mutex"}, `unknown benchmark "mutex"`},
		{[]string{"locks", "--bogus"}, "flag provided but not defined: --bogus"},
		{[]string{"locks", "extra"}, `unexpected argument "extra"`},
		{[]string{"locks", "--targets", "kvorum,etcd"}, `--targets: unknown "etcd"`},
		{[]string{"locks", "--modes", "mine"}, `--modes: unknown "mine"`},
		{[]string{"locks", "--procs", "1,x"}, `--procs: "x" is not a number`},
		{[]string{"locks", "--procs", "65"}, "--procs: 65 is not between 1 and 64"},
		{[]string{"locks", "--procs", ""}, "--procs: no process count"},
		{[]string{"locks", "--duration", "0s"}, "--duration must be positive"},
		{[]string{"locks", "--hold", "soon"}, `invalid value "soon" for flag --hold`},
		{[]string{"locks", "--hold", "2s"}, "--ttl (10s) must be at least 10 × --hold (2s)"},
		{[]string{"locks", "--redlock-retry-delay", "0s"}, "--redlock-retry-delay must be positive"},
		{[]string{"locks", "--kvorum", "localhost"}, `address "localhost" is not host:port`},
		{[]string{"locks", "--targets", "kvorum", "--redis", "127.0.0.1:6379"}, "--redis given but --targets does not include redlock"},
		{[]string{"locks", "--zookeeper", "127.0.0.1:2181"}, "--zookeeper given but --targets does not include zookeeper"},
		{[]string{"locks", "--targets", "zookeeper", "--zookeeper", "zk1"}, `address "zk1" is not host:port`},
		{[]string{"locks", "--targets", "zookeeper,zookeeper"}, `--targets: "zookeeper" given twice`},
	}
	for _, c := range cases {
		checkUsageError(t, "bench", c.args, c.msg)
	}
}

func TestParseBench(t *testing.T) {
	f, err := parseBench([]string{"locks"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := f.cfg
	if strings.Join(c.Targets, ",") != "kvorum,redlock" || strings.Join(c.Modes, ",") != "own,shared" ||
		len(c.Procs) != 3 || c.Procs[2] != 5 || c.Hold != 3*time.Millisecond || c.Duration != 10*time.Second ||
		c.RedlockRetryDelay != 200*time.Millisecond || c.Executable == "" || f.json {
		t.Errorf("defaults: %+v", c)
	}
	f, err = parseBench([]string{"locks", "--targets", "redlock", "--procs", " 2, 4", "--modes", "shared",
		"--redis", "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3", "--json"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c = f.cfg
	if len(c.Targets) != 1 || len(c.Procs) != 2 || c.Procs[1] != 4 || len(c.RedisAddrs) != 3 || !f.json {
		t.Errorf("parsed: %+v", c)
	}
	f, err = parseBench([]string{"locks", "--targets", "kvorum,zookeeper", "--zookeeper", "127.0.0.1:2181, 127.0.0.1:2182,127.0.0.1:2183"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c = f.cfg
	if strings.Join(c.Targets, ",") != "kvorum,zookeeper" || len(c.ZookeeperAddrs) != 3 || c.ZookeeperAddrs[1] != "127.0.0.1:2182" || c.ZookeeperServer != "" {
		t.Errorf("parsed: %+v", c)
	}
	f, err = parseBench([]string{"locks", "--targets", "zookeeper", "--zookeeper-server", "/opt/zookeeper"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c = f.cfg; c.ZookeeperServer != "/opt/zookeeper" || len(c.ZookeeperAddrs) != 0 {
		t.Errorf("parsed: %+v", c)
	}
}

// benchReport is the part of `kvorum bench locks --json` the test checks.
type benchReport struct {
	Targets []struct {
		Name    string   `json:"name"`
		Addrs   []string `json:"addrs"`
		Started bool     `json:"started_locally"`
		Skipped string   `json:"skipped"`
	} `json:"targets"`
	Runs []struct {
		Target     string  `json:"target"`
		Mode       string  `json:"mode"`
		Procs      int     `json:"procs"`
		Ops        int     `json:"operations"`
		Avg        float64 `json:"avg_ms"`
		Median     float64 `json:"median_ms"`
		Min        float64 `json:"min_ms"`
		Max        float64 `json:"max_ms"`
		P90        float64 `json:"p90_ms"`
		P99        float64 `json:"p99_ms"`
		PerProcess []int   `json:"per_process"`
		Spread     float64 `json:"fairness_spread_pct"`
		Error      string  `json:"error"`
	} `json:"runs"`
}

// buildBinary builds this command into a temporary directory.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kvorum")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// runJSON runs bin with args (and env added to the environment), which
// must exit 0 and print JSON on stdout, decoded into v. It returns the
// finished command and its stderr (also logged).
func runJSON(t *testing.T, bin string, env []string, v any, args ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("kvorum %s: %v in %.1fs\n%s", strings.Join(args, " "), err, time.Since(start).Seconds(), stderr.String())
	if err != nil {
		t.Fatalf("exit: %v\nstdout:\n%s", err, stdout.String())
	}
	if err := json.Unmarshal(stdout.Bytes(), v); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, stdout.String())
	}
	return cmd, stderr.String()
}

// The built binary runs the whole benchmark in small: its own 3-node
// cluster (child processes), 3 redis-servers, worker processes; the JSON
// report must be complete and sane, and nothing may be left running or
// on disk.
func TestBenchLocksCommand(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server not found: apt-get install redis-server (make test does this, via scripts/ensure-test-deps.sh)")
	}
	bin := buildBinary(t)
	tmp := t.TempDir() // the benchmark's temporary directory goes here
	var rep benchReport
	_, stderr := runJSON(t, bin, []string{"TMPDIR=" + tmp}, &rep, "bench", "locks", "--duration", "500ms", "--procs", "3", "--hold", "2ms", "--json")
	if len(rep.Targets) != 2 {
		t.Fatalf("targets %+v", rep.Targets)
	}
	for _, tg := range rep.Targets {
		if !tg.Started || len(tg.Addrs) != 3 || tg.Skipped != "" {
			t.Errorf("target %+v: want 3 servers started locally", tg)
		}
	}
	if len(rep.Runs) != 4 {
		t.Fatalf("%d runs, want 4 (2 targets × 2 modes)", len(rep.Runs))
	}
	for i, r := range rep.Runs {
		wantTarget, wantMode := []string{"kvorum", "redlock"}[i/2], []string{"own", "shared"}[i%2]
		if r.Target != wantTarget || r.Mode != wantMode || r.Procs != 3 {
			t.Errorf("run %d is %s %s %d, want %s %s 3", i, r.Target, r.Mode, r.Procs, wantTarget, wantMode)
		}
		if r.Error != "" || r.Ops <= 0 {
			t.Errorf("run %d (%s %s): error %q, %d operations", i, r.Target, r.Mode, r.Error, r.Ops)
			continue
		}
		if !(0 < r.Min && r.Min <= r.Median && r.Median <= r.P90 && r.P90 <= r.P99 && r.P99 <= r.Max && r.Min <= r.Avg && r.Avg <= r.Max) {
			t.Errorf("run %d (%s %s): min %v median %v p90 %v p99 %v max %v avg %v", i, r.Target, r.Mode, r.Min, r.Median, r.P90, r.P99, r.Max, r.Avg)
		}
		sum := 0
		for _, c := range r.PerProcess {
			sum += c
		}
		if len(r.PerProcess) != 3 || sum != r.Ops {
			t.Errorf("run %d: per process %v for %d operations", i, r.PerProcess, r.Ops)
		}
	}
	for _, want := range []string{"kvorum: starting a local 3-node cluster", "redlock: starting 3 standalone redis-server", "[4/4] redlock, shared lock, 3 processes"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("progress on stderr lacks %q", want)
		}
	}
	// Every server the benchmark started is gone, and so is its directory.
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

package lockbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/kvorum/kvorum/internal/localsrv"
	"github.com/kvorum/kvorum/internal/server"
	"github.com/redis/go-redis/v9"
)

// The test binary is also the workers' executable: with WorkerEnv set it
// runs one worker instead of the tests.
func TestMain(m *testing.M) {
	if spec := os.Getenv(WorkerEnv); spec != "" {
		os.Exit(WorkerMain(spec, os.Stdin, os.Stdout, os.Stderr))
	}
	redis.SetLogger(quiet{})
	os.Exit(m.Run())
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func TestComputeStats(t *testing.T) {
	ns := func(msv ...float64) []int64 {
		out := make([]int64, len(msv))
		for i, v := range msv {
			out[i] = int64(v * float64(time.Millisecond))
		}
		return out
	}
	// numpy.percentile([1..10], [50, 90, 99]) = 5.5, 9.1, 9.91
	s := computeStats(ns(10, 9, 8, 7, 6, 5, 4, 3, 2, 1))
	want := Stats{Ops: 10, AvgMs: 5.5, MedianMs: 5.5, MinMs: 1, MaxMs: 10, P90Ms: 9.1, P99Ms: 9.91}
	for name, p := range map[string][2]float64{
		"avg": {s.AvgMs, want.AvgMs}, "median": {s.MedianMs, want.MedianMs}, "min": {s.MinMs, want.MinMs},
		"max": {s.MaxMs, want.MaxMs}, "p90": {s.P90Ms, want.P90Ms}, "p99": {s.P99Ms, want.P99Ms},
	} {
		if math.Abs(p[0]-p[1]) > 1e-6 {
			t.Errorf("%s = %v, want %v", name, p[0], p[1])
		}
	}
	if s.Ops != 10 {
		t.Errorf("ops %d", s.Ops)
	}
	if one := computeStats(ns(3)); one.MedianMs != 3 || one.P99Ms != 3 || one.MinMs != 3 {
		t.Errorf("one sample: %+v", one)
	}
	if (computeStats(nil) != Stats{}) {
		t.Error("stats of nothing are not zero")
	}
	if got := spread([]int{90, 100, 110}); math.Abs(got-20) > 1e-9 {
		t.Errorf("spread %v, want 20", got)
	}
	if spread([]int{7}) != 0 || spread([]int{0, 0}) != 0 {
		t.Error("spread of one process or of nothing is not 0")
	}
}

func TestCheckExclusion(t *testing.T) {
	ok := []hold{{0, 0, 10, 20, 1}, {1, 0, 21, 30, 2}, {2, 0, 31, 40, 5}, {0, 0, 41, 50, 9}}
	if v := checkExclusion(ok, true); len(v) != 0 {
		t.Errorf("disjoint holds: %v", v)
	}
	overlap := []hold{{0, 0, 10, 20, 1}, {1, 0, 15, 30, 2}, {2, 0, 31, 40, 3}}
	if v := checkExclusion(overlap, false); len(v) != 1 || !strings.Contains(v[0], "mutual exclusion violated: 1 overlapping") {
		t.Errorf("overlap: %v", v)
	}
	tokens := []hold{{0, 0, 10, 20, 5}, {1, 0, 21, 30, 4}}
	if v := checkExclusion(tokens, true); len(v) != 1 || !strings.Contains(v[0], "fencing tokens out of order") {
		t.Errorf("token order: %v", v)
	}
	if v := checkExclusion(tokens, false); len(v) != 0 {
		t.Errorf("tokens checked although not recorded: %v", v)
	}
}

func TestHandoffs(t *testing.T) {
	holds := []hold{
		{proc: 0, start: 0, acq: 10, rel: 20},
		{proc: 1, start: 5, acq: 22, rel: 30},  // waiting at 20: hand-off 2
		{proc: 2, start: 35, acq: 36, rel: 40}, // asked after 30: not a hand-off
		{proc: 0, start: 38, acq: 47, rel: 50}, // waiting at 40: hand-off 7
	}
	gaps, held := handoffs(holds)
	if !slices.Equal(gaps, []int64{2, 7}) {
		t.Errorf("hand-offs %v, want [2 7]", gaps)
	}
	if !slices.Equal(held, []int64{10, 8, 4, 3}) {
		t.Errorf("holds %v, want [10 8 4 3]", held)
	}
}

func TestValidate(t *testing.T) {
	base := func() Config {
		return Config{Targets: []string{"kvorum"}, Procs: []int{1}, Modes: []string{"own"}, Hold: 3 * time.Millisecond,
			Duration: time.Second, TTL: 10 * time.Second, RedlockRetryDelay: 200 * time.Millisecond, Executable: "/bin/true"}
	}
	c := base()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for want, mod := range map[string]func(*Config){
		`--targets: unknown "etcd"`:            func(c *Config) { c.Targets = []string{"etcd"} },
		"--targets: no target":                 func(c *Config) { c.Targets = nil },
		`--modes: "own" given twice`:           func(c *Config) { c.Modes = []string{"own", "own"} },
		"--procs: 0 is not between 1 and 64":   func(c *Config) { c.Procs = []int{0} },
		"--procs: 3 given twice":               func(c *Config) { c.Procs = []int{3, 3} },
		"--duration must be positive":          func(c *Config) { c.Duration = 0 },
		"--hold must not be negative":          func(c *Config) { c.Hold = -1 },
		"must be at least 10 × --hold":         func(c *Config) { c.Hold = 2 * time.Second },
		"--ttl must be between":                func(c *Config) { c.TTL = time.Millisecond },
		"--redlock-retry-delay must be":        func(c *Config) { c.RedlockRetryDelay = 0 },
		`address "nowhere" is not host:port`:   func(c *Config) { c.KvorumAddrs = []string{"nowhere"} },
		"--redis given but --targets does not": func(c *Config) { c.RedisAddrs = []string{"127.0.0.1:1"} },
		"--zookeeper given but --targets does": func(c *Config) { c.ZookeeperAddrs = []string{"127.0.0.1:2181"} },
		`address "zk" is not host:port`: func(c *Config) {
			c.Targets, c.ZookeeperAddrs = []string{TargetZookeeper}, []string{"zk"}
		},
		"--zookeeper-server and --zookeeper exclude": func(c *Config) {
			c.Targets, c.ZookeeperAddrs, c.ZookeeperServer = []string{TargetZookeeper}, []string{"127.0.0.1:2181"}, "/zk.jar"
		},
	} {
		c := base()
		mod(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want an error with %q, got %v", want, err)
		}
	}
}

func TestTargets(t *testing.T) {
	if strings.Join(DefaultTargets, ",") != "kvorum,redlock" {
		t.Errorf("default targets %v: zookeeper must stay optional", DefaultTargets)
	}
	if strings.Join(AllTargets, ",") != "kvorum,redlock,zookeeper" {
		t.Errorf("all targets %v", AllTargets)
	}
	c := Config{Targets: []string{TargetKvorum, TargetZookeeper}, Procs: []int{1}, Modes: []string{ModeShared},
		Hold: 3 * time.Millisecond, Duration: time.Second, TTL: 10 * time.Second, RedlockRetryDelay: time.Second,
		Executable: "/bin/true", ZookeeperAddrs: []string{"127.0.0.1:2181", "[::1]:2182"}}
	if err := c.Validate(); err != nil {
		t.Errorf("kvorum,zookeeper with addresses: %v", err)
	}
	if !recordsTokens(TargetKvorum) || !recordsTokens(TargetZookeeper) || recordsTokens(TargetRedlock) {
		t.Error("fencing tokens: want kvorum and zookeeper, not redlock")
	}
}

func TestZookeeperRecipeParts(t *testing.T) {
	if got := zkLockPath("lockbench:ab12:zookeeper:own:3:p1"); got != "/kvorum-bench/lockbench-ab12-zookeeper-own-3-p1" {
		t.Errorf("lock path %q", got)
	}
	for name, want := range map[string]int64{
		"_c_0123456789abcdef0123456789abcdef-lock-0000000042": 42,
		"/kvorum-bench/x/_c_00-lock-0000000000":               0,
		"lock-2147483647":                                     2147483647,
	} {
		if got, err := zkSeq(name); err != nil || got != want {
			t.Errorf("zkSeq(%q) = %d, %v; want %d", name, got, err, want)
		}
	}
	for _, bad := range []string{"other", "lock-", "lock-x1"} {
		if _, err := zkSeq(bad); err == nil {
			t.Errorf("zkSeq(%q): no error", bad)
		}
	}
	cfg := zkConfig("/d/zk-1", "127.0.0.1:15001", [][2]string{{"127.0.0.1:15002", "127.0.0.1:15003"}, {"127.0.0.1:15004", "127.0.0.1:15005"}})
	for _, want := range []string{"tickTime=2000\n", "dataDir=/d/zk-1\n", "clientPort=15001\n", "clientPortAddress=127.0.0.1\n",
		"forceSync=yes\n", "maxClientCnxns=0\n", "admin.enableServer=false\n",
		"server.1=127.0.0.1:15002:15003\n", "server.2=127.0.0.1:15004:15005\n"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("zoo.cfg lacks %q:\n%s", want, cfg)
		}
	}
	if standalone := zkConfig("/d", "127.0.0.1:15001", nil); strings.Contains(standalone, "server.") {
		t.Errorf("standalone zoo.cfg names servers:\n%s", standalone)
	}
}

func TestZookeeperServerLookup(t *testing.T) {
	dir := t.TempDir()
	jar := filepath.Join(dir, "zookeeper.jar")
	if err := os.WriteFile(jar, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("zookeeper.jar", filepath.Join(dir, "zookeeper-3.8.0.jar")); err != nil {
		t.Fatal(err)
	}
	if v := zkJarVersion(jar); v != "ZooKeeper 3.8.0" {
		t.Errorf("version %q", v)
	}
	// A given server that does not exist is an error; no java skips.
	if _, _, _, _, err := zkServer(filepath.Join(dir, "nothing.jar")); err == nil || !strings.Contains(err.Error(), "--zookeeper-server") {
		t.Errorf("missing given server: %v", err)
	}
	t.Setenv("PATH", t.TempDir())
	if _, _, _, why, err := zkServer(jar); err != nil || !strings.Contains(why, "java is not on PATH") {
		t.Errorf("no java: why %q, err %v", why, err)
	}
}

func TestZookeeperSkippedWithoutJava(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no java anywhere
	cfg := testConfig(t)
	cfg.Targets = []string{TargetZookeeper}
	var progress bytes.Buffer
	cfg.Progress = &progress
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Skipped for want of java or, without the zookeeper package, its jar.
	if len(rep.Targets) != 1 || rep.Targets[0].Skipped == "" || len(rep.Runs) != 0 {
		t.Fatalf("report %+v", rep)
	}
	if !strings.Contains(progress.String(), "zookeeper: skipped: ") || !strings.Contains(progress.String(), "--zookeeper host:port") {
		t.Errorf("progress does not say why zookeeper was skipped:\n%s", progress.String())
	}
	var text bytes.Buffer
	rep.WriteText(&text)
	if !strings.Contains(text.String(), "zookeeper: skipped:") {
		t.Errorf("report does not say zookeeper was skipped:\n%s", text.String())
	}
}

func TestRedlockSkippedWithoutRedisServer(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no redis-server anywhere
	cfg := testConfig(t)
	cfg.Targets = []string{TargetRedlock}
	var progress bytes.Buffer
	cfg.Progress = &progress
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Targets) != 1 || !strings.Contains(rep.Targets[0].Skipped, "redis-server is not on PATH") || len(rep.Runs) != 0 {
		t.Fatalf("report %+v", rep)
	}
	if !strings.Contains(progress.String(), "redlock: skipped: redis-server is not on PATH") {
		t.Errorf("progress does not say why redlock was skipped:\n%s", progress.String())
	}
	var text bytes.Buffer
	rep.WriteText(&text)
	if !strings.Contains(text.String(), "redlock: skipped:") {
		t.Errorf("report does not say redlock was skipped:\n%s", text.String())
	}
}

func testConfig(t *testing.T) Config {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Config{
		Targets: []string{TargetKvorum, TargetRedlock}, Procs: []int{1, 3}, Modes: []string{ModeOwn, ModeShared},
		Hold: 2 * time.Millisecond, Duration: 400 * time.Millisecond, TTL: 10 * time.Second,
		RedlockRetryDelay: 50 * time.Millisecond, Executable: exe, Dir: t.TempDir(),
	}
}

// startKvorum runs a 3-node cluster in this process (on disk, like real
// nodes: fsync is part of what a lock costs) and returns its client
// addresses.
func startKvorum(t *testing.T) []string {
	t.Helper()
	initial := map[uint64]string{}
	cfgs := make([]server.Config, 3)
	for i := range cfgs {
		id := uint64(i + 1)
		cl, _ := localsrv.FreeAddr()
		peer, err := localsrv.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		cfgs[i] = server.Config{ID: id, DataDir: t.TempDir(), FS: vfs.Default, ClientAddr: cl, PeerAddr: peer,
			AdminAddr: "-", TickInterval: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
		initial[id] = peer
	}
	var addrs []string
	var nodes []*server.Node
	for i := range cfgs {
		cfgs[i].InitialCluster = initial
		n, err := server.Start(cfgs[i])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Stop() })
		nodes = append(nodes, n)
		addrs = append(addrs, n.ClientAddr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for _, n := range nodes {
		if err := n.WaitLeader(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return addrs
}

// A whole benchmark in small: both targets, both modes, 1 and 3 worker
// processes, 0.4s each. Needs redis-server (make test installs it).
func TestRunBothTargets(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server not found: apt-get install redis-server (make test does this, via scripts/ensure-test-deps.sh)")
	}
	cfg := testConfig(t)
	cfg.KvorumAddrs = startKvorum(t)
	var progress bytes.Buffer
	cfg.Progress = &progress
	start := time.Now()
	rep, err := Run(context.Background(), cfg)
	t.Logf("ran in %v; progress:\n%s", time.Since(start).Round(time.Millisecond), progress.String())
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	rep.WriteText(&text)
	t.Logf("report:\n%s", text.String())
	if rep.Disk == nil || rep.Disk.P50Ms <= 0 || !strings.Contains(text.String(), "disk floor: fdatasync") {
		t.Errorf("the disk's fsync floor is not in the report: %+v", rep.Disk)
	}
	if len(rep.Targets) != 2 || rep.Targets[0].Started || !rep.Targets[1].Started || len(rep.Targets[1].Addrs) != 3 {
		t.Errorf("targets %+v: want kvorum as given and 3 local redis-servers", rep.Targets)
	}
	if len(rep.Runs) != 8 {
		t.Fatalf("%d runs, want 2 targets × 2 modes × 2 process counts", len(rep.Runs))
	}
	i := 0
	for _, target := range cfg.Targets {
		for _, mode := range cfg.Modes {
			for _, procs := range cfg.Procs {
				checkRun(t, rep.Runs[i], target, mode, procs)
				i++
			}
		}
	}
	if rep.Failed() {
		t.Error("report says a run failed")
	}
	// Contended Redlock attempts fail and are retried; kvorum queues.
	if r := rep.Runs[7]; r.Attempts <= int64(r.Ops) {
		t.Errorf("redlock shared 3: %d attempts for %d acquisitions: no contention seen", r.Attempts, r.Ops)
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	runs, _ := back["runs"].([]any)
	if len(runs) != 8 {
		t.Fatalf("JSON has %d runs", len(runs))
	}
	for _, k := range []string{"target", "mode", "procs", "operations", "avg_ms", "median_ms", "min_ms", "max_ms", "p90_ms", "p99_ms", "per_process", "fairness_spread_pct"} {
		if _, ok := runs[0].(map[string]any)[k]; !ok {
			t.Errorf("JSON run lacks %q: %s", k, js.String()[:300])
		}
	}
}

func checkRun(t *testing.T, r RunResult, target, mode string, procs int) {
	t.Helper()
	name := fmt.Sprintf("%s %s %d", target, mode, procs)
	if r.Target != target || r.Mode != mode || r.Procs != procs {
		t.Errorf("%s: run is %s %s %d", name, r.Target, r.Mode, r.Procs)
	}
	if r.Failed() || r.Errors != 0 || len(r.Violations) != 0 {
		t.Errorf("%s: failed: %s (errors %d, violations %v)", name, r.Error, r.Errors, r.Violations)
	}
	if r.Ops <= 0 {
		t.Errorf("%s: no acquisitions", name)
		return
	}
	if !(0 < r.MinMs && r.MinMs <= r.MedianMs && r.MedianMs <= r.P90Ms && r.P90Ms <= r.P99Ms && r.P99Ms <= r.MaxMs) {
		t.Errorf("%s: min %v median %v p90 %v p99 %v max %v not ordered", name, r.MinMs, r.MedianMs, r.P90Ms, r.P99Ms, r.MaxMs)
	}
	if r.AvgMs < r.MinMs || r.AvgMs > r.MaxMs {
		t.Errorf("%s: avg %v outside [min %v, max %v]", name, r.AvgMs, r.MinMs, r.MaxMs)
	}
	sum := 0
	for p, c := range r.PerProcess {
		sum += c
		// Every process gets the lock: own locks never wait, and
		// kvorum's queue is FIFO. (Redlock under contention may starve
		// one: that is a result, not a failure.)
		if c == 0 && (mode == ModeOwn || target == TargetKvorum) {
			t.Errorf("%s: process %d acquired nothing", name, p)
		}
	}
	if len(r.PerProcess) != procs || sum != r.Ops {
		t.Errorf("%s: per process %v, ops %d", name, r.PerProcess, r.Ops)
	}
	// A hold of 2ms bounds how many acquisitions fit in 0.4s.
	if perLock := r.Ops / map[bool]int{true: procs, false: 1}[mode == ModeOwn]; perLock > 200 {
		t.Errorf("%s: %d acquisitions per lock in 0.4s with a 2ms hold", name, perLock)
	}
	if want := float64(r.Ops) / 0.4; math.Abs(r.OpsPerSec-want) > 1e-6 {
		t.Errorf("%s: ops/s %v, want %v", name, r.OpsPerSec, want)
	}
}

// A worker that cannot set up fails the run with the worker's reason, and
// the benchmark goes on (a redis-server is no kvorum: LEASE is unknown).
func TestRunFailsOnWorkerError(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redis-server not found: apt-get install redis-server (make test does this, via scripts/ensure-test-deps.sh)")
	}
	addrs, procs, err := localsrv.RedisServers(context.Background(), bin, t.TempDir(), "redis", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer localsrv.StopAll(procs)
	cfg := testConfig(t)
	cfg.Targets, cfg.Procs, cfg.Modes, cfg.KvorumAddrs = []string{TargetKvorum}, []int{2}, []string{ModeOwn, ModeShared}, addrs
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 2 || !rep.Failed() {
		t.Fatalf("runs %+v: want 2 failed runs", rep.Runs)
	}
	for _, r := range rep.Runs {
		if !strings.Contains(r.Error, "did not start") || !strings.Contains(strings.ToLower(r.Error), "unknown command") {
			t.Errorf("run error %q does not give the worker's reason", r.Error)
		}
	}
	var text bytes.Buffer
	rep.WriteText(&text)
	if !strings.Contains(text.String(), "FAILED kvorum own 2:") {
		t.Errorf("the table does not report the failure:\n%s", text.String())
	}
}

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/kvorum/kvorum/internal/lockbench"
)

var benchHelp = helpText{
	usage: `kvorum bench locks [--targets kvorum,redlock[,zookeeper]] [--procs 1,3,5] [--modes own,shared]
    [--hold 3ms] [--duration 10s] [--json] [--kvorum HOST:PORT,...] [--redis HOST:PORT,...]
    [--zookeeper HOST:PORT,...]`,
	description: `
The distributed-locking benchmark of Grzesik & Mrozek (paper 000, sections
4-5): client processes acquire a lock (timed), hold it for --hold, release
it, in a loop for --duration. For every target, mode and process count it
reports the lock acquire time like the paper's Tables 1 and 2 (average,
median, min, max, 90th and 99th percentile, in ms), acquisitions per
process and their spread ((max - min) / mean, %).

Targets:
  kvorum   LOCK ACQUIRE name lease / LOCK RELEASE name token (pkg/kvlock:
           one lease per process, kept alive in the background); process i
           talks to node i mod 3
  redlock  the Redlock algorithm as the paper's python redlock library runs
           it, on 3 independent Redis instances: SET name value NX PX ttl on
           each in turn, acquired with a majority within the validity,
           else undone and retried after a random delay below
           --redlock-retry-delay; released with a compare-and-delete script
  zookeeper
           (only when named in --targets) ZooKeeper's fair lock recipe, as
           the paper's python kazoo Lock: one session per process (timeout
           --ttl); acquire creates an ephemeral sequential znode under
           /kvorum-bench/<lock> and, unless it is the lowest, waits for the
           znode just before it to go (FIFO); release deletes it. Process i
           talks to server i mod 3
Modes:
  own      every process locks its own name (Table 1)
  shared   all processes contend for one name (Table 2)

Each client is its own OS process (this binary re-executed as a worker);
workers connect first and start together. Without --kvorum a local 3-node
cluster is started from this binary ('kvorum start', child processes on
127.0.0.1); without --redis, 3 standalone redis-server processes (no
persistence), or, when redis-server is not on PATH, the redlock target is
skipped with a note saying so; without --zookeeper, a 3-node ZooKeeper
ensemble on 127.0.0.1 (java -cp --zookeeper-server, forceSync=yes, its
default: every write is fsynced, as kvorum's are), or, without java or
the server jar (apt-get install zookeeper), the zookeeper target is
skipped with a note. Everything started is stopped at the end.
Shared-lock runs are also checked: no two processes' holds may overlap,
and fencing tokens (kvorum's; ZooKeeper's znode sequence numbers) must
increase with every grant.

Progress goes to stderr, the report to stdout. Exit status: 0 every run
succeeded; 1 a run failed (errors, a violation, no acquisition) or the
servers could not be started; 2 bad command line.`,
	groups: []flagGroup{
		{"Workload", []string{"targets", "modes", "procs", "hold", "duration", "ttl", "redlock-retry-delay"}},
		{"Servers", []string{"kvorum", "redis", "redis-server", "zookeeper", "zookeeper-server", "data-dir"}},
		{"Output", []string{"json"}},
	},
	footer: `
Examples:
  kvorum bench locks                                  # the full table, ~2.5 min
  kvorum bench locks --targets kvorum --modes shared --procs 5 --duration 30s
  kvorum bench locks --kvorum 10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379 \
      --redis 10.0.1.1:6379,10.0.1.2:6379,10.0.1.3:6379 --json
  kvorum bench locks --targets kvorum,zookeeper --modes shared   # vs the fair lock`,
}

type benchFlags struct {
	fs                            *flag.FlagSet
	cfg                           lockbench.Config
	targets, modes, procs, kvorum string
	redis, zookeeper              string
	json                          bool
}

func newBenchFlags() *benchFlags {
	f := &benchFlags{fs: flag.NewFlagSet("bench locks", flag.ContinueOnError)}
	fs, c := f.fs, &f.cfg
	fs.StringVar(&f.targets, "targets", strings.Join(lockbench.DefaultTargets, ","), "comma-separated `LIST` of targets: "+
		strings.Join(lockbench.AllTargets, ", "))
	fs.StringVar(&f.modes, "modes", "own,shared", "comma-separated `LIST` of modes: own (a lock per process), shared (one lock)")
	fs.StringVar(&f.procs, "procs", "1,3,5", "comma-separated `LIST` of client process counts, each 1 to 64")
	fs.DurationVar(&c.Hold, "hold", lockbench.DefaultHold, "how long each acquisition is held (`DURATION`)")
	fs.DurationVar(&c.Duration, "duration", lockbench.DefaultDuration, "length of each run (`DURATION`); the paper's runs lasted 2m")
	fs.DurationVar(&c.TTL, "ttl", lockbench.DefaultTTL, "kvorum lease TTL, Redlock key TTL and ZooKeeper session timeout (`DURATION`):\nhow long a lock outlives a crashed holder")
	fs.DurationVar(&c.RedlockRetryDelay, "redlock-retry-delay", lockbench.DefaultRedlockRetryDelay, "a failed Redlock attempt is retried after a random delay below this\n(`DURATION`; the python redlock library's retry_delay)")
	fs.StringVar(&f.kvorum, "kvorum", "", "client addresses of a running kvorum cluster (`HOST:PORT,...`) (default: start a\nlocal 3-node cluster)")
	fs.StringVar(&f.redis, "redis", "", "independent Redis instances for Redlock (`HOST:PORT,...`) (default: start 3\nredis-server processes)")
	fs.StringVar(&c.RedisServer, "redis-server", "", "the redis-server binary to start (`PATH`) (default: redis-server on PATH)")
	fs.StringVar(&f.zookeeper, "zookeeper", "", "client addresses of a running ZooKeeper ensemble (`HOST:PORT,...`) (default: start\na local 3-node ensemble)")
	fs.StringVar(&c.ZookeeperServer, "zookeeper-server", "", "the ZooKeeper server to start with java: a server jar or an Apache ZooKeeper\ndirectory with lib/ (`PATH`) (default: "+lockbench.DefaultZookeeperServer+",\nfrom apt-get install zookeeper)")
	fs.StringVar(&c.Dir, "data-dir", "", "`DIR` for the local servers' data and logs (default: a temporary directory,\nremoved unless a run failed)")
	fs.BoolVar(&f.json, "json", false, "print the report as JSON")
	return f
}

// writeBenchOverview is `kvorum bench --help`: the benchmarks there are.
func writeBenchOverview(w io.Writer) {
	fmt.Fprint(w, `Usage:
  kvorum bench locks [flags]
  kvorum bench kv [flags]
  kvorum bench failover [flags]

Benchmarks:
  locks   distributed locks: kvorum's LOCK commands vs Redlock on Redis and
          ZooKeeper's fair lock recipe; lock acquire times as in paper 000's
          Tables 1 and 2
  kv      YCSB-style key-value workloads (load, a, b, c, 90/10, 5/95, insert;
          paper 002): throughput, latency percentiles, server CPU and memory of
          kvorum vs Redis (with and without fsync) and etcd, or any
          Redis-protocol or etcd server
  failover  a constant-rate write load through the loss of the leader and
          of a follower (paper 003): per-second throughput and latency,
          seconds of unavailability, errors, lost writes; on host
          processes and on deploy/compose.yaml's containers in one run

Run 'kvorum bench <benchmark> --help' for the flags of each.
`)
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// parseBench parses `kvorum bench ...` (args after "bench").
func parseBench(args []string, stdout io.Writer) (*benchFlags, error) {
	f := newBenchFlags()
	if len(args) == 0 {
		return nil, usageErrorf("bench", "missing the benchmark: kvorum bench locks [flags] or kvorum bench kv [flags]")
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		writeBenchOverview(stdout)
		return nil, errHelp
	case "locks":
	default:
		return nil, usageErrorf("bench", "unknown benchmark %q (there are three: locks, kv, failover)", args[0])
	}
	if err := parseFlags("bench", f.fs, benchHelp, args[1:], stdout); err != nil {
		return nil, err
	}
	bad := func(format string, a ...any) error { return usageErrorf("bench", format, a...) }
	if f.fs.NArg() > 0 {
		return nil, bad("unexpected argument %q (all options are --flags)", f.fs.Arg(0))
	}
	c := &f.cfg
	c.Targets, c.Modes = splitList(f.targets), splitList(f.modes)
	for _, p := range splitList(f.procs) {
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, bad("--procs: %q is not a number", p)
		}
		c.Procs = append(c.Procs, n)
	}
	c.KvorumAddrs, c.RedisAddrs, c.ZookeeperAddrs = splitList(f.kvorum), splitList(f.redis), splitList(f.zookeeper)
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("cannot find this executable to run workers and nodes with: %w", err)
	}
	c.Executable, c.WorkerArgs = exe, []string{"bench", "locks"}
	if err := c.Validate(); err != nil {
		return nil, bad("%v", err)
	}
	return f, nil
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	// A worker of a running benchmark (the parent set the variable).
	if spec := os.Getenv(lockbench.WorkerEnv); spec != "" {
		if code := lockbench.WorkerMain(spec, os.Stdin, stdout, stderr); code != 0 {
			return &exitErr{code: exitError}
		}
		return nil
	}
	if len(args) > 0 && args[0] == "kv" {
		return runBenchKV(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "failover" {
		return runBenchFailover(ctx, args[1:], stdout, stderr)
	}
	f, err := parseBench(args, stdout)
	if err != nil {
		return err
	}
	// Ctrl-C stops the workers and the servers the benchmark started.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := f.cfg
	cfg.Progress = stderr
	rep, err := lockbench.Run(ctx, cfg)
	if rep != nil && (len(rep.Runs) > 0 || err == nil) {
		if f.json {
			if jerr := rep.WriteJSON(stdout); jerr != nil {
				return jerr
			}
		} else {
			rep.WriteText(stdout)
		}
	}
	if err != nil {
		return &exitErr{code: exitError, msg: "kvorum bench locks: " + err.Error()}
	}
	if rep.Failed() {
		failed := 0
		for i := range rep.Runs {
			if rep.Runs[i].Failed() {
				failed++
			}
		}
		return &exitErr{code: exitError, msg: fmt.Sprintf("kvorum bench locks: %d of %d runs failed", failed, len(rep.Runs))}
	}
	return nil
}

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
	"time"

	"github.com/kvorum/kvorum/internal/kvbench"
)

var benchKVHelp = helpText{
	usage: `kvorum bench kv [--start kvorum,redis,redis-aof,etcd] [--target NAME=URL ...]
    [--workloads load,a,c,5/95] [--clients 1,16,32] [--distribution uniform|zipfian]
    [--records N] [--value-size BYTES] [--pipeline N] [--duration 10s] [--warmup 2s]
    [--baseline NAME] [--json] [--png FILE]`,
	description: `
A YCSB-style key-value benchmark (paper 002, Anthony & Rao: read-heavy,
balanced and write-heavy mixes on 1-32 clients; YCSB's workloads A, B, C
and its load phase). Every target is measured in the same run with the
same operation sequence (same generator and seed); for each (workload,
clients) pair the targets run one after another, so their ratios are fair
on a noisy machine.

Workloads (--workloads, run in the order given):
  load     insert --records records once (YCSB's load phase), then stop;
           --duration, --warmup and --ops do not apply
  a        50% read, 50% update (YCSB A, paper 002's balanced)
  b        95% read, 5% update (YCSB B)
  c        100% read (YCSB C)
  90/10    90% read, 10% update (paper 002's read-heavy)
  5/95     5% read, 95% update (paper 002's write-heavy)
  insert   insert only: new records beyond the loaded ones
Keys are YCSB's ("user" + the FNV hash of the record number); reads are
GET (etcd: Range, linearizable), updates and inserts SET of a --value-size
value (etcd: Put). Record numbers are uniform or YCSB's scrambled zipfian
(theta 0.99: of 100,000 records, the hottest 1% get about 30% of the
operations, the hottest 10% about 45%).
Run load first: reads of absent keys are counted as misses, not errors.

Clients are closed-loop: each has one connection and keeps --pipeline
operations in flight (written at once, then the replies read). The Redis
client is a minimal RESP client that allocates nothing per operation: it
runs on the same machine as the servers and takes CPU from them; the
benchmark's own CPU time is reported (bench CPU s).

Targets:
  running  --target NAME=URL: redis://host:port (kvorum or any Redis) or
           etcd://host:port; several addresses in one URL
           (redis://h1:p1,h2:p2,h3:p3) spread the clients over them
           round-robin. Give --pids NAME=PID,... for its CPU and memory.
  started  --start: servers the benchmark starts on 127.0.0.1 and stops at
           the end (also on Ctrl-C; only those, by PID), each a target of
           its name:
    kvorum     a 3-node cluster of this binary ('kvorum start'), writes
               fsynced on a majority; clients on all 3 nodes (or the
               leader: --kvorum-nodes leader)
    redis      redis-server, no persistence
    redis-aof  redis-server --appendonly yes --appendfsync always (every
               write fsynced before the reply)
    etcd       a 3-member etcd cluster (/usr/bin/etcd from Debian's
               etcd-server; fsync on, etcd's default); clients spread
               over the members
  A server whose binary is missing is skipped with a note.

Measured per (workload, clients, target) cell: operations per second (and
the ratio to --baseline), latency mean/p50/p95/p99/p99.9/max per operation
kind (read, update, insert; an HDR-style histogram, 0.4% precision),
errors (error replies, broken connections; a cell with errors is marked
FAILED), the servers' CPU seconds in the window (utime+stime from
/proc/PID/stat, summed over the target's processes) and per operation,
their RSS at the end of the cell (VmRSS, and in brackets its anonymous part,
RssAnon: what the server allocated, without the file pages of its binary,
which every process of the same binary shares), and this process's CPU
seconds.

The report goes to stdout as Markdown tables (for docs/benchmarks.md), or
JSON with --json; --png draws throughput (and p99 latency) per workload
and target. Progress goes to stderr: a line per second while a cell runs
when stderr is a terminal or with --progress, else a line per cell.
Exit status: 0 every cell succeeded; 1 a cell failed or the servers could
not be started; 2 bad command line.`,
	groups: []flagGroup{
		{"Workload", []string{"workloads", "distribution", "records", "value-size", "clients", "pipeline", "duration", "ops", "warmup", "seed"}},
		{"Targets", []string{"start", "target", "pids", "baseline", "kvorum-nodes", "redis-server", "etcd", "data-dir"}},
		{"Output", []string{"json", "png", "progress"}},
	},
	footer: `
Examples:
  kvorum bench kv --start kvorum,redis                    # load, a, b, c: ~1.5 min
  kvorum bench kv --start kvorum,redis,redis-aof,etcd --workloads load,a,c,5/95 \
      --clients 16 --distribution zipfian --baseline redis-aof --png /tmp/kv.png
  kvorum bench kv --start kvorum --workloads load,90/10,a,5/95 --clients 1,4,8,16,32
  kvorum bench kv --target prod=redis://10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379 \
      --target ref=redis://10.0.1.1:6379 --baseline ref --pipeline 16 --json
  kvorum bench kv --start redis --duration 1s --warmup 0 --records 1000`,
}

// listFlag is a repeatable flag collecting its values.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

type benchKVFlags struct {
	fs                        *flag.FlagSet
	cfg                       kvbench.Config
	workloads, clients, start string
	targets, pids             listFlag
	seed                      uint64
	json, progress            bool
	png                       string
}

func newBenchKVFlags() *benchKVFlags {
	f := &benchKVFlags{fs: flag.NewFlagSet("bench kv", flag.ContinueOnError)}
	fs, c := f.fs, &f.cfg
	fs.StringVar(&f.workloads, "workloads", "load,a,b,c", "comma-separated `LIST` of workloads, run in order: "+strings.Join(kvbench.WorkloadNames(), ", "))
	fs.StringVar(&c.Distribution, "distribution", kvbench.DistZipfian, "key distribution: uniform or zipfian (`NAME`; YCSB's scrambled zipfian, theta 0.99)")
	fs.IntVar(&c.Records, "records", kvbench.DefaultRecords, "number of records (`N`): load inserts them, the others read and update them")
	c.ValueSize = kvbench.DefaultValueSize
	fs.Var(sizeValue{&c.ValueSize}, "value-size", "value size (`BYTES`, e.g. 1024, 4KiB)")
	fs.StringVar(&f.clients, "clients", "16", "comma-separated `LIST` of client counts; each workload runs once per count")
	fs.IntVar(&c.Pipeline, "pipeline", kvbench.DefaultPipeline, "operations in flight per client (`N`): written together, then the replies read")
	fs.DurationVar(&c.Duration, "duration", kvbench.DefaultDuration, "measured time of each cell (`DURATION`); 0 with --ops: until --ops")
	fs.Int64Var(&c.Ops, "ops", 0, "stop a cell after `N` measured operations (0: no cap; --duration still applies)")
	fs.DurationVar(&c.Warmup, "warmup", kvbench.DefaultWarmup, "unmeasured time at the start of each cell (`DURATION`)")
	fs.Uint64Var(&f.seed, "seed", kvbench.DefaultSeed, "seed of the operation sequence (`N`); the same for every target")
	fs.StringVar(&f.start, "start", "", "comma-separated `LIST` of servers to start locally, each a target of its name:\n"+strings.Join(kvbench.Startable, ", "))
	fs.Var(&f.targets, "target", "a running server to measure (`NAME=URL`, repeatable or comma-separated):\nredis://host:port[,host:port...] or etcd://host:port[,...]")
	fs.Var(&f.pids, "pids", "server processes of a --target, for CPU and memory (`NAME=PID,PID,...`,\nrepeatable)")
	fs.StringVar(&c.Baseline, "baseline", "", "target the ratio columns are relative to (`NAME`) (default: no ratios)")
	fs.StringVar(&c.KvorumNodes, "kvorum-nodes", kvbench.KvorumNodesAll, "which nodes of the started kvorum cluster the clients use: all (round-robin)\nor leader (`WHICH`)")
	fs.StringVar(&c.RedisServer, "redis-server", "", "the redis-server binary to start (`PATH`) (default: redis-server on PATH)")
	fs.StringVar(&c.EtcdBin, "etcd", "", "the etcd binary to start (`PATH`) (default: "+kvbench.DefaultEtcd+", else etcd on PATH)")
	fs.StringVar(&c.Dir, "data-dir", "", "`DIR` for the started servers' data and logs (default: a temporary directory,\nremoved unless a cell failed)")
	fs.BoolVar(&f.json, "json", false, "print the full report as JSON instead of tables")
	fs.StringVar(&f.png, "png", "", "also draw a chart of throughput and p99 latency into `FILE` (PNG) (default: none)")
	fs.BoolVar(&f.progress, "progress", false, "a progress line every second even when stderr is not a terminal")
	return f
}

// parseBenchKV parses `kvorum bench kv ...` (args after "kv").
func parseBenchKV(args []string, stdout io.Writer) (*benchKVFlags, error) {
	f := newBenchKVFlags()
	if err := parseFlags("bench kv", f.fs, benchKVHelp, args, stdout); err != nil {
		return nil, err
	}
	bad := func(format string, a ...any) error { return usageErrorf("bench kv", format, a...) }
	if f.fs.NArg() > 0 {
		return nil, bad("unexpected argument %q (all options are --flags)", f.fs.Arg(0))
	}
	c := &f.cfg
	c.Seed = f.seed
	var err error
	if c.Workloads, err = kvbench.ParseWorkloads(f.workloads); err != nil {
		return nil, bad("--workloads: %v", err)
	}
	for _, p := range splitList(f.clients) {
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, bad("--clients: %q is not a number", p)
		}
		c.Clients = append(c.Clients, n)
	}
	if c.Targets, err = kvbench.ParseTargets(f.targets); err != nil {
		return nil, bad("--target: %v", err)
	}
	if c.PIDs, err = kvbench.ParsePIDs(f.pids); err != nil {
		return nil, bad("--pids: %v", err)
	}
	c.Start = splitList(f.start)
	if len(c.Start) > 0 {
		if c.Executable, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("cannot find this executable to start kvorum nodes with: %w", err)
		}
	}
	if err := c.Validate(); err != nil {
		return nil, bad("%v", err)
	}
	return f, nil
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func runBenchKV(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseBenchKV(args, stdout)
	if err != nil {
		return err
	}
	// Ctrl-C stops the clients and the servers the benchmark started.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := f.cfg
	cfg.Progress = stderr
	cfg.Ticker = f.progress || isTerminal(stderr)
	start := time.Now()
	rep, err := kvbench.Run(ctx, cfg)
	if rep != nil && (len(rep.Cells) > 0 || err == nil) {
		if f.json {
			if jerr := rep.WriteJSON(stdout); jerr != nil {
				return jerr
			}
		} else {
			rep.WriteText(stdout)
		}
		if f.png != "" && len(rep.Cells) > 0 {
			if perr := rep.WritePNG(f.png); perr != nil {
				fmt.Fprintf(stderr, "kvorum bench kv: chart: %v\n", perr)
				if err == nil {
					err = perr
				}
			} else {
				fmt.Fprintf(stderr, "chart written to %s\n", f.png)
			}
		}
	}
	fmt.Fprintf(stderr, "kvorum bench kv: done in %v\n", time.Since(start).Round(time.Second))
	if err != nil {
		return &exitErr{code: exitError, msg: "kvorum bench kv: " + err.Error()}
	}
	if rep.Failed() {
		return &exitErr{code: exitError, msg: fmt.Sprintf("kvorum bench kv: %d of %d cells failed", rep.FailedCells(), len(rep.Cells))}
	}
	return nil
}

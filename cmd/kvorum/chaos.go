package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kvorum/kvorum/internal/chaos"
)

var chaosHelp = helpText{
	usage: `kvorum chaos [--nodes 3|5] [--duration 30s] [--seed N] [--faults LIST] [--network auto|netns|proxy] [flags]`,
	description: `
Starts a new cluster of real kvorum processes (this binary, 'kvorum start'),
runs a randomized Redis-protocol workload against every node, and injects
faults for --duration, one at a time:

  kill       kill -9 of a node (the leader or a follower), restarted later
  pause      SIGSTOP of a node (mostly the leader) for 2-3.5 election
             timeouts, then SIGCONT
  restart    clean restart: SIGTERM, wait for the exit, start again
  partition  cut node-to-node traffic, then heal it: isolate the leader,
             isolate a follower, a one-way cut between the leader and a
             follower, and with 5 nodes a 3|2 split (leader on either side).
             Clients keep reaching every node, as clients next to the
             minority side of a real partition do (they get CLUSTERDOWN).

After a fault is healed the next one waits until a write succeeds again
(longer than --recovery-timeout is a failure), then --interval. One line is
printed per fault injected and healed. At the end every node is running
and connected; the command then checks that the cluster serves writes,
that every node is ready and agrees on the leader, reads back every
acknowledged write through every node, checks that the nodes reach the
same raft_applied_index (INFO), and checks the recorded history for
linearizability (porcupine). It prints a verdict (a table, or JSON with
--json): network mode, seed, operations, faults by kind, linearizable,
acknowledged writes lost, the longest time without a successful write and
the recovery time after each fault.

The fault schedule (kinds, targeted roles, durations, waits) is drawn from
--seed, which is always printed: run again with the same --seed to repeat
it (which node leads at each fault is up to the cluster).

Network modes (the verdict says which one ran, and why):
  netns  (auto's choice as root with 'ip netns') node i runs in network
         namespace kvc<pid>-i at <subnet>.i, the namespaces joined by a
         bridge in a namespace of its own; partitions drop packets
         (iptables in the sender's namespace, else blackhole routes).
         Everything is removed at exit, also on Ctrl-C or error; namespaces
         left by a chaos run that died are removed at the next run.
  proxy  every node on 127.0.0.1; each node's peer port sits behind a TCP
         proxy in this process, which tells the source node of each
         connection from /proc; a cut closes that pair's connections and
         blackholes new ones. Needs no privileges.
  docker not implemented.

Exit status: 0 PASS; 1 FAIL (not linearizable, an acknowledged write lost,
no recovery within --recovery-timeout, replicas diverged, a node crashed or
hung on shutdown), INCONCLUSIVE (the linearizability check timed out), or
the run could not be carried out; 2 bad command line.`,
	groups: []flagGroup{
		{"Run", []string{"nodes", "duration", "seed", "faults", "interval", "recovery-timeout"}},
		{"Workload and checking", []string{"clients", "keys", "op-timeout", "check-timeout"}},
		{"Network", []string{"network", "subnet"}},
		{"Nodes (passed to 'kvorum start')", []string{"binary", "tick-interval", "election-ticks", "election-timeout", "heartbeat-ticks", "request-timeout", "snapshot-threshold"}},
		{"Output", []string{"data-dir", "keep", "out", "json"}},
	},
	footer: `
Examples:
  sudo kvorum chaos --duration 60s
  kvorum chaos --network proxy --nodes 5 --faults partition,pause --seed 42
  kvorum chaos --duration 20s --json --out ./chaos-report`,
}

type chaosFlags struct {
	fs              *flag.FlagSet
	cfg             chaos.Config
	faults          string
	electionTimeout time.Duration
	json            bool
}

// intervalValue is a flag holding MIN-MAX durations (or one duration).
type intervalValue struct{ min, max *time.Duration }

func (v intervalValue) String() string {
	if v.min == nil {
		return ""
	}
	if *v.min == *v.max {
		return v.min.String()
	}
	return v.min.String() + "-" + v.max.String()
}

func (v intervalValue) Set(s string) error {
	lo, hi, found := strings.Cut(strings.TrimSpace(s), "-")
	a, err := time.ParseDuration(strings.TrimSpace(lo))
	if err != nil {
		return errors.New("want a duration such as 3s, or a range such as 2s-4s")
	}
	b := a
	if found {
		if b, err = time.ParseDuration(strings.TrimSpace(hi)); err != nil {
			return errors.New("want a duration such as 3s, or a range such as 2s-4s")
		}
	}
	if a < 0 || b < a {
		return errors.New("want MIN-MAX with 0 <= MIN <= MAX")
	}
	*v.min, *v.max = a, b
	return nil
}

func newChaosFlags() *chaosFlags {
	f := &chaosFlags{fs: flag.NewFlagSet("chaos", flag.ContinueOnError)}
	fs, c := f.fs, &f.cfg
	c.IntervalMin, c.IntervalMax = chaos.DefaultIntervalMin, chaos.DefaultIntervalMax
	fs.IntVar(&c.Nodes, "nodes", chaos.DefaultNodes, "cluster size: 3 or 5 (`N`)")
	fs.DurationVar(&c.Duration, "duration", chaos.DefaultDuration, "how long faults are injected (`DURATION`); setup and the checks afterwards\ncome on top")
	fs.Int64Var(&c.Seed, "seed", 0, "`N` seeding the fault schedule and the workload (default: derived from the\ncurrent time; always printed)")
	fs.StringVar(&f.faults, "faults", "kill,pause,restart,partition", "comma-separated fault kinds to inject (`LIST`): kill, pause, restart,\npartition, or all")
	fs.Var(intervalValue{&c.IntervalMin, &c.IntervalMax}, "interval", "wait before each fault, drawn from `MIN-MAX` (or one DURATION), counted from\nthe cluster's recovery from the previous fault")
	fs.DurationVar(&c.RecoveryTimeout, "recovery-timeout", chaos.DefaultRecoveryTimeout, "most time (`DURATION`) the cluster may take to serve a write after a fault is\nhealed, and to be fully ready at the end; longer is a failure")
	fs.IntVar(&c.Clients, "clients", chaos.DefaultClients, "concurrent Redis clients (`N`), spread over the nodes")
	fs.IntVar(&c.Keys, "keys", chaos.DefaultKeys, "keys per data type (`N`) the workload contends on")
	fs.DurationVar(&c.OpTimeout, "op-timeout", chaos.DefaultOpTimeout, "client timeout per operation (`DURATION`); a timed-out operation's outcome\nis unknown to the checker")
	fs.DurationVar(&c.CheckTimeout, "check-timeout", chaos.DefaultCheckTimeout, "most time (`DURATION`) the linearizability check may take; beyond it the\nverdict is INCONCLUSIVE")
	fs.StringVar(&c.Network, "network", chaos.ModeAuto, "`MODE`: auto (netns when root and 'ip netns' works, else proxy), netns or\nproxy; docker is not implemented")
	fs.StringVar(&c.Subnet, "subnet", "", "netns mode: the IPv4 /24 for the nodes (`CIDR`, e.g. 10.213.7.0/24; node i\ngets .i, this process .254) (default: a free 10.213.x.0/24)")
	fs.StringVar(&c.Binary, "binary", "", "kvorum binary (`PATH`) the nodes run (default: this executable)")
	fs.DurationVar(&c.TickInterval, "tick-interval", chaos.DefaultTickInterval, "nodes' Raft tick (`DURATION`); short, so that a run sees many elections")
	fs.IntVar(&c.ElectionTicks, "election-ticks", chaos.DefaultElectionTicks, "nodes' election timeout in ticks (`N`)")
	fs.DurationVar(&f.electionTimeout, "election-timeout", 0, "nodes' election timeout as a `DURATION`: sets --election-ticks to it divided\nby --tick-interval (default: --election-ticks × --tick-interval)")
	fs.IntVar(&c.HeartbeatTicks, "heartbeat-ticks", chaos.DefaultHeartbeatTicks, "nodes' heartbeat interval in ticks (`N`)")
	fs.DurationVar(&c.RequestTimeout, "request-timeout", chaos.DefaultRequestTimeout, "nodes' --request-timeout (`DURATION`): how long a command waits for a\nleader before CLUSTERDOWN; below --op-timeout, so clients get an answer")
	fs.Uint64Var(&c.SnapshotThreshold, "snapshot-threshold", chaos.DefaultSnapshotThreshold, "nodes' --snapshot-threshold (`N`); low, so that restarted nodes catch up\nby snapshot")
	fs.StringVar(&c.DataDir, "data-dir", "", "`DIR` for node data and logs, new or empty (default: a new temporary\ndirectory); removed after a PASS, kept (and printed) otherwise")
	fs.BoolVar(&c.Keep, "keep", false, "keep the data directory after a PASS too")
	fs.StringVar(&c.OutDir, "out", "", "`DIR` for the report: the verdict as JSON, and unless the run passed the\nhistory and porcupine's HTML visualization (default: none; the history\nand HTML of a failed run go to the data directory)")
	fs.BoolVar(&f.json, "json", false, "print the verdict as JSON on stdout (progress goes to stderr)")
	return f
}

// parseChaos parses and validates `kvorum chaos` arguments.
func parseChaos(args []string, stdout io.Writer) (*chaosFlags, error) {
	f := newChaosFlags()
	if err := parseFlags("chaos", f.fs, chaosHelp, args, stdout); err != nil {
		return nil, err
	}
	bad := func(format string, a ...any) error { return usageErrorf("chaos", format, a...) }
	if f.fs.NArg() > 0 {
		return nil, bad("unexpected argument %q (all options are --flags)", f.fs.Arg(0))
	}
	set := setFlags(f.fs)
	c := &f.cfg
	kinds, err := chaos.ParseKinds(f.faults)
	if err != nil {
		return nil, bad("--faults: %v", err)
	}
	c.Kinds = kinds
	if !set["seed"] {
		c.Seed = time.Now().UnixNano() % 1_000_000_000
	}
	if set["election-timeout"] {
		if set["election-ticks"] {
			return nil, bad("give --election-timeout or --election-ticks, not both")
		}
		if c.TickInterval <= 0 || f.electionTimeout < c.TickInterval {
			return nil, bad("--election-timeout (%v) must be at least one --tick-interval (%v)", f.electionTimeout, c.TickInterval)
		}
		c.ElectionTicks = int(f.electionTimeout / c.TickInterval)
	}
	if c.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, bad("cannot find this executable (%v); give --binary", err)
		}
		c.Binary = exe
	}
	if !strings.Contains(c.Binary, "/") {
		if p, err := exec.LookPath(c.Binary); err == nil {
			c.Binary = p
		}
	}
	if fi, err := os.Stat(c.Binary); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return nil, bad("--binary %s is not an executable file", c.Binary)
	}
	if abs, err := filepath.Abs(c.Binary); err == nil {
		c.Binary = abs // nodes run with it from other directories and namespaces
	}
	if err := c.Validate(); err != nil {
		return nil, bad("%v", err)
	}
	if c.DataDir != "" {
		if ents, err := os.ReadDir(c.DataDir); err == nil {
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), "node-") {
					return nil, bad("--data-dir %s already holds node data (%s); give a new or empty directory", c.DataDir, e.Name())
				}
			}
		}
	}
	return f, nil
}

func runChaos(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseChaos(args, stdout)
	if err != nil {
		return err
	}
	// The command tears down processes and namespaces on Ctrl-C/SIGTERM.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := f.cfg
	cfg.Progress = stdout
	if f.json {
		cfg.Progress = stderr
	}
	v, err := chaos.Run(ctx, cfg)
	if err != nil {
		msg := fmt.Sprintf("kvorum chaos: %v", err)
		if v != nil {
			if v.Mode != "" {
				msg += fmt.Sprintf("\nnetwork mode %s (%s), seed %d", v.Mode, v.ModeReason, v.Seed)
			}
			if v.DataKept {
				msg += "\ndata and node logs kept in " + v.DataDir
			}
			if len(v.Violations) > 0 {
				msg += "\nviolations so far:\n  - " + strings.Join(v.Violations, "\n  - ")
			}
		}
		return &exitErr{code: exitError, msg: msg}
	}
	if f.json {
		if err := v.WriteJSON(stdout); err != nil {
			return err
		}
	} else {
		v.WriteText(stdout)
	}
	if !v.Passed() {
		return &exitErr{code: exitError}
	}
	return nil
}

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/kvorum/kvorum/internal/kvbench"
	"github.com/kvorum/kvorum/internal/localsrv"
)

var benchFailoverHelp = helpText{
	usage: `
kvorum bench failover [--env host,compose] [--rate N] [--workers N] [--phase 10s]
    [--compose-file deploy/compose.yaml] [--image kvorum:latest] [--png FILE] [--json]`,
	description: `
Measures a 3-node cluster as paper 003 (Shrestha) measures a database cluster
in containers: a constant-rate write load (SET of a new key, --workers
connections spread over the nodes, one write in flight on each, every write
due at its slot, so a stall counts in full), and, one --phase apart: the
leader killed (SIGKILL; docker kill), started again, a follower killed,
started again. A client whose node dies moves to the next node. At the end
every acknowledged write is read back.

Environments (--env, measured one after the other in one run):
  host     3 'kvorum start' processes of this binary on 127.0.0.1
  compose  deploy/compose.yaml's 3 containers (needs Docker, Compose and the
           image: make image), under a project of its own on free host
           ports; removed at the end with its volumes. The load goes to
           the containers' addresses on the Compose network, as clients
           on other machines reach them (the kernel forwards)
  compose-published
           the same, the load through the published ports on 127.0.0.1,
           as a client on the Docker host itself connects: through
           Docker's userland proxy (docker-proxy), a process that copies
           every byte
  compose-hostnet
           deploy/compose.hostnet.yaml's 3 containers, on the host's network
           (network_mode: host; every port on 127.0.0.1), load on their
           ports

All environments are started first. Their closed-loop write capacity
(--workers clients for --capacity) is measured in turns, --capacity-rounds
times each, and the median kept: the ratio of the environments is the
container overhead, with the machine's noisy moments spread over all of
them. Then each environment's timeline runs, one after the other. --rate 0
(the default) offers half of the first environment's capacity to every
environment.

Reported: per outage the longest gap between acknowledged writes, the errors
clients saw (error replies by their first word: CLUSTERDOWN, UNCERTAIN, ...;
and broken connections), p95 latency before, during and after; per
environment the acknowledged writes and how many were lost (not read back).
Markdown on stdout (or --json), the per-second timeline as a PNG with --png.`,
	groups: []flagGroup{{"Flags", []string{"env", "rate", "workers", "value-size", "phase", "capacity", "capacity-rounds", "op-timeout", "compose-file", "compose-hostnet-file", "image", "dir", "png", "json"}}},
}

type benchFailoverFlags struct {
	fs             *flag.FlagSet
	envs           string
	cfg            kvbench.FailoverConfig
	compose        string
	composeHostnet string
	rounds         int
	image          string
	dir            string
	png            string
	json           bool
}

func newBenchFailoverFlags() *benchFailoverFlags {
	f := &benchFailoverFlags{fs: flag.NewFlagSet("bench failover", flag.ContinueOnError)}
	f.fs.StringVar(&f.envs, "env", "host,compose", "comma-separated `LIST` of environments: host, compose, compose-published,\ncompose-hostnet")
	f.fs.IntVar(&f.cfg.Rate, "rate", 0, "writes per `N` second offered (0: half of the first environment's capacity)")
	f.fs.IntVar(&f.cfg.Workers, "workers", 16, "client connections (`N`)")
	f.fs.IntVar(&f.cfg.ValueSize, "value-size", 100, "value size in `BYTES`")
	f.fs.DurationVar(&f.cfg.Phase, "phase", 10*time.Second, "length of each phase (`DURATION`): before the kill, down, after the restart, ...")
	f.fs.DurationVar(&f.cfg.Capacity, "capacity", 8*time.Second, "closed-loop capacity measurement per environment (`DURATION`; 0: skip)")
	f.fs.DurationVar(&f.cfg.OpTimeout, "op-timeout", time.Second, "a write unanswered after this `DURATION` is an error")
	f.fs.StringVar(&f.compose, "compose-file", "deploy/compose.yaml", "the compose `FILE` of the compose environment")
	f.fs.StringVar(&f.composeHostnet, "compose-hostnet-file", "deploy/compose.hostnet.yaml", "the compose `FILE` of the compose-hostnet environment")
	f.fs.StringVar(&f.image, "image", "kvorum:latest", "the `IMAGE` the compose environment runs")
	f.fs.StringVar(&f.dir, "dir", "", "`DIR` for the host environment's data and logs (default: a temporary one)")
	f.fs.StringVar(&f.png, "png", "", "write the per-second timeline to this PNG `FILE`")
	f.fs.IntVar(&f.rounds, "capacity-rounds", 3, "capacity measurements per environment (`N`), taken in turns; the median counts")
	f.fs.BoolVar(&f.json, "json", false, "print JSON instead of Markdown")
	return f
}

func runBenchFailover(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newBenchFailoverFlags()
	if err := parseFlags("bench", f.fs, benchFailoverHelp, args, stdout); err != nil {
		return err
	}
	bad := func(format string, a ...any) error { return usageErrorf("bench", format, a...) }
	envs := splitList(f.envs)
	switch {
	case f.fs.NArg() > 0:
		return bad("unexpected argument %q", f.fs.Arg(0))
	case len(envs) == 0:
		return bad("--env: no environment")
	case f.cfg.Workers < 1 || f.cfg.Workers > 1000:
		return bad("--workers must be 1..1000")
	case f.cfg.Rate < 0 || f.cfg.ValueSize < 1 || f.cfg.Phase < time.Second || f.cfg.OpTimeout <= 0 || f.cfg.Capacity < 0:
		return bad("--rate >= 0, --value-size >= 1, --phase >= 1s, --op-timeout > 0 and --capacity >= 0, please")
	case f.rounds < 1:
		return bad("--capacity-rounds must be at least 1")
	case f.cfg.Rate == 0 && f.cfg.Capacity == 0:
		return bad("--rate 0 takes half of the measured capacity: give --capacity, or a --rate")
	}
	for _, e := range envs {
		if e != "host" && e != "compose" && e != "compose-published" && e != "compose-hostnet" {
			return bad("--env: unknown environment %q (host, compose, compose-published, compose-hostnet)", e)
		}
	}
	f.cfg.Progress = stderr
	var closers []func()
	// Every environment runs from the start: their capacities are
	// measured in turns (--capacity-rounds), so that a noisy moment of the
	// machine falls on all of them, and the median is kept.
	var envs2 []kvbench.FailoverEnv
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	for _, name := range envs {
		env, closer, err := startFailoverEnv(ctx, f, name, stderr)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		closers = append(closers, closer)
		envs2 = append(envs2, env)
	}
	capacity := make([]float64, len(envs2))
	if f.cfg.Capacity > 0 {
		runs := make([][]float64, len(envs2))
		for round := 0; round < f.rounds; round++ {
			for i, env := range envs2 {
				n, err := kvbench.MeasureCapacity(ctx, env.Addrs(), f.cfg.Workers, f.cfg.ValueSize, f.cfg.Capacity)
				if err != nil {
					return fmt.Errorf("%s: capacity: %w", env.Name(), err)
				}
				fmt.Fprintf(stderr, "%s: closed-loop capacity %.0f writes/s (round %d, %d clients, %v)\n", env.Name(), n, round+1, f.cfg.Workers, f.cfg.Capacity)
				runs[i] = append(runs[i], n)
			}
		}
		for i := range runs {
			slices.Sort(runs[i])
			capacity[i] = runs[i][len(runs[i])/2]
		}
		if f.cfg.Rate == 0 {
			f.cfg.Rate = max(1, int(capacity[0]/2))
		}
		time.Sleep(kvbench.CapacitySettle)
	}
	var results []*kvbench.FailoverResult
	for i, env := range envs2 {
		cfg := f.cfg
		cfg.Capacity = 0
		r, err := kvbench.RunFailover(ctx, env, cfg)
		if r != nil {
			r.Capacity = capacity[i]
			results = append(results, r)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", env.Name(), err)
		}
	}
	if f.png != "" {
		if err := kvbench.WriteFailoverPNG(f.png, results); err != nil {
			return err
		}
	}
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(results)
	}
	kvbench.WriteFailoverMarkdown(stdout, f.cfg, results)
	for _, r := range results {
		if r.Lost > 0 {
			return fmt.Errorf("%s: %d acknowledged writes were not read back (first: %v)", r.Env, r.Lost, r.LostFirst)
		}
	}
	return nil
}

// startFailoverEnv starts environment name; closer stops it.
func startFailoverEnv(ctx context.Context, f *benchFailoverFlags, name string, stderr io.Writer) (kvbench.FailoverEnv, func(), error) {
	switch name {
	case "host":
		exe, err := os.Executable()
		if err != nil {
			return nil, nil, err
		}
		dir, finish, err := localsrv.WorkDir(f.dir, "kvorum-failover-*", stderr)
		if err != nil {
			return nil, nil, err
		}
		env, err := kvbench.StartHostEnv(ctx, exe, dir)
		if err != nil {
			finish(true)
			return nil, nil, err
		}
		return env, func() {
			if err := env.Close(); err != nil {
				fmt.Fprintf(stderr, "host: stopping the nodes: %v\n", err)
			}
			finish(false)
		}, nil
	default:
		via, file := kvbench.ViaContainerIP, f.compose
		switch name {
		case "compose-published":
			via = kvbench.ViaPublished
		case "compose-hostnet":
			via, file = kvbench.ViaHostNetwork, f.composeHostnet
		}
		env, err := kvbench.StartComposeEnv(ctx, file, f.image, via, stderr)
		if err != nil {
			return nil, nil, err
		}
		return env, func() {
			if err := env.Close(); err != nil {
				fmt.Fprintln(stderr, err)
			}
		}, nil
	}
}

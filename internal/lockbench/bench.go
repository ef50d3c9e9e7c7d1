package lockbench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/kvorum/kvorum/internal/diskfloor"
	"github.com/kvorum/kvorum/internal/localsrv"
)

// Time limits of one run besides its duration.
const (
	readyTimeout = 30 * time.Second // workers connect and set up
	// startMargin lies between the start line's sending and the common
	// start: every worker has read it by then.
	startMargin = 50 * time.Millisecond
	// finishSlack is added to duration + grace before the parent kills the
	// workers that have not reported.
	finishSlack = 30 * time.Second
)

// Run runs every (target, mode, procs) combination and returns the report.
// A run that fails is recorded in the report (RunResult.Error) and the
// others still run; the error is for what stops the benchmark as a whole
// (a local cluster that does not start, an interrupt).
func Run(ctx context.Context, cfg Config) (rep *Report, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	progress := cfg.Progress
	if progress == nil {
		progress = io.Discard
	}
	rep = &Report{
		HoldMs: ms(cfg.Hold), DurationS: cfg.Duration.Seconds(), TTLMs: ms(cfg.TTL),
		RedlockRetryDelay: ms(cfg.RedlockRetryDelay),
	}
	dir, finish, err := localsrv.WorkDir(cfg.Dir, "kvorum-bench-*", progress)
	if err != nil {
		return nil, err
	}
	// Keep the servers' logs when something went wrong, unless the user
	// interrupted the benchmark.
	defer func() { finish(!(err == nil && !rep.Failed()) && ctx.Err() == nil) }()
	rep.Disk = diskfloor.ForBenchmark(dir, progress)
	total := 0
	for range cfg.Targets {
		total += len(cfg.Modes) * len(cfg.Procs)
	}
	n := 0
	for _, target := range cfg.Targets {
		info, addrs, servers, err := setupTarget(ctx, &cfg, target, dir, progress)
		rep.Targets = append(rep.Targets, info)
		if err != nil {
			return rep, fmt.Errorf("%s: %w", target, err)
		}
		if info.Skipped != "" {
			fmt.Fprintf(progress, "%s: skipped: %s\n", target, info.Skipped)
			n += len(cfg.Modes) * len(cfg.Procs)
			continue
		}
		for _, mode := range cfg.Modes {
			for _, procs := range cfg.Procs {
				n++
				fmt.Fprintf(progress, "[%d/%d] %s, %s lock%s, %d process%s, %v ...\n", n, total, target, mode,
					map[bool]string{true: "s", false: ""}[mode == ModeOwn], procs, map[bool]string{true: "es", false: ""}[procs > 1], cfg.Duration)
				r := runOne(ctx, &cfg, target, mode, procs, addrs)
				rep.Runs = append(rep.Runs, r)
				if r.Failed() {
					fmt.Fprintf(progress, "      FAILED: %s\n", r.Error)
				} else {
					fmt.Fprintf(progress, "      %d acquisitions, avg %.2f ms, p99 %.2f ms, max %.2f ms\n", r.Ops, r.AvgMs, r.P99Ms, r.MaxMs)
				}
				if ctx.Err() != nil {
					_ = localsrv.StopAll(servers)
					return rep, fmt.Errorf("interrupted: %w", ctx.Err())
				}
			}
		}
		if len(servers) > 0 {
			fmt.Fprintf(progress, "%s: stopping the local servers\n", target)
			if err := localsrv.StopAll(servers); err != nil {
				return rep, err
			}
		}
	}
	return rep, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// zkRecipe is how the zookeeper target locks.
const zkRecipe = "fair lock recipe: ephemeral sequential znode, watch the predecessor"

// givenServers returns the addresses of a target's servers given in cfg
// (none: the benchmark starts its own) and how to wait until one answers.
func givenServers(cfg *Config, target string) ([]string, func(context.Context, string) error) {
	switch target {
	case TargetKvorum:
		return cfg.KvorumAddrs, redisPing
	case TargetRedlock:
		return cfg.RedisAddrs, redisPing
	case TargetZookeeper:
		return cfg.ZookeeperAddrs, zkWait
	}
	return nil, nil
}

// setupTarget finds or starts the servers of a target. A skipped target has
// info.Skipped set and no error.
func setupTarget(ctx context.Context, cfg *Config, target, dir string, progress io.Writer) (info TargetInfo, addrs []string, servers []*localsrv.Child, err error) {
	info.Name = target
	if target == TargetZookeeper {
		info.Note = zkRecipe
	}
	if given, up := givenServers(cfg, target); len(given) > 0 {
		info.Addrs = given
		return info, given, nil, waitAll(ctx, given, up)
	}
	switch target {
	case TargetKvorum:
		bin := cfg.NodeBinary
		if bin == "" {
			bin = cfg.Executable
		}
		fmt.Fprintf(progress, "kvorum: starting a local 3-node cluster ('%s start', data and logs in %s)\n", bin, dir)
		start := time.Now()
		addrs, servers, err = localsrv.KvorumCluster(ctx, bin, dir)
		if err != nil {
			return info, nil, nil, err
		}
		fmt.Fprintf(progress, "kvorum: cluster ready in %v at %s\n", time.Since(start).Round(10*time.Millisecond), strings.Join(addrs, ","))
	case TargetRedlock:
		bin := cfg.RedisServer
		if bin == "" {
			if bin, err = exec.LookPath("redis-server"); err != nil {
				info.Skipped = "redis-server is not on PATH, and no --redis addresses were given " +
					"(install it, e.g. apt-get install redis-server, or pass --redis host:port,host:port,host:port)"
				return info, nil, nil, nil
			}
		}
		fmt.Fprintf(progress, "redlock: starting 3 standalone redis-server processes (%s, no persistence)\n", bin)
		addrs, servers, err = localsrv.RedisServers(ctx, bin, dir, "redis", 3)
		if err != nil {
			return info, nil, nil, err
		}
	case TargetZookeeper:
		javaBin, classPath, version, why, err := zkServer(cfg.ZookeeperServer)
		if err != nil {
			return info, nil, nil, err
		}
		if why != "" {
			info.Skipped = why
			return info, nil, nil, nil
		}
		kind := fmt.Sprintf("a %d-node ensemble", ZookeeperEnsemble)
		if ZookeeperEnsemble == 1 {
			kind = "a standalone server"
		}
		fmt.Fprintf(progress, "zookeeper: starting %s of %s (%s, forceSync=yes, data and logs in %s)\n", kind, version, javaBin, dir)
		start := time.Now()
		addrs, servers, err = zkEnsemble(ctx, javaBin, classPath, dir, ZookeeperEnsemble)
		if err != nil {
			return info, nil, nil, err
		}
		fmt.Fprintf(progress, "zookeeper: serving in %v at %s\n", time.Since(start).Round(10*time.Millisecond), strings.Join(addrs, ","))
		info.Note = fmt.Sprintf("%s, %s, forceSync=yes: every write fsynced; %s", strings.TrimPrefix(kind, "a "), version, zkRecipe)
	}
	info.Addrs, info.Started = addrs, true
	return info, addrs, servers, nil
}

// worker is one client process of a run.
type worker struct {
	spec   WorkerSpec
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *capWriter
	ready  chan error // one value: nil once the worker said "ready"
	done   chan struct{}
	result *WorkerResult
	err    error // why there is no result
}

// redisPing waits until the Redis-protocol server at addr answers PING.
func redisPing(ctx context.Context, addr string) error { return localsrv.WaitPing(ctx, addr, nil) }

// waitAll waits until every given address answers; the first failure is
// returned.
func waitAll(ctx context.Context, addrs []string, up func(context.Context, string) error) error {
	for _, a := range addrs {
		if err := up(ctx, a); err != nil {
			return err
		}
	}
	return nil
}

func runOne(ctx context.Context, cfg *Config, target, mode string, procs int, addrs []string) RunResult {
	res := RunResult{Target: target, Mode: mode, Procs: procs, PerProcess: make([]int, procs)}
	// A fresh lock name per run: nothing left by an earlier run interferes.
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	prefix := fmt.Sprintf("lockbench:%s:%s:%s:%d", hex.EncodeToString(rnd[:]), target, mode, procs)
	// An acquire begun just before the end may wait for every other
	// process's hold; grace bounds it generously.
	grace := 5*time.Second + time.Duration(procs)*10*cfg.Hold
	ws := make([]*worker, procs)
	for i := range ws {
		spec := WorkerSpec{Target: target, Proc: i, Duration: cfg.Duration, Hold: cfg.Hold, TTL: cfg.TTL,
			RetryDelay: cfg.RedlockRetryDelay, Grace: grace, Lock: prefix + ":shared"}
		if mode == ModeOwn {
			spec.Lock = fmt.Sprintf("%s:p%d", prefix, i)
		}
		if target == TargetKvorum || target == TargetZookeeper {
			spec.Addrs = []string{addrs[i%len(addrs)]} // spread over the nodes, round robin
		} else {
			spec.Addrs = addrs
		}
		ws[i] = &worker{spec: spec}
	}
	defer func() {
		for _, w := range ws {
			w.kill()
		}
	}()
	for _, w := range ws {
		if err := w.start(cfg); err != nil {
			res.Error = err.Error()
			return res
		}
	}
	// Wait until every worker is set up.
	readyBy := time.NewTimer(readyTimeout)
	defer readyBy.Stop()
	for _, w := range ws {
		select {
		case err := <-w.ready:
			if err != nil {
				res.Error = fmt.Sprintf("process %d did not start: %v", w.spec.Proc, err)
				return res
			}
		case <-readyBy.C:
			res.Error = fmt.Sprintf("process %d not ready within %v", w.spec.Proc, readyTimeout)
			return res
		case <-ctx.Done():
			res.Error = "interrupted"
			return res
		}
	}
	start := time.Now().Add(startMargin)
	for _, w := range ws {
		if _, err := fmt.Fprintf(w.stdin, "start %d\n", start.UnixNano()); err != nil {
			res.Error = fmt.Sprintf("process %d: sending the start: %v", w.spec.Proc, err)
			return res
		}
	}
	finishBy := time.NewTimer(time.Until(start.Add(cfg.Duration + grace + finishSlack)))
	defer finishBy.Stop()
	for _, w := range ws {
		select {
		case <-w.done:
		case <-finishBy.C:
			res.Error = fmt.Sprintf("process %d did not finish within %v of the end; killed", w.spec.Proc, grace+finishSlack)
			return res
		case <-ctx.Done():
			res.Error = "interrupted"
			return res
		}
	}
	merge(&res, ws, cfg.Duration)
	return res
}

// start starts the worker process and the goroutine that reads its output.
func (w *worker) start(cfg *Config) error {
	spec, err := json.Marshal(w.spec)
	if err != nil {
		return err
	}
	w.cmd = exec.Command(cfg.Executable, cfg.WorkerArgs...)
	w.cmd.Env = append(os.Environ(), WorkerEnv+"="+string(spec))
	w.stderr = &capWriter{max: 4096}
	w.cmd.Stderr = w.stderr
	if w.stdin, err = w.cmd.StdinPipe(); err != nil {
		return err
	}
	stdout, err := w.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := w.cmd.Start(); err != nil {
		return fmt.Errorf("starting process %d (%s): %w", w.spec.Proc, cfg.Executable, err)
	}
	w.ready, w.done = make(chan error, 1), make(chan struct{})
	go func() {
		defer close(w.done)
		rd := bufio.NewReader(stdout)
		line, rerr := rd.ReadString('\n')
		if strings.TrimSpace(line) != "ready" {
			rest, _ := io.ReadAll(rd)
			werr := w.cmd.Wait()
			w.err = fmt.Errorf("%s%s%v%s", strings.TrimSpace(line), string(rest), errors.Join(rerr, werr), w.stderrTail())
			w.ready <- w.err
			return
		}
		w.ready <- nil
		out, rerr := io.ReadAll(rd)
		werr := w.cmd.Wait()
		var r WorkerResult
		if jerr := json.Unmarshal(bytes.TrimSpace(out), &r); jerr != nil || werr != nil {
			w.err = fmt.Errorf("no result (%v)%s", errors.Join(werr, rerr, jerr), w.stderrTail())
			return
		}
		w.result = &r
	}()
	return nil
}

func (w *worker) stderrTail() string {
	if s := strings.TrimSpace(w.stderr.String()); s != "" {
		return "; stderr: " + s
	}
	return ""
}

// kill ends a worker still running, by its PID, and waits for it.
func (w *worker) kill() {
	if w.cmd == nil || w.cmd.Process == nil || w.done == nil {
		return
	}
	select {
	case <-w.done:
		return
	default:
	}
	_ = w.cmd.Process.Kill()
	if w.stdin != nil {
		w.stdin.Close()
	}
	<-w.done
}

// merge folds the workers' results into the run's.
func merge(res *RunResult, ws []*worker, d time.Duration) {
	var lat []int64
	holdsByLock := map[string][]hold{}
	var errs []string
	for _, w := range ws {
		if w.result == nil {
			errs = append(errs, fmt.Sprintf("process %d: %v", w.spec.Proc, w.err))
			continue
		}
		r := w.result
		res.PerProcess[w.spec.Proc] = len(r.Latencies)
		lat = append(lat, r.Latencies...)
		res.Attempts += r.Attempts
		res.Errors += r.Errors
		if r.Errors > 0 {
			errs = append(errs, fmt.Sprintf("process %d: %d failed operations (first: %s)", w.spec.Proc, r.Errors, r.FirstError))
		}
		for i := range r.Latencies {
			h := hold{proc: w.spec.Proc, start: r.Acquired[i] - r.Latencies[i], acq: r.Acquired[i], rel: r.Released[i]}
			if i < len(r.Tokens) {
				h.token = r.Tokens[i]
			}
			holdsByLock[w.spec.Lock] = append(holdsByLock[w.spec.Lock], h)
		}
	}
	res.Stats = computeStats(lat)
	res.SpreadPct = spread(res.PerProcess)
	res.OpsPerSec = float64(res.Ops) / d.Seconds()
	var gaps, held []int64
	for _, hs := range holdsByLock {
		res.Violations = append(res.Violations, checkExclusion(hs, recordsTokens(res.Target))...)
		if res.Mode == ModeShared && res.Procs > 1 {
			g, h := handoffs(hs) // sorted by checkExclusion
			gaps, held = append(gaps, g...), append(held, h...)
		}
	}
	if len(held) > 0 {
		s := computeStats(gaps)
		res.Handoff, res.HeldMs = &s, computeStats(held).AvgMs
	}
	errs = append(errs, res.Violations...)
	if res.Ops == 0 && len(errs) == 0 {
		errs = append(errs, "no lock was acquired")
	}
	res.Error = strings.Join(errs, "; ")
}

// capWriter keeps the first max bytes written to it.
type capWriter struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (c *capWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (c *capWriter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

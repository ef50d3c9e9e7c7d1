package kvbench

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvorum/kvorum/internal/diskfloor"
	"github.com/kvorum/kvorum/internal/localsrv"
)

// op is one operation of a batch.
type op struct {
	kind uint8
	key  uint64 // record number
}

// opResult is an operation's outcome.
type opResult struct {
	lat  time.Duration // from the batch's send to this operation's reply
	err  error
	miss bool // a read found no value
}

// client is one benchmark connection.
type client interface {
	// batch runs ops as one pipeline, filling res. A non-nil error means
	// the connection broke (res says which operations failed).
	batch(ops []op, res []opResult) error
	close()
}

// target is a Target being measured.
type target struct {
	Target
	// nextInsert is the next record number an insert-only workload
	// inserts: Records and up, shared by every cell of the target.
	nextInsert atomic.Uint64
}

func (t *target) dial(ctx context.Context, i int, value []byte) (client, error) {
	addr := t.Addrs[i%len(t.Addrs)]
	if t.Scheme == SchemeEtcd {
		return dialEtcd(ctx, addr, value)
	}
	return dialRESP(ctx, addr, value)
}

// ping checks that a given target answers.
func (t *target) ping(ctx context.Context) error {
	for i, a := range t.Addrs {
		if t.Scheme == SchemeEtcd {
			cli, err := newEtcdClient(ctx, a)
			if err != nil {
				return err
			}
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err = cli.Status(sctx, "http://"+a)
			cancel()
			cli.Close()
			if err != nil {
				return fmt.Errorf("etcd %s: %w", a, err)
			}
			continue
		}
		c, err := t.dial(ctx, i, nil)
		if err != nil {
			return err
		}
		_, err = c.(*respConn).do("PING")
		c.close()
		if err != nil {
			return fmt.Errorf("%s: PING: %w", a, err)
		}
	}
	return nil
}

// Run runs every (workload, clients, target) cell and returns the report.
// A cell that fails is recorded in the report (Cell.Failed) and the others
// still run; the error is for what stops the benchmark as a whole (a
// server that does not start, a given target that does not answer, an
// interrupt). Servers it started are stopped before it returns.
func Run(ctx context.Context, cfg Config) (rep *Report, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	progress := cfg.Progress
	if progress == nil {
		progress = io.Discard
	}
	rep = newReport(&cfg)
	dir, finish, err := localsrv.WorkDir(cfg.Dir, "kvorum-bench-kv-*", progress)
	if err != nil {
		return nil, err
	}
	// Keep the servers' logs when something went wrong, unless the user
	// interrupted the benchmark.
	defer func() { finish(!(err == nil && !rep.Failed()) && ctx.Err() == nil) }()
	rep.Disk = diskfloor.ForBenchmark(dir, progress)
	var started []*localsrv.Child
	defer func() {
		if len(started) > 0 {
			fmt.Fprintf(progress, "stopping the %d server processes the benchmark started\n", len(started))
			if serr := localsrv.StopAll(started); serr != nil && err == nil {
				err = serr
			}
		}
	}()

	var targets []*target
	for _, t := range cfg.Targets {
		t.PIDs = cfg.PIDs[t.Name]
		info := TargetInfo{Name: t.Name, URL: t.URL(), Scheme: t.Scheme, Addrs: t.Addrs, PIDs: t.PIDs}
		if len(t.PIDs) == 0 {
			info.Note = "server PIDs not given (--pids): no server CPU or memory figures"
		}
		rep.Targets = append(rep.Targets, info)
		tg := &target{Target: t}
		if err := tg.ping(ctx); err != nil {
			return rep, fmt.Errorf("target %s: %w", t.Name, err)
		}
		targets = append(targets, tg)
	}
	for _, name := range cfg.Start {
		sdir := dir + "/" + name
		if err := os.MkdirAll(sdir, 0o755); err != nil {
			return rep, err
		}
		t, note, skipped, procs, err := startServer(ctx, &cfg, name, sdir, progress)
		started = append(started, procs...)
		info := TargetInfo{Name: name, Started: true, Scheme: t.Scheme, Note: note, Skipped: skipped}
		if err != nil {
			rep.Targets = append(rep.Targets, info)
			return rep, fmt.Errorf("%s: %w", name, err)
		}
		if skipped != "" {
			fmt.Fprintf(progress, "%s: skipped: %s\n", name, skipped)
			rep.Targets = append(rep.Targets, info)
			continue
		}
		info.URL, info.Addrs, info.PIDs = t.URL(), t.Addrs, t.PIDs
		rep.Targets = append(rep.Targets, info)
		targets = append(targets, &target{Target: t})
	}
	if len(targets) == 0 {
		return rep, errors.New("no target left to measure (every --start server was skipped)")
	}
	if cfg.Baseline != "" && !rep.hasTarget(cfg.Baseline) {
		rep.Notes = append(rep.Notes, fmt.Sprintf("baseline %s was skipped: no ratios", cfg.Baseline))
	}
	for _, t := range targets {
		t.nextInsert.Store(uint64(cfg.Records))
	}
	// Every SET writes the same value: random bytes from the seed.
	value := make([]byte, cfg.ValueSize)
	vr := rand.New(rand.NewPCG(cfg.Seed, 0x76616c7565))
	for i := range value {
		value[i] = 'a' + byte(vr.IntN(26))
	}

	total := len(cfg.Workloads) * len(cfg.Clients) * len(targets)
	n := 0
	for _, wl := range cfg.Workloads {
		for _, nc := range cfg.Clients {
			for _, t := range targets {
				n++
				label := fmt.Sprintf("[%d/%d] %s, %d client%s, %s", n, total, wl.Name, nc, plural(nc), t.Name)
				c := runCell(ctx, &cfg, t, wl, nc, value, label, progress)
				rep.Cells = append(rep.Cells, c)
				fmt.Fprintf(progress, "%s: %s\n", label, c.summary())
				if ctx.Err() != nil {
					return rep, fmt.Errorf("interrupted: %w", ctx.Err())
				}
			}
		}
	}
	rep.finish()
	return rep, nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// clientState is one client goroutine's own counters.
type clientState struct {
	rng      *rand.Rand
	hist     [numKinds]*Histogram
	ok       [numKinds]uint64
	errs     [numKinds]uint64
	misses   [numKinds]uint64
	otherErr uint64 // errors outside the measured window (warmup, after the end, reconnects)
	firstErr string
	ops      []op
	res      []opResult
}

func (s *clientState) noteErr(err error) {
	if s.firstErr == "" {
		s.firstErr = err.Error()
	}
}

// cellShared is what a cell's clients share.
type cellShared struct {
	cfg        *Config
	t          *target
	wl         Workload
	chooser    func(*rand.Rand) uint64
	measureAt  time.Time     // operations sent from here on are measured
	stop       atomic.Bool   // the measured window is over
	capped     bool          // --ops
	reserved   atomic.Int64  // operations reserved under --ops
	loadNext   atomic.Uint64 // load: next record number
	measured   atomic.Int64  // measured operations so far (progress)
	errorsSeen atomic.Int64  // errors so far (progress)
}

func runCell(ctx context.Context, cfg *Config, t *target, wl Workload, nclients int, value []byte, label string, progress io.Writer) Cell {
	cell := Cell{Workload: wl.Name, Clients: nclients, Target: t.Name}
	conns := make([]client, nclients)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.close()
			}
		}
	}()
	for i := range conns {
		c, err := t.dial(ctx, i, value)
		if err != nil {
			cell.Error = fmt.Sprintf("client %d: %v", i, err)
			return cell
		}
		conns[i] = c
	}
	sh := &cellShared{cfg: cfg, t: t, wl: wl, capped: cfg.Ops > 0 && !wl.Load}
	if cfg.Distribution == DistZipfian {
		z := NewScrambled(uint64(cfg.Records))
		sh.chooser = func(r *rand.Rand) uint64 { return z.Next(r.Float64()) }
	} else {
		n := uint64(cfg.Records)
		sh.chooser = func(r *rand.Rand) uint64 { return r.Uint64N(n) }
	}
	states := make([]*clientState, nclients)
	h := fnv.New64a()
	for i := range states {
		h.Reset()
		fmt.Fprintf(h, "%s/%d/%d", wl.Name, nclients, i)
		s := &clientState{rng: rand.New(rand.NewPCG(cfg.Seed, h.Sum64())),
			ops: make([]op, cfg.Pipeline), res: make([]opResult, cfg.Pipeline)}
		for k := range s.hist {
			s.hist[k] = NewHistogram()
		}
		states[i] = s
	}
	start := time.Now()
	warmup := cfg.Warmup
	if wl.Load {
		warmup = 0
	}
	sh.measureAt = start.Add(warmup)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sh.loop(ctx, i, &conns[i], states[i], value)
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	// Progress every second on a terminal (or --progress).
	tickDone := make(chan struct{})
	if cfg.Ticker {
		go func() {
			tk := time.NewTicker(time.Second)
			defer tk.Stop()
			last, lastAt := int64(0), sh.measureAt
			for {
				select {
				case <-tickDone:
					return
				case now := <-tk.C:
					if now.Before(sh.measureAt) {
						fmt.Fprintf(progress, "%s: warming up, %d errors\n", label, sh.errorsSeen.Load())
						continue
					}
					if now.Sub(lastAt) < 500*time.Millisecond {
						continue // just after the warmup: too short to rate
					}
					m := sh.measured.Load()
					rate := float64(m-last) / now.Sub(lastAt).Seconds()
					fmt.Fprintf(progress, "%s: %3.0fs  %8.0f ops/s  %d errors\n", label, now.Sub(sh.measureAt).Seconds(), rate, sh.errorsSeen.Load())
					last, lastAt = m, now
				}
			}
		}()
	}
	defer close(tickDone)

	wait := func(d time.Duration) bool { // false if the clients finished or ctx ended first
		tm := time.NewTimer(d)
		defer tm.Stop()
		select {
		case <-tm.C:
			return true
		case <-done:
		case <-ctx.Done():
		}
		return false
	}
	if warmup > 0 {
		wait(warmup)
	}
	cpu0, cpuErr := procsCPU(t.PIDs)
	self0 := selfCPU()
	switch {
	case wl.Load || cfg.Duration <= 0:
		select {
		case <-done:
		case <-ctx.Done():
		}
	default:
		wait(time.Until(sh.measureAt.Add(cfg.Duration)))
	}
	end := time.Now()
	sh.stop.Store(true)
	cpu1, cpuErr1 := procsCPU(t.PIDs)
	self1 := selfCPU()
	<-done

	window := end.Sub(sh.measureAt)
	cell.DurationS = window.Seconds()
	all := NewHistogram()
	for k := range numKinds {
		ks := KindStats{Kind: kindNames[k]}
		hk := NewHistogram()
		for _, s := range states {
			hk.Merge(s.hist[k])
			ks.Errors += s.errs[k]
			ks.Misses += s.misses[k]
		}
		ks.Ops = hk.Count()
		if ks.Ops == 0 && ks.Errors == 0 {
			continue
		}
		ks.fill(hk)
		all.Merge(hk)
		cell.Kinds = append(cell.Kinds, ks)
		cell.Ops += ks.Ops
		cell.Errors += ks.Errors
		cell.Misses += ks.Misses
	}
	var all1 KindStats
	all1.fill(all)
	cell.P99Ms, cell.P50Ms = all1.P99Ms, all1.P50Ms
	for _, s := range states {
		cell.OtherErrors += s.otherErr
		if cell.ErrorSample == "" {
			cell.ErrorSample = s.firstErr
		}
	}
	if window > 0 {
		cell.OpsPerSec = float64(cell.Ops) / window.Seconds()
	}
	cell.BenchCPUS = (self1 - self0).Seconds()
	if len(t.PIDs) > 0 {
		if cpuErr == nil {
			cpuErr = cpuErr1
		}
		if cpuErr != nil {
			cell.Error = "server CPU: " + cpuErr.Error()
		}
		cell.ServerCPUS = (cpu1 - cpu0).Seconds()
		if cell.Ops > 0 {
			cell.CPUUsPerOp = cell.ServerCPUS * 1e6 / float64(cell.Ops)
		}
		for _, p := range t.PIDs {
			rss, anon, err := procRSS(p)
			if err != nil && cell.Error == "" {
				cell.Error = "server memory: " + err.Error()
			}
			cell.RSS = append(cell.RSS, ProcRSS{PID: p, MiB: float64(rss) / (1 << 20), AnonMiB: float64(anon) / (1 << 20)})
			cell.RSSMiB += float64(rss) / (1 << 20)
			cell.AnonMiB += float64(anon) / (1 << 20)
		}
	}
	if ctx.Err() != nil && cell.Error == "" {
		cell.Error = "interrupted"
	}
	if wl.Load && ctx.Err() == nil {
		if got := cell.Ops + cell.Errors; got != uint64(cfg.Records) {
			cell.Error = fmt.Sprintf("load inserted %d of %d records", got, cfg.Records)
		}
	}
	cell.Failed = cell.Error != "" || cell.Errors > 0 || cell.OtherErrors > 0 || cell.Ops == 0
	return cell
}

// loop is one client: closed loop, a batch of --pipeline operations at a
// time, until the window ends (or, for load and --ops, the work is done).
func (sh *cellShared) loop(ctx context.Context, i int, conn *client, s *clientState, value []byte) {
	cfg, wl := sh.cfg, sh.wl
	for !sh.stop.Load() && ctx.Err() == nil {
		if *conn == nil { // reconnect after a broken connection
			time.Sleep(100 * time.Millisecond)
			c, err := sh.t.dial(ctx, i, value)
			if err != nil {
				s.otherErr++
				s.noteErr(err)
				sh.errorsSeen.Add(1)
				continue
			}
			*conn = c
		}
		t0 := time.Now()
		measuring := !t0.Before(sh.measureAt)
		n := cfg.Pipeline
		if sh.capped && measuring {
			r := sh.reserved.Add(int64(n))
			if r-int64(n) >= cfg.Ops {
				return
			}
			if r > cfg.Ops {
				n = int(cfg.Ops - (r - int64(n)))
			}
		}
		ops := s.ops[:0]
		for range n {
			var o op
			if u := s.rng.Float64(); u < wl.Read {
				o.kind = KindRead
			} else if u < wl.Read+wl.Update {
				o.kind = KindUpdate
			} else {
				o.kind = KindInsert
			}
			switch {
			case o.kind != KindInsert:
				o.key = sh.chooser(s.rng)
			case wl.Load:
				o.key = sh.loadNext.Add(1) - 1
			default:
				o.key = sh.t.nextInsert.Add(1) - 1
			}
			if wl.Load && o.key >= uint64(cfg.Records) {
				break
			}
			ops = append(ops, o)
		}
		if len(ops) == 0 {
			return
		}
		res := s.res[:len(ops)]
		err := (*conn).batch(ops, res)
		counted := measuring && !sh.stop.Load()
		var nerr int64
		for j, o := range ops {
			r := &res[j]
			if r.err != nil {
				nerr++
				s.noteErr(r.err)
				if counted {
					s.errs[o.kind]++
				} else {
					s.otherErr++
				}
				continue
			}
			if counted {
				s.hist[o.kind].Record(r.lat)
				s.ok[o.kind]++
				if r.miss {
					s.misses[o.kind]++
				}
			}
		}
		if counted {
			sh.measured.Add(int64(len(ops)) - nerr)
		}
		if nerr > 0 {
			sh.errorsSeen.Add(nerr)
		}
		if err != nil {
			(*conn).close()
			*conn = nil
		}
		if wl.Load && len(ops) < n {
			return
		}
	}
}

// gomaxprocs is recorded in the report.
func gomaxprocs() int { return runtime.GOMAXPROCS(0) }

package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kvorum/kvorum/internal/check"
)

// ErrInterrupted is returned by Run when its context ends before the run
// completes (Ctrl-C).
var ErrInterrupted = errors.New("interrupted")

// Bounds of the phases around the faults.
const (
	startupTimeout  = 30 * time.Second // first leader, every node ready
	convergeTimeout = 15 * time.Second // replicas reach the same applied index
	stopTimeout     = 10 * time.Second // SIGTERM to exit
)

type runner struct {
	cfg  *Config
	out  io.Writer
	rec  *check.Recorder
	nw   network
	c    *cluster
	v    *Verdict
	cuts map[[2]int]bool
	// report writes the checked history and porcupine's HTML into a
	// directory (set once the history is checked).
	report func(dir string) (html, history string, err error)
}

// say prints a progress line stamped with the run's clock.
func (r *runner) say(format string, a ...any) {
	fmt.Fprintf(r.out, "t=%.1fs %s\n", r.rec.Now().Seconds(), fmt.Sprintf(format, a...))
}

func (r *runner) violation(format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	r.v.Violations = append(r.v.Violations, msg)
	r.say("VIOLATION: %s", msg)
}

// Run carries out one chaos run and returns its verdict. An error means the
// run could not be carried out (bad configuration, the cluster could not be
// set up, or ctx ended): the verdict, if not nil, holds what is known, and
// the data directory is kept.
func Run(ctx context.Context, cfg Config) (*Verdict, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	began := time.Now()
	out := cfg.Progress
	if out == nil {
		out = io.Discard
	}
	v := &Verdict{Nodes: cfg.Nodes, Seed: cfg.Seed, Duration: secs(cfg.Duration),
		Faults: map[Kind]int{}, Violations: []string{}, FaultLog: []FaultEvent{}, Linearizable: "not checked"}
	defer func() { v.TotalDuration = secs(time.Since(began)) }()

	runDir, created, err := prepareDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	v.DataDir, v.DataKept = runDir, true

	nw, reason, err := openNetwork(ctx, &cfg, func(format string, a ...any) {
		fmt.Fprintf(out, format+"\n", a...)
	})
	if err != nil {
		if created {
			_ = os.RemoveAll(runDir)
			v.DataKept = false
		}
		return v, fmt.Errorf("network setup (%s): %w", cfg.Network, err)
	}
	defer nw.close()
	v.Mode, v.ModeReason, v.Network = nw.mode(), reason, nw.describe()

	r := &runner{cfg: &cfg, out: out, rec: check.NewRecorder(), nw: nw, v: v, cuts: map[[2]int]bool{}}
	r.c = newCluster(&cfg, nw, runDir, r.rec.Now)
	fmt.Fprintf(out, "kvorum chaos: seed %d (repeat with --seed %d), %d nodes, %v of faults (%s), network mode %s (%s)\n",
		cfg.Seed, cfg.Seed, cfg.Nodes, cfg.Duration, kindList(cfg.Kinds), v.Mode, reason)
	fmt.Fprintf(out, "network: %s\n", v.Network)
	fmt.Fprintf(out, "data and node logs: %s\n", runDir)

	stopped := false
	defer func() {
		if !stopped {
			r.c.killAll()
		}
	}()

	err = r.execute(ctx)
	if err == nil {
		// Stop cleanly: a node that does not is a violation too.
		var wg sync.WaitGroup
		var mu sync.Mutex
		for _, p := range r.c.procs {
			if p.getState() == stateDown {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := r.c.stop(p, stopTimeout); err != nil {
					mu.Lock()
					r.violation("clean shutdown at the end: %v", err)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		stopped = true
		for _, u := range r.c.takeUnexpected() {
			r.violation("%s", u)
		}
	}
	if pn, ok := nw.(*proxyNet); ok && pn.unidentified() > 0 {
		v.Notes = append(v.Notes, fmt.Sprintf("%d proxied peer connections had no identifiable source node; they were cut only when their destination was isolated", pn.unidentified()))
	}
	if err != nil {
		if ctx.Err() != nil {
			err = ErrInterrupted
		}
		v.Result = ResultFail
		return v, err
	}

	switch {
	case len(v.Violations) > 0 || v.Linearizable == "no":
		v.Result = ResultFail
	case v.Linearizable != "yes":
		v.Result = ResultInconclusive
	default:
		v.Result = ResultPass
	}
	remove := v.Passed() && !cfg.Keep
	v.DataKept = !remove
	r.writeReports()
	if remove {
		removeRunData(runDir, created, cfg.Nodes)
	}
	return v, nil
}

// writeReports writes, unless the run passed, the history and porcupine's
// HTML (into --out, else the data directory), and the verdict as JSON into
// --out if given.
func (r *runner) writeReports() {
	v, dir := r.v, r.cfg.OutDir
	if !v.Passed() && r.report != nil {
		d := dir
		if d == "" {
			d = v.DataDir
		}
		html, hist, err := r.report(d)
		if err != nil {
			v.Notes = append(v.Notes, "writing the report: "+err.Error())
		} else {
			v.ReportHTML, v.HistoryFile = html, hist
		}
	}
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		v.Notes = append(v.Notes, "writing the verdict: "+err.Error())
		return
	}
	path := filepath.Join(dir, fmt.Sprintf("chaos-seed-%d.verdict.json", v.Seed))
	v.VerdictFile = path
	f, err := os.Create(path)
	if err == nil {
		err = v.WriteJSON(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		v.Notes = append(v.Notes, "writing the verdict: "+err.Error())
		v.VerdictFile = ""
	}
}

// execute runs the cluster through the schedule and checks it. Violations
// go to r.v; an error means the run itself failed.
func (r *runner) execute(ctx context.Context) error {
	cfg, c, v := r.cfg, r.c, r.v
	for _, p := range c.procs {
		if err := c.start(p); err != nil {
			return err
		}
	}
	for _, p := range c.procs {
		if err := c.checkExec(p); err != nil {
			return err
		}
	}
	lead, err := c.waitAllReady(ctx, startupTimeout)
	if err != nil {
		return fmt.Errorf("the new cluster did not become ready within %v: %v (node logs in %s)", startupTimeout, err, filepath.Dir(c.procs[0].logPath))
	}
	r.say("cluster ready, leader node %d", lead)

	addrs := make([]string, len(c.procs))
	for i, p := range c.procs {
		addrs[i] = p.addrs.Client
	}
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	wdone := make(chan *check.WorkloadResult, 1)
	go func() {
		wdone <- check.RunWorkload(wctx, check.WorkloadConfig{Addrs: addrs, Clients: cfg.Clients, Keys: cfg.Keys,
			Seed: cfg.Seed, OpTimeout: cfg.OpTimeout, Durable: true}, r.rec)
	}()
	bdone := make(chan *check.Bank, 1)
	go func() { bdone <- check.RunBank(wctx, cfg.Seed, addrs) }()
	workloadStart := r.rec.Now()
	r.say("workload started: %d clients over %d nodes", cfg.Clients, len(addrs))
	if _, ok := r.waitWriteAfter(ctx, workloadStart, cfg.RecoveryTimeout); !ok {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("no write succeeded within %v on the healthy cluster", cfg.RecoveryTimeout)
	}

	// Faults.
	faultStart := r.rec.Now()
	end := faultStart + cfg.Duration
	schedule := NewSchedule(ScheduleConfig{Seed: cfg.Seed, Nodes: cfg.Nodes, Kinds: cfg.Kinds,
		IntervalMin: cfg.IntervalMin, IntervalMax: cfg.IntervalMax, Duration: cfg.Duration,
		ElectionTimeout: cfg.ElectionTimeout()})
	recovered := true
	for i, s := range schedule {
		if r.rec.Now()+s.Wait+s.Hold > end {
			break
		}
		if !sleepCtx(ctx, s.Wait) {
			return ctx.Err()
		}
		ev, err := r.fault(ctx, i+1, s)
		if err != nil {
			return err
		}
		at, healedAt := ev.at, ev.healedAt
		w, ok := r.waitWriteAfter(ctx, healedAt, cfg.RecoveryTimeout)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if first, ok := r.firstWriteAfter(at); ok {
			ev.FirstWrite = secs(first - at)
		}
		if ok {
			ev.Recovery = secs(w - healedAt)
			gap, _ := r.rec.LongestGap(at, w)
			ev.Unavailable = secs(gap)
			r.say("  writes resumed %.2fs after the heal (longest gap since the fault %.2fs)", float64(ev.Recovery), gap.Seconds())
		} else {
			ev.Recovery = -1
			gap, _ := r.rec.LongestGap(at, r.rec.Now())
			ev.Unavailable = secs(gap)
			r.violation("fault %d (%s): no successful write within %v after the heal", ev.N, ev.What, cfg.RecoveryTimeout)
		}
		v.FaultLog = append(v.FaultLog, ev)
		for _, u := range c.takeUnexpected() {
			r.violation("%s", u)
		}
		if err := r.restoreAll(); err != nil {
			return err
		}
		if !ok {
			recovered = false
			break // the cluster is stuck: more faults would tell nothing
		}
	}
	if recovered {
		if !sleepCtx(ctx, end-r.rec.Now()) {
			return ctx.Err()
		}
	}

	// Everything healed and running: the cluster must serve again.
	if err := r.restoreAll(); err != nil {
		return err
	}
	finalFrom := r.rec.Now()
	if recovered {
		if _, ok := r.waitWriteAfter(ctx, finalFrom, cfg.RecoveryTimeout); !ok {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r.violation("no successful write within %v at the end, with every node up and no partition", cfg.RecoveryTimeout)
		}
	}
	r.say("fault phase over (%d faults); stopping the workload", v.FaultsTotal)
	wcancel()
	var res *check.WorkloadResult
	select {
	case res = <-wdone:
	case <-time.After(cfg.OpTimeout + 30*time.Second):
		return errors.New("the workload did not stop")
	}
	var bank *check.Bank
	select {
	case bank = <-bdone:
	case <-time.After(30 * time.Second):
		return errors.New("the bank workload did not stop")
	}
	st := r.rec.Stats()
	v.Ops = OpCounts{Invoked: st.Invoked, Ok: st.Ok, Failed: st.Failed, Unknown: st.Unknown, Writes: st.Writes, OkWrites: st.OkWrites}
	gap, gapAt := r.rec.LongestGap(workloadStart, r.rec.Now())
	v.LongestGap, v.LongestGapAt = secs(gap), secs(gapAt)

	// Every node up, ready, agreeing on a leader.
	if lead, err := c.waitAllReady(ctx, cfg.RecoveryTimeout); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r.violation("the cluster did not become fully ready within %v after the faults: %v", cfg.RecoveryTimeout, err)
	} else {
		r.say("every node ready, leader node %d", lead)
	}

	// Acknowledged writes, read back through every node.
	v.AckedDurable = len(res.AckedDurable)
	for _, vs := range res.AckedAppends {
		v.AckedAppends += len(vs)
	}
	lostSet := map[string]bool{}
	for _, p := range c.procs {
		vctx, cancel := context.WithTimeout(ctx, cfg.RecoveryTimeout)
		lost, err := check.VerifyDurable(vctx, p.addrs.Client, res)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			r.violation("reading back acknowledged writes through node %d: %v", p.id, err)
		}
		for _, l := range lost {
			if !lostSet[l] {
				lostSet[l] = true
				if len(v.LostSample) < 20 {
					v.LostSample = append(v.LostSample, fmt.Sprintf("via node %d: %s", p.id, l))
				}
			}
		}
	}
	v.Lost = len(lostSet)
	r.say("read back %d acknowledged durability keys and %d list appends through every node: %d lost", v.AckedDurable, v.AckedAppends, v.Lost)
	if v.Lost > 0 {
		r.violation("%d acknowledged writes lost or corrupted (e.g. %s)", v.Lost, strings.Join(v.LostSample[:min(3, len(v.LostSample))], "; "))
	}

	// Transfers between accounts: never seen half-applied.
	vctx, cancel := context.WithTimeout(ctx, cfg.RecoveryTimeout)
	broken := bank.Verify(vctx, c.procs[0].addrs.Client)
	cancel()
	v.BankTransfers, v.BankAudits = bank.Counts()
	r.say("bank: %d transfers, %d audits, %d broken", v.BankTransfers, v.BankAudits, len(broken))
	for _, b := range broken[:min(5, len(broken))] {
		r.violation("bank audit: %s", b)
	}

	// Replicas converge to the same applied index.
	r.converge(ctx)

	// Linearizability.
	r.say("checking linearizability of %d operations (up to %v)", st.Invoked, cfg.CheckTimeout)
	t0 := time.Now()
	ops := r.rec.Operations()
	res2 := check.Check(ops, cfg.CheckTimeout)
	v.CheckTime, v.CheckedOps = secs(time.Since(t0)), res2.Checked
	switch {
	case res2.Linearizable:
		v.Linearizable = "yes"
	case res2.TimedOut:
		v.Linearizable = "unknown: checker timed out"
	default:
		v.Linearizable = "no"
		v.BadKeys = res2.BadKeys
		r.violation("the history is not linearizable (keys %s)", strings.Join(res2.BadKeys, ", "))
	}
	name := fmt.Sprintf("chaos-seed-%d", cfg.Seed)
	r.report = func(dir string) (string, string, error) { return res2.WriteReport(dir, name, ops) }
	r.say("linearizable: %s (%.1fs)", v.Linearizable, float64(v.CheckTime))
	return nil
}

// converge waits until every node reports the same raft_applied_index.
func (r *runner) converge(ctx context.Context) {
	deadline := time.Now().Add(convergeTimeout)
	var idx []uint64
	var err error
	for {
		idx, err = r.c.appliedIndexes(ctx)
		if err == nil && allEqual(idx) {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		r.violation("reading raft_applied_index: %v", err)
		return
	}
	r.v.AppliedIndex = map[string]uint64{}
	for i, x := range idx {
		r.v.AppliedIndex[strconv.Itoa(i+1)] = x
	}
	r.v.Converged = allEqual(idx)
	if !r.v.Converged {
		r.violation("replicas did not converge within %v: %s", convergeTimeout, appliedText(r.v))
	} else {
		r.say("replicas converged: raft_applied_index %d on every node", idx[0])
	}
}

func allEqual(xs []uint64) bool {
	for _, x := range xs {
		if x != xs[0] {
			return false
		}
	}
	return len(xs) > 0
}

// waitWriteAfter waits up to limit for a successful write completed after
// t and returns its time.
func (r *runner) waitWriteAfter(ctx context.Context, t, limit time.Duration) (time.Duration, bool) {
	deadline := time.Now().Add(limit)
	for {
		if w, ok := r.firstWriteAfter(t); ok {
			return w, true
		}
		if time.Now().After(deadline) || !sleepCtx(ctx, 50*time.Millisecond) {
			return 0, false
		}
	}
}

func (r *runner) firstWriteAfter(t time.Duration) (time.Duration, bool) {
	ws := r.rec.WriteSuccesses()
	i := sort.Search(len(ws), func(i int) bool { return ws[i] > t })
	if i < len(ws) {
		return ws[i], true
	}
	return 0, false
}

// restoreAll heals every cut, resumes paused nodes and starts nodes that
// are down.
func (r *runner) restoreAll() error {
	if err := r.healCuts(); err != nil {
		return err
	}
	for _, p := range r.c.procs {
		switch p.getState() {
		case statePaused:
			if err := r.c.resume(p); err != nil {
				return err
			}
			r.say("SIGCONT node %d", p.id)
		case stateDown:
			if err := r.c.start(p); err != nil {
				return err
			}
			r.say("start node %d (it was down)", p.id)
		}
	}
	return nil
}

func (r *runner) cutBoth(a, b []int) error {
	for _, x := range a {
		for _, y := range b {
			if err := r.cutOne(x, y); err != nil {
				return err
			}
			if err := r.cutOne(y, x); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *runner) cutOne(from, to int) error {
	if r.cuts[[2]int{from, to}] {
		return nil
	}
	if err := r.nw.cut(from, to); err != nil {
		return fmt.Errorf("cutting %d -> %d: %w", from, to, err)
	}
	r.cuts[[2]int{from, to}] = true
	return nil
}

func (r *runner) healCuts() error {
	for k := range r.cuts {
		if err := r.nw.heal(k[0], k[1]); err != nil {
			return fmt.Errorf("healing %d -> %d: %w", k[0], k[1], err)
		}
		delete(r.cuts, k)
	}
	return nil
}

// fault injects step s, holds it and heals it.
func (r *runner) fault(ctx context.Context, n int, s Step) (FaultEvent, error) {
	c := r.c
	ev := FaultEvent{N: n, Kind: s.Kind}
	lead := c.waitLeader(ctx, 3*time.Second)
	var running []int
	for _, p := range c.procs {
		if p.getState() == stateRunning {
			running = append(running, p.id)
		}
	}
	var followers []int
	for _, id := range running {
		if id != lead {
			followers = append(followers, id)
		}
	}
	if len(followers) == 0 {
		return ev, errors.New("no running follower to target")
	}
	follower := followers[int(s.Pick%uint32(len(followers)))]
	target, role := follower, "follower"
	if lead == 0 {
		role = "no leader known"
	} else if s.Leader {
		target, role = lead, "leader"
	}
	p := c.node(target)
	// at is taken just before the fault is applied: the unavailability
	// it causes starts there.
	var at time.Duration
	inject := func(format string, a ...any) {
		ev.What = fmt.Sprintf(format, a...)
		ev.at, ev.At = at, secs(at)
		r.v.Faults[s.Kind]++
		r.v.FaultsTotal++
		r.say("%s", ev.What)
	}
	heal := func(format string, a ...any) {
		ev.Heal = fmt.Sprintf(format, a...)
		ev.healedAt = r.rec.Now()
		ev.HealedAt = secs(ev.healedAt)
		r.say("%s", ev.Heal)
	}
	switch s.Kind {
	case KindKill:
		at = r.rec.Now()
		if err := c.kill9(p); err != nil {
			return ev, err
		}
		inject("kill -9 node %d (%s)", target, role)
		if !sleepCtx(ctx, s.Hold) {
			return ev, ctx.Err()
		}
		if err := c.start(p); err != nil {
			return ev, err
		}
		heal("restart node %d after kill -9", target)
	case KindPause:
		at = r.rec.Now()
		if err := c.pause(p); err != nil {
			return ev, err
		}
		inject("SIGSTOP node %d (%s) for %v (election timeout %v)", target, role, s.Hold.Round(10*time.Millisecond), r.cfg.ElectionTimeout())
		if !sleepCtx(ctx, s.Hold) {
			return ev, ctx.Err()
		}
		if p.getState() == stateDown {
			heal("node %d exited while stopped; not resumed", target)
			break
		}
		if err := c.resume(p); err != nil {
			return ev, err
		}
		heal("SIGCONT node %d", target)
	case KindRestart:
		at = r.rec.Now()
		t0 := time.Now()
		if err := c.stop(p, stopTimeout); err != nil {
			r.violation("clean restart: %v", err)
		}
		inject("SIGTERM node %d (%s): stopped cleanly in %.2fs", target, role, time.Since(t0).Seconds())
		if !sleepCtx(ctx, s.Hold) {
			return ev, ctx.Err()
		}
		if err := c.start(p); err != nil {
			return ev, err
		}
		heal("start node %d again", target)
	case KindPartition:
		at = r.rec.Now()
		var err error
		switch s.Shape {
		case ShapeOneWay:
			other, otherRole := lead, "leader"
			if lead == 0 { // no leader known: between two nodes
				other, otherRole = running[0], "node"
				if other == follower {
					other = running[1]
				}
			}
			from, to, dir := follower, other, "follower -> "+otherRole
			if s.FromLeader {
				from, to, dir = other, follower, otherRole+" -> follower"
			}
			err = r.cutOne(from, to)
			inject("one-way cut: node %d -> node %d (%s; the reverse direction still works)", from, to, dir)
		case ShapeSplit:
			minority := []int{follower, followers[int((s.Pick+1)%uint32(len(followers)))]}
			what := "leader in the majority"
			if s.FromLeader && lead != 0 {
				minority = []int{lead, follower}
				what = "leader in the minority"
			}
			majority := others(running, minority)
			err = r.cutBoth(minority, majority)
			inject("partition %s | %s (split, %s)", setText(minority), setText(majority), what)
		default: // isolate the leader or a follower
			majority := others(running, []int{target})
			err = r.cutBoth([]int{target}, majority)
			inject("partition %s | %s (isolate node %d, %s)", setText([]int{target}), setText(majority), target, role)
		}
		if err != nil {
			return ev, err
		}
		if !sleepCtx(ctx, s.Hold) {
			return ev, ctx.Err()
		}
		if err := r.healCuts(); err != nil {
			return ev, err
		}
		heal("heal the partition")
	}
	return ev, nil
}

func others(all, except []int) []int {
	var out []int
	for _, x := range all {
		skip := false
		for _, e := range except {
			if e == x {
				skip = true
			}
		}
		if !skip {
			out = append(out, x)
		}
	}
	return out
}

func setText(ids []int) string {
	s := make([]string, len(ids))
	sorted := append([]int(nil), ids...)
	sort.Ints(sorted)
	for i, id := range sorted {
		s[i] = strconv.Itoa(id)
	}
	return "{" + strings.Join(s, ",") + "}"
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// openNetwork sets up the network mode asked for (auto: netns when root
// and ip netns work, else proxy) and says why it was chosen.
func openNetwork(ctx context.Context, cfg *Config, logf func(string, ...any)) (network, string, error) {
	switch cfg.Network {
	case ModeNetns:
		nw, err := newNetns(ctx, cfg.Nodes, cfg.Subnet, cfg.NetnsCut, logf)
		if err != nil {
			return nil, "", err
		}
		return nw, "--network netns", nil
	case ModeProxy:
		if err := proxyUsable(); err != nil {
			return nil, "", err
		}
		nw, err := newProxy(cfg.Nodes)
		if err != nil {
			return nil, "", err
		}
		return nw, "--network proxy", nil
	}
	var reason string
	if why := netnsUsable(); why == nil {
		nw, err := newNetns(ctx, cfg.Nodes, cfg.Subnet, cfg.NetnsCut, logf)
		if err == nil {
			return nw, "auto: running as root and ip netns works", nil
		}
		reason = fmt.Sprintf("auto: network namespaces could not be set up (%v), so proxy", err)
	} else {
		reason = fmt.Sprintf("auto: %v, so proxy", why)
	}
	if err := proxyUsable(); err != nil {
		return nil, "", err
	}
	nw, err := newProxy(cfg.Nodes)
	if err != nil {
		return nil, "", err
	}
	return nw, reason, nil
}

// prepareDir returns the directory for the run's data: dir (created if
// missing; it must not hold node data already) or a new temporary one.
func prepareDir(dir string) (path string, created bool, err error) {
	if dir == "" {
		d, err := os.MkdirTemp("", "kvorum-chaos-")
		if err != nil {
			return "", false, err
		}
		return d, true, nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", false, err
	}
	if _, err := os.Stat(abs); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(abs, 0o755); err != nil {
			return "", false, err
		}
		return abs, true, nil
	}
	ents, err := os.ReadDir(abs)
	if err != nil {
		return "", false, err
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "node-") {
			return "", false, fmt.Errorf("--data-dir %s already holds node data (%s); chaos starts a new cluster each run: give an empty or new directory", abs, e.Name())
		}
	}
	return abs, false, nil
}

// removeRunData removes what the run wrote: the whole directory if the run
// created it, else the node directories and logs in it.
func removeRunData(dir string, created bool, nodes int) {
	if created {
		_ = os.RemoveAll(dir)
		return
	}
	for i := 1; i <= nodes; i++ {
		_ = os.RemoveAll(filepath.Join(dir, fmt.Sprintf("node-%d", i)))
		_ = os.Remove(filepath.Join(dir, fmt.Sprintf("node-%d.log", i)))
	}
}

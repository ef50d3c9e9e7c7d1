package torture

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/kvorum/kvorum/internal/check"
	"github.com/kvorum/kvorum/internal/server"
)

// Config describes one torture run.
type Config struct {
	Seed  int64
	Nodes int // 3 or 5
	// Phase is how long faults are injected while clients run.
	Phase   time.Duration
	Clients int
	Kinds   []Kind // nil: every kind
	// Unsafe deliberately breaks the nodes (self-test of the checks).
	Unsafe server.Unsafe
	// OutDir receives the history and its HTML visualisation when the
	// history is not linearizable. Empty: not written.
	OutDir string
	// NodeLogDir, if set, receives each node's log (debug level), one
	// file per seed and node (cluster.nodeLogger); unset: discarded.
	NodeLogDir string
	// Logf receives progress lines (faults as they fire); nil: silent.
	Logf func(format string, args ...any)
}

// Result is what one run found.
type Result struct {
	Seed     int64
	Schedule []Event
	Applied  map[Kind]int // faults actually injected
	Skipped  []string     // scheduled faults that could not be injected, and why
	Stats    check.Stats
	// Linearizable is the checker's verdict; CheckTimedOut means it could
	// neither prove nor refute it in time (not a violation).
	Linearizable  bool
	CheckTimedOut bool
	Report        string   // HTML visualisation of a violating history
	BadKeys       []string // keys whose history is not linearizable
	Lost          []string // acknowledged writes missing after recovery
	TTL           []string // TTL keys expired early or with an impossible TTL
	Diverged      string   // replicas at the same applied index with different state
	Recovery      string   // the cluster did not recover after the faults ended
	Died          []string // nodes that stopped by themselves (fatal errors)
	Locks         []string // lock safety violations (locks.go)
	LockGrants    int      // lock grants the lock clients used
	Bank          []string // audits that saw a transfer half-applied (check.Bank)
	BankTransfers int      // acknowledged transfers
	BankAudits    int      // successful audits
	CatchUps      int      // restarts and joins that had to catch up
}

// Failed reports whether the run found a violation.
func (r *Result) Failed() bool {
	return !r.Linearizable && !r.CheckTimedOut || len(r.Lost) > 0 || len(r.TTL) > 0 || r.Diverged != "" || r.Recovery != "" || len(r.Died) > 0 || len(r.Locks) > 0 || len(r.Bank) > 0
}

// Summary is a one-paragraph account of the run.
func (r *Result) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %d ops (%d ok, %d failed, %d unknown), faults %v", r.Seed,
		r.Stats.Invoked, r.Stats.Ok, r.Stats.Failed, r.Stats.Unknown, r.Applied)
	switch {
	case r.CheckTimedOut:
		b.WriteString("; linearizability: checker timed out")
	case r.Linearizable:
		b.WriteString("; linearizable")
	default:
		fmt.Fprintf(&b, "; NOT LINEARIZABLE on keys %v", r.BadKeys)
		if r.Report != "" {
			b.WriteString(" (see " + r.Report + ")")
		}
	}
	fmt.Fprintf(&b, "; %d lock grants", r.LockGrants)
	if len(r.Locks) > 0 {
		fmt.Fprintf(&b, "; LOCK VIOLATIONS: %v", first(r.Locks, 5))
	}
	fmt.Fprintf(&b, "; %d bank transfers, %d audits", r.BankTransfers, r.BankAudits)
	if len(r.Bank) > 0 {
		fmt.Fprintf(&b, "; BANK AUDITS BROKEN: %v", first(r.Bank, 3))
	}
	if len(r.Lost) > 0 {
		fmt.Fprintf(&b, "; %d acknowledged writes LOST: %v", len(r.Lost), first(r.Lost, 5))
	}
	if len(r.TTL) > 0 {
		fmt.Fprintf(&b, "; %d TTL keys WRONG: %v", len(r.TTL), first(r.TTL, 5))
	}
	if r.Diverged != "" {
		b.WriteString("; DIVERGED: " + r.Diverged)
	}
	if r.Recovery != "" {
		b.WriteString("; NO RECOVERY: " + r.Recovery)
	}
	for _, d := range r.Died {
		b.WriteString("; " + d)
	}
	return b.String()
}

func first(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// Run starts a cluster, runs clients while injecting the seed's fault
// schedule, then heals everything and checks the history, durability and
// convergence. err reports a harness failure (the cluster could not be
// started), not a violation: see Result.Failed.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Nodes == 0 {
		cfg.Nodes = 3
	}
	if cfg.Phase == 0 {
		cfg.Phase = 2 * time.Second
	}
	if cfg.Clients == 0 {
		cfg.Clients = 4
	}
	logf := cfg.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	res := &Result{Seed: cfg.Seed, Applied: map[Kind]int{}}
	res.Schedule = MakeSchedule(cfg.Seed, cfg.Nodes, cfg.Phase, cfg.Kinds)

	c, err := newCluster(cfg, logf)
	if err != nil {
		return nil, err
	}
	defer c.stopAll()
	if err := c.waitLeader(ctx, 10*time.Second); err != nil {
		return nil, fmt.Errorf("initial election: %w", err)
	}

	rec := check.NewRecorder()
	wctx, stopClients := context.WithCancel(ctx)
	defer stopClients()
	var wres *check.WorkloadResult
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		wres = check.RunWorkload(wctx, check.WorkloadConfig{
			Addrs: c.clientAddrs(), Clients: cfg.Clients, Keys: 3, Seed: cfg.Seed,
			OpTimeout: 1500 * time.Millisecond, Durable: true,
		}, rec)
	}()

	var locks *lockWorkload
	wg.Add(1)
	go func() {
		defer wg.Done()
		locks = lockWorkers(wctx, c.clientAddrs())
	}()

	var bank *check.Bank
	wg.Add(1)
	go func() {
		defer wg.Done()
		bank = check.RunBank(wctx, cfg.Seed, c.clientAddrs())
	}()

	var ttlAcked []string
	wg.Add(1)
	go func() {
		defer wg.Done()
		ttlAcked = ttlWriter(wctx, c.clientAddrs())
	}()

	inj := &injector{c: c, res: res, rng: rand.New(rand.NewPCG(uint64(cfg.Seed), 7)), logf: logf}
	start := time.Now()
	var faults sync.WaitGroup
	for _, ev := range res.Schedule {
		if d := time.Until(start.Add(ev.At)); d > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
		}
		if ctx.Err() != nil {
			break
		}
		faults.Add(1)
		go func(ev Event) {
			defer faults.Done()
			inj.inject(ctx, ev)
		}(ev)
	}
	faults.Wait()
	// Heal everything, bring every node back, let clients see a healthy
	// cluster for a moment, then stop them.
	c.healAll(logf)
	if err := c.waitLeader(ctx, 15*time.Second); err != nil {
		res.Recovery = "no leader within 15 s after every fault was healed: " + err.Error()
	}
	select {
	case <-ctx.Done():
	case <-time.After(300 * time.Millisecond):
	}
	stopClients()
	wg.Wait()
	res.Stats = rec.Stats()
	res.CatchUps = int(c.snaps.Load())

	if res.Recovery == "" {
		vctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		lead := c.leader()
		if lead == nil {
			res.Recovery = "no leader after recovery"
		} else if lost, err := check.VerifyDurable(vctx, lead.cfg.ClientAddr, wres); err != nil {
			res.Recovery = "reading back acknowledged writes: " + err.Error()
		} else {
			res.Lost = lost
			res.TTL = verifyTTL(vctx, lead.cfg.ClientAddr, ttlAcked, time.Duration(c.maxAhead.Load())*time.Millisecond)
			res.Locks = locks.verify(vctx, lead.cfg.ClientAddr)
			res.LockGrants = len(locks.grants)
			res.Bank = bank.Verify(vctx, lead.cfg.ClientAddr)
			res.BankTransfers, res.BankAudits = bank.Counts()
		}
		cancel()
		if msg := c.converge(ctx, 20*time.Second); msg != "" {
			if strings.HasPrefix(msg, "diverged") {
				res.Diverged = msg
			} else if res.Recovery == "" {
				res.Recovery = msg
			}
		}
	}

	c.diedMu.Lock()
	res.Died = append(res.Died, c.died...)
	c.diedMu.Unlock()

	cr := check.Check(rec.Operations(), 30*time.Second)
	res.Linearizable, res.CheckTimedOut, res.BadKeys = cr.Linearizable, cr.TimedOut, cr.BadKeys
	if !cr.Linearizable && !cr.TimedOut && cfg.OutDir != "" {
		html, _, err := cr.WriteReport(cfg.OutDir, fmt.Sprintf("torture-seed-%d", cfg.Seed), rec.Operations())
		if err == nil {
			res.Report = html
		} else {
			res.Report = "(report not written: " + err.Error() + ")"
		}
	}
	return res, nil
}

// waitLeader waits until a running node reports a running leader that
// itself knows it leads.
func (c *cluster) waitLeader(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		c.mu.Lock()
		l := c.leader()
		ok := l != nil && l.node.Status().Role == "leader"
		c.mu.Unlock()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("no leader elected")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// healAll restores the network and clocks and restarts every crashed node.
func (c *cluster) healAll(logf func(string, ...any)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.net.heal()
	for _, s := range c.slots {
		s.offset.Store(0)
		if s.node == nil {
			if err := c.restart(s); err != nil {
				logf("heal: restart node %d: %v", s.id, err)
			}
		}
	}
}

// converge waits until every member has applied the same index and checks
// that their state hashes agree there. It returns "" on success, a message
// starting with "diverged" on a violation, or another message if the
// members did not reach the same index in time.
func (c *cluster) converge(ctx context.Context, d time.Duration) string {
	deadline := time.Now().Add(d)
	last := ""
	suspect := ""
	for time.Now().Before(deadline) && ctx.Err() == nil {
		c.mu.Lock()
		lead := c.leader()
		var nodes []*server.Node
		if lead != nil {
			m := members(lead.node)
			for _, s := range c.running() {
				if m[s.id] {
					nodes = append(nodes, s.node)
				}
			}
		}
		c.mu.Unlock()
		if lead == nil {
			last = "no leader"
			time.Sleep(20 * time.Millisecond)
			continue
		}
		type hs struct {
			id      uint64
			applied uint64
			sum     [32]byte
		}
		var got []hs
		same := true
		for _, n := range nodes {
			a, sum, _, err := n.StateHash()
			if err != nil {
				return "state hash: " + err.Error()
			}
			got = append(got, hs{n.ID(), a, sum})
			same = same && a == got[0].applied
		}
		if same && len(got) > 0 {
			differ := ""
			for _, g := range got[1:] {
				if g.sum != got[0].sum {
					differ = fmt.Sprintf("diverged: node %d and node %d both applied index %d but their state hashes differ (%x vs %x)",
						got[0].id, g.id, g.applied, got[0].sum[:8], g.sum[:8])
				}
			}
			if differ == "" {
				return ""
			}
			// With several ranges the applied index is a sum over them
			// (Node.StateHash): equal sums may hide different per-range
			// indexes for a moment. A divergence is the same sums and
			// different hashes seen twice, 300 ms apart.
			if differ == suspect {
				for _, n := range nodes {
					differ += fmt.Sprintf("; node %d ranges:", n.ID())
					for _, r := range n.Ranges().Ranges {
						differ += fmt.Sprintf(" r%d[%d,%d)@%d", r.RangeID, r.StartSlot, r.EndSlot, r.AppliedIndex)
					}
				}
				return differ
			}
			suspect = differ
			time.Sleep(300 * time.Millisecond)
			continue
		}
		suspect = ""
		last = "applied indexes differ:"
		for _, g := range got {
			last += fmt.Sprintf(" node %d at %d", g.id, g.applied)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return "members did not reach the same applied index within " + d.String() + ": " + last + "; " + c.describe()
}

// describe reports every slot's node as it sees the cluster.
func (c *cluster) describe() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, s := range c.slots {
		if s.node == nil {
			fmt.Fprintf(&b, "[node %d down] ", s.id)
			continue
		}
		st := s.node.Status()
		var ms []string
		for _, m := range st.Members {
			l := ""
			if m.Learner {
				l = "(learner)"
			}
			ms = append(ms, fmt.Sprintf("%d%s@%d", m.ID, l, m.Match))
		}
		fmt.Fprintf(&b, "[node %d %s term %d leader %d commit %d applied %d members %v dead %v] ",
			s.id, st.Role, st.Term, st.Leader, st.CommitIndex, st.AppliedIndex, ms, s.dead.Load())
	}
	return b.String()
}

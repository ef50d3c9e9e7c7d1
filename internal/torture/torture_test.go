package torture

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/server"
	"github.com/redis/go-redis/v9"
)

var (
	flagSeeds    = flag.Int("torture.seeds", 24, "seeds per cluster size in TestTorture (3 nodes: this many, 5 nodes: a third)")
	flagFirst    = flag.Int64("torture.first", 1, "first seed of the sweep")
	flagSeed     = flag.Int64("torture.seed", 0, "run only this seed (replay a failure)")
	flagNodes    = flag.Int("torture.nodes", 0, "with -torture.seed: cluster size (default 3)")
	flagPhase    = flag.Duration("torture.phase", 1500*time.Millisecond, "fault phase per seed")
	flagKinds    = flag.String("torture.kinds", "all", "fault kinds: all or a comma list of "+fmt.Sprint(AllKinds)+" and the opt-in "+fmt.Sprint(OptInKinds))
	flagParallel = flag.Int("torture.parallel", 3, "seeds run at once")
	flagOut      = flag.String("torture.out", "", "directory for violation reports (default: a temp dir kept on failure)")
	flagVerbose  = flag.Bool("torture.v", false, "log every fault as it fires")
	flagNodeLogs = flag.String("torture.nodelogs", "", "directory for every node's log (debug level), seed-S-node-N.log")
)

func outDir(t *testing.T) string {
	if *flagOut != "" {
		return *flagOut
	}
	d := filepath.Join(os.TempDir(), "kvorum-torture")
	_ = os.MkdirAll(d, 0o755)
	return d
}

func TestScheduleReplays(t *testing.T) {
	a := MakeSchedule(42, 5, 3*time.Second, AllKinds)
	b := MakeSchedule(42, 5, 3*time.Second, AllKinds)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed gave two different schedules")
	}
	c := MakeSchedule(43, 5, 3*time.Second, AllKinds)
	if reflect.DeepEqual(a, c) {
		t.Fatal("seeds 42 and 43 gave the same schedule")
	}
	if len(a) < 5 {
		t.Fatalf("a 3 s schedule has only %d events", len(a))
	}
	kinds := map[Kind]bool{}
	for s := int64(1); s <= 20; s++ {
		for _, e := range MakeSchedule(s, 3, 2*time.Second, AllKinds) {
			kinds[e.Kind] = true
			if e.At >= 2*time.Second {
				t.Fatalf("event past the phase: %v", e)
			}
		}
	}
	for _, k := range AllKinds {
		if !kinds[k] {
			t.Errorf("20 schedules never drew %s", k)
		}
	}
	only, err := ParseKinds("crash,partition")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range MakeSchedule(7, 3, 3*time.Second, only) {
		if e.Kind != Crash && e.Kind != Partition {
			t.Fatalf("kind %s drawn though only crash,partition were allowed", e.Kind)
		}
	}
	if _, err := ParseKinds("crash,meteor"); err == nil {
		t.Fatal("unknown kind accepted")
	}
}

func runSeed(t *testing.T, cfg Config) *Result {
	t.Helper()
	if *flagVerbose {
		cfg.Logf = t.Logf
	}
	cfg.OutDir = outDir(t)
	cfg.NodeLogDir = *flagNodeLogs
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("seed %d: harness: %v", cfg.Seed, err)
	}
	return res
}

func report(t *testing.T, res *Result, nodes int) {
	t.Helper()
	t.Errorf("%s\nreplay: go test ./internal/torture -run 'TestTorture$' -torture.seed %d -torture.nodes %d -torture.v\nschedule:", res.Summary(), res.Seed, nodes)
	for _, e := range res.Schedule {
		t.Errorf("  %v", e)
	}
	for _, s := range res.Skipped {
		t.Errorf("  skipped: %s", s)
	}
}

// TestTorture runs the fault schedules of a sweep of seeds against 3- and
// 5-node clusters and requires every run to be linearizable, lose no
// acknowledged write and converge.
func TestTorture(t *testing.T) {
	kinds, err := ParseKinds(*flagKinds)
	if err != nil {
		t.Fatal(err)
	}
	type job struct {
		seed  int64
		nodes int
	}
	var jobs []job
	if *flagSeed != 0 {
		n := *flagNodes
		if n == 0 {
			n = 3
		}
		jobs = append(jobs, job{*flagSeed, n})
	} else {
		for i := 0; i < *flagSeeds; i++ {
			jobs = append(jobs, job{*flagFirst + int64(i), 3})
		}
		for i := 0; i < (*flagSeeds+2)/3; i++ {
			jobs = append(jobs, job{*flagFirst + 1000 + int64(i), 5})
		}
	}
	var mu sync.Mutex
	var ops, faults, catchUps, timedOut, failed, transfers, audits int
	n3 := 0
	for _, j := range jobs {
		if j.nodes == 3 {
			n3++
		}
	}
	sem := make(chan struct{}, *flagParallel)
	t.Run("sweep", func(t *testing.T) {
		for _, j := range jobs {
			j := j
			t.Run(fmt.Sprintf("n%d/seed%d", j.nodes, j.seed), func(t *testing.T) {
				t.Parallel()
				sem <- struct{}{}
				defer func() { <-sem }()
				res := runSeed(t, Config{Seed: j.seed, Nodes: j.nodes, Phase: *flagPhase, Kinds: kinds})
				mu.Lock()
				ops += res.Stats.Invoked
				for _, n := range res.Applied {
					faults += n
				}
				catchUps += res.CatchUps
				transfers += res.BankTransfers
				audits += res.BankAudits
				if res.CheckTimedOut {
					timedOut++
				}
				mu.Unlock()
				if res.Failed() {
					mu.Lock()
					failed++
					mu.Unlock()
					report(t, res, j.nodes)
				}
				if res.Stats.OkWrites == 0 {
					t.Errorf("seed %d: no write succeeded in the whole run: %s", j.seed, res.Summary())
				}
			})
		}
	})
	// Printed, not logged: `make torture` reports these figures without -v
	// (docs/reliability.md quotes them).
	fmt.Printf("torture: %d schedules (%d on 3 nodes, %d on 5), %d operations, %d faults injected, %d restarts/joins caught up, %d bank transfers and %d audits, %d checks timed out, %d failed\n",
		len(jobs), n3, len(jobs)-n3, ops, faults, catchUps, transfers, audits, timedOut, failed)
	if transfers == 0 || audits == 0 {
		t.Errorf("the bank workload made %d transfers and %d audits in the whole sweep", transfers, audits)
	}
}

// The suite must be able to fail: with a deliberately broken node it has
// to find the violation within a few seeds.
func TestTortureCatchesBrokenDurability(t *testing.T) {
	t.Run("ack-before-fsync", func(t *testing.T) {
		findViolation(t, Config{Nodes: 3, Unsafe: server.Unsafe{NoSync: true}, Kinds: []Kind{PowerLoss, Crash}},
			func(r *Result) bool {
				return len(r.Lost) > 0 || (!r.Linearizable && !r.CheckTimedOut) || r.Diverged != ""
			})
	})
	t.Run("reads-without-readindex", func(t *testing.T) {
		findViolation(t, Config{Nodes: 3, Unsafe: server.Unsafe{StaleReads: true}, Kinds: []Kind{Partition, Lossy}},
			func(r *Result) bool { return !r.Linearizable && !r.CheckTimedOut })
	})
}

func findViolation(t *testing.T, cfg Config, found func(*Result) bool) {
	cfg.Phase = *flagPhase
	for seed := int64(1); seed <= 8; seed++ {
		cfg.Seed = seed
		res := runSeed(t, cfg)
		if found(res) {
			t.Logf("caught as expected: %s", res.Summary())
			return
		}
		t.Logf("not caught with seed %d: %s", seed, res.Summary())
	}
	t.Fatal("8 seeds against a deliberately broken cluster found no violation: the suite cannot catch this bug")
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...interface{}) {}

func init() {
	// go-redis logs every failed dial; the schedules kill nodes on purpose.
	redis.SetLogger(quietLogger{})
}

package check

import (
	"context"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvorum/kvorum/internal/localsrv"
)

func TestBankSum(t *testing.T) {
	if s, bad := bankSum([]any{"5", nil, "-3", "-2", nil, "0"}); s != 0 || bad != "" {
		t.Fatalf("sum %d %q", s, bad)
	}
	if _, bad := bankSum([]any{"5", "x"}); !strings.Contains(bad, "{bank}:1 holds x") {
		t.Fatalf("bad %q", bad)
	}
	w := &Bank{}
	w.note("MGET", []any{"1", nil, "-1"})
	w.note("MGET", []any{"1", "-2"})
	if w.audits != 2 || len(w.errs) != 1 || !strings.Contains(w.errs[0], "sum to -1") {
		t.Fatalf("audits %d errs %q", w.audits, w.errs)
	}
}

// TestBankCatchesHalfTransfers: the audit must be able to fail. Against a
// redis-server, the workload's own transfers keep every audit at zero;
// a rogue client that moves money in two separate commands, with a pause
// between them, is caught by the auditor.
func TestBankCatchesHalfTransfers(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redis-server not found: apt-get install redis-server (make test does this, via scripts/ensure-test-deps.sh)")
	}
	ctx := context.Background()
	addrs, procs, err := localsrv.RedisServers(ctx, bin, t.TempDir(), "bank", 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = localsrv.StopAll(procs) })

	run := func(rogue bool) *Bank {
		wctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		defer cancel()
		var wg sync.WaitGroup
		if rogue {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := redis.NewClient(&redis.Options{Addr: addrs[0]})
				defer c.Close()
				for wctx.Err() == nil {
					c.DecrBy(wctx, bankKeys[0], 7)
					time.Sleep(30 * time.Millisecond)
					c.IncrBy(ctx, bankKeys[1], 7)
				}
			}()
		}
		w := RunBank(wctx, 1, addrs)
		wg.Wait()
		w.Verify(ctx, addrs[0])
		return w
	}
	honest := run(false)
	if len(honest.errs) > 0 || honest.transfers < 20 || honest.audits < 20 {
		t.Fatalf("honest run: %d transfers, %d audits, violations %q", honest.transfers, honest.audits, honest.errs)
	}
	if rogue := run(true); len(rogue.errs) == 0 {
		t.Fatalf("a client moving money in two steps went unseen in %d audits", rogue.audits)
	}
}

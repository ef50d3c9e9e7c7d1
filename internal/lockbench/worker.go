package lockbench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kvorum/kvorum/pkg/kvlock"
	"github.com/redis/go-redis/v9"
)

// WorkerEnv names the environment variable that turns the executable into
// a benchmark worker: it holds the WorkerSpec as JSON. The binary's main
// (or a test's TestMain) checks it first and calls WorkerMain.
//
// The protocol on the worker's stdin and stdout, one line each:
//
//	worker -> parent   "ready"                once connected and set up
//	parent -> worker   "start <unix-nanos>"   the common start time
//	worker -> parent   WorkerResult as JSON   after the run
//
// A worker whose stdin closes before the start line exits: it never
// outlives a parent that gave up.
const WorkerEnv = "KVORUM_LOCKBENCH_WORKER"

// WorkerSpec tells a worker what to run.
type WorkerSpec struct {
	Target     string        `json:"target"`
	Proc       int           `json:"proc"`  // 0-based process number
	Addrs      []string      `json:"addrs"` // kvorum, zookeeper: the server to use; redlock: every instance
	Lock       string        `json:"lock"`
	Duration   time.Duration `json:"duration"`
	Hold       time.Duration `json:"hold"`
	TTL        time.Duration `json:"ttl"` // kvorum lease, Redlock key, ZooKeeper session
	RetryDelay time.Duration `json:"retry_delay"`
	Grace      time.Duration `json:"grace"` // an acquire started before the end may take this long past it
}

// WorkerResult is what a worker reports.
type WorkerResult struct {
	Proc int `json:"proc"`
	// Per acquisition, in order: acquire latency, when the lock was held
	// (after the acquire returned) and released (before the release was
	// sent), Unix nanos on this host's clock, and the fencing token (kvorum,
	// zookeeper).
	Latencies []int64 `json:"latencies_ns"`
	Acquired  []int64 `json:"acquired_ns"`
	Released  []int64 `json:"released_ns"`
	Tokens    []int64 `json:"tokens,omitempty"`
	// Attempts counts Redlock rounds (SET NX on every instance); above
	// the acquisitions when attempts failed and were retried.
	Attempts   int64  `json:"attempts,omitempty"`
	Errors     int    `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
}

// maxWorkerErrors ends a worker's run early: a broken target should fail
// the run quickly, not spin for its whole duration.
const maxWorkerErrors = 20

// WorkerMain runs one worker: spec is WorkerEnv's value. It returns the
// process exit code (0 also when the run had errors: they are in the
// result; non-zero when no result could be produced).
func WorkerMain(spec string, stdin io.Reader, stdout, stderr io.Writer) int {
	var ws WorkerSpec
	if err := json.Unmarshal([]byte(spec), &ws); err != nil {
		fmt.Fprintf(stderr, "lockbench worker: bad %s: %v\n", WorkerEnv, err)
		return 2
	}
	res, err := runWorker(ws, bufio.NewReader(stdin), stdout)
	if err != nil {
		fmt.Fprintf(stderr, "lockbench worker %d (%s): %v\n", ws.Proc, ws.Target, err)
		return 1
	}
	if err := json.NewEncoder(stdout).Encode(res); err != nil {
		fmt.Fprintf(stderr, "lockbench worker %d: writing the result: %v\n", ws.Proc, err)
		return 1
	}
	return 0
}

// locker is one target's client in a worker.
type locker interface {
	acquire(ctx context.Context) (token int64, err error)
	release(ctx context.Context) error
	attempts() int64
	close()
}

func runWorker(ws WorkerSpec, in *bufio.Reader, out io.Writer) (*WorkerResult, error) {
	setup, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var l locker
	var err error
	switch ws.Target {
	case TargetKvorum:
		l, err = newKvorumLocker(setup, ws)
	case TargetRedlock:
		l, err = newRedlock(setup, ws)
	case TargetZookeeper:
		l, err = newZkLocker(setup, ws)
	default:
		err = fmt.Errorf("unknown target %q", ws.Target)
	}
	if err != nil {
		return nil, err
	}
	defer l.close()
	if _, err := fmt.Fprintln(out, "ready"); err != nil {
		return nil, err
	}
	line, err := in.ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("no start line from the parent: %w", err)
	}
	f := strings.Fields(line)
	if len(f) != 2 || f[0] != "start" {
		return nil, fmt.Errorf("bad start line %q", line)
	}
	ns, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("bad start line %q", line)
	}
	start := time.Unix(0, ns)
	end := start.Add(ws.Duration)
	// The watchdog: whatever happens, this process ends.
	hard := time.AfterFunc(time.Until(end.Add(ws.Grace+10*time.Second)), func() {
		fmt.Fprintf(os.Stderr, "lockbench worker %d: still running %v after the end; exiting\n", ws.Proc, ws.Grace+10*time.Second)
		os.Exit(3)
	})
	defer hard.Stop()
	time.Sleep(time.Until(start))
	return loop(ws, l, end), nil
}

// loop acquires, holds and releases until end.
func loop(ws WorkerSpec, l locker, end time.Time) *WorkerResult {
	res := &WorkerResult{Proc: ws.Proc}
	fail := func(err error) {
		if res.Errors == 0 {
			res.FirstError = err.Error()
		}
		res.Errors++
	}
	for time.Now().Before(end) && res.Errors < maxWorkerErrors {
		ctx, cancel := context.WithDeadline(context.Background(), end.Add(ws.Grace))
		t0 := time.Now()
		tok, err := l.acquire(ctx)
		lat := time.Since(t0)
		if err != nil {
			cancel()
			fail(fmt.Errorf("acquire: %w", err))
			time.Sleep(10 * time.Millisecond)
			continue
		}
		acq := time.Now().UnixNano()
		if ws.Hold > 0 {
			time.Sleep(ws.Hold)
		}
		rel := time.Now().UnixNano()
		err = l.release(ctx)
		cancel()
		if err != nil {
			fail(fmt.Errorf("release: %w", err))
		}
		res.Latencies = append(res.Latencies, int64(lat))
		res.Acquired = append(res.Acquired, acq)
		res.Released = append(res.Released, rel)
		if recordsTokens(ws.Target) {
			res.Tokens = append(res.Tokens, tok)
		}
	}
	res.Attempts = l.attempts()
	return res
}

// recordsTokens tells whether a target's acquire returns a fencing token
// (kvorum: the LOCK token; zookeeper: the lock znode's sequence number);
// Redlock has none.
func recordsTokens(target string) bool { return target == TargetKvorum || target == TargetZookeeper }

// kvorumLocker takes the lock through pkg/kvlock: one lease (LEASE GRANT,
// kept alive in the background), LOCK ACQUIRE name lease / LOCK RELEASE
// name token.
type kvorumLocker struct {
	rdb *redis.Client
	s   *kvlock.Session
	m   *kvlock.Mutex
}

func newKvorumLocker(ctx context.Context, ws WorkerSpec) (*kvorumLocker, error) {
	if len(ws.Addrs) != 1 {
		return nil, fmt.Errorf("kvorum worker needs one node address, got %v", ws.Addrs)
	}
	// One client to one node: a connection for the lock commands and one
	// for the keep-alive. No read timeout (a contended LOCK ACQUIRE blocks
	// on the server); contexts bound every command instead.
	rdb := redis.NewClient(&redis.Options{
		Addr: ws.Addrs[0], Protocol: 2, PoolSize: 2, MinIdleConns: 2,
		ReadTimeout: -1, ContextTimeoutEnabled: true, DialTimeout: 5 * time.Second,
	})
	s, err := kvlock.NewSession(ctx, rdb, kvlock.WithTTL(ws.TTL))
	if err != nil {
		rdb.Close()
		return nil, fmt.Errorf("%s: %w", ws.Addrs[0], err)
	}
	return &kvorumLocker{rdb: rdb, s: s, m: s.Mutex(ws.Lock)}, nil
}

func (k *kvorumLocker) acquire(ctx context.Context) (int64, error) { return k.m.Lock(ctx) }
func (k *kvorumLocker) release(ctx context.Context) error          { return k.m.Unlock(ctx) }
func (k *kvorumLocker) attempts() int64                            { return 0 }

func (k *kvorumLocker) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = k.s.Close(ctx) // revokes the lease
	k.rdb.Close()
}

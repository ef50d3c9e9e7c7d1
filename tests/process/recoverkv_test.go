package process

// RecoverKV-style correctness tests: the categories of section 4.1 of the
// RecoverKV paper (API structure, batched updates, durability, availability
// and recovery, consistency, client permissions), run against real kvorum
// processes through go-redis with MaxRetries -1, so that the client never
// re-sends a write by itself and every outcome the test sees is the
// server's. Partitioning is in internal/server (TestRecoverKVPartitions),
// where the transport's Partitioner cuts real links.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand"
	"net"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestRecoverKV runs the RecoverKV correctness categories against clusters
// of kvorum processes (one fresh cluster per subtest).
func TestRecoverKV(t *testing.T) {
	// The tests kill nodes on purpose: go-redis would log every failed
	// dial. Other messages still go to the log.
	redis.SetLogger(rkvQuietDials{})
	type test struct {
		name string
		run  func(*testing.T)
	}
	timed := func(tc test) {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			tc.run(t)
			t.Logf("%s: %v", tc.name, time.Since(start).Round(time.Millisecond))
		})
	}
	group := func(name string, tests ...test) {
		t.Run(name, func(t *testing.T) {
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					start := time.Now()
					tc.run(t)
					t.Logf("%s/%s: %v", name, tc.name, time.Since(start).Round(time.Millisecond))
				})
			}
		})
	}
	timed(test{"APIStructure", rkvAPIStructure})
	timed(test{"BatchedUpdates", rkvBatchedUpdates})
	group("Durability",
		test{"clean", func(t *testing.T) { rkvDurability(t, false) }},
		test{"unclean", func(t *testing.T) { rkvDurability(t, true) }})
	group("Availability",
		test{"minority-down", rkvMinorityDown},
		test{"majority-down", rkvMajorityDown},
		test{"kill-during-recovery", rkvKillDuringRecovery})
	group("Consistency",
		test{"after-recovery", rkvAfterRecovery},
		test{"kill-while-serving", rkvKillWhileServing})
	timed(test{"ClientPermissions", rkvClientPermissions})
}

// ---- cluster and client helpers ----

// rkvQuietDials is go-redis's logger without the failed-dial messages.
type rkvQuietDials struct{}

func (rkvQuietDials) Printf(_ context.Context, format string, v ...interface{}) {
	msg := fmt.Sprintf(format, v...)
	if !strings.Contains(msg, "failed to dial") {
		log.Print("redis: " + msg)
	}
}

// rkvCluster is a cluster whose nodes all run with the same extra flags,
// on first start and on every restart.
type rkvCluster struct {
	*cluster
	extra []string
}

// newRKV is newCluster with the same extra flags on every restart too,
// waiting for a leader; it dumps the nodes' logs if the test fails.
func newRKV(t *testing.T, n int, extra ...string) *rkvCluster {
	t.Helper()
	c := newCluster(t, n, extra...)
	r := &rkvCluster{cluster: c, extra: extra}
	t.Cleanup(func() {
		if t.Failed() {
			c.dumpLogs()
		}
	})
	c.waitLeader()
	return r
}

// restart starts a stopped node again from its data directory.
func (r *rkvCluster) restart(p *proc) { r.start(p, r.extra...) }

// killAll kills every running node with sig at (nearly) the same moment.
func (r *rkvCluster) killAll(sig syscall.Signal) {
	var wg sync.WaitGroup
	for _, p := range r.procs {
		wg.Add(1)
		go func(p *proc) {
			defer wg.Done()
			r.kill(p, sig)
		}(p)
	}
	wg.Wait()
}

func (r *rkvCluster) others(p *proc) []*proc {
	var out []*proc
	for _, q := range r.procs {
		if q != p {
			out = append(out, q)
		}
	}
	return out
}

// waitReady waits until node p reports a leader and can serve a
// linearizable read (not waiting for the others, unlike waitLeader).
func (r *rkvCluster) waitReady(p *proc, within time.Duration) {
	r.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if st, err := r.status(p); err == nil && st.Ready && st.Leader != 0 {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	r.t.Fatalf("node %d not ready within %v", p.id, within)
}

func sigName(sig syscall.Signal) string {
	if sig == syscall.SIGKILL {
		return "kill -9"
	}
	return "SIGTERM"
}

// raftProgress is the part of /v1/status that says how far a node is.
type raftProgress struct {
	Role         string `json:"role"`
	Leader       uint64 `json:"leader"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
}

func progress(p *proc) (raftProgress, error) {
	var st raftProgress
	cl := http.Client{Timeout: time.Second}
	resp, err := cl.Get("http://" + p.admin + "/v1/status")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// alive reports whether p's process is running (not exited, not a zombie).
func alive(p *proc) bool {
	if p.cmd == nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

func rkvCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// rkvClient is client(p), closed when the test ends.
func rkvClient(t *testing.T, p *proc) *redis.Client {
	cl := client(p)
	t.Cleanup(func() { cl.Close() })
	return cl
}

// replyCode is the code of a Redis error reply ("CLUSTERDOWN", "ERR",
// ...); "" when err is nil, redis.Nil, or not an error reply (a
// connection error, a client-side error).
func replyCode(err error) string {
	var re redis.Error
	if err == nil || errors.Is(err, redis.Nil) || !errors.As(err, &re) {
		return ""
	}
	code, _, _ := strings.Cut(err.Error(), " ")
	return code
}

func isClusterDown(err error) bool { return replyCode(err) == "CLUSTERDOWN" }

// readAll reads keys through cl in one pipeline: the values of the reads
// that succeeded (absent = "<nil>") and the first error that is not
// redis.Nil.
func readAll(ctx context.Context, cl *redis.Client, keys []string) (map[string]string, error) {
	pipe := cl.Pipeline()
	cmds := make([]*redis.StringCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.Get(ctx, k)
	}
	_, _ = pipe.Exec(ctx)
	out := make(map[string]string, len(keys))
	var first error
	for i, k := range keys {
		v, err := cmds[i].Result()
		switch {
		case errors.Is(err, redis.Nil):
			out[k] = "<nil>"
		case err != nil:
			if first == nil {
				first = err
			}
		default:
			out[k] = v
		}
	}
	return out, first
}

func keysOf(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// readBackThrough polls node p until a pipelined read of every key in want
// succeeds, and checks the values. A read that succeeds with a value other
// than the expected one fails the test at once: it is a stale or lost
// value, never acceptable, even right after a restart. Errors (node not up
// yet, CLUSTERDOWN before it knows a leader) are retried until within.
// Returns how long it took until the node served.
func readBackThrough(t *testing.T, p *proc, want map[string]string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	cl := rkvClient(t, p)
	keys := keysOf(want)
	var lastErr error
	for time.Since(start) < within {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		got, err := readAll(ctx, cl, keys)
		cancel()
		bad := 0
		for k, v := range got { // every read that succeeded, even if others failed
			if v != want[k] {
				if bad < 5 {
					t.Errorf("node %d, %v after restart: %s = %q, want %q", p.id,
						time.Since(start).Round(time.Millisecond), k, v, want[k])
				}
				bad++
			}
		}
		if bad > 0 {
			t.Fatalf("node %d served %d of %d keys with a wrong (stale or lost) value", p.id, bad, len(keys))
		}
		if err == nil {
			return time.Since(start)
		}
		if c := replyCode(err); c != "" && c != "CLUSTERDOWN" {
			t.Fatalf("node %d: read failed with %q; only CLUSTERDOWN is expected while it recovers", p.id, err)
		}
		lastErr = err
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("node %d did not serve reads within %v: %v", p.id, within, lastErr)
	return 0
}

// ---- single-writer registers with a linearizability check ----

// registers are keys each written by one goroutine with increasing
// integers. Readers check every read against what is known when it starts
// and ends: a linearizable read returns at most the highest value sent
// before it ended, never a value whose write was refused with CLUSTERDOWN
// (not applied), and at least the highest value acknowledged before it
// started (or returned by a read that ended before it started) — unless
// the value is one whose write had an unknown outcome (UNCERTAIN, broken
// connection): such a write may take effect at any time after it was sent,
// even after later writes of the same writer, as in Jepsen's model.
type registers struct {
	keys    []string
	acked   []atomic.Int64 // highest value acknowledged OK
	started []atomic.Int64 // highest value sent
	seen    []atomic.Int64 // highest value returned by a completed read

	mu      sync.Mutex
	refused []map[int64]bool // CLUSTERDOWN: certainly not applied
	maybe   []map[int64]bool // unknown outcome (UNCERTAIN, connection errors)

	writesOK, readsOK, writeErrs, readErrs atomic.Int64
	violations                             atomic.Int64
	errMu                                  sync.Mutex
	errSeen                                map[string]int
}

func newRegisters(prefix string, n int) *registers {
	r := &registers{acked: make([]atomic.Int64, n), started: make([]atomic.Int64, n),
		seen: make([]atomic.Int64, n), refused: make([]map[int64]bool, n), maybe: make([]map[int64]bool, n),
		errSeen: map[string]int{}}
	for i := 0; i < n; i++ {
		r.keys = append(r.keys, fmt.Sprintf("%s:%d", prefix, i))
		r.refused[i] = map[int64]bool{}
		r.maybe[i] = map[int64]bool{}
	}
	return r
}

func (r *registers) noteErr(err error) {
	msg := err.Error()
	if c := replyCode(err); c != "" {
		msg = c
	} else {
		for _, kind := range []string{"connection refused", "connection reset", "broken pipe", "EOF", "timeout"} {
			if strings.Contains(msg, kind) {
				msg = kind
				break
			}
		}
	}
	r.errMu.Lock()
	r.errSeen[msg]++
	r.errMu.Unlock()
}

func (r *registers) errorCounts() map[string]int {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	out := map[string]int{}
	for k, v := range r.errSeen {
		out[k] = v
	}
	return out
}

func maxStore(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}

// write sends the next value of register i through cl.
func (r *registers) write(t *testing.T, ctx context.Context, cl *redis.Client, i int) {
	v := r.started[i].Load() + 1
	r.started[i].Store(v)
	err := cl.Set(ctx, r.keys[i], v, 0).Err()
	switch {
	case err == nil:
		r.acked[i].Store(v)
		r.writesOK.Add(1)
	case isClusterDown(err):
		r.mu.Lock()
		r.refused[i][v] = true
		r.mu.Unlock()
		r.writeErrs.Add(1)
		r.noteErr(err)
	default:
		if c := replyCode(err); c != "" && c != "UNCERTAIN" {
			if r.violations.Add(1) <= 10 {
				t.Errorf("SET %s %d: unexpected error reply %q", r.keys[i], v, err)
			}
		}
		r.mu.Lock()
		r.maybe[i][v] = true
		r.mu.Unlock()
		r.writeErrs.Add(1)
		r.noteErr(err)
	}
}

// read reads register i through cl and checks the value.
func (r *registers) read(t *testing.T, ctx context.Context, cl *redis.Client, i int, via int) {
	lo := max(r.acked[i].Load(), r.seen[i].Load())
	s, err := cl.Get(ctx, r.keys[i]).Result()
	hi := r.started[i].Load()
	var v int64
	switch {
	case errors.Is(err, redis.Nil):
		v = 0
	case err != nil:
		if c := replyCode(err); c != "" && c != "CLUSTERDOWN" {
			if r.violations.Add(1) <= 10 {
				t.Errorf("GET %s via node %d: unexpected error reply %q", r.keys[i], via, err)
			}
		}
		r.readErrs.Add(1)
		r.noteErr(err)
		return
	default:
		if v, err = strconv.ParseInt(s, 10, 64); err != nil {
			if r.violations.Add(1) <= 10 {
				t.Errorf("GET %s via node %d: %q is not a value any writer wrote", r.keys[i], via, s)
			}
			return
		}
	}
	r.mu.Lock()
	refused, maybe := r.refused[i][v], r.maybe[i][v]
	r.mu.Unlock()
	if (v < lo && !maybe) || v > hi || refused {
		if r.violations.Add(1) <= 10 {
			t.Errorf("GET %s via node %d = %d: not linearizable (acknowledged or read before: %d, sent: %d, refused with CLUSTERDOWN: %v)",
				r.keys[i], via, v, lo, hi, refused)
		}
		return
	}
	maxStore(&r.seen[i], v)
	r.readsOK.Add(1)
}

// run starts one writer per register and `readers` readers, each cycling
// through the nodes; the returned function stops them and waits.
func (r *registers) run(t *testing.T, c *rkvCluster, readers int) func() {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	n := len(c.procs)
	mkClients := func() []*redis.Client {
		cls := make([]*redis.Client, n)
		for j, p := range c.procs {
			cls[j] = client(p)
		}
		return cls
	}
	for i := range r.keys {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			cls := mkClients()
			defer func() {
				for _, cl := range cls {
					cl.Close()
				}
			}()
			for op := 0; ; op++ {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				r.write(t, ctx, cls[(i+op)%n], i)
				cancel()
			}
		}(i)
	}
	for k := 0; k < readers; k++ {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			cls := mkClients()
			defer func() {
				for _, cl := range cls {
					cl.Close()
				}
			}()
			rng := rand.New(rand.NewSource(int64(k)))
			for op := 0; ; op++ {
				select {
				case <-stop:
					return
				default:
				}
				via := (k + op) % n
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				r.read(t, ctx, cls[via], rng.Intn(len(r.keys)), via+1)
				cancel()
			}
		}(k)
	}
	return func() {
		close(stop)
		wg.Wait()
	}
}

// checkFinal reads every register through every node: the values must be
// the same everywhere, the last acknowledged value or one with an unknown
// outcome, never a refused one. Returns the values.
func (r *registers) checkFinal(t *testing.T, c *rkvCluster) []int64 {
	t.Helper()
	var first []int64
	tails := 0
	for _, p := range c.procs {
		cl := rkvClient(t, p)
		got, err := readAll(rkvCtx(t, 10*time.Second), cl, r.keys)
		if err != nil {
			t.Fatalf("final read through node %d: %v", p.id, err)
		}
		vals := make([]int64, len(r.keys))
		for i, k := range r.keys {
			v, _ := strconv.ParseInt(got[k], 10, 64) // "<nil>" -> 0
			vals[i] = v
			a, s := r.acked[i].Load(), r.started[i].Load()
			if (v < a && !r.maybe[i][v]) || v > s || r.refused[i][v] {
				t.Errorf("node %d: final %s = %s; last acknowledged %d, last sent %d, refused %v", p.id, k, got[k], a, s, r.refused[i][v])
			}
			if p == c.procs[0] && v != a {
				tails++
			}
		}
		if first == nil {
			first = vals
		} else if !reflect.DeepEqual(first, vals) {
			t.Errorf("node %d disagrees with node 1: %v vs %v", p.id, vals, first)
		}
	}
	if tails > 0 {
		t.Logf("%d registers end on a value other than the last acknowledged one: a later write with unknown outcome (UNCERTAIN or a broken connection) that did apply", tails)
	}
	return first
}

// ---- 1. API structure ----

// rkvAPIStructure: edge cases of the client API. A closed client fails
// cleanly on the client side; malformed frames get a protocol error and
// the connection closed while the node keeps serving; bad commands get
// Redis's error text and change nothing; absent keys give Redis's answers;
// QUIT closes the connection.
func rkvAPIStructure(t *testing.T) {
	c := newRKV(t, 3)
	ctx := rkvCtx(t, 60*time.Second)
	p := c.procs[0]

	// A client used after Close fails at once on the client side.
	closed := client(p)
	if err := closed.Set(ctx, "api:a", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	closed.Close()
	start := time.Now()
	for _, err := range []error{
		closed.Get(ctx, "api:a").Err(),
		closed.Set(ctx, "api:a", "2", 0).Err(),
		closed.Ping(ctx).Err(),
		func() error {
			_, err := closed.Pipelined(ctx, func(pp redis.Pipeliner) error { pp.Set(ctx, "api:a", "3", 0); return nil })
			return err
		}(),
	} {
		if !errors.Is(err, redis.ErrClosed) {
			t.Errorf("command on a closed client: %v, want %v", err, redis.ErrClosed)
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("commands on a closed client took %v", d)
	}
	// A client of an address nothing listens on ("not initialised") fails
	// with a dial error, not a hang or a reply.
	nowhere := freePort(t, "127.0.0.1")
	dead := redis.NewClient(&redis.Options{Addr: nowhere, MaxRetries: -1, DialTimeout: time.Second})
	start = time.Now()
	if err := dead.Get(ctx, "api:a").Err(); err == nil || replyCode(err) != "" || errors.Is(err, redis.Nil) {
		t.Errorf("GET through a client of a closed port: %v, want a connection error", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("GET through a client of a closed port took %v", d)
	}
	dead.Close()

	cl := rkvClient(t, p)
	want(t, cl.Get(ctx, "api:a"), "1") // the server is unaffected

	// Malformed frames over raw TCP: protocol error, then the node closes
	// the connection; a connection opened before keeps working.
	bystander := rkvClient(t, p)
	want(t, bystander.Ping(ctx), "PONG")
	for _, tc := range []struct{ send, reply string }{
		{"*1\r\n$abc\r\nPING\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"*x\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"*2\r\n$3\r\nGET\r\n$-5\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"*1\r\n$4\r\nPINGxx", "-ERR Protocol error: expected CRLF after bulk argument\r\n"},
		{"\"unbalanced\r\n", "-ERR Protocol error: unbalanced quotes in request\r\n"},
		// A valid command before the bad frame is answered first.
		{"*2\r\n$3\r\nGET\r\n$5\r\napi:a\r\n*1\r\n$zz\r\n", "$1\r\n1\r\n-ERR Protocol error: invalid bulk length\r\n"},
	} {
		got, eof := rawExchange(t, p.client, tc.send)
		if got != tc.reply || !eof {
			t.Errorf("raw %q: got %q (closed: %v), want %q and the connection closed", tc.send, got, eof, tc.reply)
		}
	}
	want(t, bystander.Get(ctx, "api:a"), "1")
	if !alive(p) {
		t.Fatal("node died after malformed frames")
	}

	// QUIT: +OK, then the connection is closed; what follows is not run.
	got, eof := rawExchange(t, p.client, "*1\r\n$4\r\nQUIT\r\n*3\r\n$3\r\nSET\r\n$5\r\napi:a\r\n$4\r\nquit\r\n")
	if got != "+OK\r\n" || !eof {
		t.Errorf("QUIT: got %q (closed: %v), want \"+OK\\r\\n\" and the connection closed", got, eof)
	}
	want(t, cl.Get(ctx, "api:a"), "1")

	// Bad commands: Redis's error text, and nothing changes on any node.
	if err := cl.Set(ctx, "api:str", "hello", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := cl.RPush(ctx, "api:list", "a", "b").Err(); err != nil {
		t.Fatal(err)
	}
	snapshot := func() []string {
		var out []string
		for _, q := range c.procs {
			qc := rkvClient(t, q)
			s, err1 := qc.Get(ctx, "api:str").Result()
			l, err2 := qc.LRange(ctx, "api:list", 0, -1).Result()
			n, err3 := qc.DBSize(ctx).Result()
			e, err4 := qc.Exists(ctx, "api:new").Result()
			out = append(out, fmt.Sprintf("node %d: str=%q/%v list=%q/%v dbsize=%d/%v new=%d/%v", q.id, s, err1, l, err2, n, err3, e, err4))
		}
		return out
	}
	before := snapshot()
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"GET"}, "ERR wrong number of arguments for 'get' command"},
		{[]any{"SET", "api:str"}, "ERR wrong number of arguments for 'set' command"},
		{[]any{"MSET", "api:str"}, "ERR wrong number of arguments for 'mset' command"},
		{[]any{"nosuchcmd", "api:str", "x"}, "ERR unknown command 'nosuchcmd', with args beginning with: 'api:str' 'x' "},
		{[]any{"LPUSH", "api:str", "x"}, "WRONGTYPE Operation against a key holding the wrong kind of value"},
		{[]any{"GET", "api:list"}, "WRONGTYPE Operation against a key holding the wrong kind of value"},
		{[]any{"HSET", "api:list", "f", "v"}, "WRONGTYPE Operation against a key holding the wrong kind of value"},
		{[]any{"INCR", "api:str"}, "ERR value is not an integer or out of range"},
		{[]any{"SET", "api:str", "x", "EX", "0"}, "ERR invalid expire time in 'set' command"},
		{[]any{"SET", "api:new", "x", "EX", "soon"}, "ERR value is not an integer or out of range"},
		{[]any{"EXPIRE", "api:str", "abc"}, "ERR value is not an integer or out of range"},
	} {
		err := cl.Do(ctx, tc.args...).Err()
		if err == nil || err.Error() != tc.want {
			t.Errorf("%v: %v, want error %q", tc.args, err, tc.want)
		}
	}
	if after := snapshot(); !reflect.DeepEqual(before, after) {
		t.Errorf("refused commands changed the data:\nbefore %q\nafter  %q", before, after)
	}

	// Absent keys, through every node.
	for _, q := range c.procs {
		qc := rkvClient(t, q)
		if err := qc.Get(ctx, "api:absent").Err(); !errors.Is(err, redis.Nil) {
			t.Errorf("node %d: GET absent: %v, want nil", q.id, err)
		}
		if err := qc.GetDel(ctx, "api:absent").Err(); !errors.Is(err, redis.Nil) {
			t.Errorf("node %d: GETDEL absent: %v, want nil", q.id, err)
		}
		if err := qc.HGet(ctx, "api:absent", "f").Err(); !errors.Is(err, redis.Nil) {
			t.Errorf("node %d: HGET absent: %v, want nil", q.id, err)
		}
		for _, tc := range []struct {
			args []any
			want int64
		}{
			{[]any{"DEL", "api:absent"}, 0},
			{[]any{"EXISTS", "api:absent"}, 0},
			{[]any{"TTL", "api:absent"}, -2},
			{[]any{"PTTL", "api:absent"}, -2},
			{[]any{"STRLEN", "api:absent"}, 0},
			{[]any{"LLEN", "api:absent"}, 0},
		} {
			if got, err := qc.Do(ctx, tc.args...).Int64(); err != nil || got != tc.want {
				t.Errorf("node %d: %v = %d, %v; want %d", q.id, tc.args, got, err, tc.want)
			}
		}
		want(t, qc.Type(ctx, "api:absent"), "none")
	}
	if after := snapshot(); !reflect.DeepEqual(before, after) {
		t.Errorf("reads of absent keys changed the data:\nbefore %q\nafter  %q", before, after)
	}
}

// rawExchange sends data on a fresh TCP connection and reads until the
// server closes it (eof) or 3s pass.
func rawExchange(t *testing.T, addr, data string) (reply string, eof bool) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	var buf bytes.Buffer
	_, err = io.Copy(&buf, conn)
	var ne net.Error
	timedOut := errors.As(err, &ne) && ne.Timeout()
	return buf.String(), !timedOut
}

// ---- 2. Batched updates ----

// rkvBatchedUpdates: writes followed by reads through every node, unique
// and repeated keys, plain and pipelined, sequential and concurrent; every
// read returns the latest value written.
func rkvBatchedUpdates(t *testing.T) {
	c := newRKV(t, 3)
	ctx := rkvCtx(t, 60*time.Second)
	n := len(c.procs)
	cls := make([]*redis.Client, n)
	for i, p := range c.procs {
		cls[i] = rkvClient(t, p)
	}
	model := map[string]string{}

	// Sequential interleaving: write through one node, read it through the
	// next, and an older key through the third.
	var repeated []string
	for i := 0; i < 240; i++ {
		key := fmt.Sprintf("bu:u:%d", i)
		if i%2 == 1 {
			key = fmt.Sprintf("bu:r:%d", i%7)
			repeated = append(repeated, key)
		}
		val := fmt.Sprintf("v%d-via-%d", i, i%n+1)
		if err := cls[i%n].Set(ctx, key, val, 0).Err(); err != nil {
			t.Fatalf("SET %s via node %d: %v", key, i%n+1, err)
		}
		model[key] = val
		if got, err := cls[(i+1)%n].Get(ctx, key).Result(); err != nil || got != val {
			t.Fatalf("GET %s via node %d right after SET via node %d: %q, %v; want %q", key, (i+1)%n+1, i%n+1, got, err, val)
		}
		if len(repeated) > 0 {
			k := repeated[i%len(repeated)]
			if got, err := cls[(i+2)%n].Get(ctx, k).Result(); err != nil || got != model[k] {
				t.Fatalf("GET %s via node %d: %q, %v; want %q", k, (i+2)%n+1, got, err, model[k])
			}
		}
	}

	// Pipelines mixing writes and reads of repeated keys: each GET sees the
	// writes before it in the pipeline, and the other nodes see the last.
	for round := 0; round < 6; round++ {
		w := round % n
		pipe := cls[w].Pipeline()
		type check struct {
			cmd  *redis.StringCmd
			want string
		}
		var checks []check
		for j := 0; j < 60; j++ {
			key := fmt.Sprintf("bu:p:%d", (j*7+round)%9)
			if j%3 == 2 {
				exp, ok := model[key]
				if !ok {
					exp = "<nil>"
				}
				checks = append(checks, check{pipe.Get(ctx, key), exp})
				continue
			}
			val := fmt.Sprintf("p%d-%d-via-%d", round, j, w+1)
			pipe.Set(ctx, key, val, 0)
			model[key] = val
		}
		_, _ = pipe.Exec(ctx)
		for _, ch := range checks {
			got, err := ch.cmd.Result()
			if errors.Is(err, redis.Nil) {
				got, err = "<nil>", nil
			}
			if err != nil || got != ch.want {
				t.Fatalf("pipelined %v via node %d: %q, %v; want %q", ch.cmd.Args(), w+1, got, err, ch.want)
			}
		}
		for r := 1; r < n; r++ {
			rkvCheckModel(t, ctx, cls[(w+r)%n], (w+r)%n+1, model, "bu:p:")
		}
	}

	// MSET/MGET batches, overlapping, through different nodes, also
	// pipelined.
	for round := 0; round < 4; round++ {
		var kv []any
		var keys []string
		for j := 0; j < 30; j++ {
			k := fmt.Sprintf("bu:m:%d", (j+round*10)%50)
			v := fmt.Sprintf("m%d-%d", round, j)
			kv = append(kv, k, v)
			keys = append(keys, k)
			model[k] = v
		}
		if err := cls[round%n].MSet(ctx, kv...).Err(); err != nil {
			t.Fatalf("MSET via node %d: %v", round%n+1, err)
		}
		for r := 0; r < n; r++ {
			got, err := cls[r].MGet(ctx, keys...).Result()
			if err != nil {
				t.Fatalf("MGET via node %d: %v", r+1, err)
			}
			for j, k := range keys {
				if got[j] != model[k] {
					t.Fatalf("MGET via node %d after MSET via node %d: %s = %v, want %q", r+1, round%n+1, k, got[j], model[k])
				}
			}
		}
	}
	pipe := cls[1].Pipeline()
	for b := 0; b < 10; b++ {
		var kv []any
		for j := 0; j < 10; j++ {
			k := fmt.Sprintf("bu:m:%d", (b*3+j)%50)
			v := fmt.Sprintf("pm%d-%d", b, j)
			kv = append(kv, k, v)
			model[k] = v
		}
		pipe.MSet(ctx, kv...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatalf("pipelined MSETs: %v", err)
	}
	for r := 0; r < n; r++ {
		rkvCheckModel(t, ctx, cls[r], r+1, model, "")
	}

	// Concurrent: one writer per key and readers on every node, checked
	// for linearizability (a read returns at least every write acknowledged
	// before it started).
	regs := newRegisters("bu:c", 8)
	stop := regs.run(t, c, 4)
	time.Sleep(1500 * time.Millisecond)
	stop()
	if regs.writesOK.Load() == 0 || regs.readsOK.Load() == 0 || regs.writeErrs.Load()+regs.readErrs.Load() > 0 {
		t.Errorf("concurrent phase without failures: %d writes, %d reads acknowledged, errors %v",
			regs.writesOK.Load(), regs.readsOK.Load(), regs.errorCounts())
	}
	t.Logf("concurrent: %d writes, %d reads, %d violations", regs.writesOK.Load(), regs.readsOK.Load(), regs.violations.Load())
	if v := regs.violations.Load(); v > 0 {
		t.Errorf("%d linearizability violations", v)
	}
	final := regs.checkFinal(t, c)
	for i, v := range final {
		if v != regs.acked[i].Load() {
			t.Errorf("%s = %d, want the last acknowledged %d", regs.keys[i], v, regs.acked[i].Load())
		}
	}
}

// rkvCheckModel reads the model's keys with the given prefix through cl.
func rkvCheckModel(t *testing.T, ctx context.Context, cl *redis.Client, id int, model map[string]string, prefix string) {
	t.Helper()
	want := map[string]string{}
	for k, v := range model {
		if strings.HasPrefix(k, prefix) {
			want[k] = v
		}
	}
	got, err := readAll(ctx, cl, keysOf(want))
	if err != nil {
		t.Fatalf("read through node %d: %v", id, err)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("node %d: %s = %q, want the latest %q", id, k, got[k], v)
		}
	}
}

// ---- 3. Durability ----

// rkvDurability: keys written through one node (the leader), each
// acknowledged, survive that node's restart — after SIGTERM (clean), or
// after kill -9 right after a burst of concurrent acknowledged writes
// (unclean). Then the whole cluster is killed -9 while writers are running
// and restarted: every acknowledged write is there.
func rkvDurability(t *testing.T, unclean bool) {
	c := newRKV(t, 3, "--request-timeout", "3s")
	ctx := rkvCtx(t, 60*time.Second)
	p := c.waitLeader()
	cl := rkvClient(t, p)
	acked := map[string]string{}
	for i := 0; i < 150; i++ {
		k, v := fmt.Sprintf("dur:%03d", i), fmt.Sprintf("seq-%d", i)
		if err := cl.Set(ctx, k, v, 0).Err(); err != nil {
			t.Fatalf("SET %s via node %d: %v", k, p.id, err)
		}
		acked[k] = v
	}
	sig := syscall.SIGTERM
	if unclean {
		// Concurrent writers, not waiting for each other: new keys and
		// overwrites (each key has one writer, so the latest value is known).
		sig = syscall.SIGKILL
		const writers = 16
		var mu sync.Mutex
		var wg sync.WaitGroup
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				wc := client(p)
				defer wc.Close()
				for j := 0; j < 30; j++ {
					k := fmt.Sprintf("dur:con:%d:%d", w, j)
					if j%3 == 0 {
						k = fmt.Sprintf("dur:%03d", w+writers*(j/3%9)) // one writer per key
					}
					v := fmt.Sprintf("con-%d-%d", w, j)
					if err := wc.Set(ctx, k, v, 0).Err(); err != nil {
						t.Errorf("concurrent SET %s via node %d: %v", k, p.id, err)
						return
					}
					mu.Lock()
					acked[k] = v
					mu.Unlock()
				}
			}(w)
		}
		wg.Wait()
	}
	c.kill(p, sig) // immediately after the last acknowledgement
	t.Logf("%s of node %d (the leader) right after %d acknowledged writes through it", sigName(sig), p.id, len(acked))
	c.restart(p)
	took := readBackThrough(t, p, acked, 20*time.Second)
	t.Logf("node %d served every acknowledged write %v after its restart", p.id, took.Round(time.Millisecond))
	c.waitLeader()
	c.checkAll(acked)

	// The whole cluster, kill -9 while writers are running through every
	// node, then restart.
	stop := load(c.cluster, make(chan struct{}))
	time.Sleep(time.Second)
	c.killAll(syscall.SIGKILL)
	more := stop()
	if len(more) < 10 {
		t.Fatalf("only %d writes acknowledged before kill -9 of the cluster", len(more))
	}
	for k, v := range more {
		acked[k] = v
	}
	t.Logf("kill -9 of every node with writers running; %d acknowledged writes in all", len(acked))
	for _, q := range c.procs {
		c.restart(q)
	}
	took = readBackThrough(t, p, acked, 20*time.Second)
	t.Logf("after the full restart node %d served every acknowledged write after %v", p.id, took.Round(time.Millisecond))
	c.waitLeader()
	c.checkAll(acked)
}

// ---- 4. Availability and recovery ----

// rkvMinorityDown: 5 nodes; kill two of them (the leader and a follower),
// first cleanly then with kill -9: writes and reads through the survivors,
// issued right away without waiting for the election, all succeed and
// read the latest values; the killed nodes come back with everything.
func rkvMinorityDown(t *testing.T) {
	c := newRKV(t, 5, "--request-timeout", "3s")
	ctx := rkvCtx(t, 60*time.Second)
	model := map[string]string{}
	for round, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		lead := c.waitLeader()
		victims := []*proc{lead, c.others(lead)[round]}
		var survivors []*proc
		for _, q := range c.procs {
			if q != victims[0] && q != victims[1] {
				survivors = append(survivors, q)
			}
		}
		cls := make([]*redis.Client, len(survivors))
		for i, q := range survivors {
			cls[i] = rkvClient(t, q)
			if err := cls[i].Ping(ctx).Err(); err != nil { // connect before the kill
				t.Fatal(err)
			}
		}
		for _, v := range victims {
			c.kill(v, sig)
		}
		killed := time.Now()
		t.Logf("round %d: %s of nodes %d (leader) and %d", round+1, sigName(sig), victims[0].id, victims[1].id)
		var slowest time.Duration
		for i := 0; i < 60; i++ {
			w, r := i%len(cls), (i+1)%len(cls)
			k := fmt.Sprintf("av:%d", i%20)
			v := fmt.Sprintf("r%d-%d", round+1, i)
			start := time.Now()
			if err := cls[w].Set(ctx, k, v, 0).Err(); err != nil {
				t.Fatalf("SET %s via surviving node %d, %v after the kill: %v", k, survivors[w].id, time.Since(killed).Round(time.Millisecond), err)
			}
			model[k] = v
			if got, err := cls[r].Get(ctx, k).Result(); err != nil || got != v {
				t.Fatalf("GET %s via surviving node %d: %q, %v; want %q", k, survivors[r].id, got, err, v)
			}
			slowest = max(slowest, time.Since(start))
		}
		t.Logf("round %d: 60 writes and reads through the survivors in %v (slowest pair %v, includes the election)",
			round+1, time.Since(killed).Round(time.Millisecond), slowest.Round(time.Millisecond))
		for _, v := range victims {
			c.restart(v)
		}
		c.waitLeader()
		c.checkAll(model)
	}
}

// rkvMajorityDown: 3 nodes, two killed. The survivor answers writes and
// linearizable reads with CLUSTERDOWN within the request timeout — never a
// stale value, never a hang — and a write it refused with CLUSTERDOWN is
// never applied. Once the others are back it serves again, with the data
// intact. Done twice: survivor a follower (leader and a follower killed),
// then survivor the leader (both followers killed; a write it accepted
// before stepping down is UNCERTAIN, never OK).
func rkvMajorityDown(t *testing.T) {
	const timeout = time.Second
	c := newRKV(t, 3, "--request-timeout", timeout.String())
	ctx := rkvCtx(t, 60*time.Second)
	lead := c.waitLeader()
	model := map[string]string{}
	lc := rkvClient(t, lead)
	for i := 0; i < 20; i++ {
		k, v := fmt.Sprintf("md:%d", i), fmt.Sprintf("before-%d", i)
		if err := lc.Set(ctx, k, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
		model[k] = v
	}
	var refused []string // keys of writes answered CLUSTERDOWN: must never appear

	// check requires CLUSTERDOWN (or, if uncertainOK, UNCERTAIN) within the
	// request timeout plus scheduling slack, and reports whether it was
	// CLUSTERDOWN (the command was certainly not applied).
	type outcome struct {
		err  error
		took time.Duration
	}
	run := func(op func() error) outcome {
		start := time.Now()
		err := op()
		return outcome{err, time.Since(start)}
	}
	check := func(what string, o outcome, uncertainOK bool) bool {
		t.Helper()
		switch {
		case o.err == nil:
			t.Errorf("%s succeeded on a node without a majority", what)
		case isClusterDown(o.err):
		case uncertainOK && replyCode(o.err) == "UNCERTAIN":
		default:
			t.Errorf("%s: %v, want CLUSTERDOWN", what, o.err)
		}
		if o.took > timeout+time.Second {
			t.Errorf("%s took %v, request timeout %v", what, o.took, timeout)
		}
		t.Logf("%s: %v after %v", what, o.err, o.took.Round(time.Millisecond))
		return isClusterDown(o.err)
	}
	// refusedChecks sends writes and reads to the survivor, concurrently
	// (each on its own connection) so that the test waits one request
	// timeout, not one per command. If leaderSurvivor, a first write goes
	// alone: the survivor still leads when it arrives, appends it and
	// cannot commit it, so its outcome is unknown (UNCERTAIN, or
	// CLUSTERDOWN if it stepped down first); then the test waits for the
	// step-down (CheckQuorum, one election timeout).
	refusedChecks := func(surv *proc, sc *redis.Client, who string, leaderSurvivor bool) {
		if leaderSurvivor {
			k := "md:refused-" + who + "-0"
			if check("SET "+k+" via the "+who+" (still leading)", run(func() error { return sc.Set(ctx, k, "x", 0).Err() }), true) {
				refused = append(refused, k)
			}
			deadline := time.Now().Add(5 * time.Second)
			for {
				st, err := c.status(surv)
				if err == nil && st.Leader == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("node %d still reports a leader 5s after losing its majority: %+v, %v", surv.id, st, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		type op struct {
			what  string
			write string // key written, "" for a read
			do    func() error
		}
		k1, k2, k3 := "md:refused-"+who+"-1", "md:refused-"+who+"-2", "md:refused-"+who+"-ctr"
		ops := []op{
			{"SET " + k1, k1, func() error { return sc.Set(ctx, k1, "x", 0).Err() }},
			{"INCR " + k3, k3, func() error { return sc.Incr(ctx, k3).Err() }},
			{"GET md:0", "", func() error { return sc.Get(ctx, "md:0").Err() }},
			{"MGET md:1 md:2", "", func() error { return sc.MGet(ctx, "md:1", "md:2").Err() }},
			{"EXISTS md:3", "", func() error { return sc.Exists(ctx, "md:3").Err() }},
			{"pipeline SET " + k2 + ", GET md:4", k2, func() error {
				_, err := sc.Pipelined(ctx, func(pp redis.Pipeliner) error {
					pp.Set(ctx, k2, "x", 0)
					pp.Get(ctx, "md:4")
					return nil
				})
				return err
			}},
		}
		outs := make([]outcome, len(ops))
		var wg sync.WaitGroup
		for i, o := range ops {
			wg.Add(1)
			go func() {
				defer wg.Done()
				outs[i] = run(o.do)
			}()
		}
		wg.Wait()
		for i, o := range ops {
			if check(o.what+" via the "+who, outs[i], false) && o.write != "" {
				refused = append(refused, o.write)
			}
		}
	}
	afterRestart := func(sc *redis.Client, surv *proc) {
		c.waitLeader()
		want(t, sc.Ping(ctx), "PONG")
		c.checkAll(model)
		if n, err := sc.Exists(ctx, "md:refused-leader-0").Result(); err == nil && n == 1 {
			t.Logf("the write answered UNCERTAIN by the isolated leader was applied after all (allowed)")
		}
		for _, k := range refused {
			if n, err := sc.Exists(ctx, k).Result(); err != nil || n != 0 {
				t.Errorf("%s was refused with CLUSTERDOWN but exists after recovery: %d, %v", k, n, err)
			}
		}
		k := fmt.Sprintf("md:after-%d", surv.id)
		if err := sc.Set(ctx, k, "ok", 0).Err(); err != nil {
			t.Fatalf("write via node %d after the others are back: %v", surv.id, err)
		}
		model[k] = "ok"
	}

	// Survivor: a follower.
	surv := c.others(lead)[0]
	sc := rkvClient(t, surv)
	want(t, sc.Get(ctx, "md:0"), "before-0")
	c.kill(lead, syscall.SIGKILL)
	c.kill(c.others(lead)[1], syscall.SIGTERM)
	t.Logf("killed the leader %d (-9) and node %d (SIGTERM); survivor node %d, a follower", lead.id, c.others(lead)[1].id, surv.id)
	refusedChecks(surv, sc, "follower", false)
	if !alive(surv) {
		t.Fatal("the survivor died")
	}
	c.restart(lead)
	c.restart(c.others(lead)[1])
	afterRestart(sc, surv)

	// Survivor: the leader.
	lead = c.waitLeader()
	lc = rkvClient(t, lead)
	want(t, lc.Get(ctx, "md:0"), "before-0")
	for _, q := range c.others(lead) {
		c.kill(q, syscall.SIGKILL)
	}
	t.Logf("kill -9 of both followers; survivor node %d, the leader", lead.id)
	refusedChecks(lead, lc, "leader", true)
	for _, q := range c.others(lead) {
		c.restart(q)
	}
	afterRestart(lc, lead)
}

// rkvKillDuringRecovery: a node is stopped (SIGTERM), misses many writes
// (more than the snapshot threshold, so it needs a snapshot), is restarted
// and killed -9 while it catches up — three times at different moments —
// and finally restarted: it catches up and serves the latest values.
func rkvKillDuringRecovery(t *testing.T) {
	c := newRKV(t, 3, "--request-timeout", "3s", "--snapshot-threshold", "100")
	ctx := rkvCtx(t, 60*time.Second)
	lead := c.waitLeader()
	f := c.others(lead)[0]
	live := c.others(f)
	model := map[string]string{}
	const nkeys = 1500
	value := strings.Repeat("x", 512)
	// writeRound updates every key through the live nodes, in small
	// pipelines from several writers (hundreds of log entries).
	writeRound := func(round int) {
		t.Helper()
		var wg sync.WaitGroup
		var mu sync.Mutex
		for w := 0; w < 6; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				wc := client(live[w%len(live)])
				defer wc.Close()
				for start := w * 10; start < nkeys; start += 60 {
					pipe := wc.Pipeline()
					local := map[string]string{}
					for k := start; k < start+10 && k < nkeys; k++ {
						key, v := fmt.Sprintf("kr:%04d", k), fmt.Sprintf("r%d-%s", round, value)
						pipe.Set(ctx, key, v, 0)
						local[key] = v
					}
					if _, err := pipe.Exec(ctx); err != nil {
						t.Errorf("write round %d via node %d: %v", round, live[w%len(live)].id, err)
						return
					}
					mu.Lock()
					for k, v := range local {
						model[k] = v
					}
					mu.Unlock()
				}
			}(w)
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
	}
	writeRound(0)
	c.kill(f, syscall.SIGTERM)
	writeRound(1)
	// Cycle 1 kills the node as soon as its admin port answers (it is
	// still recovering its own log); cycles 2 and 3 once it has heard from
	// the leader but not yet applied up to the leader's commit index (it
	// is receiving the snapshot or the log tail).
	for cycle := 0; cycle < 3; cycle++ {
		c.restart(f)
		restarted := time.Now()
		deadline := restarted.Add(10 * time.Second)
		var fs, ls raftProgress
		var err error
		for {
			fs, err = progress(f)
			if err == nil && (cycle == 0 || fs.Leader != 0) {
				ls, err = progress(lead)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d did not come up and hear from the leader within 10s: %+v, %v", f.id, fs, err)
			}
			time.Sleep(2 * time.Millisecond)
		}
		c.kill(f, syscall.SIGKILL)
		phase := "catching up"
		if fs.AppliedIndex >= ls.CommitIndex {
			phase = "already caught up (the catch-up won the race)"
		}
		t.Logf("cycle %d: kill -9 of node %d %v after its start, with applied index %d, leader %d, leader's commit index %d (%v): %s",
			cycle+1, f.id, time.Since(restarted).Round(time.Millisecond), fs.AppliedIndex, fs.Leader, ls.CommitIndex, err, phase)
		writeRound(cycle + 2) // more to catch up on
	}
	c.restart(f)
	took := readBackThrough(t, f, model, 30*time.Second)
	t.Logf("node %d served the latest values %v after its final restart", f.id, took.Round(time.Millisecond))
	fc := rkvClient(t, f)
	if err := fc.Set(ctx, "kr:final", "via-recovered", 0).Err(); err != nil {
		t.Fatalf("write via the recovered node: %v", err)
	}
	model["kr:final"] = "via-recovered"
	c.waitLeader()
	c.checkAll(model)
}

// ---- 5. Consistency ----

// rkvAfterRecovery: a node killed (cleanly, then -9; the second time it
// is the leader) misses updates; reads through it right after its restart
// return the new values or an error, never the old ones, and soon the new
// values.
func rkvAfterRecovery(t *testing.T) {
	c := newRKV(t, 3, "--request-timeout", "3s")
	ctx := rkvCtx(t, 60*time.Second)
	model := map[string]string{}
	for round, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		lead := c.waitLeader()
		victim := c.others(lead)[0]
		if sig == syscall.SIGKILL {
			victim = lead
		}
		live := c.others(victim)
		lc := rkvClient(t, live[0])
		for i := 0; i < 50; i++ {
			k := fmt.Sprintf("ar:%d", i)
			model[k] = fmt.Sprintf("old-%d-%d", round, i)
			if err := lc.Set(ctx, k, model[k], 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.waitSame(victim, model); err != nil {
			t.Fatal(err)
		}
		c.kill(victim, sig)
		for i := 0; i < 50; i++ {
			k := fmt.Sprintf("ar:%d", i)
			model[k] = fmt.Sprintf("new-%d-%d", round, i)
			wc := rkvClient(t, live[i%2])
			if err := wc.Set(ctx, k, model[k], 0).Err(); err != nil {
				t.Fatalf("SET %s via node %d after %s of node %d: %v", k, live[i%2].id, sigName(sig), victim.id, err)
			}
		}
		c.restart(victim)
		took := readBackThrough(t, victim, model, 15*time.Second)
		t.Logf("round %d: %s of node %d%s; after restart it served the new values after %v, no stale read",
			round+1, sigName(sig), victim.id, map[bool]string{true: " (leader)"}[victim == lead], took.Round(time.Millisecond))
	}
	c.waitLeader()
	c.checkAll(model)
}

// waitSame waits until node p serves exactly want (so that it has the old
// values before it is killed).
func (r *rkvCluster) waitSame(p *proc, want map[string]string) error {
	cl := client(p)
	defer cl.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		got, err := readAll(ctx, cl, keysOf(want))
		cancel()
		if err == nil && reflect.DeepEqual(got, want) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %d does not serve the values written: %v", p.id, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rkvKillWhileServing: 5 nodes; clients keep writing and reading through
// every node while each node in turn is killed (SIGTERM and -9
// alternately) and restarted before the next, keeping a majority. Every
// read is checked for linearizability, writes keep being acknowledged
// while a node is down, and at the end every node has the same, latest
// values. Then two nodes are killed at once, miss updates, restart, and
// converge.
func rkvKillWhileServing(t *testing.T) {
	c := newRKV(t, 5, "--request-timeout", "3s")
	regs := newRegisters("kw", 10)
	stop := regs.run(t, c, 5)
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()
	time.Sleep(300 * time.Millisecond)
	for i, p := range c.procs {
		sig := syscall.SIGTERM
		if i%2 == 1 {
			sig = syscall.SIGKILL
		}
		c.kill(p, sig)
		// The others keep acknowledging writes (after an election if p
		// led): wait for 30 more, at most 5s.
		killed, before := time.Now(), regs.writesOK.Load()
		for regs.writesOK.Load() < before+30 && time.Since(killed) < 5*time.Second {
			time.Sleep(10 * time.Millisecond)
		}
		during := regs.writesOK.Load() - before
		if during < 30 {
			t.Errorf("only %d writes acknowledged in the 5s after %s of node %d", during, sigName(sig), p.id)
		}
		t.Logf("%s of node %d: %d writes acknowledged within %v while it was down", sigName(sig), p.id, during,
			time.Since(killed).Round(time.Millisecond))
		c.restart(p)
		c.waitReady(p, 15*time.Second)
	}
	time.Sleep(200 * time.Millisecond)
	stop()
	stopped = true
	t.Logf("%d writes and %d reads acknowledged, errors seen: %v", regs.writesOK.Load(), regs.readsOK.Load(), regs.errorCounts())
	if v := regs.violations.Load(); v > 0 {
		t.Fatalf("%d linearizability violations", v)
	}
	c.waitLeader()
	regs.checkFinal(t, c)

	// Extension: kill two nodes at once; they miss updates; restart: all
	// five converge on the new values.
	ctx := rkvCtx(t, 60*time.Second)
	victims := []*proc{c.procs[1], c.procs[3]}
	c.kill(victims[0], syscall.SIGTERM)
	c.kill(victims[1], syscall.SIGKILL)
	model := map[string]string{}
	live := []*proc{c.procs[0], c.procs[2], c.procs[4]}
	for i, k := range regs.keys {
		v := fmt.Sprintf("converged-%d", i)
		if err := rkvClient(t, live[i%3]).Set(ctx, k, v, 0).Err(); err != nil {
			t.Fatalf("SET %s with two nodes down: %v", k, err)
		}
		model[k] = v
	}
	for _, v := range victims {
		c.restart(v)
	}
	for _, v := range victims {
		readBackThrough(t, v, model, 15*time.Second)
	}
	c.waitLeader()
	c.checkAll(model)
}

// ---- 7. Client permissions ----

// rkvClientPermissions: RecoverKV's client-permission tests check that a
// client cannot kill or partition servers it does not own. kvorum has no
// such client API; the equivalent is that administrative Redis commands
// from a client are refused with an error and change nothing: the node
// keeps running, the cluster keeps its leader and data.
func rkvClientPermissions(t *testing.T) {
	c := newRKV(t, 3)
	ctx := rkvCtx(t, 60*time.Second)
	lead := c.waitLeader()
	if err := rkvClient(t, lead).Set(ctx, "perm:k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// (CONFIG GET and CONFIG RESETSTAT are answered: they read the node's
	// parameters and zero INFO's counters, and change no data; so are
	// SLOWLOG RESET and LATENCY RESET, which empty the node's own logs.
	// CONFIG SET maxmemory is a parameter kvorum honours, as Redis does,
	// and ACL SETUSER is the default user's to use: restricting who may
	// run them is the ACLs' business, checked below with a user without
	// @admin and @dangerous.)
	admin := [][]any{
		{"SHUTDOWN"}, {"SHUTDOWN", "NOSAVE"}, {"SHUTDOWN", "NOW", "FORCE"}, {"SHUTDOWN", "ABORT"},
		{"DEBUG", "SEGFAULT"}, {"DEBUG", "SLEEP", "0"}, {"DEBUG", "RELOAD"}, {"DEBUG", "SET-ACTIVE-EXPIRE", "0"},
		{"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"}, {"CONFIG", "SET", "requirepass", "x"},
		{"CONFIG", "SET", "appendonly", "no"}, {"CONFIG", "SET", "save", "60 1"}, {"CONFIG", "REWRITE"},
		{"CLIENT", "KILL", "TYPE", "normal"}, {"CLIENT", "PAUSE", "10000"},
		{"MONITOR"}, {"SYNC"}, {"PSYNC", "?", "-1"},
		{"REPLICAOF", "127.0.0.1", "1"}, {"SLAVEOF", "NO", "ONE"}, {"FAILOVER"},
		{"CLUSTER", "FAILOVER"}, {"CLUSTER", "RESET", "HARD"}, {"CLUSTER", "FORGET", "1"},
		{"ACL", "DELUSER", "default"},
		{"MODULE", "LOAD", "/nonexistent.so"}, {"SAVE"}, {"BGSAVE"}, {"BGREWRITEAOF"},
		{"SWAPDB", "0", "1"}, {"SELECT", "1"}, {"MOVE", "perm:k", "1"},
		{"MEMORY", "PURGE"}, {"FUNCTION", "RESTORE", "x"},
	}
	for _, p := range c.procs {
		cl := rkvClient(t, p)
		for _, args := range admin {
			start := time.Now()
			err := cl.Do(ctx, args...).Err()
			if replyCode(err) != "ERR" {
				t.Errorf("node %d: %v answered %v, want an ERR reply", p.id, args, err)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("node %d: %v took %v", p.id, args, d)
			}
			if err := cl.Ping(ctx).Err(); err != nil {
				t.Fatalf("node %d: PING after %v: %v", p.id, args, err)
			}
		}
	}
	// A user without @admin and @dangerous is refused them all (NOPERM,
	// or the ERR of a command kvorum does not have).
	if err := rkvClient(t, lead).Do(ctx, "ACL", "SETUSER", "app", "on", ">pw", "~*", "&*", "+@all", "-@admin", "-@dangerous").Err(); err != nil {
		t.Fatal(err)
	}
	restricted := append(admin, []any{"ACL", "SETUSER", "evil", "on"}, []any{"CONFIG", "SET", "maxmemory", "1"}, []any{"FLUSHALL"})
	for _, p := range c.procs {
		cl := redis.NewClient(&redis.Options{Addr: p.client, Username: "app", Password: "pw", Protocol: 2, MaxRetries: -1,
			DialTimeout: time.Second, ReadTimeout: 15 * time.Second, WriteTimeout: 5 * time.Second})
		defer cl.Close()
		for _, args := range restricted {
			err := cl.Do(ctx, args...).Err()
			if code := replyCode(err); code != "NOPERM" && code != "ERR" {
				t.Errorf("node %d: %v as app answered %v, want NOPERM or ERR", p.id, args, err)
			}
		}
		if code := replyCode(cl.Do(ctx, "ACL", "SETUSER", "evil", "on").Err()); code != "NOPERM" {
			t.Errorf("node %d: ACL SETUSER as app: %s, want NOPERM", p.id, code)
		}
	}
	for _, p := range c.procs {
		if !alive(p) {
			t.Fatalf("node %d is not running after the admin commands", p.id)
		}
	}
	if now := c.waitLeader(); now != lead {
		t.Errorf("leader changed from %d to %d", lead.id, now.id)
	}
	c.checkAll(map[string]string{"perm:k": "v"})
	for _, p := range c.procs {
		if n, err := rkvClient(t, p).DBSize(ctx).Result(); err != nil || n != 1 {
			t.Errorf("node %d: DBSIZE %d, %v; want 1", p.id, n, err)
		}
	}
}

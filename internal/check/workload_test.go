package check

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// quiet drops go-redis's log lines (a dial failure is logged on every
// operation against a dead node).
type quiet struct{}

func (quiet) Printf(context.Context, string, ...interface{}) {}

func init() { redis.SetLogger(quiet{}) }

// startRedis starts a private redis-server (no persistence) on a free
// loopback port, killed when the test ends, and returns its address. A
// missing redis-server fails the test: CI installs it.
func startRedis(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redis-server not found: apt-get install redis-server (make test does this, via scripts/ensure-test-deps.sh)")
	}
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	cl := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
	defer cl.Close()
	for deadline := time.Now().Add(10 * time.Second); cl.Ping(context.Background()).Err() != nil; {
		if time.Now().After(deadline) {
			t.Fatal("redis-server did not answer PING within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return addr
}

// freeAddr returns a loopback address nobody listens on (for now).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestWorkloadAgainstRedis(t *testing.T) {
	addr := startRedis(t)
	rec := NewRecorder()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	res := RunWorkload(ctx, WorkloadConfig{
		Addrs: []string{addr}, Clients: 6, Seed: 42, MaxOps: 3000, Durable: true, Prefix: "t1:",
	}, rec)
	st := rec.Stats()
	t.Logf("stats %+v", st)
	if st.Invoked < 600 {
		t.Errorf("only %d operations in 2s", st.Invoked)
	}
	// The only failures: CAS transactions aborted by WATCH.
	if aborted := st.Kinds[OpCAS] - st.OkKinds[OpCAS]; st.Failed != aborted || st.Unknown != 0 {
		t.Errorf("a healthy redis-server gave %d failed (%d aborted CAS) and %d unknown operations", st.Failed, aborted, st.Unknown)
	}
	for k := 0; k < NumOpKinds; k++ {
		if st.OkKinds[k] == 0 {
			t.Errorf("no %v completed", OpKind(k))
		}
	}
	ops := rec.Operations()
	for _, op := range ops {
		if in := op.Input.(Input); !strings.HasPrefix(in.Key, "t1:") {
			t.Fatalf("key %q without the prefix", in.Key)
		}
	}
	start := time.Now()
	cr := Check(ops, time.Minute)
	t.Logf("checked %d operations in %v", cr.Ops, time.Since(start))
	if !cr.Linearizable {
		t.Fatalf("redis-server history not linearizable: timed out %v, bad keys %v", cr.TimedOut, cr.BadKeys)
	}

	appends := 0
	for _, vs := range res.AckedAppends {
		appends += len(vs)
	}
	if len(res.AckedDurable) == 0 || appends == 0 {
		t.Fatalf("nothing acknowledged: %d durable keys, %d appends", len(res.AckedDurable), appends)
	}
	if appends != st.OkKinds[OpAppend] {
		t.Errorf("%d acknowledged appends, %d RPUSH completed", appends, st.OkKinds[OpAppend])
	}
	vctx, vcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer vcancel()
	lost, err := VerifyDurable(vctx, addr, res)
	if err != nil || len(lost) != 0 {
		t.Fatalf("VerifyDurable: %v, lost %v", err, lost)
	}

	// Negative: the server forgets everything.
	cl := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
	defer cl.Close()
	if err := cl.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	lost, err = VerifyDurable(vctx, addr, res)
	if err != nil {
		t.Fatal(err)
	}
	if len(lost) != len(res.AckedDurable)+appends {
		t.Errorf("after FLUSHALL: %d losses reported, want %d (%d durable keys + %d appends)", len(lost), len(res.AckedDurable)+appends, len(res.AckedDurable), appends)
	}
	if !slices.Contains(lost, res.AckedDurable[0]+" missing") {
		t.Errorf("losses %v... do not name %s", lost[:min(3, len(lost))], res.AckedDurable[0])
	}
}

// Two independent servers behind one "cluster": clients see different
// states, which the checker must refute.
func TestWorkloadDivergentServers(t *testing.T) {
	a, b := startRedis(t), startRedis(t)
	rec := NewRecorder()
	RunWorkload(context.Background(), WorkloadConfig{Addrs: []string{a, b}, Clients: 4, Seed: 7, MaxOps: 300}, rec)
	res := Check(rec.Operations(), time.Minute)
	if res.Linearizable || res.TimedOut || len(res.BadKeys) == 0 {
		t.Fatalf("split-brain history accepted: %+v", res)
	}
	t.Logf("bad keys %v", res.BadKeys)
}

func TestWorkloadDeadNode(t *testing.T) {
	rec := NewRecorder()
	start := time.Now()
	RunWorkload(context.Background(), WorkloadConfig{Addrs: []string{freeAddr(t), freeAddr(t)}, Clients: 2, MaxOps: 20, OpTimeout: 500 * time.Millisecond}, rec)
	st := rec.Stats()
	if st.Invoked == 0 || st.Failed != st.Invoked {
		t.Errorf("connection refused: %+v, want every operation failed (never sent)", st)
	}
	if len(rec.Operations()) != 0 {
		t.Error("failed operations in the history")
	}
	// 20 operations, a pause after every 2 refusals: about 10 pauses.
	if d := time.Since(start); d < 8*refusedPause {
		t.Errorf("20 refused operations took %v: the clients do not pause when every node refuses", d)
	}
}

// A node that accepts connections and never answers: every operation
// there is unknown, and the client moves to the next address.
func TestWorkloadSilentNodeFailover(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	good := startRedis(t)
	rec := NewRecorder()
	RunWorkload(context.Background(), WorkloadConfig{
		Addrs: []string{l.Addr().String(), good}, Clients: 2, Seed: 3, MaxOps: 200, OpTimeout: 300 * time.Millisecond,
	}, rec)
	st := rec.Stats()
	t.Logf("stats %+v", st)
	if st.Unknown == 0 || st.Ok < 300 {
		t.Errorf("want a few unknown operations (silent node) and the rest Ok after failover: %+v", st)
	}
	if res := Check(rec.Operations(), time.Minute); !res.Linearizable {
		t.Errorf("history not linearizable: %+v", res)
	}
}

type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}

func TestClassify(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	cases := []struct {
		err     error
		cl      class
		errText string
		moveOn  bool
	}{
		{nil, clOk, "", false},
		{redis.Nil, clOk, "", false},
		{redis.TxFailedErr, clFail, "", false},
		{replyErr("CLUSTERDOWN no leader"), clFail, "", true},
		{replyErr("EXECABORT Transaction discarded"), clFail, "", false},
		{replyErr(ErrWrongType), clOk, ErrWrongType, false},
		{replyErr(ErrNotInteger), clOk, ErrNotInteger, false},
		{replyErr(ErrOverflow), clOk, ErrOverflow, false},
		{replyErr("UNCERTAIN the command may or may not have been applied"), clUnknown, "", false},
		{replyErr("ERR node is shutting down"), clUnknown, "", true},
		{dial, clFail, "", true},
		{fmt.Errorf("wrapped: %w", dial), clFail, "", true},
		{&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, clUnknown, "", true},
		{io.EOF, clUnknown, "", true},
		{context.DeadlineExceeded, clUnknown, "", true},
		{errors.New("i/o timeout"), clUnknown, "", true},
	}
	for _, c := range cases {
		cl, text, moveOn := classify(c.err)
		if cl != c.cl || text != c.errText || moveOn != c.moveOn {
			t.Errorf("classify(%v) = %v %q %v, want %v %q %v", c.err, cl, text, moveOn, c.cl, c.errText, c.moveOn)
		}
	}
}

func TestDrawDeterministicAndMix(t *testing.T) {
	mk := func(seed int64) *wclient {
		cfg := &WorkloadConfig{Keys: 3, Durable: true, Seed: seed, Prefix: "p:"}
		return &wclient{id: 1, cfg: cfg, rng: rand.New(rand.NewPCG(uint64(seed), 1))}
	}
	a, b, c := mk(5), mk(5), mk(6)
	const n = 100000
	count := map[OpKind]int{}
	same, differ := true, false
	for i := 0; i < n; i++ {
		ka, keyA, va, _ := a.draw()
		kb, keyB, vb, _ := b.draw()
		kc, keyC, _, _ := c.draw()
		same = same && ka == kb && keyA == keyB && va == vb
		differ = differ || ka != kc || keyA != keyC
		count[ka]++
		if !strings.HasPrefix(keyA, "p:") {
			t.Fatalf("key %q without prefix", keyA)
		}
		switch ka {
		case OpIncr:
			if !strings.HasPrefix(keyA, "p:c:") {
				t.Fatalf("INCR on %s", keyA)
			}
		case OpAppend, OpRead:
			if !strings.HasPrefix(keyA, "p:l:") {
				t.Fatalf("%v on %s", ka, keyA)
			}
		case OpCAS, OpSet, OpSetNX, OpGetSet:
			if !strings.HasPrefix(keyA, "p:r:") {
				t.Fatalf("%v on %s", ka, keyA)
			}
		}
	}
	if !same || !differ {
		t.Errorf("same seed same sequence: %v; other seed other sequence: %v", same, differ)
	}
	want := map[OpKind]int{OpGet: 25, OpSet: 15, OpSetNX: 5, OpGetSet: 5, OpDel: 5, OpIncr: 10, OpCAS: 10, OpAppend: 15, OpRead: 10, opDurable: 5}
	for k, pct := range want {
		got := float64(count[k]) / n * 105
		if got < float64(pct)-1 || got > float64(pct)+1 {
			t.Errorf("%v: %.1f%%, want about %d%%", k, got, pct)
		}
	}
	if a.nd != count[opDurable] {
		t.Errorf("%d durability keys drawn, %d durable operations", a.nd, count[opDurable])
	}
}

func TestCheckList(t *testing.T) {
	got := checkList("l:1", []string{"v-1-1", "v-2-5", "v-1-3", "v-2-5", "v-2-2"}, []string{"v-1-1", "v-1-3", "v-2-2", "v-2-5", "v-2-9"})
	want := []string{
		"l:1: value v-2-5 appears 2 times",
		"l:1: acknowledged values v-2-2 and v-2-5 out of order",
		"l:1: acknowledged value v-2-9 missing",
	}
	if !slices.Equal(got, want) {
		t.Errorf("checkList:\n got %q\nwant %q", got, want)
	}
	if got := checkList("l:1", []string{"v-1-1", "v-2-1", "x"}, []string{"v-2-1", "v-1-1"}); len(got) != 0 {
		t.Errorf("appends of different clients in any order: %q", got)
	}
}

package process

// Helpers for lock_test.go: LOCK INFO parsing, clients for the lease and
// lock commands, the re-executed holder process (a real client process
// that can be killed or paused), and the grant-history checker.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ---- clients and replies ----

// lockClient is a go-redis client that never retries by itself and reads
// for at most read (a blocked LOCK ACQUIRE needs a read timeout longer
// than its TIMEOUT).
func lockClient(addr string, read time.Duration) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, MaxRetries: -1,
		DialTimeout: time.Second, ReadTimeout: read, WriteTimeout: 5 * time.Second,
		PoolSize: 4})
}

// lockClientT is lockClient, closed when the test ends.
func lockClientT(t *testing.T, addr string, read time.Duration) *redis.Client {
	cl := lockClient(addr, read)
	t.Cleanup(func() { cl.Close() })
	return cl
}

func lctx() context.Context { return context.Background() }

// errClass is how a reply error is handled: "" (no error), "nil" (null
// reply), the reply's code ("CLUSTERDOWN", "UNCERTAIN", "STALE", ...), or
// "net" for an error that is not a reply (connection refused or reset,
// read timeout).
func errClass(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, redis.Nil):
		return "nil"
	}
	if code := replyCode(err); code != "" {
		return code
	}
	return "net"
}

// lockInfo is a parsed LOCK INFO reply.
type lockInfo struct {
	Mode    string
	Token   int64
	Holders [][2]int64 // [lease, token], as the server lists them
	Waiters int64
}

func (li lockInfo) String() string {
	return fmt.Sprintf("mode=%s token=%d holders=%v waiters=%d", li.Mode, li.Token, li.Holders, li.Waiters)
}

func asInt(v interface{}) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case string:
		return strconv.ParseInt(x, 10, 64)
	}
	return 0, fmt.Errorf("not an integer: %#v", v)
}

func asString(v interface{}) (string, error) {
	if s, ok := v.(string); ok {
		return s, nil
	}
	return "", fmt.Errorf("not a string: %#v", v)
}

// parseLockInfo parses the flat field/value array of LOCK INFO (a RESP3
// map is accepted too).
func parseLockInfo(v interface{}) (lockInfo, error) {
	var li lockInfo
	var pairs [][2]interface{}
	switch x := v.(type) {
	case []interface{}:
		if len(x)%2 != 0 {
			return li, fmt.Errorf("LOCK INFO: odd number of elements: %#v", x)
		}
		for i := 0; i < len(x); i += 2 {
			pairs = append(pairs, [2]interface{}{x[i], x[i+1]})
		}
	case map[interface{}]interface{}:
		for k, val := range x {
			pairs = append(pairs, [2]interface{}{k, val})
		}
	default:
		return li, fmt.Errorf("LOCK INFO: not an array: %#v", v)
	}
	seen := map[string]bool{}
	for _, p := range pairs {
		f, err := asString(p[0])
		if err != nil {
			return li, fmt.Errorf("LOCK INFO field: %v", err)
		}
		seen[f] = true
		switch f {
		case "mode":
			if li.Mode, err = asString(p[1]); err != nil {
				return li, fmt.Errorf("LOCK INFO mode: %v", err)
			}
		case "token":
			if li.Token, err = asInt(p[1]); err != nil {
				return li, fmt.Errorf("LOCK INFO token: %v", err)
			}
		case "waiters":
			if li.Waiters, err = asInt(p[1]); err != nil {
				return li, fmt.Errorf("LOCK INFO waiters: %v", err)
			}
		case "holders":
			hs, ok := p[1].([]interface{})
			if !ok {
				return li, fmt.Errorf("LOCK INFO holders: not an array: %#v", p[1])
			}
			for _, h := range hs {
				pair, ok := h.([]interface{})
				if !ok || len(pair) != 2 {
					return li, fmt.Errorf("LOCK INFO holder: not a [lease, token] pair: %#v", h)
				}
				lease, err1 := asInt(pair[0])
				tok, err2 := asInt(pair[1])
				if err1 != nil || err2 != nil {
					return li, fmt.Errorf("LOCK INFO holder %#v: %v %v", h, err1, err2)
				}
				li.Holders = append(li.Holders, [2]int64{lease, tok})
			}
		}
	}
	for _, f := range []string{"mode", "token", "holders", "waiters"} {
		if !seen[f] {
			return li, fmt.Errorf("LOCK INFO: no %q field in %#v", f, v)
		}
	}
	return li, nil
}

// getLockInfo runs LOCK INFO name through cl.
func getLockInfo(cl *redis.Client, name string) (lockInfo, error) {
	v, err := cl.Do(lctx(), "LOCK", "INFO", name).Result()
	if err != nil {
		return lockInfo{}, err
	}
	return parseLockInfo(v)
}

// mustLockInfo is getLockInfo, retrying transient errors (CLUSTERDOWN,
// connection errors) for up to 10 s.
func mustLockInfo(t *testing.T, cl *redis.Client, name string) lockInfo {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		li, err := getLockInfo(cl, name)
		if err == nil {
			return li
		}
		switch errClass(err) {
		case "CLUSTERDOWN", "UNCERTAIN", "TRYAGAIN", "LOADING", "net":
			if time.Now().Before(deadline) && i < 400 {
				time.Sleep(25 * time.Millisecond)
				continue
			}
		}
		t.Fatalf("LOCK INFO %s: %v", name, err)
	}
}

// waitLockInfo polls LOCK INFO name until pred holds (at most within).
func waitLockInfo(t *testing.T, cl *redis.Client, name string, within time.Duration, what string, pred func(lockInfo) bool) lockInfo {
	t.Helper()
	deadline := time.Now().Add(within)
	var li lockInfo
	for i := 0; i < 2000; i++ {
		li = mustLockInfo(t, cl, name)
		if pred(li) || !time.Now().Before(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !pred(li) {
		t.Fatalf("LOCK INFO %s: %s not reached within %v: %v", name, what, within, li)
	}
	return li
}

// grantLease runs LEASE GRANT ttl through cl.
func grantLease(t *testing.T, cl *redis.Client, ttl time.Duration) int64 {
	t.Helper()
	id, err := cl.Do(lctx(), "LEASE", "GRANT", ttl.Milliseconds()).Int64()
	if err != nil {
		t.Fatalf("LEASE GRANT %d: %v", ttl.Milliseconds(), err)
	}
	if id <= 0 {
		t.Fatalf("LEASE GRANT %d: id %d is not positive", ttl.Milliseconds(), id)
	}
	return id
}

// ---- the holder process ----

// The holder is this test binary re-executed with holderEnv set: init
// runs it before TestMain (so it does not build kvorum again), and it
// never runs a test. It grants a lease, keeps it alive, acquires a lock,
// prints its lines on stdout and obeys commands read from stdin:
//
//	LEASE <id>
//	KA <sent-unix-ns> <ttl>      a keep-alive that succeeded (sent at)
//	KAERR <error>                a keep-alive that failed
//	TOKEN <token>
//	REPLY <cmd> <reply>  /  ERROR <cmd> <error>
//
// Commands: "FENCED key value" (LOCK FENCED name token SET key value),
// "RELEASE" (LOCK RELEASE name token), "KEEPALIVE". It exits when stdin
// closes, and after two minutes whatever happens.
const holderEnv = "KVORUM_LOCK_HOLDER_PROCESS"

func init() {
	if os.Getenv(holderEnv) == "1" {
		os.Exit(lockHolderMain())
	}
}

func lockHolderMain() int {
	addr, name := os.Getenv("KVORUM_LOCK_ADDR"), os.Getenv("KVORUM_LOCK_NAME")
	ttl, err1 := strconv.Atoi(os.Getenv("KVORUM_LOCK_TTL_MS"))
	ka, err2 := time.ParseDuration(os.Getenv("KVORUM_LOCK_KEEPALIVE"))
	if addr == "" || name == "" || err1 != nil || err2 != nil {
		fmt.Println("FAIL bad environment")
		return 2
	}
	time.AfterFunc(2*time.Minute, func() { os.Exit(3) })
	var mu sync.Mutex
	say := func(format string, a ...interface{}) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf(format+"\n", a...)
	}
	cl := lockClient(addr, 15*time.Second)
	kaCl := lockClient(addr, 2*time.Second)
	ctx := context.Background()
	lease, err := cl.Do(ctx, "LEASE", "GRANT", ttl).Int64()
	if err != nil {
		say("FAIL LEASE GRANT: %v", err)
		return 1
	}
	say("LEASE %d", lease)
	go func() {
		for i := 0; i < 100000; i++ {
			time.Sleep(ka)
			sent := time.Now()
			r, err := kaCl.Do(ctx, "LEASE", "KEEPALIVE", lease).Int64()
			if err != nil {
				say("KAERR %v", err)
			} else {
				say("KA %d %d", sent.UnixNano(), r)
			}
		}
	}()
	tok, err := cl.Do(ctx, "LOCK", "ACQUIRE", name, lease, "TIMEOUT", 10000).Int64()
	if err != nil {
		say("FAIL LOCK ACQUIRE: %v", err)
		return 1
	}
	say("TOKEN %d", tok)
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		var args []interface{}
		switch {
		case f[0] == "FENCED" && len(f) == 3:
			args = []interface{}{"LOCK", "FENCED", name, tok, "SET", f[1], f[2]}
		case f[0] == "RELEASE":
			args = []interface{}{"LOCK", "RELEASE", name, tok}
		case f[0] == "KEEPALIVE":
			args = []interface{}{"LEASE", "KEEPALIVE", lease}
		default:
			say("ERROR %s unknown helper command", f[0])
			continue
		}
		r, err := cl.Do(ctx, args...).Result()
		if err != nil {
			say("ERROR %s %v", f[0], err)
		} else {
			say("REPLY %s %v", f[0], r)
		}
	}
	return 0
}

// holderProc is a running holder process, seen from the test.
type holderProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // every line except KA/KAERR
	done   chan struct{}
	lastKA atomic.Int64 // unix ns at which the last successful keep-alive was sent
	kaErrs struct {
		sync.Mutex
		l []string
	}
	lease, token int64
	waitOnce     sync.Once
}

// wait waits for the holder process to exit (after a kill) and for its
// output to be read.
func (h *holderProc) wait() {
	h.waitOnce.Do(func() {
		<-h.done
		_ = h.cmd.Wait()
	})
}

// startHolder starts a holder process talking to addr and waits for its
// token.
func startHolder(t *testing.T, addr, name string, ttl, keepalive time.Duration) *holderProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), holderEnv+"=1", "KVORUM_LOCK_ADDR="+addr, "KVORUM_LOCK_NAME="+name,
		fmt.Sprintf("KVORUM_LOCK_TTL_MS=%d", ttl.Milliseconds()), "KVORUM_LOCK_KEEPALIVE="+keepalive.String())
	stderr, err := os.Create(t.TempDir() + "/holder.stderr")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = stderr
	h := &holderProc{t: t, cmd: cmd, lines: make(chan string, 1000), done: make(chan struct{})}
	if h.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.stdin.Close()
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		h.wait()
		stderr.Close()
		if t.Failed() {
			if b, _ := os.ReadFile(stderr.Name()); len(b) > 0 {
				t.Logf("holder stderr:\n%s", b)
			}
		}
	})
	go func() {
		defer close(h.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "KA "):
				var sent, rem int64
				if _, err := fmt.Sscanf(line, "KA %d %d", &sent, &rem); err == nil {
					h.lastKA.Store(sent)
				}
			case strings.HasPrefix(line, "KAERR "):
				h.kaErrs.Lock()
				h.kaErrs.l = append(h.kaErrs.l, line)
				h.kaErrs.Unlock()
			default:
				select {
				case h.lines <- line:
				default:
				}
			}
		}
	}()
	line := h.expect("LEASE ", 10*time.Second)
	if _, err := fmt.Sscanf(line, "LEASE %d", &h.lease); err != nil {
		t.Fatalf("holder: %q: %v", line, err)
	}
	line = h.expect("TOKEN ", 15*time.Second)
	if _, err := fmt.Sscanf(line, "TOKEN %d", &h.token); err != nil {
		t.Fatalf("holder: %q: %v", line, err)
	}
	return h
}

// expect returns the next line starting with prefix (FAIL lines end the
// test).
func (h *holderProc) expect(prefix string, within time.Duration) string {
	h.t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		select {
		case line := <-h.lines:
			if strings.HasPrefix(line, prefix) {
				return line
			}
			if strings.HasPrefix(line, "FAIL") {
				h.t.Fatalf("holder process: %s", line)
			}
			h.t.Logf("holder process (skipped): %s", line)
		case <-timer.C:
			h.t.Fatalf("holder process: no %q line within %v", prefix, within)
			return ""
		}
	}
}

// command sends one command to the holder and returns its REPLY/ERROR line.
func (h *holderProc) command(cmd string, within time.Duration) string {
	h.t.Helper()
	if _, err := fmt.Fprintln(h.stdin, cmd); err != nil {
		h.t.Fatalf("holder stdin: %v", err)
	}
	verb := strings.Fields(cmd)[0]
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		select {
		case line := <-h.lines:
			if strings.HasPrefix(line, "REPLY "+verb+" ") || strings.HasPrefix(line, "ERROR "+verb+" ") {
				return line
			}
			h.t.Logf("holder process (skipped): %s", line)
		case <-timer.C:
			h.t.Fatalf("holder process: no reply to %q within %v", cmd, within)
			return ""
		}
	}
}

func (h *holderProc) keepAliveErrors() []string {
	h.kaErrs.Lock()
	defer h.kaErrs.Unlock()
	return slices.Clone(h.kaErrs.l)
}

// signal sends sig to the holder process (for SIGSTOP: and waits until it
// is stopped).
func (h *holderProc) signal(sig syscall.Signal) {
	h.t.Helper()
	if err := h.cmd.Process.Signal(sig); err != nil {
		h.t.Fatalf("signal %v to holder pid %d: %v", sig, h.cmd.Process.Pid, err)
	}
	if sig == syscall.SIGSTOP {
		if err := waitStopped(h.cmd.Process.Pid, 5*time.Second); err != nil {
			h.t.Fatalf("SIGSTOP holder: %v", err)
		}
	}
}

// ---- node stop/continue without waiting ----

// pause sends SIGSTOP to a node's process (which c.kill cannot do: it
// waits for the exit), waits until it is stopped, and makes sure it gets
// SIGCONT when the test ends.
func pause(t *testing.T, p *proc) {
	t.Helper()
	cmd := p.cmd
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGCONT) })
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP node %d: %v", p.id, err)
	}
	if err := waitStopped(p.cmd.Process.Pid, 5*time.Second); err != nil {
		t.Fatalf("SIGSTOP node %d: %v", p.id, err)
	}
}

// waitStopped waits until every thread of process pid is stopped. kill(2)
// returns before the group stop completes: on a loaded machine the threads
// of a just-SIGSTOPped process can run on for milliseconds (long enough for
// a follower to acknowledge an append).
func waitStopped(pid int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for i := 0; ; i++ {
		running, err := runningThreads(pid)
		if err == nil && running == 0 {
			return nil
		}
		if time.Now().After(deadline) || i > 10000 {
			return fmt.Errorf("pid %d: %d threads still running after %v (%v)", pid, running, within, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// runningThreads counts the threads of pid that are not stopped (state
// T or t in /proc/pid/task/*/stat).
func runningThreads(pid int) (int, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, task := range tasks {
		b, err := os.ReadFile(dir + "/" + task.Name() + "/stat")
		if err != nil {
			continue // the thread exited
		}
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) {
			return 0, fmt.Errorf("%s/stat: %q", task.Name(), b)
		}
		if st := b[i+2]; st != 'T' && st != 't' {
			n++
		}
	}
	return n, nil
}

func resume(t *testing.T, p *proc) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT node %d: %v", p.id, err)
	}
}

// ---- grant history ----

// lockGrant is one successful LOCK ACQUIRE as a client saw it: the
// client believes it holds the lock from acq (the reply arrived) to rel
// (it sent the first LOCK RELEASE). Both are this process's monotonic
// clock, so the interval lies inside the server's holding interval.
type lockGrant struct {
	client   int
	node     int // node that replied with the token
	token    int64
	acq, rel time.Time
	acqTries int    // ACQUIRE attempts of this grant (> 1: retried after an error)
	relNote  string // how the release ended
}

func (g lockGrant) String() string {
	return fmt.Sprintf("client %d token %d via node %d [%s .. %s] tries=%d release=%s",
		g.client, g.token, g.node, g.acq.Format("15:04:05.000000"), g.rel.Format("15:04:05.000000"), g.acqTries, g.relNote)
}

// checkGrantHistory checks a lock's grant history: (a) no two grants'
// intervals overlap, (b) tokens strictly increase in grant order (order
// of acq), (c) no token was granted twice. It returns the problems found.
func checkGrantHistory(grants []lockGrant) []string {
	var bad []string
	gs := slices.Clone(grants)
	sort.Slice(gs, func(i, j int) bool { return gs[i].acq.Before(gs[j].acq) })
	seen := map[int64]lockGrant{}
	for _, g := range gs {
		if g.rel.Before(g.acq) {
			bad = append(bad, fmt.Sprintf("grant released before it was acquired: %v", g))
		}
		if prev, dup := seen[g.token]; dup {
			bad = append(bad, fmt.Sprintf("token %d granted twice: %v and %v", g.token, prev, g))
		}
		seen[g.token] = g
	}
	// With the grants sorted by start, they are pairwise disjoint iff each
	// ends before the next one starts (every interval has acq <= rel).
	maxEnd := -1
	for i := 1; i < len(gs); i++ {
		a, b := gs[i-1], gs[i]
		if maxEnd < 0 || gs[i-1].rel.After(gs[maxEnd].rel) {
			maxEnd = i - 1
		}
		if e := gs[maxEnd]; e.rel.After(b.acq) {
			bad = append(bad, fmt.Sprintf("two holders at once (overlap %v):\n  %v\n  %v", e.rel.Sub(b.acq), e, b))
		}
		if b.token <= a.token {
			bad = append(bad, fmt.Sprintf("tokens not increasing in grant order:\n  %v\n  %v", a, b))
		}
	}
	return bad
}

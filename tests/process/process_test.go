package process

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/testport"
	"github.com/redis/go-redis/v9"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kvorum-bin-*")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "kvorum")
	out, err := exec.Command("go", "build", "-o", binary, "../../cmd/kvorum").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building kvorum failed: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type proc struct {
	id                  int
	host                string
	client, peer, admin string
	dataDir             string
	cmd                 *exec.Cmd
	log                 *os.File
}

type cluster struct {
	t     *testing.T
	procs []*proc
}

// freePort returns a free address on host, below the ephemeral port range
// (testport): an ephemeral one may be taken by any outgoing connection
// before the node binds it (a CI run saw "address already in use").
func freePort(t *testing.T, host string) string {
	t.Helper()
	addr, err := testport.AddrOn(host)
	if err != nil {
		t.Fatalf("no free port on %s (is 127.0.0.0/8 routed to lo?): %v", host, err)
	}
	return addr
}

// newCluster starts n nodes, each with the extra flags too.
func newCluster(t *testing.T, n int, extra ...string) *cluster {
	c := &cluster{t: t}
	base := t.TempDir()
	var initial []string
	for i := 1; i <= n; i++ {
		host := fmt.Sprintf("127.0.0.%d", i)
		p := &proc{id: i, host: host, dataDir: filepath.Join(base, fmt.Sprintf("node-%d", i)),
			client: freePort(t, host), peer: freePort(t, host), admin: freePort(t, host)}
		c.procs = append(c.procs, p)
		initial = append(initial, fmt.Sprintf("%d=%s", i, p.peer))
	}
	for _, p := range c.procs {
		c.start(p, append([]string{"--initial-cluster", strings.Join(initial, ",")}, extra...)...)
	}
	t.Cleanup(func() {
		for _, p := range c.procs {
			c.kill(p, syscall.SIGKILL)
		}
	})
	return c
}

func (c *cluster) start(p *proc, extra ...string) {
	c.t.Helper()
	args := append([]string{"start", "--id", fmt.Sprint(p.id), "--data-dir", p.dataDir,
		"--client-addr", p.client, "--peer-addr", p.peer, "--admin-addr", p.admin,
		"--tick-interval", "50ms", "--log-level", "info"}, extra...)
	logf, err := os.OpenFile(p.dataDir+".log", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	p.cmd, p.log = cmd, logf
}

func (c *cluster) kill(p *proc, sig syscall.Signal) {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	_, _ = p.cmd.Process.Wait()
	p.cmd = nil
	p.log.Close()
}

type status struct {
	NodeID uint64 `json:"node_id"`
	Leader uint64 `json:"leader"`
	Ready  bool   `json:"ready"`
}

func (c *cluster) status(p *proc) (status, error) {
	var st status
	cl := http.Client{Timeout: time.Second}
	resp, err := cl.Get("http://" + p.admin + "/v1/status")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// waitLeader waits until every running process reports the same leader and is ready.
func (c *cluster) waitLeader() *proc {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var lead uint64
		ok := true
		for _, p := range c.procs {
			if p.cmd == nil {
				continue
			}
			st, err := c.status(p)
			if err != nil || !st.Ready || st.Leader == 0 || (lead != 0 && st.Leader != lead) {
				ok = false
				break
			}
			lead = st.Leader
		}
		if ok && lead != 0 && c.procs[lead-1].cmd != nil {
			return c.procs[lead-1]
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.dumpLogs()
	c.t.Fatal("cluster did not agree on a ready leader within 30s")
	return nil
}

func (c *cluster) dumpLogs() {
	for _, p := range c.procs {
		b, _ := os.ReadFile(p.dataDir + ".log")
		if len(b) > 4000 {
			b = b[len(b)-4000:]
		}
		c.t.Logf("--- node %d log tail ---\n%s", p.id, b)
	}
}

func client(p *proc) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: p.client, Protocol: 2, MaxRetries: -1,
		DialTimeout: time.Second, ReadTimeout: 15 * time.Second, WriteTimeout: 5 * time.Second})
}

// load runs writers (one per process) until stop, and returns acknowledged writes.
func load(c *cluster, stop chan struct{}) func() map[string]string {
	var mu sync.Mutex
	acked := map[string]string{}
	var wg sync.WaitGroup
	for w := range c.procs {
		for k := 0; k < 2; k++ { // two clients per node
			wg.Add(1)
			go func(w, k int) {
				defer wg.Done()
				cl := client(c.procs[w])
				defer cl.Close()
				for i := 0; i < 1_000_000; i++ {
					select {
					case <-stop:
						return
					default:
					}
					key := fmt.Sprintf("c%d-%d-%d", w, k, i)
					val := fmt.Sprintf("v%d", i)
					ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
					err := cl.Set(ctx, key, val, 0).Err()
					cancel()
					if err == nil {
						mu.Lock()
						acked[key] = val
						mu.Unlock()
					} else {
						time.Sleep(20 * time.Millisecond)
					}
				}
			}(w, k)
		}
	}
	return func() map[string]string {
		close(stop)
		wg.Wait()
		return acked
	}
}

func (c *cluster) checkAll(acked map[string]string) {
	c.t.Helper()
	for _, p := range c.procs {
		cl := client(p)
		pipe := cl.Pipeline()
		cmds := map[string]*redis.StringCmd{}
		for k := range acked {
			cmds[k] = pipe.Get(context.Background(), k)
		}
		_, _ = pipe.Exec(context.Background())
		lost := 0
		for k, v := range acked {
			if got, err := cmds[k].Result(); err != nil || got != v {
				if lost < 5 {
					c.t.Errorf("node %d: acknowledged %s=%s lost: got %q, %v", p.id, k, v, got, err)
				}
				lost++
			}
		}
		cl.Close()
		if lost > 0 {
			c.t.Fatalf("node %d: %d of %d acknowledged writes lost", p.id, lost, len(acked))
		}
	}
}

func TestKill9LeaderDuringWritesThenRestartEverything(t *testing.T) {
	c := newCluster(t, 3)
	lead := c.waitLeader()
	stop := load(c, make(chan struct{}))
	time.Sleep(1500 * time.Millisecond)
	c.kill(lead, syscall.SIGKILL)
	t.Logf("kill -9 leader node %d", lead.id)
	time.Sleep(2500 * time.Millisecond) // clients keep writing through the failover
	c.start(lead)
	time.Sleep(1500 * time.Millisecond)
	acked := stop()
	if len(acked) < 10 {
		c.dumpLogs()
		t.Fatalf("only %d writes acknowledged", len(acked))
	}
	t.Logf("%d acknowledged writes", len(acked))
	c.waitLeader()
	c.checkAll(acked)

	// Restart the whole cluster (clean stop) and read everything back.
	for _, p := range c.procs {
		c.kill(p, syscall.SIGTERM)
	}
	for _, p := range c.procs {
		c.start(p) // no --initial-cluster: recovered from the data directory
	}
	c.waitLeader()
	c.checkAll(acked)

	// And once more after kill -9 of every node at once.
	for _, p := range c.procs {
		c.kill(p, syscall.SIGKILL)
	}
	for _, p := range c.procs {
		c.start(p)
	}
	c.waitLeader()
	c.checkAll(acked)
}

// TestSIGTERMLeaderHandsOver: a leader stopped with SIGTERM hands its
// leadership to a follower before it exits, so the cluster has a leader
// the moment the process is gone (after kill -9 it would have none for an
// election timeout, 500 ms to 1 s here); writes under way are not lost.
func TestSIGTERMLeaderHandsOver(t *testing.T) {
	c := newCluster(t, 3)
	lead := c.waitLeader()
	stop := load(c, make(chan struct{}))
	time.Sleep(time.Second)
	c.kill(lead, syscall.SIGTERM) // returns once the process has exited
	var seen []string
	leading := 0
	for _, p := range c.procs {
		if p == lead {
			continue
		}
		st, err := c.status(p)
		if err != nil {
			t.Fatalf("node %d: %v", p.id, err)
		}
		seen = append(seen, fmt.Sprintf("node %d names leader %d", p.id, st.Leader))
		if st.Leader == st.NodeID {
			leading++
		}
	}
	if leading != 1 {
		c.dumpLogs()
		t.Fatalf("right after the leader (node %d) exited on SIGTERM: %v; want one of the others leading already", lead.id, seen)
	}
	logText, err := os.ReadFile(lead.dataDir + ".log")
	if err != nil || !strings.Contains(string(logText), "handed leadership over before stopping") {
		t.Errorf("the stopped leader's log does not say it handed leadership over (%v)", err)
	}
	time.Sleep(time.Second)
	acked := stop()
	if len(acked) < 10 {
		c.dumpLogs()
		t.Fatalf("only %d writes acknowledged", len(acked))
	}
	c.start(lead)
	c.waitLeader()
	c.checkAll(acked)
}

package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// nodeState is what the chaos command did to a node last.
type nodeState int

const (
	stateDown nodeState = iota
	stateRunning
	statePaused
)

// proc is one node: its addresses, data directory and current process.
type proc struct {
	id      int
	addrs   nodeAddrs
	dataDir string
	logPath string

	mu       sync.Mutex
	state    nodeState
	cmd      *exec.Cmd
	exited   chan struct{} // closed when cmd exits
	expected bool          // the chaos command caused the exit
	started  int           // number of starts
}

// cluster runs the nodes of one chaos run.
type cluster struct {
	cfg   *Config
	net   network
	procs []*proc // index i-1 is node i
	since func() time.Duration
	http  *http.Client

	// unexpected receives a message when a node exits by itself.
	mu         sync.Mutex
	unexpected []string
}

func newCluster(cfg *Config, nw network, runDir string, since func() time.Duration) *cluster {
	c := &cluster{cfg: cfg, net: nw, since: since, http: &http.Client{Timeout: 700 * time.Millisecond}}
	for i := 1; i <= cfg.Nodes; i++ {
		c.procs = append(c.procs, &proc{
			id: i, addrs: nw.addrs(i),
			dataDir: filepath.Join(runDir, fmt.Sprintf("node-%d", i)),
			logPath: filepath.Join(runDir, fmt.Sprintf("node-%d.log", i)),
		})
	}
	return c
}

func (c *cluster) node(i int) *proc { return c.procs[i-1] }

func (c *cluster) initialCluster() string {
	var parts []string
	for _, p := range c.procs {
		parts = append(parts, fmt.Sprintf("%d=%s", p.id, p.addrs.PeerAdvertised))
	}
	return strings.Join(parts, ",")
}

// start starts node p (with --initial-cluster on its first start only: a
// restart recovers everything from the data directory).
func (c *cluster) start(p *proc) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != stateDown {
		return nil
	}
	args := []string{"start", "--id", strconv.Itoa(p.id), "--data-dir", p.dataDir,
		"--client-addr", p.addrs.Client, "--peer-addr", p.addrs.PeerListen, "--admin-addr", p.addrs.Admin,
		"--tick-interval", c.cfg.TickInterval.String(),
		"--election-ticks", strconv.Itoa(c.cfg.ElectionTicks),
		"--heartbeat-ticks", strconv.Itoa(c.cfg.HeartbeatTicks),
		"--request-timeout", c.cfg.RequestTimeout.String(),
		"--snapshot-threshold", strconv.FormatUint(c.cfg.SnapshotThreshold, 10),
		"--log-level", "info"}
	if p.started == 0 {
		args = append(args, "--initial-cluster", c.initialCluster())
	}
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "=== chaos t=%.3fs: start node %d: %s\n", c.since().Seconds(), p.id, strings.Join(args, " "))
	cmd := c.net.command(p.id, c.cfg.Binary, args)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("starting node %d: %w", p.id, err)
	}
	logf.Close() // the child holds its own descriptor
	exited := make(chan struct{})
	p.cmd, p.exited, p.state, p.expected = cmd, exited, stateRunning, false
	p.started++
	c.net.setPID(p.id, cmd.Process.Pid)
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		expected := p.expected
		if p.cmd == cmd {
			p.state = stateDown
			c.net.setPID(p.id, 0)
		}
		p.mu.Unlock()
		close(exited)
		if !expected {
			c.mu.Lock()
			c.unexpected = append(c.unexpected, fmt.Sprintf("t=%.1fs node %d exited by itself (%v); see %s",
				c.since().Seconds(), p.id, err, p.logPath))
			c.mu.Unlock()
		}
	}()
	return nil
}

// checkExec makes sure node p's process is the kvorum binary itself (ip
// netns exec must exec, or signals would reach ip instead of the node).
func (c *cluster) checkExec(p *proc) error {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("node %d is not running", p.id)
	}
	want, err := filepath.EvalSymlinks(c.cfg.Binary)
	if err != nil {
		return err
	}
	var got string
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		got, _ = os.Readlink(fmt.Sprintf("/proc/%d/exe", cmd.Process.Pid))
		got = strings.TrimSuffix(got, " (deleted)")
		if got == want {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("node %d exited right after start; see %s", p.id, p.logPath)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("process %d started for node %d runs %q, not %q: the launcher did not exec the node", cmd.Process.Pid, p.id, got, want)
}

// signal sends sig to node p's process. expectExit marks the exit that
// follows as caused by us.
func (p *proc) signal(sig syscall.Signal, expectExit bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.state == stateDown {
		return fmt.Errorf("node %d is not running", p.id)
	}
	if expectExit {
		p.expected = true
	}
	return p.cmd.Process.Signal(sig)
}

func (p *proc) waitExit(d time.Duration) bool {
	p.mu.Lock()
	ch := p.exited
	p.mu.Unlock()
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

func (p *proc) getState() nodeState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state
}

// kill9 kills node p with SIGKILL and waits for the exit.
func (c *cluster) kill9(p *proc) error {
	// SIGKILL works on a stopped (paused) process too.
	if err := p.signal(syscall.SIGKILL, true); err != nil {
		return err
	}
	if !p.waitExit(10 * time.Second) {
		return fmt.Errorf("node %d did not die within 10s of SIGKILL", p.id)
	}
	return nil
}

// stop stops node p cleanly (SIGTERM) and waits up to d; after that it is
// killed and errClean is returned.
func (c *cluster) stop(p *proc, d time.Duration) error {
	if p.getState() == statePaused {
		_ = c.resume(p)
	}
	if err := p.signal(syscall.SIGTERM, true); err != nil {
		return err
	}
	if p.waitExit(d) {
		return nil
	}
	_ = p.signal(syscall.SIGKILL, true)
	p.waitExit(10 * time.Second)
	return fmt.Errorf("node %d did not stop within %v of SIGTERM (killed); see %s", p.id, d, p.logPath)
}

func (c *cluster) pause(p *proc) error {
	if err := p.signal(syscall.SIGSTOP, false); err != nil {
		return err
	}
	p.mu.Lock()
	p.state = statePaused
	p.mu.Unlock()
	return nil
}

func (c *cluster) resume(p *proc) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != statePaused || p.cmd == nil {
		return nil
	}
	p.state = stateRunning
	return p.cmd.Process.Signal(syscall.SIGCONT)
}

// takeUnexpected returns and clears the unexpected-exit messages.
func (c *cluster) takeUnexpected() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	u := c.unexpected
	c.unexpected = nil
	return u
}

// killAll kills every node at once (teardown after an error).
func (c *cluster) killAll() {
	for _, p := range c.procs {
		if p.getState() != stateDown {
			_ = p.signal(syscall.SIGKILL, true)
		}
	}
	for _, p := range c.procs {
		p.waitExit(10 * time.Second)
	}
}

// nodeStatus is the part of GET /v1/status the chaos command uses.
type nodeStatus struct {
	NodeID       uint64 `json:"node_id"`
	Role         string `json:"role"`
	Term         uint64 `json:"term"`
	Leader       uint64 `json:"leader"`
	AppliedIndex uint64 `json:"applied_index"`
	Ready        bool   `json:"ready"`
}

func (c *cluster) status(ctx context.Context, p *proc) (nodeStatus, error) {
	var st nodeStatus
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+p.addrs.Admin+"/v1/status", nil)
	if err != nil {
		return st, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("status %s", resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// statuses queries every running node in parallel; a node that does not
// answer has ok false.
func (c *cluster) statuses(ctx context.Context) (sts []nodeStatus, ok []bool) {
	sts, ok = make([]nodeStatus, len(c.procs)), make([]bool, len(c.procs))
	var wg sync.WaitGroup
	for i, p := range c.procs {
		if p.getState() != stateRunning {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := c.status(ctx, p)
			sts[i], ok[i] = st, err == nil
		}()
	}
	wg.Wait()
	return sts, ok
}

// leader returns the node that calls itself leader with the highest term
// among the running, answering nodes, or 0.
func (c *cluster) leader(ctx context.Context) int {
	sts, ok := c.statuses(ctx)
	best, term := 0, uint64(0)
	for i, st := range sts {
		if ok[i] && st.Role == "leader" && st.Term >= term {
			best, term = i+1, st.Term
		}
	}
	return best
}

// waitLeader polls for a leader for up to d.
func (c *cluster) waitLeader(ctx context.Context, d time.Duration) int {
	deadline := time.Now().Add(d)
	for {
		if l := c.leader(ctx); l != 0 {
			return l
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return 0
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitAllReady waits until every node runs, is ready and agrees on one
// leader. It returns a description of what is missing on timeout.
func (c *cluster) waitAllReady(ctx context.Context, d time.Duration) (int, error) {
	deadline := time.Now().Add(d)
	var why string
	for {
		sts, ok := c.statuses(ctx)
		lead := uint64(0)
		why = ""
		for i, st := range sts {
			switch {
			case c.procs[i].getState() != stateRunning:
				why = fmt.Sprintf("node %d is not running", i+1)
			case !ok[i]:
				why = fmt.Sprintf("node %d does not answer /v1/status", i+1)
			case !st.Ready || st.Leader == 0:
				why = fmt.Sprintf("node %d is not ready (role %s, leader %d)", i+1, st.Role, st.Leader)
			case lead != 0 && st.Leader != lead:
				why = fmt.Sprintf("nodes disagree on the leader (%d and %d)", lead, st.Leader)
			default:
				lead = st.Leader
			}
			if why != "" {
				break
			}
		}
		if why == "" && lead != 0 {
			return int(lead), nil
		}
		if time.Now().After(deadline) {
			return 0, errors.New(why)
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// appliedIndexes reads raft_applied_index from INFO on every node.
func (c *cluster) appliedIndexes(ctx context.Context) ([]uint64, error) {
	out := make([]uint64, len(c.procs))
	for i, p := range c.procs {
		cl := redis.NewClient(&redis.Options{Addr: p.addrs.Client, Protocol: 2, MaxRetries: -1,
			DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second})
		s, err := cl.Info(ctx, "replication").Result()
		cl.Close()
		if err != nil {
			return nil, fmt.Errorf("INFO on node %d: %w", p.id, err)
		}
		v, ok := infoField(s, "raft_applied_index")
		if !ok {
			return nil, fmt.Errorf("INFO on node %d has no raft_applied_index", p.id)
		}
		out[i], err = strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("INFO on node %d: raft_applied_index %q", p.id, v)
		}
	}
	return out, nil
}

func infoField(info, name string) (string, bool) {
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && k == name {
			return v, true
		}
	}
	return "", false
}

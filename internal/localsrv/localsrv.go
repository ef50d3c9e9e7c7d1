package localsrv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kvorum/kvorum/internal/testport"
	"github.com/redis/go-redis/v9"
)

// Child is a server process started by Start.
type Child struct {
	Name   string // for messages, e.g. "kvorum node 2"
	Log    string // the file its stdout and stderr go to
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // the exit status, once exited is closed
}

// Start starts bin with args, its output going to the file logPath.
func Start(name, logPath, bin string, args ...string) (*Child, error) {
	return start(name, logPath, os.O_TRUNC, bin, args...)
}

func start(name, logPath string, mode int, bin string, args ...string) (*Child, error) {
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|mode, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child has its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	c := &Child{Name: name, Log: logPath, cmd: cmd, exited: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

// Pid is the process id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Exited is closed once the process has exited.
func (c *Child) Exited() <-chan struct{} { return c.exited }

// ExitedError describes an exit during startup, with the log's end. Call
// it once Exited is closed.
func (c *Child) ExitedError() error {
	return fmt.Errorf("%s exited during startup (%v); log %s:\n%s", c.Name, c.err, c.Log, c.LogTail())
}

// Stop ends the process by its PID: SIGTERM, then SIGKILL after d.
func (c *Child) Stop(d time.Duration) error {
	select {
	case <-c.exited:
		return nil
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
		return nil
	case <-time.After(d):
	}
	_ = c.cmd.Process.Kill()
	<-c.exited
	return fmt.Errorf("%s (pid %d) did not stop within %v of SIGTERM; killed (log %s)", c.Name, c.cmd.Process.Pid, d, c.Log)
}

// Kill ends the process with SIGKILL (as a crash would) and waits for it.
func (c *Child) Kill() {
	_ = c.cmd.Process.Kill()
	<-c.exited
}

// Restart starts the same command again, once c has exited, appending to
// its log.
func (c *Child) Restart() (*Child, error) {
	<-c.exited
	return start(c.Name, c.Log, os.O_APPEND, c.cmd.Path, c.cmd.Args[1:]...)
}

// LogTail is the end of the child's log, for error messages.
func (c *Child) LogTail() string {
	b, err := os.ReadFile(c.Log)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	return strings.Join(lines, "\n")
}

// StopAll stops every child in parallel (SIGTERM, SIGKILL after 15s).
func StopAll(cs []*Child) error {
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.Stop(15 * time.Second)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// FreeAddr is a 127.0.0.1 address below the kernel's ephemeral port
// range, so that no outgoing connection takes it between the check and
// the server's bind.
func FreeAddr() (string, error) { return testport.Addr() }

// KvorumCluster starts a local 3-node kvorum cluster of child processes
// (bin start ...) under dir and waits until every node is ready and agrees
// on a leader. It returns the nodes' client addresses. On error every node
// it started is stopped.
func KvorumCluster(ctx context.Context, bin, dir string) (addrs []string, nodes []*Child, err error) {
	type node struct{ client, peer, admin string }
	ns := make([]node, 3)
	var initial []string
	for i := range ns {
		for _, p := range []*string{&ns[i].client, &ns[i].peer, &ns[i].admin} {
			if *p, err = FreeAddr(); err != nil {
				return nil, nil, err
			}
		}
		initial = append(initial, fmt.Sprintf("%d=%s", i+1, ns[i].peer))
	}
	defer func() {
		if err != nil {
			_ = StopAll(nodes)
			nodes = nil
		}
	}()
	for i, n := range ns {
		id := strconv.Itoa(i + 1)
		c, err := Start("kvorum node "+id, filepath.Join(dir, "kvorum-node-"+id+".log"), bin,
			"start", "--id", id, "--data-dir", filepath.Join(dir, "kvorum-node-"+id),
			"--client-addr", n.client, "--peer-addr", n.peer, "--admin-addr", n.admin,
			"--initial-cluster", strings.Join(initial, ","), "--log-level", "info")
		if err != nil {
			return nil, nodes, err
		}
		nodes = append(nodes, c)
		addrs = append(addrs, n.client)
	}
	// Ready: every node answers /v1/status, is ready and names the same
	// leader (as tests/process and the chaos command check it).
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	var why string
	for {
		why = ""
		var lead uint64
		for i, n := range ns {
			select {
			case <-nodes[i].exited:
				return nil, nodes, fmt.Errorf("kvorum node %d exited during startup (%v); log %s:\n%s", i+1, nodes[i].err, nodes[i].Log, nodes[i].LogTail())
			default:
			}
			var st struct {
				Leader uint64 `json:"leader"`
				Ready  bool   `json:"ready"`
			}
			resp, err := hc.Get("http://" + n.admin + "/v1/status")
			if err == nil {
				err = json.NewDecoder(resp.Body).Decode(&st)
				resp.Body.Close()
			}
			switch {
			case err != nil:
				why = fmt.Sprintf("node %d: %v", i+1, err)
			case !st.Ready || st.Leader == 0:
				why = fmt.Sprintf("node %d not ready (leader %d)", i+1, st.Leader)
			case lead != 0 && st.Leader != lead:
				why = "nodes disagree on the leader"
			}
			if why != "" {
				break
			}
			lead = st.Leader
		}
		if why == "" {
			return addrs, nodes, nil
		}
		if time.Now().After(deadline) {
			return nil, nodes, fmt.Errorf("local kvorum cluster not ready within 30s: %s (logs in %s)", why, dir)
		}
		select {
		case <-ctx.Done():
			return nil, nodes, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// RedisServers starts n standalone redis-server processes without
// persistence (--save "" --appendonly no, unless extra overrides it: later
// arguments win), each on its own port with its own directory
// dir/name-i, and waits until they answer PING. On error every server it
// started is stopped.
func RedisServers(ctx context.Context, bin, dir, name string, n int, extra ...string) (addrs []string, procs []*Child, err error) {
	defer func() {
		if err != nil {
			_ = StopAll(procs)
			procs = nil
		}
	}()
	for i := 1; i <= n; i++ {
		addr, err := FreeAddr()
		if err != nil {
			return nil, procs, err
		}
		_, port, _ := net.SplitHostPort(addr)
		rdir := filepath.Join(dir, fmt.Sprintf("%s-%d", name, i))
		if err := os.MkdirAll(rdir, 0o755); err != nil {
			return nil, procs, err
		}
		args := append([]string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", rdir}, extra...)
		c, err := Start(fmt.Sprintf("redis-server %d", i), rdir+".log", bin, args...)
		if err != nil {
			return nil, procs, err
		}
		procs = append(procs, c)
		addrs = append(addrs, addr)
	}
	for i, a := range addrs {
		if err := WaitPing(ctx, a, procs[i]); err != nil {
			return nil, procs, err
		}
	}
	return addrs, procs, nil
}

// WaitPing waits up to 10s until the Redis-protocol server at addr answers
// PING. With c given, it fails at once if c exits.
func WaitPing(ctx context.Context, addr string, c *Child) error {
	cl := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, MaxRetries: -1, DialTimeout: time.Second})
	defer cl.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := cl.Ping(pctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if c != nil {
			select {
			case <-c.exited:
				return c.ExitedError()
			default:
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s does not answer PING: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WorkDir returns the directory a benchmark keeps its servers' data and
// logs in: dir (created if needed), or, when dir is "", a new temporary
// directory named after pattern. finish is to be called at the end: a
// temporary directory is removed unless keep is true and it holds
// something, in which case its path is written to progress.
func WorkDir(dir, pattern string, progress io.Writer) (path string, finish func(keep bool), err error) {
	if dir != "" {
		return dir, func(bool) {}, os.MkdirAll(dir, 0o755)
	}
	if dir, err = os.MkdirTemp("", pattern); err != nil {
		return "", nil, err
	}
	return dir, func(keep bool) {
		if ents, _ := os.ReadDir(dir); !keep || len(ents) == 0 {
			os.RemoveAll(dir)
			return
		}
		fmt.Fprintf(progress, "server data and logs kept in %s\n", dir)
	}, nil
}

// Package deploy tests the container image, deploy/compose.yaml and
// deploy/kubernetes.
package deploy

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestComposeCluster builds the image with `make image`, starts
// deploy/compose.yaml's 3-node cluster under a project name of its own on
// free host ports, writes through each node and reads back through the
// others, kills the leader's container (SIGKILL), keeps writing through a
// survivor while a new leader is elected, starts the container again and
// reads every key back on every node. It always tears the project down
// (volumes included); TestMain removes the image.
//
// Needs docker and Compose (`docker compose` or docker-compose): with the
// CI environment variable set their absence fails the test; otherwise it
// skips (as it does with -short, unless CI is set).
func TestComposeCluster(t *testing.T) {
	c := startCompose(t, 100*time.Second)
	ctx, root := c.ctx, c.root

	// Each node's write is read back through the two others.
	for i := range c.clients {
		c.write(i, fmt.Sprintf("k-%d", i+1), fmt.Sprintf("v-%d", i+1), 10*time.Second)
	}
	for i := range c.clients {
		c.readAll(i, 10*time.Second)
	}

	l := c.leader(0)
	// A Sentinel-aware client given the published ports as its sentinels
	// is sent to the leader at the address compose.yaml advertises
	// (127.0.0.1:<published port>), and follows the leader after the kill.
	var sentinels []string
	for _, p := range c.ports {
		sentinels = append(sentinels, net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	}
	sc := redis.NewSentinelClient(&redis.Options{Addr: sentinels[(l)%3]})
	t.Cleanup(func() { sc.Close() })
	master, err := sc.GetMasterAddrByName(ctx, "kvorum").Result()
	if want := []string{"127.0.0.1", strconv.Itoa(c.ports[l-1])}; err != nil || strings.Join(master, ":") != strings.Join(want, ":") {
		t.Fatalf("SENTINEL GET-MASTER-ADDR-BY-NAME kvorum: %v, %v; want %v (kvorum-%d)", master, err, want, l)
	}
	fc := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "kvorum", SentinelAddrs: sentinels, DialerRetries: 1, MaxRetries: -1})
	t.Cleanup(func() { fc.Close() })
	c.writeVia(fc, "the Sentinel client", "sentinel-before", "1", 20*time.Second)
	// redis-py's Sentinel client too (tests/process's script): it writes
	// 30 keys, names its master, and goes on after the kill.
	py := startRedisPySentinel(t, ctx, sentinels)
	if py != nil {
		if got, want := py.master(), sentinels[l-1]; got != want {
			t.Errorf("redis-py's master is %s, the leader kvorum-%d is published at %s", got, l, want)
		}
	}

	survivor := l % 3 // index of the node after the leader
	if _, err := run(ctx, root, nil, "docker", "kill", c.containers[l-1]); err != nil {
		t.Fatalf("docker kill kvorum-%d: %v", l, err)
	}
	killed := time.Now()
	if py != nil {
		py.killed()
	}
	for n := 0; n < 10; n++ {
		c.write(survivor, fmt.Sprintf("during-%d", n), strconv.Itoa(n), 20*time.Second)
	}
	t.Logf("leader kvorum-%d killed; 10 writes through kvorum-%d took %v", l, survivor+1, time.Since(killed).Round(time.Millisecond))
	for n := 0; n < 10; n++ {
		c.writeVia(fc, "the Sentinel client", fmt.Sprintf("sentinel-during-%d", n), strconv.Itoa(n), 30*time.Second)
	}
	t.Logf("10 writes through the Sentinel client done %v after the kill", time.Since(killed).Round(time.Millisecond))
	if py != nil {
		for k, v := range py.acked() {
			c.want[k] = v
		}
	}
	if master, err := sc.GetMasterAddrByName(ctx, "kvorum").Result(); err != nil || master[1] == strconv.Itoa(c.ports[l-1]) {
		t.Errorf("after the kill, SENTINEL GET-MASTER-ADDR-BY-NAME: %v, %v (the killed leader's port is %d)", master, err, c.ports[l-1])
	}
	c.readAll((survivor+1)%3, 10*time.Second) // the other survivor
	if out, err := run(ctx, root, nil, "docker", "start", c.containers[l-1]); err != nil {
		t.Fatalf("docker start kvorum-%d: %v\n%s", l, err, out)
	}
	waitHealthy(t, ctx, c.containers...)
	c.write(l-1, "after", "restart", 20*time.Second)
	for i := range c.clients {
		c.readAll(i, 20*time.Second)
	}
	t.Logf("done in %v", time.Since(c.start).Round(time.Millisecond))
}

// composeCluster is deploy/compose.yaml's 3-node cluster running under a
// project name of its own, on free host ports.
type composeCluster struct {
	t          *testing.T
	ctx        context.Context // bounds the whole test
	root       string
	project    string
	start      time.Time
	ports      []int
	containers []string        // kvorum-1..3's container ids
	clients    []*redis.Client // through the published client ports
	// want is every acknowledged write: key -> value.
	want map[string]string
}

// startCompose builds the image (once per test binary), starts
// deploy/compose.yaml's cluster and waits until every node is healthy.
// Its context ends after limit. It always tears the project down
// (volumes included) when the test ends.
func startCompose(t *testing.T, limit time.Duration) *composeCluster {
	t.Helper()
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("-short: no containers")
	}
	compose := requireDocker(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	image := composeImage(t, root)
	project := fmt.Sprintf("kvorumtest%08x", rand.Uint32())

	ctx, cancel := context.WithTimeout(context.Background(), limit)
	t.Cleanup(cancel)
	c := &composeCluster{t: t, ctx: ctx, root: root, project: project, start: start, ports: freePorts(t, 3), want: map[string]string{}}
	env := []string{"KVORUM_IMAGE=" + image}
	for i, p := range c.ports {
		env = append(env, fmt.Sprintf("KVORUM_PORT_%d=%d", i+1, p))
	}
	file := filepath.Join(root, "deploy", "compose.yaml")
	dc := func(ctx context.Context, args ...string) (string, error) {
		full := append(append(compose[1:len(compose):len(compose)], "-f", file, "-p", project), args...)
		return run(ctx, root, env, compose[0], full...)
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := dc(context.Background(), "logs", "--no-color", "--tail", "40")
			t.Logf("compose logs:\n%s", out)
		}
		if out, err := dc(context.Background(), "down", "-v", "-t", "5"); err != nil {
			t.Errorf("compose down: %v\n%s", err, out)
		}
	})
	upAt := time.Now()
	if out, err := dc(ctx, "up", "-d"); err != nil {
		t.Fatalf("compose up: %v\n%s", err, out)
	}
	upTook := time.Since(upAt)
	c.containers = make([]string, 3)
	for i := range c.containers {
		out, err := dc(ctx, "ps", "-q", fmt.Sprintf("kvorum-%d", i+1))
		if err != nil || strings.TrimSpace(out) == "" {
			t.Fatalf("container of kvorum-%d: %v %s", i+1, err, out)
		}
		c.containers[i] = strings.TrimSpace(out)
	}
	waitHealthy(t, ctx, c.containers...)
	t.Logf("cluster healthy after %v (compose up %v)", time.Since(start).Round(time.Millisecond), upTook.Round(time.Millisecond))

	c.clients = make([]*redis.Client, 3)
	for i, p := range c.ports {
		c.clients[i] = c.client(net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	}
	return c
}

// client returns a client of the node at addr that does not retry (a
// test sees every error), closed when the test ends.
func (c *composeCluster) client(addr string) *redis.Client {
	cl := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	c.t.Cleanup(func() { cl.Close() })
	return cl
}

// network is the Compose project's network.
func (c *composeCluster) network() string { return c.project + "_default" }

// write sets key through client i, retrying errors for up to within, and
// records the write as acknowledged.
func (c *composeCluster) write(i int, key, val string, within time.Duration) {
	c.t.Helper()
	c.writeVia(c.clients[i], fmt.Sprintf("kvorum-%d", i+1), key, val, within)
}

func (c *composeCluster) writeVia(cl *redis.Client, name, key, val string, within time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		opCtx, cancel := context.WithTimeout(c.ctx, 3*time.Second)
		err := cl.Set(opCtx, key, val, 0).Err()
		cancel()
		if err == nil {
			c.want[key] = val
			return
		}
		if time.Now().After(deadline) || c.ctx.Err() != nil {
			c.t.Fatalf("SET %s through %s: %v", key, name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// readAll reads every acknowledged write back through client i, waiting
// up to within for errors to pass (a wrong value fails at once).
func (c *composeCluster) readAll(i int, within time.Duration) {
	c.t.Helper()
	c.readAllVia(c.clients[i], fmt.Sprintf("kvorum-%d", i+1), within)
}

func (c *composeCluster) readAllVia(cl *redis.Client, name string, within time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for key, val := range c.want {
		for {
			opCtx, cancel := context.WithTimeout(c.ctx, 3*time.Second)
			got, err := cl.Get(opCtx, key).Result()
			cancel()
			if err == nil && got == val {
				break
			}
			if err == nil || time.Now().After(deadline) || c.ctx.Err() != nil {
				c.t.Fatalf("GET %s through %s: %q, %v (want %q)", key, name, got, err, val)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// leader returns the leader's id (1-3) as node i's INFO reports it.
func (c *composeCluster) leader(i int) int {
	c.t.Helper()
	info, err := c.clients[i].Info(c.ctx, "replication").Result()
	if err != nil {
		c.t.Fatal(err)
	}
	leader := infoField(info, "raft_leader")
	l, err := strconv.Atoi(leader)
	if err != nil || l < 1 || l > 3 {
		c.t.Fatalf("leader %q in INFO replication:\n%s", leader, info)
	}
	return l
}

// The image the Compose tests run, built once per test binary from a
// binary and build context of its own, and removed by TestMain.
var (
	imageOnce sync.Once
	imageName string
	imageErr  error
)

func composeImage(t *testing.T, root string) string {
	t.Helper()
	imageOnce.Do(func() {
		start := time.Now()
		name := fmt.Sprintf("kvorumtest%08x", rand.Uint32())
		tmp, err := os.MkdirTemp("", "kvorum-image")
		if err != nil {
			imageErr = err
			return
		}
		defer os.RemoveAll(tmp)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		imageName = name // removed by TestMain even if the build half failed
		out, err := run(ctx, root, nil, "make", "image", "GO="+goTool(), "IMAGE="+name,
			"BIN="+filepath.Join(tmp, "kvorum"), "IMAGE_DIR="+filepath.Join(tmp, "image"))
		if err != nil {
			imageErr = fmt.Errorf("make image: %v\n%s", err, out)
			return
		}
		t.Logf("image %s built in %v", name, time.Since(start).Round(time.Millisecond))
	})
	if imageErr != nil {
		t.Fatal(imageErr)
	}
	return imageName + ":latest"
}

// removeImage removes the test image's tags (by tag, not by id: the same
// layers may also be kvorum:latest, which must stay).
func removeImage() {
	if imageName == "" {
		return
	}
	out, _ := exec.Command("docker", "image", "ls", "--format", "{{.Repository}}:{{.Tag}}", imageName).Output()
	for _, ref := range strings.Fields(string(out)) {
		exec.Command("docker", "rmi", ref).Run()
	}
}

// requireDocker returns the Compose command (docker compose or
// docker-compose) after checking that the Docker daemon answers. Without
// them the test fails under CI and skips elsewhere.
func requireDocker(t *testing.T) []string {
	t.Helper()
	missing := func(format string, a ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, a...)
		if os.Getenv("CI") != "" {
			t.Fatalf("%s (CI is set: this test must run; install Docker and Compose)", msg)
		}
		t.Skipf("%s; skipping (it fails instead when CI is set)", msg)
	}
	if _, err := exec.LookPath("docker"); err != nil {
		missing("docker not found on PATH")
	}
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		missing("the Docker daemon does not answer (docker info: %v: %s)", err, bytes.TrimSpace(out))
	}
	if exec.Command("docker", "compose", "version").Run() == nil {
		return []string{"docker", "compose"}
	}
	if p, err := exec.LookPath("docker-compose"); err == nil && exec.Command(p, "version").Run() == nil {
		return []string{p}
	}
	missing("neither `docker compose` nor docker-compose works")
	return nil
}

// goTool is the go command running this test, for make's GO.
func goTool() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func run(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func mustRun(t *testing.T, ctx context.Context, dir string, env []string, name string, args ...string) {
	t.Helper()
	if out, err := run(ctx, dir, env, name, args...); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// freePorts returns n TCP ports free on 127.0.0.1 a moment ago.
func freePorts(t *testing.T, n int) []int {
	var ports []int
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return ports
}

// waitHealthy waits until Docker reports every container healthy (its
// health check is `kvorum ctl health`).
func waitHealthy(t *testing.T, ctx context.Context, containers ...string) {
	t.Helper()
	var last string
	for {
		args := append([]string{"inspect", "--format", "{{.State.Health.Status}}"}, containers...)
		out, err := run(ctx, "", nil, "docker", args...)
		last = strings.Join(strings.Fields(out), " ")
		if err == nil && strings.Count(last, "healthy") == len(containers) && !strings.Contains(last, "unhealthy") {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("containers not healthy in time: %s (%v)", last, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

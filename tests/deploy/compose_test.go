// Package deploy tests the container image and deploy/compose.yaml.
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
// (volumes included) and removes its image.
//
// Needs docker and Compose (`docker compose` or docker-compose): with the
// CI environment variable set their absence fails the test; otherwise it
// skips (as it does with -short, unless CI is set).
func TestComposeCluster(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("-short: no containers")
	}
	compose := requireDocker(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	suffix := fmt.Sprintf("%08x", rand.Uint32())
	project := "kvorumtest" + suffix
	image := "kvorumtest" + suffix

	// The image, from a binary and build context of this test's own.
	tmp := t.TempDir()
	buildCtx, cancelBuild := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancelBuild()
	t.Cleanup(func() {
		// By tag, not by id: the same layers may also be kvorum:latest,
		// which must stay.
		out, _ := exec.Command("docker", "image", "ls", "--format", "{{.Repository}}:{{.Tag}}", image).Output()
		for _, ref := range strings.Fields(string(out)) {
			exec.Command("docker", "rmi", ref).Run()
		}
	})
	mustRun(t, buildCtx, root, nil, "make", "image", "GO="+goTool(), "IMAGE="+image,
		"BIN="+filepath.Join(tmp, "kvorum"), "IMAGE_DIR="+filepath.Join(tmp, "image"))
	t.Logf("image built in %v", time.Since(start).Round(time.Millisecond))

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()
	ports := freePorts(t, 3)
	env := []string{"KVORUM_IMAGE=" + image + ":latest"}
	for i, p := range ports {
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
	if out, err := dc(ctx, "up", "-d"); err != nil {
		t.Fatalf("compose up: %v\n%s", err, out)
	}
	containers := make([]string, 3)
	for i := range containers {
		out, err := dc(ctx, "ps", "-q", fmt.Sprintf("kvorum-%d", i+1))
		if err != nil || strings.TrimSpace(out) == "" {
			t.Fatalf("container of kvorum-%d: %v %s", i+1, err, out)
		}
		containers[i] = strings.TrimSpace(out)
	}
	waitHealthy(t, ctx, containers...)
	t.Logf("cluster healthy after %v", time.Since(start).Round(time.Millisecond))

	clients := make([]*redis.Client, 3)
	for i, p := range ports {
		clients[i] = redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), MaxRetries: -1})
		t.Cleanup(func() { clients[i].Close() })
	}
	want := map[string]string{}
	write := func(i int, key, val string, within time.Duration) {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			opCtx, c := context.WithTimeout(ctx, 3*time.Second)
			err := clients[i].Set(opCtx, key, val, 0).Err()
			c()
			if err == nil {
				want[key] = val
				return
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				t.Fatalf("SET %s through kvorum-%d: %v", key, i+1, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	readAll := func(i int, within time.Duration) {
		t.Helper()
		deadline := time.Now().Add(within)
		for key, val := range want {
			for {
				opCtx, c := context.WithTimeout(ctx, 3*time.Second)
				got, err := clients[i].Get(opCtx, key).Result()
				c()
				if err == nil && got == val {
					break
				}
				if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
					t.Fatalf("GET %s through kvorum-%d: %q, %v (want %q)", key, i+1, got, err, val)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}

	// Each node's write is read back through the two others.
	for i := range clients {
		write(i, fmt.Sprintf("k-%d", i+1), fmt.Sprintf("v-%d", i+1), 10*time.Second)
	}
	for i := range clients {
		readAll(i, 10*time.Second)
	}

	info, err := clients[0].Info(ctx, "replication").Result()
	if err != nil {
		t.Fatal(err)
	}
	leader := infoField(info, "raft_leader")
	l, err := strconv.Atoi(leader)
	if err != nil || l < 1 || l > 3 {
		t.Fatalf("leader %q in INFO replication:\n%s", leader, info)
	}
	survivor := l % 3 // index of the node after the leader
	if _, err := run(ctx, root, nil, "docker", "kill", containers[l-1]); err != nil {
		t.Fatalf("docker kill kvorum-%d: %v", l, err)
	}
	killed := time.Now()
	for n := 0; n < 10; n++ {
		write(survivor, fmt.Sprintf("during-%d", n), strconv.Itoa(n), 20*time.Second)
	}
	t.Logf("leader kvorum-%d killed; 10 writes through kvorum-%d took %v", l, survivor+1, time.Since(killed).Round(time.Millisecond))
	readAll((survivor+1)%3, 10*time.Second) // the other survivor
	if out, err := run(ctx, root, nil, "docker", "start", containers[l-1]); err != nil {
		t.Fatalf("docker start kvorum-%d: %v\n%s", l, err, out)
	}
	waitHealthy(t, ctx, containers...)
	write(l-1, "after", "restart", 20*time.Second)
	for i := range clients {
		readAll(i, 20*time.Second)
	}
	t.Logf("done in %v", time.Since(start).Round(time.Millisecond))
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

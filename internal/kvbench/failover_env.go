package kvbench

import (
	"context"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kvorum/kvorum/internal/localsrv"
)

// HostEnv is a 3-node cluster of this binary's processes on 127.0.0.1.
type HostEnv struct {
	addrs []string
	nodes []*localsrv.Child
}

// StartHostEnv starts the cluster under dir.
func StartHostEnv(ctx context.Context, bin, dir string) (*HostEnv, error) {
	addrs, nodes, err := localsrv.KvorumCluster(ctx, bin, dir)
	if err != nil {
		return nil, err
	}
	return &HostEnv{addrs: addrs, nodes: nodes}, nil
}

func (h *HostEnv) Name() string    { return "host processes" }
func (h *HostEnv) Addrs() []string { return h.addrs }

// Kill sends SIGKILL to node i's process.
func (h *HostEnv) Kill(i int) error { h.nodes[i].Kill(); return nil }

// Restart runs node i's command line again.
func (h *HostEnv) Restart(i int) error {
	c, err := h.nodes[i].Restart()
	if err == nil {
		h.nodes[i] = c
	}
	return err
}

// Close stops every node.
func (h *HostEnv) Close() error { return localsrv.StopAll(h.nodes) }

// ComposeEnv is deploy/compose.yaml's cluster under a project of its own,
// its client ports published on free host ports.
type ComposeEnv struct {
	compose    []string // "docker compose" or "docker-compose"
	file       string
	project    string
	env        []string
	published  []string // 127.0.0.1:<published port>
	direct     bool     // clients dial the containers' addresses
	hostnet    bool     // the containers use the host's network
	mu         sync.Mutex
	addrs      []string
	containers []string
}

// Compose client paths (StartComposeEnv's via).
const (
	// ViaPublished: the published ports on 127.0.0.1, through Docker's
	// userland proxy (docker-proxy), as a client on the Docker host
	// itself connects.
	ViaPublished = "published"
	// ViaContainerIP: the containers' addresses on the Compose network,
	// through the kernel's bridge, as a client on another machine is
	// forwarded (by iptables, without the userland proxy).
	ViaContainerIP = "container-ip"
	// ViaHostNetwork: a compose file whose containers use the host's
	// network (deploy/compose.hostnet.yaml): every port on 127.0.0.1.
	ViaHostNetwork = "host-network"
)

// ComposeCommand finds Compose: the docker plugin or docker-compose.
func ComposeCommand() ([]string, error) {
	if exec.Command("docker", "compose", "version").Run() == nil {
		return []string{"docker", "compose"}, nil
	}
	if p, err := exec.LookPath("docker-compose"); err == nil {
		return []string{p}, nil
	}
	return nil, fmt.Errorf("neither 'docker compose' nor docker-compose works here")
}

// StartComposeEnv starts file's cluster with image and waits until every
// container is healthy.
func StartComposeEnv(ctx context.Context, file, image, via string, progress io.Writer) (*ComposeEnv, error) {
	compose, err := ComposeCommand()
	if err != nil {
		return nil, err
	}
	if out, err := exec.CommandContext(ctx, "docker", "image", "inspect", image).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("image %s: %v (build it with 'make image'): %s", image, err, strings.TrimSpace(string(out)))
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, err
	}
	e := &ComposeEnv{compose: compose, file: abs, project: fmt.Sprintf("kvorumbench%d", time.Now().UnixNano()%1e9), env: []string{"KVORUM_IMAGE=" + image}, direct: via == ViaContainerIP, hostnet: via == ViaHostNetwork}
	for i := 1; i <= 3; i++ {
		a, err := localsrv.FreeAddr()
		if err != nil {
			return nil, err
		}
		_, port, _ := net.SplitHostPort(a)
		e.env = append(e.env, fmt.Sprintf("KVORUM_PORT_%d=%s", i, port))
		e.published = append(e.published, net.JoinHostPort("127.0.0.1", port))
		if via != ViaHostNetwork {
			continue
		}
		for _, v := range []string{"PEER", "ADMIN"} {
			a, err := localsrv.FreeAddr()
			if err != nil {
				return nil, err
			}
			_, port, _ := net.SplitHostPort(a)
			e.env = append(e.env, fmt.Sprintf("KVORUM_%s_PORT_%d=%s", v, i, port))
		}
	}
	fmt.Fprintf(progress, "compose: starting %s as project %s\n", file, e.project)
	if out, err := e.run(ctx, "up", "-d"); err != nil {
		e.Close()
		return nil, fmt.Errorf("compose up: %v\n%s", err, out)
	}
	for i := 1; i <= 3; i++ {
		out, err := e.run(ctx, "ps", "-q", "kvorum-"+strconv.Itoa(i))
		if err != nil || strings.TrimSpace(out) == "" {
			e.Close()
			return nil, fmt.Errorf("container of kvorum-%d: %v %s", i, err, out)
		}
		e.containers = append(e.containers, strings.TrimSpace(out))
	}
	if err := e.waitHealthy(ctx, 90*time.Second); err != nil {
		e.Close()
		return nil, err
	}
	if err := e.resolve(ctx); err != nil {
		e.Close()
		return nil, err
	}
	if _, err := kvorumLeader(ctx, e.addrs); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

func (e *ComposeEnv) run(ctx context.Context, args ...string) (string, error) {
	full := append(append(e.compose[1:len(e.compose):len(e.compose)], "-f", e.file, "-p", e.project), args...)
	cmd := exec.CommandContext(ctx, e.compose[0], full...)
	cmd.Env = append(cmd.Environ(), e.env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (e *ComposeEnv) waitHealthy(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		out, err := exec.CommandContext(ctx, "docker", append([]string{"inspect", "--format", "{{.State.Health.Status}}"}, e.containers...)...).Output()
		if err == nil && strings.Count(string(out), "healthy") == len(e.containers) && !strings.Contains(string(out), "unhealthy") {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("containers not healthy within %v: %s", within, strings.Join(strings.Fields(string(out)), " "))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// resolve sets the client addresses: the published ports, or the
// containers' current addresses.
func (e *ComposeEnv) resolve(ctx context.Context) error {
	addrs := e.published
	if e.direct {
		addrs = nil
		for _, c := range e.containers {
			out, err := exec.CommandContext(ctx, "docker", "inspect", "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", c).Output()
			ip := strings.Fields(string(out))
			if err != nil || len(ip) == 0 {
				return fmt.Errorf("address of container %s: %v %q", c, err, out)
			}
			addrs = append(addrs, net.JoinHostPort(ip[0], "6379"))
		}
	}
	e.mu.Lock()
	e.addrs = addrs
	e.mu.Unlock()
	return nil
}

func (e *ComposeEnv) Name() string {
	switch {
	case e.direct:
		return "compose containers"
	case e.hostnet:
		return "compose, host network"
	}
	return "compose, published ports"
}

func (e *ComposeEnv) Addrs() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.addrs
}

// Kill is docker kill (SIGKILL) of node i's container.
func (e *ComposeEnv) Kill(i int) error {
	out, err := exec.Command("docker", "kill", e.containers[i]).CombinedOutput()
	if err != nil {
		return fmt.Errorf("docker kill: %v: %s", err, out)
	}
	return nil
}

// Restart is docker start of node i's container.
func (e *ComposeEnv) Restart(i int) error {
	out, err := exec.Command("docker", "start", e.containers[i]).CombinedOutput()
	if err != nil {
		return fmt.Errorf("docker start: %v: %s", err, out)
	}
	return e.resolve(context.Background())
}

// Close removes the project, its volumes included.
func (e *ComposeEnv) Close() error {
	out, err := e.run(context.Background(), "down", "-v", "-t", "5")
	if err != nil {
		return fmt.Errorf("compose down: %v: %s", err, out)
	}
	return nil
}

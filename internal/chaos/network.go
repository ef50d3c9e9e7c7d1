package chaos

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Network modes.
const (
	ModeAuto  = "auto"
	ModeNetns = "netns"
	ModeProxy = "proxy"
)

// nodeAddrs are one node's addresses. Client and admin addresses are as
// the chaos process reaches them; PeerListen is what the node listens on
// for peers, PeerAdvertised what the other nodes dial (they differ in
// proxy mode, where a proxy sits in front of each node's peer listener).
type nodeAddrs struct {
	Client, PeerListen, PeerAdvertised, Admin string
}

// network places the nodes and cuts traffic between them. Node numbers
// are 1..n. cut(from, to) makes everything from sends to to vanish: the
// connections from dials to to's peer port stop carrying anything, while
// the connections to dials to from keep working. A symmetric cut is
// cut(a, b) plus cut(b, a). Clients always reach every node.
type network interface {
	mode() string
	// describe says how nodes are placed and how cuts are made.
	describe() string
	addrs(i int) nodeAddrs
	// command returns the command that runs bin with args as node i. Its
	// process must be the node itself (signals go to it).
	command(i int, bin string, args []string) *exec.Cmd
	cut(from, to int) error
	heal(from, to int) error
	// setPID tells the network node i's current process id (0: down).
	setPID(i, pid int)
	// close tears everything down. Safe to call twice.
	close() error
}

// nodeSysProcAttr puts a node in its own process group (a Ctrl-C on the
// terminal reaches only the chaos command, which then stops the nodes in
// order) and kills it if the chaos command dies.
func nodeSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// run runs a command and returns its error with its output.
func run(ctx context.Context, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(out.String())
		if msg != "" {
			return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, msg)
		}
		return fmt.Errorf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return nil
}

// output runs a command and returns its standard output.
func output(ctx context.Context, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The test binary doubles as a helper process (KVORUM_CHAOS_HELPER set):
// an echo server, a one-shot dialer, or a dialer driven by stdin. Run in
// another network namespace (ip netns exec) or as another process, it
// lets the tests check cuts from a node's point of view.
func TestMain(m *testing.M) {
	switch os.Getenv("KVORUM_CHAOS_HELPER") {
	case "":
		os.Exit(m.Run())
	case "echo":
		l, err := net.Listen("tcp", os.Getenv("KVORUM_CHAOS_ADDR"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		serveEcho(l)
	case "dial":
		if err := echoOnce(os.Getenv("KVORUM_CHAOS_ADDR"), 700*time.Millisecond); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	case "dialer": // one address per stdin line; answers "ok" or the error
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			if err := echoOnce(sc.Text(), 700*time.Millisecond); err != nil {
				fmt.Println("fail:", err)
			} else {
				fmt.Println("ok")
			}
		}
		os.Exit(0)
	}
	os.Exit(2)
}

func serveEcho(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			_, _ = io.Copy(c, c)
		}()
	}
}

// echoOnce connects to addr, sends a line and expects it back within d.
func echoOnce(addr string, d time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, d)
	if err != nil {
		return err
	}
	defer c.Close()
	return echoOn(c, d)
}

func echoOn(c net.Conn, d time.Duration) error {
	_ = c.SetDeadline(time.Now().Add(d))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "ping\n" {
		return fmt.Errorf("echo: got %q", line)
	}
	return nil
}

func helperCmd(mode, addr string, wrap ...string) *exec.Cmd {
	args := append(append([]string{}, wrap...), os.Args[0], "-test.run=^$")
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "KVORUM_CHAOS_HELPER="+mode, "KVORUM_CHAOS_ADDR="+addr)
	return cmd
}

// dialer is a helper process that dials on request.
type dialer struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func startDialer(t *testing.T) *dialer {
	cmd := helperCmd("dialer", "")
	in, err := cmd.StdinPipe()
	if err != nil {
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
		in.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return &dialer{cmd: cmd, in: in, out: bufio.NewScanner(out)}
}

func (d *dialer) echo(addr string) error {
	fmt.Fprintln(d.in, addr)
	if !d.out.Scan() {
		return errors.New("dialer helper died")
	}
	if s := d.out.Text(); s != "ok" {
		return errors.New(s)
	}
	return nil
}

// Proxy mode: the source of a connection is told from /proc, so cuts are
// per (source, destination) pair, one-way; a cut closes open connections
// and blackholes new ones; a heal lets new connections through.
func TestProxyCutsPerPair(t *testing.T) {
	if err := proxyUsable(); err != nil {
		t.Skip(err)
	}
	p, err := newProxy(3)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	l, err := net.Listen("tcp", p.addrs(3).PeerListen) // node 3's peer listener
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go serveEcho(l)

	other := startDialer(t) // node 2
	p.setPID(1, os.Getpid())
	p.setPID(2, other.cmd.Process.Pid)
	dst := p.addrs(3).PeerAdvertised
	self := func() error { return echoOnce(dst, 700*time.Millisecond) }
	expect := func(what string, selfOK, otherOK bool) {
		t.Helper()
		if err := self(); (err == nil) != selfOK {
			t.Errorf("%s: node 1 -> 3: err %v, want ok=%v", what, err, selfOK)
		}
		if err := other.echo(dst); (err == nil) != otherOK {
			t.Errorf("%s: node 2 -> 3: err %v, want ok=%v", what, err, otherOK)
		}
	}
	expect("no cut", true, true)

	open, err := net.Dial("tcp", dst)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if err := echoOn(open, time.Second); err != nil {
		t.Fatal(err)
	}
	_ = p.cut(1, 3)
	if err := echoOn(open, time.Second); err == nil {
		t.Error("an open connection 1 -> 3 still works after cut(1, 3)")
	}
	expect("cut 1->3", false, true)
	_ = p.heal(1, 3)
	_ = p.cut(2, 3)
	expect("cut 2->3", true, false)
	_ = p.cut(3, 2) // the other direction has nothing to do with 2 -> 3 and 1 -> 3
	_ = p.heal(2, 3)
	expect("healed, cut 3->2 only", true, true)
	_ = p.heal(3, 2)

	// A source the proxy cannot identify is cut only when its destination
	// is cut from every node.
	p.setPID(1, 0)
	_ = p.cut(2, 3)
	if err := self(); err != nil {
		t.Errorf("unknown source, 3 still reachable from node 1: %v", err)
	}
	_ = p.cut(1, 3)
	if err := self(); err == nil {
		t.Error("unknown source reaches node 3 while it is isolated")
	}
	if p.unidentified() == 0 {
		t.Error("no unidentified connection counted")
	}
}

func TestConnOwner(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if got := connOwner(a, map[int]int{os.Getpid(): 7}); got != 7 {
		t.Fatalf("connOwner = %d, want 7", got)
	}
	if got := connOwner(a, map[int]int{os.Getpid() + 1_000_000: 7}); got != 0 {
		t.Fatalf("connOwner with a foreign pid = %d, want 0", got)
	}
}

// Netns mode, with each cut mechanism: a cut from a to b stops what a
// sends to b's peer port and nothing else (b still reaches a, others reach
// b, and the client path from the root namespace stays up).
func TestNetnsCuts(t *testing.T) {
	if err := netnsUsable(); err != nil {
		t.Skipf("netns mode unavailable: %v", err)
	}
	for _, by := range []string{cutIptables, cutRoute} {
		t.Run(by, func(t *testing.T) {
			ctx := context.Background()
			m, err := newNetns(ctx, 3, "", by, t.Logf)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := m.close(); err != nil {
					t.Error(err)
				}
				out, _ := output(ctx, "ip", "netns", "list")
				if strings.Contains(out, "kvc"+m.run+"-") {
					t.Errorf("namespaces left after close:\n%s", out)
				}
			}()
			if m.cutBy != by {
				t.Fatalf("cut mechanism %s, want %s", m.cutBy, by)
			}
			for i := 1; i <= 2; i++ {
				srv := helperCmd("echo", m.addrs(i).PeerListen, "ip", "netns", "exec", m.nsName(i))
				if err := srv.Start(); err != nil {
					t.Fatal(err)
				}
				defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
			}
			peer := func(i int) string { return m.addrs(i).PeerListen }
			for i := 1; i <= 2; i++ { // wait for the servers, from the root namespace
				deadline := time.Now().Add(5 * time.Second)
				for echoOnce(peer(i), 200*time.Millisecond) != nil {
					if time.Now().After(deadline) {
						t.Fatalf("echo server in %s not reachable", m.nsName(i))
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
			dial := func(from int, addr string) error {
				out, err := helperCmd("dial", addr, "ip", "netns", "exec", m.nsName(from)).CombinedOutput()
				if err != nil {
					return fmt.Errorf("%v: %s", err, out)
				}
				return nil
			}
			expect := func(what string, from, to int, ok bool) {
				t.Helper()
				var err error
				if from == 0 {
					err = echoOnce(peer(to), 700*time.Millisecond)
				} else {
					err = dial(from, peer(to))
				}
				if (err == nil) != ok {
					t.Errorf("%s: %d -> %d: err %v, want ok=%v", what, from, to, err, ok)
				}
			}
			expect("no cut", 1, 2, true)
			expect("no cut", 2, 1, true)
			if err := m.cut(1, 2); err != nil {
				t.Fatal(err)
			}
			expect("cut 1->2", 1, 2, false)
			expect("cut 1->2", 2, 1, true)
			expect("cut 1->2", 3, 2, true)
			expect("cut 1->2 (client path)", 0, 2, true)
			if err := m.cut(2, 1); err != nil {
				t.Fatal(err)
			}
			expect("cut both", 2, 1, false)
			expect("cut both (client path)", 0, 1, true)
			if err := m.heal(1, 2); err != nil {
				t.Fatal(err)
			}
			if err := m.heal(2, 1); err != nil {
				t.Fatal(err)
			}
			expect("healed", 1, 2, true)
			expect("healed", 2, 1, true)
		})
	}
}

// Namespaces of dead chaos runs are removed; those of live runs are not.
func TestCleanStaleNetns(t *testing.T) {
	if err := netnsUsable(); err != nil {
		t.Skipf("netns mode unavailable: %v", err)
	}
	ctx := context.Background()
	dead := "kvcfffffff-1" // pid 268435455 exceeds any pid_max
	live := "kvc" + strconv.FormatInt(int64(os.Getpid()), 16) + "-9"
	for _, ns := range []string{dead, live} {
		if err := run(ctx, "ip", "netns", "add", ns); err != nil {
			t.Fatal(err)
		}
	}
	defer func() { _ = run(ctx, "ip", "netns", "del", live); _ = run(ctx, "ip", "netns", "del", dead) }()
	cleanStaleNetns(ctx, "0", t.Logf) // this test binary (chaos.test) counts as a live chaos run
	out, _ := output(ctx, "ip", "netns", "list")
	if strings.Contains(out, dead) {
		t.Errorf("stale %s not removed", dead)
	}
	if !strings.Contains(out, live) {
		t.Errorf("namespace %s of a live run removed", live)
	}
}

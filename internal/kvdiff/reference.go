package kvdiff

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// Conn is a plain RESP connection that returns replies as Values, exactly
// as the server wrote them (go-redis would turn them into Go values and
// lose the difference between, say, a status and a bulk string).
type Conn struct {
	c net.Conn
	r *bufio.Reader
	w *bufio.Writer
}

// Dial connects to addr and, for proto 3, switches the connection to RESP3
// with HELLO 3.
func Dial(addr string, proto int) (*Conn, error) {
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	c := &Conn{c: nc, r: bufio.NewReader(nc), w: bufio.NewWriter(nc)}
	if proto >= 3 {
		v, err := c.Do("HELLO", "3")
		if err == nil && v.Type != '%' {
			err = fmt.Errorf("kvdiff: HELLO 3 answered %s", Render(v))
		}
		if err != nil {
			nc.Close()
			return nil, err
		}
	}
	return c, nil
}

// Do sends one command and reads its reply. Replies carrying errors are
// Values like any other; the error is for the connection failing.
func (c *Conn) Do(args ...string) (Value, error) {
	if err := c.c.SetDeadline(time.Now().Add(time.Minute)); err != nil {
		return Value{}, err
	}
	fmt.Fprintf(c.w, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(c.w, "$%d\r\n%s\r\n", len(a), a)
	}
	if err := c.w.Flush(); err != nil {
		return Value{}, err
	}
	return ReadValue(c.r)
}

// Close closes the connection.
func (c *Conn) Close() error { return c.c.Close() }

// HaveRedis reports whether a redis-server can be started (it is on PATH).
func HaveRedis() bool {
	_, err := exec.LookPath("redis-server")
	return err == nil
}

// Rewriting reports whether datadriven's -rewrite flag is set: the test is
// to record redis-server's replies, so it needs redis-server.
func Rewriting() bool {
	f := flag.Lookup("rewrite")
	return f != nil && f.Value.String() == "true"
}

// startServer starts a private redis-server (no persistence) on a free
// loopback port, killed when the test ends, and returns its address once
// it answers.
// StartServer starts a private redis-server for the test (stopped when it
// ends) and returns its address. Without redis-server the test fails.
func StartServer(t testing.TB) string {
	t.Helper()
	return startServer(t)
}

func startServer(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redis-server not found: apt-get install redis-server (make test does this)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(path, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := Dial(addr, 2); err == nil {
			v, err := c.Do("PING")
			c.Close()
			if err == nil && v.Type == '+' {
				return addr
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("redis-server did not start")
		}
	}
}

// Reference is redis-server answering a differential test file's commands
// in both protocol versions: two private servers get the same commands,
// one over a RESP2 connection and one over RESP3, so that each command runs
// once per server and the two stay in the same state.
type Reference struct {
	resp2, resp3 *Conn
}

// StartReference starts the two servers; they are stopped when the test
// ends. Without redis-server the test fails.
func StartReference(t testing.TB) *Reference {
	t.Helper()
	ref := &Reference{}
	for _, p := range []struct {
		proto int
		conn  **Conn
	}{{2, &ref.resp2}, {3, &ref.resp3}} {
		c, err := Dial(startServer(t), p.proto)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		*p.conn = c
	}
	return ref
}

// Do runs args on both servers and returns the replies.
func (ref *Reference) Do(args ...string) (resp2, resp3 Value, err error) {
	if resp2, err = ref.resp2.Do(args...); err != nil {
		return
	}
	resp3, err = ref.resp3.Do(args...)
	return
}

// Expected runs args on both servers and returns what a test file records
// for them (see Expected).
func (ref *Reference) Expected(args []string) (string, error) {
	resp2, resp3, err := ref.Do(args...)
	if err != nil {
		return "", err
	}
	return Expected(args[0], resp2, resp3), nil
}

// Reset brings both servers back to their starting state: no keys, no
// scripts, no functions.
func (ref *Reference) Reset() error {
	for _, cmd := range [][]string{{"FLUSHALL"}, {"SCRIPT", "FLUSH"}, {"FUNCTION", "FLUSH"}} {
		for _, c := range []*Conn{ref.resp2, ref.resp3} {
			v, err := c.Do(cmd...)
			if err == nil && v.Type != '+' {
				err = fmt.Errorf("kvdiff: %s: %s", String(cmd), Render(v))
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// FlushAll starts a new sequence on both servers: it ends a transaction
// a previous sequence left open (DISCARD), forgets watched keys (UNWATCH)
// and empties the keyspace (FLUSHALL).
func (ref *Reference) FlushAll() error {
	for _, c := range []*Conn{ref.resp2, ref.resp3} {
		for _, cmd := range []string{"DISCARD", "UNWATCH"} {
			if _, err := c.Do(cmd); err != nil { // DISCARD outside MULTI is an error reply: fine
				return err
			}
		}
		v, err := c.Do("FLUSHALL")
		if err == nil && v.Type != '+' {
			err = fmt.Errorf("kvdiff: FLUSHALL: %s", Render(v))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// CheckFile runs a differential test file's commands on the servers with
// datadriven: with -rewrite it records their replies in the file, without
// it fails if a reply is no longer the recorded one. It is for files that
// kvorum is compared with elsewhere (through a cluster, from Load); the
// servers are reset first.
func (ref *Reference) CheckFile(t *testing.T, file string) {
	t.Helper()
	if err := ref.Reset(); err != nil {
		t.Fatal(err)
	}
	datadriven.RunTest(t, file, func(t *testing.T, d *datadriven.TestData) string {
		switch d.Cmd {
		case DirectiveSequence:
			if err := ref.FlushAll(); err != nil {
				t.Fatal(err)
			}
			return ""
		case DirectiveRun:
		default:
			d.Fatalf(t, "unknown directive %q (want %s or %s)", d.Cmd, DirectiveSequence, DirectiveRun)
		}
		args, err := RunArgs(d)
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		want, err := ref.Expected(args)
		if err != nil {
			d.Fatalf(t, "redis-server: %v", err)
		}
		if !d.Rewrite && want != d.Expected {
			d.Fatalf(t, "%s\n%s\nrecorded:\n%sredis-server now:\n%s", d.Input, RedisChanged, d.Expected, want)
		}
		return want
	})
}

// RedisChanged explains a recorded reply that redis-server no longer gives.
const RedisChanged = "redis-server no longer gives the recorded reply: re-run the test with -rewrite and review the diff"

// RunArgs checks a run block (its arguments, a single command) and returns
// the command's arguments.
func RunArgs(d *datadriven.TestData) ([]string, error) {
	if len(d.CmdArgs) > 0 {
		return nil, fmt.Errorf("unknown argument %s", d.CmdArgs[0].String())
	}
	if strings.Contains(d.Input, "\n") {
		return nil, fmt.Errorf("one command per run block")
	}
	args, err := SplitArgs(d.Input)
	if err == nil && len(args) == 0 {
		err = fmt.Errorf("no command")
	}
	if err != nil {
		return nil, fmt.Errorf("bad command %q: %v", d.Input, err)
	}
	return args, nil
}

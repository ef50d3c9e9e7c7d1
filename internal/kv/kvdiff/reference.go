package kvdiff

import (
	"bufio"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"
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

// startServer starts a private redis-server (no persistence) on a free
// loopback port, killed when the test ends, and returns its address once
// it answers.
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

// FlushAll empties both servers' keyspaces (a new sequence).
func (ref *Reference) FlushAll() error {
	for _, c := range []*Conn{ref.resp2, ref.resp3} {
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

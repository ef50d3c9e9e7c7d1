package kvbench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/kvorum/kvorum/internal/resp/codec"
)

// respConn is a minimal Redis-protocol client connection for the
// benchmark's hot path: a batch of GET/SET commands is encoded into one
// reused buffer with codec.AppendCommand, written with one write, and the
// replies are read with a bufio.Reader, values discarded unread. Nothing
// is allocated per operation (except an error reply's message).
type respConn struct {
	addr string
	nc   net.Conn
	r    *bufio.Reader
	w    []byte   // the batch being encoded
	key  []byte   // scratch for keys
	args [][]byte // scratch for AppendCommand
	val  []byte   // the value every SET writes
}

// respTimeout bounds a batch: its write and the reading of its replies.
const respTimeout = 30 * time.Second

var (
	cmdGET = []byte("GET")
	cmdSET = []byte("SET")
)

func dialRESP(ctx context.Context, addr string, value []byte) (*respConn, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	return &respConn{addr: addr, nc: nc, r: bufio.NewReaderSize(nc, 64<<10), val: value, args: make([][]byte, 0, 3)}, nil
}

func (c *respConn) close() { c.nc.Close() }

// replyError is an error reply from the server.
type replyError string

func (e replyError) Error() string { return string(e) }

// batch runs ops as one pipeline and fills res with each one's latency
// from the batch's write and its outcome. A non-nil error means the
// connection is broken (the results of ops not yet answered are marked
// failed); error replies are per operation.
func (c *respConn) batch(ops []op, res []opResult) error {
	c.w = c.w[:0]
	for _, o := range ops {
		c.key = AppendKey(c.key[:0], o.key)
		if o.kind == KindRead {
			c.args = append(c.args[:0], cmdGET, c.key)
		} else {
			c.args = append(c.args[:0], cmdSET, c.key, c.val)
		}
		c.w = codec.AppendCommand(c.w, c.args...)
	}
	t0 := time.Now()
	// A server that stops answering shows as errors, not a hung benchmark.
	_ = c.nc.SetDeadline(t0.Add(respTimeout))
	if _, err := c.nc.Write(c.w); err != nil {
		for i := range res[:len(ops)] {
			res[i] = opResult{lat: time.Since(t0), err: err}
		}
		return err
	}
	for i := range ops {
		nilReply, err := c.readReply()
		res[i] = opResult{lat: time.Since(t0), miss: nilReply}
		if err != nil {
			res[i].err = err
			var re replyError
			if !errors.As(err, &re) {
				for j := i + 1; j < len(ops); j++ {
					res[j] = opResult{lat: res[i].lat, err: err}
				}
				return err
			}
		}
	}
	return nil
}

// readReply reads one RESP2/RESP3 reply and discards its content. isNil
// reports a null reply; an error reply is returned as a replyError; any
// other error is the connection's.
func (c *respConn) readReply() (isNil bool, err error) {
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return false, fmt.Errorf("%s: reply line longer than 64 KiB", c.addr)
		}
		return false, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return false, fmt.Errorf("%s: malformed reply line %q", c.addr, line)
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+', ':', ',', '#', '(':
		return false, nil
	case '_':
		return true, nil
	case '-', '!':
		if line[0] == '!' { // RESP3 blob error
			n, ok := parseLen(body)
			if !ok || n < 0 {
				return false, fmt.Errorf("%s: malformed reply line %q", c.addr, line)
			}
			b := make([]byte, n+2)
			if _, err := io.ReadFull(c.r, b); err != nil {
				return false, err
			}
			return false, replyError(b[:n])
		}
		return false, replyError(body)
	case '$', '=':
		n, ok := parseLen(body)
		if !ok || n < -1 {
			return false, fmt.Errorf("%s: malformed bulk header %q", c.addr, line)
		}
		if n < 0 {
			return true, nil
		}
		_, err := c.r.Discard(int(n) + 2)
		return false, err
	case '*', '%', '~', '>':
		n, ok := parseLen(body)
		if !ok || n < -1 {
			return false, fmt.Errorf("%s: malformed aggregate header %q", c.addr, line)
		}
		if n < 0 {
			return true, nil
		}
		if line[0] == '%' {
			n *= 2
		}
		for range n {
			if _, err := c.readReply(); err != nil {
				var re replyError
				if !errors.As(err, &re) {
					return false, err
				}
			}
		}
		return false, nil
	}
	return false, fmt.Errorf("%s: unexpected reply %q", c.addr, line)
}

// do sends one command and returns its reply if it is a bulk or simple
// string or an integer (for INFO and PING outside the hot path).
func (c *respConn) do(args ...string) (string, error) {
	bs := make([][]byte, len(args))
	for i, a := range args {
		bs[i] = []byte(a)
	}
	if _, err := c.nc.Write(codec.AppendCommand(nil, bs...)); err != nil {
		return "", err
	}
	return c.readString()
}

// parseLen parses a reply header's count (a decimal, maybe negative).
// codec.ParseInt would do, but it copies its argument (an allocation per
// reply).
func parseLen(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// readString reads one bulk or simple string or integer reply ("" for a
// null bulk string); an error reply is returned as a replyError.
func (c *respConn) readString() (string, error) {
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return "", err
	}
	if len(line) < 3 {
		return "", fmt.Errorf("%s: malformed reply %q", c.addr, line)
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+', ':':
		return string(body), nil
	case '-':
		return "", replyError(body)
	case '$':
		n, ok := parseLen(body)
		if !ok {
			return "", fmt.Errorf("%s: reply %q", c.addr, line)
		}
		if n < 0 {
			return "", nil
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(c.r, b); err != nil {
			return "", err
		}
		return string(b[:n]), nil
	}
	return "", fmt.Errorf("%s: unexpected reply %q", c.addr, line)
}

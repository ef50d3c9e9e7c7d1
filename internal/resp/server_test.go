package resp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/kvorum/kvorum/internal/kv"
	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/resp/codec"
)

// fakeBackend is an in-memory GET/SET/DEL store that records every Do call.
type fakeBackend struct {
	mu    sync.Mutex
	data  map[string]string
	calls [][]string // command names of each Do call
}

func newFakeBackend() *fakeBackend { return &fakeBackend{data: map[string]string{}} }

func (f *fakeBackend) Do(ctx context.Context, cmds [][][]byte) []reply.Reply {
	names := make([]string, len(cmds))
	for i, c := range cmds {
		names[i] = strings.ToUpper(string(c[0]))
	}
	f.mu.Lock()
	f.calls = append(f.calls, names)
	f.mu.Unlock()
	out := make([]reply.Reply, len(cmds))
	for i, c := range cmds {
		key := ""
		if len(c) > 1 {
			key = string(c[1])
		}
		switch key {
		case "panic":
			panic("fake backend panic")
		case "block":
			<-ctx.Done()
			out[i] = reply.Error("ERR " + ctx.Err().Error())
			continue
		}
		f.mu.Lock()
		switch names[i] {
		case "GET":
			if v, ok := f.data[key]; ok {
				out[i] = reply.BulkString(v)
			} else {
				out[i] = reply.Nil
			}
		case "SET":
			f.data[key] = string(c[2])
			out[i] = reply.OK
		case "DEL":
			n := 0
			for _, k := range c[1:] {
				if _, ok := f.data[string(k)]; ok {
					delete(f.data, string(k))
					n++
				}
			}
			out[i] = reply.Int(int64(n))
		default:
			out[i] = reply.Error("ERR fake backend does not implement " + names[i])
		}
		f.mu.Unlock()
	}
	return out
}

func (f *fakeBackend) Watch(ctx context.Context, keys [][]byte) ([]uint64, *reply.Reply) {
	return make([]uint64, len(keys)), nil
}

func (f *fakeBackend) Info() []InfoSection {
	f.mu.Lock()
	n := len(f.data)
	f.mu.Unlock()
	ks := InfoSection{Name: "Keyspace"}
	if n > 0 {
		ks.Fields = [][2]string{{"db0", fmt.Sprintf("keys=%d,expires=0,avg_ttl=0", n)}}
	}
	return []InfoSection{
		{Name: "Replication", Fields: [][2]string{{"role", "master"}, {"raft_term", "1"}}},
		ks,
	}
}

func (f *fakeBackend) doCalls() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]string(nil), f.calls...)
}

func (f *fakeBackend) reset() {
	f.mu.Lock()
	f.calls = nil
	f.mu.Unlock()
}

func startServer(t testing.TB, cfg Config, b Backend) (*Server, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Commands == nil {
		cfg.Commands = kv.Table{}
	}
	s := NewServer(cfg, b)
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return s, l.Addr().String()
}

// rawConn is a test client speaking bytes.
type rawConn struct {
	t  testing.TB
	nc net.Conn
	br *bufio.Reader
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (c *rawConn) send(s string) {
	c.t.Helper()
	if _, err := c.nc.Write([]byte(s)); err != nil {
		c.t.Fatal(err)
	}
}

func (c *rawConn) cmd(args ...string) {
	c.t.Helper()
	b := make([][]byte, len(args))
	for i, a := range args {
		b[i] = []byte(a)
	}
	c.send(string(codec.AppendCommand(nil, b...)))
}

// reply reads one complete reply frame and returns its raw bytes.
func (c *rawConn) reply() string {
	c.t.Helper()
	s, err := readFrame(c.br)
	if err != nil {
		c.t.Fatalf("reading reply: %v (got %q)", err, s)
	}
	return s
}

func (c *rawConn) expectEOF() {
	c.t.Helper()
	if b, err := c.br.ReadByte(); err != io.EOF {
		c.t.Fatalf("want EOF, got byte %q err %v", b, err)
	}
}

func readFrame(br *bufio.Reader) (string, error) {
	line, err := br.ReadString('\n')
	if err != nil {
		return line, err
	}
	if len(line) < 3 {
		return line, fmt.Errorf("short line %q", line)
	}
	n, _ := strconv.Atoi(line[1 : len(line)-2])
	switch line[0] {
	case '$', '=':
		if n < 0 {
			return line, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(br, buf); err != nil {
			return line, err
		}
		return line + string(buf), nil
	case '*', '~', '>', '%':
		if line[0] == '%' {
			n *= 2
		}
		out := line
		for range n {
			s, err := readFrame(br)
			out += s
			if err != nil {
				return out, err
			}
		}
		return out, nil
	}
	return line, nil
}

func TestPipelineOneBackendCall(t *testing.T) {
	fb := newFakeBackend()
	_, addr := startServer(t, Config{}, fb)
	c := dialRaw(t, addr)
	var in []byte
	for i := range 16 {
		in = codec.AppendCommand(in, []byte("SET"), fmt.Appendf(nil, "k%d", i), []byte("v"))
	}
	c.send(string(in))
	for range 16 {
		if r := c.reply(); r != "+OK\r\n" {
			t.Fatalf("got %q", r)
		}
	}
	calls := fb.doCalls()
	if len(calls) != 1 || len(calls[0]) != 16 {
		t.Fatalf("backend calls: %v; want one call with 16 commands", calls)
	}
}

func TestPipelineSplitByConnectionCommand(t *testing.T) {
	fb := newFakeBackend()
	_, addr := startServer(t, Config{}, fb)
	c := dialRaw(t, addr)
	c.send("SET a 1\r\nSET b 2\r\nGET a\r\nPING\r\nGET b\r\nSET b 3\r\nECHO x\r\nGET b\r\n")
	want := []string{"+OK\r\n", "+OK\r\n", "$1\r\n1\r\n", "+PONG\r\n", "$1\r\n2\r\n", "+OK\r\n", "$1\r\nx\r\n", "$1\r\n3\r\n"}
	for i, w := range want {
		if r := c.reply(); r != w {
			t.Fatalf("reply %d: got %q want %q", i, r, w)
		}
	}
	got := fmt.Sprint(fb.doCalls())
	if got != "[[SET SET GET] [GET SET] [GET]]" {
		t.Fatalf("backend calls %s", got)
	}
}

func TestInvalidAndUnknownCommandsInPipeline(t *testing.T) {
	fb := newFakeBackend()
	_, addr := startServer(t, Config{}, fb)
	c := dialRaw(t, addr)
	c.send("SET a 1\r\nSET b\r\nfoo x y\r\nSET c 3\r\nGET c\r\n")
	if r := c.reply(); r != "+OK\r\n" {
		t.Fatalf("got %q", r)
	}
	if r := c.reply(); !strings.HasPrefix(r, "-ERR wrong number of arguments") {
		t.Fatalf("invalid SET: got %q", r)
	}
	if r := c.reply(); r != "-ERR unknown command 'foo', with args beginning with: 'x' 'y' \r\n" {
		t.Fatalf("unknown: got %q", r)
	}
	if r := c.reply(); r != "+OK\r\n" {
		t.Fatalf("got %q", r)
	}
	if r := c.reply(); r != "$1\r\n3\r\n" {
		t.Fatalf("got %q", r)
	}
	if got := fmt.Sprint(fb.doCalls()); got != "[[SET SET GET]]" {
		t.Fatalf("backend calls %s: invalid commands must not reach it", got)
	}
	c.send("nosuch\r\n")
	if r := c.reply(); r != "-ERR unknown command 'nosuch', with args beginning with: \r\n" {
		t.Fatalf("got %q", r)
	}
}

func TestUnknownCommandText(t *testing.T) {
	long := strings.Repeat("a", 200)
	r := NewServer(Config{Commands: kv.Table{}}, newFakeBackend()).unknownCommand([][]byte{[]byte(long), []byte(long), []byte("b")})
	want := "ERR unknown command '" + long[:128] + "', with args beginning with: '" + long[:128] + "' "
	if string(r.Str) != want {
		t.Fatalf("got %q", r.Str)
	}
}

func TestPipelineSplitAcrossReads(t *testing.T) {
	fb := newFakeBackend()
	_, addr := startServer(t, Config{}, fb)
	c := dialRaw(t, addr)
	c.send("*3\r\n$3\r\nSET\r\n$1\r\na\r\n$5\r\nhel")
	time.Sleep(20 * time.Millisecond)
	c.send("lo\r\n*2\r\n$3\r")
	time.Sleep(20 * time.Millisecond)
	c.send("\nGET\r\n$1\r\na\r\n")
	if r := c.reply(); r != "+OK\r\n" {
		t.Fatalf("got %q", r)
	}
	if r := c.reply(); r != "$5\r\nhello\r\n" {
		t.Fatalf("got %q", r)
	}
}

func TestProtocolErrorsCloseConnection(t *testing.T) {
	_, addr := startServer(t, Config{Limits: codec.Limits{MaxFrameSize: 1024, MaxArgs: 8}}, newFakeBackend())
	tests := []struct{ in, want string }{
		{"*abc\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"*1\r\n$x\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"*1\r\n+PING\r\n", "-ERR Protocol error: expected '$', got '+'\r\n"},
		{"SET k \"v\r\n", "-ERR Protocol error: unbalanced quotes in request\r\n"},
		{strings.Repeat("x", 70000), "-ERR Protocol error: too big inline request\r\n"},
		{"*9\r\n", "-ERR Protocol error: too many arguments (9, limit 8)\r\n"},
		{"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2000\r\n", "-ERR Protocol error: command frame too large (2029 bytes, limit 1024)\r\n"},
		{"*1\r\n\r\n", "-ERR Protocol error: expected '$', got ' '\r\n"},
	}
	for _, tc := range tests {
		c := dialRaw(t, addr)
		c.send(tc.in)
		if r := c.reply(); r != tc.want {
			t.Errorf("%.20q: got %q want %q", tc.in, r, tc.want)
			continue
		}
		c.expectEOF()
	}
	// Commands before the error are executed and answered first.
	c := dialRaw(t, addr)
	c.send("PING\r\nECHO hi\r\n*x\r\nPING\r\n")
	for _, w := range []string{"+PONG\r\n", "$2\r\nhi\r\n", "-ERR Protocol error: invalid multibulk length\r\n"} {
		if r := c.reply(); r != w {
			t.Fatalf("got %q want %q", r, w)
		}
	}
	c.expectEOF()
}

func TestQuit(t *testing.T) {
	fb := newFakeBackend()
	_, addr := startServer(t, Config{}, fb)
	c := dialRaw(t, addr)
	c.send("PING\r\nQUIT\r\nSET a b\r\n")
	if r := c.reply(); r != "+PONG\r\n" {
		t.Fatalf("got %q", r)
	}
	if r := c.reply(); r != "+OK\r\n" {
		t.Fatalf("got %q", r)
	}
	c.expectEOF()
	if calls := fb.doCalls(); len(calls) != 0 {
		t.Fatalf("commands after QUIT executed: %v", calls)
	}
}

func TestConnectionCommandsRaw(t *testing.T) {
	_, addr := startServer(t, Config{}, newFakeBackend())
	c := dialRaw(t, addr)
	tests := []struct{ cmd, want string }{
		{"PING", "+PONG\r\n"},
		{"ping hello", "$5\r\nhello\r\n"},
		{"PING a b", "-ERR wrong number of arguments for 'ping' command\r\n"},
		{"ECHO", "-ERR wrong number of arguments for 'echo' command\r\n"},
		{"HELLO 4", "-NOPROTO unsupported protocol version\r\n"},
		{"HELLO x", "-ERR Protocol version is not an integer or out of range\r\n"},
		{"HELLO 3 foo", "-ERR Syntax error in HELLO option 'foo'\r\n"},
		{"HELLO 3 AUTH bob pw", "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
		{"AUTH pw", "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n"},
		{"AUTH a b c", "-ERR syntax error\r\n"},
		{"AUTH default pw", "+OK\r\n"},
		{"SELECT 0", "+OK\r\n"},
		{"SELECT 1", "-ERR DB index is out of range\r\n"},
		{"SELECT x", "-ERR value is not an integer or out of range\r\n"},
		{"CLIENT", "-ERR wrong number of arguments for 'client' command\r\n"},
		{"CLIENT foo", "-ERR unknown subcommand 'foo'. Try CLIENT HELP.\r\n"},
		{"CLIENT MAINT_NOTIFICATIONS on", "-ERR unknown subcommand 'MAINT_NOTIFICATIONS'. Try CLIENT HELP.\r\n"},
		{"CLIENT SETNAME", "-ERR wrong number of arguments for 'client|setname' command\r\n"},
		{"CLIENT SETNAME \"a b\"", "-ERR Client names cannot contain spaces, newlines or special characters.\r\n"},
		{"CLIENT GETNAME", "$-1\r\n"},
		{"CLIENT SETNAME conn1", "+OK\r\n"},
		{"client getname", "$5\r\nconn1\r\n"},
		{"CLIENT SETINFO LIB-NAME mylib", "+OK\r\n"},
		{"CLIENT SETINFO foo x", "-ERR Unrecognized option 'foo'\r\n"},
		{"COMMAND FOO", "-ERR unknown subcommand 'FOO'. Try COMMAND HELP.\r\n"},
		{"COMMAND COUNT x", "-ERR wrong number of arguments for 'command|count' command\r\n"},
		{"COMMAND INFO nosuch", "*1\r\n$-1\r\n"},
		{"COMMAND GETKEYS ping", "-ERR wrong number of arguments for 'command|getkeys' command\r\n"},
		{"COMMAND GETKEYS ping x", "-ERR The command has no key arguments\r\n"},
		{"INFO nosuch", "$0\r\n\r\n"},
		{"RESET", "+RESET\r\n"},
		{"CLIENT GETNAME", "$-1\r\n"},
	}
	for _, tc := range tests {
		c.send(tc.cmd + "\r\n")
		if r := c.reply(); r != tc.want {
			t.Errorf("%s: got %q want %q", tc.cmd, r, tc.want)
		}
	}
	c.send("TIME\r\n")
	r := c.reply()
	parts := strings.Split(r, "\r\n")
	if len(parts) != 6 || parts[0] != "*2" {
		t.Fatalf("TIME: %q", r)
	}
	if sec, _ := strconv.ParseInt(parts[2], 10, 64); abs(sec-time.Now().Unix()) > 5 {
		t.Fatalf("TIME seconds %q", parts[2])
	}
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

func TestHelloAndReset(t *testing.T) {
	_, addr := startServer(t, Config{}, newFakeBackend())
	c := dialRaw(t, addr)
	c.send("HELLO 3 SETNAME n1\r\n")
	r := c.reply()
	if !strings.HasPrefix(r, "%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$5\r\n7.2.0\r\n$5\r\nproto\r\n:3\r\n$2\r\nid\r\n:") ||
		!strings.HasSuffix(r, "$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n") {
		t.Fatalf("HELLO 3: %q", r)
	}
	c.send("CLIENT GETNAME\r\nGET missing\r\n")
	if r := c.reply(); r != "$2\r\nn1\r\n" {
		t.Fatalf("name: %q", r)
	}
	if r := c.reply(); r != "_\r\n" {
		t.Fatalf("RESP3 nil: %q", r)
	}
	// HELLO in the middle of a pipeline: replies before it use the old
	// protocol, replies after it the new one.
	c.send("GET missing\r\nHELLO 2\r\nGET missing\r\nHELLO 3\r\nRESET\r\nGET missing\r\nHELLO\r\n")
	if r := c.reply(); r != "_\r\n" {
		t.Fatalf("got %q", r)
	}
	if r := c.reply(); !strings.HasPrefix(r, "*14\r\n") {
		t.Fatalf("HELLO 2: %q", r)
	}
	if r := c.reply(); r != "$-1\r\n" {
		t.Fatalf("RESP2 nil: %q", r)
	}
	if r := c.reply(); !strings.HasPrefix(r, "%7\r\n") {
		t.Fatalf("HELLO 3: %q", r)
	}
	if r := c.reply(); r != "+RESET\r\n" {
		t.Fatalf("RESET: %q", r)
	}
	if r := c.reply(); r != "$-1\r\n" {
		t.Fatalf("after RESET: %q", r)
	}
	if r := c.reply(); !strings.Contains(r, "$5\r\nproto\r\n:2\r\n") {
		t.Fatalf("HELLO after RESET: %q", r)
	}
}

func newClient(t testing.TB, addr string, proto int) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr, Protocol: proto, PoolSize: 4, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func TestGoRedis(t *testing.T) {
	for _, proto := range []int{2, 3} {
		t.Run("RESP"+strconv.Itoa(proto), func(t *testing.T) {
			fb := newFakeBackend()
			_, addr := startServer(t, Config{Version: "test"}, fb)
			ctx := context.Background()
			rdb := newClient(t, addr, proto)
			if err := rdb.Ping(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
			if v, err := rdb.Get(ctx, "k").Result(); err != nil || v != "v" {
				t.Fatalf("GET: %q %v", v, err)
			}
			if _, err := rdb.Get(ctx, "missing").Result(); err != redis.Nil {
				t.Fatalf("GET missing: %v", err)
			}
			if v, err := rdb.Do(ctx, "NOSUCH", "a").Result(); err == nil || err.Error() != "ERR unknown command 'NOSUCH', with args beginning with: 'a' " {
				t.Fatalf("unknown: %v %v", v, err)
			}

			hello, err := rdb.Do(ctx, "HELLO", strconv.Itoa(proto)).Result()
			if err != nil {
				t.Fatal(err)
			}
			switch h := hello.(type) {
			case map[interface{}]interface{}:
				if proto != 3 || h["proto"] != int64(3) || h["server"] != "redis" || h["version"] != RedisVersion {
					t.Fatalf("HELLO map %v", h)
				}
			case []interface{}:
				if proto != 2 || len(h) != 14 || h[4] != "proto" || h[5] != int64(2) {
					t.Fatalf("HELLO array %v", h)
				}
			default:
				t.Fatalf("HELLO reply %T %v", hello, hello)
			}

			// Pipeline: 16 SETs in one backend call, replies in order.
			fb.reset()
			cmds, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
				for i := range 16 {
					p.Set(ctx, fmt.Sprintf("p%d", i), i, 0)
				}
				p.Ping(ctx)
				for i := range 16 {
					p.Get(ctx, fmt.Sprintf("p%d", i))
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if cmds[16].(*redis.StatusCmd).Val() != "PONG" {
				t.Fatalf("PING in pipeline: %v", cmds[16])
			}
			for i := range 16 {
				if v := cmds[17+i].(*redis.StringCmd).Val(); v != strconv.Itoa(i) {
					t.Fatalf("GET p%d = %q", i, v)
				}
			}
			if calls := fb.doCalls(); len(calls) != 2 || len(calls[0]) != 16 || len(calls[1]) != 16 {
				t.Fatalf("pipeline backend calls: %d (%v)", len(calls), calls)
			}

			// CLIENT on one connection.
			conn := rdb.Conn()
			defer conn.Close()
			if err := conn.ClientSetName(ctx, "tester").Err(); err != nil {
				t.Fatal(err)
			}
			if n, err := conn.ClientGetName(ctx).Result(); err != nil || n != "tester" {
				t.Fatalf("GETNAME %q %v", n, err)
			}
			id, err := conn.ClientID(ctx).Result()
			if err != nil || id <= 0 {
				t.Fatalf("ID %d %v", id, err)
			}
			list, err := rdb.ClientList(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(list, fmt.Sprintf("id=%d ", id)) || !strings.Contains(list, " name=tester ") ||
				!strings.Contains(list, "lib-name=go-redis") || !strings.Contains(list, fmt.Sprintf(" resp=%d ", proto)) {
				t.Fatalf("CLIENT LIST:\n%s", list)
			}
			info, err := conn.ClientInfo(ctx).Result()
			if err != nil || info.ID != id || info.Name != "tester" {
				t.Fatalf("CLIENT INFO %+v %v", info, err)
			}

			// COMMAND: go-redis parses every entry.
			n, err := rdb.Do(ctx, "COMMAND", "COUNT").Int()
			if err != nil || n <= 0 {
				t.Fatalf("COMMAND COUNT %d %v", n, err)
			}
			infos, err := rdb.Command(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			if len(infos) != n || infos["ping"] == nil || infos["ping"].Arity != -1 || infos["client"] == nil {
				t.Fatalf("COMMAND: %d entries (count %d), ping=%+v", len(infos), n, infos["ping"])
			}
			for _, spec := range kv.Commands() {
				ci := infos[strings.ToLower(spec.Name)]
				if ci == nil || ci.Arity != int8(spec.Arity) || ci.FirstKeyPos != int8(spec.FirstKey) {
					t.Fatalf("COMMAND entry for %s: %+v", spec.Name, ci)
				}
			}
			docs, err := rdb.Do(ctx, "COMMAND", "DOCS", "ping", "client").Result()
			if err != nil {
				t.Fatal(err)
			}
			if s := fmt.Sprint(docs); !strings.Contains(s, "summary") || !strings.Contains(s, "client|setname") {
				t.Fatalf("COMMAND DOCS %v", s)
			}
			names, err := rdb.Do(ctx, "COMMAND", "LIST").StringSlice()
			if err != nil || len(names) <= n {
				t.Fatalf("COMMAND LIST %v %v", names, err)
			}

			// INFO
			all, err := rdb.Info(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"# Server\r\n", "redis_version:7.2.0\r\n", "kvorum_version:test\r\n", "tcp_port:",
				"# Clients\r\n", "connected_clients:", "# Memory\r\n", "used_memory:", "used_memory_human:",
				"# Stats\r\n", "total_connections_received:", "total_commands_processed:",
				"# Replication\r\n", "role:master\r\n", "# Keyspace\r\n", "db0:keys="} {
				if !strings.Contains(all, want) {
					t.Fatalf("INFO lacks %q:\n%s", want, all)
				}
			}
			srv, err := rdb.Info(ctx, "server").Result()
			if err != nil || !strings.HasPrefix(srv, "# Server\r\n") || strings.Contains(srv, "# Clients") {
				t.Fatalf("INFO server: %q %v", srv, err)
			}
			two, err := rdb.Info(ctx, "clients", "replication").Result()
			if err != nil || !strings.Contains(two, "# Clients\r\n") || !strings.Contains(two, "\r\n\r\n# Replication\r\n") || strings.Contains(two, "# Server") {
				t.Fatalf("INFO clients replication: %q %v", two, err)
			}
		})
	}
}

func TestMaxClients(t *testing.T) {
	s, addr := startServer(t, Config{MaxClients: 2}, newFakeBackend())
	c1, c2 := dialRaw(t, addr), dialRaw(t, addr)
	for _, c := range []*rawConn{c1, c2} {
		c.send("PING\r\n")
		if r := c.reply(); r != "+PONG\r\n" {
			t.Fatal(r)
		}
	}
	c3 := dialRaw(t, addr)
	if r := c3.reply(); r != "-ERR max number of clients reached\r\n" {
		t.Fatalf("got %q", r)
	}
	c3.expectEOF()
	c1.send("QUIT\r\n")
	c1.reply()
	c1.expectEOF()
	deadline := time.Now().Add(5 * time.Second)
	for s.clients.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("client count did not drop")
		}
		time.Sleep(5 * time.Millisecond)
	}
	c4 := dialRaw(t, addr)
	c4.send("PING\r\n")
	if r := c4.reply(); r != "+PONG\r\n" {
		t.Fatalf("after a slot freed: %q", r)
	}
}

func TestBackendPanicClosesOnlyThatConnection(t *testing.T) {
	_, addr := startServer(t, Config{}, newFakeBackend())
	c := dialRaw(t, addr)
	c.send("GET panic\r\n")
	c.expectEOF()
	c2 := dialRaw(t, addr)
	c2.send("PING\r\n")
	if r := c2.reply(); r != "+PONG\r\n" {
		t.Fatalf("server unusable after panic: %q", r)
	}
}

func TestCloseCancelsBackendAndConnections(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(Config{Commands: kv.Table{}}, newFakeBackend())
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	idle := dialRaw(t, l.Addr().String())
	idle.send("PING\r\n")
	idle.reply()
	blocked := dialRaw(t, l.Addr().String())
	blocked.send("GET block\r\n")
	time.Sleep(50 * time.Millisecond)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	if err := <-served; !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve: %v", err)
	}
	idle.expectEOF()
	if err := s.Serve(l); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve after Close: %v", err)
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, addr := startServer(t, Config{Registerer: reg}, newFakeBackend())
	c := dialRaw(t, addr)
	c.send("PING\r\nPING\r\nSET a b\r\nBOGUS\r\n")
	for range 4 {
		c.reply()
	}
	bad := dialRaw(t, addr)
	bad.send("*x\r\n")
	bad.reply()
	bad.expectEOF()
	time.Sleep(20 * time.Millisecond)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, lp := range m.GetLabel() {
				name += "{" + lp.GetValue() + "}"
			}
			switch {
			case m.Counter != nil:
				got[name] = m.Counter.GetValue()
			case m.Gauge != nil:
				got[name] = m.Gauge.GetValue()
			case m.Histogram != nil:
				got[name] = float64(m.Histogram.GetSampleCount())
			}
		}
	}
	for name, want := range map[string]float64{
		"kvorum_resp_commands_total{ping}":           2,
		"kvorum_resp_commands_total{set}":            1,
		"kvorum_resp_command_duration_seconds{set}":  1,
		"kvorum_resp_command_duration_seconds{ping}": 2,
		"kvorum_resp_connections_total":              2,
		"kvorum_resp_connected_clients":              1,
		"kvorum_resp_protocol_errors_total":          1,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
	for name := range got {
		if strings.Contains(name, "bogus") {
			t.Errorf("series for unknown command: %s", name)
		}
	}
}

// okBackend answers OK to everything, for benchmarks.
type okBackend struct{}

func (okBackend) Watch(context.Context, [][]byte) ([]uint64, *reply.Reply) { return nil, nil }

func (okBackend) Do(_ context.Context, cmds [][][]byte) []reply.Reply {
	out := make([]reply.Reply, len(cmds))
	for i := range out {
		out[i] = reply.OK
	}
	return out
}

func (okBackend) Info() []InfoSection { return nil }

func BenchmarkServerPipeline(b *testing.B) {
	_, addr := startServer(b, Config{}, okBackend{})
	c := dialRaw(b, addr)
	_ = c.nc.SetDeadline(time.Time{})
	const n = 64
	var in []byte
	for i := range n {
		in = codec.AppendCommand(in, []byte("SET"), fmt.Appendf(nil, "key:%d", i), []byte("value"))
	}
	want := strings.Repeat("+OK\r\n", n)
	buf := make([]byte, len(want))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := c.nc.Write(in); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c.br, buf); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if string(buf) != want {
		b.Fatalf("replies %q", buf)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/cmd")
}

// Idle connections cost little: a small read buffer and a goroutine.
func TestIdleConnectionsAreCheap(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 1000 connections")
	}
	s, addr := startServer(t, Config{}, newFakeBackend())
	const n = 1000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	conns := make([]net.Conn, 0, n)
	buf := make([]byte, 7)
	for range n {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, nc)
		if _, err := nc.Write([]byte("PING\r\n")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(nc, buf); err != nil || string(buf) != "+PONG\r\n" {
			t.Fatalf("%q %v", buf, err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := (int64(after.HeapInuse) - int64(before.HeapInuse)) / n
	stack := (int64(after.StackInuse) - int64(before.StackInuse)) / n
	t.Logf("per idle connection (client and server side): heap %d B, stacks %d B", heap, stack)
	if heap > 16<<10 {
		t.Errorf("idle connection heap cost %d B", heap)
	}
	if got := s.clients.Load(); got != n {
		t.Errorf("clients = %d", got)
	}
	for _, nc := range conns {
		nc.Close()
	}
}

// redis-cli, if installed, talks to the server.
func TestRedisCLI(t *testing.T) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redis-cli not installed")
	}
	_, addr := startServer(t, Config{}, newFakeBackend())
	host, port, _ := net.SplitHostPort(addr)
	run := func(stdin string, args ...string) string {
		cmd := exec.Command(cli, append([]string{"-h", host, "-p", port}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if out := run("", "PING"); out != "PONG\n" {
		t.Fatalf("PING: %q", out)
	}
	if out := run("SET k \"a b\"\nGET k\nCLIENT SETNAME x\nCLIENT GETNAME\n"); out != "OK\na b\nOK\nx\n" {
		t.Fatalf("stdin commands: %q", out)
	}
	if out := run("", "-3", "HELLO", "3"); !strings.Contains(out, "proto") || !strings.Contains(out, "3") {
		t.Fatalf("HELLO 3: %q", out)
	}
	if out := run("", "-3", "INFO", "server"); !strings.Contains(out, "redis_version:7.2.0") {
		t.Fatalf("INFO: %q", out)
	}
	if out := run("", "COMMAND", "DOCS", "ping"); !strings.Contains(out, "summary") {
		t.Fatalf("COMMAND DOCS: %q", out)
	}
	// --latency (PINGs for a second when its output is not a terminal):
	// min, max, avg, samples.
	if f := strings.Fields(run("", "--latency")); len(f) != 4 || f[3] == "0" {
		t.Fatalf("redis-cli --latency: %q", f)
	}
	if out := run("", "SLOWLOG", "GET"); out != "\n" && !strings.Contains(out, "127.0.0.1:") {
		t.Fatalf("SLOWLOG GET: %q", out)
	}
}

// COMMAND LIST FILTERBY PATTERN matches as Redis 7 does: case-insensitive,
// with backslash escapes.
func TestCommandListPattern(t *testing.T) {
	_, addr := startServer(t, Config{}, newFakeBackend())
	c := dialRaw(t, addr)
	for _, tc := range []struct{ pat, want string }{
		{"GETD*", "*1\r\n$6\r\ngetdel\r\n"},
		{`g\et`, "*1\r\n$3\r\nget\r\n"},
		{"[h]ell?", "*1\r\n$5\r\nhello\r\n"},
		{"nosuch*", "*0\r\n"},
	} {
		c.cmd("COMMAND", "LIST", "FILTERBY", "PATTERN", tc.pat)
		if got := c.reply(); got != tc.want {
			t.Errorf("COMMAND LIST FILTERBY PATTERN %q: got %q, want %q", tc.pat, got, tc.want)
		}
	}
}

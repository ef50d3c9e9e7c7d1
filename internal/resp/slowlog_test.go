package resp

import (
	"bufio"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rv is a parsed reply, for tests that look inside aggregates.
type rv struct {
	typ   byte
	str   string
	n     int64
	elems []rv
}

func parseRV(t testing.TB, frame string) rv {
	t.Helper()
	br := bufio.NewReader(strings.NewReader(frame))
	var read func() rv
	read = func() rv {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("parsing %q: %v", frame, err)
		}
		v := rv{typ: line[0]}
		text := line[1 : len(line)-2]
		switch v.typ {
		case '+', '-', ',':
			v.str = text
		case ':':
			v.n, _ = strconv.ParseInt(text, 10, 64)
		case '$', '=':
			n, _ := strconv.Atoi(text)
			if n >= 0 {
				b := make([]byte, n+2)
				if _, err := io.ReadFull(br, b); err != nil {
					t.Fatal(err)
				}
				v.str = string(b[:n])
			}
		case '*', '%', '~':
			n, _ := strconv.Atoi(text)
			if v.typ == '%' {
				n *= 2
			}
			for range max(n, 0) {
				v.elems = append(v.elems, read())
			}
		}
		return v
	}
	return read()
}

// do sends a command and returns its parsed reply.
func (c *rawConn) do(args ...string) rv {
	c.t.Helper()
	c.cmd(args...)
	return parseRV(c.t, c.reply())
}

// exchange is a command and the reply frame it must get.
type exchange struct {
	args []string
	want string
}

// expect sends each command in turn and checks its reply frame (shown
// cut to 200 bytes: some are large).
func (c *rawConn) expect(exchanges []exchange) {
	c.t.Helper()
	for _, e := range exchanges {
		c.cmd(e.args...)
		if got := c.reply(); got != e.want {
			c.t.Errorf("%.100s: got %.200q, want %.200q", strings.Join(e.args, " "), got, e.want)
		}
	}
}

// slowArgs is the argument lists of SLOWLOG GET's entries, newest first,
// with their ids and client names.
func slowArgs(t *testing.T, r rv) (args [][]string, ids []int64, names []string) {
	t.Helper()
	if r.typ != '*' {
		t.Fatalf("SLOWLOG GET: %+v", r)
	}
	for _, e := range r.elems {
		if e.typ != '*' || len(e.elems) != 6 || e.elems[3].typ != '*' {
			t.Fatalf("SLOWLOG GET entry: %+v", e)
		}
		var a []string
		for _, x := range e.elems[3].elems {
			a = append(a, x.str)
		}
		args = append(args, a)
		ids = append(ids, e.elems[0].n)
		names = append(names, e.elems[5].str)
		if e.elems[1].n < time.Now().Unix()-60 || e.elems[2].n < 0 || !strings.HasPrefix(e.elems[4].str, "127.0.0.1:") {
			t.Errorf("SLOWLOG GET entry time %d, duration %d, client %q", e.elems[1].n, e.elems[2].n, e.elems[4].str)
		}
	}
	return args, ids, names
}

// TestSlowlog: with slowlog-log-slower-than 0 every executed command is
// logged as Redis logs it: its arguments as sent (at most 32, each cut to
// 128 bytes), the client's address and name, newest first; EXEC is not
// logged but the commands it ran are; a rejected command is not; LEN,
// RESET and slowlog-max-len as in Redis, ids going on across a RESET.
func TestSlowlog(t *testing.T) {
	_, addr := startServer(t, Config{}, newFakeBackend())
	c := dialRaw(t, addr)
	if r := c.do("SLOWLOG", "GET"); r.typ != '*' || len(r.elems) != 0 {
		t.Fatalf("SLOWLOG GET with the default threshold after no command: %+v", r)
	}
	c.do("CONFIG", "SET", "slowlog-log-slower-than", "0")
	c.do("SLOWLOG", "RESET")
	c.do("CLIENT", "SETNAME", "me")
	del := []string{"DEL"}
	for i := range 40 {
		del = append(del, "k"+strconv.Itoa(i))
	}
	c.do(del...)
	long := strings.Repeat("x", 200)
	c.do("SET", "k", long)
	c.do("GET") // rejected: not logged
	c.do("MULTI")
	c.do("PING") // connection commands: the fake backend runs no transaction
	c.do("ECHO", "a")
	c.do("EXEC")
	args, ids, names := slowArgs(t, c.do("SLOWLOG", "GET", "-1"))
	want := [][]string{
		{"ECHO", "a"}, {"PING"}, {"MULTI"},
		{"SET", "k", strings.Repeat("x", 128) + "... (72 more bytes)"},
		append(del[:31:31], "... (10 more arguments)"),
		{"CLIENT", "SETNAME", "me"},
		{"SLOWLOG", "RESET"},
	}
	if len(args) != len(want) {
		t.Fatalf("SLOWLOG GET -1: %q, want %q", args, want)
	}
	for i := range want {
		if strings.Join(args[i], " ") != strings.Join(want[i], " ") {
			t.Errorf("entry %d: %q, want %q", i, args[i], want[i])
		}
		if i > 0 && ids[i] != ids[i-1]-1 {
			t.Errorf("ids %v: not consecutive", ids)
		}
	}
	if names[0] != "me" || names[len(names)-1] != "" {
		t.Errorf("client names %q", names)
	}
	if a, _, _ := slowArgs(t, c.do("SLOWLOG", "GET", "2")); len(a) != 2 || a[0][0] != "SLOWLOG" || a[1][0] != "ECHO" {
		t.Errorf("SLOWLOG GET 2: %q", a)
	}
	c.do("PING")
	c.do("PING")
	if a, _, _ := slowArgs(t, c.do("SLOWLOG", "GET")); len(a) != 10 {
		t.Errorf("SLOWLOG GET (default 10): %d entries", len(a))
	}
	if r := c.do("SLOWLOG", "LEN"); r.typ != ':' || r.n != 12 {
		t.Errorf("SLOWLOG LEN: %+v", r)
	}
	lastID := ids[0]
	c.do("SLOWLOG", "RESET")
	// The RESET is logged after it emptied the log, as in Redis.
	if r := c.do("SLOWLOG", "LEN"); r.n != 1 {
		t.Errorf("SLOWLOG LEN after RESET: %+v", r)
	}
	c.do("CONFIG", "SET", "slowlog-max-len", "2")
	for range 5 {
		c.do("PING")
	}
	_, ids, _ = slowArgs(t, c.do("SLOWLOG", "GET", "-1"))
	if len(ids) != 2 || ids[0] <= lastID+5 {
		t.Errorf("after slowlog-max-len 2: ids %v (the last before RESET %d)", ids, lastID)
	}
	c.do("CONFIG", "SET", "slowlog-log-slower-than", "-1")
	c.do("SLOWLOG", "RESET")
	c.do("PING")
	if r := c.do("SLOWLOG", "LEN"); r.n != 0 {
		t.Errorf("SLOWLOG LEN with slowlog-log-slower-than -1: %+v", r)
	}
	c.do("CONFIG", "SET", "slowlog-log-slower-than", "10000000")
	c.do("PING")
	if r := c.do("SLOWLOG", "LEN"); r.n != 0 {
		t.Errorf("SLOWLOG LEN after fast commands under a 10 s threshold: %+v", r)
	}
}

// TestSlowlogConfigAndErrors: the parameters and errors answer as Redis
// 7.0's (texts checked against redis-server 7.0.15).
func TestSlowlogConfigAndErrors(t *testing.T) {
	_, addr := startServer(t, Config{}, newFakeBackend())
	c := dialRaw(t, addr)
	c.expect([]exchange{
		{[]string{"CONFIG", "GET", "slowlog*"}, "*4\r\n$23\r\nslowlog-log-slower-than\r\n$5\r\n10000\r\n$15\r\nslowlog-max-len\r\n$3\r\n128\r\n"},
		{[]string{"CONFIG", "GET", "latency*"}, "*6\r\n$25\r\nlatency-monitor-threshold\r\n$1\r\n0\r\n$16\r\nlatency-tracking\r\n$3\r\nyes\r\n$33\r\nlatency-tracking-info-percentiles\r\n$10\r\n50 99 99.9\r\n"},
		{[]string{"CONFIG", "SET", "slowlog-log-slower-than", "-2"}, "-ERR CONFIG SET failed (possibly related to argument 'slowlog-log-slower-than') - argument must be between -1 and 9223372036854775807 inclusive\r\n"},
		{[]string{"CONFIG", "SET", "slowlog-log-slower-than", "1.5"}, "-ERR CONFIG SET failed (possibly related to argument 'slowlog-log-slower-than') - argument couldn't be parsed into an integer\r\n"},
		{[]string{"CONFIG", "SET", "slowlog-log-slower-than", "9223372036854775808"}, "-ERR CONFIG SET failed (possibly related to argument 'slowlog-log-slower-than') - argument couldn't be parsed into an integer\r\n"},
		{[]string{"CONFIG", "SET", "slowlog-max-len", "-1"}, "-ERR CONFIG SET failed (possibly related to argument 'slowlog-max-len') - argument must be between 0 and 9223372036854775807 inclusive\r\n"},
		{[]string{"CONFIG", "SET", "latency-monitor-threshold", "-1"}, "-ERR CONFIG SET failed (possibly related to argument 'latency-monitor-threshold') - argument must be between 0 and 9223372036854775807 inclusive\r\n"},
		{[]string{"CONFIG", "SET", "latency-tracking", "maybe"}, "-ERR CONFIG SET failed (possibly related to argument 'latency-tracking') - argument must be 'yes' or 'no'\r\n"},
		{[]string{"CONFIG", "SET", "latency-tracking-info-percentiles", "50 abc"}, "-ERR CONFIG SET failed (possibly related to argument 'latency-tracking-info-percentiles') - Invalid latency-tracking-info-percentiles parameters\r\n"},
		{[]string{"CONFIG", "SET", "latency-tracking-info-percentiles", "101"}, "-ERR CONFIG SET failed (possibly related to argument 'latency-tracking-info-percentiles') - latency-tracking-info-percentiles parameters should sit between [0.0,100.0]\r\n"},
		{[]string{"CONFIG", "SET", "latency-tracking-info-percentiles", "99.99 50"}, "+OK\r\n"},
		{[]string{"CONFIG", "GET", "latency-tracking-info-percentiles"}, "*2\r\n$33\r\nlatency-tracking-info-percentiles\r\n$8\r\n99.99 50\r\n"},
		{[]string{"CONFIG", "SET", "slowlog-log-slower-than", "-1", "slowlog-max-len", "5"}, "+OK\r\n"},
		{[]string{"CONFIG", "GET", "slowlog*"}, "*4\r\n$23\r\nslowlog-log-slower-than\r\n$2\r\n-1\r\n$15\r\nslowlog-max-len\r\n$1\r\n5\r\n"},
		{[]string{"SLOWLOG", "GET", "x"}, "-ERR count should be greater than or equal to -1\r\n"},
		{[]string{"SLOWLOG", "GET", "-2"}, "-ERR count should be greater than or equal to -1\r\n"},
		{[]string{"SLOWLOG", "GET", "0"}, "*0\r\n"},
		{[]string{"SLOWLOG", "GET", "1", "2"}, "-ERR unknown subcommand or wrong number of arguments for 'GET'. Try SLOWLOG HELP.\r\n"},
		{[]string{"SLOWLOG", "LEN", "1"}, "-ERR wrong number of arguments for 'slowlog|len' command\r\n"},
		{[]string{"SLOWLOG", "FOO"}, "-ERR unknown subcommand 'FOO'. Try SLOWLOG HELP.\r\n"},
		{[]string{"SLOWLOG"}, "-ERR wrong number of arguments for 'slowlog' command\r\n"},
		{[]string{"LATENCY", "HISTORY"}, "-ERR wrong number of arguments for 'latency|history' command\r\n"},
		{[]string{"LATENCY", "HISTORY", "nosuch"}, "*0\r\n"},
		{[]string{"LATENCY", "GRAPH", "nosuch"}, "-ERR No samples available for event 'nosuch'\r\n"},
		{[]string{"LATENCY", "LATEST"}, "*0\r\n"},
		{[]string{"LATENCY", "RESET"}, ":0\r\n"},
		{[]string{"LATENCY", "HISTOGRAM", "nosuch"}, "*0\r\n"},
		{[]string{"LATENCY", "FOO"}, "-ERR unknown subcommand 'FOO'. Try LATENCY HELP.\r\n"},
	})
	if r := c.do("SLOWLOG", "HELP"); len(r.elems) != 12 || r.elems[0].str != "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:" {
		t.Errorf("SLOWLOG HELP: %+v", r)
	}
	if r := c.do("LATENCY", "HELP"); len(r.elems) != 17 || r.elems[0].typ != '+' {
		t.Errorf("LATENCY HELP: %+v", r)
	}
}

// TestObserveBelowThresholdAllocatesNothing: a command below the slow
// log's and the latency monitor's thresholds costs no allocation.
func TestObserveBelowThresholdAllocatesNothing(t *testing.T) {
	s, _ := startServer(t, Config{}, newFakeBackend())
	c := &conn{s: s, addr: "127.0.0.1:1"}
	s.lat.threshold.Store(100)
	cmd := s.cmds["get"]
	args := [][]byte{[]byte("GET"), []byte("k")}
	if n := testing.AllocsPerRun(1000, func() { c.observe(cmd, args, 50*time.Microsecond) }); n != 0 {
		t.Errorf("observe below the thresholds: %v allocations", n)
	}
	if _, total := cmd.stats.hist.counts(); total < 1000 {
		t.Errorf("histogram counted %d calls", total)
	}
}

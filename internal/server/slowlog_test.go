package server

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kvorum/kvorum/internal/kvdiff"
)

// slowlogSequence is what TestSlowlogLikeRedis runs on both sides with
// slowlog-log-slower-than 0: a long argument list and a long argument
// (cut as Redis cuts them), a rejected command (not logged), a
// transaction (its commands logged, not EXEC).
func slowlogSequence() [][]string {
	rpush := []string{"RPUSH", "l"}
	for i := range 40 {
		rpush = append(rpush, "a"+strconv.Itoa(i))
	}
	return [][]string{
		{"CLIENT", "SETNAME", "differ"},
		rpush,
		{"SET", "k", strings.Repeat("x", 200)},
		{"GET"},
		{"MULTI"}, {"SET", "a", "1"}, {"GET", "a"}, {"EXEC"},
		{"PING"},
	}
}

// normSlowlog makes a SLOWLOG GET reply comparable across servers: ids
// counted from the newest entry, time and duration 0, the client address
// "addr" once it is checked to be one.
func normSlowlog(t *testing.T, v kvdiff.Value) kvdiff.Value {
	t.Helper()
	if v.Type != '*' || len(v.Elems) == 0 {
		t.Fatalf("SLOWLOG GET: %s", kvdiff.Render(v))
	}
	newest := v.Elems[0].Elems[0].Int
	for i := range v.Elems {
		e := &v.Elems[i]
		if e.Type != '*' || len(e.Elems) != 6 {
			t.Fatalf("SLOWLOG GET entry: %s", kvdiff.Render(*e))
		}
		e.Elems[0].Int -= newest
		if e.Elems[1].Int < 1_600_000_000 || e.Elems[2].Int < 0 {
			t.Errorf("SLOWLOG GET entry time %d, duration %d", e.Elems[1].Int, e.Elems[2].Int)
		}
		e.Elems[1].Int, e.Elems[2].Int = 0, 0
		if !regexp.MustCompile(`^127\.0\.0\.1:\d+$`).Match(e.Elems[4].Str) {
			t.Errorf("SLOWLOG GET client %q", e.Elems[4].Str)
		}
		e.Elems[4].Str = []byte("addr")
	}
	return v
}

// TestSlowlogLikeRedis: SLOWLOG GET, LEN and RESET answer what
// redis-server 7.0 answers for the same commands, in RESP2 and RESP3, on
// a follower (the node's own log): the same entries in the same order,
// arguments cut alike, ids consecutive, the client's name; CONFIG
// RESETSTAT does not empty it. Times are not compared.
func TestSlowlogLikeRedis(t *testing.T) {
	ref := kvdiff.StartServer(t)
	c := newTestCluster(t, 3)
	kv := c.node(followersOf(c.waitLeader(), 3)[0]).ClientAddr()
	likeRedisInRESP2And3(t, ref, kv, func(_ string, do func(args ...string) kvdiff.Value) []string {
		do("CONFIG", "SET", "slowlog-log-slower-than", "0")
		do("SLOWLOG", "RESET")
		for _, args := range slowlogSequence() {
			do(args...)
		}
		out := []string{kvdiff.Render(normSlowlog(t, do("SLOWLOG", "GET", "-1")))}
		out = append(out, kvdiff.Render(normSlowlog(t, do("SLOWLOG", "GET", "2"))))
		// CONFIG RESETSTAT keeps the slow log, in Redis as in kvorum.
		return append(out, renderEach(do, [][]string{{"SLOWLOG", "LEN"}, {"CONFIG", "RESETSTAT"}, {"SLOWLOG", "LEN"},
			{"SLOWLOG", "RESET"}, {"SLOWLOG", "LEN"},
			{"CONFIG", "SET", "slowlog-max-len", "3"}, {"PING"}, {"PING"}, {"PING"}, {"PING"}, {"SLOWLOG", "LEN"},
			{"CONFIG", "SET", "slowlog-log-slower-than", "-1"}, {"SLOWLOG", "RESET"}, {"PING"}, {"SLOWLOG", "LEN"},
			{"CONFIG", "SET", "slowlog-log-slower-than", "10000", "slowlog-max-len", "128"},
			{"SLOWLOG", "GET", "x"}, {"SLOWLOG", "GET", "1", "2"}, {"SLOWLOG", "HELP"}})...)
	})
}

// likeRedisInRESP2And3 runs script against redis-server at ref and kvorum
// at kv, over a connection speaking RESP2, then over one speaking RESP3,
// and compares the lines script returns (rendered replies), in order.
// script gets the address and the connection's do (a failed call ends
// the test).
func likeRedisInRESP2And3(t *testing.T, ref, kv string, script func(addr string, do func(args ...string) kvdiff.Value) []string) {
	t.Helper()
	for _, proto := range []int{2, 3} {
		run := func(addr string) []string {
			cl, err := kvdiff.Dial(addr, proto)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			return script(addr, func(args ...string) kvdiff.Value {
				v, err := cl.Do(args...)
				if err != nil {
					t.Fatal(err)
				}
				return v
			})
		}
		want, got := run(ref), run(kv)
		if len(want) != len(got) {
			t.Fatalf("RESP%d: %d replies, redis-server %d", proto, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("RESP%d reply %d:\nkvorum:\n%s\nredis-server:\n%s", proto, i, got[i], want[i])
			}
		}
	}
}

// renderEach runs each command with do and returns "command -> reply"
// lines.
func renderEach(do func(args ...string) kvdiff.Value, cmds [][]string) []string {
	out := make([]string, 0, len(cmds))
	for _, args := range cmds {
		out = append(out, strings.Join(args, " ")+" -> "+kvdiff.Render(do(args...)))
	}
	return out
}

// powers are the bounds (µs) at which Redis's LATENCY HISTOGRAM reports.
var powers = []int64{1, 2, 4, 8, 16, 33, 66, 132, 264, 528, 1056, 2113, 4227, 8454, 16908, 33816, 67633, 135266, 270532, 541064, 1082130}

// normHistogram checks a LATENCY HISTOGRAM reply's cumulative histograms
// (bounds Redis's, counts growing to calls) and replaces each by its last
// count, so that it compares across servers.
func normHistogram(t *testing.T, v kvdiff.Value) kvdiff.Value {
	t.Helper()
	for i := 1; i < len(v.Elems); i += 2 {
		m := &v.Elems[i]
		if len(m.Elems) != 4 || string(m.Elems[2].Str) != "histogram_usec" {
			t.Fatalf("LATENCY HISTOGRAM entry: %s", kvdiff.Render(*m))
		}
		cdf := m.Elems[3].Elems
		prev := int64(0)
		for j := 0; j < len(cdf); j += 2 {
			if !slices.Contains(powers, cdf[j].Int) || cdf[j+1].Int <= prev {
				t.Errorf("histogram_usec %s: bound %d, count %d", kvdiff.Render(m.Elems[3]), cdf[j].Int, cdf[j+1].Int)
			}
			prev = cdf[j+1].Int
		}
		if prev != m.Elems[1].Int {
			t.Errorf("histogram_usec ends at %d, calls %d", prev, m.Elems[1].Int)
		}
		m.Elems[3].Elems = cdf[len(cdf)-2:]
		m.Elems[3].Elems[0].Int = 0
	}
	return v
}

// TestLatencyLikeRedis: LATENCY's subcommands, LATENCY HISTOGRAM's shape
// and INFO latencystats' lines answer as redis-server 7.0's, in RESP2 and
// RESP3 (the latency monitor off, as both start; no event can be caused
// alike on both: Redis's DEBUG SLEEP is not kvorum's).
func TestLatencyLikeRedis(t *testing.T) {
	ref := kvdiff.StartServer(t)
	c := newTestCluster(t, 3)
	kv := c.node(c.waitLeader()).ClientAddr()
	likeRedisInRESP2And3(t, ref, kv, func(addr string, do func(args ...string) kvdiff.Value) []string {
		out := renderEach(do, [][]string{{"LATENCY", "HELP"}, {"LATENCY", "LATEST"}, {"LATENCY", "HISTORY", "command"},
			{"LATENCY", "GRAPH", "command"}, {"LATENCY", "RESET"}, {"LATENCY", "RESET", "command", "x"},
			{"LATENCY", "DOCTOR"}, {"LATENCY", "HISTORY"}, {"LATENCY", "NOSUCH"},
			{"LATENCY", "HISTOGRAM", "nosuch"},
			{"CONFIG", "SET", "latency-monitor-threshold", "-1"}, {"CONFIG", "SET", "latency-tracking", "x"},
			{"CONFIG", "SET", "latency-tracking-info-percentiles", "50 200"},
			{"CONFIG", "SET", "latency-tracking-info-percentiles", "50 99.99 0"},
			{"CONFIG", "GET", "latency-tracking-info-percentiles"}})
		do("CONFIG", "RESETSTAT")
		for range 3 {
			do("SET", "k", "v")
		}
		do("CLIENT", "ID")
		out = append(out, kvdiff.Render(normHistogram(t, do("LATENCY", "HISTOGRAM", "set", "client", "get"))))
		info := do("INFO", "latencystats")
		var lines []string
		for _, l := range strings.Split(strings.TrimPrefix(string(info.Str), "txt:"), "\r\n") {
			if name, val, ok := strings.Cut(l, ":"); ok {
				if !regexp.MustCompile(`^p50=\d+\.\d{3},p99\.99=\d+\.\d{3},p0=\d+\.\d{3}$`).MatchString(val) {
					t.Errorf("%s: %s", addr, l)
				}
				lines = append(lines, name)
			} else if l != "" {
				lines = append(lines, l)
			}
		}
		slices.Sort(lines)
		out = append(out, strings.Join(lines, " "))
		do("CONFIG", "SET", "latency-tracking-info-percentiles", "50 99 99.9")
		return out
	})
}

package resp

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/reply"
)

// TestLatencyMonitorSamples: as Redis's latencyAddSample, one sample per
// second per event (the highest), the last 160, and the all-time high;
// LATEST, HISTORY and RESET report them in Redis's shapes.
func TestLatencyMonitorSamples(t *testing.T) {
	s, addr := startServer(t, Config{}, newFakeBackend())
	base := int64(1_700_000_000)
	s.lat.add("command", 5, base)
	s.lat.add("command", 9, base) // same second: the higher one stays
	s.lat.add("command", 3, base)
	for i := int64(1); i <= 200; i++ {
		s.lat.add("fast-command", i%7+1, base+i)
	}
	c := dialRaw(t, addr)
	c.cmd("LATENCY", "HISTORY", "command")
	if got, want := c.reply(), "*1\r\n*2\r\n:1700000000\r\n:9\r\n"; got != want {
		t.Errorf("LATENCY HISTORY command: %q, want %q", got, want)
	}
	h := c.do("LATENCY", "HISTORY", "fast-command")
	if len(h.elems) != 160 || h.elems[0].elems[0].n != base+41 || h.elems[159].elems[0].n != base+200 {
		t.Fatalf("LATENCY HISTORY fast-command: %d samples, first %+v", len(h.elems), h.elems[0])
	}
	c.cmd("LATENCY", "LATEST")
	want := "*2\r\n*4\r\n$7\r\ncommand\r\n:1700000000\r\n:9\r\n:9\r\n*4\r\n$12\r\nfast-command\r\n:1700000200\r\n:5\r\n:7\r\n"
	if got := c.reply(); got != want {
		t.Errorf("LATENCY LATEST: %q, want %q", got, want)
	}
	c.cmd("LATENCY", "RESET", "command", "nosuch")
	if got := c.reply(); got != ":1\r\n" {
		t.Errorf("LATENCY RESET command nosuch: %q", got)
	}
	c.cmd("LATENCY", "RESET")
	if got := c.reply(); got != ":1\r\n" {
		t.Errorf("LATENCY RESET: %q", got)
	}
	c.cmd("LATENCY", "LATEST")
	if got := c.reply(); got != "*0\r\n" {
		t.Errorf("LATENCY LATEST after RESET: %q", got)
	}
}

// TestLatencyGraphLikeRedis: LATENCY GRAPH draws Redis's sparkline; the
// expected text is redis-server 7.0.15's for the same samples (its
// LATENCY HISTORY: 20, 5, 40, 1, 13 and 7 ms a second apart, drawn 3 s
// after the last).
func TestLatencyGraphLikeRedis(t *testing.T) {
	var m latencyMonitor
	for i, ms := range []int64{20, 5, 40, 1, 13, 7} {
		m.add("command", ms, 1795819931+int64(i))
	}
	got := latencyGraphText("command", m.events["command"], 1795819939)
	want := "command - high 40 ms, low 1 ms (all time high 40 ms)\n" + strings.Repeat("-", 80) + "\n" +
		"  #   \n  |   \n# | _ \n|o|_|o\n      \n876543\nssssss\n"
	if got != want {
		t.Errorf("LATENCY GRAPH:\n%s\nwant:\n%s", got, want)
	}
}

// TestLatencyEventsFromCommands: with latency-monitor-threshold set, a
// command at least that slow is a sample of "command" ("fast-command" for
// a command flagged fast); CONFIG RESETSTAT keeps the events (as Redis).
func TestLatencyEventsFromCommands(t *testing.T) {
	s, addr := startServer(t, Config{}, newFakeBackend())
	c := &conn{s: s, addr: "127.0.0.1:1"}
	c.observe(s.cmds["get"], nil, 5*time.Millisecond) // off: threshold 0
	if len(s.lat.events) != 0 {
		t.Fatalf("events with latency-monitor-threshold 0: %v", s.lat.events)
	}
	rc := dialRaw(t, addr)
	rc.do("CONFIG", "SET", "latency-monitor-threshold", "2")
	c.observe(s.cmds["get"], nil, 1999*time.Microsecond) // below
	c.observe(s.cmds["get"], nil, 3*time.Millisecond)
	c.observe(s.cmds["info"], nil, 7*time.Millisecond)
	rc.do("CONFIG", "RESETSTAT")
	r := rc.do("LATENCY", "LATEST")
	if len(r.elems) != 2 || r.elems[0].elems[0].str != "command" || r.elems[0].elems[2].n != 7 ||
		r.elems[1].elems[0].str != "fast-command" || r.elems[1].elems[2].n != 3 {
		t.Errorf("LATENCY LATEST: %+v", r)
	}
	if d := rc.do("LATENCY", "DOCTOR"); d.typ != '$' || !strings.Contains(d.str, "1. command: 1 latency spikes") {
		t.Errorf("LATENCY DOCTOR: %+v", d)
	}
	if g := rc.do("LATENCY", "GRAPH", "command"); g.typ != '$' || !strings.HasPrefix(g.str, "command - high 7 ms, low 7 ms (all time high 7 ms)\n") {
		t.Errorf("LATENCY GRAPH: %+v", g)
	}
	rc.do("HELLO", "3")
	if g := rc.do("LATENCY", "GRAPH", "command"); g.typ != '=' || !strings.HasPrefix(g.str, "txt:command - high") {
		t.Errorf("LATENCY GRAPH in RESP3: %+v", g)
	}
}

// TestLatencyHistogramBuckets: the buckets are the bounds at which
// Redis's HDR histogram reports (1, 2, 4, 8, 16, 33, 66 µs ... 1082130 µs,
// where a second and more count).
func TestLatencyHistogramBuckets(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int64 // µs reported for the bucket
	}{
		{0, 1}, {1031, 1}, {1032, 2}, {2063, 2}, {2064, 4}, {16 * time.Microsecond, 16},
		{33023, 33}, {33024, 66}, {time.Millisecond, 1056}, {time.Second, 1082130}, {time.Hour, 1082130},
	} {
		var h latencyHist
		h.add(tc.d)
		counts, total := h.counts()
		r := h.cdfReply(counts, total)
		if cdf := r.Elems[3].Elems; total != 1 || len(cdf) != 2 || cdf[0].Int != tc.want {
			t.Errorf("%v: %+v, want bucket %d µs", tc.d, cdf, tc.want)
		}
	}
}

// TestLatencyHistogramAndLatencystats: LATENCY HISTOGRAM answers Redis
// 7.0's shape (a map of command to calls and a cumulative histogram, a
// flat array in RESP2), INFO latencystats the percentiles of
// latency-tracking-info-percentiles; latency-tracking no stops both and
// CONFIG RESETSTAT clears the histograms.
func TestLatencyHistogramAndLatencystats(t *testing.T) {
	_, addr := startServer(t, Config{}, newFakeBackend())
	c := dialRaw(t, addr)
	for range 5 {
		c.do("PING")
	}
	c.do("CLIENT", "ID")
	r := c.do("LATENCY", "HISTOGRAM", "ping", "client", "nosuch")
	if r.typ != '*' || len(r.elems) != 4 || r.elems[0].str != "ping" || r.elems[2].str != "client|id" {
		t.Fatalf("LATENCY HISTOGRAM ping client nosuch: %+v", r)
	}
	ping := r.elems[1]
	if len(ping.elems) != 4 || ping.elems[0].str != "calls" || ping.elems[1].n != 5 || ping.elems[2].str != "histogram_usec" {
		t.Fatalf("ping's histogram: %+v", ping)
	}
	cdf := ping.elems[3].elems
	if len(cdf) < 2 || len(cdf)%2 != 0 || cdf[len(cdf)-1].n != 5 {
		t.Errorf("ping's cumulative counts: %+v", cdf)
	}
	c.do("HELLO", "3")
	r = c.do("LATENCY", "HISTOGRAM", "ping")
	if r.typ != '%' || len(r.elems) != 2 || r.elems[1].typ != '%' || r.elems[1].elems[3].typ != '%' {
		t.Errorf("LATENCY HISTOGRAM ping in RESP3: %+v", r)
	}
	info := c.do("INFO", "latencystats")
	if !strings.HasPrefix(info.str, "txt:# Latencystats\r\n") || !strings.Contains(info.str, "\r\nlatency_percentiles_usec_ping:p50=") ||
		!strings.Contains(info.str, ",p99=") || !strings.Contains(info.str, ",p99.9=") {
		t.Errorf("INFO latencystats: %q", info.str)
	}
	if d := c.do("INFO"); strings.Contains(d.str, "Latencystats") {
		t.Errorf("INFO (default) has Latencystats")
	}
	c.do("CONFIG", "SET", "latency-tracking-info-percentiles", "0 100")
	if info := c.do("INFO", "latencystats"); !strings.Contains(info.str, "latency_percentiles_usec_ping:p0=") || !strings.Contains(info.str, ",p100=") {
		t.Errorf("INFO latencystats with percentiles 0 100: %q", info.str)
	}
	c.do("CONFIG", "SET", "latency-tracking", "no")
	if info := c.do("INFO", "latencystats"); info.str != "txt:# Latencystats\r\n" {
		t.Errorf("INFO latencystats with latency-tracking no: %q", info.str)
	}
	c.do("PING")
	c.do("CONFIG", "SET", "latency-tracking", "yes")
	if r := c.do("LATENCY", "HISTOGRAM", "ping"); r.elems[1].elems[1].n != 5 {
		t.Errorf("ping's calls after a PING with latency-tracking no: %+v", r.elems[1])
	}
	c.do("CONFIG", "RESETSTAT")
	if r := c.do("LATENCY", "HISTOGRAM", "ping"); len(r.elems) != 0 {
		t.Errorf("LATENCY HISTOGRAM ping after CONFIG RESETSTAT: %+v", r)
	}
}

// TestLatencyPercentile: INFO latencystats' values are HDR's value at
// the percentile, to the bucket.
func TestLatencyPercentile(t *testing.T) {
	var h latencyHist
	for range 90 {
		h.add(10 * time.Microsecond) // the 16 µs bucket
	}
	for range 10 {
		h.add(100 * time.Microsecond) // the 132 µs bucket
	}
	counts, total := h.counts()
	for _, tc := range []struct{ p, want float64 }{{50, 16.511}, {90, 16.511}, {91, 132.095}, {100, 132.095}, {0, 8.256}} {
		if got := percentile(counts, total, tc.p); got != tc.want {
			t.Errorf("p%v: %v, want %v", tc.p, got, tc.want)
		}
	}
}

// sleepBackend is a fakeBackend whose every Do call takes at least d.
type sleepBackend struct {
	*fakeBackend
	d time.Duration
}

func (b sleepBackend) Do(ctx context.Context, cmds [][][]byte) []reply.Reply {
	time.Sleep(b.d)
	return b.fakeBackend.Do(ctx, cmds)
}

// TestLatencyBatchEvent: kvorum's own event "kvorum-batch" samples a
// pipelined run of data commands as the backend executed it (one Do
// call), slow as a whole while each command's share may not be; the
// slow log has its commands with their shares.
func TestLatencyBatchEvent(t *testing.T) {
	_, addr := startServer(t, Config{}, sleepBackend{newFakeBackend(), 8 * time.Millisecond})
	c := dialRaw(t, addr)
	c.do("CONFIG", "SET", "latency-monitor-threshold", "5", "slowlog-log-slower-than", "1000")
	c.send(strings.Repeat("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", 4))
	for range 4 {
		c.reply()
	}
	r := c.do("LATENCY", "LATEST")
	found := false
	for _, e := range r.elems {
		found = found || e.elems[0].str == "kvorum-batch" && e.elems[2].n >= 8
	}
	if !found {
		t.Errorf("LATENCY LATEST after a pipelined run of 4 GETs taking 8 ms: %+v", r)
	}
	if args, _, _ := slowArgs(t, c.do("SLOWLOG", "GET")); len(args) != 4 || args[0][0] != "GET" || args[3][0] != "GET" {
		t.Errorf("SLOWLOG GET: %q", args)
	}
}

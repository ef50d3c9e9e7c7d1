package resp

import (
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvorum/kvorum/internal/redisnum"
	"github.com/kvorum/kvorum/internal/reply"
)

// The latency monitor (LATENCY, Redis 7.0's latency.c) and the
// per-command latency histograms (LATENCY HISTOGRAM, INFO latencystats),
// kept per node.
//
// Events: a command whose time (as INFO commandstats counts it) reached
// latency-monitor-threshold milliseconds is a sample of "command", or of
// "fast-command" if it has Redis's fast flag. kvorum adds "kvorum-batch":
// one Backend.Do call, a pipelined run of data commands executed as one
// batch (for writes, one Raft commit), which can be slow while each
// command's share of it is not. Each event keeps one sample per second
// (the highest), the last 160 of them, and its all-time high.

const latencyTSLen = 160 // LATENCY_TS_LEN

type latencySample struct{ unix, ms int64 }

type latencySeries struct {
	idx     int
	max     int64
	samples [latencyTSLen]latencySample
}

type latencyMonitor struct {
	threshold atomic.Int64 // latency-monitor-threshold, ms; 0: off
	tracking  atomic.Bool  // latency-tracking: fill the histograms
	mu        sync.Mutex
	events    map[string]*latencySeries
	// percentiles is latency-tracking-info-percentiles (guarded by mu).
	percentiles []float64
}

func (m *latencyMonitor) init() {
	m.tracking.Store(true)
	m.percentiles = []float64{50, 99, 99.9}
}

// note samples event if d reached latency-monitor-threshold (Redis's
// latencyAddSampleIfNeeded).
func (m *latencyMonitor) note(event string, d time.Duration) {
	if th := m.threshold.Load(); th > 0 {
		if ms := int64(d / time.Millisecond); ms >= th {
			m.add(event, ms, time.Now().Unix())
		}
	}
}

// add is Redis's latencyAddSample.
func (m *latencyMonitor) add(event string, ms, now int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ts := m.events[event]
	if ts == nil {
		if m.events == nil {
			m.events = map[string]*latencySeries{}
		}
		ts = &latencySeries{}
		m.events[event] = ts
	}
	ts.max = max(ts.max, ms)
	prev := &ts.samples[(ts.idx+latencyTSLen-1)%latencyTSLen]
	if prev.unix == now {
		prev.ms = max(prev.ms, ms)
		return
	}
	ts.samples[ts.idx] = latencySample{now, ms}
	ts.idx = (ts.idx + 1) % latencyTSLen
}

// each calls f on the series' samples, oldest first.
func (ts *latencySeries) each(f func(latencySample)) {
	for j := range latencyTSLen {
		if s := ts.samples[(ts.idx+j)%latencyTSLen]; s.unix != 0 {
			f(s)
		}
	}
}

// ---- histograms ----

// latencyHist counts a command's calls by time in power-of-two buckets:
// bucket k holds the times up to histUpper(k) nanoseconds, the bounds at
// which Redis's HDR histogram (1 ns to 1 s, 2 significant digits) reports
// its cumulative counts in LATENCY HISTOGRAM (1, 2, 4, 8, 16, 33, 66 µs,
// ...). Times beyond a second count in the last bucket, as Redis clamps
// them.
type latencyHist struct{ b [histBuckets]atomic.Uint64 }

const histBuckets = 21

// histUpper is the highest time, in ns, of bucket k: HDR's highest value
// equivalent to 1024·2^k at 2 significant digits.
func histUpper(k int) int64 { return 1032<<k - 1 }

func (h *latencyHist) add(d time.Duration) {
	// ns <= histUpper(k) = 1032·2^k - 1 exactly when ns/1032 < 2^k.
	k := min(bits.Len64(uint64(max(int64(d), 0))/1032), histBuckets-1)
	h.b[k].Add(1)
}

func (h *latencyHist) reset() {
	for i := range h.b {
		h.b[i].Store(0)
	}
}

func (h *latencyHist) counts() (c [histBuckets]uint64, total uint64) {
	for i := range h.b {
		c[i] = h.b[i].Load()
		total += c[i]
	}
	return c, total
}

// cdfReply is a command's LATENCY HISTOGRAM entry: calls, and the
// cumulative count at each bucket's bound (µs) where it grows.
func (h *latencyHist) cdfReply(counts [histBuckets]uint64, total uint64) reply.Reply {
	var cdf []reply.Reply
	cum := uint64(0)
	for k, n := range counts {
		if n == 0 {
			continue
		}
		cum += n
		cdf = append(cdf, reply.Int(histUpper(k)/1000), reply.Int(int64(cum)))
	}
	return reply.Map(reply.BulkString("calls"), reply.Int(int64(total)),
		reply.BulkString("histogram_usec"), reply.Map(cdf...))
}

// percentile is HDR's value at percentile p (µs, as Redis's INFO prints
// it): the bound of the bucket holding it, its low bound for p = 0.
func percentile(counts [histBuckets]uint64, total uint64, p float64) float64 {
	want := max(uint64(p/100*float64(total)+0.5), 1)
	cum := uint64(0)
	for k, n := range counts {
		if cum += n; n > 0 && cum >= want {
			if p == 0 {
				if k == 0 {
					return 0
				}
				return float64(histUpper(k-1)+1) / 1000
			}
			return float64(histUpper(k)) / 1000
		}
	}
	return 0
}

// histCommands is every command and subcommand with a histogram sample,
// by name.
func (s *Server) histCommands() []*command {
	var out []*command
	for _, c := range s.topLevel() {
		for _, cc := range append([]*command{c}, c.subs...) {
			if _, n := cc.stats.hist.counts(); n > 0 {
				out = append(out, cc)
			}
		}
	}
	return out
}

// latencyStatsFields is INFO's Latencystats section (empty when
// latency-tracking is off, as in Redis).
func (s *Server) latencyStatsFields() [][2]string {
	f := [][2]string{}
	if !s.lat.tracking.Load() {
		return f
	}
	s.lat.mu.Lock()
	ps := slices.Clone(s.lat.percentiles)
	s.lat.mu.Unlock()
	for _, c := range s.histCommands() {
		counts, total := c.stats.hist.counts()
		var b []byte
		for i, p := range ps {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, 'p')
			b = append(b, formatPercentile(p)...)
			b = append(b, '=')
			b = strconv.AppendFloat(b, percentile(counts, total, p), 'f', 3, 64)
		}
		f = append(f, [2]string{"latency_percentiles_usec_" + c.spec.Name, string(b)})
	}
	return f
}

// formatPercentile prints p as Redis does (fixed point, at most 4
// decimals, no trailing zeros).
func formatPercentile(p float64) string {
	s := strconv.FormatFloat(p, 'f', 4, 64)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// ---- CONFIG parameters ----

func getLatencyThreshold(s *Server) string { return strconv.FormatInt(s.lat.threshold.Load(), 10) }

func setLatencyThreshold(s *Server, v string) (func(), string) {
	n, why := parseConfigInt(v, 0)
	if why != "" {
		return nil, why
	}
	return func() { s.lat.threshold.Store(n) }, ""
}

func getLatencyTracking(s *Server) string { return yesNo(s.lat.tracking.Load()) }

func setLatencyTracking(s *Server, v string) (func(), string) {
	switch strings.ToLower(v) {
	case "yes":
		return func() { s.lat.tracking.Store(true) }, ""
	case "no":
		return func() { s.lat.tracking.Store(false) }, ""
	}
	return nil, "argument must be 'yes' or 'no'"
}

func getLatencyPercentiles(s *Server) string {
	s.lat.mu.Lock()
	defer s.lat.mu.Unlock()
	out := make([]string, len(s.lat.percentiles))
	for i, p := range s.lat.percentiles {
		out[i] = formatPercentile(p)
	}
	return strings.Join(out, " ")
}

func setLatencyPercentiles(s *Server, v string) (func(), string) {
	var ps []float64
	for _, f := range strings.Fields(v) {
		p, err := strconv.ParseFloat(f, 64)
		if err != nil || math.IsNaN(p) {
			return nil, "Invalid latency-tracking-info-percentiles parameters"
		}
		if p < 0 || p > 100 {
			return nil, "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]"
		}
		ps = append(ps, p)
	}
	return func() {
		s.lat.mu.Lock()
		s.lat.percentiles = ps
		s.lat.mu.Unlock()
	}, ""
}

func getSlowlogSlowerThan(s *Server) string { return strconv.FormatInt(s.slow.threshold.Load(), 10) }

func setSlowlogSlowerThan(s *Server, v string) (func(), string) {
	n, why := parseConfigInt(v, -1)
	if why != "" {
		return nil, why
	}
	return func() { s.slow.threshold.Store(n) }, ""
}

func getSlowlogMaxLen(s *Server) string { return strconv.FormatInt(s.slow.maxLen.Load(), 10) }

func setSlowlogMaxLen(s *Server, v string) (func(), string) {
	n, why := parseConfigInt(v, 0)
	if why != "" {
		return nil, why
	}
	return func() { s.slow.maxLen.Store(n) }, ""
}

// parseConfigInt parses a Redis integer parameter from lo to LLONG_MAX.
func parseConfigInt(v string, lo int64) (int64, string) {
	n, ok := redisnum.ParseInt([]byte(v))
	if !ok {
		return 0, "argument couldn't be parsed into an integer"
	}
	if n < lo {
		return 0, "argument must be between " + strconv.FormatInt(lo, 10) + " and 9223372036854775807 inclusive"
	}
	return n, ""
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

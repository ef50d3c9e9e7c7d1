package resp

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kvorum/kvorum/internal/reply"
)

// The LATENCY command (latency.go keeps what it reports).

func latencyCommand() *command {
	flags := []string{"admin", "noscript", "loading", "stale"}
	acl := []string{"@admin", "@slow", "@dangerous"}
	special := []string{"nondeterministic_output", "request_policy:all_nodes", "response_policy:special"}
	sub := func(name string, arity int, summary string, h func(c *conn, args [][]byte) reply.Reply) *command {
		sc := connCmd("latency|"+name, arity, flags, acl, "2.8.13", summary, h)
		sc.tips = special
		return sc
	}
	lat := connCmd("latency", -2, nil, []string{"@slow"}, "2.8.13", "A container for latency diagnostics commands", nil)
	lat.subs = []*command{
		sub("doctor", 2, "Returns a human-readable latency analysis report", latencyDoctor),
		sub("graph", 3, "Returns a latency graph for an event", latencyGraph),
		sub("history", 3, "Returns timestamp-latency samples for an event", latencyHistory),
		sub("latest", 2, "Returns the latest latency samples for all events", latencyLatest),
		sub("reset", -2, "Resets the latency data for one or more events", latencyReset),
		sub("histogram", -2, "Returns the cumulative distribution of latencies of a subset or all commands", latencyHistogram),
		connCmd("latency|help", 2, []string{"loading", "stale"}, []string{"@slow"}, "2.8.13", "Returns helpful text about the different subcommands", latencyHelp),
	}
	lat.subs[4].tips = []string{"request_policy:all_nodes", "response_policy:all_succeeded"}
	lat.subs[5].since = "7.0.0"
	lat.handler = containerHandler(lat)
	lat.spec.Group = "server"
	for _, sc := range lat.subs {
		sc.spec.Group = "server"
	}
	return lat
}

// latencyLatest: per event, its name, the time and latency of its latest
// sample, and its all-time high (by event name).
func latencyLatest(c *conn, args [][]byte) reply.Reply {
	m := &c.s.lat
	m.mu.Lock()
	defer m.mu.Unlock()
	names := make([]string, 0, len(m.events))
	for name := range m.events {
		names = append(names, name)
	}
	slices.Sort(names)
	out := make([]reply.Reply, len(names))
	for i, name := range names {
		ts := m.events[name]
		last := ts.samples[(ts.idx+latencyTSLen-1)%latencyTSLen]
		out[i] = reply.Array(reply.BulkString(name), reply.Int(last.unix), reply.Int(last.ms), reply.Int(ts.max))
	}
	return reply.Array(out...)
}

func latencyHistory(c *conn, args [][]byte) reply.Reply {
	m := &c.s.lat
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []reply.Reply{}
	if ts := m.events[string(args[2])]; ts != nil {
		ts.each(func(s latencySample) {
			out = append(out, reply.Array(reply.Int(s.unix), reply.Int(s.ms)))
		})
	}
	return reply.Array(out...)
}

// latencyReset forgets the events named, or all: the count forgotten.
func latencyReset(c *conn, args [][]byte) reply.Reply {
	m := &c.s.lat
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	if len(args) == 2 {
		n = len(m.events)
		m.events = nil
	}
	for _, a := range args[2:] {
		if _, ok := m.events[string(a)]; ok {
			delete(m.events, string(a))
			n++
		}
	}
	return reply.Int(int64(n))
}

// latencyHistogram: every command with samples, or those named (a
// container names its subcommands too), each with its calls and
// cumulative histogram.
func latencyHistogram(c *conn, args [][]byte) reply.Reply {
	var cmds []*command
	if len(args) == 2 {
		cmds = c.s.histCommands()
	} else {
		for _, a := range args[2:] {
			if cmd := c.s.find(a); cmd != nil {
				cmds = append(cmds, cmd)
				cmds = append(cmds, cmd.subs...)
			}
		}
	}
	var out []reply.Reply
	for _, cmd := range cmds {
		if counts, total := cmd.stats.hist.counts(); total > 0 {
			out = append(out, reply.BulkString(cmd.spec.Name), cmd.stats.hist.cdfReply(counts, total))
		}
	}
	return reply.Map(out...)
}

func latencyGraph(c *conn, args [][]byte) reply.Reply {
	m := &c.s.lat
	m.mu.Lock()
	defer m.mu.Unlock()
	event := string(args[2])
	ts := m.events[event]
	if ts == nil {
		return reply.Error("ERR No samples available for event '" + event + "'")
	}
	return reply.Verbatim(latencyGraphText(event, ts, time.Now().Unix()))
}

// latencyGraphText is Redis's latencyCommandGenSparkeline: a header, a
// rule, then the samples as a sparkline 4 rows high, 80 columns wide,
// each labelled with how long ago it was taken.
func latencyGraphText(event string, ts *latencySeries, now int64) string {
	var seq sparkline
	var lo, hi int64
	ts.each(func(s latencySample) {
		if len(seq.values) == 0 {
			lo, hi = s.ms, s.ms
		} else {
			lo, hi = min(lo, s.ms), max(hi, s.ms)
		}
		ago := now - s.unix
		var label string
		switch {
		case ago < 60:
			label = strconv.FormatInt(ago, 10) + "s"
		case ago < 3600:
			label = strconv.FormatInt(ago/60, 10) + "m"
		case ago < 86400:
			label = strconv.FormatInt(ago/3600, 10) + "h"
		default:
			label = strconv.FormatInt(ago/86400, 10) + "d"
		}
		seq.add(float64(s.ms), label)
	})
	var b strings.Builder
	fmt.Fprintf(&b, "%s - high %d ms, low %d ms (all time high %d ms)\n", event, hi, lo, ts.max)
	b.WriteString(strings.Repeat("-", 80) + "\n")
	seq.render(&b, 80, 4)
	return b.String()
}

// sparkline is Redis's sparkline.c sequence, rendered with SPARKLINE_FILL.
type sparkline struct {
	values   []float64
	labels   []string
	min, max float64
	labelled int
}

func (s *sparkline) add(v float64, label string) {
	if len(s.values) == 0 {
		s.min, s.max = v, v
	} else if v < s.min {
		s.min = v
	} else if v > s.max {
		s.max = v
	}
	s.values = append(s.values, v)
	s.labels = append(s.labels, label)
	if label != "" {
		s.labelled++
	}
}

func (s *sparkline) render(b *strings.Builder, columns, rows int) {
	for j := 0; j < len(s.values); j += columns {
		if j != 0 {
			b.WriteByte('\n')
		}
		s.renderRange(b, rows, j, min(columns, len(s.values)-j))
	}
}

func (s *sparkline) renderRange(b *strings.Builder, rows, offset, n int) {
	const fill = "_o#"
	const labelMarginTop = 1
	relmax := s.max - s.min
	if relmax == 0 {
		relmax = 1
	}
	steps := len(fill) * rows
	chars := make([]byte, n)
	for row := 0; ; row++ {
		loop := false
		for j := range chars {
			chars[j] = ' '
		}
		for j := range n {
			relval := s.values[j+offset] - s.min
			step := int(float64(int(relval*float64(steps))) / relmax)
			step = max(0, min(step, steps-1))
			if row < rows {
				loop = true
				if idx := step - (rows-row-1)*len(fill); idx >= 0 && idx < len(fill) {
					chars[j] = fill[idx]
				} else if idx >= len(fill) {
					chars[j] = '|'
				}
				continue
			}
			if s.labelled > 0 && row-rows < labelMarginTop {
				loop = true
				break
			}
			if label := s.labels[j+offset]; label != "" {
				if at := row - rows - labelMarginTop; len(label) > at {
					loop = true
					chars[j] = label[at]
				}
			}
		}
		if !loop {
			return
		}
		b.Write(chars)
		b.WriteByte('\n')
	}
}

// latencyDoctor is a short report in the spirit of Redis's: per event,
// its spikes' count, average, mean deviation, period and worst, then
// advice.
func latencyDoctor(c *conn, args [][]byte) reply.Reply {
	s := c.s
	if s.lat.threshold.Load() == 0 {
		return reply.Verbatim("I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. " +
			"You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it. " +
			"If we weren't in a deep space mission I'd suggest to take a look at https://redis.io/topics/latency-monitor.\n")
	}
	m := &s.lat
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.events) == 0 {
		return reply.Verbatim("Dave, no latency spike was observed during the lifetime of this Redis instance, " +
			"not in the slightest bit. I honestly think you ought to sleep better tonight.\n")
	}
	names := make([]string, 0, len(m.events))
	for name := range m.events {
		names = append(names, name)
	}
	slices.Sort(names)
	var b strings.Builder
	b.WriteString("Dave, I have observed latency spikes in this Redis instance. You don't mind talking about it, do you Dave?\n\n")
	now := time.Now().Unix()
	for i, name := range names {
		ts := m.events[name]
		var n, sum, oldest int64
		ts.each(func(s latencySample) {
			n++
			sum += s.ms
			if oldest == 0 || s.unix < oldest {
				oldest = s.unix
			}
		})
		if n == 0 {
			continue
		}
		avg := sum / n
		period := max(now-oldest, 1)
		var dev int64
		ts.each(func(s latencySample) { dev += max(avg-s.ms, s.ms-avg) })
		fmt.Fprintf(&b, "%d. %s: %d latency spikes (average %dms, mean deviation %dms, period %.2f sec). Worst all time event %dms.\n",
			i+1, name, n, avg, dev/n, float64(period)/float64(n), ts.max)
	}
	b.WriteString("\nI have a few advices for you:\n\n")
	if t := s.slow.threshold.Load(); t < 0 {
		b.WriteString("- Your Slow Log is disabled (slowlog-log-slower-than is negative). Please use 'CONFIG SET slowlog-log-slower-than " +
			strconv.FormatInt(s.lat.threshold.Load()*1000, 10) + "' to see which commands are slow.\n")
	} else if t/1000 > s.lat.threshold.Load() {
		fmt.Fprintf(&b, "- Your current Slow Log configuration only logs events that are slower than your configured latency monitor threshold. Please use 'CONFIG SET slowlog-log-slower-than %d'.\n",
			s.lat.threshold.Load()*1000)
	}
	b.WriteString("- Check your Slow Log to understand what are the commands you are running which are too slow to execute. Please check https://redis.io/commands/slowlog for more information.\n")
	b.WriteString("- kvorum's command time includes its Raft commit: a write waits for a majority of nodes to fsync it. Slow writes point at the disks or the network between the nodes (see INFO replication and the kvorum_raft_* metrics).\n")
	return reply.Verbatim(b.String())
}

func latencyHelp(c *conn, args [][]byte) reply.Reply {
	return helpReply("LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"DOCTOR",
		"    Return a human readable latency analysis report.",
		"GRAPH <event>",
		"    Return an ASCII latency graph for the <event> class.",
		"HISTORY <event>",
		"    Return time-latency samples for the <event> class.",
		"LATEST",
		"    Return the latest latency samples for all events.",
		"RESET [<event> ...]",
		"    Reset latency data of one or more <event> classes.",
		"    (default: reset all data for all event classes)",
		"HISTOGRAM [COMMAND ...]",
		"    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
		"    If no commands are specified then all histograms are replied.",
		"HELP",
		"    Prints this help.")
}

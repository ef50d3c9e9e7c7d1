package kvbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kvorum/kvorum/internal/resp/codec"
)

// The failover benchmark (paper 003, Shrestha: a 3-node cluster measured
// for throughput and latency per second while a node is lost and comes
// back): a constant-rate write load on a 3-node kvorum cluster, the
// leader killed (SIGKILL) and later started again, then a follower; every
// acknowledged write read back at the end. The same run on several
// environments (3 processes on the host, 3 containers) gives their ratio.

// FailoverEnv is a 3-node cluster the benchmark can kill nodes of.
type FailoverEnv interface {
	Name() string
	// Addrs are the nodes' client addresses, as this process reaches them.
	Addrs() []string
	// Kill stops node i (0-based) at once, as a crash would.
	Kill(i int) error
	// Restart starts node i again, with its data.
	Restart(i int) error
}

// FailoverConfig is the load and its schedule.
type FailoverConfig struct {
	Rate      int           // writes per second, all workers together
	Workers   int           // connections, each with one write in flight
	ValueSize int           // bytes per value
	Phase     time.Duration // length of each phase: before, leader down, back, follower down, back
	OpTimeout time.Duration // a write without an answer by then is an error ("timeout")
	// Capacity, if positive, first measures the closed-loop write
	// throughput for that long with Workers clients.
	Capacity time.Duration
	Progress io.Writer
}

// FailoverSecond is one second of the timeline.
type FailoverSecond struct {
	T      int            `json:"t"` // seconds since the load started
	OK     int            `json:"ok"`
	Errors map[string]int `json:"errors,omitempty"`
	P50    float64        `json:"p50_ms"`
	P95    float64        `json:"p95_ms"`
	P99    float64        `json:"p99_ms"`
}

// FailoverEvent is a kill or restart, at seconds since the load started.
type FailoverEvent struct {
	At   float64 `json:"at_s"`
	What string  `json:"what"`
	Node int     `json:"node"` // 1-based
}

// FailoverOutage is what one kill did to the writes.
type FailoverOutage struct {
	What string `json:"what"` // "leader" or "follower"
	// Gap is the longest time without an acknowledged write from one
	// second before the kill to the restart.
	Gap    time.Duration  `json:"gap_ns"`
	Errors map[string]int `json:"errors,omitempty"`
	// P95 of writes acknowledged in the phase before the kill, while the
	// node was down, and after it was back.
	P95Before, P95During, P95After time.Duration
}

// FailoverResult is one environment's run.
type FailoverResult struct {
	Env       string           `json:"env"`
	Capacity  float64          `json:"capacity_ops"` // closed-loop writes/s (0: not measured)
	Rate      int              `json:"rate"`
	Seconds   []FailoverSecond `json:"seconds"`
	Events    []FailoverEvent  `json:"events"`
	Outages   []FailoverOutage `json:"outages"`
	Acked     int              `json:"acked"`
	Lost      int              `json:"lost"` // acknowledged writes not read back
	Errors    map[string]int   `json:"errors"`
	Achieved  float64          `json:"achieved_ops"` // acknowledged writes/s over the whole timeline
	LostFirst []string         `json:"lost_first,omitempty"`
}

// CapacitySettle is the pause between a capacity phase and a timeline.
const CapacitySettle = 5 * time.Second

// foSample is one write's outcome.
type foSample struct {
	sched, done time.Duration // since the load started: when it was due, when it ended
	err         string        // "" if acknowledged
}

// RunFailover runs the capacity measurement (if asked), then the
// timeline, then reads back every acknowledged write.
func RunFailover(ctx context.Context, env FailoverEnv, cfg FailoverConfig) (*FailoverResult, error) {
	prog := cfg.Progress
	if prog == nil {
		prog = io.Discard
	}
	res := &FailoverResult{Env: env.Name(), Rate: cfg.Rate, Errors: map[string]int{}}
	value := make([]byte, cfg.ValueSize)
	for i := range value {
		value[i] = 'a' + byte(i%26)
	}
	if cfg.Capacity > 0 {
		n, err := MeasureCapacity(ctx, env.Addrs(), cfg.Workers, cfg.ValueSize, cfg.Capacity)
		if err != nil {
			return nil, err
		}
		res.Capacity = n
		fmt.Fprintf(prog, "%s: closed-loop capacity %.0f writes/s (%d clients, %v)\n", env.Name(), n, cfg.Workers, cfg.Capacity)
		if res.Rate <= 0 {
			res.Rate = max(1, int(n/2))
		}
		// The storage engine flushes and compacts what the capacity
		// phase wrote: let it, before the timeline's "before" phase.
		select {
		case <-time.After(CapacitySettle):
		case <-ctx.Done():
		}
	}
	if res.Rate <= 0 {
		return nil, errors.New("failover: no rate (give one, or a capacity phase to take half of)")
	}
	// Workers write until stop; the schedule runs here.
	start := time.Now()
	stop := make(chan struct{})
	samples := make([][]foSample, cfg.Workers)
	keys := make([][]string, cfg.Workers)
	var wg sync.WaitGroup
	for w := 0; w < cfg.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			samples[w], keys[w] = foWorker(env, cfg, res.Rate, w, start, stop, value)
		}()
	}
	at := func() float64 { return time.Since(start).Seconds() }
	sleep := func(d time.Duration) {
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
	}
	var schedErr error
	event := func(what string, node int, do func(int) error) {
		if schedErr != nil || ctx.Err() != nil {
			return
		}
		res.Events = append(res.Events, FailoverEvent{At: at(), What: what, Node: node + 1})
		fmt.Fprintf(prog, "%s: %5.1fs %s node %d\n", env.Name(), at(), what, node+1)
		if err := do(node); err != nil {
			schedErr = fmt.Errorf("%s node %d: %w", what, node+1, err)
		}
	}
	sleep(cfg.Phase)
	leader, err := foLeader(ctx, env.Addrs())
	if err != nil {
		schedErr = err
	}
	event("kill leader", leader, env.Kill)
	sleep(cfg.Phase)
	event("restart leader", leader, env.Restart)
	sleep(cfg.Phase)
	newLeader, err := foLeader(ctx, env.Addrs())
	if err != nil && schedErr == nil {
		schedErr = err
	}
	// Another node than the one killed before, if leadership allows.
	follower := 3 - leader - newLeader
	if newLeader == leader {
		follower = (leader + 1) % 3
	}
	event("kill follower", follower, env.Kill)
	sleep(cfg.Phase)
	event("restart follower", follower, env.Restart)
	sleep(cfg.Phase)
	close(stop)
	wg.Wait()
	total := time.Since(start)
	if schedErr != nil {
		return res, schedErr
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	var all []foSample
	var acked []string
	for w := range samples {
		all = append(all, samples[w]...)
		acked = append(acked, keys[w]...)
	}
	res.summarize(all, total)
	res.Acked = len(acked)
	fmt.Fprintf(prog, "%s: reading back %d acknowledged writes\n", env.Name(), len(acked))
	lost, err := foReadBack(ctx, env.Addrs(), acked, value)
	if err != nil {
		return res, err
	}
	res.Lost = len(lost)
	res.LostFirst = lost[:min(len(lost), 10)]
	return res, nil
}

// foWorker writes at rate/workers per second, each write due at its slot
// (latency counts from the slot, so a stall shows in full), until stop.
// On a broken connection it moves to the next node.
func foWorker(env FailoverEnv, cfg FailoverConfig, rate, w int, start time.Time, stop chan struct{}, value []byte) (out []foSample, acked []string) {
	addrs := env.Addrs()
	node := w % len(addrs)
	interval := time.Duration(float64(time.Second) * float64(cfg.Workers) / float64(rate))
	next := time.Duration(w) * interval / time.Duration(cfg.Workers)
	var c *foConn
	defer func() {
		if c != nil {
			c.nc.Close()
		}
	}()
	for seq := 0; ; seq++ {
		if wait := next - time.Since(start); wait > 0 {
			select {
			case <-stop:
				return
			case <-time.After(wait):
			}
		} else {
			select {
			case <-stop:
				return
			default:
			}
		}
		key := fmt.Sprintf("fo:%d:%d", w, seq)
		s := foSample{sched: next}
		next += interval
		if c == nil {
			var err error
			addrs = env.Addrs() // a restarted container may have a new address
			if c, err = foDial(addrs[node], cfg.OpTimeout); err != nil {
				s.done, s.err = time.Since(start), foClass(err)
				out = append(out, s)
				node = (node + 1) % len(addrs)
				continue
			}
		}
		err := c.set(key, value, cfg.OpTimeout)
		s.done = time.Since(start)
		if err == nil {
			acked = append(acked, key)
		} else {
			s.err = foClass(err)
			var re replyError
			if !errors.As(err, &re) {
				c.nc.Close()
				c = nil
				node = (node + 1) % len(addrs)
			}
		}
		out = append(out, s)
	}
}

// foClass names an error for the tables: an error reply's first word
// (CLUSTERDOWN, UNCERTAIN, ...), or what happened to the connection.
func foClass(err error) string {
	var re replyError
	if errors.As(err, &re) {
		word, _, _ := strings.Cut(string(re), " ")
		return word
	}
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, io.EOF) || strings.Contains(err.Error(), "reset"):
		return "connection closed"
	case strings.Contains(err.Error(), "refused"):
		return "connection refused"
	}
	return "connection error"
}

type foConn struct {
	nc  net.Conn
	buf []byte
	rd  *respConn
}

func foDial(addr string, timeout time.Duration) (*foConn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	rc, err := dialRESP(ctx, addr, nil)
	if err != nil {
		return nil, err
	}
	return &foConn{nc: rc.nc, rd: rc}, nil
}

func (c *foConn) set(key string, value []byte, timeout time.Duration) error {
	c.buf = codec.AppendCommand(c.buf[:0], []byte("SET"), []byte(key), value)
	_ = c.nc.SetDeadline(time.Now().Add(timeout))
	if _, err := c.nc.Write(c.buf); err != nil {
		return err
	}
	_, err := c.rd.readReply()
	return err
}

// foLeader returns the index of the node whose INFO says raft_role:leader.
func foLeader(ctx context.Context, addrs []string) (int, error) {
	a, err := kvorumLeader(ctx, addrs)
	if err != nil {
		return 0, err
	}
	return slices.Index(addrs, a), nil
}

// MeasureCapacity is the closed-loop SET throughput, in writes per
// second over d, of workers clients spread over the nodes at addrs.
func MeasureCapacity(ctx context.Context, addrs []string, workers, valueSize int, d time.Duration) (float64, error) {
	value := make([]byte, valueSize)
	for i := range value {
		value[i] = 'a' + byte(i%26)
	}
	var mu sync.Mutex
	var total int
	var firstErr error
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := foDial(addrs[w%len(addrs)], 5*time.Second)
			if err != nil {
				mu.Lock()
				firstErr = cmpErr(firstErr, err)
				mu.Unlock()
				return
			}
			defer c.nc.Close()
			n := 0
			for ; time.Now().Before(deadline) && ctx.Err() == nil; n++ {
				if err := c.set(fmt.Sprintf("cap:%d:%d", w, n), value, 5*time.Second); err != nil {
					mu.Lock()
					firstErr = cmpErr(firstErr, err)
					mu.Unlock()
					break
				}
			}
			mu.Lock()
			total += n
			mu.Unlock()
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return 0, fmt.Errorf("capacity phase: %w", firstErr)
	}
	return float64(total) / d.Seconds(), nil
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// foReadBack GETs every acknowledged key (pipelined, from the first node
// that answers) and returns those missing or wrong.
func foReadBack(ctx context.Context, addrs []string, keys []string, value []byte) (lost []string, err error) {
	var c *respConn
	deadline := time.Now().Add(30 * time.Second)
	for c == nil {
		for _, a := range addrs {
			if c, err = dialRESP(ctx, a, nil); err == nil {
				// A node just restarted may not be ready: wait for reads.
				if err = c.probe(); err == nil {
					break
				}
				c.close()
				c = nil
			}
		}
		if c == nil {
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("read back: no node answers: %v", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	defer c.close()
	var buf []byte
	for i := 0; i < len(keys); i += 500 {
		batch := keys[i:min(i+500, len(keys))]
		buf = buf[:0]
		for _, k := range batch {
			buf = codec.AppendCommand(buf, []byte("GET"), []byte(k))
		}
		_ = c.nc.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := c.nc.Write(buf); err != nil {
			return nil, err
		}
		for _, k := range batch {
			v, err := c.readString()
			if err != nil {
				return nil, fmt.Errorf("read back %s: %w", k, err)
			}
			if v != string(value) {
				lost = append(lost, k)
			}
		}
	}
	return lost, nil
}

// summarize fills the timeline and the outages from the samples.
func (r *FailoverResult) summarize(all []foSample, total time.Duration) {
	secs := int(total/time.Second) + 1
	hists := make([]*Histogram, secs)
	r.Seconds = make([]FailoverSecond, secs)
	for i := range r.Seconds {
		r.Seconds[i] = FailoverSecond{T: i, Errors: map[string]int{}}
		hists[i] = NewHistogram()
	}
	var okDone []time.Duration
	for _, s := range all {
		i := min(int(s.done/time.Second), secs-1)
		if s.err != "" {
			r.Seconds[i].Errors[s.err]++
			r.Errors[s.err]++
			continue
		}
		r.Seconds[i].OK++
		hists[i].Record(s.done - s.sched)
		okDone = append(okDone, s.done)
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	for i, h := range hists {
		if h.Count() > 0 {
			r.Seconds[i].P50, r.Seconds[i].P95, r.Seconds[i].P99 = ms(h.Quantile(0.5)), ms(h.Quantile(0.95)), ms(h.Quantile(0.99))
		}
	}
	if full := int(total / time.Second); full > 0 && full < secs {
		// The last, partial second would read as a drop.
		r.Seconds = r.Seconds[:full]
	}
	r.Achieved = float64(len(okDone)) / total.Seconds()
	slices.Sort(okDone)
	p95 := func(from, to time.Duration) time.Duration {
		h := NewHistogram()
		for _, s := range all {
			if s.err == "" && s.done >= from && s.done < to {
				h.Record(s.done - s.sched)
			}
		}
		return h.Quantile(0.95)
	}
	// Events come in pairs: kill at k, restart at b.
	for i := 0; i+1 < len(r.Events); i += 2 {
		k := time.Duration(r.Events[i].At * float64(time.Second))
		b := time.Duration(r.Events[i+1].At * float64(time.Second))
		o := FailoverOutage{What: strings.TrimPrefix(r.Events[i].What, "kill "), Errors: map[string]int{}}
		prev := k - time.Second
		for _, d := range okDone {
			if d < prev {
				continue
			}
			if d > b {
				break
			}
			o.Gap = max(o.Gap, d-prev)
			prev = d
		}
		for _, s := range all {
			if s.err != "" && s.done >= k && s.done < b+time.Second {
				o.Errors[s.err]++
			}
		}
		phase := b - k
		o.P95Before, o.P95During, o.P95After = p95(k-phase, k), p95(k, b), p95(b, b+phase)
		r.Outages = append(r.Outages, o)
	}
}

// probe sends a GET and reads its answer.
func (c *respConn) probe() error {
	_ = c.nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.nc.Write(codec.AppendCommand(nil, []byte("GET"), []byte("fo:probe"))); err != nil {
		return err
	}
	_, err := c.readString()
	return err
}

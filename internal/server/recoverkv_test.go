package server

// RecoverKV's partitioning tests (section 4.1.6 of the RecoverKV paper)
// on an in-process 3-node cluster, whose shared transport.Partitioner cuts
// real links between the nodes. The other RecoverKV categories run against
// real processes in tests/process (TestRecoverKV). Clients are go-redis
// with MaxRetries -1: every outcome seen is the server's.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// rkvRequestTimeout is the RequestTimeout of the nodes in these tests: a
// node that cannot reach a majority must answer within it (plus slack).
const rkvRequestTimeout = time.Second

// TestRecoverKVPartitions: a node cut off from the majority refuses reads
// and writes (CLUSTERDOWN, never a stale value) while the majority serves;
// after healing, it serves the latest values, also after a restart while
// isolated; an isolated leader is replaced and acknowledges nothing it
// cannot commit; a complete partition refuses everywhere; a one-way cut
// neither disrupts the leader nor yields stale reads.
func TestRecoverKVPartitions(t *testing.T) {
	t.Run("Partitioning", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			run  func(*testing.T)
		}{
			{"minority-side", rkvMinoritySide},
			{"heal", rkvHeal},
			{"leader-isolated", rkvLeaderIsolated},
			{"complete", rkvCompletePartition},
			{"one-way", rkvOneWay},
		} {
			t.Run(tc.name, func(t *testing.T) {
				start := time.Now()
				tc.run(t)
				t.Logf("Partitioning/%s: %v", tc.name, time.Since(start).Round(time.Millisecond))
			})
		}
	})
}

func newRKVCluster(t *testing.T) *testCluster {
	return newClusterWith(t, 3, func(_ uint64, cfg *Config) { cfg.RequestTimeout = rkvRequestTimeout })
}

// rkvCode is the code of a Redis error reply ("CLUSTERDOWN", ...), "" if
// err is nil, redis.Nil or not an error reply.
func rkvCode(err error) string {
	var re redis.Error
	if err == nil || errors.Is(err, redis.Nil) || !errors.As(err, &re) {
		return ""
	}
	code, _, _ := strings.Cut(err.Error(), " ")
	return code
}

// rkvOp is one command sent to a node that must refuse it.
type rkvOp struct {
	what  string
	write string // the key it writes, "" for a read
	do    func(context.Context) error
}

// rkvOps are reads and writes of keys through cl (writes use fresh keys
// named after tag).
func rkvOps(cl *redis.Client, tag string, readKeys ...string) []rkvOp {
	k1, k2 := "refused:"+tag+":set", "refused:"+tag+":incr"
	return []rkvOp{
		{"SET " + k1, k1, func(ctx context.Context) error { return cl.Set(ctx, k1, "x", 0).Err() }},
		{"INCR " + k2, k2, func(ctx context.Context) error { return cl.Incr(ctx, k2).Err() }},
		{"GET " + readKeys[0], "", func(ctx context.Context) error { return cl.Get(ctx, readKeys[0]).Err() }},
		{"MGET", "", func(ctx context.Context) error { return cl.MGet(ctx, readKeys...).Err() }},
		{"EXISTS " + readKeys[0], "", func(ctx context.Context) error { return cl.Exists(ctx, readKeys[0]).Err() }},
	}
}

// expectRefused runs ops concurrently and requires each to fail with
// CLUSTERDOWN within the request timeout (plus slack): never a value,
// never a hang. Returns the keys of the writes refused (certainly not
// applied: they must never appear).
func expectRefused(t *testing.T, who string, ops []rkvOp) []string {
	t.Helper()
	type outcome struct {
		err  error
		took time.Duration
	}
	outs := make([]outcome, len(ops))
	var wg sync.WaitGroup
	for i, op := range ops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := time.Now()
			err := op.do(ctx)
			outs[i] = outcome{err, time.Since(start)}
		}()
	}
	wg.Wait()
	var refused []string
	var slowest time.Duration
	down := 0
	for i, op := range ops {
		slowest = max(slowest, outs[i].took)
		o := outs[i]
		if rkvCode(o.err) == "CLUSTERDOWN" {
			down++
		}
		if rkvCode(o.err) != "CLUSTERDOWN" {
			t.Errorf("%s via %s: %v after %v, want CLUSTERDOWN", op.what, who, o.err, o.took.Round(time.Millisecond))
		} else if op.write != "" {
			refused = append(refused, op.write)
		}
		if o.took > rkvRequestTimeout+time.Second {
			t.Errorf("%s via %s took %v, request timeout %v", op.what, who, o.took, rkvRequestTimeout)
		}
	}
	t.Logf("via %s: %d of %d commands answered CLUSTERDOWN, the slowest after %v", who, down, len(ops), slowest.Round(time.Millisecond))
	return refused
}

// rkvWrite writes kv (key, value pairs) through cl and records them in
// model; each write must succeed.
func rkvWrite(t *testing.T, ctx context.Context, cl *redis.Client, via uint64, model map[string]string, kv ...string) {
	t.Helper()
	for i := 0; i < len(kv); i += 2 {
		if err := cl.Set(ctx, kv[i], kv[i+1], 0).Err(); err != nil {
			t.Fatalf("SET %s via node %d: %v", kv[i], via, err)
		}
		model[kv[i]] = kv[i+1]
	}
}

// rkvRead reads keys through cl in one pipeline: the values of the reads
// that succeeded (absent = "<nil>") and the first other error.
func rkvRead(ctx context.Context, cl *redis.Client, keys []string) (map[string]string, error) {
	pipe := cl.Pipeline()
	cmds := make([]*redis.StringCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.Get(ctx, k)
	}
	_, _ = pipe.Exec(ctx)
	out := map[string]string{}
	var first error
	for i, k := range keys {
		v, err := cmds[i].Result()
		switch {
		case errors.Is(err, redis.Nil):
			out[k] = "<nil>"
		case err != nil:
			if first == nil {
				first = err
			}
		default:
			out[k] = v
		}
	}
	return out, first
}

// rkvServes polls reads of every key in want through node id until they
// succeed, and requires exactly want: a successful read of any other
// value (the old one) fails at once. Only CLUSTERDOWN is acceptable while
// waiting. Returns how long it took.
func rkvServes(t *testing.T, c *testCluster, id uint64, want map[string]string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	cl := c.client(id)
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	var lastErr error
	for time.Since(start) < within {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		got, err := rkvRead(ctx, cl, keys)
		cancel()
		for k, v := range got { // every read that succeeded, even if others failed
			if v != want[k] {
				t.Fatalf("node %d, %v after healing: %s = %q, want the latest %q (stale read)",
					id, time.Since(start).Round(time.Millisecond), k, v, want[k])
			}
		}
		if err == nil {
			return time.Since(start)
		}
		if code := rkvCode(err); code != "CLUSTERDOWN" {
			t.Fatalf("node %d: read failed with %v; only CLUSTERDOWN is expected while it catches up", id, err)
		}
		lastErr = err
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("node %d did not serve within %v: %v", id, within, lastErr)
	return 0
}

// rkvAbsent requires that none of keys exists, read through node id.
func rkvAbsent(t *testing.T, ctx context.Context, c *testCluster, id uint64, keys []string) {
	t.Helper()
	if len(keys) == 0 {
		return
	}
	if n, err := c.client(id).Exists(ctx, keys...).Result(); err != nil || n != 0 {
		t.Errorf("writes refused with CLUSTERDOWN %q: EXISTS via node %d = %d, %v; want 0 (never applied)", keys, id, n, err)
	}
}

// leaderAmong waits until the nodes ids agree on a leader among them.
func (c *testCluster) leaderAmong(ids []uint64, within time.Duration) uint64 {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		var lead uint64
		agree := true
		for _, id := range ids {
			l := c.node(id).Status().Leader
			if l == 0 || (lead != 0 && l != lead) {
				agree = false
			}
			lead = l
		}
		for _, id := range ids {
			if agree && id == lead {
				return lead
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.t.Fatalf("nodes %v did not agree on a leader among them within %v", ids, within)
	return 0
}

// waitNoLeader waits until node id knows no leader (it stepped down, or
// its election timer fired).
func (c *testCluster) waitNoLeader(id uint64, within time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for c.node(id).Status().Leader != 0 {
		if time.Now().After(deadline) {
			c.t.Fatalf("node %d still reports leader %d %v after it was cut off", id, c.node(id).Status().Leader, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func rkvKeys(prefix string, n int) []string {
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, fmt.Sprintf("%s:%d", prefix, i))
	}
	return out
}

// rkvModelWrite writes value<i> to every key through cl.
func rkvModelWrite(t *testing.T, ctx context.Context, cl *redis.Client, via uint64, model map[string]string, keys []string, value string) {
	t.Helper()
	var kv []string
	for i, k := range keys {
		kv = append(kv, k, fmt.Sprintf("%s-%d", value, i))
	}
	rkvWrite(t, ctx, cl, via, model, kv...)
}

// rkvSetup starts a scenario: a cluster, a context for the scenario and the
// cluster's leader; n keys (named after prefix) are written "v1" through the
// leader and recorded in model.
func rkvSetup(t *testing.T, prefix string, n int) (c *testCluster, ctx context.Context, lead uint64, keys []string, model map[string]string) {
	t.Helper()
	c = newRKVCluster(t)
	ctx = testCtx(t, 30*time.Second)
	lead = c.waitLeader()
	keys = rkvKeys(prefix, n)
	model = map[string]string{}
	rkvModelWrite(t, ctx, c.client(lead), lead, model, keys, "v1")
	return c, ctx, lead, keys, model
}

// rkvHealed heals the network and checks that node id serves the latest
// values, within a bounded wait, and that none of the refused writes
// appeared.
func rkvHealed(t *testing.T, ctx context.Context, c *testCluster, id uint64, model map[string]string, refused []string) {
	t.Helper()
	c.net.Heal()
	took := rkvServes(t, c, id, model, 5*time.Second)
	t.Logf("healed: node %d served the latest values after %v", id, took.Round(time.Millisecond))
	rkvAbsent(t, ctx, c, id, refused)
}

// rkvMinoritySide: a follower is isolated; the majority writes new values
// and keeps serving reads and writes; the isolated node's clients get
// CLUSTERDOWN for reads (not the old values) and writes; after healing
// the node serves the new values and the refused writes never appear.
func rkvMinoritySide(t *testing.T) {
	c, ctx, lead, keys, model := rkvSetup(t, "ms", 10)
	fs := followersOf(lead, 3)
	iso, maj := fs[0], fs[1]
	rkvServes(t, c, iso, model, 5*time.Second) // the isolated node has v1

	c.net.Isolate(iso)
	t.Logf("isolated follower %d; leader %d", iso, lead)
	rkvModelWrite(t, ctx, c.client(maj), maj, model, keys, "v2")
	refused := expectRefused(t, fmt.Sprintf("isolated node %d", iso), rkvOps(c.client(iso), "ms", keys...))
	// The majority keeps serving.
	for _, id := range []uint64{lead, maj} {
		rkvServes(t, c, id, model, time.Second)
	}
	rkvModelWrite(t, ctx, c.client(lead), lead, model, keys[:5], "v3")
	rkvServes(t, c, maj, model, time.Second)
	if l := c.node(lead).Status().Leader; l != lead {
		t.Errorf("the majority's leader changed from %d to %d while a follower was isolated", lead, l)
	}

	rkvHealed(t, ctx, c, iso, model, refused)
	c.waitSameState(5 * time.Second)
}

// rkvHeal: a follower is isolated, the majority writes new values, the
// isolated node is also restarted (it missed the updates and cannot fetch
// them): it refuses reads rather than serve its old values. The majority
// writes more; after healing, within a bounded wait, reads through that
// node return the latest values — never the old ones.
func rkvHeal(t *testing.T) {
	c, ctx, lead, keys, model := rkvSetup(t, "heal", 20)
	fs := followersOf(lead, 3)
	iso, maj := fs[0], fs[1]
	rkvServes(t, c, iso, model, 5*time.Second)

	c.net.Isolate(iso)
	rkvModelWrite(t, ctx, c.client(maj), maj, model, keys, "v2")
	c.stop(iso)
	c.start(iso)
	t.Logf("node %d isolated, missed updates, restarted while isolated", iso)
	refused := expectRefused(t, fmt.Sprintf("restarted isolated node %d", iso), rkvOps(c.client(iso), "heal", keys...))
	rkvModelWrite(t, ctx, c.client(lead), lead, model, keys[10:], "v3")

	rkvHealed(t, ctx, c, iso, model, refused)
	rkvWrite(t, ctx, c.client(iso), iso, model, "heal:after", "ok")
	c.waitLeader()
	for id := uint64(1); id <= 3; id++ {
		rkvServes(t, c, id, model, time.Second)
	}
	c.waitSameState(5 * time.Second)
}

// rkvLeaderIsolated: the leader is isolated. A write sent to it at once
// is never acknowledged unless it later turns out applied; the others
// elect a new leader and accept writes; once the old leader has stepped
// down it refuses reads and writes with CLUSTERDOWN; after healing its
// clients see every write the majority acknowledged.
func rkvLeaderIsolated(t *testing.T) {
	c := newRKVCluster(t)
	ctx := testCtx(t, 30*time.Second)
	old := c.waitLeader()
	others := followersOf(old, 3)
	keys := rkvKeys("li", 10)
	model := map[string]string{}
	oc := c.client(old)
	rkvModelWrite(t, ctx, oc, old, model, keys, "v1")

	c.net.Isolate(old)
	isolated := time.Now()
	type result struct {
		err  error
		took time.Duration
	}
	early := make(chan result, 1)
	go func() {
		start := time.Now()
		err := oc.Set(context.Background(), "li:early", "x", 0).Err()
		early <- result{err, time.Since(start)}
	}()
	lead := c.leaderAmong(others, 5*time.Second)
	t.Logf("isolated leader %d; node %d elected after %v", old, lead, time.Since(isolated).Round(time.Millisecond))
	for i, id := range others {
		rkvModelWrite(t, ctx, c.client(id), id, model, keys[i*5:i*5+5], fmt.Sprintf("v2-via-%d", id))
	}
	c.waitNoLeader(old, 5*time.Second)
	refused := expectRefused(t, fmt.Sprintf("old leader %d", old), rkvOps(oc, "li", keys...))

	r := <-early
	switch code := rkvCode(r.err); {
	case r.err == nil:
		t.Logf("the write sent to the isolated leader was acknowledged after %v: it must be readable after healing", r.took)
		model["li:early"] = "x"
	case code == "CLUSTERDOWN":
		refused = append(refused, "li:early")
	case code == "UNCERTAIN":
	default:
		t.Errorf("write sent to the isolated leader: %v, want CLUSTERDOWN or UNCERTAIN", r.err)
	}
	t.Logf("write sent to the isolated leader right away: %v after %v", r.err, r.took.Round(time.Millisecond))
	if r.took > rkvRequestTimeout+time.Second {
		t.Errorf("write sent to the isolated leader took %v, request timeout %v", r.took, rkvRequestTimeout)
	}

	c.net.Heal()
	took := rkvServes(t, c, old, model, 5*time.Second)
	t.Logf("healed: old leader %d served every write the majority acknowledged after %v", old, took.Round(time.Millisecond))
	rkvAbsent(t, ctx, c, old, refused)
	if rkvCode(r.err) == "UNCERTAIN" {
		n, _ := c.client(old).Exists(ctx, "li:early").Result()
		t.Logf("the UNCERTAIN write exists after healing: %v (either is allowed)", n == 1)
	}
	rkvWrite(t, ctx, oc, old, model, "li:after", "ok")
	for _, id := range others {
		rkvServes(t, c, id, model, time.Second)
	}
	c.waitSameState(5 * time.Second)
}

// rkvCompletePartition: every link is cut (RecoverKV's "complete
// partitioning"). Once the leader has stepped down no node can serve:
// each refuses reads and writes with CLUSTERDOWN, including a node
// restarted during the partition. After healing everything works, the
// data intact and no refused write applied.
func rkvCompletePartition(t *testing.T) {
	c, ctx, lead, keys, model := rkvSetup(t, "cp", 10)
	for id := uint64(1); id <= 3; id++ {
		rkvServes(t, c, id, model, 5*time.Second)
	}
	c.net.Cut(1, 2)
	c.net.Cut(1, 3)
	c.net.Cut(2, 3)
	for id := uint64(1); id <= 3; id++ {
		c.waitNoLeader(id, 5*time.Second)
	}
	restarted := followersOf(lead, 3)[0]
	c.stop(restarted)
	c.start(restarted)
	var refused []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	for id := uint64(1); id <= 3; id++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			who := fmt.Sprintf("node %d", id)
			if id == restarted {
				who += " (restarted during the partition)"
			}
			r := expectRefused(t, who, rkvOps(c.client(id), fmt.Sprintf("cp%d", id), keys...))
			mu.Lock()
			refused = append(refused, r...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	c.net.Heal()
	c.waitLeader()
	for id := uint64(1); id <= 3; id++ {
		rkvServes(t, c, id, model, 5*time.Second)
		rkvAbsent(t, ctx, c, id, refused)
	}
	rkvModelWrite(t, ctx, c.client(restarted), restarted, model, keys, "v2")
	for id := uint64(1); id <= 3; id++ {
		rkvServes(t, c, id, model, time.Second)
	}
	c.waitSameState(5 * time.Second)
}

// rkvOneWay: the link from the leader to one follower is cut (the
// follower can still send). The follower hears no heartbeats: its reads
// and writes are refused, never answered with old values, and its
// election attempts do not disrupt the leader (PreVote, CheckQuorum).
// After healing it serves the latest values.
func rkvOneWay(t *testing.T) {
	c, ctx, lead, keys, model := rkvSetup(t, "ow", 10)
	fs := followersOf(lead, 3)
	f, maj := fs[0], fs[1]
	rkvServes(t, c, f, model, 5*time.Second)
	term := c.node(lead).Status().Term

	c.net.CutOneWay(lead, f)
	rkvModelWrite(t, ctx, c.client(maj), maj, model, keys, "v2")
	c.waitNoLeader(f, 5*time.Second)
	refused := expectRefused(t, fmt.Sprintf("node %d (deaf to the leader)", f), rkvOps(c.client(f), "ow", keys...))
	rkvModelWrite(t, ctx, c.client(lead), lead, model, keys[:5], "v3")
	if st := c.node(lead).Status(); st.Leader != lead || st.Term != term {
		t.Errorf("the leader was disrupted by a node that cannot hear it: leader %d term %d, was %d term %d", st.Leader, st.Term, lead, term)
	}

	rkvHealed(t, ctx, c, f, model, refused)
	c.waitSameState(5 * time.Second)
}

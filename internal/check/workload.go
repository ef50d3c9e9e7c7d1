package check

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// WorkloadConfig configures RunWorkload: randomized concurrent clients over
// the Redis protocol.
type WorkloadConfig struct {
	Addrs     []string      // RESP addresses of the nodes; client i starts on Addrs[i%len(Addrs)] and moves to the next address after a connection-level error
	Clients   int           // concurrent clients (default 4)
	Keys      int           // keys per family (default 3): registers "r:<n>", counters "c:<n>", lists "l:<n>"
	Seed      int64         // the op sequence of each client is drawn from rand seeded with Seed and the client index
	MaxOps    int           // per client; 0 = until ctx ends
	OpTimeout time.Duration // per operation (default 2s); a timeout is Unknown
	Durable   bool          // also write unique keys "d:<client>:<n>" (SET, value = key) and remember which were acknowledged
	Prefix    string        // prepended to every key (lets several runs share one cluster)
}

// WorkloadResult is what RunWorkload learned was acknowledged, for
// VerifyDurable.
type WorkloadResult struct {
	AckedDurable []string            // durability keys whose SET was acknowledged OK
	AckedAppends map[string][]string // list key -> values whose RPUSH was acknowledged (per client in acknowledgment order)
}

// The op mix, in percent (durability SETs come on top when Durable).
var opWeights = []struct {
	kind   OpKind
	weight int
}{
	{OpGet, 25}, {OpSet, 15}, {OpSetNX, 5}, {OpGetSet, 5}, {OpDel, 5},
	{OpIncr, 10}, {OpCAS, 10}, {OpAppend, 15}, {OpRead, 10},
}

const durableWeight = 5

// refusedPause is how long a client waits after every address refused
// in a row.
const refusedPause = 50 * time.Millisecond

// opDurable is the workload's pseudo-kind for durability SETs (recorded as
// OpSet).
const opDurable = OpKind(255)

// RunWorkload runs cfg.Clients clients until ctx ends or each has run
// cfg.MaxOps operations, recording every operation in rec (client ids
// 0..Clients-1). It never returns early on an error reply: errors are
// classified (see the package documentation) and recorded. An operation in
// flight when ctx ends runs to its completion or OpTimeout, so RunWorkload
// returns at most OpTimeout after ctx ends.
func RunWorkload(ctx context.Context, cfg WorkloadConfig, rec *Recorder) *WorkloadResult {
	if len(cfg.Addrs) == 0 {
		panic("check: WorkloadConfig.Addrs is empty")
	}
	if cfg.Clients <= 0 {
		cfg.Clients = 4
	}
	if cfg.Keys <= 0 {
		cfg.Keys = 3
	}
	if cfg.OpTimeout <= 0 {
		cfg.OpTimeout = 2 * time.Second
	}
	clients := make([]*wclient, cfg.Clients)
	var wg sync.WaitGroup
	for i := range clients {
		c := &wclient{
			id:       i,
			cfg:      &cfg,
			rec:      rec,
			rng:      rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(i))),
			addr:     i % len(cfg.Addrs),
			lastSeen: map[string]string{},
			appends:  map[string][]string{},
		}
		clients[i] = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.run(ctx)
		}()
	}
	wg.Wait()
	res := &WorkloadResult{AckedAppends: map[string][]string{}}
	for _, c := range clients {
		res.AckedDurable = append(res.AckedDurable, c.durable...)
		for k, vs := range c.appends {
			res.AckedAppends[k] = append(res.AckedAppends[k], vs...)
		}
	}
	return res
}

// wclient is one workload client: sequential operations on one connection
// at a time.
type wclient struct {
	id   int
	cfg  *WorkloadConfig
	rec  *Recorder
	rng  *rand.Rand
	addr int // index into cfg.Addrs
	rdb  *redis.Client
	seq  int // operations drawn so far; values are "v-<id>-<seq>"
	nd   int // durability keys drawn so far
	// moveOn is set by a reply that calls for another node; the switch
	// happens after the operation (not inside a WATCH).
	moveOn bool
	// refused counts operations in a row that failed and moved on (dial
	// refused, CLUSTERDOWN): after a round of every address, the client
	// pauses instead of spinning on a cluster that is entirely down.
	refused int

	lastSeen map[string]string // register -> the last value this client knows it held
	durable  []string
	appends  map[string][]string
}

func (c *wclient) run(ctx context.Context) {
	defer func() {
		if c.rdb != nil {
			_ = c.rdb.Close()
		}
	}()
	for n := 0; c.cfg.MaxOps == 0 || n < c.cfg.MaxOps; n++ {
		if ctx.Err() != nil {
			return
		}
		// Operations are not cut short by ctx: an operation interrupted
		// by the end of the run would only add an Unknown.
		opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.OpTimeout)
		c.op(opCtx)
		cancel()
		if c.moveOn {
			c.switchNode()
			c.moveOn = false
		}
		if c.refused >= len(c.cfg.Addrs) {
			c.refused = 0
			select {
			case <-ctx.Done():
			case <-time.After(refusedPause):
			}
		}
	}
}

func newClient(addr string, opTimeout time.Duration) *redis.Client {
	dial := opTimeout
	if dial > time.Second {
		dial = time.Second
	}
	return redis.NewClient(&redis.Options{
		Addr:                  addr,
		Protocol:              2,
		MaxRetries:            -1, // a retry could apply a write twice
		DialTimeout:           dial,
		DialerRetries:         1,
		ReadTimeout:           opTimeout,
		WriteTimeout:          opTimeout,
		ContextTimeoutEnabled: true,
		PoolSize:              2,
		PoolTimeout:           opTimeout,
		PipelinePoolSize:      -1,
		DisableIdentity:       true,
		MaintNotificationsConfig: &maintnotifications.Config{
			Mode: maintnotifications.ModeDisabled,
		},
	})
}

func (c *wclient) client() *redis.Client {
	if c.rdb == nil {
		c.rdb = newClient(c.cfg.Addrs[c.addr], c.cfg.OpTimeout)
	}
	return c.rdb
}

// switchNode drops the connection and moves to the next address.
func (c *wclient) switchNode() {
	if c.rdb != nil {
		_ = c.rdb.Close()
		c.rdb = nil
	}
	c.addr = (c.addr + 1) % len(c.cfg.Addrs)
}

func (c *wclient) key(family string, n int) string {
	return c.cfg.Prefix + family + ":" + strconv.Itoa(n)
}

// draw picks the next operation: kind, key and value, all from the
// client's seeded generator, so the sequence does not depend on replies.
func (c *wclient) draw() (kind OpKind, key, value string, coin bool) {
	total := 100
	if c.cfg.Durable {
		total += durableWeight
	}
	x := c.rng.IntN(total)
	kind = opDurable
	for _, w := range opWeights {
		if x < w.weight {
			kind = w.kind
			break
		}
		x -= w.weight
	}
	n := c.rng.IntN(c.cfg.Keys)
	coin = c.rng.IntN(2) == 0
	r := c.rng.IntN(10)
	c.seq++
	value = fmt.Sprintf("v-%d-%d", c.id, c.seq)
	switch kind {
	case OpGet:
		key = c.key("r", n) // mostly registers, some counters
		if r < 3 {
			key = c.key("c", n)
		}
	case OpDel:
		key = c.key("r", n) // lists are never deleted (VerifyDurable)
		if r < 2 {
			key = c.key("c", n)
		}
	case OpIncr:
		key = c.key("c", n)
	case OpAppend, OpRead:
		key = c.key("l", n)
	case opDurable:
		key = c.cfg.Prefix + fmt.Sprintf("d:%d:%d", c.id, c.nd)
		c.nd++
	default:
		key = c.key("r", n)
	}
	return kind, key, value, coin
}

// reply classes.
type class uint8

const (
	clOk      class = iota // definite reply (Output.Err set for a deterministic error)
	clFail                 // certainly not applied
	clUnknown              // may or may not have been applied
)

// classify maps a go-redis error to an outcome; errText is the error reply
// for clOk, moveOn says that the client should switch to the next node.
func classify(err error) (cl class, errText string, moveOn bool) {
	if err == nil || errors.Is(err, redis.Nil) {
		return clOk, "", false
	}
	if errors.Is(err, redis.TxFailedErr) {
		return clFail, "", false
	}
	if code, text, ok := ErrorReply(err); ok {
		switch code {
		case "CLUSTERDOWN":
			return clFail, "", true
		case "EXECABORT":
			return clFail, "", false
		case "WRONGTYPE":
			return clOk, code + " " + text, false
		case "ERR":
			switch {
			case strings.HasPrefix(text, "value is not an integer"),
				strings.HasPrefix(text, "increment or decrement would overflow"):
				return clOk, code + " " + text, false // an answer of the model's
			case strings.HasPrefix(text, nodeStopping):
				return clUnknown, "", true
			}
		case "UNCERTAIN":
			return clUnknown, "", strings.HasPrefix(text, nodeStopping)
		}
		return clUnknown, "", false
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return clFail, "", true
	}
	return clUnknown, "", true
}

// finish completes p after err; on a definite reply it calls ok with the
// error text (empty on success) to build the output.
func (c *wclient) finish(p *Pending, err error, ok func(errText string) Output) {
	cl, errText, moveOn := classify(err)
	c.noteOutcome(cl, moveOn)
	switch cl {
	case clFail:
		p.FailBecause(errString(err))
	case clUnknown:
		p.UnknownBecause(errString(err))
	default:
		p.Ok(ok(errText))
	}
}

// noteOutcome records what an operation's reply asks of the client: to
// move to the next node, to pause after a round of refusals.
func (c *wclient) noteOutcome(cl class, moveOn bool) {
	c.moveOn = c.moveOn || moveOn
	switch {
	case cl == clFail && moveOn:
		c.refused++
	case cl == clOk:
		c.refused = 0
	}
}

// success reports whether err is no error at all (redis.Nil included).
func success(err error) bool { return err == nil || errors.Is(err, redis.Nil) }

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// op draws and runs one operation.
func (c *wclient) op(ctx context.Context) {
	kind, key, value, coin := c.draw()
	if kind == OpCAS {
		c.cas(ctx, key, value, coin)
		return
	}
	rdb := c.client()
	recKind := kind
	if kind == opDurable {
		recKind = OpSet
		value = key
	}
	p := c.rec.Begin(c.id, Input{Kind: recKind, Key: key, Value: value})
	switch kind {
	case OpGet:
		v, err := rdb.Do(ctx, "GET", key).Text()
		exists := err == nil
		c.finish(p, err, func(e string) Output { return Output{Exists: exists, Value: v, Err: e} })
		c.saw(key, exists, v)
	case OpSet, opDurable:
		err := rdb.Do(ctx, "SET", key, value).Err()
		c.finish(p, err, func(e string) Output { return Output{Err: e} })
		if err == nil {
			if kind == opDurable {
				c.durable = append(c.durable, key)
			} else {
				c.lastSeen[key] = value
			}
		} else {
			delete(c.lastSeen, key)
		}
	case OpSetNX:
		err := rdb.Do(ctx, "SET", key, value, "NX").Err()
		applied := err == nil
		c.finish(p, err, func(e string) Output { return Output{OK: applied, Err: e} })
		if applied {
			c.lastSeen[key] = value
		} else {
			delete(c.lastSeen, key)
		}
	case OpGetSet:
		old, err := rdb.Do(ctx, "SET", key, value, "GET").Text()
		exists := err == nil
		c.finish(p, err, func(e string) Output { return Output{Exists: exists, Value: old, Err: e} })
		if success(err) {
			c.lastSeen[key] = value
		} else {
			delete(c.lastSeen, key)
		}
	case OpDel:
		n, err := rdb.Do(ctx, "DEL", key).Int64()
		c.finish(p, err, func(e string) Output { return Output{Int: n, Err: e} })
		delete(c.lastSeen, key)
	case OpIncr:
		n, err := rdb.Do(ctx, "INCR", key).Int64()
		c.finish(p, err, func(e string) Output { return Output{Int: n, Err: e} })
	case OpAppend:
		n, err := rdb.Do(ctx, "RPUSH", key, value).Int64()
		c.finish(p, err, func(e string) Output { return Output{Int: n, Err: e} })
		if err == nil {
			c.appends[key] = append(c.appends[key], value)
		}
	case OpRead:
		l, err := rdb.Do(ctx, "LRANGE", key, 0, -1).StringSlice()
		c.finish(p, err, func(e string) Output {
			if e != "" {
				return Output{Err: e}
			}
			return Output{List: l}
		})
	}
}

// saw notes what this client read at a register (exists false: absent or
// not known).
func (c *wclient) saw(key string, exists bool, v string) {
	if exists {
		c.lastSeen[key] = v
	} else {
		delete(c.lastSeen, key)
	}
}

// cas runs WATCH key; GET key; and, if GET returned the expected value,
// MULTI; SET key value; EXEC. The expected value is, when lastFirst and
// this client knows one, the last value it saw at key; otherwise the value
// GET returns (read first, then decide). When GET's reply does not match,
// the operation is recorded as the GET it was.
func (c *wclient) cas(ctx context.Context, key, value string, lastFirst bool) {
	expect, haveExpect := c.lastSeen[key]
	haveExpect = haveExpect && lastFirst
	rdb := c.client()
	t0 := c.rec.Now() // invocation: before WATCH
	err := rdb.Watch(ctx, func(tx *redis.Tx) error {
		v, err := tx.Get(ctx, key).Result()
		exists := err == nil
		if !exists || (haveExpect && v != expect) {
			// No EXEC: record the GET.
			p := c.rec.BeginAt(c.id, Input{Kind: OpGet, Key: key}, t0)
			c.finish(p, err, func(e string) Output { return Output{Exists: exists, Value: v, Err: e} })
			c.saw(key, exists, v)
			return nil
		}
		p := c.rec.BeginAt(c.id, Input{Kind: OpCAS, Key: key, Value: value, Expect: v}, t0)
		_, err = tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			pipe.Set(ctx, key, value, 0)
			return nil
		})
		c.finish(p, err, func(e string) Output { return Output{OK: e == "", Err: e} })
		if err == nil {
			c.lastSeen[key] = value
		} else {
			delete(c.lastSeen, key)
		}
		return nil
	}, key)
	if err != nil {
		// WATCH itself failed (fn never fails): nothing was recorded,
		// WATCH has no effect; move on after a connection-level error.
		cl, _, moveOn := classify(err)
		c.noteOutcome(cl, moveOn)
	}
}

// VerifyDurable reads back (through addr, retrying CLUSTERDOWN and
// connection errors until ctx ends) every acknowledged durability key and
// every acknowledged list append, and returns a description of each one
// missing ("d:3:17 missing", "l:1: acknowledged value v-2-88 missing"). It
// also reports a durability key with another value, a value appearing
// twice in a list (the workload's values are unique, so a duplicate is a
// write applied twice) and two acknowledged appends of one client found in
// the wrong order. err only for a failure to read at all.
func VerifyDurable(ctx context.Context, addr string, res *WorkloadResult) (lost []string, err error) {
	rdb := newClient(addr, 2*time.Second)
	defer func() { _ = rdb.Close() }()

	const batch = 200
	for i := 0; i < len(res.AckedDurable); i += batch {
		keys := res.AckedDurable[i:min(i+batch, len(res.AckedDurable))]
		var cmds []*redis.StringCmd
		err := retryRead(ctx, func() error {
			cmds = make([]*redis.StringCmd, len(keys))
			pipe := rdb.Pipeline()
			for j, k := range keys {
				cmds[j] = pipe.Get(ctx, k)
			}
			_, _ = pipe.Exec(ctx)
			for _, cmd := range cmds {
				if e := cmd.Err(); e != nil && !errors.Is(e, redis.Nil) && retryable(e) {
					return e
				}
			}
			return nil
		})
		if err != nil {
			return lost, err
		}
		for j, cmd := range cmds {
			v, e := cmd.Result()
			switch {
			case errors.Is(e, redis.Nil):
				lost = append(lost, keys[j]+" missing")
			case e != nil:
				lost = append(lost, fmt.Sprintf("%s: %v", keys[j], e))
			case v != keys[j]:
				lost = append(lost, fmt.Sprintf("%s has value %q, want %q", keys[j], v, keys[j]))
			}
		}
	}

	listKeys := make([]string, 0, len(res.AckedAppends))
	for k := range res.AckedAppends {
		listKeys = append(listKeys, k)
	}
	sort.Strings(listKeys)
	for _, k := range listKeys {
		var l []string
		var rerr error
		err := retryRead(ctx, func() error {
			l, rerr = rdb.LRange(ctx, k, 0, -1).Result()
			if rerr != nil && retryable(rerr) {
				return rerr
			}
			return nil
		})
		if err != nil {
			return lost, err
		}
		if rerr != nil {
			lost = append(lost, fmt.Sprintf("%s: %v", k, rerr))
			continue
		}
		lost = append(lost, checkList(k, l, res.AckedAppends[k])...)
	}
	return lost, nil
}

// checkList compares list key's contents l with the acknowledged appends.
func checkList(key string, l, acked []string) (lost []string) {
	pos := make(map[string]int, len(l))
	count := make(map[string]int, len(l))
	for i, v := range l {
		if _, ok := pos[v]; !ok {
			pos[v] = i
		}
		count[v]++
	}
	for i, v := range l {
		if count[v] > 1 && pos[v] == i {
			lost = append(lost, fmt.Sprintf("%s: value %s appears %d times", key, v, count[v]))
		}
	}
	// Per client (the "v-<client>-" part of the value), acknowledged
	// appends were sequential, so they must be in this order in the list.
	last := map[string]string{}
	for _, v := range acked {
		p, ok := pos[v]
		if !ok {
			lost = append(lost, fmt.Sprintf("%s: acknowledged value %s missing", key, v))
			continue
		}
		client := v
		if i := strings.LastIndexByte(v, '-'); i > 0 {
			client = v[:i]
		}
		if prev, ok := last[client]; ok && pos[prev] > p {
			lost = append(lost, fmt.Sprintf("%s: acknowledged values %s and %s out of order", key, prev, v))
		}
		last[client] = v
	}
	return lost
}

// retryable reports whether a read error is transient: CLUSTERDOWN,
// UNCERTAIN, a node shutting down, TRYAGAIN/LOADING, or any error that is
// not an error reply (connection-level).
func retryable(err error) bool {
	code, text, ok := ErrorReply(err)
	if !ok {
		return true
	}
	switch code {
	case "CLUSTERDOWN", "UNCERTAIN", "TRYAGAIN", "LOADING":
		return true
	case "ERR":
		return strings.HasPrefix(text, nodeStopping)
	}
	return false
}

// nodeStopping starts the text of the replies of a kvorum node that shuts
// down, after their code (ERR, or UNCERTAIN for a write that may have been
// applied): Redis has no code for it.
const nodeStopping = "node is shutting down"

// ErrorReply splits the server error reply that err is (or wraps) into its
// code, the first word ("CLUSTERDOWN", "ERR", "NOLEASE", ...), and the text
// after it; ok is false when err is no error reply (nil, redis.Nil, a
// connection error, a timeout).
func ErrorReply(err error) (code, text string, ok bool) {
	var rerr redis.Error
	if err == nil || errors.Is(err, redis.Nil) || !errors.As(err, &rerr) {
		return "", "", false
	}
	code, text, _ = strings.Cut(rerr.Error(), " ")
	return code, text, true
}

// retryRead runs fn until it returns nil, retrying every 100ms until ctx
// ends.
func retryRead(ctx context.Context, fn func() error) error {
	for {
		err := fn()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("check: cannot read back: %w (last error: %v)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

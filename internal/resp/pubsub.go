package resp

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kvorum/kvorum/internal/glob"
	"github.com/kvorum/kvorum/internal/reply"
)

// Pub/sub. PUBLISH is a replicated command (see kv.cmdPublish): every node
// applies it in log order and, once the entry is committed, calls
// Server.Deliver, which hands the message to the node's local subscribers.
// So a message published on any node reaches subscribers on every node, in
// one order for all of them. The node that answers the PUBLISH replies
// with Receivers, its own subscriber count (the backend's reply carries it).
//
// A subscribed connection gets a writer goroutine: replies and messages
// are appended to one pending buffer, in order, and written by it, so a
// subscriber that reads slowly never blocks the node's delivery. A subscriber
// whose pending output exceeds pubsubMaxPending is disconnected (Redis's
// client-output-buffer-limit for pubsub clients does the same).

const pubsubMaxPending = 32 << 20

type hub struct {
	mu       sync.RWMutex
	channels map[string]map[*conn]struct{}
	patterns map[string]map[*conn]struct{}
	shards   map[string]map[*conn]struct{} // SSUBSCRIBE's shard channels
}

func newHub() *hub {
	return &hub{channels: map[string]map[*conn]struct{}{}, patterns: map[string]map[*conn]struct{}{},
		shards: map[string]map[*conn]struct{}{}}
}

// subState is a connection's subscriptions, guarded by hub.mu.
type subState struct {
	channels map[string]struct{}
	patterns map[string]struct{}
	shards   map[string]struct{}
}

// subCount is the count SUBSCRIBE and PSUBSCRIBE confirmations carry:
// channels and patterns (Redis counts shard channels apart).
func (c *conn) subCount() int {
	return len(c.subs.channels) + len(c.subs.patterns)
}

// subscribed is subMode under the hub's lock.
func (c *conn) subscribed() bool {
	c.s.hub.mu.RLock()
	defer c.s.hub.mu.RUnlock()
	return c.subMode()
}

// subMode reports whether the connection has any subscription (RESP2's
// subscribed mode), shard channels included.
func (c *conn) subMode() bool {
	return c.subCount()+len(c.subs.shards) > 0
}

// subKind is one of the three subscription families.
type subKind struct {
	sub, unsub string // confirmation names
	mine       func(*subState) map[string]struct{}
	all        func(*hub) map[string]map[*conn]struct{}
	count      func(*conn) int // the count confirmations carry
}

var (
	channelSubs = subKind{"subscribe", "unsubscribe",
		func(s *subState) map[string]struct{} { return s.channels },
		func(h *hub) map[string]map[*conn]struct{} { return h.channels }, (*conn).subCount}
	patternSubs = subKind{"psubscribe", "punsubscribe",
		func(s *subState) map[string]struct{} { return s.patterns },
		func(h *hub) map[string]map[*conn]struct{} { return h.patterns }, (*conn).subCount}
	shardSubs = subKind{"ssubscribe", "sunsubscribe",
		func(s *subState) map[string]struct{} { return s.shards },
		func(h *hub) map[string]map[*conn]struct{} { return h.shards },
		func(c *conn) int { return len(c.subs.shards) }}
)

// subKindOf returns the family of a (un)subscribe command.
func subKindOf(name []byte) subKind {
	switch {
	case len(name) > 0 && (name[0] == 'p' || name[0] == 'P'):
		return patternSubs
	case len(name) > 0 && (name[0] == 's' || name[0] == 'S') && len(name) > len("subscribe"):
		return shardSubs
	}
	return channelSubs
}

// pusher is a subscribed connection's output path.
type pusher struct {
	mu      sync.Mutex
	pending []byte
	wake    chan struct{}
	started bool
}

// enqueue appends frames to the connection's output; false if the client
// exceeded its output limit (it is then disconnected).
func (c *conn) enqueue(b []byte) bool {
	p := &c.push
	p.mu.Lock()
	if len(p.pending)+len(b) > pubsubMaxPending {
		p.mu.Unlock()
		c.s.log.Warn("resp: pub/sub client output exceeds limit; closing connection", "client", c.addr, "limit", pubsubMaxPending)
		c.cancel()
		_ = c.nc.Close()
		return false
	}
	p.pending = append(p.pending, b...)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return true
}

// startPusher switches the connection to pushed output (once).
func (c *conn) startPusher() {
	p := &c.push
	if p.started {
		return
	}
	p.started = true
	p.wake = make(chan struct{}, 1)
	c.s.wg.Add(1)
	go func() {
		defer c.s.wg.Done()
		var buf []byte
		for {
			select {
			case <-p.wake:
			case <-c.ctx.Done():
				return
			}
			p.mu.Lock()
			buf, p.pending = p.pending, buf[:0]
			p.mu.Unlock()
			if len(buf) == 0 {
				continue
			}
			_ = c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout))
			n, err := c.nc.Write(buf)
			c.s.netOut.Add(uint64(n))
			if err != nil {
				c.cancel()
				_ = c.nc.Close()
				return
			}
			if cap(buf) > keepOut {
				buf = nil
			}
		}
	}()
}

func pushFrame(proto int, elems ...reply.Reply) []byte {
	return AppendReply(nil, reply.Reply{Kind: reply.KindPush, Elems: elems}, proto)
}

// Deliver hands a published message to this server's subscribers. The
// node calls it for each PUBLISH (or, shard, SPUBLISH) of a committed
// round, in log order. It never blocks on a client.
func (s *Server) Deliver(shard bool, channel, message []byte) {
	h := s.hub
	h.mu.RLock()
	defer h.mu.RUnlock()
	if shard {
		for c := range h.shards[string(channel)] {
			c.enqueue(pushFrame(int(c.protoVersion.Load()), reply.BulkString("smessage"), reply.Bulk(channel), reply.Bulk(message)))
		}
		s.m.published.Inc()
		return
	}
	for c := range h.channels[string(channel)] {
		c.enqueue(pushFrame(int(c.protoVersion.Load()), reply.BulkString("message"), reply.Bulk(channel), reply.Bulk(message)))
	}
	for pat, conns := range h.patterns {
		if !glob.Match([]byte(pat), channel, false) {
			continue
		}
		for c := range conns {
			c.enqueue(pushFrame(int(c.protoVersion.Load()), reply.BulkString("pmessage"), reply.BulkString(pat), reply.Bulk(channel), reply.Bulk(message)))
		}
	}
	s.m.published.Inc()
}

// Receivers counts this server's subscribers that a message on channel
// reaches (shard: an SPUBLISH's). The node replies to a PUBLISH with it.
func (s *Server) Receivers(shard bool, channel []byte) int64 {
	h := s.hub
	h.mu.RLock()
	defer h.mu.RUnlock()
	if shard {
		return int64(len(h.shards[string(channel)]))
	}
	n := len(h.channels[string(channel)])
	for pat, conns := range h.patterns {
		if glob.Match([]byte(pat), channel, false) {
			n += len(conns)
		}
	}
	return int64(n)
}

// subscribe handles SUBSCRIBE, PSUBSCRIBE and SSUBSCRIBE: one
// confirmation per argument, pushed in order with the messages.
func subscribeCmd(c *conn, args [][]byte) reply.Reply {
	k := subKindOf(args[0])
	c.startPusher()
	// Replies already produced in this batch go first.
	c.enqueue(c.out)
	c.out = c.out[:0]
	h := c.s.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if c.subs.channels == nil {
		c.subs.channels, c.subs.patterns, c.subs.shards = map[string]struct{}{}, map[string]struct{}{}, map[string]struct{}{}
	}
	mine, all := k.mine(&c.subs), k.all(h)
	var frames []byte
	for _, a := range args[1:] {
		name := string(a)
		if _, ok := mine[name]; !ok {
			mine[name] = struct{}{}
			if all[name] == nil {
				all[name] = map[*conn]struct{}{}
			}
			all[name][c] = struct{}{}
		}
		frames = append(frames, pushFrame(c.proto, reply.BulkString(k.sub), reply.Bulk(a), reply.Int(int64(k.count(c))))...)
	}
	c.enqueue(frames)
	return noReply
}

// unsubscribeCmd handles UNSUBSCRIBE, PUNSUBSCRIBE and SUNSUBSCRIBE (no
// arguments: all of that family).
func unsubscribeCmd(c *conn, args [][]byte) reply.Reply {
	k := subKindOf(args[0])
	kind := k.unsub
	h := c.s.hub
	h.mu.Lock()
	mine, all := k.mine(&c.subs), k.all(h)
	names := make([]string, 0, len(args)-1)
	for _, a := range args[1:] {
		names = append(names, string(a))
	}
	if len(args) == 1 {
		for name := range mine {
			names = append(names, name)
		}
		slices.Sort(names)
	}
	var frames []reply.Reply
	for _, name := range names {
		if _, ok := mine[name]; ok {
			delete(mine, name)
			delete(all[name], c)
			if len(all[name]) == 0 {
				delete(all, name)
			}
		}
		frames = append(frames, reply.Reply{Kind: reply.KindPush, Elems: []reply.Reply{reply.BulkString(kind), reply.BulkString(name), reply.Int(int64(k.count(c)))}})
	}
	if len(names) == 0 {
		frames = append(frames, reply.Reply{Kind: reply.KindPush, Elems: []reply.Reply{reply.BulkString(kind), reply.Nil, reply.Int(int64(k.count(c)))}})
	}
	h.mu.Unlock()
	if !c.push.started {
		// Never subscribed: plain replies.
		for _, f := range frames {
			c.out = AppendReply(c.out, f, c.proto)
		}
		return noReply
	}
	c.enqueue(c.out)
	c.out = c.out[:0]
	var b []byte
	for _, f := range frames {
		b = AppendReply(b, f, c.proto)
	}
	c.enqueue(b)
	return noReply
}

// dropSubscriptions removes every subscription of a closing or RESET connection.
func (c *conn) dropSubscriptions() {
	h := c.s.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	for name := range c.subs.channels {
		delete(h.channels[name], c)
		if len(h.channels[name]) == 0 {
			delete(h.channels, name)
		}
	}
	for name := range c.subs.patterns {
		delete(h.patterns[name], c)
		if len(h.patterns[name]) == 0 {
			delete(h.patterns, name)
		}
	}
	for name := range c.subs.shards {
		delete(h.shards[name], c)
		if len(h.shards[name]) == 0 {
			delete(h.shards, name)
		}
	}
	c.subs.channels, c.subs.patterns, c.subs.shards = nil, nil, nil
}

// inSubscribedRESP2 reports whether the connection is in RESP2's
// subscribed mode, where only a few commands are allowed.
func (c *conn) inSubscribedRESP2() bool {
	if c.proto >= 3 {
		return false
	}
	c.s.hub.mu.RLock()
	defer c.s.hub.mu.RUnlock()
	return c.subMode()
}

func allowedSubscribed(name string) bool {
	switch name {
	case "subscribe", "psubscribe", "unsubscribe", "punsubscribe", "ssubscribe", "sunsubscribe", "ping", "quit", "reset":
		return true
	}
	return false
}

func pubsubChannels(c *conn, args [][]byte) reply.Reply {
	return listChannels(c.s.hub, args, func(h *hub) map[string]map[*conn]struct{} { return h.channels })
}

func pubsubShardChannels(c *conn, args [][]byte) reply.Reply {
	return listChannels(c.s.hub, args, func(h *hub) map[string]map[*conn]struct{} { return h.shards })
}

// listChannels is PUBSUB CHANNELS and SHARDCHANNELS: the channels of which
// that have a subscriber on this node, matching the optional pattern, in
// byte order.
func listChannels(h *hub, args [][]byte, which func(*hub) map[string]map[*conn]struct{}) reply.Reply {
	h.mu.RLock()
	defer h.mu.RUnlock()
	var out []reply.Reply
	for name := range which(h) {
		if len(args) < 3 || glob.Match(args[2], []byte(name), false) {
			out = append(out, reply.BulkString(name))
		}
	}
	slices.SortFunc(out, func(a, b reply.Reply) int { return strings.Compare(string(a.Str), string(b.Str)) })
	return reply.Array(out...)
}

func pubsubNumSub(c *conn, args [][]byte) reply.Reply {
	return countSubscribers(c.s.hub, args, func(h *hub) map[string]map[*conn]struct{} { return h.channels })
}

func pubsubShardNumSub(c *conn, args [][]byte) reply.Reply {
	return countSubscribers(c.s.hub, args, func(h *hub) map[string]map[*conn]struct{} { return h.shards })
}

// countSubscribers is PUBSUB NUMSUB and SHARDNUMSUB: each channel named and
// its number of subscribers on this node.
func countSubscribers(h *hub, args [][]byte, which func(*hub) map[string]map[*conn]struct{}) reply.Reply {
	h.mu.RLock()
	defer h.mu.RUnlock()
	all := which(h)
	out := make([]reply.Reply, 0, 2*(len(args)-2))
	for _, a := range args[2:] {
		out = append(out, reply.Bulk(a), reply.Int(int64(len(all[string(a)]))))
	}
	return reply.Map(out...)
}

func pubsubNumPat(c *conn, args [][]byte) reply.Reply {
	h := c.s.hub
	h.mu.RLock()
	defer h.mu.RUnlock()
	return reply.Int(int64(len(h.patterns)))
}

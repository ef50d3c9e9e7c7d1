package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/kv"
	"github.com/kvorum/kvorum/internal/notify"
	"github.com/kvorum/kvorum/internal/reccache"
	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/resp"
	"github.com/kvorum/kvorum/internal/storage"
	"github.com/kvorum/kvorum/internal/store"
)

// backend is the Node as the RESP server sees it.
type backend Node

// Error replies for cluster conditions. Redis has no exact equivalent; the
// codes are ones Redis clients already treat as retryable.
func errNoLeaderReply(d time.Duration) reply.Reply {
	return reply.Error(fmt.Sprintf("CLUSTERDOWN no Raft leader reachable for %s: this node may be in a minority partition or an election is under way; try again", d.Round(time.Millisecond)))
}

// errAmbiguousReply deliberately avoids TRYAGAIN: Redis clients (go-redis
// among them) resend a command that got TRYAGAIN, which could apply an INCR
// twice. UNCERTAIN is not a code any client retries on its own.
var errAmbiguousReply = reply.Error("UNCERTAIN timed out waiting for the write to commit; it may or may not have been applied")

// Do executes cmds in order. Consecutive writes go to the leader as one
// proposal (one Raft entry); consecutive reads share one read barrier.
func (b *backend) Do(ctx context.Context, cmds [][][]byte) []reply.Reply {
	n := (*Node)(b)
	replies := make([]reply.Reply, len(cmds))
	parent := ctx
	ctx, cancel := n.withRequestTimeout(ctx)
	defer cancel()
	for i := 0; i < len(cmds); {
		if timeout, keys, ok := blockingCommand(cmds[i]); ok {
			n.countOne(cmds[i]) // once, however often it is retried (ranges_load.go)
			replies[i] = n.execBlocking(parent, cmds[i], timeout, keys)
			i++
			continue
		}
		if a, ok := kv.LockAcquire(cmds[i]); ok {
			n.countOne(cmds[i])
			replies[i] = n.execLock(parent, cmds[i], a)
			i++
			continue
		}
		if n.machine.scripts.Active() && isFunctionStats(cmds[i]) {
			if busy, function := n.machine.scripts.Busy(n.resp.BusyThreshold()); busy && function {
				// A function has run past busy-reply-threshold on this
				// node (Redis's busy state, the only time its FUNCTION
				// STATS can see a running function): answer from the
				// node's applied state, without the read point, which
				// would wait behind a run at apply time, and show it.
				now := n.cfg.Now()
				replies[i], _ = readCounted(n.store.DB(), kv.ReadEnv{Scripts: &n.machine.scripts, RunningScript: true}, cmds[i], now)
				i++
				continue
			}
		}
		write := isWrite(cmds[i])
		j := i + 1
		for j < len(cmds) && isWrite(cmds[j]) == write {
			if _, _, blocking := blockingCommand(cmds[j]); blocking {
				break
			}
			if _, parks := kv.LockAcquire(cmds[j]); parks {
				break
			}
			j++
		}
		if write {
			n.noteWrites(cmds[i:j]) // maxmemory.go
			n.execWriteRun(ctx, true, cmds[i:j], replies[i:j])
			n.copyConfigAfter(ctx, cmds[i:j], replies[i:j]) // configcopy.go
			n.publishReplies(ctx, cmds[i:j], replies[i:j])
		} else {
			n.execReadRun(ctx, true, cmds[i:j], replies[i:j])
			n.pfcountWriteBack(ctx, cmds[i:j], replies[i:j])
		}
		i = j
	}
	return replies
}

func isWrite(args [][]byte) bool { return kv.IsWrite(args) }

// isFunctionStats reports whether args is FUNCTION STATS.
func isFunctionStats(args [][]byte) bool {
	return len(args) == 2 && strings.EqualFold(string(args[0]), "function") && strings.EqualFold(string(args[1]), "stats")
}

func fill(out []reply.Reply, r reply.Reply) {
	for i := range out {
		out[i] = r
	}
}

// execWriteOn proposes cmds on the leader of r's range, forwarding if
// needed, and retries only while the outcome is certain (the command was
// not applied). execWrite (router.go) routes commands to it.
func (n *Node) execWriteOn(ctx context.Context, r *store.Replica, cmds [][][]byte, out []reply.Reply) {
	if r := n.diskRefusal(); r != nil {
		fill(out, *r) // this node's disk is nearly full (disk.go)
		return
	}
	cmds = asUser(ctx, cmds) // acl.go: checked at apply for a user with restrictions
	start := time.Now()
	for {
		lead, local := r.Leader()
		var replies []reply.Reply
		var err error
		switch {
		case local:
			replies, err = r.Propose(ctx, cmds)
		case lead != 0:
			replies, err = n.forwardExec(ctx, lead, r.RangeID(), cmds)
		default:
			err = store.ErrNoLeader
		}
		if err == nil {
			copy(out, replies)
			return
		}
		var nle *store.NotLeaderError
		switch {
		case errors.Is(err, store.ErrProposalDropped), errors.Is(err, store.ErrNoLeader), errors.As(err, &nle):
			// Not applied: safe to retry once a leader is known.
		case errors.Is(err, store.ErrAmbiguous):
			if err != store.ErrAmbiguous {
				fill(out, reply.Error("UNCERTAIN "+err.Error()+"; the write may or may not have been applied"))
			} else {
				fill(out, errAmbiguousReply)
			}
			return
		case errors.Is(err, store.ErrStopped) && local:
			// This node stops. The entry may already be in the log and
			// commit on the other nodes: not a certain failure. (A leader
			// that stops answers a forwarded write with ErrStopped too: the
			// default case reports that.)
			fill(out, reply.Error("UNCERTAIN node is shutting down; the write may or may not have been applied"))
			return
		default:
			fill(out, reply.Error("UNCERTAIN "+err.Error()+"; the write may or may not have been applied"))
			return
		}
		select {
		case <-ctx.Done():
			if errors.Is(err, store.ErrNoLeader) || nle != nil {
				fill(out, errNoLeaderReply(time.Since(start)))
			} else {
				fill(out, errAmbiguousReply)
			}
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Watch reads the WATCH stamps of keys at a linearizable read point. The
// absent keys not yet registered for FLUSHALL are registered (one Raft
// entry) before it answers; if that fails, a FLUSHALL before EXEC aborts
// the transaction, as it did before registrations.
func (b *backend) Watch(ctx context.Context, keys [][]byte) ([]uint64, *reply.Reply) {
	n := (*Node)(b)
	ctx, cancel := n.withRequestTimeout(ctx)
	defer cancel()
	if n.multiRange() {
		// One barrier per range the keys belong to (router.go).
		if r := n.barrierKeys(ctx, keys); r != nil {
			return nil, r
		}
	} else if r := n.readBarrier(ctx); r != nil {
		return nil, r
	}
	// The state read below is at this index or later (the applied index
	// moves after the state it covers is committed).
	applied := n.store.Replica(firstRange).AppliedIndex()
	now := n.cfg.Now()
	stamps := make([]uint64, len(keys))
	var reg [][]byte
	for i, k := range keys {
		applied := applied
		if n.multiRange() {
			applied = n.replicaForKey(k).AppliedIndex()
		}
		s, register, err := kv.WatchStamp(n.store.DB(), k, now, applied)
		if err != nil {
			r := reply.Error("ERR storage: " + err.Error())
			return nil, &r
		}
		stamps[i] = s
		if register {
			reg = append(reg, k)
		}
	}
	if len(reg) > 0 {
		n.proposeKeysByRange(ctx, "KVORUM.WATCHREG", reg)
	}
	return stamps, nil
}

// execReadOn waits for a linearizable read point of r's range, then reads
// local state. A connection that sent READONLY reads local state without
// the barrier. desc, if not nil, is r's descriptor as routing saw it
// (several ranges): reads of keys outside its slots reply
// RangeKeyMismatch, and if the descriptor's generation changed by the
// time the barrier returns (a split moved slots), it reports stale and
// reads nothing: the caller routes again. execRead (router.go) routes
// commands to it.
func (n *Node) execReadOn(ctx context.Context, r *store.Replica, desc *storage.Descriptor, cmds [][][]byte, out []reply.Reply) (stale bool) {
	if resp.StaleReadsOK(ctx) {
		// no read point: this node's applied state, possibly behind
	} else if e := n.readBarrierOn(ctx, r); e != nil {
		fill(out, *e)
		return false
	}
	if desc != nil && r.Descriptor().Generation != desc.Generation {
		return true
	}
	n.readLocal(ctx, desc, cmds, out)
	return false
}

// readLocal reads cmds from this node's state (after their read point).
func (n *Node) readLocal(ctx context.Context, desc *storage.Descriptor, cmds [][][]byte, out []reply.Reply) {
	now := n.cfg.Now()
	db := n.store.DB()
	var looked kv.Lookups
	missed := n.machine.settings.Notify().Emits(notify.KeyMiss)
	for i, args := range cmds {
		if e := n.readDenied(ctx, args); e != "" {
			out[i] = reply.Error(e) // acl.go
			continue
		}
		var l kv.Lookups
		out[i], l = readCounted(db, kv.ReadEnv{Shared: n.machine.shared, Scripts: &n.machine.scripts, Missed: missed, Perms: n.machine.perms(), Desc: desc}, args, now)
		looked.Hits, looked.Misses = looked.Hits+l.Hits, looked.Misses+l.Misses
		looked.Missed = append(looked.Missed, l.Missed...)
	}
	n.machine.stats.hits.Add(looked.Hits)
	n.machine.stats.misses.Add(looked.Misses)
	if len(looked.Missed) > 0 {
		n.reportKeyMisses(ctx, looked.Missed)
	}
}

// reportKeyMisses emits the keymiss events of reads this node served
// (notify-keyspace-events has the m class): reads do not go through the
// log, so the node proposes KVORUM.KEYMISS, whose apply emits them on
// every node, in log order. The reads' replies wait for it (best effort:
// a failure loses the events, not the replies), so a client sees its
// miss's event before the reply, as from Redis.
func (n *Node) reportKeyMisses(ctx context.Context, keys [][]byte) {
	n.proposeKeysByRange(ctx, "KVORUM.KEYMISS", keys)
}

// readAt executes a read-only command against db as of one state, as a
// node serves it: a command that reads one key's record and nothing else
// (GET, TYPE, TTL, ...) reads db, through shared, the node's read cache,
// if not nil (see ReadCached); any other reads a Pebble snapshot, so that
// everything it reads belongs to the same state. Read on db itself reads
// each key at a different moment: an MGET of two keys that one MSET wrote
// could return one old value and one new, and a collection read could
// mix its header with another incarnation's elements.
func readAt(db *pebble.DB, shared *reccache.Shared, args [][]byte, nowMs int64) kv.Reply {
	r, _ := readCounted(db, kv.ReadEnv{Shared: shared}, args, nowMs)
	return r
}

// readCounted is readAt on the node env describes that also returns the
// key lookups the command made (INFO keyspace_hits and keyspace_misses).
func readCounted(db *pebble.DB, env kv.ReadEnv, args [][]byte, nowMs int64) (kv.Reply, kv.Lookups) {
	if readsOneRecord(args) {
		return kv.ReadIn(db, env, args, nowMs)
	}
	snap := db.NewSnapshot()
	defer snap.Close()
	env.Shared = nil
	return kv.ReadIn(snap, env, args, nowMs)
}

// oneRecordReads are the read commands that read their one key's record
// with one lookup and nothing else.
var oneRecordReads = map[string]bool{
	"get": true, "strlen": true, "getrange": true, "substr": true,
	"getbit": true, "bitcount": true, "bitpos": true,
	"type": true, "ttl": true, "pttl": true, "expiretime": true, "pexpiretime": true,
}

// readsOneRecord reports whether args is a command of oneRecordReads (or
// EXISTS of one key).
func readsOneRecord(args [][]byte) bool {
	if len(args) < 2 {
		return false
	}
	d := kv.Lookup(args[0])
	if d == nil {
		return false
	}
	return oneRecordReads[d.Name] || (d.Name == "exists" && len(args) == 2)
}

// readBarrier waits until this node may serve a linearizable read of
// range 1 (the system range: the only range while there is one); an
// error reply if it cannot before ctx ends.
func (n *Node) readBarrier(ctx context.Context) *reply.Reply {
	return n.readBarrierOn(ctx, n.store.Replica(firstRange))
}

// readBarrierOn waits until this node may serve a linearizable read of
// r's range; an error reply if it cannot before ctx ends.
func (n *Node) readBarrierOn(ctx context.Context, r *store.Replica) *reply.Reply {
	if n.cfg.Unsafe.StaleReads {
		return nil // deliberately broken: see Config.Unsafe
	}
	start := time.Now()
	for {
		err := r.ReadBarrier(ctx)
		if err == nil {
			return nil
		}
		if errors.Is(err, store.ErrStopped) {
			e := reply.Error("ERR node is shutting down")
			return &e
		}
		if ctx.Err() != nil {
			e := errNoLeaderReply(time.Since(start))
			return &e
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Info returns the node's INFO sections.
func (b *backend) Info() []resp.InfoSection {
	n := (*Node)(b)
	st := n.store.Replica(firstRange).Status()
	role := "master"
	if st.Role != "leader" {
		role = "slave"
	}
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	held, leading := n.rangeCounts()
	perHeld, perLed := n.perNodeCounts()
	repl := resp.InfoSection{Name: "Replication", Fields: [][2]string{
		{"role", role},
		{"raft_node_id", u(uint64(n.id))},
		{"raft_role", st.Role},
		{"raft_term", u(st.Term)},
		{"raft_leader", u(st.Leader)},
		{"raft_commit_index", u(st.Commit)},
		{"raft_applied_index", u(st.Applied)},
		{"raft_first_index", u(st.FirstIndex)},
		{"raft_last_index", u(st.LastIndex)},
		{"raft_members", u(uint64(len(st.Descriptor.Replicas)))},
		{"raft_ranges", u(uint64(held))},
		{"raft_ranges_leading", u(uint64(leading))},
		{"raft_ranges_per_node", perNodeField(perHeld)},
		{"raft_leaders_per_node", perNodeField(perLed)},
		{"connected_slaves", "0"},
	}}
	keys := kv.Read(n.store.DB(), [][]byte{[]byte("DBSIZE")}, n.cfg.Now())
	ks := resp.InfoSection{Name: "Keyspace"}
	if keys.Kind == reply.KindInt && keys.Int > 0 {
		ks.Fields = append(ks.Fields, [2]string{"db0", fmt.Sprintf("keys=%d,expires=0,avg_ttl=0", keys.Int)})
	}
	stats := resp.InfoSection{Name: "Stats", Fields: [][2]string{ // placed in Redis's order by resp
		{"expired_keys", u(n.machine.stats.expired.Load())},
		{"keyspace_hits", u(n.machine.stats.hits.Load())},
		{"keyspace_misses", u(n.machine.stats.misses.Load())},
	}}
	mem := resp.InfoSection{Name: "Memory"}
	if scripts, err := kv.CachedScripts(n.store.DB()); err == nil {
		mem.Fields = append(mem.Fields, [2]string{"number_of_cached_scripts", strconv.Itoa(scripts)})
	}
	// The data set estimate maxmemory is compared with (maxmemory.go).
	mem.Fields = append(mem.Fields, [2]string{"used_memory_dataset", strconv.FormatInt(n.dataSize(), 10)})
	saved := n.store.Replica(firstRange).SavedAt()
	persist := n.persistenceInfo()
	persist.Fields = slices.Insert(persist.Fields, min(1, len(persist.Fields)), [][2]string{
		{"async_loading", "0"},
		{"rdb_changes_since_last_save", strconv.FormatInt(n.machine.stats.changes(saved), 10)},
		{"rdb_bgsave_in_progress", "0"},
		{"rdb_last_save_time", strconv.FormatInt(saved.Unix(), 10)},
		{"rdb_last_bgsave_status", "ok"},
		{"aof_enabled", "0"},
	}...)
	clients := resp.InfoSection{Name: "Clients", Fields: [][2]string{
		{"blocked_clients", strconv.FormatInt(n.blockedClients.Load(), 10)},
		{"clients_in_timeout_table", strconv.FormatInt(n.inTimeoutTable.Load(), 10)},
	}}
	return []resp.InfoSection{clients, mem, persist, stats, repl, ks}
}

// ResetStat zeroes the node's INFO stats counters, as Redis's CONFIG
// RESETSTAT does (not rdb_changes_since_last_save).
func (b *backend) ResetStat() {
	st := &(*Node)(b).machine.stats
	st.hits.Store(0)
	st.misses.Store(0)
	st.expired.Store(0)
}

// nodeStats is the INFO counters Redis keeps per server that kvorum keeps
// per node: the key lookups of the reads this node served (execRead), and
// the keys expired and changed by the writes it applied (actOn).
type nodeStats struct {
	hits, misses, expired atomic.Uint64
	// dirty counts the keys changed since the store's SavedAt was savedAt
	// (Unix ns): rdb_changes_since_last_save.
	dirty   atomic.Int64
	savedAt atomic.Int64
}

// applied counts a committed round's effects; saved is the store's SavedAt.
// Only actOn calls it.
func (s *nodeStats) applied(fx *kv.Effects, saved time.Time) {
	if ns := saved.UnixNano(); s.savedAt.Load() != ns {
		s.savedAt.Store(ns)
		s.dirty.Store(0)
	}
	s.dirty.Add(int64(len(fx.Written)))
	s.expired.Add(uint64(fx.Expired))
}

// changes is rdb_changes_since_last_save, saved the store's SavedAt.
func (s *nodeStats) changes(saved time.Time) int64 {
	if s.savedAt.Load() != saved.UnixNano() {
		return 0 // saved since the last round counted
	}
	return s.dirty.Load()
}

// pfcountWriteBack has the cardinality that each single-key PFCOUNT among
// cmds (a run of reads just served) computed written back into the
// HyperLogLog's header, as Redis's PFCOUNT does, when it was stale: one
// KVORUM.PFCACHE per such key, proposed together, before the replies go
// out (so a GET that follows sees Redis's bytes).
func (n *Node) pfcountWriteBack(ctx context.Context, cmds [][][]byte, replies []reply.Reply) {
	var wb [][][]byte
	for i, c := range cmds {
		if len(c) == 2 && len(c[0]) == len("pfcount") && replies[i].Kind == reply.KindInt && kv.PFCountStale(n.store.DB(), c, n.cfg.Now()) {
			wb = append(wb, [][]byte{[]byte("KVORUM.PFCACHE"), c[1]})
		}
	}
	if len(wb) > 0 {
		n.execWrite(ctx, wb, make([]reply.Reply, len(wb))) // best effort: the count replied stands either way
	}
}

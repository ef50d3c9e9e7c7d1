package kv

import (
	"strconv"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/redisnum"
	"github.com/kvorum/kvorum/internal/reply"
)

// Transactions (MULTI/EXEC) and PUBLISH.
//
// The connection layer queues a transaction's commands and, at EXEC, sends
// them as one internal command, KVORUM.EXEC, so the whole transaction is
// one Raft log entry applied atomically on every replica:
//
//	KVORUM.EXEC <nwatch> (<key> <stamp>)* (<argc> <arg>*)*
//
// WATCH is checked at apply time: each watched key must be unchanged since
// its stamp (WatchStamp, read at WATCH time after a linearizable read
// barrier), or EXEC replies with a null array and runs nothing. A key's
// stamp is the log index of the last write to it (plus one), so any write
// after WATCH, on any node, changes it; an absent key's stamp is a log
// index at which it was absent, checked against its tombstone (see
// watchUnchanged and tomb.go).

func init() {
	def("kvorum.exec", -2, "write", 0, 0, 0, "transactions", "Internal: a MULTI/EXEC transaction as one log entry.", cmdExec, nil)
	table["kvorum.exec"].internal = true
	specList = specList[:len(specList)-1]

	def("publish", 3, "pubsub loading stale fast", 0, 0, 0, "pubsub", "Posts a message to a channel.", cmdPublish, nil)
	// Replicated through Raft so every node delivers it, in log order.
	table["publish"].spec.Write = true
	// Sharded pub/sub (Redis 7): kvorum has one shard, so SPUBLISH reaches
	// SSUBSCRIBE subscribers on every node, like PUBLISH does SUBSCRIBE's.
	def("spublish", 3, "pubsub loading stale fast", 1, 1, 1, "pubsub", "Post a message to a shard channel", cmdPublish, nil)
	table["spublish"].spec.Write = true
}

// WatchStamp returns key's stamp as of a state at log index applied or
// later: one more than the log index of the last write to it, or, if the
// key is absent (or expired at nowMs), absentStamp|applied. It also says
// whether the absent key must be registered (KVORUM.WATCHREG) before the
// WATCH answers, so that a FLUSHALL does not abort the transaction for
// nothing (tomb.go).
func WatchStamp(r pebble.Reader, key []byte, nowMs int64, applied uint64) (stamp uint64, register bool, err error) {
	x := getCtx(r, nil, nowMs)
	defer putCtx(x)
	rec, ok, err := x.loadHeader(key)
	if err != nil || ok {
		return rec.mod + 1, false, err
	}
	reg, err := WatchRegistered(r, key, nowMs)
	return absentStamp | applied, !reg, err
}

// absentStamp marks the stamp of a key absent at WATCH: the rest is a log
// index A such that the key was absent in the state at A (the applied index
// of the node before it read; before registrations, the key's last
// deletion or FLUSHALL, which is such an index too).
const absentStamp = 1 << 63

// watchUnchanged reports whether key is as it was when WATCH gave it
// stamp. A live key: its last write is the same. A key absent at WATCH, at
// state A: it was not written after A (a record written after A, even
// expired now, or a record that is live now), not deleted after A (its
// tombstone), no collection of tombstones ran after A (it may have dropped
// one), and every FLUSHALL after A found it registered (so it left a
// tombstone if it deleted the key). A deletion of another key, or a
// FLUSHALL while the key was absent, changes none of these: as in Redis,
// they do not abort the transaction.
func (x *ctx) watchUnchanged(key []byte, stamp uint64) (bool, error) {
	if stamp&absentStamp == 0 {
		rec, ok, err := x.loadHeader(key)
		return ok && rec.mod+1 == stamp, err
	}
	a := stamp &^ absentStamp
	rec, had, err := x.raw(key, false)
	if err != nil || (had && (rec.mod > a || !rec.expired(x.now))) {
		return false, err
	}
	if del, err := x.tomb(key); err != nil || del > a {
		return false, err
	}
	if _, gc, err := x.tombFloor(); err != nil || gc > a {
		return false, err
	}
	flush, err := x.indexKey(x.rangeKey(rangeFlush))
	if err != nil || flush <= a {
		return err == nil, err
	}
	f0, ok, err := x.registration(key)
	return ok && f0 <= a, err
}

// EncodeExec builds the KVORUM.EXEC command for a transaction: keys[i]
// was watched at stamps[i]; cmds are the queued data commands.
func EncodeExec(keys [][]byte, stamps []uint64, cmds [][][]byte) [][]byte {
	n := 2 + 2*len(keys)
	for _, c := range cmds {
		n += 1 + len(c)
	}
	args := make([][]byte, 0, n)
	args = append(args, []byte("KVORUM.EXEC"), strconv.AppendInt(nil, int64(len(keys)), 10))
	for i, k := range keys {
		args = append(args, k, strconv.AppendUint(nil, stamps[i], 10))
	}
	for _, c := range cmds {
		args = append(args, strconv.AppendInt(nil, int64(len(c)), 10))
		args = append(args, c...)
	}
	return args
}

var errBadExec = Error("ERR internal: malformed KVORUM.EXEC")

func cmdExec(x *ctx, args [][]byte) Reply {
	nw, ok := redisnum.ParseInt(args[1])
	if !ok || nw < 0 || int64(len(args)-2) < 2*nw {
		return errBadExec
	}
	i := 2
	for ; i < 2+2*int(nw); i += 2 {
		want, err := strconv.ParseUint(string(args[i+1]), 10, 64)
		if err != nil {
			return errBadExec
		}
		same, err := x.watchUnchanged(args[i], want)
		if err != nil {
			return errReply(err)
		}
		if !same {
			return NilArray
		}
	}
	var cmds [][][]byte
	for i < len(args) {
		argc, ok := redisnum.ParseInt(args[i])
		if !ok || argc < 1 || int64(len(args)-i-1) < argc {
			return errBadExec
		}
		cmds = append(cmds, args[i+1:i+1+int(argc)])
		i += 1 + int(argc)
	}
	out := make([]Reply, len(cmds))
	for j, c := range cmds {
		if r, denied := x.execPermission(c); denied {
			out[j] = r // acl.go: the users changed since EXEC was sent
			continue
		}
		out[j] = x.call(c)
	}
	return Array(out...)
}

func cmdPublish(x *ctx, args [][]byte) Reply {
	x.fx.published(eq(args[0], "spublish"), args[1], args[2])
	// The node that answers the client replaces this with the number of
	// its subscribers the message reaches (see ForEachPublish).
	return Int(0)
}

// CheckQueued validates a command queued inside MULTI the way Redis does
// at queue time: known command, arity and kvorum's size limits. Option
// syntax is checked when EXEC runs, where Redis checks it too.
func CheckQueued(args [][]byte, lim Limits) (Reply, bool) {
	if len(args) == 0 {
		return Error("ERR empty command"), false
	}
	d := lookup(args[0])
	if d == nil || d.internal {
		return reply.UnknownCommand(args), false
	}
	return checkWith(d, args, lim, nil)
}

// RewriteExec returns the KVORUM.EXEC args with each queued command c
// replaced by f(c) where f reports a change, its watched keys and stamps
// as they are, and true; args itself and false if f changed none or args
// is malformed.
func RewriteExec(args [][]byte, f func(c [][]byte) ([][]byte, bool)) ([][]byte, bool) {
	queued := execQueued(args)
	if queued == nil {
		return args, false
	}
	changed := false
	for i, c := range queued {
		if nc, ok := f(c); ok {
			queued[i] = nc
			changed = true
		}
	}
	if !changed {
		return args, false
	}
	nw, _ := strconv.Atoi(string(args[1]))
	out := make([][]byte, 0, len(args)+len(queued))
	out = append(out, args[:2+2*nw]...)
	for _, c := range queued {
		out = append(out, strconv.AppendInt(nil, int64(len(c)), 10))
		out = append(out, c...)
	}
	return out, true
}

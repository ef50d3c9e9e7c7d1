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
// WATCH is checked at apply time: each watched key's stamp (WatchStamp, read
// at WATCH time after a linearizable read barrier) must still be the same,
// or EXEC replies with a null array and runs nothing. A key's stamp is the
// log index of the last write to it (plus one), so any write after
// WATCH, on any node, changes it; an absent key's stamp is its last
// deletion (see watchStamp).

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

// WatchStamp returns key's stamp: 0 if absent (or expired at nowMs), else
// one more than the log index of the last write to it.
func WatchStamp(r pebble.Reader, key []byte, nowMs int64) (uint64, error) {
	x := getCtx(r, nil, nowMs)
	defer putCtx(x)
	return x.watchStamp(key)
}

// watchStamp is what WATCH remembers of a key and EXEC compares: any
// write or deletion of the key in between changes it. A live key's stamp
// is the log index of its last write (+1). An absent key's stamp has the
// top bit set and holds the index of the key's last deletion (its
// tombstone, tomb.go) or the last FLUSHALL, whichever is later, so that a
// key absent at WATCH that is created and deleted again before EXEC still
// aborts it, as in Redis, and a deletion of any other key does not.
func (x *ctx) watchStamp(key []byte) (uint64, error) {
	rec, ok, err := x.loadHeader(key)
	if err != nil {
		return 0, err
	}
	if ok {
		return rec.mod + 1, nil
	}
	del, err := x.tomb(key)
	if err != nil {
		return 0, err
	}
	flush, err := x.indexKey(flushKey)
	if err != nil {
		return 0, err
	}
	return 1<<63 | max(del, flush), nil
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
		got, serr := x.watchStamp(args[i])
		if serr != nil {
			return errReply(serr)
		}
		if got != want {
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

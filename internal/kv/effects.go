package kv

import (
	"strconv"

	"github.com/kvorum/kvorum/internal/reply"
)

// Effects is what applied commands did besides their replies and their
// writes to the batch, as data for the node to act on once the entry is
// committed: the keys whose records changed (clients blocked on them are
// woken), the messages published (delivered to the node's subscribers)
// and the leases granted, renewed or gone (the leader times expiries).
//
// Apply appends to the Effects its Env carries. Nested commands (the
// commands of a KVORUM.EXEC, a script's redis.call, FENCED's command)
// append to the same Effects, so each list is in log order: entry by
// entry, command by command, and within a command in the order it did
// things. The lists are independent: nothing orders a written key against
// a published message.
//
// The byte slices point into the Effects' own buffer, not into the
// command's arguments or kv's scratch space, so they stay valid after
// Apply returns, until Reset. Reset keeps the memory: an Effects reused
// round after round stops allocating once it has grown to a round's size,
// and a command that publishes nothing allocates nothing for it.
type Effects struct {
	// Written holds every key whose record a command changed (created,
	// modified or deleted), once per change, and LockWaitKey(name) for each
	// change of a lock's holders or queue.
	Written [][]byte
	// Published holds every PUBLISH and SPUBLISH.
	Published []Message
	// Leases holds every lease granted or renewed (TTLMs > 0, RenewIdx =
	// the index of the entry that did it) or gone (TTLMs = 0).
	Leases []LeaseInfo
	// Expired counts the keys deleted because their TTL passed (INFO
	// expired_keys).
	Expired int
	// Looked counts the read lookups made at apply (INFO keyspace_hits
	// and keyspace_misses): those of read commands inside MULTI/EXEC and
	// scripts, and of the keys write commands read (GETDEL, SET ... GET,
	// the *STORE sources, ...). Every replica counts them; the node
	// reports them while it leads, so that each is counted once.
	Looked Lookups

	buf []byte // what Written and Published point into
}

// Message is one applied PUBLISH (or, Shard, SPUBLISH).
type Message struct {
	Shard            bool
	Channel, Payload []byte
}

// Empty reports whether e records nothing (nil included).
func (e *Effects) Empty() bool {
	return e == nil || len(e.Written) == 0 && len(e.Published) == 0 && len(e.Leases) == 0 && e.Expired == 0 && e.Looked.Hits+e.Looked.Misses == 0
}

// Reset empties e for reuse, keeping its memory unless a large round made
// it grow beyond what later rounds are likely to need.
func (e *Effects) Reset() {
	clear(e.Written) // drop references to buffers Reset may release
	clear(e.Published)
	e.Written, e.Published, e.Leases, e.buf, e.Expired = e.Written[:0], e.Published[:0], e.Leases[:0], e.buf[:0], 0
	e.Looked = Lookups{}
	if cap(e.buf) > maxKeptEffects {
		e.buf = nil
	}
	if cap(e.Written) > maxKeptEffects/64 {
		e.Written = nil
	}
	if cap(e.Published) > maxKeptEffects/64 {
		e.Published = nil
	}
	if cap(e.Leases) > maxKeptEffects/64 {
		e.Leases = nil
	}
}

// maxKeptEffects bounds the buffer bytes an Effects keeps across Reset.
const maxKeptEffects = 1 << 20

// keep copies b into e's buffer. A slice handed out earlier stays valid
// when the buffer grows: the old array is left as it was.
func (e *Effects) keep(b []byte) []byte {
	start := len(e.buf)
	e.buf = append(e.buf, b...)
	return e.buf[start:len(e.buf):len(e.buf)]
}

func (e *Effects) wrote(key []byte) {
	if e != nil {
		e.Written = append(e.Written, e.keep(key))
	}
}

func (e *Effects) published(shard bool, channel, payload []byte) {
	if e != nil {
		e.Published = append(e.Published, Message{Shard: shard, Channel: e.keep(channel), Payload: e.keep(payload)})
	}
}

func (e *Effects) lease(id, renewIdx uint64, ttlMs int64) {
	if e != nil {
		e.Leases = append(e.Leases, LeaseInfo{ID: id, RenewIdx: renewIdx, TTLMs: ttlMs})
	}
}

// ForEachPublish calls fn with each successful PUBLISH or SPUBLISH among
// cmds, a run of write commands, and replies, their replies: at top level
// and queued in a transaction (KVORUM.EXEC), not inside scripts. r points
// at the command's reply, the placeholder 0 that Apply gives it: the
// receiver count depends on the node that answers the client, so that
// node decides it (package server, publishReplies).
func ForEachPublish(cmds [][][]byte, replies []Reply, fn func(shard bool, channel []byte, r *Reply)) {
	for i, args := range cmds {
		if i >= len(replies) || len(args) == 0 {
			return
		}
		switch len(args[0]) {
		case len("publish"), len("spublish"), len("kvorum.exec"):
		default:
			continue // cheap: most commands of a run are none of them
		}
		d := lookup(args[0])
		switch {
		case d == nil:
		case d.spec.Name == "publish" || d.spec.Name == "spublish":
			if r := &replies[i]; r.Kind == reply.KindInt && len(args) == 3 {
				fn(d.spec.Name == "spublish", args[1], r)
			}
		case d.spec.Name == "kvorum.exec" && replies[i].Kind == reply.KindArray:
			queued := execQueued(args)
			if len(queued) == len(replies[i].Elems) {
				ForEachPublish(queued, replies[i].Elems, fn)
			}
		}
	}
}

// execQueued returns the commands of a well-formed KVORUM.EXEC (see
// EncodeExec), nil otherwise.
func execQueued(args [][]byte) [][][]byte {
	if len(args) < 2 {
		return nil
	}
	nw, err := strconv.Atoi(string(args[1]))
	if err != nil || nw < 0 || len(args)-2 < 2*nw {
		return nil
	}
	var cmds [][][]byte
	for i := 2 + 2*nw; i < len(args); {
		argc, err := strconv.Atoi(string(args[i]))
		if err != nil || argc < 1 || len(args)-i-1 < argc {
			return nil
		}
		cmds = append(cmds, args[i+1:i+1+argc])
		i += 1 + argc
	}
	return cmds
}

package kv

import (
	"bytes"
	"encoding/binary"
	"strconv"

	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/slot"
	"github.com/kvorum/kvorum/internal/streamargs"
)

// Blocked clients served in order (first come, first served), across
// connections and nodes.
//
// A node runs a client's blocking pop (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH,
// BLMPOP, BZPOPMIN, BZPOPMAX, BZMPOP, XREADGROUP BLOCK) as KVORUM.BLOCK <waiter> <command>:
// waiter is the client's wait, unique in the cluster (node id, the node
// process's boot id, a sequence number). Each key has a replicated queue
// of the waits blocked on it, in the order their first attempt applied.
// A wait may pop from a key only when no live wait is ahead of it in the
// key's queue; the command runs with the other keys left out. If it pops,
// the wait leaves every queue; if not, it joins the queues of its keys
// (once). The node retries the command whenever one of its keys is
// written, so when a push comes every waiting client retries and only the
// head of the queue pops: the others find the key empty or wait their
// turn, and the head's pop wakes them again.
//
// A wait is live while its node says so: every node with blocked clients
// proposes KVORUM.ALIVE <node> <boot> every second; a wait whose node has
// not done so for blockGraceMs (crashed, cut off, restarted with a new
// boot id) is skipped and dropped by the next wait behind it, so a dead
// client never holds a queue for long. A wait that ends without popping
// (timeout, CLIENT UNBLOCK, disconnect) is removed by KVORUM.UNBLOCK.
// Nothing is popped on behalf of a client that is not waiting for the
// reply: a pop happens only in the apply of the client's own attempt.
//
//	'w' <len(key):4> <key> [<group>] <seq:8>   a wait on key (XREADGROUP: of group): the waiter id (24 bytes)
//	'N' <node:8>                     a node's liveness: boot (8), last seen (8, Unix ms)

// The waits are per slot (hidden.go), 0x11 <slot of key:2> 0x00 0x00
// before the 'w', so a key's queue moves with its slot; liveness is
// global (range 1's 0x10 0x00 0x00 'N').
var alivePrefix = []byte{userPrefix, 0x00, 0x00, 'N'}

// blockGraceMs is how long a node's waits stay live after its last
// KVORUM.ALIVE (the node renews it every second).
const blockGraceMs = 5000

// WaiterID is the id of one client's wait: KVORUM.BLOCK's argument.
func WaiterID(node, boot, seq uint64) []byte {
	b := make([]byte, 24)
	binary.BigEndian.PutUint64(b, node)
	binary.BigEndian.PutUint64(b[8:], boot)
	binary.BigEndian.PutUint64(b[16:], seq)
	return b
}

// BlockYield is KVORUM.BLOCK's reply when the command found data it may
// not take yet (a live wait is ahead of it): the node tries again when
// the key is written or after a second. It never reaches a client.
const BlockYield = "KVORUM-BLOCK-YIELD"

func init() {
	def("kvorum.block", -3, "write", 0, 0, 0, "list", "Internal: a blocked client's attempt, in its keys' queues.", cmdBlock, nil)
	def("kvorum.unblock", -3, "write", 0, 0, 0, "list", "Internal: a blocked client stops waiting.", cmdUnblock, nil)
	def("kvorum.alive", 3, "write", 0, 0, 0, "list", "Internal: a node's blocked clients are live.", cmdAlive, nil)
	for _, n := range []string{"kvorum.block", "kvorum.unblock", "kvorum.alive"} {
		table[n].internal = true
	}
	specList = specList[:len(specList)-3]
}

// queuedPop describes a blocking pop for its queue: its keys, the type
// they must have, and how to run it on some of them only.
type queuedPop struct {
	keys  [][]byte
	typ   byte
	group []byte // XREADGROUP's group
	// only returns the command limited to the keys keep allows (in
	// order), or nil if it keeps none.
	only func(keep []bool) [][]byte
}

// queuedPopOf returns the queue description of a blocking pop,
// ok=false for anything else.
func queuedPopOf(args [][]byte) (q queuedPop, ok bool) {
	_, keys, ok := BlockingTimeout(args)
	if !ok {
		return q, false
	}
	q = queuedPop{keys: keys, typ: typeList}
	if args[0][1] == 'z' || args[0][1] == 'Z' {
		q.typ = typeZSet
	}
	switch {
	case eq(args[0], "xreadgroup"): // ... STREAMS key... id...: keys and their IDs
		a, _, _ := streamargs.ParseXReadGroup(args)
		q.typ, q.group = typeStream, a.Group
		q.only = func(keep []bool) [][]byte {
			out := append([][]byte{}, args[:a.Streams]...)
			var ids [][]byte
			for i, k := range keys {
				if keep[i] {
					out, ids = append(out, k), append(ids, args[a.Streams+a.NKeys+i])
				}
			}
			if len(ids) == 0 {
				return nil
			}
			return append(out, ids...)
		}
	case eq(args[0], "blmove") || eq(args[0], "brpoplpush"): // one source key
		q.only = func(keep []bool) [][]byte {
			if !keep[0] {
				return nil
			}
			return args
		}
	case eq(args[0], "blmpop") || eq(args[0], "bzmpop"): // cmd timeout numkeys key... rest
		q.only = func(keep []bool) [][]byte {
			out := [][]byte{args[0], args[1], nil}
			for i, k := range keys {
				if keep[i] {
					out = append(out, k)
				}
			}
			if len(out) == 3 {
				return nil
			}
			out[2] = strconv.AppendInt(nil, int64(len(out)-3), 10)
			return append(out, args[3+len(keys):]...)
		}
	default: // cmd key... timeout
		q.only = func(keep []bool) [][]byte {
			out := [][]byte{args[0]}
			for i, k := range keys {
				if keep[i] {
					out = append(out, k)
				}
			}
			if len(out) == 1 {
				return nil
			}
			return append(out, args[len(args)-1])
		}
	}
	return q, true
}

// streamHasNew reports whether stream k has entries its group has not
// been delivered (what a waiting XREADGROUP ... > would read).
func (x *ctx) streamHasNew(k, group []byte) (bool, error) {
	s, g, err := x.findGroup(k, group)
	if err != nil || g == nil {
		return false, err
	}
	return s.st.Last.Cmp(g.Last) > 0, nil
}

// BlockingNull is the reply a blocking pop gives when it times out.
func BlockingNull(args [][]byte) Reply {
	if eq(args[0], "blmove") || eq(args[0], "brpoplpush") {
		return Nil
	}
	return NilArray
}

// waitQueue is the prefix of the queue of the waits on key (of XREADGROUP
// consumers of group: consumers of different groups do not wait for each
// other, as in Redis).
func waitQueue(key, group []byte) []byte {
	b := appendSlotHidden(make([]byte, 0, slotHiddenLen+4+len(key)+len(group)+8), slot.Of(key), slotWait)
	b = binary.BigEndian.AppendUint32(b, uint32(len(key)))
	return append(append(b, key...), group...)
}

// waitLive reports whether wait id's node has said recently that its
// process (the boot in id) is up.
func (x *ctx) waitLive(id []byte) (bool, error) {
	v, ok, err := getCopy(x.r, append(append([]byte{}, alivePrefix...), id[:8]...))
	if err != nil || !ok || len(v) != 16 {
		return false, err
	}
	return bytes.Equal(v[:8], id[8:16]) && int64(binary.BigEndian.Uint64(v[8:])) >= x.now-blockGraceMs, nil
}

// queuePos looks at key's queue for wait id: mine is its entry (nil if it
// has none); first is whether no live wait is ahead of it. Entries of
// dead waits found ahead of it are dropped.
func (x *ctx) queuePos(key, group, id []byte) (mine []byte, first bool, err error) {
	q := waitQueue(key, group)
	var dead [][]byte
	first = true
	err = iterPrefix(x.r, q, func(k, v []byte) error {
		if len(k) != len(q)+8 || !first || mine != nil {
			return nil
		}
		if bytes.Equal(v, id) {
			mine = append([]byte{}, k...)
			return nil
		}
		live, err := x.waitLive(v)
		if live {
			first = false
		} else if err == nil {
			dead = append(dead, append([]byte{}, k...))
		}
		return err
	})
	for _, k := range dead {
		if err == nil {
			err = x.w.Delete(k, nil)
		}
	}
	return mine, first, err
}

// cmdBlock: KVORUM.BLOCK waiter command...
func cmdBlock(x *ctx, args [][]byte) Reply {
	id, cmd := args[1], args[2:]
	q, ok := queuedPopOf(cmd)
	if len(id) != 24 || !ok {
		return Error("ERR KVORUM.BLOCK: not a blocking pop")
	}
	keep := make([]bool, len(q.keys))
	entries := make([][]byte, len(q.keys))
	yield := false
	for i, k := range q.keys {
		mine, first, err := x.queuePos(k, q.group, id)
		if err != nil {
			return errReply(err)
		}
		entries[i] = mine
		rec, exists, err := x.loadHeader(k)
		if err != nil {
			return errReply(err)
		}
		// A waiting client stays blocked on a key that is now of another
		// type (Redis serves it only from a key of the right type).
		keep[i] = first && !(mine != nil && exists && rec.typ != q.typ)
		if !first && exists && rec.typ == q.typ && q.typ != typeStream {
			yield = true // a list or sorted set that exists has elements
		} else if !first && exists && rec.typ == q.typ {
			newer, err := x.streamHasNew(k, q.group)
			if err != nil {
				return errReply(err)
			}
			yield = yield || newer
		}
	}
	r := BlockingNull(cmd)
	if run := q.only(keep); run != nil {
		r = x.call(run)
	}
	if r.Kind != reply.KindNil && r.Kind != reply.KindNilArray {
		// Served (or an error): out of every queue.
		for _, e := range entries {
			if e != nil {
				if err := x.w.Delete(e, nil); err != nil {
					return errReply(err)
				}
			}
		}
		return r
	}
	for i, k := range q.keys {
		if entries[i] != nil {
			continue
		}
		seq, err := x.newVersion()
		if err != nil {
			return errReply(err)
		}
		e := binary.BigEndian.AppendUint64(waitQueue(k, q.group), seq)
		if err := x.w.Set(e, id, nil); err != nil {
			return errReply(err)
		}
	}
	if yield {
		return Status(BlockYield)
	}
	return r
}

// cmdUnblock: KVORUM.UNBLOCK waiter command... (the blocking pop the
// wait ran). The wait leaves its keys' queues; the keys are touched, so
// that the waits behind it try again.
func cmdUnblock(x *ctx, args [][]byte) Reply {
	q, ok := queuedPopOf(args[2:])
	if !ok {
		return Error("ERR KVORUM.UNBLOCK: not a blocking pop")
	}
	for _, k := range q.keys {
		mine, _, err := x.queuePos(k, q.group, args[1])
		if err == nil && mine != nil {
			err = x.w.Delete(mine, nil)
		}
		if err != nil {
			return errReply(err)
		}
		x.touched(k)
	}
	return OK
}

// cmdAlive: KVORUM.ALIVE node boot (8 bytes each): the node's waits are
// live, those of its earlier boots dead.
func cmdAlive(x *ctx, args [][]byte) Reply {
	if len(args[1]) != 8 || len(args[2]) != 8 {
		return errSyntax
	}
	v := binary.BigEndian.AppendUint64(append([]byte{}, args[2]...), uint64(x.now))
	if err := x.w.Set(append(append([]byte{}, alivePrefix...), args[1]...), v, nil); err != nil {
		return errReply(err)
	}
	return OK
}

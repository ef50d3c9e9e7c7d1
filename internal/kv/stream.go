package kv

import (
	"math"
	"strconv"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/notify"
	"github.com/kvorum/kvorum/internal/streamargs"
	"github.com/kvorum/kvorum/internal/streamid"
	"github.com/kvorum/kvorum/internal/streamrec"
)

// Streams (Redis 7.0 semantics, without consumer groups).
//
// A stream is a collection (type tag typeStream) whose metadata value is
// the stream's state (streamrec.State, fixed size) and whose elements live
// under the collection's version: entries ('e' and the ID) and "node"
// records ('n' and the node id); their keys and encodings are package
// streamrec's.
//
// Entries sort by ID, so XRANGE/XREVRANGE/XREAD are one iteration and
// XADD/XDEL point writes. The state's first 8 bytes are the length, so
// coll.length works for streams as for the other collections. Unlike the
// other collections an emptied stream is not deleted (as in Redis): writes
// save the record with x.store, never saveColl.
//
// Nodes. Redis keeps a stream as a radix tree of listpacks ("nodes"),
// keyed by their first ("master") entry's ID; XADD appends to the last
// node unless it holds stream-node-max-entries entries (deleted ones
// count) or its listpack plus the new entry's raw field and value lengths
// reaches stream-node-max-bytes (streamAppendItem); approximate trimming
// (MAXLEN/MINID ~) removes whole nodes only. kvorum keeps a node record
// per node (streamrec.Node) with its live entries, the last ID ever added,
// its master ID and fields, the entries ever added and the size its
// listpack would have in Redis (streamrec's listpack.go), and decides as
// Redis does with the cluster's two parameters (Settings.streamNode). The
// tail node is the last node record: when XDEL removes the tail node's
// last live entry the node goes and the node before it is the tail again,
// as in Redis. An exact trim that stops inside a node only deletes
// entries, as Redis marks them deleted: the node stays even with no live
// entry left. Node ids are the ordinal of their first entry among all
// entries ever appended to this incarnation (state field appended, not
// touched by XSETID), so node records sort as Redis's radix tree keys.
// XINFO STREAM reports radix-tree-keys as the number of nodes and
// radix-tree-nodes as the node count of the radix tree rax would build of
// their master IDs (streamrec.RaxNodes, one pass over the node records).
// Node records written before kvorum kept sizes (24 bytes) count as full:
// the next XADD starts a new node.
//
// Consumer groups (stream_group.go) are elements of the same incarnation
// with the kinds 'g' (groups), 'c' (consumers), 'p' (a group's pending
// entries) and 'q' (a consumer's pending entries). Group changes do not
// rewrite the metadata record, so, as in Redis, they do not touch the key
// for WATCH (XGROUP CREATE MKSTREAM creating the stream does). The state's
// groups counter is unused. RENAME/COPY/DEL carry or drop every
// element of the incarnation whatever its kind, so groups follow the
// stream (COPY copies them, as Redis 7.0's streamDup does) and go with it
// when it is deleted or expires.
//
// XREAD is a read. Its BLOCK form is served by the node (StreamBlocking,
// XReadResolve): the kernel itself never blocks, so inside MULTI or a
// script XREAD BLOCK behaves as a non-blocking XREAD. XREAD and
// XREADGROUP reply with a NestedMap (RESP3 map, RESP2 array of [key,
// entries]). XREADGROUP is a write (it moves the group's last-delivered
// ID and fills the PEL): its BLOCK form is served by the node's blocking
// write loop (BlockingTimeout), inside MULTI or a script it never blocks.

// xreadBlockedDefaultCount is the COUNT Redis applies to an XREAD that
// blocked without one (XREAD_BLOCKED_DEFAULT_COUNT).
const xreadBlockedDefaultCount = 1000

func init() {
	const g = "stream"
	defParsed("xadd", -5, "write denyoom fast", 1, 1, 1, g, "Appends a new message to a stream. Creates the key if it doesn't exist.", streamargs.ParseXAdd, cmdXAdd)
	def("xlen", 2, "readonly fast", 1, 1, 1, g, "Return the number of messages in a stream.", cmdXLen, nil)
	defParsed("xrange", -4, "readonly", 1, 1, 1, g, "Returns the messages from a stream within a range of IDs.", streamargs.ParseXRange, cmdXRange)
	defParsed("xrevrange", -4, "readonly", 1, 1, 1, g, "Returns the messages from a stream within a range of IDs in reverse order.", streamargs.ParseXRange, cmdXRange)
	def("xdel", -3, "write fast", 1, 1, 1, g, "Returns the number of messages after removing them from a stream.", cmdXDel, nil)
	defParsed("xtrim", -4, "write", 1, 1, 1, g, "Deletes messages from the beginning of a stream.", streamargs.ParseXTrim, cmdXTrim)
	defParsed("xsetid", -3, "write denyoom fast", 1, 1, 1, g, "An internal command for replicating stream values.", streamargs.ParseXSetID, cmdXSetID)
	defParsed("xread", -4, "readonly blocking movablekeys", 0, 0, 0, g, "Returns messages from multiple streams with IDs greater than the ones requested. Blocks until a message is available otherwise.", streamargs.ParseXRead, cmdXRead)
	defParsed("xinfo", -2, "", 0, 0, 0, g, "A container for stream introspection commands.", streamargs.ParseXInfo, cmdXInfo)
}

// Error texts of the stream commands (Redis 7.0).
var (
	errStreamIDSmaller = Error("ERR The ID specified in XADD is equal or smaller than the target stream top item")
	errStreamExhausted = Error("ERR The stream has exhausted the last possible ID, unable to add more items")
	errStreamTooLarge  = Error("ERR Elements are too large to be stored")
	errXReadGT         = Error("ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.")
	errXSetIDSmaller   = Error("ERR The ID specified in XSETID is smaller than the target stream top item")
	errXSetIDLength    = Error("ERR The entries_added specified in XSETID is smaller than the target stream length")
)

// idReply is an ID's reply, a bulk string <ms>-<seq>.
func idReply(id streamid.ID) Reply { return Bulk(id.AppendTo(make([]byte, 0, 24))) }

// stream is a loaded stream.
type stream struct {
	c  *coll
	st streamrec.State
}

// loadStream loads k as a stream: ok=false if absent; a non-nil error is
// errTypeMismatch or a storage error (see errReply).
func (x *ctx) loadStream(k []byte) (*stream, bool, error) {
	c, ok, err := x.loadColl(k, typeStream)
	if err != nil || !ok {
		return nil, false, err
	}
	return &stream{c: c, st: streamrec.DecodeState(c.rec.value)}, true, nil
}

// createStream returns a new empty stream for k (saved by saveStream).
func (x *ctx) createStream(k []byte) (*stream, error) {
	v, err := x.newVersion()
	if err != nil {
		return nil, err
	}
	return &stream{c: &coll{key: k, rec: record{typ: typeStream, version: v}}}, nil
}

// saveStream writes the metadata record, even for an empty stream (Redis
// keeps empty streams). It also stamps the key for WATCH and wakes XREAD
// BLOCK waiters.
func (x *ctx) saveStream(s *stream) error {
	s.c.rec.value = s.st.Encode()
	return x.store(s.c.key, &s.c.rec)
}

func (x *ctx) getNode(s *stream, node uint64) (streamrec.Node, bool, error) {
	v, ok, err := x.getElem(s.c, streamrec.NodeElem(node))
	if err != nil || !ok {
		return streamrec.Node{ID: node}, false, err
	}
	n, ok := streamrec.DecodeNode(node, v)
	return n, ok, nil
}

func (x *ctx) putNode(s *stream, n streamrec.Node) error {
	return x.setElem(s.c, streamrec.NodeElem(n.ID), n.Encode())
}

// dropNode deletes node n's record after its last live entry went. If it
// was the tail node, the node before it (if any) is the tail again, as
// Redis's next XADD finds the last listpack of its radix tree.
func (x *ctx) dropNode(s *stream, node uint64) error {
	s.st.Nodes--
	if err := x.delElem(s.c, streamrec.NodeElem(node)); err != nil {
		return err
	}
	if node != s.st.TailNode {
		return nil
	}
	s.st.TailCount = 0 // no tail: the next XADD starts a node
	if s.st.Nodes == 0 {
		return nil
	}
	return x.iterElems(s.c, []byte{streamrec.KindNode}, streamrec.NodeElem(node), true, func(elem, v []byte) bool {
		n, ok := streamrec.DecodeNodeElem(elem, v)
		if !ok || n.ID >= node {
			return true
		}
		if n.Exact {
			s.st.TailNode, s.st.TailCount = n.ID, n.Added
		}
		return false
	})
}

// entryReply builds [id, [field, value, ...]] from an entry's element
// key and value (copied).
func entryReply(elem, v []byte) Reply {
	id, _ := streamrec.EntryID(elem)
	fields := streamrec.EntryFields(v)
	out := make([]Reply, len(fields))
	for i, f := range fields {
		out[i] = Bulk(f)
	}
	return Array(idReply(id), Array(out...))
}

// rangeEntries returns the entries with start <= ID <= end, in order (reverse
// if rev), at most count of them (0: all).
func (x *ctx) rangeEntries(s *stream, start, end streamid.ID, count int64, rev bool) ([]Reply, error) {
	out := []Reply{}
	if start.Cmp(end) > 0 || s.st.Length == 0 {
		return out, nil
	}
	from := streamrec.EntryElem(start)
	if rev {
		from = streamrec.EntryElem(end)
	}
	err := x.iterElems(s.c, []byte{streamrec.KindEntry}, from, rev, func(elem, v []byte) bool {
		id, ok := streamrec.EntryID(elem)
		if !ok {
			return true
		}
		if (!rev && id.Cmp(end) > 0) || (rev && id.Cmp(start) < 0) {
			return false
		}
		out = append(out, entryReply(elem, v))
		return count == 0 || int64(len(out)) < count
	})
	return out, err
}

// refreshFirst sets the state's recorded first entry after a deletion
// (gone: the first entry may be among the deleted).
func (x *ctx) refreshFirst(s *stream, gone bool) (err error) {
	switch {
	case s.st.Length == 0:
		s.st.First = streamid.ID{}
	case gone:
		s.st.First, _, err = x.edgeEntry(s, false)
	}
	return err
}

// edgeEntry returns the first (or last) live entry's ID; ok=false if none.
func (x *ctx) edgeEntry(s *stream, last bool) (streamid.ID, bool, error) {
	var id streamid.ID
	found := false
	err := x.iterElems(s.c, []byte{streamrec.KindEntry}, nil, last, func(elem, _ []byte) bool {
		id, found = streamrec.EntryID(elem)
		return !found
	})
	return id, found, err
}

func cmdXAdd(x *ctx, args [][]byte, a streamargs.AddTrim) Reply {
	s, exists, err := x.loadStream(args[1])
	if err != nil {
		return errReply(err)
	}
	if !exists {
		if a.NoMkStream {
			return Nil
		}
		if s, err = x.createStream(args[1]); err != nil {
			return errReply(err)
		}
	}
	st := &s.st
	if st.Last == streamid.Max {
		return errStreamExhausted
	}
	var id streamid.ID
	switch {
	case !a.IDGiven:
		// streamNextID with the log's clock instead of mstime().
		now := uint64(max(x.now, 0))
		if now > st.Last.Ms {
			id = streamid.ID{Ms: now}
		} else {
			id, _ = st.Last.Incr()
		}
	case a.SeqGiven:
		id = a.ID
	case st.Last.Ms == a.ID.Ms:
		if st.Last.Seq == math.MaxUint64 {
			return errStreamTooLarge // Redis reports this case so (errno is not EDOM)
		}
		id = streamid.ID{Ms: st.Last.Ms, Seq: st.Last.Seq + 1}
	default:
		id = a.ID
	}
	if id.Cmp(st.Last) <= 0 {
		return errStreamIDSmaller
	}
	if err := x.appendEntry(s, id, args[a.FieldsPos:]); err != nil {
		return errReply(err)
	}
	var trimmed int64
	if a.Strategy != streamargs.TrimNone {
		if trimmed, err = x.streamTrim(s, &a); err != nil {
			return errReply(err)
		}
	}
	if err := x.saveStream(s); err != nil {
		return errReply(err)
	}
	x.event(notify.Stream, "xadd", args[1])
	if trimmed > 0 {
		x.event(notify.Stream, "xtrim", args[1])
	}
	return idReply(id)
}

// appendEntry appends entry id (greater than every ID of s) with its
// fields and values fv to s's tail node, or to a new node (see the comment
// at the top), and updates s's state (not saved): XADD, and RESTORE
// rebuilding a stream entry by entry.
func (x *ctx) appendEntry(s *stream, id streamid.ID, fv [][]byte) error {
	st := &s.st
	var node streamrec.Node
	joined := false
	if st.TailCount != 0 && st.Nodes > 0 {
		var err error
		if node, joined, err = x.getNode(s, st.TailNode); err != nil {
			return err
		}
		maxBytes, maxEntries := x.limits().streamNode()
		joined = joined && !node.Full(fv, maxBytes, maxEntries)
	}
	if !joined {
		st.TailNode = st.Appended
		st.Nodes++
		node = streamrec.NewNode(st.TailNode, id, fv)
	}
	node.Append(id, fv)
	st.TailCount = node.Added
	st.Appended++
	if err := x.putNode(s, node); err != nil {
		return err
	}
	if err := x.setElem(s.c, streamrec.EntryElem(id), streamrec.EncodeEntry(node.ID, fv)); err != nil {
		return err
	}
	st.Length++
	st.Added++
	st.Last = id
	if st.Length == 1 {
		st.First = id
	}
	return nil
}

// streamTrim is Redis's streamTrim: remove whole head nodes while the
// strategy allows it (and LIMIT, if any, is not exceeded); then, unless
// approximate, remove entries one by one from the next node. It updates
// s's state (not saved) and returns the number of entries removed.
func (x *ctx) streamTrim(s *stream, a *streamargs.AddTrim) (int64, error) {
	st := &s.st
	limit := a.Limit
	if a.DefaultLimit {
		_, maxEntries := x.limits().streamNode()
		limit = streamargs.DefaultLimit(maxEntries)
	}
	// Plan on the node records: the whole nodes to remove and the node to
	// trim into, if any.
	var whole []streamrec.Node
	var partial *streamrec.Node
	length := st.Length
	var planned uint64
	err := x.iterElems(s.c, []byte{streamrec.KindNode}, nil, false, func(elem, v []byte) bool {
		n, ok := streamrec.DecodeNodeElem(elem, v)
		if !ok {
			return true
		}
		if a.Strategy == streamargs.TrimMaxLen && length <= uint64(a.MaxLen) {
			return false
		}
		if limit != 0 && planned+n.Live > uint64(limit) {
			return false
		}
		var remove bool
		if a.Strategy == streamargs.TrimMaxLen {
			remove = length-n.Live >= uint64(a.MaxLen)
		} else {
			remove = n.Last.Cmp(a.MinID) < 0
		}
		if remove {
			whole = append(whole, n)
			length -= n.Live
			planned += n.Live
			return true
		}
		if !a.Approx {
			partial = &n
		}
		return false
	})
	if err != nil {
		return 0, err
	}
	// The whole nodes are the head of the stream: their entries are the
	// first `planned` ones.
	var deleted uint64
	var derr error
	if planned > 0 || partial != nil {
		err = x.iterElems(s.c, []byte{streamrec.KindEntry}, nil, false, func(elem, _ []byte) bool {
			id, ok := streamrec.EntryID(elem)
			if !ok {
				return true
			}
			if deleted >= planned {
				if partial == nil {
					return false
				}
				if a.Strategy == streamargs.TrimMaxLen && st.Length-deleted <= uint64(a.MaxLen) ||
					a.Strategy == streamargs.TrimMinID && id.Cmp(a.MinID) >= 0 {
					return false
				}
				partial.Live--
			}
			if derr = x.delElem(s.c, elem); derr != nil {
				return false
			}
			deleted++
			return true
		})
		if derr != nil {
			return 0, derr
		}
		if err != nil {
			return 0, err
		}
	}
	for _, n := range whole {
		if err := x.dropNode(s, n.ID); err != nil {
			return 0, err
		}
	}
	if partial != nil && deleted > planned {
		// Even with no live entry left the node stays (Redis only marks
		// its entries deleted here), and the next XADD may still join it.
		if err := x.putNode(s, *partial); err != nil {
			return 0, err
		}
	}
	st.Length -= deleted
	return int64(deleted), x.refreshFirst(s, deleted > 0)
}

func cmdXTrim(x *ctx, args [][]byte, a streamargs.AddTrim) Reply {
	s, exists, err := x.loadStream(args[1])
	if err != nil || !exists {
		return errOr(err, Int(0))
	}
	n, err := x.streamTrim(s, &a)
	if err != nil {
		return errReply(err)
	}
	if n > 0 {
		if err := x.saveStream(s); err != nil {
			return errReply(err)
		}
		x.event(notify.Stream, "xtrim", args[1])
	}
	return Int(n)
}

// cmdXLen reads the length that starts the stream's state.
func cmdXLen(x *ctx, args [][]byte) Reply { return collLength(x, args, typeStream) }

// --- XRANGE / XREVRANGE ---

func cmdXRange(x *ctx, args [][]byte, a streamargs.Range) Reply {
	s, exists, err := x.loadStream(args[1])
	if err != nil || !exists {
		return errOr(err, Array())
	}
	if a.Count == 0 {
		return NilArray
	}
	out, err := x.rangeEntries(s, a.Start, a.End, max(a.Count, 0), eq(args[0], "xrevrange"))
	if err != nil {
		return errReply(err)
	}
	return Array(out...)
}

// --- XDEL ---

func cmdXDel(x *ctx, args [][]byte) Reply {
	s, exists, err := x.loadStream(args[1])
	if err != nil || !exists {
		return errOr(err, Int(0))
	}
	// Redis parses every ID (after the key lookup) before deleting any.
	ids := make([]streamid.ID, len(args)-2)
	for i, a := range args[2:] {
		id, ok := streamid.ParseStrict(a)
		if !ok {
			return streamargs.ErrID
		}
		ids[i] = id
	}
	st := &s.st
	var deleted int64
	firstGone := false
	for _, id := range ids {
		v, had, err := x.getElem(s.c, streamrec.EntryElem(id))
		if err != nil {
			return errReply(err)
		}
		if !had {
			continue
		}
		if err := x.delElem(s.c, streamrec.EntryElem(id)); err != nil {
			return errReply(err)
		}
		node, ok, err := x.getNode(s, streamrec.EntryNode(v))
		if err != nil {
			return errReply(err)
		}
		if ok && node.Live > 1 {
			node.Live--
			err = x.putNode(s, node)
		} else if ok {
			err = x.dropNode(s, node.ID)
		}
		if err != nil {
			return errReply(err)
		}
		st.Length--
		if id == st.First {
			firstGone = true
		}
		if id.Cmp(st.MaxDel) > 0 {
			st.MaxDel = id
		}
		deleted++
	}
	if deleted == 0 {
		return Int(0)
	}
	if err := x.refreshFirst(s, firstGone); err != nil {
		return errReply(err)
	}
	if err := x.saveStream(s); err != nil {
		return errReply(err)
	}
	x.event(notify.Stream, "xdel", args[1])
	return Int(deleted)
}

// --- XSETID ---

func cmdXSetID(x *ctx, args [][]byte, a streamargs.SetID) Reply {
	s, exists, err := x.loadStream(args[1])
	if err != nil || !exists {
		return errOr(err, errNoSuchKey)
	}
	st := &s.st
	if st.Length > 0 {
		top, _, err := x.edgeEntry(s, true)
		if err != nil {
			return errReply(err)
		}
		if a.ID.Cmp(top) < 0 {
			return errXSetIDSmaller
		}
		if a.Added != -1 && st.Length > uint64(a.Added) {
			return errXSetIDLength
		}
	}
	st.Last = a.ID
	if a.Added != -1 {
		st.Added = uint64(a.Added)
	}
	if !a.MaxDel.IsZero() {
		st.MaxDel = a.MaxDel
	}
	if err := x.saveStream(s); err != nil {
		return errReply(err)
	}
	x.event(notify.Stream, "xsetid", args[1])
	return OK
}

// --- XREAD ---

// cmdXRead is XREAD without blocking: the entries after the given IDs, or
// a null array when no stream has any.
func cmdXRead(x *ctx, args [][]byte, a streamargs.XRead) Reply {
	streams := make([]*stream, a.NKeys)
	ids := make([]streamid.ID, a.NKeys)
	// As Redis: look each key up and parse its ID, in order.
	for i := 0; i < a.NKeys; i++ {
		s, exists, err := x.loadStream(args[a.Streams+i])
		if err != nil {
			return errReply(err)
		}
		if exists {
			streams[i] = s
		}
		idArg := args[a.Streams+a.NKeys+i]
		switch string(idArg) {
		case "$":
			if exists {
				ids[i] = s.st.Last
			}
			continue
		case ">":
			return errXReadGT
		}
		id, good := streamid.ParseStrict(idArg)
		if !good {
			return streamargs.ErrID
		}
		ids[i] = id
	}
	var out []Reply
	for i, s := range streams {
		if s == nil || s.st.Length == 0 {
			continue
		}
		top, found, err := x.edgeEntry(s, true)
		if err != nil {
			return errReply(err)
		}
		if !found || top.Cmp(ids[i]) <= 0 {
			continue
		}
		start, _ := ids[i].Incr()
		entries, err := x.rangeEntries(s, start, streamid.Max, a.Count, false)
		if err != nil {
			return errReply(err)
		}
		out = append(out, Bulk(args[a.Streams+i]), Array(entries...))
	}
	if len(out) == 0 {
		return NilArray
	}
	return NestedMap(out...)
}

// StreamBlocking reports whether args is an XREAD with BLOCK (and valid
// syntax), with its timeout (0: forever) and the keys whose writes may
// unblock it. The node serves it with reads: XReadResolve once, then the
// resolved command until it returns something (a non-null reply).
func StreamBlocking(args [][]byte) (timeout time.Duration, keys [][]byte, ok bool) {
	if len(args) == 0 {
		return 0, nil, false
	}
	d := lookup(args[0])
	if d == nil || d.spec.Name != "xread" || !arityOK(&d.spec, args) {
		return 0, nil, false
	}
	a, _, valid := streamargs.ParseXRead(args)
	if !valid || !a.Block {
		return 0, nil, false
	}
	return blockDuration(a.Timeout), args[a.Streams : a.Streams+a.NKeys], true
}

// withBlockedCount is args with "COUNT 1000" after the command's name:
// what Redis serves to a client that blocked in XREAD or XREADGROUP
// without a COUNT (XREAD_BLOCKED_DEFAULT_COUNT).
func withBlockedCount(args [][]byte) [][]byte {
	out := make([][]byte, 0, len(args)+2)
	out = append(out, args[0], []byte("COUNT"), []byte(strconv.Itoa(xreadBlockedDefaultCount)))
	return append(out, args[1:]...)
}

// XReadResolve prepares a blocking XREAD for the node's wait loop: first
// has every "$" replaced by the stream's current last ID (0-0 if the key
// is absent), read from r at nowMs; retry is first with "COUNT 1000" added
// when the command has no COUNT (what Redis serves to a client that
// blocked without one). If a key holds another type the command is
// returned unchanged: reading it replies with the error.
func XReadResolve(r pebble.Reader, args [][]byte, nowMs int64) (first, retry [][]byte) {
	a, _, ok := streamargs.ParseXRead(args)
	if !ok {
		return args, args
	}
	first = append([][]byte(nil), args...)
	x := getCtx(r, nil, nowMs)
	defer putCtx(x)
	for i := 0; i < a.NKeys; i++ {
		if string(args[a.Streams+a.NKeys+i]) != "$" {
			continue
		}
		s, exists, err := x.loadStream(args[a.Streams+i])
		if err != nil {
			return args, args
		}
		var id streamid.ID
		if exists {
			id = s.st.Last
		}
		first[a.Streams+a.NKeys+i] = id.AppendTo(nil)
	}
	retry = first
	if a.CountIdx == 0 {
		retry = withBlockedCount(first)
	}
	return first, retry
}

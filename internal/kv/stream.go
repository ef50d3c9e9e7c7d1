package kv

import (
	"math"
	"strconv"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/notify"
	"github.com/kvorum/kvorum/internal/redisnum"
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
// Nodes. Redis keeps a stream as a radix tree of listpacks ("nodes") of at
// most stream-node-max-entries (100) entries or stream-node-max-bytes
// (4096) bytes; approximate trimming (MAXLEN/MINID ~) removes whole nodes
// only. kvorum models the node layout by entry count: an entry joins the
// tail node unless 100 entries were already added to it (deleted ones
// count, as in Redis) or the tail node was removed (XDEL of its last live
// entry, or a trim of the whole node), and then starts a new node. An
// exact trim that stops inside a node only deletes entries, as Redis
// marks them deleted: the node stays even with no live entry left. Node ids are the ordinal of their
// first entry among all entries ever appended to this incarnation (state
// field appended, not touched by XSETID). Each node has a record with its
// live entry count and the last ID ever added to it (tombstones included,
// which is what Redis compares for MINID ~). The byte limit is not
// modelled: with entries larger than about 40 bytes Redis's nodes are
// smaller than kvorum's and Redis may trim more with ~ than kvorum does.
// The rule is deterministic and never trims more than the exact form
// (= or no modifier) would: only whole head nodes that the exact form
// would remove too. XINFO STREAM reports radix-tree-keys as the number of
// nodes and radix-tree-nodes as that plus one (Redis's count of internal
// radix tree nodes depends on the key bytes; it is not modelled).
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

const (
	// streamNodeMaxEntries is Redis's stream-node-max-entries default.
	streamNodeMaxEntries = 100
	// xreadBlockedDefaultCount is the COUNT Redis applies to an XREAD that
	// blocked without one (XREAD_BLOCKED_DEFAULT_COUNT).
	xreadBlockedDefaultCount = 1000
)

func init() {
	const g = "stream"
	defParsed("xadd", -5, "write denyoom fast", 1, 1, 1, g, "Appends a new message to a stream. Creates the key if it doesn't exist.", parseXAdd, cmdXAdd)
	def("xlen", 2, "readonly fast", 1, 1, 1, g, "Return the number of messages in a stream.", cmdXLen, nil)
	defParsed("xrange", -4, "readonly", 1, 1, 1, g, "Returns the messages from a stream within a range of IDs.", parseXRange, cmdXRange)
	defParsed("xrevrange", -4, "readonly", 1, 1, 1, g, "Returns the messages from a stream within a range of IDs in reverse order.", parseXRange, cmdXRange)
	def("xdel", -3, "write fast", 1, 1, 1, g, "Returns the number of messages after removing them from a stream.", cmdXDel, nil)
	defParsed("xtrim", -4, "write", 1, 1, 1, g, "Deletes messages from the beginning of a stream.", parseXTrim, cmdXTrim)
	defParsed("xsetid", -3, "write denyoom fast", 1, 1, 1, g, "An internal command for replicating stream values.", parseXSetID, cmdXSetID)
	defParsed("xread", -4, "readonly blocking movablekeys", 0, 0, 0, g, "Returns messages from multiple streams with IDs greater than the ones requested. Blocks until a message is available otherwise.", parseXRead, cmdXRead)
	defParsed("xinfo", -2, "", 0, 0, 0, g, "A container for stream introspection commands.", parseXInfo, cmdXInfo)
}

// Error texts of the stream commands (Redis 7.0).
var (
	errStreamID          = Error("ERR Invalid stream ID specified as stream command argument")
	errStreamIDSmaller   = Error("ERR The ID specified in XADD is equal or smaller than the target stream top item")
	errStreamIDZero      = Error("ERR The ID specified in XADD must be greater than 0-0")
	errStreamExhausted   = Error("ERR The stream has exhausted the last possible ID, unable to add more items")
	errStreamTooLarge    = Error("ERR Elements are too large to be stored")
	errStreamBothTrims   = Error("ERR syntax error, MAXLEN and MINID options at the same time are not compatible")
	errStreamMaxLenNeg   = Error("ERR The MAXLEN argument must be >= 0.")
	errStreamLimitNeg    = Error("ERR The LIMIT argument must be >= 0.")
	errStreamLimitNoTrim = Error("ERR syntax error, LIMIT cannot be used without specifying a trimming strategy")
	errStreamNoStrategy  = Error("ERR syntax error, XTRIM must be called with a trimming strategy")
	errStreamLimitExact  = Error("ERR syntax error, LIMIT cannot be used without the special ~ option")
	errStreamBadStart    = Error("ERR invalid start ID for the interval")
	errStreamBadEnd      = Error("ERR invalid end ID for the interval")
	errXReadUnbalanced   = Error("ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.")
	errXReadGroup        = Error("ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.")
	errXReadNoAck        = Error("ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.")
	errXReadGT           = Error("ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.")
	errXReadTimeoutInt   = Error("ERR timeout is not an integer or out of range")
	errXReadTimeoutNeg   = Error("ERR timeout is negative")
	errXSetIDEntries     = Error("ERR entries_added must be positive")
	errXSetIDMaxDel      = Error("ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id")
	errXSetIDSmaller     = Error("ERR The ID specified in XSETID is smaller than the target stream top item")
	errXSetIDLength      = Error("ERR The entries_added specified in XSETID is smaller than the target stream length")
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

// dropNode deletes node n's record after its last live entry went.
func (x *ctx) dropNode(s *stream, node uint64) error {
	s.st.Nodes--
	if node == s.st.TailNode {
		s.st.TailCount = 0 // Redis frees the listpack: the next XADD starts a node
	}
	return x.delElem(s.c, streamrec.NodeElem(node))
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

// --- XADD / XTRIM option parsing (streamParseAddOrTrimArgsOrReply) ---

const (
	trimNone = iota
	trimMaxLen
	trimMinID
)

type addTrimArgs struct {
	id        streamid.ID
	idGiven   bool
	seqGiven  bool
	noMk      bool
	strategy  int
	approx    bool
	limit     int64
	maxLen    int64
	minID     streamid.ID
	fieldsPos int // XADD: index of the first field
}

func parseAddTrim(args [][]byte, xadd bool) (a addTrimArgs, r Reply, ok bool) {
	i := 2
	limitGiven := false
	for ; i < len(args); i++ {
		more := len(args) - 1 - i
		opt := args[i]
		switch {
		case xadd && len(opt) == 1 && opt[0] == '*':
			goto done
		case (eq(opt, "maxlen") || eq(opt, "minid")) && more > 0:
			if a.strategy != trimNone {
				return a, errStreamBothTrims, false
			}
			a.approx = false
			next := args[i+1]
			if more >= 2 && len(next) == 1 && (next[0] == '~' || next[0] == '=') {
				a.approx = next[0] == '~'
				i++
			}
			if eq(opt, "maxlen") {
				n, good := redisnum.ParseInt(args[i+1])
				if !good {
					return a, errNotInt, false
				}
				if n < 0 {
					return a, errStreamMaxLenNeg, false
				}
				a.maxLen, a.strategy = n, trimMaxLen
			} else {
				id, good := streamid.ParseStrict(args[i+1])
				if !good {
					return a, errStreamID, false
				}
				a.minID, a.strategy = id, trimMinID
			}
			i++
		case eq(opt, "limit") && more > 0:
			n, good := redisnum.ParseInt(args[i+1])
			if !good {
				return a, errNotInt, false
			}
			if n < 0 {
				return a, errStreamLimitNeg, false
			}
			a.limit, limitGiven = n, true
			i++
		case xadd && eq(opt, "nomkstream"):
			a.noMk = true
		case xadd:
			id, seqGiven, good := streamid.Parse(opt, 0, true, true)
			if !good {
				return a, errStreamID, false
			}
			a.id, a.seqGiven, a.idGiven = id, seqGiven, true
			goto done
		default:
			return a, errSyntax, false
		}
	}
done:
	if a.limit != 0 && a.strategy == trimNone {
		return a, errStreamLimitNoTrim, false
	}
	if !xadd && a.strategy == trimNone {
		return a, errStreamNoStrategy, false
	}
	if limitGiven {
		if !a.approx {
			return a, errStreamLimitExact, false
		}
	} else if a.approx {
		a.limit = 100 * streamNodeMaxEntries
	} else {
		a.limit = 0
	}
	if xadd {
		if !a.idGiven {
			a.seqGiven = true
		}
		a.fieldsPos = i + 1
		n := len(args) - a.fieldsPos
		if n < 2 || n%2 == 1 {
			return a, wrongArity("xadd"), false
		}
		if a.idGiven && a.seqGiven && a.id.IsZero() {
			return a, errStreamIDZero, false
		}
	}
	return a, Reply{}, true
}

func parseXAdd(args [][]byte) (addTrimArgs, Reply, bool)  { return parseAddTrim(args, true) }
func parseXTrim(args [][]byte) (addTrimArgs, Reply, bool) { return parseAddTrim(args, false) }

func cmdXAdd(x *ctx, args [][]byte, a addTrimArgs) Reply {
	s, exists, err := x.loadStream(args[1])
	if err != nil {
		return errReply(err)
	}
	if !exists {
		if a.noMk {
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
	case !a.idGiven:
		// streamNextID with the log's clock instead of mstime().
		now := uint64(max(x.now, 0))
		if now > st.Last.Ms {
			id = streamid.ID{Ms: now}
		} else {
			id, _ = st.Last.Incr()
		}
	case a.seqGiven:
		id = a.id
	case st.Last.Ms == a.id.Ms:
		if st.Last.Seq == math.MaxUint64 {
			return errStreamTooLarge // Redis reports this case so (errno is not EDOM)
		}
		id = streamid.ID{Ms: st.Last.Ms, Seq: st.Last.Seq + 1}
	default:
		id = a.id
	}
	if id.Cmp(st.Last) <= 0 {
		return errStreamIDSmaller
	}
	// Nodes: join the tail node or start one (see the comment at the top).
	var node streamrec.Node
	if st.TailCount == 0 || st.TailCount >= streamNodeMaxEntries {
		st.TailNode, st.TailCount = st.Appended, 0
		st.Nodes++
		node = streamrec.Node{ID: st.TailNode}
	} else {
		var err error
		if node, _, err = x.getNode(s, st.TailNode); err != nil {
			return errReply(err)
		}
	}
	st.TailCount++
	st.Appended++
	node.Live++
	node.Last = id
	if err := x.putNode(s, node); err != nil {
		return errReply(err)
	}
	if err := x.setElem(s.c, streamrec.EntryElem(id), streamrec.EncodeEntry(node.ID, args[a.fieldsPos:])); err != nil {
		return errReply(err)
	}
	st.Length++
	st.Added++
	st.Last = id
	if st.Length == 1 {
		st.First = id
	}
	var trimmed int64
	if a.strategy != trimNone {
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

// streamTrim is Redis's streamTrim: remove whole head nodes while the
// strategy allows it (and LIMIT, if any, is not exceeded); then, unless
// approximate, remove entries one by one from the next node. It updates
// s's state (not saved) and returns the number of entries removed.
func (x *ctx) streamTrim(s *stream, a *addTrimArgs) (int64, error) {
	st := &s.st
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
		if a.strategy == trimMaxLen && length <= uint64(a.maxLen) {
			return false
		}
		if a.limit != 0 && planned+n.Live > uint64(a.limit) {
			return false
		}
		var remove bool
		if a.strategy == trimMaxLen {
			remove = length-n.Live >= uint64(a.maxLen)
		} else {
			remove = n.Last.Cmp(a.minID) < 0
		}
		if remove {
			whole = append(whole, n)
			length -= n.Live
			planned += n.Live
			return true
		}
		if !a.approx {
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
				if a.strategy == trimMaxLen && st.Length-deleted <= uint64(a.maxLen) ||
					a.strategy == trimMinID && id.Cmp(a.minID) >= 0 {
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

func cmdXTrim(x *ctx, args [][]byte, a addTrimArgs) Reply {
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

type rangeArgs struct {
	start, end streamid.ID
	count      int64 // -1: none
}

func parseXRange(args [][]byte) (a rangeArgs, r Reply, ok bool) {
	startArg, endArg := args[2], args[3]
	if eq(args[0], "xrevrange") { // end start
		startArg, endArg = endArg, startArg
	}
	if a.start, r, ok = parseRangeStart(startArg); !ok {
		return a, r, false
	}
	if a.end, r, ok = parseRangeEnd(endArg); !ok {
		return a, r, false
	}
	a.count = -1
	for j := 4; j < len(args); j++ {
		if eq(args[j], "count") && j+1 < len(args) {
			n, good := redisnum.ParseInt(args[j+1])
			if !good {
				return a, errNotInt, false
			}
			a.count = max(n, 0)
			j++
		} else {
			return a, errSyntax, false
		}
	}
	return a, Reply{}, true
}

// parseRangeStart parses the start of a range of IDs: an exclusive start
// is the successor of its ID.
func parseRangeStart(b []byte) (streamid.ID, Reply, bool) {
	id, excl, ok := streamid.ParseInterval(b, 0)
	if !ok {
		return id, errStreamID, false
	}
	if excl {
		if id, ok = id.Incr(); !ok {
			return id, errStreamBadStart, false
		}
	}
	return id, Reply{}, true
}

// parseRangeEnd parses the end of a range of IDs: an exclusive end is the
// predecessor of its ID.
func parseRangeEnd(b []byte) (streamid.ID, Reply, bool) {
	id, excl, ok := streamid.ParseInterval(b, math.MaxUint64)
	if !ok {
		return id, errStreamID, false
	}
	if excl {
		if id, ok = id.Decr(); !ok {
			return id, errStreamBadEnd, false
		}
	}
	return id, Reply{}, true
}

func cmdXRange(x *ctx, args [][]byte, a rangeArgs) Reply {
	s, exists, err := x.loadStream(args[1])
	if err != nil || !exists {
		return errOr(err, Array())
	}
	if a.count == 0 {
		return NilArray
	}
	out, err := x.rangeEntries(s, a.start, a.end, max(a.count, 0), eq(args[0], "xrevrange"))
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
			return errStreamID
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

type setIDArgs struct {
	id      streamid.ID
	added   int64 // -1: not given
	maxDel  streamid.ID
	hasMaxD bool
}

func parseXSetID(args [][]byte) (a setIDArgs, r Reply, ok bool) {
	a.added = -1
	id, good := streamid.ParseStrict(args[2])
	if !good {
		return a, errStreamID, false
	}
	a.id = id
	for i := 3; i < len(args); i += 2 {
		more := len(args) - 1 - i
		switch {
		case eq(args[i], "entriesadded") && more > 0:
			n, good := redisnum.ParseInt(args[i+1])
			if !good {
				return a, errNotInt, false
			}
			if n < 0 {
				return a, errXSetIDEntries, false
			}
			a.added = n
		case eq(args[i], "maxdeletedid") && more > 0:
			md, good := streamid.ParseStrict(args[i+1])
			if !good {
				return a, errStreamID, false
			}
			if a.id.Cmp(md) < 0 {
				return a, errXSetIDMaxDel, false
			}
			a.maxDel, a.hasMaxD = md, true
		default:
			return a, errSyntax, false
		}
	}
	return a, Reply{}, true
}

func cmdXSetID(x *ctx, args [][]byte, a setIDArgs) Reply {
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
		if a.id.Cmp(top) < 0 {
			return errXSetIDSmaller
		}
		if a.added != -1 && st.Length > uint64(a.added) {
			return errXSetIDLength
		}
	}
	st.Last = a.id
	if a.added != -1 {
		st.Added = uint64(a.added)
	}
	if !a.maxDel.IsZero() {
		st.MaxDel = a.maxDel
	}
	if err := x.saveStream(s); err != nil {
		return errReply(err)
	}
	x.event(notify.Stream, "xsetid", args[1])
	return OK
}

// --- XREAD ---

type xreadArgs struct {
	count    int64
	block    bool
	timeout  int64 // ms, with block
	streams  int   // index of the first key
	nkeys    int
	countIdx int // index of COUNT's argument, 0 if none
}

func parseXRead(args [][]byte) (a xreadArgs, r Reply, ok bool) {
	g, r, ok := parseXReads(args, false)
	return g.xreadArgs, r, ok
}

// parseXReads parses XREAD's options or, with group, XREADGROUP's (one
// parser, as in Redis, so that both report the same errors in the same
// order).
func parseXReads(args [][]byte, group bool) (a xreadGroupArgs, r Reply, ok bool) {
	for i := 1; i < len(args); i++ {
		more := len(args) - 1 - i
		o := args[i]
		switch {
		case eq(o, "block") && more > 0:
			i++
			n, good := redisnum.ParseInt(args[i])
			if !good {
				return a, errXReadTimeoutInt, false
			}
			if n < 0 {
				return a, errXReadTimeoutNeg, false
			}
			a.block, a.timeout = true, n
		case eq(o, "count") && more > 0:
			i++
			n, good := redisnum.ParseInt(args[i])
			if !good {
				return a, errNotInt, false
			}
			a.count, a.countIdx = max(n, 0), i
		case eq(o, "streams") && more > 0:
			a.streams = i + 1
			n := len(args) - a.streams
			if n%2 != 0 {
				return a, errXReadUnbalanced, false
			}
			a.nkeys = n / 2
			if group && a.group == nil {
				return a, Error("ERR Missing GROUP option for XREADGROUP"), false
			}
			return a, Reply{}, true
		case eq(o, "group") && more >= 2:
			if !group {
				return a, errXReadGroup, false
			}
			a.group, a.consumer = args[i+1], args[i+2]
			i += 2
		case eq(o, "noack"):
			if !group {
				return a, errXReadNoAck, false
			}
			a.noack = true
		default:
			return a, errSyntax, false
		}
	}
	return a, errSyntax, false // STREAMS is mandatory
}

// cmdXRead is XREAD without blocking: the entries after the given IDs, or
// a null array when no stream has any.
func cmdXRead(x *ctx, args [][]byte, a xreadArgs) Reply {
	streams := make([]*stream, a.nkeys)
	ids := make([]streamid.ID, a.nkeys)
	// As Redis: look each key up and parse its ID, in order.
	for i := 0; i < a.nkeys; i++ {
		s, exists, err := x.loadStream(args[a.streams+i])
		if err != nil {
			return errReply(err)
		}
		if exists {
			streams[i] = s
		}
		idArg := args[a.streams+a.nkeys+i]
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
			return errStreamID
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
		entries, err := x.rangeEntries(s, start, streamid.Max, a.count, false)
		if err != nil {
			return errReply(err)
		}
		out = append(out, Bulk(args[a.streams+i]), Array(entries...))
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
	a, _, valid := parseXRead(args)
	if !valid || !a.block {
		return 0, nil, false
	}
	return blockDuration(a.timeout), args[a.streams : a.streams+a.nkeys], true
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
	a, _, ok := parseXRead(args)
	if !ok {
		return args, args
	}
	first = append([][]byte(nil), args...)
	x := getCtx(r, nil, nowMs)
	defer putCtx(x)
	for i := 0; i < a.nkeys; i++ {
		if string(args[a.streams+a.nkeys+i]) != "$" {
			continue
		}
		s, exists, err := x.loadStream(args[a.streams+i])
		if err != nil {
			return args, args
		}
		var id streamid.ID
		if exists {
			id = s.st.Last
		}
		first[a.streams+a.nkeys+i] = id.AppendTo(nil)
	}
	retry = first
	if a.countIdx == 0 {
		retry = withBlockedCount(first)
	}
	return first, retry
}

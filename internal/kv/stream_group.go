package kv

import (
	"bytes"
	"math"
	"strconv"
	"strings"

	"github.com/kvorum/kvorum/internal/redisnum"
	"github.com/kvorum/kvorum/internal/streamid"
	"github.com/kvorum/kvorum/internal/streamrec"
)

// Stream consumer groups (Redis 7.0): XGROUP, XREADGROUP, XACK, XPENDING,
// XCLAIM, XAUTOCLAIM, XINFO GROUPS/CONSUMERS. Storage: elements of the
// stream's incarnation (see stream.go), a record per group ('g'), per
// consumer ('c') and per pending entry ('p'), and an empty element per
// entry of a consumer's PEL ('q'); keys and encodings in package
// streamrec.
//
// Names sort as Redis's radix trees do (byte order), so XINFO lists groups
// and consumers in Redis's order. Times come from x.now: the leader's
// clock for writes (deterministic on every replica), the node's clock for
// reads (XPENDING, XINFO).
//
// Differences from Redis 7.0: XCLAIM's options are checked when the
// command is applied (Redis reports NOGROUP before a syntax error, which
// needs the data), so a malformed XCLAIM reaches the log and fails there.
// A blocked XREADGROUP is the whole command proposed again after a write
// to one of its keys (with COUNT 1000 if it had none, as Redis serves a
// blocked client): when its group is destroyed or its stream deleted it
// gets the ordinary NOGROUP error (Redis 7.0: "the consumer group this
// client was blocked on no longer exists", and DEL does not wake it).
// XREADGROUP BLOCK in a script does not block instead of failing.

// xautoclaimAttemptsF is Redis's attempts factor: XAUTOCLAIM looks at
// COUNT times as many pending entries at most.
const xautoclaimAttemptsF = 10

func init() {
	const g = "stream"
	defParsed("xgroup", -2, "", 0, 0, 0, g, "A container for consumer groups commands.", parseXGroup, cmdXGroup)
	table["xgroup"].spec.Write = true
	table["xgroup"].readOnly = func(args [][]byte) bool { return len(args) > 1 && eq(args[1], "help") }
	defParsed("xreadgroup", -7, "write blocking movablekeys", 0, 0, 0, g, "Return new entries from a stream using a consumer group, or access the history of the pending entries for a given consumer. Can block.", parseXReadGroup, cmdXReadGroup)
	def("xack", -4, "write fast", 1, 1, 1, g, "Marks a pending message as correctly processed, effectively removing it from the pending entries list of the consumer group.", cmdXAck, nil)
	defParsed("xpending", -3, "readonly", 1, 1, 1, g, "Return information and entries from a stream consumer group pending entries list, that are messages fetched but never acknowledged.", parseXPending, cmdXPending)
	def("xclaim", -6, "write fast", 1, 1, 1, g, "Changes (or acquires) ownership of a message in a consumer group, as if the message was delivered to the specified consumer.", cmdXClaim, nil)
	defParsed("xautoclaim", -6, "write fast", 1, 1, 1, g, "Changes (or acquires) ownership of messages in a consumer group, as if the messages were delivered to the specified consumer.", parseXAutoClaim, cmdXAutoClaim)
}

// cstr is a C "%s" of b: up to the first NUL byte.
func cstr(b []byte) string { return string(appendCString(nil, b, len(b))) }

func errf(parts ...string) Reply {
	return Error(string(sanitizeError([]byte(strings.Join(parts, "")))))
}

func errNoGroupKey(key, group []byte) Reply {
	return errf("NOGROUP No such key '", cstr(key), "' or consumer group '", cstr(group), "'")
}

func errNoGroupForKey(key, group []byte) Reply {
	return errf("NOGROUP No such consumer group '", cstr(group), "' for key name '", cstr(key), "'")
}

// groupsChanged reports a change of s's groups to the node (it wakes the
// clients blocked on the key: XGROUP DESTROY ends their wait with an
// error, SETID may have something for them). The stream's metadata record
// is not rewritten: as in Redis, group changes do not touch the key for
// WATCH.
func (x *ctx) groupsChanged(s *stream) { x.touched(s.c.key) }

// saveGroup writes group g back, and consumer c if not nil, and reports
// the change (groupsChanged).
func (x *ctx) saveGroup(s *stream, g *streamrec.Group, c *streamrec.Consumer) error {
	if c != nil {
		if err := x.putConsumer(s, g, c); err != nil {
			return err
		}
	}
	if err := x.putGroup(s, g); err != nil {
		return err
	}
	x.groupsChanged(s)
	return nil
}

// countGroups is XINFO STREAM's "groups".
func (x *ctx) countGroups(s *stream) (int64, error) {
	var n int64
	err := x.iterElems(s.c, []byte{streamrec.KindGroup}, nil, false, func(_, _ []byte) bool {
		n++
		return true
	})
	return n, err
}

// --- records ---

// loadGroup loads stream key and its group name for XPENDING, XCLAIM and
// XAUTOCLAIM: a non-nil error becomes the reply through errReply (wrong
// type, storage, or NOGROUP when the key or the group does not exist).
func (x *ctx) loadGroup(key, name []byte) (*stream, *streamrec.Group, error) {
	s, g, err := x.findGroup(key, name)
	if err == nil && g == nil {
		err = &replyError{errNoGroupKey(key, name)}
	}
	return s, g, err
}

// findGroup loads stream key and its group name: s is nil if there is no
// such key, g if there is no such group.
func (x *ctx) findGroup(key, name []byte) (s *stream, g *streamrec.Group, err error) {
	s, exists, err := x.loadStream(key)
	if err != nil || !exists {
		return nil, nil, err
	}
	g, err = x.getGroup(s, name)
	return s, g, err
}

func (x *ctx) getGroup(s *stream, name []byte) (*streamrec.Group, error) {
	v, ok, err := x.getElem(s.c, streamrec.GroupElem(name))
	if err != nil || !ok {
		return nil, err
	}
	return streamrec.DecodeGroup(name, v), nil
}

func (x *ctx) putGroup(s *stream, g *streamrec.Group) error {
	return x.setElem(s.c, streamrec.GroupElem(g.Name), g.Encode())
}

func (x *ctx) getConsumer(s *stream, g *streamrec.Group, name []byte) (*streamrec.Consumer, error) {
	v, ok, err := x.getElem(s.c, streamrec.ConsumerElem(g.Name, name))
	if err != nil || !ok {
		return nil, err
	}
	return streamrec.DecodeConsumer(name, v), nil
}

func (x *ctx) putConsumer(s *stream, g *streamrec.Group, c *streamrec.Consumer) error {
	return x.setElem(s.c, streamrec.ConsumerElem(g.Name, c.Name), c.Encode())
}

// lookupConsumer is streamLookupConsumer (refreshing seen-time) followed,
// if absent and create, by streamCreateConsumer. The caller saves it.
func (x *ctx) lookupConsumer(s *stream, g *streamrec.Group, name []byte, create bool) (*streamrec.Consumer, error) {
	c, err := x.getConsumer(s, g, name)
	if err != nil {
		return nil, err
	}
	if c == nil {
		if !create {
			return nil, nil
		}
		c = &streamrec.Consumer{Name: append([]byte(nil), name...)}
		g.Consumers++
	}
	c.Seen = x.now
	return c, nil
}

func (x *ctx) getNACK(s *stream, g *streamrec.Group, id streamid.ID) (*streamrec.NACK, error) {
	v, ok, err := x.getElem(s.c, streamrec.PELElem(g.Name, id))
	if err != nil || !ok {
		return nil, err
	}
	return streamrec.DecodeNACK(v), nil
}

func (x *ctx) putNACK(s *stream, g *streamrec.Group, id streamid.ID, n *streamrec.NACK) error {
	return x.setElem(s.c, streamrec.PELElem(g.Name, id), n.Encode())
}

// delNACK removes id from the group's PEL and from its consumer's
// (whose record's PEL count it decrements; see unlinkNACK for cur).
func (x *ctx) delNACK(s *stream, g *streamrec.Group, id streamid.ID, n *streamrec.NACK, cur *streamrec.Consumer) error {
	if err := x.delElem(s.c, streamrec.PELElem(g.Name, id)); err != nil {
		return err
	}
	g.PEL--
	return x.unlinkNACK(s, g, id, n.Consumer, cur)
}

// unlinkNACK removes id from consumer's PEL. cur, if not nil, is a
// consumer the caller holds in memory (and saves later): if it is the one,
// its count is decremented there instead of in storage.
func (x *ctx) unlinkNACK(s *stream, g *streamrec.Group, id streamid.ID, consumer []byte, cur *streamrec.Consumer) error {
	if err := x.delElem(s.c, streamrec.ConsPELElem(g.Name, consumer, id)); err != nil {
		return err
	}
	if cur != nil && string(cur.Name) == string(consumer) {
		if cur.PEL > 0 {
			cur.PEL--
		}
		return nil
	}
	c, err := x.getConsumer(s, g, consumer)
	if err != nil || c == nil {
		return err
	}
	if c.PEL > 0 {
		c.PEL--
	}
	return x.putConsumer(s, g, c)
}

// linkNACK adds id to c's PEL (c is saved by the caller).
func (x *ctx) linkNACK(s *stream, g *streamrec.Group, id streamid.ID, c *streamrec.Consumer) error {
	c.PEL++
	return x.setElem(s.c, streamrec.ConsPELElem(g.Name, c.Name, id), nil)
}

func (x *ctx) entryExists(s *stream, id streamid.ID) (bool, error) {
	return x.hasElem(s.c, streamrec.EntryElem(id))
}

// entryByID returns [id, fields] for an existing entry; ok=false if absent.
func (x *ctx) entryByID(s *stream, id streamid.ID) (Reply, bool, error) {
	e := streamrec.EntryElem(id)
	v, ok, err := x.getElem(s.c, e)
	if err != nil || !ok {
		return Reply{}, false, err
	}
	return entryReply(e, v), true, nil
}

// lastValidID is streamLastValidID: the last live entry's ID (the stream's
// last ID if empty).
func (x *ctx) lastValidID(s *stream) (streamid.ID, error) {
	id, ok, err := x.edgeEntry(s, true)
	if err != nil || !ok {
		return s.st.Last, err
	}
	return id, nil
}

// readLag is a group's entries-read and lag, as XINFO replies them (nil
// when unknown).
func readLag(st *streamrec.State, g *streamrec.Group) (read, lag Reply) {
	read, lag = Nil, Nil
	if g.Read != streamrec.ReadUnknown {
		read = Int(g.Read)
	}
	if n, ok := st.Lag(g); ok {
		lag = Int(n)
	}
	return read, lag
}

// deleteGroup removes every record of group g.
func (x *ctx) deleteGroup(s *stream, g *streamrec.Group) error {
	var keys [][]byte
	for _, kind := range []byte{streamrec.KindConsumer, streamrec.KindPEL, streamrec.KindConsPEL} {
		err := x.iterElems(s.c, streamrec.GroupPrefix(kind, g.Name), nil, false, func(elem, _ []byte) bool {
			keys = append(keys, append([]byte(nil), elem...))
			return true
		})
		if err != nil {
			return err
		}
	}
	keys = append(keys, streamrec.GroupElem(g.Name))
	for _, k := range keys {
		if err := x.delElem(s.c, k); err != nil {
			return err
		}
	}
	return nil
}

// --- XGROUP ---

var xgroupSubArity = map[string]int{"create": -5, "setid": -5, "destroy": 4, "createconsumer": 5, "delconsumer": 5, "help": 2}

type xgroupArgs struct {
	sub      string // the subcommand, in lower case
	mkstream bool
	read     int64
}

func parseXGroup(args [][]byte) (a xgroupArgs, r Reply, ok bool) {
	a.read = streamrec.ReadUnknown
	sub := strings.ToLower(string(args[1]))
	a.sub = sub
	arity, known := xgroupSubArity[sub]
	if !known {
		return a, subcommandErr("ERR unknown subcommand '", args, "XGROUP"), false
	}
	if (arity > 0 && len(args) != arity) || (arity < 0 && len(args) < -arity) {
		return a, wrongArity("xgroup|" + sub), false
	}
	if len(args) >= 4 {
		create, setid := sub == "create", sub == "setid"
		for i := 5; i < len(args); {
			switch {
			case create && eq(args[i], "mkstream"):
				a.mkstream = true
				i++
			case (create || setid) && eq(args[i], "entriesread") && i+1 < len(args):
				n, good := redisnum.ParseInt(args[i+1])
				if !good {
					return a, errNotInt, false
				}
				if n < 0 && n != streamrec.ReadUnknown {
					return a, Error("ERR value for ENTRIESREAD must be positive or -1"), false
				}
				a.read = n
				i += 2
			default:
				return a, subSyntaxErr(args, "XGROUP"), false
			}
		}
	}
	return a, Reply{}, true
}

func cmdXGroup(x *ctx, args [][]byte, a xgroupArgs) Reply {
	sub := a.sub
	if sub == "help" {
		return Array(
			Status("XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"),
			Status("CREATE <key> <groupname> <id|$> [option]"),
			Status("    Create a new consumer group. Options are:"),
			Status("    * MKSTREAM"),
			Status("      Create the empty stream if it does not exist."),
			Status("    * ENTRIESREAD entries_read"),
			Status("      Set the group's entries_read counter (internal use)."),
			Status("CREATECONSUMER <key> <groupname> <consumer>"),
			Status("    Create a new consumer in the specified group."),
			Status("DELCONSUMER <key> <groupname> <consumer>"),
			Status("    Remove the specified consumer."),
			Status("DESTROY <key> <groupname>"),
			Status("    Remove the specified group."),
			Status("SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]"),
			Status("    Set the current group ID and entries_read counter."),
			Status("HELP"),
			Status("    Prints this help."),
		)
	}
	key, name := args[2], args[3]
	s, exists, err := x.loadStream(key)
	if err != nil {
		return errReply(err)
	}
	if !a.mkstream && !exists {
		return Error("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.")
	}
	var g *streamrec.Group
	if exists {
		if g, err = x.getGroup(s, name); err != nil {
			return errReply(err)
		}
	}
	if !a.mkstream && g == nil && (sub == "setid" || sub == "createconsumer" || sub == "delconsumer") {
		return errNoGroupForKey(key, name)
	}
	switch {
	case sub == "create" && len(args) <= 8:
		var id streamid.ID
		if string(args[4]) == "$" {
			if exists {
				id = s.st.Last
			}
		} else {
			var good bool
			if id, good = streamid.ParseStrict(args[4]); !good {
				return errStreamID
			}
		}
		if !exists {
			if s, err = x.createStream(key); err != nil {
				return errReply(err)
			}
		}
		if g != nil {
			return Error("BUSYGROUP Consumer Group name already exists")
		}
		g = &streamrec.Group{Name: name, Last: id, Read: a.read}
		if err := x.putGroup(s, g); err != nil {
			return errReply(err)
		}
		if !exists {
			if err := x.saveStream(s); err != nil {
				return errReply(err)
			}
		} else {
			x.groupsChanged(s)
		}
		return OK
	case sub == "setid" && (len(args) == 5 || len(args) == 7):
		var id streamid.ID
		if string(args[4]) == "$" {
			id = s.st.Last
		} else {
			var good bool
			if id, _, good = streamid.Parse(args[4], 0, false, false); !good {
				return errStreamID
			}
		}
		g.Last, g.Read = id, a.read
		if err := x.saveGroup(s, g, nil); err != nil {
			return errReply(err)
		}
		return OK
	case sub == "destroy":
		if g == nil {
			return Int(0)
		}
		if err := x.deleteGroup(s, g); err != nil {
			return errReply(err)
		}
		x.groupsChanged(s)
		return Int(1)
	case sub == "createconsumer":
		c, err := x.getConsumer(s, g, args[4])
		if err != nil {
			return errReply(err)
		}
		if c != nil {
			return Int(0)
		}
		c = &streamrec.Consumer{Name: args[4], Seen: x.now}
		g.Consumers++
		if err := x.saveGroup(s, g, c); err != nil {
			return errReply(err)
		}
		return Int(1)
	case sub == "delconsumer":
		c, err := x.getConsumer(s, g, args[4])
		if err != nil {
			return errReply(err)
		}
		if c == nil {
			return Int(0)
		}
		var ids []streamid.ID
		err = x.iterElems(s.c, streamrec.ConsPELPrefix(g.Name, c.Name), nil, false, func(elem, _ []byte) bool {
			if len(elem) >= 16 {
				ids = append(ids, streamrec.PELID(elem))
			}
			return true
		})
		if err != nil {
			return errReply(err)
		}
		for _, id := range ids {
			if err := x.delElem(s.c, streamrec.PELElem(g.Name, id)); err != nil {
				return errReply(err)
			}
			if err := x.delElem(s.c, streamrec.ConsPELElem(g.Name, c.Name, id)); err != nil {
				return errReply(err)
			}
			g.PEL--
		}
		if err := x.delElem(s.c, streamrec.ConsumerElem(g.Name, c.Name)); err != nil {
			return errReply(err)
		}
		g.Consumers--
		if err := x.saveGroup(s, g, nil); err != nil {
			return errReply(err)
		}
		return Int(int64(len(ids)))
	}
	return subSyntaxErr(args, "XGROUP")
}

// --- XREADGROUP ---

type xreadGroupArgs struct {
	xreadArgs
	group, consumer []byte
	noack           bool
}

func parseXReadGroup(args [][]byte) (a xreadGroupArgs, r Reply, ok bool) {
	return parseXReads(args, true)
}

// XReadGroupRetry returns the command a blocked XREADGROUP repeats after
// its first try: with "COUNT 1000" added when it has no COUNT (Redis's
// XREAD_BLOCKED_DEFAULT_COUNT for clients that blocked); other commands
// are returned unchanged.
func XReadGroupRetry(args [][]byte) [][]byte {
	if len(args) == 0 || !eq(args[0], "xreadgroup") {
		return args
	}
	if a, _, ok := parseXReadGroup(args); !ok || a.countIdx != 0 {
		return args
	}
	return withBlockedCount(args)
}

var gtID = streamid.Max // ">"

func cmdXReadGroup(x *ctx, args [][]byte, a xreadGroupArgs) Reply {
	ids := make([]streamid.ID, a.nkeys)
	for i := 0; i < a.nkeys; i++ {
		key := args[a.streams+i]
		_, g, err := x.findGroup(key, a.group)
		if err != nil {
			return errReply(err)
		}
		if g == nil {
			return errf("NOGROUP No such key '", cstr(key), "' or consumer group '", cstr(a.group), "' in XREADGROUP with GROUP option")
		}
		idArg := args[a.streams+a.nkeys+i]
		switch string(idArg) {
		case "$":
			return Error("ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.")
		case ">":
			ids[i] = gtID
			continue
		}
		id, good := streamid.ParseStrict(idArg)
		if !good {
			return errStreamID
		}
		ids[i] = id
	}
	var out []Reply
	for i := 0; i < a.nkeys; i++ {
		// The same key may be named twice: reload to see earlier changes.
		s, g, err := x.findGroup(args[a.streams+i], a.group)
		if err != nil {
			return errReply(err)
		}
		if g == nil {
			continue
		}
		gt := ids[i]
		history := gt != gtID
		if !history {
			if s.st.Length == 0 {
				continue
			}
			maxID, err := x.lastValidID(s)
			if err != nil {
				return errReply(err)
			}
			if maxID.Cmp(g.Last) <= 0 {
				continue
			}
			gt = g.Last
		}
		start, _ := gt.Incr()
		c, err := x.lookupConsumer(s, g, a.consumer, true)
		if err != nil {
			return errReply(err)
		}
		var entries []Reply
		if history {
			entries, err = x.readConsumerPEL(s, g, c, start, a.count)
		} else {
			entries, err = x.deliverNew(s, g, c, start, a.count, a.noack)
		}
		if err != nil {
			return errReply(err)
		}
		if err := x.saveGroup(s, g, c); err != nil {
			return errReply(err)
		}
		out = append(out, Bulk(args[a.streams+i]), Array(entries...))
	}
	if len(out) == 0 {
		return NilArray
	}
	return NestedMap(out...)
}

// deliverNew is streamReplyWithRange with a group: the entries from start,
// moving the group's last-delivered ID and adding them to the PELs.
func (x *ctx) deliverNew(s *stream, g *streamrec.Group, c *streamrec.Consumer, start streamid.ID, count int64, noack bool) ([]Reply, error) {
	entries, err := x.rangeEntries(s, start, streamid.Max, count, false)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		id, _ := streamid.ParseStrict(e.Elems[0].Str)
		if id.Cmp(g.Last) > 0 {
			if g.Read != streamrec.ReadUnknown && !s.st.RangeHasTombstones(id) {
				g.Read++
			} else if s.st.Added != 0 {
				g.Read = s.st.EstimateDistance(id)
			}
			g.Last = id
		}
		if noack {
			continue
		}
		old, err := x.getNACK(s, g, id)
		if err != nil {
			return nil, err
		}
		if old != nil {
			if string(old.Consumer) == string(c.Name) {
				c.PEL-- // relinked below
			} else if err := x.unlinkNACK(s, g, id, old.Consumer, c); err != nil {
				return nil, err
			}
		} else {
			g.PEL++
		}
		if err := x.putNACK(s, g, id, &streamrec.NACK{Time: x.now, Count: 1, Consumer: c.Name}); err != nil {
			return nil, err
		}
		if err := x.linkNACK(s, g, id, c); err != nil {
			return nil, err
		}
	}
	return entries, nil
}

// readConsumerPEL is streamReplyWithRangeFromConsumerPEL.
func (x *ctx) readConsumerPEL(s *stream, g *streamrec.Group, c *streamrec.Consumer, start streamid.ID, count int64) ([]Reply, error) {
	var ids []streamid.ID
	prefix := streamrec.ConsPELPrefix(g.Name, c.Name)
	err := x.iterElems(s.c, prefix, start.Append(bytes.Clone(prefix)), false, func(elem, _ []byte) bool {
		ids = append(ids, streamrec.PELID(elem))
		return count == 0 || int64(len(ids)) < count
	})
	if err != nil {
		return nil, err
	}
	out := make([]Reply, 0, len(ids))
	for _, id := range ids {
		e, ok, err := x.entryByID(s, id)
		if err != nil {
			return nil, err
		}
		if !ok {
			out = append(out, Array(idReply(id), NilArray))
			continue
		}
		n, err := x.getNACK(s, g, id)
		if err != nil {
			return nil, err
		}
		if n != nil {
			n.Time = x.now
			n.Count++
			if err := x.putNACK(s, g, id, n); err != nil {
				return nil, err
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// --- XACK ---

func cmdXAck(x *ctx, args [][]byte) Reply {
	s, g, err := x.findGroup(args[1], args[2])
	if err != nil || g == nil {
		return errOr(err, Int(0))
	}
	ids := make([]streamid.ID, 0, len(args)-3)
	for _, a := range args[3:] {
		id, ok := streamid.ParseStrict(a)
		if !ok {
			return errStreamID
		}
		ids = append(ids, id)
	}
	var n int64
	for _, id := range ids {
		nack, err := x.getNACK(s, g, id)
		if err != nil {
			return errReply(err)
		}
		if nack == nil {
			continue
		}
		if err := x.delNACK(s, g, id, nack, nil); err != nil {
			return errReply(err)
		}
		n++
	}
	if n > 0 {
		if err := x.saveGroup(s, g, nil); err != nil {
			return errReply(err)
		}
	}
	return Int(n)
}

// --- XPENDING ---

type xpendingArgs struct {
	summary    bool
	minIdle    int64
	start, end streamid.ID
	count      int64
	consumer   []byte
}

func parseXPending(args [][]byte) (a xpendingArgs, r Reply, ok bool) {
	if len(args) == 3 {
		a.summary = true
		return a, Reply{}, true
	}
	if len(args) < 6 || len(args) > 9 {
		return a, errSyntax, false
	}
	i := 3
	if eq(args[3], "idle") {
		n, good := redisnum.ParseInt(args[4])
		if !good {
			return a, errNotInt, false
		}
		if len(args) < 8 {
			return a, errSyntax, false
		}
		a.minIdle = n
		i += 2
	}
	n, good := redisnum.ParseInt(args[i+2])
	if !good {
		return a, errNotInt, false
	}
	a.count = max(n, 0)
	if a.start, r, ok = parseRangeStart(args[i]); !ok {
		return a, r, false
	}
	if a.end, r, ok = parseRangeEnd(args[i+1]); !ok {
		return a, r, false
	}
	if i+3 < len(args) {
		a.consumer = args[i+3]
	}
	return a, Reply{}, true
}

func cmdXPending(x *ctx, args [][]byte, a xpendingArgs) Reply {
	s, g, err := x.loadGroup(args[1], args[2])
	if err != nil {
		return errReply(err)
	}
	if a.summary {
		if g.PEL == 0 {
			return Array(Int(0), Nil, Nil, NilArray)
		}
		var first, last streamid.ID
		for _, rev := range []bool{false, true} {
			err := x.iterElems(s.c, streamrec.GroupPrefix(streamrec.KindPEL, g.Name), nil, rev, func(elem, _ []byte) bool {
				if rev {
					last = streamrec.PELID(elem)
				} else {
					first = streamrec.PELID(elem)
				}
				return false
			})
			if err != nil {
				return errReply(err)
			}
		}
		cs, err := x.listConsumers(s, g)
		if err != nil {
			return errReply(err)
		}
		var cons []Reply
		for _, c := range cs {
			if c.PEL > 0 {
				cons = append(cons, Array(Bulk(c.Name), BulkString(strconv.FormatUint(c.PEL, 10))))
			}
		}
		return Array(Int(int64(g.PEL)), idReply(first), idReply(last), Array(cons...))
	}
	prefix := streamrec.GroupPrefix(streamrec.KindPEL, g.Name)
	if a.consumer != nil {
		c, err := x.getConsumer(s, g, a.consumer)
		if err != nil {
			return errReply(err)
		}
		if c == nil {
			return Array()
		}
		prefix = streamrec.ConsPELPrefix(g.Name, a.consumer)
	}
	out := []Reply{}
	count := a.count
	var ierr error
	err = x.iterElems(s.c, prefix, a.start.Append(bytes.Clone(prefix)), false, func(elem, v []byte) bool {
		if count == 0 {
			return false
		}
		id := streamrec.PELID(elem)
		if id.Cmp(a.end) > 0 {
			return false
		}
		var n *streamrec.NACK
		if a.consumer != nil {
			if n, ierr = x.getNACK(s, g, id); ierr != nil || n == nil {
				return ierr == nil
			}
		} else {
			n = streamrec.DecodeNACK(v)
		}
		if a.minIdle != 0 && x.now-n.Time < a.minIdle {
			return true
		}
		count--
		out = append(out, Array(idReply(id), Bulk(n.Consumer), Int(max(x.now-n.Time, 0)), Int(int64(n.Count))))
		return true
	})
	if ierr != nil {
		return errReply(ierr)
	}
	if err != nil {
		return errReply(err)
	}
	return Array(out...)
}

// --- XCLAIM ---

func cmdXClaim(x *ctx, args [][]byte) Reply {
	s, g, err := x.loadGroup(args[1], args[2])
	if err != nil {
		return errReply(err)
	}
	minIdle, good := redisnum.ParseInt(args[4])
	if !good {
		return Error("ERR Invalid min-idle-time argument for XCLAIM")
	}
	minIdle = max(minIdle, 0)
	var ids []streamid.ID
	j := 5
	for ; j < len(args); j++ {
		id, ok := streamid.ParseStrict(args[j])
		if !ok {
			break
		}
		ids = append(ids, id)
	}
	now := x.now
	cl := &claimer{x: x, s: s, g: g, name: args[3], time: -1, retry: -1}
	force := false
	var lastID streamid.ID
	for ; j < len(args); j++ {
		more := len(args) - 1 - j
		o := args[j]
		var n int64
		var ok bool
		switch {
		case eq(o, "force"):
			force = true
			continue
		case eq(o, "justid"):
			cl.justID = true
			continue
		case eq(o, "lastid") && more > 0:
			j++
			if lastID, ok = streamid.ParseStrict(args[j]); !ok {
				return errStreamID
			}
			continue
		case (eq(o, "idle") || eq(o, "time") || eq(o, "retrycount")) && more > 0:
			j++
			if n, ok = redisnum.ParseInt(args[j]); !ok {
				return errf("ERR Invalid ", strings.ToUpper(string(o)), " option argument for XCLAIM")
			}
		default:
			return errf("ERR Unrecognized XCLAIM option '", cstr(o), "'")
		}
		switch {
		case eq(o, "idle"):
			cl.time = now - n
		case eq(o, "time"):
			cl.time = n
		default:
			cl.retry = n
		}
	}
	if lastID.Cmp(g.Last) > 0 {
		g.Last = lastID
		cl.changed = true
	}
	if cl.time < 0 || cl.time > now {
		cl.time = now
	}
	out := []Reply{}
	for _, id := range ids {
		n, err := x.getNACK(s, g, id)
		if err != nil {
			return errReply(err)
		}
		there, err := x.entryExists(s, id)
		if err != nil {
			return errReply(err)
		}
		if !there {
			if n != nil {
				if err := cl.drop(id, n); err != nil {
					return errReply(err)
				}
			}
			continue
		}
		if force && n == nil {
			n = &streamrec.NACK{Time: now, Count: 1}
			g.PEL++
		}
		if n == nil || (n.Consumer != nil && minIdle != 0 && now-n.Time < minIdle) {
			continue
		}
		r, err := cl.claim(id, n)
		if err != nil {
			return errReply(err)
		}
		out = append(out, r)
	}
	if err := cl.save(); err != nil {
		return errReply(err)
	}
	return Array(out...)
}

// claimer gives pending entries to one consumer, for XCLAIM and
// XAUTOCLAIM. The consumer is looked up, or created, at the first claim.
type claimer struct {
	x       *ctx
	s       *stream
	g       *streamrec.Group
	name    []byte              // the consumer's
	c       *streamrec.Consumer // nil before the first claim
	time    int64               // the claimed entries' delivery time
	retry   int64               // their delivery count; -1: one more (none with JUSTID)
	justID  bool
	changed bool // what save must write
}

// claim gives pending entry id (n, whose consumer is nil for an entry
// FORCE added to the PEL) to the consumer, and returns its reply: the ID
// with JUSTID, else the entry.
func (cl *claimer) claim(id streamid.ID, n *streamrec.NACK) (Reply, error) {
	x, s, g := cl.x, cl.s, cl.g
	if cl.c == nil {
		c, err := x.lookupConsumer(s, g, cl.name, true)
		if err != nil {
			return Reply{}, err
		}
		cl.c = c
	}
	c := cl.c
	moved := n.Consumer == nil || string(n.Consumer) != string(c.Name)
	if moved && n.Consumer != nil {
		if err := x.unlinkNACK(s, g, id, n.Consumer, c); err != nil {
			return Reply{}, err
		}
	}
	n.Time = cl.time
	if cl.retry >= 0 {
		n.Count = uint64(cl.retry)
	} else if !cl.justID {
		n.Count++
	}
	if moved {
		if err := x.linkNACK(s, g, id, c); err != nil {
			return Reply{}, err
		}
		n.Consumer = c.Name
	}
	if err := x.putNACK(s, g, id, n); err != nil {
		return Reply{}, err
	}
	cl.changed = true
	if cl.justID {
		return idReply(id), nil
	}
	ent, _, err := x.entryByID(s, id)
	return ent, err
}

// drop removes pending entry id (n), whose entry was deleted, from the
// PELs.
func (cl *claimer) drop(id streamid.ID, n *streamrec.NACK) error {
	cl.changed = true
	return cl.x.delNACK(cl.s, cl.g, id, n, cl.c)
}

// save writes the consumer and the group back if the claims changed them,
// and tells the node.
func (cl *claimer) save() error {
	if !cl.changed {
		return nil
	}
	return cl.x.saveGroup(cl.s, cl.g, cl.c)
}

// --- XAUTOCLAIM ---

type xautoclaimArgs struct {
	minIdle int64
	start   streamid.ID
	count   int64
	justID  bool
}

func parseXAutoClaim(args [][]byte) (a xautoclaimArgs, r Reply, ok bool) {
	n, good := redisnum.ParseInt(args[4])
	if !good {
		return a, Error("ERR Invalid min-idle-time argument for XAUTOCLAIM"), false
	}
	a.minIdle = max(n, 0)
	if a.start, r, ok = parseRangeStart(args[5]); !ok {
		return a, r, false
	}
	a.count = 100
	for j := 6; j < len(args); j++ {
		more := len(args) - 1 - j
		switch {
		case eq(args[j], "count") && more > 0:
			n, good := redisnum.ParseInt(args[j+1])
			if !good || n < 1 || n > math.MaxInt64/16 {
				return a, Error("ERR COUNT must be > 0"), false
			}
			a.count = n
			j++
		case eq(args[j], "justid"):
			a.justID = true
		default:
			return a, errSyntax, false
		}
	}
	return a, Reply{}, true
}

func cmdXAutoClaim(x *ctx, args [][]byte, a xautoclaimArgs) Reply {
	s, g, err := x.loadGroup(args[1], args[2])
	if err != nil {
		return errReply(err)
	}
	// Collect the candidates first (at most attempts of them plus the next
	// one, which is the reply's cursor).
	attempts := a.count * xautoclaimAttemptsF
	type pending struct {
		id streamid.ID
		n  *streamrec.NACK
	}
	var cand []pending
	prefix := streamrec.GroupPrefix(streamrec.KindPEL, g.Name)
	err = x.iterElems(s.c, prefix, a.start.Append(bytes.Clone(prefix)), false, func(elem, v []byte) bool {
		cand = append(cand, pending{streamrec.PELID(elem), streamrec.DecodeNACK(v)})
		return int64(len(cand)) <= attempts
	})
	if err != nil {
		return errReply(err)
	}
	now := x.now
	count := a.count
	claimed, deleted := []Reply{}, []Reply{}
	cl := &claimer{x: x, s: s, g: g, name: args[3], time: now, retry: -1, justID: a.justID}
	i := 0
	for ; attempts > 0 && count > 0 && i < len(cand); i++ {
		attempts--
		p := cand[i]
		there, err := x.entryExists(s, p.id)
		if err != nil {
			return errReply(err)
		}
		if !there {
			if err := cl.drop(p.id, p.n); err != nil {
				return errReply(err)
			}
			deleted = append(deleted, idReply(p.id))
			count--
			continue
		}
		if a.minIdle != 0 && now-p.n.Time < a.minIdle {
			continue
		}
		r, err := cl.claim(p.id, p.n)
		if err != nil {
			return errReply(err)
		}
		claimed = append(claimed, r)
		count--
	}
	var next streamid.ID
	if i < len(cand) {
		next = cand[i].id
	}
	if err := cl.save(); err != nil {
		return errReply(err)
	}
	return Array(idReply(next), Array(claimed...), Array(deleted...))
}

// --- XINFO GROUPS / CONSUMERS / STREAM FULL ---

func (x *ctx) listGroups(s *stream) ([]*streamrec.Group, error) {
	var gs []*streamrec.Group
	err := x.iterElems(s.c, []byte{streamrec.KindGroup}, nil, false, func(elem, v []byte) bool {
		gs = append(gs, streamrec.DecodeGroup(elem[1:], v))
		return true
	})
	return gs, err
}

func (x *ctx) xinfoGroups(s *stream) Reply {
	gs, err := x.listGroups(s)
	if err != nil {
		return errReply(err)
	}
	out := make([]Reply, 0, len(gs))
	for _, g := range gs {
		read, lag := readLag(&s.st, g)
		out = append(out, Map(
			BulkString("name"), Bulk(g.Name),
			BulkString("consumers"), Int(int64(g.Consumers)),
			BulkString("pending"), Int(int64(g.PEL)),
			BulkString("last-delivered-id"), idReply(g.Last),
			BulkString("entries-read"), read,
			BulkString("lag"), lag,
		))
	}
	return Array(out...)
}

func (x *ctx) listConsumers(s *stream, g *streamrec.Group) ([]*streamrec.Consumer, error) {
	var cs []*streamrec.Consumer
	prefix := streamrec.GroupPrefix(streamrec.KindConsumer, g.Name)
	err := x.iterElems(s.c, prefix, nil, false, func(elem, v []byte) bool {
		cs = append(cs, streamrec.DecodeConsumer(elem[len(prefix):], v))
		return true
	})
	return cs, err
}

func (x *ctx) xinfoConsumers(s *stream, key, group []byte) Reply {
	g, err := x.getGroup(s, group)
	if err != nil {
		return errReply(err)
	}
	if g == nil {
		return errNoGroupForKey(key, group)
	}
	cs, err := x.listConsumers(s, g)
	if err != nil {
		return errReply(err)
	}
	out := make([]Reply, 0, len(cs))
	for _, c := range cs {
		out = append(out, Map(
			BulkString("name"), Bulk(c.Name),
			BulkString("pending"), Int(int64(c.PEL)),
			BulkString("idle"), Int(max(x.now-c.Seen, 0)),
		))
	}
	return Array(out...)
}

// xinfoFullGroups is the "groups" value of XINFO STREAM FULL.
func (x *ctx) xinfoFullGroups(s *stream, count int64) (Reply, error) {
	gs, err := x.listGroups(s)
	if err != nil {
		return Reply{}, err
	}
	out := make([]Reply, 0, len(gs))
	for _, g := range gs {
		read, lag := readLag(&s.st, g)
		pel := []Reply{}
		err := x.iterElems(s.c, streamrec.GroupPrefix(streamrec.KindPEL, g.Name), nil, false, func(elem, v []byte) bool {
			if count != 0 && int64(len(pel)) >= count {
				return false
			}
			n := streamrec.DecodeNACK(v)
			pel = append(pel, Array(idReply(streamrec.PELID(elem)), Bulk(n.Consumer), Int(n.Time), Int(int64(n.Count))))
			return true
		})
		if err != nil {
			return Reply{}, err
		}
		cs, err := x.listConsumers(s, g)
		if err != nil {
			return Reply{}, err
		}
		consumers := make([]Reply, 0, len(cs))
		for _, c := range cs {
			cpel := []Reply{}
			var ierr error
			err := x.iterElems(s.c, streamrec.ConsPELPrefix(g.Name, c.Name), nil, false, func(elem, _ []byte) bool {
				if count != 0 && int64(len(cpel)) >= count {
					return false
				}
				id := streamrec.PELID(elem)
				var n *streamrec.NACK
				if n, ierr = x.getNACK(s, g, id); ierr != nil {
					return false
				}
				if n == nil {
					n = &streamrec.NACK{}
				}
				cpel = append(cpel, Array(idReply(id), Int(n.Time), Int(int64(n.Count))))
				return true
			})
			if ierr != nil {
				return Reply{}, ierr
			}
			if err != nil {
				return Reply{}, err
			}
			consumers = append(consumers, Map(
				BulkString("name"), Bulk(c.Name),
				BulkString("seen-time"), Int(c.Seen),
				BulkString("pel-count"), Int(int64(c.PEL)),
				BulkString("pending"), Array(cpel...),
			))
		}
		out = append(out, Map(
			BulkString("name"), Bulk(g.Name),
			BulkString("last-delivered-id"), idReply(g.Last),
			BulkString("entries-read"), read,
			BulkString("lag"), lag,
			BulkString("pel-count"), Int(int64(g.PEL)),
			BulkString("pending"), Array(pel...),
			BulkString("consumers"), Array(consumers...),
		))
	}
	return Array(out...), nil
}

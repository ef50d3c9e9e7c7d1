package kv

import (
	"bytes"
	"strings"

	"github.com/kvorum/kvorum/internal/notify"
	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/streamargs"
	"github.com/kvorum/kvorum/internal/streamid"
	"github.com/kvorum/kvorum/internal/streamrec"
)

// Stream consumer groups (Redis 7.0): XGROUP, XREADGROUP, XACK here;
// XPENDING, XCLAIM and XAUTOCLAIM in stream_claim.go; XINFO GROUPS and
// CONSUMERS in stream_info.go. Storage: elements of the
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
	defParsed("xgroup", -2, "", 0, 0, 0, g, "A container for consumer groups commands.", streamargs.ParseXGroup, cmdXGroup)
	table["xgroup"].spec.Write = true
	table["xgroup"].readOnly = func(args [][]byte) bool { return len(args) > 1 && eq(args[1], "help") }
	defParsed("xreadgroup", -7, "write blocking movablekeys", 0, 0, 0, g, "Return new entries from a stream using a consumer group, or access the history of the pending entries for a given consumer. Can block.", streamargs.ParseXReadGroup, cmdXReadGroup)
	def("xack", -4, "write fast", 1, 1, 1, g, "Marks a pending message as correctly processed, effectively removing it from the pending entries list of the consumer group.", cmdXAck, nil)
	defParsed("xpending", -3, "readonly", 1, 1, 1, g, "Return information and entries from a stream consumer group pending entries list, that are messages fetched but never acknowledged.", streamargs.ParseXPending, cmdXPending)
	def("xclaim", -6, "write fast", 1, 1, 1, g, "Changes (or acquires) ownership of a message in a consumer group, as if the message was delivered to the specified consumer.", cmdXClaim, nil)
	defParsed("xautoclaim", -6, "write fast", 1, 1, 1, g, "Changes (or acquires) ownership of messages in a consumer group, as if the messages were delivered to the specified consumer.", streamargs.ParseXAutoClaim, cmdXAutoClaim)
}

// cstr is a C "%s" of b: up to the first NUL byte.
func cstr(b []byte) string { return string(reply.AppendCString(nil, b, len(b))) }

func errf(parts ...string) Reply {
	return reply.ErrorText([]byte(strings.Join(parts, "")))
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
		x.event(notify.Stream, "xgroup-createconsumer", s.c.key)
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

func cmdXGroup(x *ctx, args [][]byte, a streamargs.XGroup) Reply {
	sub := a.Sub
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
	if !a.MkStream && !exists {
		return Error("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.")
	}
	var g *streamrec.Group
	if exists {
		if g, err = x.getGroup(s, name); err != nil {
			return errReply(err)
		}
	}
	if !a.MkStream && g == nil && (sub == "setid" || sub == "createconsumer" || sub == "delconsumer") {
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
				return streamargs.ErrID
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
		g = &streamrec.Group{Name: name, Last: id, Read: a.Read}
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
		x.event(notify.Stream, "xgroup-create", key)
		return OK
	case sub == "setid" && (len(args) == 5 || len(args) == 7):
		var id streamid.ID
		if string(args[4]) == "$" {
			id = s.st.Last
		} else {
			var good bool
			if id, _, good = streamid.Parse(args[4], 0, false, false); !good {
				return streamargs.ErrID
			}
		}
		g.Last, g.Read = id, a.Read
		if err := x.saveGroup(s, g, nil); err != nil {
			return errReply(err)
		}
		x.event(notify.Stream, "xgroup-setid", key)
		return OK
	case sub == "destroy":
		if g == nil {
			return Int(0)
		}
		if err := x.deleteGroup(s, g); err != nil {
			return errReply(err)
		}
		x.groupsChanged(s)
		x.event(notify.Stream, "xgroup-destroy", key)
		return Int(1)
	case sub == "createconsumer":
		n := g.Consumers
		c, err := x.lookupConsumer(s, g, args[4], true) // emits the event if it creates c
		if err != nil || g.Consumers == n {
			return errOr(err, Int(0))
		}
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
		x.event(notify.Stream, "xgroup-delconsumer", key)
		return Int(int64(len(ids)))
	}
	return streamargs.SubSyntaxErr(args, "XGROUP")
}

// --- XREADGROUP ---

// XReadGroupRetry returns the command a blocked XREADGROUP repeats after
// its first try: with "COUNT 1000" added when it has no COUNT (Redis's
// XREAD_BLOCKED_DEFAULT_COUNT for clients that blocked); other commands
// are returned unchanged.
func XReadGroupRetry(args [][]byte) [][]byte {
	if len(args) == 0 || !eq(args[0], "xreadgroup") {
		return args
	}
	if a, _, ok := streamargs.ParseXReadGroup(args); !ok || a.CountIdx != 0 {
		return args
	}
	return withBlockedCount(args)
}

var gtID = streamid.Max // ">"

func cmdXReadGroup(x *ctx, args [][]byte, a streamargs.XReadGroup) Reply {
	ids := make([]streamid.ID, a.NKeys)
	for i := 0; i < a.NKeys; i++ {
		key := args[a.Streams+i]
		_, g, err := x.findGroup(key, a.Group)
		if err != nil {
			return errReply(err)
		}
		if g == nil {
			return errf("NOGROUP No such key '", cstr(key), "' or consumer group '", cstr(a.Group), "' in XREADGROUP with GROUP option")
		}
		idArg := args[a.Streams+a.NKeys+i]
		switch string(idArg) {
		case "$":
			return Error("ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.")
		case ">":
			ids[i] = gtID
			continue
		}
		id, good := streamid.ParseStrict(idArg)
		if !good {
			return streamargs.ErrID
		}
		ids[i] = id
	}
	var out []Reply
	for i := 0; i < a.NKeys; i++ {
		// The same key may be named twice: reload to see earlier changes.
		s, g, err := x.findGroup(args[a.Streams+i], a.Group)
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
		c, err := x.lookupConsumer(s, g, a.Consumer, true)
		if err != nil {
			return errReply(err)
		}
		var entries []Reply
		if history {
			entries, err = x.readConsumerPEL(s, g, c, start, a.Count)
		} else {
			entries, err = x.deliverNew(s, g, c, start, a.Count, a.NoAck)
		}
		if err != nil {
			return errReply(err)
		}
		if err := x.saveGroup(s, g, c); err != nil {
			return errReply(err)
		}
		out = append(out, Bulk(args[a.Streams+i]), Array(entries...))
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
			return streamargs.ErrID
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

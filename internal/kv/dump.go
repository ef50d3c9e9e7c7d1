package kv

import (
	"bytes"
	"errors"
	"math"

	"github.com/kvorum/kvorum/internal/notify"
	"github.com/kvorum/kvorum/internal/rdb"
	"github.com/kvorum/kvorum/internal/redisnum"
	"github.com/kvorum/kvorum/internal/streamid"
	"github.com/kvorum/kvorum/internal/streamrec"
)

// DUMP and RESTORE: a key's value in Redis's serialization format (the
// payload of Redis's DUMP: an RDB object, the RDB version, a CRC64), so
// that keys move between Redis and kvorum with the commands clients and
// tools already use. Package rdb reads and writes the format; this file
// converts between kvorum's records and rdb.Value.
//
// DUMP writes a hash, set or sorted set in the encoding OBJECT ENCODING
// answers for it (the record's encoding flags, set by the cluster's
// hash-max-listpack-entries and the others), as Redis's DUMP writes the
// encoding its object has. RESTORE decodes at apply, on every replica
// alike (the payload is in the log, and so are the relative TTL's base,
// Env.Now, and every decision): a payload rejected there writes nothing.
// Its checks come in Redis's order (options, BUSYKEY, TTL, payload), so
// the TTL and the payload are not looked at before the entry is applied.
// Payloads of RDB versions 11 and 12 (Redis 7.2, 7.4) are accepted for
// the types kvorum has (Redis 7.0 refuses them). The restored key gets
// the encoding flags a key built with the same elements by writes would
// get (the size-based choice, which is what Redis 7.0's RESTORE picks
// with the default configuration). A stream is rebuilt entry by entry into nodes as XADD
// builds them, with its metadata (last ID, entries added, max deleted ID,
// recorded first ID), its consumer groups, their pending entries and
// consumers. IDLETIME and FREQ are checked as Redis checks them and then
// ignored: kvorum keeps no LRU or LFU state (OBJECT IDLETIME and FREQ are
// not supported).

func init() {
	def("dump", 2, "readonly", 1, 1, 1, "generic", "Returns a serialized representation of the value stored at a key.", cmdDump, nil)
	defParsed("restore", -4, "write denyoom", 1, 1, 1, "generic", "Creates a key from the serialized representation of a value.", parseRestore, cmdRestore)
}

var (
	errBusyKey         = Error("BUSYKEY Target key name already exists.")
	errRestoreTTL      = Error("ERR Invalid TTL value, must be >= 0")
	errRestoreIdle     = Error("ERR Invalid IDLETIME value, must be >= 0")
	errRestoreFreq     = Error("ERR Invalid FREQ value, must be >= 0 and <= 255")
	errRestorePayload  = Error("ERR DUMP payload version or checksum are wrong")
	errRestoreBadData  = Error("ERR Bad data format")
	errRestoreBadValue = errors.New("kv: restored value is malformed")
)

// The payload codec: package rdb's (tests swap in their own, to test the
// conversions apart from the format).
var (
	encodeDump = rdb.EncodeDump
	decodeDump = rdb.DecodeDump
)

// ---------------------------------------------------------------------------
// DUMP

func cmdDump(x *ctx, args [][]byte) Reply {
	rec, ok, err := x.load(args[1])
	if err != nil || !ok {
		return errOr(err, Nil)
	}
	v, err := x.dumpValue(args[1], rec)
	if err != nil {
		return errReply(err)
	}
	payload, err := encodeDump(v, x.encodeOptions(rec))
	if err != nil {
		return Error("ERR DUMP failed: " + err.Error())
	}
	return Bulk(payload)
}

// encodeOptions are the rdb encoding options that write rec's value in
// the encoding it has (OBJECT ENCODING: the record's flags), as Redis's
// DUMP writes an object's current encoding whatever the configuration
// says now: the big one for a collection flagged big, the small one for
// one that is not (a threshold of 0, which rdb takes for its default, is
// -1: nothing fits).
func (x *ctx) encodeOptions(rec record) rdb.EncodeOptions {
	s := x.limits()
	lim := func(v int64) int64 {
		if v == 0 {
			return -1
		}
		return v
	}
	o := rdb.EncodeOptions{
		HashMaxListpackEntries: lim(s.enc[hashEntries]),
		HashMaxListpackValue:   lim(s.enc[hashValue]),
		ZSetMaxListpackEntries: lim(s.enc[zsetEntries]),
		ZSetMaxListpackValue:   lim(s.enc[zsetValue]),
		SetMaxIntsetEntries:    lim(s.enc[setEntries]),
		Compress:               true,
	}
	if rec.typ != typeHash && rec.typ != typeSet && rec.typ != typeZSet {
		return o
	}
	entries, value := int64(math.MaxInt64), int64(math.MaxInt64)
	if x.isBig(rec) {
		entries = -1
	}
	switch rec.typ {
	case typeHash:
		o.HashMaxListpackEntries, o.HashMaxListpackValue = entries, value
	case typeSet:
		o.SetMaxIntsetEntries = entries // an intset still needs integers only
	case typeZSet:
		o.ZSetMaxListpackEntries, o.ZSetMaxListpackValue = entries, value
	}
	return o
}

// dumpValue reads key k's value, whose record is rec, into an rdb.Value.
func (x *ctx) dumpValue(k []byte, rec record) (*rdb.Value, error) {
	c := &coll{key: k, rec: rec}
	switch rec.typ {
	case typeString:
		return &rdb.Value{Kind: rdb.KindString, String: rec.value}, nil
	case typeList:
		l := x.listView(c)
		vals, err := l.read(0, l.n(), false)
		return &rdb.Value{Kind: rdb.KindList, List: vals}, err
	case typeSet:
		v := &rdb.Value{Kind: rdb.KindSet, Set: make([][]byte, 0, min(c.length(), 1<<16))}
		err := x.iterElems(c, nil, nil, false, func(elem, _ []byte) bool {
			v.Set = append(v.Set, bytes.Clone(elem))
			return true
		})
		return v, err
	case typeHash:
		v := &rdb.Value{Kind: rdb.KindHash, Hash: make([]rdb.Field, 0, min(c.length(), 1<<16))}
		err := x.iterElems(c, nil, nil, false, func(elem, value []byte) bool {
			v.Hash = append(v.Hash, rdb.Field{Name: bytes.Clone(elem), Value: bytes.Clone(value)})
			return true
		})
		return v, err
	case typeZSet:
		v := &rdb.Value{Kind: rdb.KindZSet, ZSet: make([]rdb.ZMember, 0, min(c.length(), 1<<16))}
		err := x.zview(c).walk(nil, false, func(u uint64, member []byte) bool {
			v.ZSet = append(v.ZSet, rdb.ZMember{Member: bytes.Clone(member), Score: redisnum.Unsortable(u)})
			return true
		})
		return v, err
	case typeStream:
		return x.dumpStream(&stream{c: c, st: streamrec.DecodeState(rec.value)})
	}
	return nil, errCorruptRecord
}

func rdbID(id streamid.ID) rdb.StreamID { return rdb.StreamID{Ms: id.Ms, Seq: id.Seq} }

func fromRDBID(id rdb.StreamID) streamid.ID { return streamid.ID{Ms: id.Ms, Seq: id.Seq} }

// dumpStream reads a stream with its groups, their pending entries and
// consumers.
func (x *ctx) dumpStream(s *stream) (*rdb.Value, error) {
	st := &s.st
	out := &rdb.Stream{
		LastID: rdbID(st.Last), FirstID: rdbID(st.First), MaxDeletedID: rdbID(st.MaxDel), EntriesAdded: st.Added,
		Entries: make([]rdb.StreamEntry, 0, min(st.Length, 1<<16)),
	}
	err := x.iterElems(s.c, []byte{streamrec.KindEntry}, nil, false, func(elem, v []byte) bool {
		if id, ok := streamrec.EntryID(elem); ok {
			out.Entries = append(out.Entries, rdb.StreamEntry{ID: rdbID(id), Fields: streamrec.EntryFields(v)})
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	groups, err := x.listGroups(s)
	if err != nil {
		return nil, err
	}
	for _, g := range groups {
		rg := rdb.StreamGroup{Name: g.Name, LastID: rdbID(g.Last), EntriesRead: g.Read}
		pre := streamrec.GroupPrefix(streamrec.KindPEL, g.Name)
		err := x.iterElems(s.c, pre, nil, false, func(elem, v []byte) bool {
			if len(elem) != len(pre)+streamid.Size {
				return true
			}
			n := streamrec.DecodeNACK(v)
			rg.Pending = append(rg.Pending, rdb.PendingEntry{ID: rdbID(streamrec.PELID(elem)), Consumer: n.Consumer, DeliveryMs: n.Time, DeliveryCount: n.Count})
			return true
		})
		if err != nil {
			return nil, err
		}
		pre = streamrec.GroupPrefix(streamrec.KindConsumer, g.Name)
		err = x.iterElems(s.c, pre, nil, false, func(elem, v []byte) bool {
			c := streamrec.DecodeConsumer(elem[len(pre):], v)
			rg.Consumers = append(rg.Consumers, rdb.Consumer{Name: c.Name, SeenMs: c.Seen})
			return true
		})
		if err != nil {
			return nil, err
		}
		out.Groups = append(out.Groups, rg)
	}
	return &rdb.Value{Kind: rdb.KindStream, Stream: out}, nil
}

// ---------------------------------------------------------------------------
// RESTORE

type restoreArgs struct{ replace, absTTL bool }

// parseRestore parses RESTORE's options as Redis's restoreCommand does,
// each error as it comes: REPLACE, ABSTTL, IDLETIME seconds (not after
// FREQ), FREQ frequency (not after IDLETIME). The TTL and the payload are
// looked at after the key, at apply (Redis answers BUSYKEY first).
func parseRestore(args [][]byte) (a restoreArgs, r Reply, ok bool) {
	idle, freq := false, false
	for j := 4; j < len(args); j++ {
		more := len(args) - j - 1
		switch {
		case eq(args[j], "replace"):
			a.replace = true
		case eq(args[j], "absttl"):
			a.absTTL = true
		case eq(args[j], "idletime") && more >= 1 && !freq:
			n, ok := redisnum.ParseInt(args[j+1])
			if !ok {
				return a, errNotInt, false
			}
			if n < 0 {
				return a, errRestoreIdle, false
			}
			idle = true
			j++
		case eq(args[j], "freq") && more >= 1 && !idle:
			n, ok := redisnum.ParseInt(args[j+1])
			if !ok {
				return a, errNotInt, false
			}
			if n < 0 || n > 255 {
				return a, errRestoreFreq, false
			}
			freq = true
			j++
		default:
			return a, errSyntax, false
		}
	}
	return a, Reply{}, true
}

func cmdRestore(x *ctx, args [][]byte, a restoreArgs) Reply {
	key := args[1]
	_, exists, err := x.loadHeader(key)
	if err != nil {
		return errReply(err)
	}
	if exists && !a.replace {
		return errBusyKey
	}
	ttl, ok := redisnum.ParseInt(args[2])
	if !ok {
		return errNotInt
	}
	if ttl < 0 {
		return errRestoreTTL
	}
	v, err := decodeDump(args[3])
	switch {
	case errors.Is(err, rdb.ErrPayload):
		return errRestorePayload
	case err != nil:
		return errRestoreBadData
	}
	if err := checkRestored(v); err != nil {
		return errRestoreBadData
	}
	if ttl != 0 && !a.absTTL {
		if ttl > math.MaxInt64-x.now {
			ttl = math.MaxInt64
		} else {
			ttl += x.now
		}
	}
	if ttl != 0 && ttl <= x.now {
		// Already expired: OK, and the key is gone (Redis deletes the
		// old one if REPLACE found it, and adds nothing).
		if exists {
			if err := x.del(key); err != nil {
				return errReply(err)
			}
		}
		return OK
	}
	if exists {
		if err := x.newOver(key); err != nil {
			return errReply(err)
		}
	}
	if err := x.restoreValue(key, v, ttl); err != nil {
		return errReply(err)
	}
	x.event(notify.Generic, "restore", key)
	return OK
}

// checkRestored checks what Redis's loading refuses in a value that
// parsed ("Bad data format"): an empty collection other than a stream,
// duplicate hash fields, set or sorted set members, a NaN score, stream
// entries out of order or without fields, and pending entries whose
// consumer is not among the group's consumers. It runs before anything is
// written, so a refused payload changes nothing.
func checkRestored(v *rdb.Value) error {
	dup := func(n int, elem func(i int) []byte) error {
		if n == 0 {
			return errRestoreBadValue
		}
		seen := make(map[string]struct{}, n)
		for i := 0; i < n; i++ {
			e := elem(i)
			if _, ok := seen[string(e)]; ok {
				return errRestoreBadValue
			}
			seen[string(e)] = struct{}{}
		}
		return nil
	}
	switch v.Kind {
	case rdb.KindString:
		return nil
	case rdb.KindList:
		if len(v.List) == 0 {
			return errRestoreBadValue
		}
		return nil
	case rdb.KindSet:
		return dup(len(v.Set), func(i int) []byte { return v.Set[i] })
	case rdb.KindHash:
		return dup(len(v.Hash), func(i int) []byte { return v.Hash[i].Name })
	case rdb.KindZSet:
		for _, m := range v.ZSet {
			if math.IsNaN(m.Score) {
				return errRestoreBadValue
			}
		}
		return dup(len(v.ZSet), func(i int) []byte { return v.ZSet[i].Member })
	case rdb.KindStream:
		s := v.Stream
		if s == nil {
			return errRestoreBadValue
		}
		var prev streamid.ID
		for i, e := range s.Entries {
			id := fromRDBID(e.ID)
			if i > 0 && id.Cmp(prev) <= 0 || len(e.Fields) == 0 || len(e.Fields)%2 != 0 {
				return errRestoreBadValue
			}
			prev = id
		}
		groups := make(map[string]struct{}, len(s.Groups))
		for _, g := range s.Groups {
			if _, ok := groups[string(g.Name)]; ok {
				return errRestoreBadValue
			}
			groups[string(g.Name)] = struct{}{}
			consumers := make(map[string]struct{}, len(g.Consumers))
			for _, c := range g.Consumers {
				if _, ok := consumers[string(c.Name)]; ok {
					return errRestoreBadValue
				}
				consumers[string(c.Name)] = struct{}{}
			}
			pending := make(map[streamid.ID]struct{}, len(g.Pending))
			for _, p := range g.Pending {
				id := fromRDBID(p.ID)
				if _, ok := pending[id]; ok {
					return errRestoreBadValue
				}
				pending[id] = struct{}{}
				if _, ok := consumers[string(p.Consumer)]; !ok {
					return errRestoreBadValue
				}
			}
		}
		return nil
	}
	return errRestoreBadValue
}

// restoreValue writes v (checked by checkRestored) as key's new value with
// deadline expire (Unix ms, 0: none), replacing whatever key held.
func (x *ctx) restoreValue(key []byte, v *rdb.Value, expire int64) error {
	if v.Kind == rdb.KindString {
		rec := record{typ: typeString, expire: expire, value: v.String}
		return x.store(key, &rec)
	}
	var typ byte
	switch v.Kind {
	case rdb.KindList:
		typ = typeList
	case rdb.KindSet:
		typ = typeSet
	case rdb.KindHash:
		typ = typeHash
	case rdb.KindZSet:
		typ = typeZSet
	case rdb.KindStream:
		typ = typeStream
	}
	version, err := x.newVersion()
	if err != nil {
		return err
	}
	c := &coll{key: key, rec: record{typ: typ, version: version, expire: expire}}
	switch v.Kind {
	case rdb.KindList:
		c.setListBounds(listOrigin, listOrigin+uint64(len(v.List)))
		l := x.listView(c)
		for i, e := range v.List {
			if err := l.set(int64(i), e); err != nil {
				return err
			}
		}
	case rdb.KindSet:
		for _, m := range v.Set {
			if err := x.setElem(c, m, []byte{}); err != nil {
				return err
			}
		}
		c.setLength(int64(len(v.Set)))
	case rdb.KindHash:
		for _, f := range v.Hash {
			if err := x.setElem(c, f.Name, f.Value); err != nil {
				return err
			}
		}
		c.setLength(int64(len(v.Hash)))
	case rdb.KindZSet:
		z := x.zview(c)
		for _, m := range v.ZSet {
			if err := z.set(m.Member, m.Score, 0, false); err != nil {
				return err
			}
		}
		c.setLength(int64(len(v.ZSet)))
	case rdb.KindStream:
		return x.restoreStream(c, v.Stream)
	}
	c.grew = true
	return x.saveColl(c)
}

// restoreStream builds stream c from s: its entries appended as XADD
// appends them, then its metadata, groups, pending entries and consumers.
func (x *ctx) restoreStream(c *coll, rs *rdb.Stream) error {
	s := &stream{c: c}
	for _, e := range rs.Entries {
		if err := x.appendEntry(s, fromRDBID(e.ID), e.Fields); err != nil {
			return err
		}
	}
	st := &s.st
	if last := fromRDBID(rs.LastID); last.Cmp(st.Last) > 0 {
		st.Last = last
	}
	st.Added = max(rs.EntriesAdded, st.Length)
	st.MaxDel = fromRDBID(rs.MaxDeletedID)
	if first := fromRDBID(rs.FirstID); st.Length > 0 && !first.IsZero() {
		st.First = first
	}
	for _, rg := range rs.Groups {
		g := &streamrec.Group{Name: rg.Name, Last: fromRDBID(rg.LastID), Read: rg.EntriesRead,
			PEL: uint64(len(rg.Pending)), Consumers: uint64(len(rg.Consumers))}
		if g.Read < 0 {
			g.Read = streamrec.ReadUnknown
		}
		owned := make(map[string]uint64, len(rg.Consumers))
		for _, p := range rg.Pending {
			id := fromRDBID(p.ID)
			n := &streamrec.NACK{Time: p.DeliveryMs, Count: p.DeliveryCount, Consumer: p.Consumer}
			if err := x.putNACK(s, g, id, n); err != nil {
				return err
			}
			if err := x.setElem(s.c, streamrec.ConsPELElem(g.Name, p.Consumer, id), nil); err != nil {
				return err
			}
			owned[string(p.Consumer)]++
		}
		for _, rc := range rg.Consumers {
			cons := &streamrec.Consumer{Name: rc.Name, Seen: rc.SeenMs, PEL: owned[string(rc.Name)]}
			if err := x.putConsumer(s, g, cons); err != nil {
				return err
			}
		}
		if err := x.putGroup(s, g); err != nil {
			return err
		}
	}
	return x.saveStream(s)
}

// Package streamrec is how package kv stores a Redis stream: the records
// (the stream's state, its nodes and entries, its consumer groups,
// consumers and pending entries), their encodings, and the element keys
// they are stored under within the stream's incarnation. Storage layout
// and its rationale: see kv's stream.go and stream_group.go. The package
// reads and writes bytes only; kv loads and saves the records.
//
// Every element key starts with a one-byte kind (<g> is
// uvarint(len(group)) group; integers are big-endian):
//
//	'e' <id:16>                an entry: <node:8> <n:uvarint> then n times
//	                           <len:uvarint> <bytes> (field, value, ...)
//	'n' <node:8>               a node: <live:8> <last id:16> [<master id:16>
//	                           <added:8> <bytes:8> <fields>] (Node.Encode)
//	'g' <group name>           a group: last-delivered-id (16),
//	                           entries-read (int64, -1: unknown),
//	                           PEL size, consumers (8 each)
//	'c' <g> <consumer name>    a consumer: seen-time (int64 ms), PEL size
//	'p' <g> <id:16>            a group's pending entry: delivery time
//	                           (int64 ms), delivery count, the consumer name
//	'q' <g> <uvarint len> <consumer> <id:16>   a consumer's pending entry
//	                           (empty value)
//
// The state (the stream's metadata value, not an element) is State.
//
// IDs are big-endian (streamid), so entries and pending entries sort by
// ID, and names sort as Redis's radix trees do (byte order).
package streamrec

import (
	"encoding/binary"

	"github.com/kvorum/kvorum/internal/streamid"
)

// Element kinds.
const (
	KindEntry    = 'e'
	KindNode     = 'n'
	KindGroup    = 'g'
	KindConsumer = 'c'
	KindPEL      = 'p'
	KindConsPEL  = 'q'
)

// ReadUnknown is a group's entries-read when it is not known (Redis's
// SCG_INVALID_ENTRIES_READ).
const ReadUnknown = -1

// EntryElemSize is the length of an entry's element key.
const EntryElemSize = 1 + streamid.Size

var be = binary.BigEndian

// ---------------------------------------------------------------------------
// State

// State is a stream's metadata value.
type State struct {
	Length    uint64
	Last      streamid.ID // last-generated-id
	MaxDel    streamid.ID // max-deleted-entry-id
	Added     uint64      // entries-added
	First     streamid.ID // recorded-first-entry-id
	Appended  uint64      // entries ever appended to this incarnation: the next node id
	TailNode  uint64      // id of the tail node
	TailCount uint64      // entries ever added to the tail node; 0: none (the next XADD starts a node)
	Nodes     uint64      // number of node records (radix-tree-keys)
	Groups    uint64      // unused, always 0 (groups are counted from their records)
}

// stateSize is the length of an encoded State. Length comes first, so
// kv's collection length (the metadata's first 8 bytes) is the stream's.
const stateSize = 8 + 16 + 16 + 8 + 16 + 8*5

// DecodeState decodes a State; a short value is the zero State.
func DecodeState(v []byte) State {
	if len(v) < stateSize {
		return State{}
	}
	u := func(i int) uint64 { return be.Uint64(v[i:]) }
	return State{
		Length: u(0), Last: streamid.Get(v[8:]), MaxDel: streamid.Get(v[24:]), Added: u(40),
		First: streamid.Get(v[48:]), Appended: u(64), TailNode: u(72), TailCount: u(80), Nodes: u(88), Groups: u(96),
	}
}

// Encode encodes s.
func (s *State) Encode() []byte {
	v := make([]byte, 0, stateSize)
	v = be.AppendUint64(v, s.Length)
	v = s.Last.Append(v)
	v = s.MaxDel.Append(v)
	v = be.AppendUint64(v, s.Added)
	v = s.First.Append(v)
	for _, n := range []uint64{s.Appended, s.TailNode, s.TailCount, s.Nodes, s.Groups} {
		v = be.AppendUint64(v, n)
	}
	return v
}

// RangeHasTombstones is Redis's streamRangeHasTombstones from start to
// the end of the stream: whether an entry at or after start may have been
// deleted.
func (s *State) RangeHasTombstones(start streamid.ID) bool {
	if s.Length == 0 || s.MaxDel.IsZero() || s.First.Cmp(s.MaxDel) > 0 {
		return false
	}
	return start.Cmp(s.MaxDel) <= 0
}

// EstimateDistance is Redis's streamEstimateDistanceFromFirstEverEntry:
// how many entries were added up to id, or ReadUnknown.
func (s *State) EstimateDistance(id streamid.ID) int64 {
	if s.Added == 0 {
		return 0
	}
	if s.Length == 0 && id.Cmp(s.Last) < 1 {
		return int64(s.Added)
	}
	cmpLast := id.Cmp(s.Last)
	if cmpLast == 0 {
		return int64(s.Added)
	} else if cmpLast > 0 {
		return ReadUnknown
	}
	cmpFirst := id.Cmp(s.First)
	if s.MaxDel.IsZero() || s.MaxDel.Cmp(s.First) < 0 {
		if cmpFirst < 0 {
			return int64(s.Added - s.Length)
		} else if cmpFirst == 0 {
			return int64(s.Added - s.Length + 1)
		}
	}
	return ReadUnknown
}

// Lag is Redis's streamReplyWithCGLag: how many entries group g has yet
// to read; ok=false if that is not known.
func (s *State) Lag(g *Group) (n int64, ok bool) {
	if s.Added == 0 {
		return 0, true
	}
	if g.Read != ReadUnknown && !s.RangeHasTombstones(g.Last) {
		return int64(s.Added) - g.Read, true
	}
	if d := s.EstimateDistance(g.Last); d != ReadUnknown {
		return int64(s.Added) - d, true
	}
	return 0, false
}

// ---------------------------------------------------------------------------
// Nodes and entries

// Node is a node record: its id, its live entries and the last ID ever
// added to it; and, for records written since kvorum models Redis's node
// sizes (Exact, see listpack.go), the node's master ID (its first entry's
// ID: Redis's radix tree key), the entries ever added to it (live and
// deleted), its listpack size without the count and deleted elements, and
// the master entry's fields.
type Node struct {
	ID   uint64
	Live uint64
	Last streamid.ID

	Exact  bool
	Master streamid.ID
	Added  uint64
	Bytes  uint64
	Fields [][]byte
}

// nodeBase is the length of a node record written before Exact: live and
// last.
const nodeBase = 8 + streamid.Size

// NodeElem is node id's element key.
func NodeElem(id uint64) []byte { return be.AppendUint64([]byte{KindNode}, id) }

// DecodeNode decodes node id's record; ok=false if v is too short.
func DecodeNode(id uint64, v []byte) (n Node, ok bool) {
	if len(v) < nodeBase {
		return Node{ID: id}, false
	}
	n = Node{ID: id, Live: be.Uint64(v), Last: streamid.Get(v[8:])}
	p := v[nodeBase:]
	if len(p) < streamid.Size+16 {
		return n, true // an older record
	}
	n.Master = streamid.Get(p)
	n.Added = be.Uint64(p[streamid.Size:])
	n.Bytes = be.Uint64(p[streamid.Size+8:])
	p = p[streamid.Size+16:]
	k, w := binary.Uvarint(p)
	if w <= 0 || k > uint64(len(p)) {
		return Node{ID: id, Live: n.Live, Last: n.Last}, true
	}
	p = p[w:]
	n.Fields = make([][]byte, 0, k)
	for i := uint64(0); i < k; i++ {
		l, w := binary.Uvarint(p)
		if w <= 0 || uint64(len(p)-w) < l {
			return Node{ID: id, Live: n.Live, Last: n.Last}, true
		}
		n.Fields = append(n.Fields, append([]byte(nil), p[w:w+int(l)]...))
		p = p[w+int(l):]
	}
	n.Exact = true
	return n, true
}

// DecodeNodeElem decodes a node from its element key and record; ok=false
// if either is malformed.
func DecodeNodeElem(elem, v []byte) (Node, bool) {
	if len(elem) != 9 {
		return Node{}, false
	}
	return DecodeNode(be.Uint64(elem[1:]), v)
}

// Encode encodes n's record: <live:8> <last:16>, then if n is Exact
// <master:16> <added:8> <bytes:8> <n:uvarint> and n times <len:uvarint>
// <field>.
func (n Node) Encode() []byte {
	v := n.Last.Append(be.AppendUint64(make([]byte, 0, nodeBase), n.Live))
	if !n.Exact {
		return v
	}
	v = n.Master.Append(v)
	v = be.AppendUint64(be.AppendUint64(v, n.Added), n.Bytes)
	v = binary.AppendUvarint(v, uint64(len(n.Fields)))
	for _, f := range n.Fields {
		v = binary.AppendUvarint(v, uint64(len(f)))
		v = append(v, f...)
	}
	return v
}

// EntryElem is entry id's element key.
func EntryElem(id streamid.ID) []byte { return id.Append([]byte{KindEntry}) }

// EntryID is the ID in an entry's element key; ok=false if it is not one.
func EntryID(elem []byte) (streamid.ID, bool) {
	if len(elem) != EntryElemSize {
		return streamid.ID{}, false
	}
	return streamid.Get(elem[1:]), true
}

// EncodeEntry encodes an entry of node with its fields and values.
func EncodeEntry(node uint64, fields [][]byte) []byte {
	n := 8 + binary.MaxVarintLen64
	for _, f := range fields {
		n += binary.MaxVarintLen64 + len(f)
	}
	b := be.AppendUint64(make([]byte, 0, n), node)
	b = binary.AppendUvarint(b, uint64(len(fields)))
	for _, f := range fields {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	return b
}

// EntryNode is the node of an encoded entry.
func EntryNode(v []byte) uint64 {
	if len(v) < 8 {
		return 0
	}
	return be.Uint64(v)
}

// EntryFields returns copies of an encoded entry's fields and values, in
// order; as many as can be read of a damaged one.
func EntryFields(v []byte) [][]byte {
	if len(v) < 8 {
		return nil
	}
	p := v[8:]
	n, k := binary.Uvarint(p)
	if k <= 0 {
		return nil
	}
	p = p[k:]
	out := make([][]byte, 0, min(n, uint64(len(p))))
	for i := uint64(0); i < n; i++ {
		l, k := binary.Uvarint(p)
		if k <= 0 || uint64(len(p)-k) < l {
			break
		}
		out = append(out, append([]byte(nil), p[k:k+int(l)]...))
		p = p[k+int(l):]
	}
	return out
}

// ---------------------------------------------------------------------------
// Consumer groups

// GroupPrefix is the element key prefix of the records of kind (a
// consumer, pending entries) of group.
func GroupPrefix(kind byte, group []byte) []byte {
	b := binary.AppendUvarint([]byte{kind}, uint64(len(group)))
	return append(b, group...)
}

// GroupElem is group's element key.
func GroupElem(group []byte) []byte { return append([]byte{KindGroup}, group...) }

// ConsumerElem is the element key of a consumer of group.
func ConsumerElem(group, consumer []byte) []byte {
	return append(GroupPrefix(KindConsumer, group), consumer...)
}

// PELElem is the element key of entry id in group's PEL.
func PELElem(group []byte, id streamid.ID) []byte {
	return id.Append(GroupPrefix(KindPEL, group))
}

// ConsPELPrefix is the element key prefix of a consumer's PEL.
func ConsPELPrefix(group, consumer []byte) []byte {
	b := binary.AppendUvarint(GroupPrefix(KindConsPEL, group), uint64(len(consumer)))
	return append(b, consumer...)
}

// ConsPELElem is the element key of entry id in a consumer's PEL.
func ConsPELElem(group, consumer []byte, id streamid.ID) []byte {
	return id.Append(ConsPELPrefix(group, consumer))
}

// PELID is the entry ID that ends a PEL element key (of either PEL).
func PELID(elem []byte) streamid.ID { return streamid.Get(elem[len(elem)-streamid.Size:]) }

// Group is a consumer group's record.
type Group struct {
	Name      []byte
	Last      streamid.ID // last-delivered-id
	Read      int64       // entries-read, or ReadUnknown
	PEL       uint64      // pending entries
	Consumers uint64
}

// DecodeGroup decodes the record v of the group name (copied).
func DecodeGroup(name, v []byte) *Group {
	g := &Group{Name: append([]byte(nil), name...), Read: ReadUnknown}
	if len(v) >= 40 {
		g.Last = streamid.Get(v)
		g.Read = int64(be.Uint64(v[16:]))
		g.PEL = be.Uint64(v[24:])
		g.Consumers = be.Uint64(v[32:])
	}
	return g
}

// Encode encodes g's record.
func (g *Group) Encode() []byte {
	v := g.Last.Append(make([]byte, 0, 40))
	return be.AppendUint64(be.AppendUint64(be.AppendUint64(v, uint64(g.Read)), g.PEL), g.Consumers)
}

// Consumer is a consumer's record.
type Consumer struct {
	Name []byte
	Seen int64  // seen-time, Unix ms
	PEL  uint64 // pending entries
}

// DecodeConsumer decodes the record v of the consumer name (copied).
func DecodeConsumer(name, v []byte) *Consumer {
	c := &Consumer{Name: append([]byte(nil), name...)}
	if len(v) >= 16 {
		c.Seen = int64(be.Uint64(v))
		c.PEL = be.Uint64(v[8:])
	}
	return c
}

// Encode encodes c's record.
func (c *Consumer) Encode() []byte {
	return be.AppendUint64(be.AppendUint64(make([]byte, 0, 16), uint64(c.Seen)), c.PEL)
}

// NACK is a pending entry of a group's PEL.
type NACK struct {
	Time     int64  // last delivery, Unix ms
	Count    uint64 // deliveries
	Consumer []byte // owner
}

// DecodeNACK decodes a pending entry (the consumer copied).
func DecodeNACK(v []byte) *NACK {
	if len(v) < 16 {
		return &NACK{}
	}
	return &NACK{Time: int64(be.Uint64(v)), Count: be.Uint64(v[8:]), Consumer: append([]byte(nil), v[16:]...)}
}

// Encode encodes n.
func (n *NACK) Encode() []byte {
	v := be.AppendUint64(be.AppendUint64(make([]byte, 0, 16+len(n.Consumer)), uint64(n.Time)), n.Count)
	return append(v, n.Consumer...)
}

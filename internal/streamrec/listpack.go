package streamrec

import "github.com/kvorum/kvorum/internal/streamid"

// Redis 7.0 keeps each stream node as a listpack and closes the tail node
// (the next XADD starts a new one) by its size in bytes as well as by its
// entry count (streamAppendItem: stream-node-max-bytes and
// stream-node-max-entries). kvorum stores entries one per key, but keeps
// in each node record the size that node's listpack would have in Redis,
// computed from listpack.c's encodings, so that it closes nodes at the
// same entries as Redis does, and approximate trimming (which removes
// whole nodes only) removes the same entries.
//
// A node's listpack in Redis is: a 6-byte header; the master entry
// (count, deleted, num-fields, the fields of the node's first entry, a 0
// terminator); then for each entry ever added: flags, ms-diff, seq-diff
// (from the master ID, the node's first entry ID), [num-fields, fields:
// omitted when the fields are the master's, flag SAMEFIELDS], values,
// lp-count; and a 1-byte end marker. Deleting an entry only flags it (the
// flags stay one byte) and updates count and deleted, whose sizes depend
// on their values: Node.Bytes is the size without those two elements, and
// LPBytes adds them.

// LPIntSize is the size in a listpack of the integer element v: its
// encoding (lpEncodeIntegerGetType) and its one-byte back length.
func LPIntSize(v int64) uint64 {
	switch {
	case v >= 0 && v <= 127:
		return 1 + 1
	case v >= -4096 && v <= 4095:
		return 2 + 1
	case v >= -32768 && v <= 32767:
		return 3 + 1
	case v >= -8388608 && v <= 8388607:
		return 4 + 1
	case v >= -2147483648 && v <= 2147483647:
		return 5 + 1
	}
	return 9 + 1
}

// LPStringSize is the size in a listpack of the string element s: an
// integer if listpack.c's lpStringToInt64 takes it, else the string
// encoding (6-, 12- or 32-bit length) and the back length.
func LPStringSize(s []byte) uint64 {
	if v, ok := lpStringToInt64(s); ok {
		return LPIntSize(v)
	}
	n := uint64(len(s))
	switch {
	case n < 64:
		n++
	case n < 4096:
		n += 2
	default:
		n += 5
	}
	return n + lpBacklenSize(n)
}

// lpBacklenSize is lpEncodeBacklen's size for an element of l bytes.
func lpBacklenSize(l uint64) uint64 {
	switch {
	case l <= 127:
		return 1
	case l < 16383:
		return 2
	case l < 2097151:
		return 3
	case l < 268435455:
		return 4
	}
	return 5
}

// lpStringToInt64 is listpack.c's: the canonical decimal form of an
// int64 only (no sign but '-', no leading zero, no "-0"), at most 20
// bytes.
func lpStringToInt64(s []byte) (int64, bool) {
	if len(s) == 0 || len(s) >= 21 {
		return 0, false
	}
	if len(s) == 1 && s[0] == '0' {
		return 0, true
	}
	p := s
	neg := p[0] == '-'
	if neg {
		p = p[1:]
		if len(p) == 0 {
			return 0, false
		}
	}
	if p[0] < '1' || p[0] > '9' {
		return 0, false
	}
	var v uint64
	for _, c := range p {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (1<<64-1)/10 || v*10 > 1<<64-1-d {
			return 0, false
		}
		v = v*10 + d
	}
	if neg {
		if v > 1<<63 {
			return 0, false
		}
		return int64(-v), true //nolint:gosec // -2^63 wraps to itself
	}
	if v > 1<<63-1 {
		return 0, false
	}
	return int64(v), true
}

// lpHeaderEnd is the listpack header (total bytes, element count) and
// end marker.
const lpHeaderEnd = 6 + 1

// NewNode is node id's record for a node whose first entry, id, has
// fieldValues (field, value, ...): the master entry holds its fields. The
// entry itself is not added (Append).
func NewNode(node uint64, id streamid.ID, fieldValues [][]byte) Node {
	n := Node{ID: node, Exact: true, Master: id}
	n.Bytes = lpHeaderEnd + LPIntSize(int64(len(fieldValues)/2)) + LPIntSize(0)
	for i := 0; i < len(fieldValues); i += 2 {
		f := append([]byte(nil), fieldValues[i]...)
		n.Fields = append(n.Fields, f)
		n.Bytes += LPStringSize(f)
	}
	return n
}

// Append adds entry id with fieldValues to n, as streamAppendItem adds it
// to the listpack (its fields omitted when they are the master's).
func (n *Node) Append(id streamid.ID, fieldValues [][]byte) {
	numFields := len(fieldValues) / 2
	same := numFields == len(n.Fields)
	for i := 0; same && i < numFields; i++ {
		same = string(fieldValues[2*i]) == string(n.Fields[i])
	}
	// flags (0 or SAMEFIELDS: one byte), ms-diff and seq-diff as int64 (the
	// uint64 differences as Redis passes them to lpAppendInteger).
	b := LPIntSize(0) + LPIntSize(int64(id.Ms-n.Master.Ms)) + LPIntSize(int64(id.Seq-n.Master.Seq)) //nolint:gosec // wraps as in Redis
	lpCount := int64(numFields) + 3
	if !same {
		b += LPIntSize(int64(numFields))
		lpCount += int64(numFields) + 1
	}
	for i := 0; i < numFields; i++ {
		if !same {
			b += LPStringSize(fieldValues[2*i])
		}
		b += LPStringSize(fieldValues[2*i+1])
	}
	n.Bytes += b + LPIntSize(lpCount)
	n.Added++
	n.Live++
	n.Last = id
}

// LPBytes is the size of n's listpack in Redis (lpBytes), with its count
// (live entries) and deleted elements.
func (n *Node) LPBytes() uint64 {
	return n.Bytes + LPIntSize(int64(n.Live)) + LPIntSize(int64(n.Added-n.Live)) //nolint:gosec // counts fit
}

// ListpackMaxSize is Redis's STREAM_LISTPACK_MAX_SIZE: the byte limit
// used when stream-node-max-bytes is 0 or larger.
const ListpackMaxSize = 1 << 30

// Full reports whether streamAppendItem would start a new node rather
// than append an entry with fieldValues to n, under the parameters
// stream-node-max-bytes (maxBytes) and stream-node-max-entries
// (maxEntries; 0: no limit). Redis compares the node's listpack size plus
// the entry's raw field and value lengths (not their encoded size) with
// the byte limit, and the entries ever added (live and deleted) with the
// count limit. A node record written before kvorum kept sizes (not
// Exact) is full: its entries are not known.
func (n *Node) Full(fieldValues [][]byte, maxBytes, maxEntries uint64) bool {
	if !n.Exact {
		return true
	}
	if maxBytes == 0 || maxBytes > ListpackMaxSize {
		maxBytes = ListpackMaxSize
	}
	var tot uint64
	for _, f := range fieldValues {
		tot += uint64(len(f))
	}
	if n.LPBytes()+tot >= maxBytes {
		return true
	}
	return maxEntries != 0 && n.Added >= maxEntries
}

// Key is n's radix tree key in Redis: its master ID, big-endian. For a
// record written before kvorum kept it (not Exact), the last ID added to
// the node stands in (it sorts the same among the stream's nodes).
func (n *Node) Key() streamid.ID {
	if n.Exact {
		return n.Master
	}
	return n.Last
}

// RaxNodes is the number of nodes of Redis's radix tree (rax.c) holding
// keys, the 16-byte big-endian master IDs of a stream's nodes in
// ascending order (XINFO STREAM's radix-tree-nodes). rax keeps the tree
// compressed: for keys of one length, none a prefix of another, its nodes
// are the root, every branching point, every child of a branching point
// (the start of a compressed run) and every key (a leaf). With the keys
// sorted, the branching points are the longest common prefixes of
// neighbours.
func RaxNodes(keys []streamid.ID) int64 {
	if len(keys) == 0 {
		return 1 // the empty head node
	}
	seen := map[string]struct{}{"": {}}
	prev := keys[0].Append(nil)
	seen[string(prev)] = struct{}{}
	for _, id := range keys[1:] {
		k := id.Append(nil)
		l := 0
		for l < len(k) && k[l] == prev[l] {
			l++
		}
		if l < len(k) {
			seen[string(k[:l])] = struct{}{}
			seen[string(prev[:l+1])] = struct{}{}
			seen[string(k[:l+1])] = struct{}{}
		}
		seen[string(k)] = struct{}{}
		prev = k
	}
	return int64(len(seen))
}

package rdb

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
)

// Stream node limits of Redis's defaults (stream-node-max-bytes,
// stream-node-max-entries).
const (
	streamNodeMaxBytes   = 4096
	streamNodeMaxEntries = 100
)

func rawID(id StreamID) []byte {
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b, id.Ms)
	binary.BigEndian.PutUint64(b[8:], id.Seq)
	return b
}

// streamNode is a listpack being built, as streamAppendItem builds it.
type streamNode struct {
	master       StreamID
	masterFields [][]byte
	count        int64
	entries      lpBuilder // the entries after the master entry
}

// header returns the listpack's master entry.
func (n *streamNode) header() *lpBuilder {
	var b lpBuilder
	b.appendInt(n.count)
	b.appendInt(0) // deleted
	b.appendInt(int64(len(n.masterFields)))
	for _, f := range n.masterFields {
		b.appendString(f)
	}
	b.appendInt(0)
	return &b
}

func (n *streamNode) size() int {
	h := n.header()
	return h.size() + len(n.entries.body)
}

func (n *streamNode) bytes() []byte {
	h := n.header()
	h.body = append(h.body, n.entries.body...)
	h.n += n.entries.n
	return h.bytes()
}

// stream writes s as RDB_TYPE_STREAM_LISTPACKS_2, its entries in listpacks
// as XADD (streamAppendItem) fills them with Redis's default node limits.
func (e *encoder) stream(s *Stream) error {
	var nodes []*streamNode
	var cur *streamNode
	for i, ent := range s.Entries {
		if len(ent.Fields)%2 != 0 {
			return fmt.Errorf("rdb: stream entry %d-%d has an odd number of fields", ent.ID.Ms, ent.ID.Seq)
		}
		if i > 0 && !idLess(s.Entries[i-1].ID, ent.ID) {
			return errors.New("rdb: stream entries not in ascending ID order")
		}
		numfields := len(ent.Fields) / 2
		totelelen := 0
		for _, f := range ent.Fields {
			totelelen += len(f)
		}
		if cur != nil {
			if cur.size()+totelelen >= streamNodeMaxBytes || cur.count >= streamNodeMaxEntries {
				cur = nil
			}
		}
		same := false
		if cur == nil {
			cur = &streamNode{master: ent.ID}
			for j := 0; j < numfields; j++ {
				cur.masterFields = append(cur.masterFields, ent.Fields[2*j])
			}
			nodes = append(nodes, cur)
			same = true
		} else if numfields == len(cur.masterFields) {
			same = true
			for j := 0; j < numfields; j++ {
				if !bytes.Equal(ent.Fields[2*j], cur.masterFields[j]) {
					same = false
					break
				}
			}
		}
		cur.count++
		b := &cur.entries
		flags := int64(0)
		if same {
			flags = streamFlagSameFields
		}
		b.appendInt(flags)
		b.appendInt(int64(ent.ID.Ms - cur.master.Ms))
		b.appendInt(int64(ent.ID.Seq - cur.master.Seq))
		if !same {
			b.appendInt(int64(numfields))
		}
		for j := 0; j < numfields; j++ {
			if !same {
				b.appendString(ent.Fields[2*j])
			}
			b.appendString(ent.Fields[2*j+1])
		}
		lpCount := int64(numfields) + 3
		if !same {
			lpCount += int64(numfields) + 1
		}
		b.appendInt(lpCount)
	}
	e.len(uint64(len(nodes)))
	for _, n := range nodes {
		e.str(rawID(n.master))
		e.str(n.bytes())
	}
	e.len(uint64(len(s.Entries)))
	for _, id := range []StreamID{s.LastID, s.FirstID, s.MaxDeletedID} {
		e.len(id.Ms)
		e.len(id.Seq)
	}
	e.len(s.EntriesAdded)

	groups := append([]StreamGroup(nil), s.Groups...)
	sort.SliceStable(groups, func(i, j int) bool { return bytes.Compare(groups[i].Name, groups[j].Name) < 0 })
	e.len(uint64(len(groups)))
	for _, g := range groups {
		e.str(g.Name)
		e.len(g.LastID.Ms)
		e.len(g.LastID.Seq)
		e.len(uint64(g.EntriesRead))
		pel := append([]PendingEntry(nil), g.Pending...)
		sort.SliceStable(pel, func(i, j int) bool { return idLess(pel[i].ID, pel[j].ID) })
		e.len(uint64(len(pel)))
		for _, p := range pel {
			e.buf = append(e.buf, rawID(p.ID)...)
			e.ms(p.DeliveryMs)
			e.len(p.DeliveryCount)
		}
		cons := append([]Consumer(nil), g.Consumers...)
		sort.SliceStable(cons, func(i, j int) bool { return bytes.Compare(cons[i].Name, cons[j].Name) < 0 })
		owned := 0
		e.len(uint64(len(cons)))
		for _, c := range cons {
			e.str(c.Name)
			e.ms(c.SeenMs)
			var mine []StreamID
			for _, p := range pel {
				if bytes.Equal(p.Consumer, c.Name) {
					mine = append(mine, p.ID)
				}
			}
			owned += len(mine)
			e.len(uint64(len(mine)))
			for _, id := range mine {
				e.buf = append(e.buf, rawID(id)...)
			}
		}
		if owned != len(pel) {
			return fmt.Errorf("rdb: group %q has pending entries of unknown consumers", g.Name)
		}
	}
	return nil
}

func (d *decoder) streamID() (StreamID, error) {
	ms, err := d.plainLen()
	if err != nil {
		return StreamID{}, err
	}
	seq, err := d.plainLen()
	return StreamID{Ms: ms, Seq: seq}, err
}

func (d *decoder) rawStreamID() (StreamID, error) {
	b, err := d.src.readN(16)
	if err != nil {
		return StreamID{}, err
	}
	return StreamID{Ms: binary.BigEndian.Uint64(b), Seq: binary.BigEndian.Uint64(b[8:])}, nil
}

func (d *decoder) ms() (int64, error) {
	b, err := d.src.readN(8)
	if err != nil {
		return 0, err
	}
	return int64(binary.LittleEndian.Uint64(b)), nil
}

// streamListpack appends the live entries of a stream node to out.
func streamListpack(master StreamID, lp []byte, out []StreamEntry) ([]StreamEntry, error) {
	vals, err := lpParse(lp)
	if err != nil {
		return nil, formatErr("stream: %v", err)
	}
	p := 0
	bad := formatErr("invalid stream listpack")
	next := func() (lpVal, bool) {
		if p >= len(vals) {
			return lpVal{}, false
		}
		p++
		return vals[p-1], true
	}
	nextInt := func() (int64, bool) {
		v, ok := next()
		return v.i, ok && v.isInt
	}
	if len(vals) == 0 {
		return nil, formatErr("empty stream listpack")
	}
	if _, ok := nextInt(); !ok { // count
		return nil, bad
	}
	if _, ok := nextInt(); !ok { // deleted
		return nil, bad
	}
	mf, ok := nextInt()
	if !ok || mf < 0 || mf > int64(len(vals)) {
		return nil, bad
	}
	masterFields := make([][]byte, mf)
	for i := range masterFields {
		v, ok := next()
		if !ok {
			return nil, bad
		}
		masterFields[i] = v.bytes()
	}
	if z, ok := nextInt(); !ok || z != 0 {
		return nil, bad
	}
	for p < len(vals) {
		flags, ok1 := nextInt()
		msd, ok2 := nextInt()
		seqd, ok3 := nextInt()
		if !ok1 || !ok2 || !ok3 {
			return nil, bad
		}
		id := StreamID{Ms: master.Ms + uint64(msd), Seq: master.Seq + uint64(seqd)}
		var fields [][]byte
		if flags&streamFlagSameFields != 0 {
			fields = make([][]byte, 0, 2*len(masterFields))
			for _, f := range masterFields {
				v, ok := next()
				if !ok {
					return nil, bad
				}
				fields = append(fields, f, v.bytes())
			}
		} else {
			nf, ok := nextInt()
			if !ok || nf < 0 || nf > int64(len(vals)) {
				return nil, bad
			}
			fields = make([][]byte, 0, 2*nf)
			for i := int64(0); i < 2*nf; i++ {
				v, ok := next()
				if !ok {
					return nil, bad
				}
				fields = append(fields, v.bytes())
			}
		}
		if _, ok := nextInt(); !ok { // lp-count
			return nil, bad
		}
		if flags&streamFlagDeleted == 0 {
			out = append(out, StreamEntry{ID: id, Fields: fields})
		}
	}
	return out, nil
}

// stream reads RDB_TYPE_STREAM_LISTPACKS (1, 2 and 3).
func (d *decoder) stream(t byte) (*Stream, error) {
	s := &Stream{}
	n, err := d.count(2)
	if err != nil {
		return nil, err
	}
	for ; n > 0; n-- {
		key, err := d.string()
		if err != nil {
			return nil, err
		}
		if len(key) != 16 {
			return nil, formatErr("stream node key of %d bytes", len(key))
		}
		master := StreamID{Ms: binary.BigEndian.Uint64(key), Seq: binary.BigEndian.Uint64(key[8:])}
		lp, err := d.string()
		if err != nil {
			return nil, err
		}
		if s.Entries, err = streamListpack(master, lp, s.Entries); err != nil {
			return nil, err
		}
	}
	if err := sortStreamEntries(s.Entries); err != nil {
		return nil, err
	}
	length, err := d.plainLen()
	if err != nil {
		return nil, err
	}
	if length != uint64(len(s.Entries)) {
		return nil, formatErr("stream length %d but %d entries", length, len(s.Entries))
	}
	if s.LastID, err = d.streamID(); err != nil {
		return nil, err
	}
	if t >= typeStreamListpacks2 {
		if s.FirstID, err = d.streamID(); err != nil {
			return nil, err
		}
		if s.MaxDeletedID, err = d.streamID(); err != nil {
			return nil, err
		}
		if s.EntriesAdded, err = d.plainLen(); err != nil {
			return nil, err
		}
	} else {
		if len(s.Entries) > 0 {
			s.FirstID = s.Entries[0].ID
		}
		s.EntriesAdded = length
	}
	ng, err := d.count(3)
	if err != nil {
		return nil, err
	}
	groupNames := dupCheck{}
	for ; ng > 0; ng-- {
		g := StreamGroup{EntriesRead: -1}
		if g.Name, err = d.string(); err != nil {
			return nil, err
		}
		if err := groupNames.add(g.Name); err != nil {
			return nil, err
		}
		if g.LastID, err = d.streamID(); err != nil {
			return nil, err
		}
		if t >= typeStreamListpacks2 {
			er, err := d.plainLen()
			if err != nil {
				return nil, err
			}
			g.EntriesRead = int64(er)
		} else {
			g.EntriesRead = estimateEntriesRead(s, g.LastID)
		}
		np, err := d.count(18)
		if err != nil {
			return nil, err
		}
		index := map[StreamID]int{}
		for ; np > 0; np-- {
			var pe PendingEntry
			if pe.ID, err = d.rawStreamID(); err != nil {
				return nil, err
			}
			if pe.DeliveryMs, err = d.ms(); err != nil {
				return nil, err
			}
			if pe.DeliveryCount, err = d.plainLen(); err != nil {
				return nil, err
			}
			if _, dup := index[pe.ID]; dup {
				return nil, formatErr("duplicate pending entry")
			}
			index[pe.ID] = len(g.Pending)
			g.Pending = append(g.Pending, pe)
		}
		nc, err := d.count(10)
		if err != nil {
			return nil, err
		}
		consNames := dupCheck{}
		for ; nc > 0; nc-- {
			var c Consumer
			if c.Name, err = d.string(); err != nil {
				return nil, err
			}
			if err := consNames.add(c.Name); err != nil {
				return nil, err
			}
			if c.SeenMs, err = d.ms(); err != nil {
				return nil, err
			}
			if t >= typeStreamListpacks3 {
				if _, err = d.ms(); err != nil { // active time
					return nil, err
				}
			}
			np, err := d.count(16)
			if err != nil {
				return nil, err
			}
			for ; np > 0; np-- {
				id, err := d.rawStreamID()
				if err != nil {
					return nil, err
				}
				i, ok := index[id]
				if !ok || g.Pending[i].Consumer != nil {
					return nil, formatErr("consumer's pending entry not in the group's list")
				}
				g.Pending[i].Consumer = c.Name
			}
			g.Consumers = append(g.Consumers, c)
		}
		for _, pe := range g.Pending {
			if pe.Consumer == nil {
				return nil, formatErr("pending entry without a consumer")
			}
		}
		s.Groups = append(s.Groups, g)
	}
	return s, nil
}

// estimateEntriesRead is Redis's streamEstimateDistanceFromFirstEverEntry,
// which gives the groups of an RDB_TYPE_STREAM_LISTPACKS stream their
// entries-read counter.
func estimateEntriesRead(s *Stream, id StreamID) int64 {
	if s.EntriesAdded == 0 {
		return 0
	}
	length := uint64(len(s.Entries))
	if length == 0 && !idLess(s.LastID, id) {
		return int64(s.EntriesAdded)
	}
	if id == s.LastID {
		return int64(s.EntriesAdded)
	}
	if idLess(s.LastID, id) {
		return -1
	}
	if s.MaxDeletedID == (StreamID{}) || idLess(s.MaxDeletedID, s.FirstID) {
		if idLess(id, s.FirstID) {
			return int64(s.EntriesAdded - length)
		}
		if id == s.FirstID {
			return int64(s.EntriesAdded - length + 1)
		}
	}
	return -1
}

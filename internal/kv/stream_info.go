package kv

import (
	"github.com/kvorum/kvorum/internal/streamargs"
	"github.com/kvorum/kvorum/internal/streamid"
	"github.com/kvorum/kvorum/internal/streamrec"
)

// XINFO STREAM (with FULL), XINFO GROUPS and XINFO CONSUMERS (see
// stream.go and stream_group.go for the storage).

// --- XINFO ---

func cmdXInfo(x *ctx, args [][]byte, sub string) Reply {
	switch sub {
	case "help":
		return Array(
			Status("XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"),
			Status("CONSUMERS <key> <groupname>"),
			Status("    Show consumers of <groupname>."),
			Status("GROUPS <key>"),
			Status("    Show the stream consumer groups."),
			Status("STREAM <key> [FULL [COUNT <count>]"),
			Status("    Show information about the stream."),
			Status("HELP"),
			Status("    Prints this help."),
		)
	}
	s, exists, err := x.loadStream(args[2])
	if err != nil || !exists {
		return errOr(err, errNoSuchKey)
	}
	switch sub {
	case "groups":
		return x.xinfoGroups(s)
	case "consumers":
		return x.xinfoConsumers(s, args[2], args[3])
	}
	full, count, r, ok := streamargs.XInfoStream(args)
	if !ok {
		return r
	}
	st := &s.st
	raxNodes, err := x.raxNodes(s)
	if err != nil {
		return errReply(err)
	}
	out := []Reply{
		BulkString("length"), Int(int64(st.Length)),
		BulkString("radix-tree-keys"), Int(int64(st.Nodes)),
		BulkString("radix-tree-nodes"), Int(raxNodes),
		BulkString("last-generated-id"), idReply(st.Last),
		BulkString("max-deleted-entry-id"), idReply(st.MaxDel),
		BulkString("entries-added"), Int(int64(st.Added)),
		BulkString("recorded-first-entry-id"), idReply(st.First),
	}
	if full {
		entries, err := x.rangeEntries(s, streamid.ID{}, streamid.Max, count, false)
		if err != nil {
			return errReply(err)
		}
		groups, err := x.xinfoFullGroups(s, count)
		if err != nil {
			return errReply(err)
		}
		out = append(out, BulkString("entries"), Array(entries...), BulkString("groups"), groups)
		return Map(out...)
	}
	groups, err := x.countGroups(s)
	if err != nil {
		return errReply(err)
	}
	out = append(out, BulkString("groups"), Int(groups))
	for _, rev := range []bool{false, true} {
		name := "first-entry"
		if rev {
			name = "last-entry"
		}
		entries, err := x.rangeEntries(s, streamid.ID{}, streamid.Max, 1, rev)
		if err != nil {
			return errReply(err)
		}
		if len(entries) == 0 {
			out = append(out, BulkString(name), Nil)
		} else {
			out = append(out, BulkString(name), entries[0])
		}
	}
	return Map(out...)
}

// raxNodes is the number of nodes of the radix tree Redis would keep the
// stream's nodes in (streamrec.RaxNodes): one pass over the node records.
func (x *ctx) raxNodes(s *stream) (int64, error) {
	keys := make([]streamid.ID, 0, min(s.st.Nodes, 1<<16))
	err := x.iterElems(s.c, []byte{streamrec.KindNode}, nil, false, func(elem, v []byte) bool {
		if n, ok := streamrec.DecodeNodeElem(elem, v); ok {
			keys = append(keys, n.Key())
		}
		return true
	})
	return streamrec.RaxNodes(keys), err
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

package kv

import (
	"bytes"
	"strconv"

	"github.com/kvorum/kvorum/internal/streamargs"
	"github.com/kvorum/kvorum/internal/streamid"
	"github.com/kvorum/kvorum/internal/streamrec"
)

// The pending entries of consumer groups (see stream_group.go): XPENDING,
// XCLAIM and XAUTOCLAIM.

// --- XPENDING ---

func cmdXPending(x *ctx, args [][]byte, a streamargs.XPending) Reply {
	s, g, err := x.loadGroup(args[1], args[2])
	if err != nil {
		return errReply(err)
	}
	if a.Summary {
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
	if a.Consumer != nil {
		c, err := x.getConsumer(s, g, a.Consumer)
		if err != nil {
			return errReply(err)
		}
		if c == nil {
			return Array()
		}
		prefix = streamrec.ConsPELPrefix(g.Name, a.Consumer)
	}
	out := []Reply{}
	count := a.Count
	var ierr error
	err = x.iterElems(s.c, prefix, a.Start.Append(bytes.Clone(prefix)), false, func(elem, v []byte) bool {
		if count == 0 {
			return false
		}
		id := streamrec.PELID(elem)
		if id.Cmp(a.End) > 0 {
			return false
		}
		var n *streamrec.NACK
		if a.Consumer != nil {
			if n, ierr = x.getNACK(s, g, id); ierr != nil || n == nil {
				return ierr == nil
			}
		} else {
			n = streamrec.DecodeNACK(v)
		}
		if a.MinIdle != 0 && x.now-n.Time < a.MinIdle {
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
	now := x.now
	a, r, ok := streamargs.ParseXClaim(args, now)
	if !ok {
		return r
	}
	cl := &claimer{x: x, s: s, g: g, name: args[3], time: a.Time, retry: a.Retry, justID: a.JustID}
	if a.LastID.Cmp(g.Last) > 0 {
		g.Last = a.LastID
		cl.changed = true
	}
	out := []Reply{}
	for _, id := range a.IDs {
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
		if a.Force && n == nil {
			n = &streamrec.NACK{Time: now, Count: 1}
			g.PEL++
		}
		if n == nil || (n.Consumer != nil && a.MinIdle != 0 && now-n.Time < a.MinIdle) {
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

func cmdXAutoClaim(x *ctx, args [][]byte, a streamargs.XAutoClaim) Reply {
	s, g, err := x.loadGroup(args[1], args[2])
	if err != nil {
		return errReply(err)
	}
	// Collect the candidates first (at most attempts of them plus the next
	// one, which is the reply's cursor).
	attempts := a.Count * xautoclaimAttemptsF
	type pending struct {
		id streamid.ID
		n  *streamrec.NACK
	}
	var cand []pending
	prefix := streamrec.GroupPrefix(streamrec.KindPEL, g.Name)
	err = x.iterElems(s.c, prefix, a.Start.Append(bytes.Clone(prefix)), false, func(elem, v []byte) bool {
		cand = append(cand, pending{streamrec.PELID(elem), streamrec.DecodeNACK(v)})
		return int64(len(cand)) <= attempts
	})
	if err != nil {
		return errReply(err)
	}
	now := x.now
	count := a.Count
	claimed, deleted := []Reply{}, []Reply{}
	cl := &claimer{x: x, s: s, g: g, name: args[3], time: now, retry: -1, justID: a.JustID}
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
		if a.MinIdle != 0 && now-p.n.Time < a.MinIdle {
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

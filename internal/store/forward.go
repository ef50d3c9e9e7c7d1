package store

import (
	"context"
	"encoding/binary"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/kvorum/kvorum/internal/reply"
)

// Writes a follower receives go to the leader through Raft, much as
// etcd's do: the follower sends them to the leader in a MsgProp on the
// same stream as raft's messages (its Ready loop writes it, not raft:
// raft's own forwarding stays off, DisableProposalForwarding); the leader
// adds them to the next entry with its own proposals;
// and the follower answers its client when it applies that entry itself,
// with the replies its own apply computed (the state machine is
// deterministic). The leader neither waits for nor answers a forwarded
// proposal, and the reply crosses no extra hop: the follower learns the
// commit from the leader's next append, which it receives anyway.
//
// Two payloads ride in MsgProp entries between nodes (raft never sees
// them: Replica.step takes them first):
//
//	forward (follower -> leader): byte forwardVersion, uvarint origin node,
//	  uvarint term (the leader's, as the follower saw it), uvarint number
//	  of proposals, per proposal: uvarint id, commands as in an entry
//	nack (leader -> follower): byte nackVersion, uvarint number of ids,
//	  the ids, then an optional reply (reply.AppendBinary): the proposals
//	  were not added to the log and never will be; with a reply, it is
//	  the answer to each of their commands (a write refused by the
//	  leader's WriteGate), else they may be retried.
//
// A forwarded proposal ends in one of these ways on its follower:
//
//   - applied: the follower applies an entry that holds it (origin = this
//     node, its id): its waiter gets the replies;
//   - refused: a nack names it (the leader was no longer leading in that
//     term, or raft refused the entry): ErrProposalDropped, retried;
//   - lost: the follower applies an entry of a later term than the one it
//     was forwarded in. The leader accepts a forwarded proposal only in
//     that term, so its entry would carry that term, and terms never
//     decrease along the log: it can no longer commit. ErrProposalDropped;
//   - overwritten: its entry reached this follower's log but another
//     entry committed at that index (resolveIndex, as on a leader);
//   - unknown: a snapshot covered the indexes where it could be (it may be
//     in it), or the waiter's context ended: ErrAmbiguous.
const (
	forwardVersion = 0x20
	nackVersion    = 0x21
)

// forwardPayload is a follower's batch of proposals for the leader.
type forwardPayload struct {
	node  uint64
	term  uint64
	props []entryProposal
}

func encodeForward(f *forwardPayload) []byte {
	n := 32
	for _, pr := range f.props {
		n += cmdsSize(pr.cmds) + 10
	}
	b := make([]byte, 0, n)
	b = append(b, forwardVersion)
	b = binary.AppendUvarint(b, f.node)
	b = binary.AppendUvarint(b, f.term)
	b = binary.AppendUvarint(b, uint64(len(f.props)))
	for _, pr := range f.props {
		b = binary.AppendUvarint(b, pr.id)
		b = appendCmds(b, pr.cmds)
	}
	return b
}

func decodeForward(b []byte) (*forwardPayload, error) {
	if len(b) == 0 || b[0] != forwardVersion {
		return nil, errBadEntry
	}
	d := &entryReader{b: b[1:], ok: true}
	f := &forwardPayload{node: d.uvarint(), term: d.uvarint()}
	n := d.count()
	if !d.ok {
		return nil, errBadEntry
	}
	f.props = make([]entryProposal, n)
	for i := range f.props {
		f.props[i].node = f.node
		f.props[i].id = d.uvarint()
		f.props[i].cmds = d.cmds()
		if !d.ok {
			return nil, errBadEntry
		}
	}
	if len(d.b) != 0 {
		return nil, errBadEntry
	}
	return f, nil
}

func encodeNack(ids []uint64, refusal *reply.Reply) []byte {
	b := make([]byte, 0, 16+10*len(ids))
	b = append(b, nackVersion)
	b = binary.AppendUvarint(b, uint64(len(ids)))
	for _, id := range ids {
		b = binary.AppendUvarint(b, id)
	}
	if refusal != nil {
		b = refusal.AppendBinary(b)
	}
	return b
}

func decodeNack(b []byte) (ids []uint64, refusal *reply.Reply, err error) {
	if len(b) == 0 || b[0] != nackVersion {
		return nil, nil, errBadEntry
	}
	d := &entryReader{b: b[1:], ok: true}
	n := d.count()
	for range n {
		ids = append(ids, d.uvarint())
	}
	if !d.ok {
		return nil, nil, errBadEntry
	}
	if len(d.b) > 0 {
		r, rest, err := reply.Decode(d.b)
		if err != nil || len(rest) != 0 {
			return nil, nil, errBadEntry
		}
		refusal = &r
	}
	return ids, refusal, nil
}

// isForwarded reports whether m is one of the payloads above rather than
// a message for raft.
func isForwarded(m *raftpb.Message) bool {
	if m.GetType() != raftpb.MessageType_MsgProp || len(m.GetEntries()) != 1 {
		return false
	}
	d := m.GetEntries()[0].GetData()
	return len(d) > 0 && (d[0] == forwardVersion || d[0] == nackVersion)
}

// Submit is Propose on the leader; on a follower that knows the leader it
// forwards cmds through Raft (see above) and returns their replies once
// this node has applied them. Errors as Propose's, and *NotLeaderError
// when no leader is known.
func (r *Replica) Submit(ctx context.Context, cmds [][][]byte) ([]reply.Reply, error) {
	if r.store.failed.Load() {
		return nil, ErrStopped // never proposed: not applied
	}
	if refused := r.store.gate(len(cmds)); refused != nil {
		return refused, nil
	}
	r.mu.Lock()
	st := r.mu.rn.BasicStatus()
	if st.RaftState != raft.StateLeader && (st.Lead == 0 || !r.store.cfg.ForwardThroughRaft) {
		r.mu.Unlock()
		return nil, r.notLeader(st.Lead, r.mu.desc)
	}
	p := r.addProposalLocked(cmds)
	r.mu.Unlock()
	return r.awaitProposal(ctx, p)
}

// flushForwardLocked sends this follower's pending proposals to the
// leader as one MsgProp, or fails them when no leader is known. Proposals forwarded to it by others while it led are dropped
// with a nack.
// REQUIRES: r.mu held.
func (r *Replica) flushForwardLocked(pend []*proposal) {
	st := r.mu.rn.BasicStatus()
	var own []*proposal
	for _, p := range pend {
		if p.origin != 0 {
			r.dropLocked([]*proposal{p})
		} else {
			own = append(own, p)
		}
	}
	if len(own) == 0 {
		return
	}
	if st.Lead == 0 || !r.store.cfg.ForwardThroughRaft {
		r.dropLocked(own)
		return
	}
	term := st.GetTerm()
	f := forwardPayload{node: uint64(r.store.cfg.NodeID), term: term}
	for _, p := range own {
		f.props = append(f.props, entryProposal{node: f.node, id: p.id, cmds: p.cmds})
	}
	r.mu.outbox = append(r.mu.outbox, &raftpb.Message{
		Type:    raftpb.MessageType_MsgProp.Enum(),
		To:      proto.Uint64(st.Lead),
		From:    proto.Uint64(f.node),
		Entries: []*raftpb.Entry{{Data: encodeForward(&f)}},
	})
	for _, p := range own {
		p.cmds = nil
		p.fwdTerm = term
	}
	if r.mu.fwdMinTerm == 0 || term < r.mu.fwdMinTerm {
		r.mu.fwdMinTerm = term
	}
	r.store.cfg.Metrics.ForwardedProposals.Add(float64(len(own)))
}

// stepForwardedLocked takes a forward or a nack from m.
// REQUIRES: r.mu held.
func (r *Replica) stepForwardedLocked(m *raftpb.Message) {
	data := m.GetEntries()[0].GetData()
	if data[0] == nackVersion {
		ids, refusal, err := decodeNack(data)
		if err != nil {
			r.store.log.Warn("malformed nack of forwarded proposals", "from", m.GetFrom(), "err", err)
			return
		}
		for _, id := range ids {
			p, ok := r.mu.proposals[id]
			if !ok || p.fwdTerm == 0 {
				continue
			}
			delete(r.mu.proposals, id)
			if refusal != nil {
				p.finish(repeatReply(*refusal, p.ncmds), nil)
			} else {
				p.finish(nil, ErrProposalDropped)
			}
		}
		return
	}
	f, err := decodeForward(data)
	if err != nil || f.node != m.GetFrom() {
		r.store.log.Warn("malformed forwarded proposals", "from", m.GetFrom(), "err", err)
		return
	}
	st := r.mu.rn.BasicStatus()
	if st.RaftState != raft.StateLeader || st.GetTerm() != f.term || st.LeadTransferee != 0 {
		r.nackLocked(f.node, propIDs(f.props), nil)
		return
	}
	if refused := r.store.gate(1); refused != nil {
		r.nackLocked(f.node, propIDs(f.props), &refused[0])
		return
	}
	for _, pr := range f.props {
		r.mu.pending = append(r.mu.pending, &proposal{id: pr.id, origin: pr.node, cmds: pr.cmds})
	}
}

func propIDs(props []entryProposal) []uint64 {
	ids := make([]uint64, len(props))
	for i, pr := range props {
		ids[i] = pr.id
	}
	return ids
}

func repeatReply(r reply.Reply, n int) []reply.Reply {
	out := make([]reply.Reply, n)
	for i := range out {
		out[i] = r
	}
	return out
}

// nackLocked queues a nack to node; the Ready loop (or step) sends it.
// (Forwards and nacks are MsgProp messages to another node, which raft
// never sends: DisableProposalForwarding.)
// REQUIRES: r.mu held.
func (r *Replica) nackLocked(node uint64, ids []uint64, refusal *reply.Reply) {
	r.mu.outbox = append(r.mu.outbox, &raftpb.Message{
		Type:    raftpb.MessageType_MsgProp.Enum(),
		To:      proto.Uint64(node),
		From:    proto.Uint64(uint64(r.store.cfg.NodeID)),
		Entries: []*raftpb.Entry{{Data: encodeNack(ids, refusal)}},
	})
}

// takeOutboxLocked returns the forwards and nacks queued so far.
// REQUIRES: r.mu held.
func (r *Replica) takeOutboxLocked() []*raftpb.Message {
	n := r.mu.outbox
	r.mu.outbox = nil
	return n
}

// failForwardedLocked fails this node's forwarded proposals that can no
// longer be applied: those forwarded in a term before term (see above),
// with err; with term 0, every forwarded proposal still waiting.
// REQUIRES: r.mu held.
func (r *Replica) failForwardedLocked(it *readyItem, term uint64, err error) {
	if r.mu.fwdMinTerm == 0 || (term != 0 && term <= r.mu.fwdMinTerm) {
		return
	}
	var min uint64
	for id, p := range r.mu.proposals {
		if p.fwdTerm == 0 {
			continue
		}
		if term == 0 || p.fwdTerm < term {
			delete(r.mu.proposals, id)
			it.completions = append(it.completions, completion{p: p, err: err})
			continue
		}
		if min == 0 || p.fwdTerm < min {
			min = p.fwdTerm
		}
	}
	r.mu.fwdMinTerm = min
}

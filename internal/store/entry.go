package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
)

// Entry payloads. A normal Raft entry carries the proposals that the leader
// collected since its previous Ready round (group commit into one entry):
// each is a batch of client commands (one client's run of writes), and
// all of them are applied in order, with one timestamp chosen by the
// leader (so every replica computes the same TTL deadlines).
//
//	version byte (2)
//	uvarint proposing node id
//	varint  timestamp        (Unix milliseconds, chosen by the leader)
//	uvarint number of proposals
//	per proposal: uvarint proposal id (unique per proposing node and
//	  process), uvarint number of commands, and per command: uvarint argc,
//	  then per arg uvarint len + bytes
//
// Version 1, written before proposals were grouped, is still read:
// version byte (1), uvarint proposal id, uvarint node, varint timestamp,
// then the commands of its one proposal as above.
//
// Version 3 is not a batch of commands but a split of the range
// (replica_split.go), applied by the store; the state machine never sees
// it: version byte (3), uvarint proposing node id, uvarint proposal id,
// uvarint split slot, uvarint RHS range id, uvarint expected LHS
// generation.
//
// Conf change entries carry a confContext in ConfChangeV2.Context.

const (
	entryVersion1 = 1
	entryVersion  = 2
	entrySplit    = 3
)

var errBadEntry = errors.New("store: malformed entry payload")

type entryPayload struct {
	node  uint64
	ts    int64
	props []entryProposal
}

// entryProposal is one proposal in an entry: its id on the proposing node
// and its commands.
type entryProposal struct {
	id   uint64
	cmds [][][]byte
}

// cmdsSize is an upper bound of the encoded size of cmds.
func cmdsSize(cmds [][][]byte) int {
	n := 20
	for _, c := range cmds {
		n += 10
		for _, a := range c {
			n += len(a) + 10
		}
	}
	return n
}

func encodeEntry(p *entryPayload) []byte {
	n := 24
	for _, pr := range p.props {
		n += cmdsSize(pr.cmds)
	}
	b := make([]byte, 0, n)
	b = append(b, entryVersion)
	b = binary.AppendUvarint(b, p.node)
	b = binary.AppendVarint(b, p.ts)
	b = binary.AppendUvarint(b, uint64(len(p.props)))
	for _, pr := range p.props {
		b = binary.AppendUvarint(b, pr.id)
		b = binary.AppendUvarint(b, uint64(len(pr.cmds)))
		for _, c := range pr.cmds {
			b = binary.AppendUvarint(b, uint64(len(c)))
			for _, a := range c {
				b = binary.AppendUvarint(b, uint64(len(a)))
				b = append(b, a...)
			}
		}
	}
	return b
}

// entryReader decodes a payload; everything it returns aliases the payload.
// With skipCmds it only steps over the commands (nil, no allocation).
type entryReader struct {
	b        []byte
	ok       bool
	skipCmds bool
}

func (d *entryReader) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.ok = false
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *entryReader) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.ok = false
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a count of items of at least one byte each.
func (d *entryReader) count() int {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.ok = false
		return 0
	}
	return int(n)
}

func (d *entryReader) cmds() [][][]byte {
	nc := d.count()
	if !d.ok {
		return nil
	}
	var cmds [][][]byte
	if !d.skipCmds {
		cmds = make([][][]byte, nc)
	}
	for i := range nc {
		argc := d.count()
		if !d.ok {
			return nil
		}
		var args [][]byte
		if !d.skipCmds {
			args = make([][]byte, argc)
		}
		for j := range argc {
			l := d.count()
			if !d.ok {
				return nil
			}
			if args != nil {
				args[j] = d.b[:l:l]
			}
			d.b = d.b[l:]
		}
		if cmds != nil {
			cmds[i] = args
		}
	}
	return cmds
}

// decodeEntry decodes a payload (either version); the returned args alias
// b.
func decodeEntry(b []byte) (*entryPayload, error) { return decodeEntryOf(b, false) }

// decodeEntryIDs decodes a payload's node, timestamp and proposal ids,
// leaving every proposal's cmds nil: what the leader needs to know which
// of its proposals an appended entry holds, without the allocations of the
// commands (they are decoded once, at apply).
func decodeEntryIDs(b []byte) (*entryPayload, error) { return decodeEntryOf(b, true) }

func decodeEntryOf(b []byte, idsOnly bool) (*entryPayload, error) {
	if len(b) == 0 {
		return nil, errBadEntry
	}
	d := &entryReader{b: b[1:], ok: true, skipCmds: idsOnly}
	p := &entryPayload{}
	switch b[0] {
	case entryVersion1:
		id := d.uvarint()
		p.node = d.uvarint()
		p.ts = d.varint()
		if !d.ok {
			return nil, errBadEntry
		}
		p.props = []entryProposal{{id: id, cmds: d.cmds()}}
	case entryVersion:
		p.node = d.uvarint()
		p.ts = d.varint()
		n := d.count()
		if !d.ok {
			return nil, errBadEntry
		}
		p.props = make([]entryProposal, n)
		for i := range p.props {
			p.props[i].id = d.uvarint()
			p.props[i].cmds = d.cmds()
			if !d.ok {
				return nil, errBadEntry
			}
		}
	case entrySplit:
		// Only the proposal's id: what trackProposalIndexes needs. It
		// carries no commands; stageApply hands it to applySplit.
		sp, err := decodeSplitEntry(b)
		if err != nil {
			return nil, err
		}
		p.node = sp.node
		p.props = []entryProposal{{id: sp.id}}
		return p, nil
	default:
		return nil, errBadEntry
	}
	if !d.ok {
		return nil, errBadEntry
	}
	return p, nil
}

// confContext rides in ConfChangeV2.Context.
type confContext struct {
	ProposalID uint64 `json:"proposal_id"`
	Proposer   uint64 `json:"proposer"`
	NodeID     uint64 `json:"node_id"`
	PeerAddr   string `json:"peer_addr,omitempty"`
}

func (c *confContext) encode() []byte {
	b, _ := json.Marshal(c)
	return b
}

func decodeConfContext(b []byte) (*confContext, error) {
	c := &confContext{}
	if len(b) == 0 {
		return c, nil
	}
	return c, json.Unmarshal(b, c)
}

// splitEntry is the payload of a split entry (version 3).
type splitEntry struct {
	node, id uint64
	slot     uint16
	rhs      uint64
	gen      uint64
}

func encodeSplitEntry(sp *splitEntry) []byte {
	b := make([]byte, 0, 48)
	b = append(b, entrySplit)
	b = binary.AppendUvarint(b, sp.node)
	b = binary.AppendUvarint(b, sp.id)
	b = binary.AppendUvarint(b, uint64(sp.slot))
	b = binary.AppendUvarint(b, sp.rhs)
	return binary.AppendUvarint(b, sp.gen)
}

func decodeSplitEntry(b []byte) (*splitEntry, error) {
	if len(b) == 0 || b[0] != entrySplit {
		return nil, errBadEntry
	}
	d := &entryReader{b: b[1:], ok: true}
	sp := &splitEntry{node: d.uvarint(), id: d.uvarint()}
	sl := d.uvarint()
	sp.rhs = d.uvarint()
	sp.gen = d.uvarint()
	if !d.ok || sl > 0xffff || len(d.b) != 0 {
		return nil, errBadEntry
	}
	sp.slot = uint16(sl)
	return sp, nil
}

package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
)

// Entry payloads. A normal Raft entry carries one proposal: a batch of
// client commands that is applied atomically, in order, with one timestamp
// chosen by the leader (so every replica computes the same TTL deadlines).
//
//	version byte (1)
//	uvarint proposal id      (unique per proposing node and process)
//	uvarint proposing node id
//	varint  timestamp        (Unix milliseconds, chosen by the leader)
//	uvarint number of commands
//	per command: uvarint argc, then per arg uvarint len + bytes
//
// Conf change entries carry a confContext in ConfChangeV2.Context.

const entryVersion = 1

var errBadEntry = errors.New("store: malformed entry payload")

type entryPayload struct {
	id   uint64
	node uint64
	ts   int64
	cmds [][][]byte
}

func encodeEntry(p *entryPayload) []byte {
	n := 24
	for _, c := range p.cmds {
		n += 2
		for _, a := range c {
			n += len(a) + 3
		}
	}
	b := make([]byte, 0, n)
	b = append(b, entryVersion)
	b = binary.AppendUvarint(b, p.id)
	b = binary.AppendUvarint(b, p.node)
	b = binary.AppendVarint(b, p.ts)
	b = binary.AppendUvarint(b, uint64(len(p.cmds)))
	for _, c := range p.cmds {
		b = binary.AppendUvarint(b, uint64(len(c)))
		for _, a := range c {
			b = binary.AppendUvarint(b, uint64(len(a)))
			b = append(b, a...)
		}
	}
	return b
}

// decodeEntry decodes a payload; the returned args alias b.
func decodeEntry(b []byte) (*entryPayload, error) {
	if len(b) == 0 || b[0] != entryVersion {
		return nil, errBadEntry
	}
	b = b[1:]
	p := &entryPayload{}
	var ok bool
	next := func() uint64 {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			ok = false
			return 0
		}
		b = b[n:]
		return v
	}
	ok = true
	p.id = next()
	p.node = next()
	ts, n := binary.Varint(b)
	if !ok || n <= 0 {
		return nil, errBadEntry
	}
	b = b[n:]
	p.ts = ts
	nc := next()
	if !ok || nc > uint64(len(b)) {
		return nil, errBadEntry
	}
	p.cmds = make([][][]byte, nc)
	for i := range p.cmds {
		argc := next()
		if !ok || argc > uint64(len(b)) {
			return nil, errBadEntry
		}
		args := make([][]byte, argc)
		for j := range args {
			l := next()
			if !ok || l > uint64(len(b)) {
				return nil, errBadEntry
			}
			args[j] = b[:l:l]
			b = b[l:]
		}
		p.cmds[i] = args
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

package storage

import "go.etcd.io/raft/v3/raftpb"

// RaftMessage is a Raft message and the range whose group sent it (and
// whose replica on the destination must step it): every range is a Raft
// group of its own, and raft's messages name nodes, not groups. It lives
// here rather than in store, which defines it for its users
// (store.RaftMessage), because the transport carries it and store's tests
// import the transport.
type RaftMessage struct {
	Range RangeID
	Msg   *raftpb.Message
	// Kind is what the store does with the message besides stepping it
	// (zero: a plain Raft message). It travels in the transport's v=3
	// frames only (v=1 and v=2 frames carry plain messages).
	Kind MsgKind
}

// MsgKind is a store-level message kind, outside raftpb (docs/ranges.md
// §3.4).
type MsgKind uint8

const (
	// MsgPlain is a Raft message to step.
	MsgPlain MsgKind = 0
	// MsgQuiesce: Msg is the leader's MsgHeartbeat (its term and commit
	// index); the follower steps it and then stops ticking the range if
	// its term, leader, commit and last index agree.
	MsgQuiesce MsgKind = 1
	// MsgLiveness: only says that its sender (Msg.From) is up; no range
	// steps it. Sent once per tick to every peer by a store that hosts a
	// range other than range 1, so that the followers of quiesced ranges can
	// tell a dead leader from an idle one.
	MsgLiveness MsgKind = 2
	// MaxMsgKind is the highest kind a receiver knows.
	MaxMsgKind = MsgLiveness
)

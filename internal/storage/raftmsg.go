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
}

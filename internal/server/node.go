package server

import (
	"context"
	"errors"
)

// Node is one running kvorum node: storage, Raft replicas, peer transport,
// RESP server and admin HTTP server.
type Node struct {
	cfg Config
}

// Status is a node's view of itself and the cluster, as `kvorum ctl status`
// and the admin API report it.
type Status struct {
	NodeID       uint64   `json:"node_id"`
	ClusterID    uint64   `json:"cluster_id"`
	Role         string   `json:"role"` // leader, follower, candidate, pre-candidate, learner
	Term         uint64   `json:"term"`
	Leader       uint64   `json:"leader"` // 0 = unknown
	CommitIndex  uint64   `json:"commit_index"`
	AppliedIndex uint64   `json:"applied_index"`
	FirstIndex   uint64   `json:"first_index"` // first index still in the log
	LastIndex    uint64   `json:"last_index"`
	ClientAddr   string   `json:"client_addr"`
	PeerAddr     string   `json:"peer_addr"`
	AdminAddr    string   `json:"admin_addr"`
	Version      string   `json:"version"`
	Ready        bool     `json:"ready"` // can serve linearizable reads
	Members      []Member `json:"members"`
}

// Member is one voter or learner of the (single, for now) range.
type Member struct {
	ID       uint64 `json:"id"`
	PeerAddr string `json:"peer_addr"`
	Learner  bool   `json:"learner"`
	// Match is the leader's view of this member's replicated log index (0
	// when this node is not the leader).
	Match uint64 `json:"match"`
}

// ErrNotImplemented marks stubs during development.
var ErrNotImplemented = errors.New("server: not implemented yet")

// Start opens the data directory, recovers or bootstraps state, starts all
// listeners and returns once they accept connections. It does not wait for
// a leader (see WaitLeader).
func Start(cfg Config) (*Node, error) { return nil, ErrNotImplemented }

// Stop shuts the node down cleanly: stops accepting clients, stops Raft,
// flushes and closes storage. Safe to call twice.
func (n *Node) Stop() error { return ErrNotImplemented }

// WaitLeader blocks until this node knows a leader and has applied its
// entries up to the commit index seen when it learned of that leader.
func (n *Node) WaitLeader(ctx context.Context) error { return ErrNotImplemented }

// Status reports the node's state.
func (n *Node) Status() Status { return Status{} }

// ID returns the node id. ClientAddr/PeerAddr/AdminAddr return the bound
// addresses (useful when configured with port 0).
func (n *Node) ID() uint64         { return n.cfg.ID }
func (n *Node) ClientAddr() string { return n.cfg.ClientAddr }
func (n *Node) PeerAddr() string   { return n.cfg.PeerAddr }
func (n *Node) AdminAddr() string  { return n.cfg.AdminAddr }

// AddMember adds a node: first as a learner, then, once it has caught up,
// promotes it to voter (ConfChangeV2). Returns when the promotion is applied.
func (n *Node) AddMember(ctx context.Context, id uint64, peerAddr string) error {
	return ErrNotImplemented
}

// RemoveMember removes a node from the cluster.
func (n *Node) RemoveMember(ctx context.Context, id uint64) error { return ErrNotImplemented }

// TransferLeader moves leadership to node id and waits until it holds.
func (n *Node) TransferLeader(ctx context.Context, id uint64) error { return ErrNotImplemented }

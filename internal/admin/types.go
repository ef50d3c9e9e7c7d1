package admin

import (
	"context"
	"errors"
)

// NodeAPI is what the admin server needs from a running node. server.Node
// (or a thin adapter around it) implements it.
type NodeAPI interface {
	// Status reports the node's view of itself and the cluster.
	Status() Status
	// AddMember adds node id (reachable at peerAddr) to the cluster and
	// returns once it is a voter.
	AddMember(ctx context.Context, id uint64, peerAddr string) error
	// RemoveMember removes node id from the cluster.
	RemoveMember(ctx context.Context, id uint64) error
	// TransferLeader moves leadership to node id and waits until it holds.
	TransferLeader(ctx context.Context, id uint64) error
	// Ranges reports the node's replicas, by range id.
	Ranges() RangesResponse
}

// Status is a node's view of itself and the cluster, as GET /v1/status and
// `kvorum ctl status` report it.
type Status struct {
	NodeID       uint64 `json:"node_id"`
	ClusterID    uint64 `json:"cluster_id"`
	Role         string `json:"role"` // leader, follower, candidate, pre-candidate, learner
	Term         uint64 `json:"term"`
	Leader       uint64 `json:"leader"` // 0 = unknown
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	FirstIndex   uint64 `json:"first_index"` // first index still in the log
	LastIndex    uint64 `json:"last_index"`
	// ClientAddr and PeerAddr are the addresses the node advertises
	// (--advertise-client-addr, --advertise-peer-addr; by default those it
	// listens on); ClientListenAddr and PeerListenAddr, the addresses it
	// listens on when they differ ("" otherwise).
	ClientAddr string `json:"client_addr"` // "-": the plain-text port is off
	// TLSClientAddr is the TLS client port ("" if none).
	TLSClientAddr    string   `json:"tls_client_addr,omitempty"`
	PeerAddr         string   `json:"peer_addr"`
	ClientListenAddr string   `json:"client_listen_addr,omitempty"`
	PeerListenAddr   string   `json:"peer_listen_addr,omitempty"`
	AdminAddr        string   `json:"admin_addr"`
	Version          string   `json:"version"`
	Ready            bool     `json:"ready"` // can serve linearizable reads
	Members          []Member `json:"members"`
	// Ranges is how many ranges this node holds a replica of, and
	// RangesLeading how many of them it leads (GET /v1/ranges has each).
	Ranges        int `json:"ranges"`
	RangesLeading int `json:"ranges_leading"`
}

// Member is one voter or learner of the cluster.
type Member struct {
	ID       uint64 `json:"id"`
	PeerAddr string `json:"peer_addr"`
	Learner  bool   `json:"learner"`
	// Match is the leader's view of this member's replicated log index (0
	// when the reporting node is not the leader).
	Match uint64 `json:"match"`
	// Replicas and Leading are how many ranges list this member as a
	// replica and how many it leads, as the answering node's replicas see
	// them (GET /v1/status and /v1/members; every node holds every range
	// today). The tables of `kvorum ctl status` and `member list` show them.
	Replicas int `json:"replicas,omitempty"`
	Leading  int `json:"leading,omitempty"`
}

// MembersResponse is the body of GET /v1/members, and of successful
// POST /v1/members and DELETE /v1/members/{id}.
type MembersResponse struct {
	// NodeID is the answering node's id. Member.Match values are only
	// meaningful when NodeID == Leader.
	NodeID uint64 `json:"node_id"`
	// Leader is the leader's id as the answering node knows it (0 = unknown).
	Leader  uint64   `json:"leader"`
	Members []Member `json:"members"`
}

// AddMemberRequest is the body of POST /v1/members.
type AddMemberRequest struct {
	ID       uint64 `json:"id"`
	PeerAddr string `json:"peer_addr"`
}

// TransferLeaderRequest is the body of POST /v1/transfer-leader.
type TransferLeaderRequest struct {
	ID uint64 `json:"id"`
}

// TransferLeaderResponse is the body of a successful POST
// /v1/transfer-leader.
type TransferLeaderResponse struct {
	Leader uint64 `json:"leader"`
}

// ErrorResponse is the body of every error reply of the /v1 API.
type ErrorResponse struct {
	Error string `json:"error"`
	// Leader is set (non-zero) on 421 "not leader" replies when the
	// answering node knows who leads.
	Leader uint64 `json:"leader,omitempty"`
}

// Errors a NodeAPI implementation may return (wrapped with %w is fine) to get
// a precise HTTP status code. Any other error is a 500, except context
// deadline (504) and cancellation (503).
var (
	// ErrNotLeader: the operation must run on the leader. 421 Misdirected
	// Request, with the known leader in the body.
	ErrNotLeader = errors.New("this node is not the leader")
	// ErrNoLeader: no leader is known right now (election in progress). 503.
	ErrNoLeader = errors.New("no leader is known")
	// ErrUnknownMember: no member has that id. 404.
	ErrUnknownMember = errors.New("no such member")
	// ErrMemberExists: a member already has that id or peer address. 409.
	ErrMemberExists = errors.New("member already exists")
	// ErrInvalid: the request makes no sense (e.g. removing the last voter).
	// 400.
	ErrInvalid = errors.New("invalid request")
	// ErrBusy: another membership change is in progress. 409.
	ErrBusy = errors.New("another membership change is in progress")
	// ErrStopped: the node is shutting down. 503.
	ErrStopped = errors.New("node is stopping")
)

// HTTPStatuser lets an error choose its own HTTP status code; it takes
// precedence over the sentinel errors above.
type HTTPStatuser interface {
	HTTPStatus() int
}

// Range is one range (a Raft group owning an interval of hash slots) as
// the answering node's replica of it sees it: GET /v1/ranges, `kvorum ctl
// range list`.
type Range struct {
	RangeID    uint64 `json:"range_id"`
	Generation uint64 `json:"generation"`
	// StartSlot and EndSlot bound the hash slots [StartSlot, EndSlot)
	// the range owns (EndSlot 16384: to the end).
	StartSlot uint32 `json:"start_slot"`
	EndSlot   uint32 `json:"end_slot"`
	// Replicas are the range's voters and learners; Match is filled only
	// when the answering node leads the range.
	Replicas []Member `json:"replicas"`
	Leader   uint64   `json:"leader"` // 0 = unknown
	// Role is the answering node's replica's: leader, follower, ...
	Role         string `json:"role"`
	Term         uint64 `json:"term"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	// ApproximateBytes is Pebble's estimate of the disk space of the
	// range's data on the answering node (compressed sstables; writes
	// still in the memtable are not counted).
	ApproximateBytes uint64 `json:"approximate_bytes"`
	// ReadsTotal and WritesTotal count the client commands the answering
	// node executed for the range since its replica was created there
	// (served or forwarded to the leader; each command once, not each
	// pipeline). ReadsPerSec and WritesPerSec are their rates over about
	// the last 10 s. Load of the answering node only: sum the nodes for
	// the range's.
	ReadsTotal   uint64  `json:"reads_total"`
	WritesTotal  uint64  `json:"writes_total"`
	ReadsPerSec  float64 `json:"reads_per_sec"`
	WritesPerSec float64 `json:"writes_per_sec"`
}

// RangesResponse is the body of GET /v1/ranges.
type RangesResponse struct {
	NodeID uint64  `json:"node_id"`
	Ranges []Range `json:"ranges"`
	// HoleSlots counts the hash slots no range of this node owns: a split
	// it learned by snapshot, until it has received the new range (the
	// node's range repair loop asks for it).
	HoleSlots int `json:"hole_slots,omitempty"`
}

// Package placement decides where the replicas and leaders of ranges go.
//
// Every decision is a pure function of a ClusterState and Options: no
// clock, no I/O, no randomness and no map iteration reaches the output, so
// the same state always yields the same actions in the same order. The
// node's replicate queue (docs/ranges.md §5) will build a ClusterState from
// the meta range and the node facts, call Plan and execute the actions; the
// simulator (internal/asim) calls the same functions against a model of
// 100 nodes and 10,000 ranges.
//
// Three rules, applied in this order by Plan:
//
//  1. Repair (Repair): a replica on a node that has been dead for at least
//     Options.DeadNodeTimeout is replaced by a new one on a live node; a
//     range with fewer replicas than Options.Replicas gains one; a range
//     with more loses one.
//  2. Rebalance (Rebalance): replicas move from the nodes with the most
//     replicas per unit of weight to those with the fewest, until every
//     node is within Options.Band of its fair share.
//  3. Leaders (BalanceLeaders): leadership moves between the replicas of a
//     range towards the same rule for leader counts.
//
// What a node's fair share is comes from a Scorer (score.go): Even (the
// default) gives every live node the same weight, so the counts are
// balanced; issue 19's ALOR gives fast nodes more weight.
package placement

import (
	"fmt"
	"time"
)

// NodeID names a node (a store). 0 is no node.
type NodeID uint64

// RangeID names a range. 0 is no range.
type RangeID uint64

// Node is what placement knows of one node.
type Node struct {
	ID NodeID
	// Alive is false while the node does not heartbeat. DeadFor is how long
	// it has not (0 while alive).
	Alive   bool
	DeadFor time.Duration
	// Capacity and Used are bytes of the node's store; QPS is the requests
	// per second it serves. The default scorer does not read them (bytes
	// break ties); a Scorer may.
	Capacity int64
	Used     int64
	QPS      float64
	// Snapshots is the number of snapshots the node is sending or receiving
	// now (in-flight moves). No action makes it exceed
	// Options.MaxSnapshotsPerNode.
	Snapshots int
	// Attrs holds measured or configured facts for scorers to read (issue
	// 19: "speed", "fsync_p99_ms", ...). Placement never iterates it.
	Attrs map[string]float64
}

// Range is what placement knows of one range.
type Range struct {
	ID RangeID
	// Replicas are the nodes holding a replica (voters), each at most once.
	Replicas []NodeID
	// Leader is the node of the replica that leads the range, 0 if none is
	// known (an election is running, or the range lost its quorum). Without
	// a live leader, no action is proposed for the range.
	Leader NodeID
	Bytes  int64
	QPS    float64
	// Changing is true while a replica change of the range is in flight: no
	// other action is proposed for it until it ends. Adding and Removing
	// name the nodes the change adds a replica to (a learner catching up)
	// and removes one from, 0 if none; placement counts the change as done,
	// so that it does not plan the same move twice.
	Changing bool
	Adding   NodeID
	Removing NodeID
}

// ClusterState is the input of every decision. Plan and the rule functions
// never modify it (nor the slices it points to).
type ClusterState struct {
	Nodes  []Node
	Ranges []Range
}

// Reason says why an action was proposed.
type Reason uint8

const (
	ReasonDeadNode        Reason = iota + 1 // a replica's node is dead past the timeout
	ReasonUnderReplicated                   // fewer replicas than the replication factor
	ReasonOverReplicated                    // more replicas than the replication factor
	ReasonRebalance                         // replica counts out of balance
	ReasonLeaderBalance                     // leader counts out of balance
)

func (r Reason) String() string {
	switch r {
	case ReasonDeadNode:
		return "dead-node"
	case ReasonUnderReplicated:
		return "under-replicated"
	case ReasonOverReplicated:
		return "over-replicated"
	case ReasonRebalance:
		return "rebalance"
	case ReasonLeaderBalance:
		return "leader-balance"
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// Action is one change for the node to execute: *AddReplica,
// *RemoveReplica or *TransferLeader.
type Action interface {
	RangeID() RangeID
	String() string
	isAction()
}

// AddReplica adds a replica of Range on Node: a learner that the leader
// snapshots and that catches up. If Replaces is not 0, the same joint
// configuration change then removes the replica on Replaces (a move); the
// replica on Replaces is never the leader.
type AddReplica struct {
	Range    RangeID
	Node     NodeID
	Replaces NodeID
	Reason   Reason
}

// RemoveReplica removes the replica of Range on Node (never its leader).
type RemoveReplica struct {
	Range  RangeID
	Node   NodeID
	Reason Reason
}

// TransferLeader moves the leadership of Range from From to To, a replica
// of the range.
type TransferLeader struct {
	Range    RangeID
	From, To NodeID
	Reason   Reason
}

func (a *AddReplica) RangeID() RangeID     { return a.Range }
func (a *RemoveReplica) RangeID() RangeID  { return a.Range }
func (a *TransferLeader) RangeID() RangeID { return a.Range }
func (*AddReplica) isAction()              {}
func (*RemoveReplica) isAction()           {}
func (*TransferLeader) isAction()          {}

func (a *AddReplica) String() string {
	if a.Replaces != 0 {
		return fmt.Sprintf("r%d: add n%d, remove n%d (%s)", a.Range, a.Node, a.Replaces, a.Reason)
	}
	return fmt.Sprintf("r%d: add n%d (%s)", a.Range, a.Node, a.Reason)
}

func (a *RemoveReplica) String() string {
	return fmt.Sprintf("r%d: remove n%d (%s)", a.Range, a.Node, a.Reason)
}

func (a *TransferLeader) String() string {
	return fmt.Sprintf("r%d: leader n%d -> n%d (%s)", a.Range, a.From, a.To, a.Reason)
}

// Package store hosts a node's Raft replicas: a Store owns the node's Pebble
// and one Replica per range it holds (one range covering the whole keyspace
// for now; the types are shaped for many).
//
// # Goroutines
//
//   - The ticker goroutine calls Tick each TickInterval, which ticks every
//     replica. With TickInterval zero there is no ticker and the owner
//     calls Tick.
//   - The Ready loop goroutine (Store.run) is the only one that calls
//     Ready/Advance. Each round it collects the Ready of every replica that
//     has one and writes all of them (new log entries, hard states, and the
//     effects of committed entries, plus applied indexes) in ONE synced
//     Pebble batch: group commit across ranges and across clients. Only
//     then does it send messages, complete proposals, release reads and
//     call Advance.
//   - Client goroutines call Replica.Propose and Replica.ReadBarrier; the
//     transport's goroutines call Step. Both take the replica's mutex for the
//     RawNode call only and then signal the Ready loop.
//
// # Lock order
//
// Store.mu before Replica.mu. RaftLog has its own leaf mutex, taken inside
// RawNode calls (raft.Storage methods) while Replica.mu is held.
//
// # Life of a write
//
// Propose encodes the command batch with a proposal id and the leader's
// timestamp, registers a waiter and calls RawNode.Propose. The Ready loop
// persists the entry, sends it to followers, and once it is committed
// applies it through kv.Apply inside the next group-commit batch; after that
// batch is synced the waiter gets the replies. Nothing is acknowledged before
// the entry is committed on a majority (fsynced there) and applied here.
//
// # Life of a read
//
// ReadBarrier queues the caller; the Ready loop issues one ReadIndex for all
// callers queued since the last round. When the ReadState comes back with
// the leader's commit index, callers wait until this replica has applied up
// to that index and then read Pebble directly. Followers serve reads this
// way too, so every node answers linearizably.
//
// # Tests
//
// TestDataDriven runs the scenarios in testdata/ (elections, replication,
// partitions, restarts, snapshots, leader transfer, membership): stores on
// memory FSes whose clock and Ready handling are driven by the test, over a
// fake network that delivers messages when told, so every run prints the
// same trace. Regenerate the expected output after an intended change with
// "go test ./internal/store -run TestDataDriven -rewrite" and review the
// diff; datadriven_test.go lists the commands.
package store

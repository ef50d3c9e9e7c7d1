// Package store hosts a node's Raft replicas: a Store owns the node's Pebble
// and one Replica per range it holds (one range covering the whole keyspace
// for now; the types are shaped for many).
//
// # Goroutines
//
//   - The ticker goroutine calls Tick each TickInterval, which ticks every
//     replica that is not quiesced (replica_quiesce.go) and marks it for
//     the Ready loop. With TickInterval zero there is no ticker and the
//     owner calls Tick.
//   - The Ready loop goroutine (Store.run) is the only one that calls
//     Ready/Advance. It handles only the replicas marked as having work
//     (the scheduler, store_scheduler.go: Step, Propose, reads, Tick,
//     conf changes, leadership transfer, Report*, snapshots, the hold
//     timer mark their replica), up to schedBatch per round. Each round it
//     collects the Ready of every marked replica that has one and writes all of them (new log entries, hard states, and the
//     writes of committed entries, plus applied indexes) in ONE Pebble
//     batch: group commit across ranges and across clients. It commits
//     the batch, releases the reads waiting for what it applied, then
//     syncs the WAL (one empty synced record; rounds that install a
//     snapshot or change membership commit with sync first). Only then
//     does it hand the round's effects out (Store.Effects), send
//     messages, complete the rest and call Advance. A leader keeps one
//     entry in flight: proposals wait while its last entry is uncommitted
//     (holdProposalsLocked, bounded), so that they share the next one.
//   - The owner of the state machine (the node) receives each committed
//     round's effects from Store.Effects in a goroutine of its own; see
//     Effects below.
//   - Client goroutines call Replica.Propose and Replica.ReadBarrier; the
//     transport's goroutines call Step. Both take the replica's mutex for the
//     RawNode call only and then mark the replica for the Ready loop.
//
// # Lock order
//
// Store.mu → Replica.mu → RaftLog.mu. RaftLog's mutex is a leaf, taken
// inside RawNode calls (raft.Storage methods) while Replica.mu is held.
// The scheduler's mutex (scheduler.mu) and the heard-from table's
// (Store.heard.mu) are leaves too: taken with Store.mu or Replica.mu held
// or not, and nothing is taken under them. The Ready loop holds no lock
// while it hands effects out.
//
// # Life of a write
//
// Propose encodes the command batch with a proposal id and the leader's
// timestamp, registers a waiter and calls RawNode.Propose. The Ready loop
// persists the entry, sends it to followers, and once it is committed
// applies it through StateMachine.Apply (package kv, through the node's
// adapter) inside the next group-commit batch, and the waiter gets the
// replies (completeEarly: the entry is committed, so replaying it after a
// crash gives the same replies); after that batch is synced the round's
// effects go to the node. Nothing is acknowledged before the entry is
// committed on a majority (fsynced there) and applied here.
//
// # Effects
//
// What a command does besides writing the batch and returning its reply
// (keys written, which wake blocked clients; messages published; lease
// renewals) is data the store carries without looking inside. The state
// machine records it during Apply (package kv appends to a kv.Effects)
// and hands it over with TakeEffects once per round, after the round's
// entries are applied. The Ready loop sends that value on Store.Effects
// once the round's batch is committed, before it completes the round's
// waiters, and drops it if the commit fails. The node receives the rounds
// in order in its own goroutine and acts on them, so a client is woken,
// and a message delivered, only after the round that produced it is
// committed here, in log order, with no timer or polling in between. The
// Ready loop waits for the receiver only when effectsBacklog committed
// rounds are pending; the receiver must never wait for the store. This
// replaces callbacks from Apply into the node. The one call back is
// StateMachine.Committed, made on the Ready loop right after the round's
// batch is committed and before its applied index is published, for what
// the state machine keeps in memory for readers (the node's read cache).
//
// # Life of a read
//
// A leader that holds a leader lease (Config.LeaseReads; lease.go) takes its
// own commit index as the read index, capped at what any node or client may
// have seen of it (leaseReadIndexLocked): ReadBarrier returns at once if
// that is applied, or waits for it, with no Raft message. Otherwise ReadBarrier
// queues the caller; the Ready loop issues one ReadIndex for all callers
// queued since the last round (on the leader, that request also renews the
// lease; a follower's request that finds the leader without a lease makes
// it send such a probe, acquireLeaseLocked). When the ReadState comes back with the leader's commit index,
// callers wait until this replica has applied up to that index and then
// read Pebble directly. Followers serve reads this way too, so every node
// answers linearizably; a follower sends its request before its round's
// fsync and takes the leader's answer as it arrives (takeReadIndexLocked:
// only an answer raft itself would accept), not from a later Ready round. Replicas drop vote requests for an election
// timeout after they start (lease.go, "the restart hole").
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

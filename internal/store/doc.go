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
//     Ready. Raft runs with AsyncStorageWrites: each round collects the
//     Ready of every replica that has one, sends the messages to other
//     nodes at once, hands the log writes (MsgStorageAppend: entries, hard
//     state) to the append worker, and applies the committed entries
//     (MsgStorageApply) of every replica in ONE Pebble batch committed
//     without sync (the entries are durable in the log; a restart
//     re-applies from the persisted applied index). Then it hands the
//     round's effects out (Store.Effects), completes proposals, releases
//     reads and steps the apply responses. A snapshot is installed on this
//     goroutine too, in a synced batch, after the append worker drained.
//   - The append worker goroutine (Store.appendLoop, append.go) writes
//     every log write queued since its previous batch in one synced batch
//     (group commit across rounds, ranges and clients), then delivers the
//     responses raft attached to them: the leader's own acknowledgement,
//     a follower's MsgAppResp, a vote. The Ready loop never waits for the
//     disk, so the leader's fsync, the followers' fsyncs and the apply of
//     earlier entries overlap.
//   - The owner of the state machine (the node) receives each committed
//     round's effects from Store.Effects in a goroutine of its own; see
//     Effects below.
//   - Client goroutines call Replica.Propose and Replica.ReadBarrier; the
//     transport's goroutines call Step. Both take the replica's mutex for the
//     RawNode call only and then signal the Ready loop.
//
// # Lock order
//
// Store.mu before Replica.mu. RaftLog has its own leaf mutex, taken inside
// RawNode calls (raft.Storage methods) while Replica.mu is held, and by
// the append worker when it updates the in-memory log after a sync. The
// Ready loop holds no lock while it hands effects out; the append queue's
// mutex is a leaf.
//
// # Life of a write
//
// Propose encodes the command batch with a proposal id and the leader's
// timestamp, registers a waiter and queues it; the next Ready round
// proposes every queued batch as one entry, sends it to the followers and
// queues it for the append worker. Each follower's append worker syncs it
// and sends the acknowledgement; the leader's own sync counts as its own
// acknowledgement. Once a majority holds it, raft marks it committed, and
// the first Ready round after this node's own copy is synced applies it
// through StateMachine.Apply (package kv, through the node's adapter) and
// hands the waiter the replies. Nothing is acknowledged before the entry
// is committed on a majority (fsynced there) and applied here.
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
// replaces callbacks from Apply into the node (and a Committed hook).
//
// # Life of a read
//
// A leader that holds a leader lease (Config.LeaseReads; lease.go) takes its
// own commit index as the read index: ReadBarrier returns at once if that is
// applied, or waits for it, with no Raft message. Otherwise ReadBarrier
// queues the caller; the Ready loop issues one ReadIndex for all callers
// queued since the last round (on the leader, that request also renews the
// lease). When the ReadState comes back with the leader's commit index,
// callers wait until this replica has applied up to that index and then
// read Pebble directly. Followers serve reads this way too, so every node
// answers linearizably. Replicas drop vote requests for an election
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

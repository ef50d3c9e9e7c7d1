// Package server is one kvorum node: it wires storage, replication, the
// peer transport, the Redis protocol server and the admin HTTP server
// together, and routes every client command to where it can run.
//
// The main type is Node. Start opens the data directory (storage.Open),
// recovers the node's identity or bootstraps a new cluster (InitialCluster)
// or asks a running one to admit it (Join), creates the store with package
// kv as its state machine, starts the transport, the RESP server and the
// admin server, and returns once they listen. Stop closes everything;
// Shutdown first hands leadership over if this node leads. Config holds
// every setting, with defaults in EnsureDefaults; `kvorum start`
// (cmd/kvorum) builds one from flags, and the in-process test clusters
// (this package's tests, internal/torture) build theirs directly.
//
// The node is the hub between packages that do not know each other: it is
// the resp.Backend (backend.go), the transport.Handler (peer.go), the
// store.StateMachine (effects.go, through kv) and the admin.NodeAPI
// (members.go).
//
// # Files
//
//	node.go      Node, Start, Stop, Shutdown
//	effects.go   the state machine adapter, and acting on what the applied log did
//	config.go    Config and its defaults
//	backend.go   client commands: writes (propose or forward), reads (read barrier), INFO
//	peer.go      the peer side: Raft messages, snapshots, forwarded commands, join
//	peererr.go   how errors cross to another node (a code plus fields)
//	members.go   membership changes and leader transfer, forwarded to the leader
//	blocking.go  blocking commands (BLPOP, XREADGROUP BLOCK, XREAD BLOCK, ...)
//	lock.go      leases (expiry timed on the leader) and parked LOCK ACQUIREs
//	expiry.go    the leader's sweep of expired keys
//	disk.go      the free-space guard that refuses writes on a nearly full disk
//
// # Life of a client command
//
// A RESP connection goroutine (package resp) parses a pipeline and calls
// Do with runs of data commands; Do splits them into runs of writes and
// runs of reads, and parks blocking commands and LOCK ACQUIRE on their own.
//
//   - A run of writes becomes one proposal (one Raft entry). On the leader
//     execWrite calls store.Replica.Propose; on a follower it forwards the
//     run to the leader (methodExec over transport.Call), whose peer
//     handler proposes it in turn. The store's Ready loop persists the
//     entry, and once it is committed applies it through kv.Apply in the
//     same synced batch that persists the round; only then does Propose
//     return the replies, and the connection goroutine writes them. While
//     applying, kv records what the command did besides its reply (keys
//     written, messages published, lease renewals); the node acts on that
//     once the round is committed (effects.go).
//   - A run of reads waits for a linearizable read point
//     (Replica.ReadBarrier: on a leader holding a lease, with
//     Config.LeaseReads, its own commit index; else a batched ReadIndex)
//     and then reads this node's Pebble directly, on any node.
//   - Failures become error replies here, in one place. A write certainly
//     not applied (no leader, not the leader, proposal dropped) is retried
//     while RequestTimeout allows; a client that still finds no leader
//     then gets CLUSTERDOWN. A write that may have been applied (the wait
//     timed out, this node or the leader stopped, storage failed) gets
//     UNCERTAIN and is never retried. Errors that come back from the
//     leader are the same typed errors as local ones (peererr.go), so the
//     same errors.Is/As cases decide.
//
// A blocked command (BLPOP, LOCK ACQUIRE, ...) registers its client on its
// keys before it tries; a write to one of those keys applied on this node
// wakes it once the round is committed, and it tries again (or, for a
// lock, reads its grant). Nothing polls.
//
// # Goroutines
//
//   - RESP connection goroutines (package resp), one per client: run Do,
//     Watch and Info, and wait in execWrite, execRead and the blocking
//     paths. They own nothing of the node's; they share the waiters.
//   - The store's ticker and Ready loop (package store): the Ready loop is
//     the only goroutine that applies entries, through kvMachine, which
//     owns the record of the round being applied.
//   - effectsLoop receives each committed round's record from the store
//     (Store.Effects), in log order, and acts on it: it wakes blocked
//     clients, delivers published messages to this node's subscribers and
//     notes lease renewals; then it hands the record back to kvMachine.
//   - gRPC server goroutines of the transport: HandleRaft and
//     HandleSnapshot feed the store; HandleCall serves forwarded writes
//     (proposing them like a client would), membership calls and member
//     lists. The transport's reporter goroutine calls ReportUnreachable;
//     for a peer the transport has no address for, learnPeers asks the
//     known members for the member list on a goroutine of its own (at
//     most one at a time).
//   - Admin HTTP goroutines (package admin): Status, AddMember,
//     RemoveMember, TransferLeader; a change asked of a follower is
//     forwarded to the leader (onLeader).
//   - expiryLoop and leaseLoop, one each, on every node, acting only while
//     it leads: they propose KVORUM.DELEXPIRED and KVORUM.TOMBGC to each
//     range whose local replica leads (reading the node's per-slot
//     earliest deadlines, kv.Deadlines, shared with apply) and
//     KVORUM.LEASEEXPIRE.
//     leaseLoop owns the timing of leases (leaseTracker). Stop waits for
//     both (Node.bg) before it closes Pebble, since they read it.
//   - diskLoop polls free space (diskMonitor: atomics, read by every
//     writer and by the store's write gate on the leader).
//   - watchFatal stops the node when the store reports a storage failure
//     and delivers the error on Done.
//   - The goroutines serving the three listeners (peer, client, admin).
//
// Start, Stop and Shutdown run on the caller's goroutine.
//
// # Ownership and lock order
//
// Everything Start sets (cfg, id, db, store, trans, resp, admin, reg) is
// read-only afterwards. The node's own mutable state is small: waiters
// (waiters.mu: the key → blocked client map), the lease tracker
// (leaseTracker.mu), and atomics (blocked client count, disk state,
// learnPeers rate limit). A round's effects record belongs to one
// goroutine at a time: the Ready loop while it applies, effectsLoop once
// the store hands it over, kvMachine's free list in between. waiters.mu
// and leaseTracker.mu are leaves: nothing else is locked or called while
// one is held. The store holds none of its locks while it runs the state
// machine, so its order (Store.mu, then Replica.mu, then RaftLog's) and
// the node's never nest. The node never holds a lock while it calls into
// the store, the transport or the RESP server.
package server

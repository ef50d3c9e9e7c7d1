// Package torture is kvorum's in-process fault harness: it runs a 3- or
// 5-node cluster of real nodes (server.Node, real gRPC on 127.0.0.1) in
// one process, injects a seeded schedule of faults while clients write,
// then heals everything and checks that nothing a client was told went
// wrong.
//
// One call to Run is one run:
//
//  1. MakeSchedule draws the faults from Config.Seed, as a pure function
//     of seed, cluster size, phase length and kinds: the same seed gives
//     the same schedule (an Event names its kind, when it fires, how long
//     it holds, a target slot or "the leader", which is resolved when it
//     fires). The kinds are Crash, PowerLoss, Partition, Lossy, Transfer,
//     Membership and Clock (see Kind).
//  2. The cluster starts: every node on its own crash-clonable memory
//     filesystem (vfs.NewCrashableMem), every node's transport behind one
//     shared interceptor (faultyNet: crashed nodes, directed link cuts, a
//     lossy regime that drops, delays and duplicates Raft messages), every
//     node's wall clock offset adjustable (Config.Now).
//  3. Three workloads run against all nodes until the fault phase ends:
//     the key-value clients of package check (recorded for the
//     linearizability check), TTL writes (keys that must not expire early
//     whichever node's clock stamped them), and lock clients contending
//     for one lock with short leases (locks.go).
//  4. The events fire at their times, each on a goroutine of its own: a
//     crash replaces the node's filesystem by a crash clone that keeps a
//     drawn share of its unsynced writes and restarts the node later; a
//     membership event joins a new node and removes the old one; and so
//     on. A fault that cannot be injected (it would take down a majority,
//     no leader) is skipped and listed in Result.Skipped.
//  5. Everything is healed and restarted; the clients see a healthy
//     cluster for a moment and stop. Then the checks: every acknowledged
//     write is read back (check.VerifyDurable), TTL keys and lock grants
//     are verified (mutual exclusion, tokens, fenced writes in order), all
//     members must reach the same applied index with equal state hashes
//     (Node.StateHash), no node may have stopped by itself, and the
//     history must be linearizable (check.Check, porcupine).
//
// Result says what was found; Result.Failed reports a violation and
// Result.Summary describes the run in one paragraph. Run's error is a
// harness failure (the cluster would not start), never a violation.
//
// Config.Unsafe deliberately breaks the nodes (server.Unsafe: no fsync,
// stale reads): the harness must catch them, which is how the suite shows
// it can fail.
//
// Who runs it: only its tests. TestTorture sweeps seeds on 3 and 5 nodes
// (`make torture`, and a smaller sweep in `go test ./...`); a failing seed
// is replayed with -torture.seed; TestTortureCatchesBrokenDurability runs
// the self-test. docs/reliability.md describes the suite and its results.
// For faults between real processes (kill -9, SIGSTOP, network namespaces)
// see package chaos.
package torture

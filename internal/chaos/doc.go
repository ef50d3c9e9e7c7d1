// Package chaos runs a kvorum cluster of real processes (the kvorum binary,
// `kvorum start`) under process-level faults — kill -9 and restart,
// SIGSTOP/SIGCONT, clean restarts, network partitions between nodes —
// while clients run a randomized workload over the Redis protocol, then
// checks the recorded history for linearizability, reads back every
// acknowledged write and compares the replicas. It is `kvorum chaos`.
//
// The fault schedule is drawn from a seed (NewSchedule): the same seed
// gives the same sequence of faults (kinds, roles targeted, durations,
// waits); which node is "the leader" is resolved when a fault is injected.
// Faults are sequential: one is injected, held, healed, and the next waits
// until a write has succeeded again.
//
// Two network modes place the nodes (see netnsNet and proxyNet): each node
// in its own network namespace with real packet drops for partitions
// (root), or all nodes on 127.0.0.1 behind per-node TCP proxies.
//
// # Use
//
// Run carries out one run described by a Config (Validate checks it; the
// Default constants are what `kvorum chaos` leaves unset) and returns a
// Verdict: PASS, FAIL with the violations found, or INCONCLUSIVE when the
// linearizability checker gave up. An error from Run means the run could
// not be carried out (bad configuration, no network mode available, the
// cluster never came up, or the context ended: ErrInterrupted), not that
// the cluster misbehaved. Verdict.WriteText and WriteJSON print it;
// unless the run passed, the recorded history and porcupine's HTML
// visualisation are written next to the nodes' data and logs.
//
// The only caller is cmd/kvorum (`kvorum chaos`, chaos.go), which maps its
// flags onto Config; its test there (TestChaosCommand) runs two short
// runs of the built binary. The nodes are child
// processes of the kvorum binary (Config.Binary), each with its own data
// directory and log; the clients are the workload of package check,
// recorded with check.Recorder. For faults inside one process, with crash
// clones of memory filesystems and seeded message loss, see package
// torture.
//
// # A run
//
//  1. The network is set up (openNetwork: netns when it can, as root,
//     else proxies; Config.Network forces one) and the nodes are started
//     as one cluster; the run waits for a leader and every node ready.
//  2. The clients start; the steps of NewSchedule follow one at a time:
//     wait a drawn interval, inject the fault, hold it, heal it, then a
//     write must succeed within RecoveryTimeout (how long writes stopped
//     is reported per fault). A node that exits when no fault asked it to
//     is a violation.
//  3. The clients stop; every node must be ready again, every
//     acknowledged write is read back through every node, the replicas
//     must reach the same applied index, and the history is checked for
//     linearizability. Every node must then stop cleanly on SIGTERM.
package chaos

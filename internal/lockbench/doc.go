// Package lockbench is `kvorum bench locks`: the distributed-locking
// benchmark of Grzesik & Mrozek (paper 000, sections 4-5, Tables 1 and 2),
// run against kvorum's LOCK commands and, for comparison, against Redis
// with the Redlock algorithm and (optionally) against ZooKeeper's fair lock
// recipe, as the paper ran them.
//
// Each client is a real OS process (this binary re-executed as a worker,
// see WorkerEnv) that loops for the run's duration: acquire the lock
// (timed), hold it (sleep), release it. In "own" mode every process locks
// its own name; in "shared" mode all contend for one. Workers connect and
// set up first, then start together on a signal from the parent, and
// report every acquire latency, from which the report gives the paper's
// figures: average, median, min, max, 90th and 99th percentile, plus
// acquisitions per process and their spread. Shared-mode runs are also
// checked for mutual exclusion (no two processes' holds overlap) and, on
// kvorum and ZooKeeper, for fencing tokens (ZooKeeper: the lock znode's
// sequence number) that increase with every grant.
//
// Without given addresses, the benchmark starts what it measures: a local
// 3-node kvorum cluster of child `kvorum start` processes, and 3
// standalone redis-server processes (no persistence), like the paper's
// three independent Redis nodes, and a 3-node ZooKeeper ensemble on
// 127.0.0.1 (java with the zookeeper package's jar; forceSync=yes, its
// default: every write is fsynced, as kvorum's are).
//
// # Use
//
// Run takes a Config (every target × mode × process count; Validate names
// the command-line flags in its messages) and returns a Report with one
// RunResult per combination: the latency Stats, acquisitions per process
// and the safety checks. A run that fails is recorded in its RunResult and
// the others still run; Run's error is for what stops the whole benchmark.
// Report.WriteText prints the paper's tables, Report.WriteJSON the same as
// JSON.
//
// The caller is cmd/kvorum (`kvorum bench locks`, bench.go). A worker is
// the same binary started with WorkerEnv set to its WorkerSpec (JSON): the
// binary's main (or a test's TestMain) checks for it first and hands over
// to WorkerMain, which connects, reports ready, waits for the common start
// time on stdin and writes a WorkerResult to stdout.
// The kvorum worker takes its locks with package kvlock (a Session per
// process, Mutex.Lock and Unlock); the Redlock worker implements the
// algorithm over go-redis (redlock.go); the ZooKeeper worker runs the
// lock recipe with github.com/go-zookeeper/zk (zookeeper.go).
package lockbench

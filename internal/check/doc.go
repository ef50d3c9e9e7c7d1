// Package check records concurrent histories of Redis operations against a
// kvorum cluster and checks them for linearizability with porcupine
// (github.com/anishathalye/porcupine). It is shared by the in-process
// torture harness and by `kvorum chaos`, which also share its randomized
// client workload (RunWorkload, VerifyDurable).
//
// # Operations and the model
//
// An operation is an Input (OpKind, key, value) and an Output (the reply).
// The kinds are GET, SET, SET NX, SET GET, DEL, INCR, a compare-and-set
// (WATCH, GET, MULTI, SET, EXEC), RPUSH and LRANGE 0 -1. Model is a porcupine.Model
// partitioned by key: keys are independent, so a history is linearizable iff
// the sub-history of every key is, and each partition is checked on its own
// (in parallel) with a per-key state that is one of
//
//   - absent,
//   - a string value,
//   - a list (an immutable, shared-tail linked list, so RPUSH is O(1) and
//     states of different linearization orders share their prefixes).
//
// Step computes, from the state, exactly the reply Redis gives and the state
// after the command: GET or LRANGE of the wrong type and RPUSH or INCR on the
// wrong type are WRONGTYPE with no effect, SET replaces a list, SET NX on any
// existing key (list included) is not applied, SET GET on a list is
// WRONGTYPE without effect, INCR of an absent key is 1, INCR of a string
// that is not a canonical 64-bit integer is "ERR value is not an integer or
// out of range" and of math.MaxInt64 "ERR increment or decrement would
// overflow", DEL removes any type. A recorded Output.Err must be of the same
// class as the error Redis would give (WRONGTYPE, not-an-integer,
// overflow); an error of any other class is accepted in any state with no
// effect (it is a definite outcome without effect, by the definition of
// Output.Err). A CAS whose Output.OK is false (EXEC aborted by WATCH) is
// accepted with no effect; the workload never records those, it drops
// them (Fail).
//
// # Fail and Unknown
//
// Every operation starts with Recorder.Begin, which takes the invocation
// time, and ends with exactly one of
//
//   - Ok(out): the reply is known; the operation took effect (or, for an
//     error reply in Output.Err, certainly had no effect) at one instant
//     between invocation and completion.
//   - Fail(): the command was certainly not applied (CLUSTERDOWN, which
//     kvorum only returns for commands it did not apply; a dial error, so
//     the command was never sent; an aborted EXEC). The operation is
//     dropped from the history: nothing observes it.
//   - Unknown(): it may or may not have been applied (timeout, UNCERTAIN,
//     connection lost after sending, node shutting down). The operation is
//     kept with Output.Unknown set and return time math.MaxInt64, the
//     conventional "never returned" of porcupine; the model accepts any
//     output for it, and it may take effect at any instant after its
//     invocation, or never.
//
// An operation begun but never completed when the history is taken is
// treated as Unknown.
//
// # How unknown operations are checked
//
// Applying an unknown write wherever the search linearizes it (the
// textbook way) makes porcupine try every subset and order of the unknown
// writes still in the air at every step, which is hopeless beyond a dozen
// of them. Model instead defers them (see pending.go): linearizing an
// unknown write adds it to a multiset of pending writes in the state, and
// before each operation with a known reply the model may apply any
// sequence of pending writes (the state is the set of configurations still
// possible, without dominated ones). That allows exactly the same
// outcomes, so Model is also correct on histories with infinite return
// times; Check goes further, all exact:
//
//   - unknown reads are left out: without effect and reply they constrain
//     nothing;
//   - an unknown write is given the return time of its invocation: as its
//     effect is deferred anyway, linearizing it as early as possible
//     allows everything a later point would, and the search has no choice
//     left to try;
//   - the value of an unknown write that no reply ever showed is replaced
//     by one placeholder, so such writes are interchangeable and counted,
//     not told apart;
//   - a first pass leaves those unobserved unknown writes out altogether
//     ("not applied", always a possible outcome); only a key that pass
//     refutes is checked again with them, and only that second verdict
//     refutes it.
//
// With these, 20,000 operations over 3+3+3 keys with one write in ten
// unknown check in about a second. Refuting a history needs an exhaustive
// search, which can take much longer on a register key with many
// concurrent clients; Check then reports TimedOut (and Result.Suspect).
//
// # Classification of replies in the workload
//
// RunWorkload talks RESP through go-redis with client retries disabled (a
// retry could apply a write twice). A nil error or redis.Nil is Ok; an error
// reply starting with CLUSTERDOWN or EXECABORT, an aborted EXEC
// (redis.TxFailedErr) and a dial error (*net.OpError with Op "dial") are
// Fail; WRONGTYPE, "ERR value is not an integer" and "ERR increment or
// decrement would overflow" are Ok with Output.Err; everything else
// (UNCERTAIN, "ERR node is shutting down", timeouts, EOF, resets, pool
// errors) is Unknown. After a connection-level error, CLUSTERDOWN or a
// "shutting down" reply the client moves to the next address.
package check

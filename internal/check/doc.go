// Package check records concurrent histories of Redis operations against a
// kvorum cluster and checks them for linearizability with porcupine
// (github.com/anishathalye/porcupine). It is shared by the in-process
// torture harness and by `kvorum chaos`, which also share its randomized
// client workload (RunWorkload, VerifyDurable).
//
// # Operations and the model
//
// An operation is an Input (OpKind, key, value) and an Output (the reply).
// The kinds are GET, SET, SET NX, SET GET, DEL, INCR, a WATCH/GET/MULTI/SET/
// EXEC compare-and-set, RPUSH and LRANGE 0 -1. Model is a porcupine.Model
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
// existing key (list included) is not applied, INCR of an absent key is 1,
// INCR of a string that is not a canonical 64-bit integer is "ERR value is
// not an integer or out of range" and of math.MaxInt64 "ERR increment or
// decrement would overflow", DEL removes any type. A recorded Output.Err
// must be of the same class as the error Redis would give (WRONGTYPE,
// not-an-integer, overflow); an error of any other class is accepted in any
// state with no effect (it is a definite outcome without effect, by the
// definition of Output.Err). A CAS whose Output.OK is false (EXEC aborted by
// WATCH) is accepted with no effect; the workload never records those, it
// drops them (Fail).
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
//     kept with Output.Unknown set and return time math.MaxInt64 (porcupine
//     has no other notion of "never returned"). Step accepts any output for
//     it and applies its effect; since it can be linearized at any instant
//     after its invocation, including after every other operation, "never
//     applied" is covered too. Check drops unknown GETs and LRANGEs before
//     checking, since an operation without effect and without a known
//     reply constrains nothing (and only widens the search).
//
// An operation begun but never completed when the history is taken is
// treated as Unknown.
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

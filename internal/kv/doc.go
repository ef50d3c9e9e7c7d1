// Package kv is kvorum's state machine: the Redis command table and the
// semantics of every data command, executed on Pebble.
//
// # Who calls what
//
//   - Check validates a command (arity, syntax, limits) before it is
//     proposed; a command it rejects is answered at once and changes nothing.
//   - Apply executes a write command at Raft apply time, on every replica,
//     against the round's indexed batch. It must be deterministic: the only
//     clock is nowMs, the timestamp the leader wrote into the log entry; no
//     randomness, no map iteration order, no local state.
//   - Read executes a read-only command against Pebble after the caller has
//     passed a linearizable read barrier; nowMs is the local clock.
//
// # Storage encoding
//
// Every storage key of user key k starts with 0x10 followed by an
// order-preserving escaping of k (each 0x00 becomes 0x00 0xFF) and the
// terminator 0x00 0x01, so all storage keys of one user key are contiguous
// and a range of user keys [a, b) is one storage span (the keyspace will be
// split into ranges). Then a suffix:
//
//	0x00                          metadata record
//	0x01 <version:8> <element>    element of a collection (hash, list, set,
//	                              sorted set: the next milestone)
//
// The metadata record is: type tag (1 byte: string=1, hash=2, list=3,
// set=4, zset=5), flags (1 byte), expiry deadline (int64 BE, Unix ms, 0 =
// none), version (uint64 BE; a collection's elements carry it, so DEL can
// drop the metadata in O(1) and reclaim elements later), then for strings
// the value itself.
//
// A record whose deadline is <= nowMs is treated as absent by every read
// and write at once; the leader deletes such keys in the background
// (ExpiredKeys + KVORUM.DELEXPIRED).
package kv

// Package storage owns a node's single Pebble instance and everything in it
// that is not user data: node identity, and per range the Raft hard state,
// log, truncated state, applied state and descriptor.
//
// # Key layout
//
// One Pebble per node holds both Raft state and user data under disjoint
// prefixes, so that one synced batch per round of Ready handling can persist
// new log entries, hard state and the effects of applied entries atomically
// (group commit):
//
//	0x01 'i' 'n'                      node id (uvarint)
//	0x01 'i' 'c'                      cluster id (uvarint)
//	0x01 'i' 'f'                      store format (uvarint; absent = 1)
//	0x02 <range id:8> 'h'             raft HardState (proto)
//	0x02 <range id:8> 'a'             applied state: index, term, ConfState
//	0x02 <range id:8> 'd'             range descriptor (JSON)
//	0x02 <range id:8> 't'             truncated state: index, term
//	0x02 <range id:8> 'l' <index:8>   raft log entry (proto)
//	0x10 0x00 0x00 ...                hidden keys, owned by package kv
//	0x11 <slot:2> ...                 user keys (format 2), owned by package kv
//
// Integers in keys are big-endian so that they sort. All writes go through
// pebble batches built by the store's Ready loop; this package only encodes
// keys and values and serves raft.Storage reads.
package storage

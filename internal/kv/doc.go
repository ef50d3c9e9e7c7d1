// Package kv is kvorum's state machine: the Redis command table and the
// semantics of every data command (strings, hashes, lists, sets, sorted
// sets, expiry, keyspace, transactions, PUBLISH), executed on Pebble, and
// the scripting commands (EVAL, EVALSHA, SCRIPT, FUNCTION, FCALL and their
// _RO forms) with the stored scripts and function libraries. The Lua
// runtime that runs the scripts is package script; it reaches the state
// machine only through the script.Caller that kv gives each run
// (scriptCaller: redis.call runs a nested command with ctx.call).
// Connection commands (PING, HELLO, CLIENT, INFO, COMMAND, MULTI, WATCH,
// SUBSCRIBE) belong to package resp; replication, read barriers, blocking
// waits and the expiry sweeper belong to packages store and server. kv
// owns the command table (Spec, Lookup, Commands), validation (Check,
// CheckQueued), execution (Apply, Read) and the encoding of user data in
// Pebble (UserSpan, ExpiredKeys, Deadlines, WatchStamp, StateHash).
//
// # Who calls what
//
//   - Check validates a command before it is proposed or read: arity,
//     option syntax, the format of numeric arguments, key and value size
//     limits. A command it rejects is answered at once and changes nothing.
//     Checks that Redis performs only after looking at the key (GETEX's
//     expiry number, INCRBYFLOAT's overflow, ...) are left to Apply so the
//     replies stay identical to Redis's.
//   - Apply executes a write command at Raft apply time, on every replica,
//     against the round's indexed batch. When it returns an error reply it
//     has written nothing for that command. What the command did besides
//     writing the batch and replying (keys whose record changed, including
//     a lock's LockWaitKey; PUBLISH and SPUBLISH messages; leases granted,
//     renewed or gone) it appends to Env.Effects, in order, the commands
//     of a transaction, a script or FENCED included: effects are data,
//     which the node acts on once the entry is committed (see Effects).
//     PUBLISH replies a placeholder 0: the node that answers the client
//     puts its own receiver count there (ForEachPublish finds the reply).
//   - Read executes a read-only command against Pebble after the caller has
//     passed a linearizable read barrier; nowMs is the local clock.
//
// # Determinism
//
// Apply runs on every replica and all of them must end up with the same
// bytes. So a write command's only clock is Env.Now, the timestamp the
// leader wrote into the log entry (never time.Now); its only randomness is
// ctx.rand, seeded from the entry's log index and the command's position
// (SPOP, scripts' math.random); it never depends on map iteration order or
// any state outside the batch, and parses numbers the same way on every
// machine (INCRBYFLOAT computes at x87 extended precision with math/big,
// not with the host's float hardware). Read commands may use the local
// clock and real randomness (RANDOMKEY, SRANDMEMBER, SCAN cursor salts)
// because their results are never replicated.
//
// # Storage encoding
//
// Every storage key of user key k starts with 0x11, k's hash slot (2 bytes
// BE, slot.Of) and an order-preserving escaping of k (each 0x00 byte
// becomes 0x00 0xFF) and the terminator 0x00 0x01. Since 0x00 0x01 sorts
// below 0x00 0xFF and every other byte is itself, all storage keys of one
// user key are contiguous and sorted by slot, then as the user keys are,
// so the keys of slots [lo, hi) are one storage span (SlotSpan: the
// keyspace will be split into ranges of slots). This is storage format 2
// (format.go has format 1, V2Key and MigrateV2). Then a suffix:
//
//	0x00                          metadata record
//	0x01 <version:8 BE> <element> one element of a collection
//
// Storage keys below 0x10 are Raft and range-local state owned by other
// packages; kv reads and writes only the store format marker (MigrateV2)
// and the range's replicated range-local keys 0x02 <range> 'r' <name>
// (the collection version counter, the FLUSHALL index, the tombstone
// floor: hidden.go). UserSpan is [0x10, 0x12): what snapshots copy, with
// the range's 'r' keys. Global hidden keys 0x10 0x00 0x00 ... sort below
// every user key and hold the Lua script cache, the function libraries,
// the expiry index and the other replicated bookkeeping; per-slot hidden
// keys 0x11 <slot> 0x00 0x00 <tag> ... (WATCH tombstones, wait queues)
// sort below the slot's user keys. FLUSHALL deletes the user keys of the
// range's slots and keeps every hidden key.
//
// The metadata record is: type tag (1 byte: string=1, hash=2, list=3,
// set=4, zset=5, stream=6), flags (1 byte: for hashes, sets and sorted sets the encoding flags of OBJECT ENCODING, see coll.go; 0 otherwise), expiry deadline (int64 BE,
// Unix ms, 0 = none), version (uint64 BE), mod (uint64 BE: the log index of
// the last write to the key, which WATCH compares), then for strings the
// value itself and for collections the type's state: the length (hash,
// set, zset) or head and tail indices (list).
//
// # Collections
//
// Each element is its own storage key under the collection's version, so
// a point update writes one element and the metadata record, never the
// whole collection, and LEN/CARD read only the metadata. Hashes: element =
// field, value = value. Sets: element = member, empty value. Lists:
// element = uint64 position in [head, tail), so pushes and pops at both
// ends and LINDEX/LSET are O(1); LINSERT and LREM shift the shorter side.
// Sorted sets: 'm' + member -> score, and 's' + order-preserving score +
// member -> empty, so ranges by score (and by lex, among equal scores) are
// iterations; ranks are counted (O(rank)).
// Streams: 'e' + ID (ms, seq: 8 bytes BE each) -> fields and values, and
// 'n' + node id -> node record; consumer groups are 'g' (group), 'c'
// (consumer), 'p' (group PEL) and 'q' (consumer PEL) elements of the same
// incarnation (the encodings: package streamrec), so they follow
// the stream through RENAME, COPY, DEL and expiry; the metadata holds the
// stream's state (length first, last ID, counters). An emptied stream is
// kept, as in Redis.
//
// Versions come from a replicated counter, so every incarnation of a key
// (after DEL, overwrite or expiry) has new element keys. Deleting or
// replacing a collection deletes its metadata and drops its old version's
// elements with one range deletion: O(1) for the client whatever the size,
// with Pebble reclaiming the space in background compactions. RENAME of a
// collection copies its elements (O(N), Redis is O(1)). An emptied
// collection is deleted, as in Redis.
//
// A record whose deadline is <= nowMs is treated as absent by every read
// and write at once (a write simply replaces it). Each range's leader
// deletes such keys in the background: Deadlines.Due reads them from the
// expiry index of the range's slots that are due (expiry.go: one per-slot
// hidden key per key with a deadline, kept by every write at apply, as
// Redis keeps its `expires` dict), and the internal command
// KVORUM.DELEXPIRED deletes each key only if it is still expired at apply
// time, so a key whose TTL was extended meanwhile survives. A format 1
// store gets its index written whole by MigrateV2. Internal commands
// (KVORUM.DELEXPIRED, KVORUM.EXEC) are not in Commands(), Lookup
// and Check treat them as unknown, and IsInternal lets the client layer
// refuse them.
//
// # Costs
//
// Point commands cost one or two Pebble point reads. Check and Lookup do
// not allocate; Apply(SET) allocates only inside Pebble's batch (recording
// its key in an Effects reused across rounds allocates nothing) and
// Read(GET) only the returned value. KEYS, DBSIZE and a SCAN page iterate
// metadata records (one seek skips a collection's elements); DBSIZE counts
// every metadata record, so, as in Redis, an expired key counts until it
// is deleted. RANDOMKEY reads at most about a thousand keys.
//
// # SCAN cursors
//
// A cursor must be a 64-bit number but a position in an ordered keyspace
// is a byte string; see package cursor for how a cursor combines an exact,
// node-local resume point with a stateless fallback that is still complete
// (every key present for the whole scan is returned at least once).
package kv

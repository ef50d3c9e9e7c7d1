// Package rdb reads and writes Redis's serialization format: the payloads
// of DUMP and RESTORE, and RDB files as Redis 7.0 writes them (BGSAVE,
// redis-cli --rdb). It knows nothing of kvorum's storage: a value is a
// plain Go Value, and the kv package converts.
//
// Written values use RDB version 10 (Redis 7.0), so that redis-server 7.0
// and later restore them; read values may use any encoding of RDB
// versions 1 to 10, and the types of versions 11 and 12 that map to
// kvorum's types.
//
// Writing (EncodeDump) reproduces what Redis 7.0.15's DUMP returns byte for
// byte for a value built the ordinary way (SET; RPUSH; SADD; HSET; ZADD;
// XADD, XGROUP, XREADGROUP...), with Redis's default configuration:
// strings with their integer encodings and LZF compression (the
// compressor is liblzf's, as Redis builds it); lists as quicklists of
// listpacks (RDB_TYPE_LIST_QUICKLIST_2) split as RPUSH splits them (8 KiB
// per node; Redis 7.0 only uses plain nodes for elements of 1 GiB, so
// neither does this package); sets as intsets (RDB_TYPE_SET_INTSET) when
// every member is a canonical integer, else as RDB_TYPE_SET; hashes and
// sorted sets as listpacks within the limits of EncodeOptions, else as
// RDB_TYPE_HASH and RDB_TYPE_ZSET_2; streams as
// RDB_TYPE_STREAM_LISTPACKS_2, their entries in listpacks of at most 100
// entries and 4 KiB as XADD fills them. What Redis cannot reproduce either
// is only logically equal: the member order of hashtable sets and hashes
// (any order is written), an intset whose encoding was widened by a
// member since removed, the listpacks of a stream with deleted entries
// (they are not part of a Value, so they are not written), a list built
// with LPUSH or LINSERT (written as if RPUSHed).
//
// Reading (DecodeDump, Reader) supports every encoding of strings, lists,
// sets, sorted sets, hashes and streams: RDB types 0-5 and 9-21
// (zipmaps, ziplists, intsets, quicklists of ziplists or listpacks,
// listpacks, streams of versions 1, 2 and 3, Redis 7.2's set listpacks).
// Every container is validated structurally, lengths are checked against
// the input before anything is allocated, and no input makes it panic.
// Not supported, with an error naming them: module types (6, 7), Redis
// 7.4's and 8's hashes with field expirations (types 22-25), module
// auxiliary data (opcode 247) and Redis 7.0 release candidates' functions
// (opcode 246). Redis 7's function libraries (opcode 245) are skipped and
// counted. Sets, hashes and sorted sets with repeated members, NaN
// scores, pending entries without a consumer are refused as ErrFormat.
package rdb

// Kind is a value's type.
type Kind byte

// The kinds of value.
const (
	KindString Kind = iota + 1
	KindList
	KindSet
	KindZSet
	KindHash
	KindStream
)

func (k Kind) String() string {
	switch k {
	case KindString:
		return "string"
	case KindList:
		return "list"
	case KindSet:
		return "set"
	case KindZSet:
		return "zset"
	case KindHash:
		return "hash"
	case KindStream:
		return "stream"
	}
	return "unknown"
}

// Value is one key's value. Exactly the field of its Kind is set.
type Value struct {
	Kind   Kind
	String []byte    // KindString
	List   [][]byte  // KindList, head first
	Set    [][]byte  // KindSet, any order
	ZSet   []ZMember // KindZSet, any order
	Hash   []Field   // KindHash, any order
	Stream *Stream   // KindStream
}

// ZMember is a sorted set's member.
type ZMember struct {
	Member []byte
	Score  float64
}

// Field is a hash's field.
type Field struct {
	Name, Value []byte
}

// StreamID is a stream entry's ID.
type StreamID struct {
	Ms, Seq uint64
}

// StreamEntry is one entry of a stream: its ID and its field-value pairs
// (name, value, name, value, ...).
type StreamEntry struct {
	ID     StreamID
	Fields [][]byte
}

// Stream is a stream with its metadata and consumer groups, as RDB
// version 10 (RDB_TYPE_STREAM_LISTPACKS_2) keeps them.
type Stream struct {
	Entries      []StreamEntry // in ID order
	LastID       StreamID      // the last ID generated (XADD's, or XSETID's)
	FirstID      StreamID      // the first entry's ID, zero if empty
	MaxDeletedID StreamID      // the largest ID deleted so far
	EntriesAdded uint64        // entries ever added
	Groups       []StreamGroup
}

// StreamGroup is a consumer group.
type StreamGroup struct {
	Name        []byte
	LastID      StreamID
	EntriesRead int64 // -1 when not known (SCG_INVALID_ENTRIES_READ)
	Pending     []PendingEntry
	Consumers   []Consumer
}

// PendingEntry is an entry of a group's pending entries list.
type PendingEntry struct {
	ID            StreamID
	Consumer      []byte // the consumer owning it
	DeliveryMs    int64  // last delivery time, Unix ms
	DeliveryCount uint64
}

// Consumer is a consumer of a group. Its pending entries are those of the
// group's Pending list that name it.
type Consumer struct {
	Name   []byte
	SeenMs int64 // last interaction, Unix ms
}

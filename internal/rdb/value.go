// Package rdb reads and writes Redis's serialization format: the payloads
// of DUMP and RESTORE, and RDB files as Redis 7.0 writes them (BGSAVE,
// redis-cli --rdb). It knows nothing of kvorum's storage: a value is a
// plain Go Value, and the kv package converts.
//
// Written values use RDB version 10 (Redis 7.0), so that redis-server 7.0
// and later restore them; read values may use any encoding of RDB
// versions 1 to 10, and the types of versions 11 and 12 that map to
// kvorum's types.
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

package storage

import "encoding/binary"

// RangeID identifies a range (one Raft group).
type RangeID uint64

// NodeID identifies a node; it doubles as the Raft replica id.
type NodeID uint64

const (
	prefixIdent = 0x01
	prefixRange = 0x02
)

var (
	nodeIDKey    = []byte{prefixIdent, 'i', 'n'}
	clusterIDKey = []byte{prefixIdent, 'i', 'c'}
	// The store format (uvarint; absent = 1): the layout of the user data,
	// see LoadStoreFormat.
	storeFormatKey = []byte{prefixIdent, 'i', 'f'}
)

const (
	suffixHardState = 'h'
	suffixApplied   = 'a'
	suffixDesc      = 'd'
	suffixTrunc     = 't'
	suffixLog       = 'l'
)

func rangeKey(id RangeID, suffix byte) []byte {
	k := make([]byte, 0, 10)
	k = append(k, prefixRange)
	k = binary.BigEndian.AppendUint64(k, uint64(id))
	return append(k, suffix)
}

// HardStateKey, AppliedStateKey, DescriptorKey and TruncatedStateKey are the
// range-local keys of range id.
func HardStateKey(id RangeID) []byte      { return rangeKey(id, suffixHardState) }
func AppliedStateKey(id RangeID) []byte   { return rangeKey(id, suffixApplied) }
func DescriptorKey(id RangeID) []byte     { return rangeKey(id, suffixDesc) }
func TruncatedStateKey(id RangeID) []byte { return rangeKey(id, suffixTrunc) }

// LogKey returns the key of log entry index of range id.
func LogKey(id RangeID, index uint64) []byte {
	return appendLogKey(make([]byte, 0, 18), id, index)
}

func appendLogKey(b []byte, id RangeID, index uint64) []byte {
	b = append(b, prefixRange)
	b = binary.BigEndian.AppendUint64(b, uint64(id))
	b = append(b, suffixLog)
	return binary.BigEndian.AppendUint64(b, index)
}

// RangeLocalSpan is the span of every range-local key of range id.
func RangeLocalSpan(id RangeID) (start, end []byte) {
	start = make([]byte, 0, 9)
	start = append(start, prefixRange)
	start = binary.BigEndian.AppendUint64(start, uint64(id))
	end = make([]byte, 0, 9)
	end = append(end, prefixRange)
	end = binary.BigEndian.AppendUint64(end, uint64(id)+1)
	return start, end
}

// suffixReplicated starts the replicated range-local keys of a range:
// 0x02 <range:8> 'r' <name>. Unlike the other range-local keys they are
// part of the range's replicated state (written at apply, identical on
// every replica at the same applied index), so a snapshot of the range
// carries them (ReplicatedRangeSpan) and a split copies them.
const suffixReplicated = 'r'

// ReplicatedRangeKey returns the replicated range-local key name of range id.
func ReplicatedRangeKey(id RangeID, name []byte) []byte {
	return AppendReplicatedRangeKey(make([]byte, 0, 10+len(name)), id, name)
}

// AppendReplicatedRangeKey appends ReplicatedRangeKey(id, name) to b.
func AppendReplicatedRangeKey(b []byte, id RangeID, name []byte) []byte {
	b = append(b, prefixRange)
	b = binary.BigEndian.AppendUint64(b, uint64(id))
	b = append(b, suffixReplicated)
	return append(b, name...)
}

// ReplicatedRangeSpan is the span of every replicated range-local key of
// range id: [0x02 <id> 'r', 0x02 <id> 's').
func ReplicatedRangeSpan(id RangeID) (start, end []byte) {
	return rangeKey(id, suffixReplicated), rangeKey(id, suffixReplicated+1)
}

// ParseReplicatedRangeKey returns the range and name of a replicated
// range-local key; ok is false for any other key.
func ParseReplicatedRangeKey(k []byte) (id RangeID, name []byte, ok bool) {
	if len(k) < 10 || k[0] != prefixRange || k[9] != suffixReplicated {
		return 0, nil, false
	}
	return RangeID(binary.BigEndian.Uint64(k[1:9])), k[10:], true
}

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

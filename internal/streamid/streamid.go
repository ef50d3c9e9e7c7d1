// Package streamid is Redis's stream entry ID, <ms>-<seq>: its order,
// successor and predecessor, its text as redis-server 7.0 reads and
// writes it (streamGenericParseIDOrReply, streamParseIntervalIDOrReply,
// string2ull), and its 16-byte big-endian form, which sorts as the IDs do
// (package kv keys stream entries and pending entries by it).
package streamid

import (
	"encoding/binary"
	"math"
	"strconv"

	"github.com/kvorum/kvorum/internal/redisnum"
)

// ID is a stream entry ID.
type ID struct{ Ms, Seq uint64 }

// Max is the last possible ID, "+" in a range.
var Max = ID{math.MaxUint64, math.MaxUint64}

// Size is the length of an ID's binary form (Put, Get).
const Size = 16

// Cmp compares a and b: -1, 0 or 1.
func (a ID) Cmp(b ID) int {
	switch {
	case a.Ms < b.Ms:
		return -1
	case a.Ms > b.Ms:
		return 1
	case a.Seq < b.Seq:
		return -1
	case a.Seq > b.Seq:
		return 1
	}
	return 0
}

// IsZero reports whether a is 0-0.
func (a ID) IsZero() bool { return a.Ms == 0 && a.Seq == 0 }

// Incr returns the successor of a; ok=false (and 0-0) if a is Max.
func (a ID) Incr() (ID, bool) {
	switch {
	case a.Seq < math.MaxUint64:
		return ID{a.Ms, a.Seq + 1}, true
	case a.Ms < math.MaxUint64:
		return ID{a.Ms + 1, 0}, true
	}
	return ID{}, false
}

// Decr returns the predecessor of a; ok=false (and Max) for 0-0.
func (a ID) Decr() (ID, bool) {
	switch {
	case a.Seq > 0:
		return ID{a.Ms, a.Seq - 1}, true
	case a.Ms > 0:
		return ID{a.Ms - 1, math.MaxUint64}, true
	}
	return Max, false
}

// AppendTo appends a's text, <ms>-<seq>, to b.
func (a ID) AppendTo(b []byte) []byte {
	b = strconv.AppendUint(b, a.Ms, 10)
	b = append(b, '-')
	return strconv.AppendUint(b, a.Seq, 10)
}

// String is a's text.
func (a ID) String() string { return string(a.AppendTo(nil)) }

// Put writes a's binary form into b[:Size].
func (a ID) Put(b []byte) {
	binary.BigEndian.PutUint64(b, a.Ms)
	binary.BigEndian.PutUint64(b[8:], a.Seq)
}

// Append appends a's binary form to b.
func (a ID) Append(b []byte) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(b, a.Ms), a.Seq)
}

// Get reads an ID from its binary form in b[:Size].
func Get(b []byte) ID {
	return ID{binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:])}
}

// ParseU64 is Redis's string2ull: string2ll's strict form (a negative
// number is invalid), else C's strtoull (leading spaces, a sign, leading
// zeros; a negative number wraps around).
func ParseU64(s []byte) (uint64, bool) {
	if len(s) == 0 {
		return 0, false
	}
	if n, ok := redisnum.ParseInt(s); ok {
		return uint64(n), n >= 0
	}
	i := 0
	for i < len(s) && (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r')) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	if i == len(s) {
		return 0, false
	}
	var v uint64
	for ; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if v > (math.MaxUint64-uint64(c-'0'))/10 {
			return 0, false // ERANGE
		}
		v = v*10 + uint64(c-'0')
	}
	if neg {
		v = -v
	}
	return v, true
}

// Parse is Redis's streamGenericParseIDOrReply: "-" and "+" (unless
// strict), <ms> (the sequence is then missingSeq), <ms>-<seq>, and with
// allowStar <ms>-* (seqGiven=false). The text is read as a C string (up
// to a NUL byte) and at most 127 bytes long.
func Parse(b []byte, missingSeq uint64, strict, allowStar bool) (id ID, seqGiven, ok bool) {
	if len(b) > 127 {
		return id, false, false
	}
	for i, c := range b {
		if c == 0 {
			b = b[:i]
			break
		}
	}
	if len(b) == 1 && (b[0] == '-' || b[0] == '+') {
		if strict {
			return id, false, false
		}
		if b[0] == '-' {
			return ID{}, true, true
		}
		return Max, true, true
	}
	seqGiven = true
	dash := -1
	for i, c := range b {
		if c == '-' {
			dash = i
			break
		}
	}
	msPart := b
	if dash >= 0 {
		msPart = b[:dash]
	}
	ms, good := ParseU64(msPart)
	if !good {
		return id, false, false
	}
	seq := missingSeq
	if dash >= 0 {
		rest := b[dash+1:]
		if allowStar && len(rest) == 1 && rest[0] == '*' {
			seq, seqGiven = 0, false
		} else if seq, good = ParseU64(rest); !good {
			return id, false, false
		}
	}
	return ID{ms, seq}, seqGiven, true
}

// ParseStrict parses an exact ID (<ms> or <ms>-<seq>, not "-" or "+"),
// as most stream commands read their ID arguments.
func ParseStrict(b []byte) (ID, bool) {
	id, _, ok := Parse(b, 0, true, false)
	return id, ok
}

// ParseInterval is streamParseIntervalIDOrReply, one bound of a range:
// "(" makes the bound exclusive (and the ID strict).
func ParseInterval(b []byte, missingSeq uint64) (id ID, excl, ok bool) {
	excl = len(b) > 1 && b[0] == '('
	if excl {
		id, _, ok = Parse(b[1:], missingSeq, true, false)
	} else {
		id, _, ok = Parse(b, missingSeq, false, false)
	}
	return id, excl, ok
}

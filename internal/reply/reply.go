// Package reply is the vocabulary of answers shared by the state machine
// (kv), the Lua runtime (script), the replication layer (store), the node
// (server) and the client protocol (resp): a Reply is one command's answer,
// independent of the protocol version; its Kind says which RESP type it is
// written as. Package resp maps each kind onto RESP2 or RESP3 framing; this
// package never writes client wire bytes. AppendBinary and Decode carry a
// Reply between nodes (a follower forwarding a command to the leader).
//
// The package depends on nothing but the standard library.
package reply

import (
	"encoding/binary"
	"errors"
	"math"
)

// Kind says which RESP type a Reply is written as. The resp package maps each
// kind onto RESP2 or RESP3 framing.
type Kind uint8

const (
	// KindNil is a null bulk string: RESP2 "$-1", RESP3 "_".
	KindNil Kind = iota
	// KindStatus is a simple string ("+OK"); Str holds the text.
	KindStatus
	// KindError is an error ("-ERR ..."); Str holds the full text including
	// the code prefix, e.g. "ERR syntax error" or "WRONGTYPE Operation ...".
	KindError
	// KindInt is an integer (":1"); Int holds the value.
	KindInt
	// KindBulk is a bulk string; Str holds the bytes.
	KindBulk
	// KindArray is an array; Elems holds the elements.
	KindArray
	// KindNilArray is a null array: RESP2 "*-1", RESP3 "_".
	KindNilArray
	// KindDouble is a double: RESP3 ",1.5", RESP2 a bulk string. Float holds
	// it; a non-empty Str is the text to send instead of Float's shortest
	// form (Redis prints some doubles, e.g. GEOPOS coordinates, with a fixed
	// number of decimals).
	KindDouble
	// KindMap is a map: RESP3 "%n", RESP2 a flat array of 2n elements.
	// Elems holds key, value, key, value, ...
	KindMap
	// KindSet is a set: RESP3 "~n", RESP2 an array.
	KindSet
	// KindBool is a boolean: RESP3 "#t"/"#f", RESP2 the integer 1/0. Int holds 0 or 1.
	KindBool
	// KindVerbatim is a verbatim string: RESP3 "=n\r\ntxt:...", RESP2 a bulk string.
	KindVerbatim
	// KindPush is an out-of-band message (pub/sub): RESP3 ">n", RESP2 an array.
	KindPush
	// KindPairs is a list of pairs (WITHSCORES, WITHVALUES): RESP3 an array
	// of n two-element arrays, RESP2 a flat array of 2n elements, as Redis
	// replies. Elems holds a, b, a, b, ...
	KindPairs
	// KindNestedMap is a map that RESP2 sends as an array of n two-element
	// arrays (XREAD's streams): RESP3 "%n". Elems holds key, value, ...
	KindNestedMap
)

// Reply is one command's answer, independent of protocol version.
type Reply struct {
	Kind  Kind
	Int   int64
	Float float64
	Str   []byte
	Elems []Reply
}

// Reply constructors. They allocate nothing beyond what the caller passes.
var (
	OK       = Reply{Kind: KindStatus, Str: []byte("OK")}
	Nil      = Reply{Kind: KindNil}
	NilArray = Reply{Kind: KindNilArray}
)

func Status(s string) Reply      { return Reply{Kind: KindStatus, Str: []byte(s)} }
func Error(s string) Reply       { return Reply{Kind: KindError, Str: []byte(s)} }
func Int(n int64) Reply          { return Reply{Kind: KindInt, Int: n} }
func Bulk(b []byte) Reply        { return Reply{Kind: KindBulk, Str: b} }
func BulkString(s string) Reply  { return Reply{Kind: KindBulk, Str: []byte(s)} }
func Array(elems ...Reply) Reply { return Reply{Kind: KindArray, Elems: elems} }
func Double(f float64) Reply     { return Reply{Kind: KindDouble, Float: f} }
func Map(kvs ...Reply) Reply     { return Reply{Kind: KindMap, Elems: kvs} }
func Pairs(ab ...Reply) Reply    { return Reply{Kind: KindPairs, Elems: ab} }

// NestedMap is a map sent in RESP2 as an array of [key, value] arrays.
func NestedMap(kvs ...Reply) Reply { return Reply{Kind: KindNestedMap, Elems: kvs} }
func Bool(b bool) Reply {
	r := Reply{Kind: KindBool}
	if b {
		r.Int = 1
	}
	return r
}
func Verbatim(s string) Reply { return Reply{Kind: KindVerbatim, Str: []byte(s)} }

// IsError reports whether r is an error reply.
func (r Reply) IsError() bool { return r.Kind == KindError }

// AppendBinary appends a compact, self-delimiting encoding of r to b. It is
// used to carry replies between nodes (a follower forwarding a command to the
// leader), never on the client wire.
func (r Reply) AppendBinary(b []byte) []byte {
	b = append(b, byte(r.Kind))
	switch r.Kind {
	case KindInt, KindBool:
		b = binary.AppendVarint(b, r.Int)
	case KindDouble:
		if len(r.Str) > 0 {
			b[len(b)-1] = binDoubleText
		}
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(r.Float))
		if len(r.Str) > 0 {
			b = binary.AppendUvarint(b, uint64(len(r.Str)))
			b = append(b, r.Str...)
		}
	case KindStatus, KindError, KindBulk, KindVerbatim:
		b = binary.AppendUvarint(b, uint64(len(r.Str)))
		b = append(b, r.Str...)
	case KindArray, KindMap, KindSet, KindPush, KindPairs, KindNestedMap:
		b = binary.AppendUvarint(b, uint64(len(r.Elems)))
		for i := range r.Elems {
			b = r.Elems[i].AppendBinary(b)
		}
	}
	return b
}

// binDoubleText is AppendBinary's tag for a KindDouble that carries its
// text: the float, then the text like a bulk string's. Replies without
// text keep the tag that older nodes decode.
const binDoubleText = 0xF0

// ErrBadEncoding is returned by Decode for bytes AppendBinary did not produce.
var ErrBadEncoding = errors.New("reply: bad encoding")

// Decode decodes one reply from the front of b and returns the rest.
func Decode(b []byte) (Reply, []byte, error) {
	return decode(b, 0)
}

func decode(b []byte, depth int) (Reply, []byte, error) {
	if len(b) == 0 || depth > 64 {
		return Reply{}, nil, ErrBadEncoding
	}
	if b[0] == binDoubleText {
		if len(b) < 9 {
			return Reply{}, nil, ErrBadEncoding
		}
		r := Reply{Kind: KindDouble, Float: math.Float64frombits(binary.BigEndian.Uint64(b[1:]))}
		l, n := binary.Uvarint(b[9:])
		if n <= 0 || l == 0 || uint64(len(b)-9-n) < l {
			return Reply{}, nil, ErrBadEncoding
		}
		r.Str = append([]byte(nil), b[9+n:9+n+int(l)]...)
		return r, b[9+n+int(l):], nil
	}
	r := Reply{Kind: Kind(b[0])}
	b = b[1:]
	switch r.Kind {
	case KindNil, KindNilArray:
	case KindInt, KindBool:
		v, n := binary.Varint(b)
		if n <= 0 {
			return Reply{}, nil, ErrBadEncoding
		}
		r.Int, b = v, b[n:]
	case KindDouble:
		if len(b) < 8 {
			return Reply{}, nil, ErrBadEncoding
		}
		r.Float, b = math.Float64frombits(binary.BigEndian.Uint64(b)), b[8:]
	case KindStatus, KindError, KindBulk, KindVerbatim:
		l, n := binary.Uvarint(b)
		if n <= 0 || uint64(len(b)-n) < l {
			return Reply{}, nil, ErrBadEncoding
		}
		r.Str = append([]byte(nil), b[n:n+int(l)]...)
		b = b[n+int(l):]
	case KindArray, KindMap, KindSet, KindPush, KindPairs, KindNestedMap:
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)) {
			return Reply{}, nil, ErrBadEncoding
		}
		b = b[n:]
		r.Elems = make([]Reply, l)
		for i := range r.Elems {
			var err error
			if r.Elems[i], b, err = decode(b, depth+1); err != nil {
				return Reply{}, nil, err
			}
		}
	default:
		return Reply{}, nil, ErrBadEncoding
	}
	return r, b, nil
}

package resp

import (
	"strconv"

	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/resp/codec"
)

// AppendReply appends r encoded for protocol version proto (2 or 3; anything
// below 3 is RESP2). RESP2 has no null, double, map, set, boolean or
// verbatim types; they fall back as documented on reply.Kind.
func AppendReply(b []byte, r reply.Reply, proto int) []byte {
	resp3 := proto >= 3
	switch r.Kind {
	case reply.KindNil:
		if resp3 {
			return append(b, "_\r\n"...)
		}
		return append(b, "$-1\r\n"...)
	case reply.KindNilArray:
		if resp3 {
			return append(b, "_\r\n"...)
		}
		return append(b, "*-1\r\n"...)
	case reply.KindStatus:
		return codec.AppendSimple(b, '+', r.Str)
	case reply.KindError:
		return codec.AppendSimple(b, '-', r.Str)
	case reply.KindInt:
		return codec.AppendHeader(b, ':', r.Int)
	case reply.KindBulk:
		return codec.AppendBulk(b, r.Str)
	case reply.KindArray:
		return appendAggregate(b, '*', r.Elems, proto)
	case reply.KindPush:
		return appendAggregate(b, '>', r.Elems, proto)
	case reply.KindSet:
		return appendAggregate(b, '~', r.Elems, proto)
	case reply.KindNestedMap:
		if resp3 {
			return appendMap(b, r.Elems, proto)
		}
		return appendPairArrays(b, r.Elems, proto)
	case reply.KindPairs:
		if resp3 {
			return appendPairArrays(b, r.Elems, proto)
		}
		return appendAggregate(b, '*', pairs(r.Elems), proto)
	case reply.KindMap:
		if resp3 {
			return appendMap(b, r.Elems, proto)
		}
		return appendAggregate(b, '*', pairs(r.Elems), proto)
	case reply.KindDouble:
		text := r.Str
		if len(text) == 0 {
			var tmp [32]byte
			text = codec.AppendDouble(tmp[:0], r.Float)
		}
		if resp3 {
			b = append(b, ',')
			b = append(b, text...)
			return append(b, '\r', '\n')
		}
		return codec.AppendBulk(b, text)
	case reply.KindBool:
		if resp3 {
			if r.Int != 0 {
				return append(b, "#t\r\n"...)
			}
			return append(b, "#f\r\n"...)
		}
		if r.Int != 0 {
			return append(b, ":1\r\n"...)
		}
		return append(b, ":0\r\n"...)
	case reply.KindVerbatim:
		if resp3 {
			b = codec.AppendHeader(b, '=', int64(len(r.Str)+4))
			b = append(b, "txt:"...)
			b = append(b, r.Str...)
			return append(b, '\r', '\n')
		}
		return codec.AppendBulk(b, r.Str)
	default:
		b = append(b, "-ERR internal error: reply of unknown kind "...)
		b = strconv.AppendUint(b, uint64(r.Kind), 10)
		return append(b, '\r', '\n')
	}
}

// AppendPush appends an out-of-band push frame (pub/sub messages,
// invalidations): RESP3 ">n", RESP2 a plain array.
func AppendPush(b []byte, elems []reply.Reply, proto int) []byte {
	return appendAggregate(b, '>', elems, proto)
}

// appendAggregate writes elems as an aggregate of RESP3 type c; in RESP2
// every aggregate is an array.
func appendAggregate(b []byte, c byte, elems []reply.Reply, proto int) []byte {
	if proto < 3 {
		c = '*'
	}
	b = codec.AppendHeader(b, c, int64(len(elems)))
	return appendElems(b, elems, proto)
}

// pairs is elems without an odd trailing element.
func pairs(elems []reply.Reply) []reply.Reply { return elems[:len(elems)/2*2] }

// appendMap writes key, value, ... as a RESP3 map (an odd trailing
// element is dropped).
func appendMap(b []byte, elems []reply.Reply, proto int) []byte {
	elems = pairs(elems)
	b = codec.AppendHeader(b, '%', int64(len(elems)/2))
	return appendElems(b, elems, proto)
}

// appendPairArrays writes a, b, a, b, ... as an array of two-element
// arrays (an odd trailing element is dropped).
func appendPairArrays(b []byte, elems []reply.Reply, proto int) []byte {
	n := len(elems) / 2
	b = codec.AppendHeader(b, '*', int64(n))
	for i := 0; i < n; i++ {
		b = append(b, "*2\r\n"...)
		b = appendElems(b, elems[2*i:2*i+2], proto)
	}
	return b
}

func appendElems(b []byte, elems []reply.Reply, proto int) []byte {
	for i := range elems {
		b = AppendReply(b, elems[i], proto)
	}
	return b
}

package resp

import (
	"math"
	"strconv"

	"github.com/kvorum/kvorum/internal/reply"
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
		return appendSimple(b, '+', r.Str)
	case reply.KindError:
		return appendSimple(b, '-', r.Str)
	case reply.KindInt:
		return appendHeader(b, ':', r.Int)
	case reply.KindBulk:
		return appendBulk(b, r.Str)
	case reply.KindArray:
		b = appendHeader(b, '*', int64(len(r.Elems)))
		return appendElems(b, r.Elems, proto)
	case reply.KindPush:
		if resp3 {
			b = appendHeader(b, '>', int64(len(r.Elems)))
		} else {
			b = appendHeader(b, '*', int64(len(r.Elems)))
		}
		return appendElems(b, r.Elems, proto)
	case reply.KindSet:
		if resp3 {
			b = appendHeader(b, '~', int64(len(r.Elems)))
		} else {
			b = appendHeader(b, '*', int64(len(r.Elems)))
		}
		return appendElems(b, r.Elems, proto)
	case reply.KindNestedMap:
		if resp3 {
			return appendMap(b, r.Elems, proto)
		}
		return appendPairArrays(b, r.Elems, proto)
	case reply.KindPairs:
		if resp3 {
			return appendPairArrays(b, r.Elems, proto)
		}
		n := len(r.Elems) / 2 // an odd trailing element is dropped
		b = appendHeader(b, '*', int64(2*n))
		return appendElems(b, r.Elems[:2*n], proto)
	case reply.KindMap:
		if resp3 {
			return appendMap(b, r.Elems, proto)
		}
		n := len(r.Elems) / 2 // an odd trailing element is dropped
		b = appendHeader(b, '*', int64(2*n))
		return appendElems(b, r.Elems[:2*n], proto)
	case reply.KindDouble:
		text := r.Str
		if len(text) == 0 {
			var tmp [32]byte
			text = AppendDouble(tmp[:0], r.Float)
		}
		if resp3 {
			b = append(b, ',')
			b = append(b, text...)
			return append(b, '\r', '\n')
		}
		return appendBulk(b, text)
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
			b = appendHeader(b, '=', int64(len(r.Str)+4))
			b = append(b, "txt:"...)
			b = append(b, r.Str...)
			return append(b, '\r', '\n')
		}
		return appendBulk(b, r.Str)
	default:
		b = append(b, "-ERR internal error: reply of unknown kind "...)
		b = strconv.AppendUint(b, uint64(r.Kind), 10)
		return append(b, '\r', '\n')
	}
}

// AppendPush appends an out-of-band push frame (pub/sub messages,
// invalidations): RESP3 ">n", RESP2 a plain array.
func AppendPush(b []byte, elems []reply.Reply, proto int) []byte {
	if proto >= 3 {
		b = appendHeader(b, '>', int64(len(elems)))
	} else {
		b = appendHeader(b, '*', int64(len(elems)))
	}
	return appendElems(b, elems, proto)
}

// appendMap writes key, value, ... as a RESP3 map (an odd trailing
// element is dropped).
func appendMap(b []byte, elems []reply.Reply, proto int) []byte {
	n := len(elems) / 2
	b = appendHeader(b, '%', int64(n))
	return appendElems(b, elems[:2*n], proto)
}

// appendPairArrays writes a, b, a, b, ... as an array of two-element
// arrays (an odd trailing element is dropped).
func appendPairArrays(b []byte, elems []reply.Reply, proto int) []byte {
	n := len(elems) / 2
	b = appendHeader(b, '*', int64(n))
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

func appendHeader(b []byte, c byte, n int64) []byte {
	b = append(b, c)
	b = strconv.AppendInt(b, n, 10)
	return append(b, '\r', '\n')
}

func appendBulk(b, s []byte) []byte {
	b = appendHeader(b, '$', int64(len(s)))
	b = append(b, s...)
	return append(b, '\r', '\n')
}

// appendSimple writes a status or error line. CR and LF would end the line
// early and desynchronise the client, so they become spaces, as Redis does.
func appendSimple(b []byte, c byte, s []byte) []byte {
	b = append(b, c)
	start := len(b)
	b = append(b, s...)
	for i := start; i < len(b); i++ {
		if b[i] == '\r' || b[i] == '\n' {
			b[i] = ' '
		}
	}
	return append(b, '\r', '\n')
}

// AppendDouble appends f formatted like Redis 7.0 formats doubles in
// replies: C's "%.17g", with "inf", "-inf" and "nan" spelled out.
func AppendDouble(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, "nan"...)
	case math.IsInf(f, 1):
		return append(b, "inf"...)
	case math.IsInf(f, -1):
		return append(b, "-inf"...)
	case f == 0:
		if math.Signbit(f) {
			return append(b, "-0"...)
		}
		return append(b, '0')
	}
	// %.17g: 17 significant digits; exponent form when the decimal
	// exponent X is < -4 or >= 17; trailing zeros removed.
	var tmp [40]byte
	e := strconv.AppendFloat(tmp[:0], f, 'e', 16, 64) // [-]d.dddddddddddddddde±XX
	i := len(e) - 1
	for e[i] != 'e' {
		i--
	}
	x, _ := strconv.Atoi(string(e[i+1:]))
	if x < -4 || x >= 17 {
		mant := trimZeros(e[:i])
		b = append(b, mant...)
		return append(b, e[i:]...) // Go, like C, writes at least two exponent digits
	}
	start := len(b)
	b = strconv.AppendFloat(b, f, 'f', 16-x, 64)
	return append(b[:start], trimZeros(b[start:])...)
}

// trimZeros removes trailing fractional zeros and a trailing point.
func trimZeros(s []byte) []byte {
	dot := false
	for _, c := range s {
		if c == '.' {
			dot = true
			break
		}
	}
	if !dot {
		return s
	}
	for s[len(s)-1] == '0' {
		s = s[:len(s)-1]
	}
	if s[len(s)-1] == '.' {
		s = s[:len(s)-1]
	}
	return s
}

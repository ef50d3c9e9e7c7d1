package kvdiff

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/kvorum/kvorum/internal/redisnum"
	"github.com/kvorum/kvorum/internal/reply"
)

// Value is one reply as it travels on the wire: a RESP type and its
// content. Both sides of a differential test are brought to this form (a
// real redis-server's bytes with ReadValue, a kv reply with FromReply) and
// rendered by Render, so that they compare as text.
type Value struct {
	// Type is the RESP type byte: '+' status, '-' error, ':' integer,
	// '$' bulk, '*' array and, in RESP3, '_' null, ',' double, '#'
	// boolean, '(' big number, '=' verbatim, '!' blob error, '%' map,
	// '~' set, '>' push.
	Type byte
	// Null marks RESP2's null bulk ("$-1") and null array ("*-1").
	Null bool
	// Str is the text of a status, error, bulk, double, big number or
	// verbatim string (with its "txt:" prefix).
	Str []byte
	// Int is an integer's value, or a boolean's 1/0.
	Int int64
	// Elems are an aggregate's elements; a map's keys and values alternate.
	Elems []Value
}

// maxDepth bounds nesting when reading replies.
const maxDepth = 64

// ReadValue reads one reply from r.
func ReadValue(r *bufio.Reader) (Value, error) { return readValue(r, 0) }

func readValue(r *bufio.Reader, depth int) (Value, error) {
	if depth > maxDepth {
		return Value{}, errors.New("kvdiff: reply nested too deeply")
	}
	line, err := r.ReadSlice('\n')
	if err != nil {
		return Value{}, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return Value{}, fmt.Errorf("kvdiff: bad reply line %q", line)
	}
	v := Value{Type: line[0]}
	text := line[1 : len(line)-2]
	switch v.Type {
	case '+', '-', ',', '(':
		v.Str = append([]byte{}, text...)
	case ':':
		if v.Int, err = strconv.ParseInt(string(text), 10, 64); err != nil {
			return Value{}, fmt.Errorf("kvdiff: bad integer %q", line)
		}
	case '_':
	case '#':
		switch string(text) {
		case "t":
			v.Int = 1
		case "f":
		default:
			return Value{}, fmt.Errorf("kvdiff: bad boolean %q", line)
		}
	case '$', '=', '!', '*', '~', '>', '%':
		n, err := strconv.Atoi(string(text))
		if err != nil || n < -1 {
			return Value{}, fmt.Errorf("kvdiff: bad length %q", line)
		}
		if n == -1 {
			v.Null = true
			return v, nil
		}
		if v.Type == '$' || v.Type == '=' || v.Type == '!' {
			v.Str, err = readBulk(r, n)
		} else {
			v.Elems, err = readElems(r, v.Type, n, depth)
		}
		if err != nil {
			return Value{}, err
		}
	default:
		return Value{}, fmt.Errorf("kvdiff: unknown reply type %q", line)
	}
	return v, nil
}

// readBulk reads the n bytes of a bulk string and its CRLF.
func readBulk(r *bufio.Reader, n int) ([]byte, error) {
	b := make([]byte, n+2)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	if b[n] != '\r' || b[n+1] != '\n' {
		return nil, errors.New("kvdiff: bulk string not ended by CRLF")
	}
	return b[:n], nil
}

// readElems reads the n elements of an aggregate of type typ (a map's n
// pairs), one level below depth.
func readElems(r *bufio.Reader, typ byte, n, depth int) ([]Value, error) {
	if typ == '%' {
		n *= 2
	}
	elems := make([]Value, n)
	for i := range elems {
		var err error
		if elems[i], err = readValue(r, depth+1); err != nil {
			return nil, err
		}
	}
	return elems, nil
}

// FromReply is the Value that kvorum's client layer writes for r in
// protocol version proto (2 or 3), following the mapping documented on
// reply.Kind. It lets the state machine's replies be compared with a real
// redis-server's without a server in between; a test in this package checks
// it against the resp package's writer.
func FromReply(r reply.Reply, proto int) Value {
	resp3 := proto >= 3
	elems := func(rs []reply.Reply) []Value {
		out := make([]Value, len(rs))
		for i := range rs {
			out[i] = FromReply(rs[i], proto)
		}
		return out
	}
	pairArrays := func(rs []reply.Reply) []Value {
		out := make([]Value, len(rs)/2)
		for i := range out {
			out[i] = Value{Type: '*', Elems: elems(rs[2*i : 2*i+2])}
		}
		return out
	}
	even := func(rs []reply.Reply) []reply.Reply { return rs[:len(rs)/2*2] }
	switch r.Kind {
	case reply.KindNil, reply.KindNilArray:
		if resp3 {
			return Value{Type: '_'}
		}
		if r.Kind == reply.KindNil {
			return Value{Type: '$', Null: true}
		}
		return Value{Type: '*', Null: true}
	case reply.KindStatus:
		return Value{Type: '+', Str: simple(r.Str)}
	case reply.KindError:
		return Value{Type: '-', Str: simple(r.Str)}
	case reply.KindInt:
		return Value{Type: ':', Int: r.Int}
	case reply.KindBulk:
		return Value{Type: '$', Str: r.Str}
	case reply.KindArray:
		return Value{Type: '*', Elems: elems(r.Elems)}
	case reply.KindPush:
		if resp3 {
			return Value{Type: '>', Elems: elems(r.Elems)}
		}
		return Value{Type: '*', Elems: elems(r.Elems)}
	case reply.KindSet:
		if resp3 {
			return Value{Type: '~', Elems: elems(r.Elems)}
		}
		return Value{Type: '*', Elems: elems(r.Elems)}
	case reply.KindNestedMap:
		if resp3 {
			return Value{Type: '%', Elems: elems(even(r.Elems))}
		}
		return Value{Type: '*', Elems: pairArrays(r.Elems)}
	case reply.KindPairs:
		if resp3 {
			return Value{Type: '*', Elems: pairArrays(r.Elems)}
		}
		return Value{Type: '*', Elems: elems(even(r.Elems))}
	case reply.KindMap:
		if resp3 {
			return Value{Type: '%', Elems: elems(even(r.Elems))}
		}
		return Value{Type: '*', Elems: elems(even(r.Elems))}
	case reply.KindDouble:
		text := r.Str
		if len(text) == 0 {
			text = redisnum.AppendDouble(nil, r.Float)
		}
		if resp3 {
			return Value{Type: ',', Str: text}
		}
		return Value{Type: '$', Str: text}
	case reply.KindBool:
		b := int64(0)
		if r.Int != 0 {
			b = 1
		}
		if resp3 {
			return Value{Type: '#', Int: b}
		}
		return Value{Type: ':', Int: b}
	case reply.KindVerbatim:
		if resp3 {
			return Value{Type: '=', Str: append([]byte("txt:"), r.Str...)}
		}
		return Value{Type: '$', Str: r.Str}
	}
	return Value{Type: '-', Str: []byte(fmt.Sprintf("kvdiff: reply of unknown kind %d", r.Kind))}
}

// simple is a status or error text as written on one line: CR and LF
// become spaces.
func simple(s []byte) []byte {
	out := append([]byte{}, s...)
	for i, c := range out {
		if c == '\r' || c == '\n' {
			out[i] = ' '
		}
	}
	return out
}

package bitmap

import (
	"bytes"
	"strings"

	"github.com/kvorum/kvorum/internal/redisnum"
	"github.com/kvorum/kvorum/internal/reply"
)

// The arguments of GETBIT, SETBIT, BITPOS's bit, BITOP and BITFIELD,
// parsed as Redis 7.0 parses them, with Redis's error replies (BITCOUNT's
// and BITPOS's ranges are parsed by package kv, after the key lookup).

var (
	errBitOffset    = reply.Error("ERR bit offset is not an integer or out of range")
	errBitValue     = reply.Error("ERR bit is not an integer or out of range")
	errBitArg       = reply.Error("ERR The bit argument must be 1 or 0.")
	errBitOpNot     = reply.Error("ERR BITOP NOT must be called with a single source key.")
	errBitfieldType = reply.Error("ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.")
	errOverflowType = reply.Error("ERR Invalid OVERFLOW type specified")
	errBitfieldRO   = reply.Error("ERR BITFIELD_RO only supports the GET subcommand")
)

// eq compares an argument with a keyword, ignoring case.
func eq(b []byte, s string) bool { return strings.EqualFold(string(b), s) }

// MaxOffset is the largest bit offset Redis accepts: the bit must lie in a
// string of at most proto-max-bulk-len (512 MB) bytes.
const MaxOffset = 512<<20*8 - 1

// ParseOffset is Redis's getBitOffsetFromArgument: a non-negative integer
// up to MaxOffset. With hash and width > 0 (BITFIELD), "#N" means
// N*width, multiplied with 64-bit wrap-around as Redis does.
func ParseOffset(b []byte, hash bool, width int) (uint64, bool) {
	useHash := hash && width > 0 && len(b) > 0 && b[0] == '#'
	if useHash {
		b = b[1:]
	}
	n, ok := redisnum.ParseInt(b)
	if !ok {
		return 0, false
	}
	if useHash {
		n *= int64(width) // wraps like Redis's long long multiplication
	}
	if n < 0 || n > MaxOffset {
		return 0, false
	}
	return uint64(n), true
}

// ParseGetBit parses GETBIT's offset.
func ParseGetBit(args [][]byte) (uint64, reply.Reply, bool) {
	off, ok := ParseOffset(args[2], false, 0)
	if !ok {
		return 0, errBitOffset, false
	}
	return off, reply.Reply{}, true
}

// SetBitArgs is a parsed SETBIT: the offset and the value, 0 or 1.
type SetBitArgs struct {
	Off uint64
	On  byte
}

// ParseSetBit parses SETBIT's offset and value.
func ParseSetBit(args [][]byte) (SetBitArgs, reply.Reply, bool) {
	off, r, ok := ParseGetBit(args)
	if !ok {
		return SetBitArgs{}, r, false
	}
	n, ok := redisnum.ParseInt(args[3])
	if !ok || n&^1 != 0 {
		return SetBitArgs{}, errBitValue, false
	}
	return SetBitArgs{off, byte(n)}, reply.Reply{}, true
}

// ParseBitPos reads the bit BITPOS looks for, 0 or 1.
func ParseBitPos(args [][]byte) (byte, reply.Reply, bool) {
	n, ok := redisnum.ParseInt(args[2])
	if !ok {
		return 0, reply.ErrNotInt, false
	}
	if n != 0 && n != 1 {
		return 0, errBitArg, false
	}
	return byte(n), reply.Reply{}, true
}

// ParseBitOp parses BITOP's operation.
func ParseBitOp(args [][]byte) (Op, reply.Reply, bool) {
	var op Op
	switch a := args[1]; {
	case eq(a, "AND"):
		op = And
	case eq(a, "OR"):
		op = Or
	case eq(a, "XOR"):
		op = Xor
	case eq(a, "NOT"):
		if len(args) != 4 {
			return 0, errBitOpNot, false
		}
		op = Not
	default:
		return 0, reply.ErrSyntax, false
	}
	return op, reply.Reply{}, true
}

// BITFIELD subcommands.
const (
	FieldGet = iota
	FieldSet
	FieldIncrBy
)

// FieldOp is one of BITFIELD's GET, SET or INCRBY subcommands.
type FieldOp struct {
	Op       int
	Overflow Overflow
	Type     Type
	Offset   uint64
	Arg      int64 // SET's value, INCRBY's increment
}

// Bitfield is a parsed BITFIELD or BITFIELD_RO.
type Bitfield struct {
	Ops   []FieldOp
	Write bool // a SET or INCRBY among them
}

// ParseBitfield parses BITFIELD's subcommands the way Redis does, failing
// at the first error; BITFIELD_RO takes GETs only.
func ParseBitfield(args [][]byte) (Bitfield, reply.Reply, bool) {
	var bf Bitfield
	overflow := Wrap
	for j := 2; j < len(args); j++ {
		rem := len(args) - j - 1
		var op int
		switch sub := args[j]; {
		case eq(sub, "GET") && rem >= 2:
			op = FieldGet
		case eq(sub, "SET") && rem >= 3:
			op = FieldSet
		case eq(sub, "INCRBY") && rem >= 3:
			op = FieldIncrBy
		case eq(sub, "OVERFLOW") && rem >= 1:
			j++
			switch t := args[j]; {
			case eq(t, "WRAP"):
				overflow = Wrap
			case eq(t, "SAT"):
				overflow = Sat
			case eq(t, "FAIL"):
				overflow = Fail
			default:
				return bf, errOverflowType, false
			}
			continue
		default:
			return bf, reply.ErrSyntax, false
		}
		typ, ok := parseType(args[j+1])
		if !ok {
			return bf, errBitfieldType, false
		}
		off, ok := ParseOffset(args[j+2], true, int(typ.Width))
		if !ok {
			return bf, errBitOffset, false
		}
		var arg int64
		if op != FieldGet {
			bf.Write = true
			if arg, ok = redisnum.ParseInt(args[j+3]); !ok {
				return bf, reply.ErrNotInt, false
			}
			j += 3
		} else {
			j += 2
		}
		bf.Ops = append(bf.Ops, FieldOp{Op: op, Overflow: overflow, Type: typ, Offset: off, Arg: arg})
	}
	if bf.Write && eq(args[0], "BITFIELD_RO") {
		return bf, errBitfieldRO, false
	}
	return bf, reply.Reply{}, true
}

// parseType reads i1..i64 or u1..u63. Redis reads the width as a C
// string: it stops at a NUL byte.
func parseType(b []byte) (Type, bool) {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	if len(b) == 0 || (b[0] != 'i' && b[0] != 'u') {
		return Type{}, false
	}
	signed := b[0] == 'i'
	n, ok := redisnum.ParseInt(b[1:])
	if !ok || n < 1 || (signed && n > 64) || (!signed && n > 63) {
		return Type{}, false
	}
	return Type{Signed: signed, Width: uint(n)}, true
}

package kv

import (
	"github.com/kvorum/kvorum/internal/lcs"
	"github.com/kvorum/kvorum/internal/redisnum"
)

// SUBSTR and LCS.

func init() {
	defParsed("substr", 4, "readonly", 1, 1, 1, "string", "Returns a substring from a string value.", parseRange, cmdGetRange)
	def("lcs", -3, "readonly", 1, 2, 1, "string", "Finds the longest common substring.", cmdLCS, nil)
}

var (
	errLCSType   = Error("ERR The specified keys must contain string values")
	errLCSLenIdx = Error("ERR If you want both the length and indexes, please just use IDX.")
	errLCSMemory = Error("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len")
)

// cmdLCS is a port of Redis 7.0's lcsCommand. As in Redis, the keys are
// looked at before the options (a key of another type is reported before
// a syntax error), so there is no check function: LCS is a read and never
// reaches the log anyway.
//
// Redis's dynamic-programming table has (len1+1)*(len2+1) cells of 4
// bytes, and LCS refuses when that exceeds proto-max-bulk-len (512 MB);
// kvorum refuses the same inputs, though package lcs needs only one bit
// per cell.
func cmdLCS(x *ctx, args [][]byte) Reply {
	ra, oka, err := x.load(args[1])
	if err != nil {
		return errReply(err)
	}
	rb, okb, err := x.load(args[2])
	if err != nil {
		return errReply(err)
	}
	if (oka && ra.typ != typeString) || (okb && rb.typ != typeString) {
		return errLCSType
	}
	a, b := ra.value, rb.value // nil (the empty string) if absent
	var getLen, getIdx, withMatchLen bool
	var minMatchLen int64
	for j := 3; j < len(args); j++ {
		switch {
		case eq(args[j], "IDX"):
			getIdx = true
		case eq(args[j], "LEN"):
			getLen = true
		case eq(args[j], "WITHMATCHLEN"):
			withMatchLen = true
		case eq(args[j], "MINMATCHLEN") && j+1 < len(args):
			n, ok := redisnum.ParseInt(args[j+1])
			if !ok {
				return errNotInt
			}
			minMatchLen = max(n, 0)
			j++
		default:
			return errSyntax
		}
	}
	if getLen && getIdx {
		return errLCSLenIdx
	}
	alen, blen := len(a), len(b)
	if uint64(alen+1)*uint64(blen+1)*4 > maxStringSize {
		return errLCSMemory
	}
	if getLen {
		return Int(int64(lcs.Len(a, b)))
	}
	str, found := lcs.Find(a, b)
	if !getIdx {
		return Bulk(str)
	}
	matches := []Reply{}
	for _, m := range found {
		if n := int64(m.Len()); minMatchLen == 0 || n >= minMatchLen {
			r := []Reply{Array(Int(int64(m.AStart)), Int(int64(m.AEnd))), Array(Int(int64(m.BStart)), Int(int64(m.BEnd)))}
			if withMatchLen {
				r = append(r, Int(n))
			}
			matches = append(matches, Array(r...))
		}
	}
	return Map(BulkString("matches"), Array(matches...), BulkString("len"), Int(int64(len(str))))
}

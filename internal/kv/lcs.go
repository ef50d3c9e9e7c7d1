package kv

import "github.com/kvorum/kvorum/internal/redisnum"

// SUBSTR and LCS.

func init() {
	def("substr", 4, "readonly", 1, 1, 1, "string", "Returns a substring from a string value.", cmdGetRange, checkIntArgs(2, 3))
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
// kvorum refuses the same inputs, though it needs only one bit per cell.
func cmdLCS(x *ctx, args [][]byte) Reply {
	ra, oka, err := x.load(args[1])
	if err != nil {
		return errStorage(err)
	}
	rb, okb, err := x.load(args[2])
	if err != nil {
		return errStorage(err)
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
	// The classic table: L(i,j) is the length of the LCS of a[:i] and
	// b[:j]. Two rows of it are kept; for the walk back, which at a
	// mismatch only asks whether L(i-1,j) > L(i,j-1), one bit per cell
	// records the answer (1/32 of Redis's table of uint32s). Neighbouring
	// cells differ by 0 or 1, so with up = L(i,j)-L(i-1,j) and left =
	// L(i,j)-L(i,j-1), L(i-1,j) > L(i,j-1) exactly when left > up.
	var goUp []uint64 // bit (i-1)*blen + (j-1): L(i-1,j) > L(i,j-1)
	if !getLen {
		goUp = make([]uint64, (alen*blen+63)/64)
	}
	prev, cur := make([]uint32, blen+1), make([]uint32, blen+1)
	for i := 1; i <= alen; i++ {
		ai := a[i-1]
		base := (i - 1) * blen
		for j := 1; j <= blen; j++ {
			var v uint32
			switch {
			case ai == b[j-1]:
				v = prev[j-1] + 1
			case prev[j] > cur[j-1]:
				v = prev[j]
			default:
				v = cur[j-1]
			}
			cur[j] = v
			if goUp != nil && v-cur[j-1] > v-prev[j] {
				k := base + j - 1
				goUp[k>>6] |= 1 << (k & 63)
			}
		}
		prev, cur = cur, prev
	}
	total := prev[blen]
	if getLen {
		return Int(int64(total))
	}

	// Walk back from the end, building the LCS string and, for IDX, the
	// matching ranges exactly as Redis emits them (last match first).
	idx := total
	result := make([]byte, idx)
	var matches []Reply
	aStart, aEnd, bStart, bEnd := alen, 0, 0, 0 // aStart == alen: no range open
	i, j := alen, blen
	for i > 0 && j > 0 {
		emit := false
		if a[i-1] == b[j-1] {
			result[idx-1] = a[i-1]
			if aStart == alen {
				aStart, aEnd, bStart, bEnd = i-1, i-1, j-1, j-1
			} else if aStart == i && bStart == j {
				// Contiguous: extend the range backwards.
				aStart--
				bStart--
			} else {
				emit = true
			}
			// Matched with the first byte of a string: the walk ends here.
			if aStart == 0 || bStart == 0 {
				emit = true
			}
			idx--
			i--
			j--
		} else {
			if k := (i-1)*blen + j - 1; goUp[k>>6]&(1<<(k&63)) != 0 {
				i--
			} else {
				j--
			}
			if aStart != alen {
				emit = true
			}
		}
		if emit {
			matchLen := int64(aEnd - aStart + 1)
			if getIdx && (minMatchLen == 0 || matchLen >= minMatchLen) {
				m := []Reply{Array(Int(int64(aStart)), Int(int64(aEnd))), Array(Int(int64(bStart)), Int(int64(bEnd)))}
				if withMatchLen {
					m = append(m, Int(matchLen))
				}
				matches = append(matches, Array(m...))
			}
			aStart = alen
		}
	}
	if getIdx {
		if matches == nil {
			matches = []Reply{}
		}
		return Map(BulkString("matches"), Array(matches...), BulkString("len"), Int(int64(total)))
	}
	return Bulk(result)
}

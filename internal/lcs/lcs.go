// Package lcs is the longest common subsequence of two byte strings as
// Redis 7.0's LCS command computes it (lcsCommand in t_string.c): the
// classic dynamic-programming table, then a walk back from its end that
// picks the same subsequence Redis picks among equally long ones and
// reports the matching ranges in Redis's order, last match first.
//
// Redis keeps the whole table of uint32s; Find keeps two rows of it and,
// for the walk back, one bit per cell, and Len only the two rows. The
// caller bounds the sizes (Redis refuses a table above proto-max-bulk-len).
//
// The package depends on nothing but the standard library.
package lcs

// Match is a range of a and the equal range of b, both inclusive, that
// the subsequence takes whole.
type Match struct {
	AStart, AEnd int
	BStart, BEnd int
}

// Len is the length of the match.
func (m Match) Len() int { return m.AEnd - m.AStart + 1 }

// Len returns the length of the longest common subsequence of a and b.
func Len(a, b []byte) int {
	n, _ := table(a, b, false)
	return n
}

// Find returns the longest common subsequence of a and b that Redis
// returns, and its matching ranges in the order Redis replies them (from
// the end of the strings backwards).
func Find(a, b []byte) (lcs []byte, matches []Match) {
	total, goUp := table(a, b, true)
	alen, blen := len(a), len(b)
	idx := total
	lcs = make([]byte, idx)
	aStart, aEnd, bStart, bEnd := alen, 0, 0, 0 // aStart == alen: no range open
	i, j := alen, blen
	for i > 0 && j > 0 {
		emit := false
		if a[i-1] == b[j-1] {
			lcs[idx-1] = a[i-1]
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
			matches = append(matches, Match{AStart: aStart, AEnd: aEnd, BStart: bStart, BEnd: bEnd})
			aStart = alen
		}
	}
	return lcs, matches
}

// table computes the classic table: L(i,j) is the length of the LCS of
// a[:i] and b[:j]; it returns L(len(a), len(b)). Two rows of it are kept;
// for the walk back, which at a mismatch only asks whether L(i-1,j) >
// L(i,j-1), one bit per cell records the answer when walk is set (1/32 of
// Redis's table of uint32s). Neighbouring cells differ by 0 or 1, so with
// up = L(i,j)-L(i-1,j) and left = L(i,j)-L(i,j-1), L(i-1,j) > L(i,j-1)
// exactly when left > up.
func table(a, b []byte, walk bool) (int, []uint64) {
	alen, blen := len(a), len(b)
	var goUp []uint64 // bit (i-1)*blen + (j-1): L(i-1,j) > L(i,j-1)
	if walk {
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
	return int(prev[blen]), goUp
}

package lcs

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"
)

// Redis 7.0's LCS, LCS LEN and LCS IDX for the same strings (the choice
// among equally long subsequences and the ranges are Redis's).
func TestLikeRedis(t *testing.T) {
	for _, c := range []struct {
		a, b    string
		lcs     string
		matches []Match
	}{
		{"ohmytext", "mynewtext", "mytext", []Match{{4, 7, 5, 8}, {2, 3, 0, 1}}},
		{"ABCBDAB", "BDCABA", "BDAB", []Match{{5, 6, 3, 4}, {3, 4, 0, 1}}},
		{"aaaa", "aa", "aa", []Match{{2, 3, 0, 1}}},
		{"abcdef", "fedcba", "f", []Match{{5, 5, 0, 0}}},
		{"GAC", "AGCAT", "AC", []Match{{2, 2, 2, 2}, {1, 1, 0, 0}}},
		{"x", "y", "", nil},
		{"", "abc", "", nil},
		{"same", "same", "same", []Match{{0, 3, 0, 3}}},
	} {
		got, matches := Find([]byte(c.a), []byte(c.b))
		if string(got) != c.lcs || !reflect.DeepEqual(matches, c.matches) {
			t.Errorf("Find(%q, %q) = %q %v, want %q %v", c.a, c.b, got, matches, c.lcs, c.matches)
		}
		if n := Len([]byte(c.a), []byte(c.b)); n != len(c.lcs) {
			t.Errorf("Len(%q, %q) = %d, want %d", c.a, c.b, n, len(c.lcs))
		}
	}
	if (Match{AStart: 4, AEnd: 7}).Len() != 4 {
		t.Error("Match.Len")
	}
}

// naiveLen is the textbook full table.
func naiveLen(a, b []byte) int {
	l := make([][]int, len(a)+1)
	for i := range l {
		l[i] = make([]int, len(b)+1)
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			if a[i-1] == b[j-1] {
				l[i][j] = l[i-1][j-1] + 1
			} else {
				l[i][j] = max(l[i-1][j], l[i][j-1])
			}
		}
	}
	return l[len(a)][len(b)]
}

// isSubsequence reports whether s is a subsequence of t.
func isSubsequence(s, t []byte) bool {
	for _, c := range t {
		if len(s) > 0 && s[0] == c {
			s = s[1:]
		}
	}
	return len(s) == 0
}

// On random strings: the length is the textbook one, the string is a
// common subsequence of that length, and the ranges are equal bytes,
// ordered backwards and disjoint, that spell the string.
func TestRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	word := func(alpha string) []byte {
		b := make([]byte, rng.IntN(60))
		for i := range b {
			b[i] = alpha[rng.IntN(len(alpha))]
		}
		return b
	}
	for round := 0; round < 2000; round++ {
		alpha := []string{"ab", "abc", "abcdefgh", "a", "\x00\xff"}[rng.IntN(5)]
		a, b := word(alpha), word(alpha)
		want := naiveLen(a, b)
		if n := Len(a, b); n != want {
			t.Fatalf("Len(%q, %q) = %d, want %d", a, b, n, want)
		}
		s, matches := Find(a, b)
		if len(s) != want || !isSubsequence(s, a) || !isSubsequence(s, b) {
			t.Fatalf("Find(%q, %q) = %q, not a common subsequence of length %d", a, b, s, want)
		}
		var spelled []byte
		lastA, lastB := len(a), len(b)
		for _, m := range matches {
			if m.AEnd >= lastA || m.BEnd >= lastB || m.AEnd-m.AStart != m.BEnd-m.BStart {
				t.Fatalf("Find(%q, %q): bad range %+v in %+v", a, b, m, matches)
			}
			if !bytes.Equal(a[m.AStart:m.AEnd+1], b[m.BStart:m.BEnd+1]) {
				t.Fatalf("Find(%q, %q): range %+v differs", a, b, m)
			}
			spelled = append(append([]byte{}, a[m.AStart:m.AEnd+1]...), spelled...)
			lastA, lastB = m.AStart, m.BStart
		}
		if !bytes.Equal(spelled, s) {
			t.Fatalf("Find(%q, %q): ranges spell %q, not %q", a, b, spelled, s)
		}
	}
}

// Package sortargs is SORT's and SORT_RO's options, parsed as Redis 7.0's
// sortCommandGeneric parses them, with Redis's error replies, and the
// orders it sorts in. Package kv loads the elements and looks up the BY
// and GET patterns in the keyspace.
package sortargs

import (
	"bytes"
	"slices"
	"sort"
	"strings"

	"github.com/kvorum/kvorum/internal/redisnum"
	"github.com/kvorum/kvorum/internal/reply"
)

var ()

// Opts is a parsed SORT command.
type Opts struct {
	Desc, Alpha  bool
	DontSort     bool // BY a pattern without '*'
	Start, Count int64
	By           []byte   // nil: none
	Gets         [][]byte // GET patterns, in order
	Store        []byte   // nil: none
}

// Parse parses SORT's options as Redis does: left to right, the first
// error wins; SORT_RO has no STORE.
func Parse(args [][]byte) (Opts, reply.Reply, bool) {
	ro := eq(args[0], "sort_ro")
	o := Opts{Count: -1}
	for j := 2; j < len(args); j++ {
		left := len(args) - j - 1
		a := args[j]
		switch {
		case eq(a, "ASC"):
			o.Desc = false
		case eq(a, "DESC"):
			o.Desc = true
		case eq(a, "ALPHA"):
			o.Alpha = true
		case eq(a, "LIMIT") && left >= 2:
			s, ok := redisnum.ParseInt(args[j+1])
			if !ok {
				return o, reply.ErrNotInt, false
			}
			c, ok := redisnum.ParseInt(args[j+2])
			if !ok {
				return o, reply.ErrNotInt, false
			}
			o.Start, o.Count = s, c
			j += 2
		case !ro && eq(a, "STORE") && left >= 1:
			o.Store = args[j+1]
			j++
		case eq(a, "BY") && left >= 1:
			o.By = args[j+1]
			if bytes.IndexByte(CString(o.By), '*') < 0 {
				o.DontSort = true // sticky, as in Redis
			}
			j++
		case eq(a, "GET") && left >= 1:
			o.Gets = append(o.Gets, args[j+1])
			j++
		default:
			return o, reply.ErrSyntax, false
		}
	}
	return o, reply.Reply{}, true
}

// eq compares an argument with a keyword, ignoring case.
func eq(b []byte, s string) bool { return strings.EqualFold(string(b), s) }

// Window is the LIMIT of o as Redis clamps it for n elements: the
// positions start to end (inclusive; end < start: none) of the result.
func (o *Opts) Window(n int64) (start, end int64) {
	start = min(max(o.Start, 0), n)
	cnt := min(max(o.Count, -1), n)
	end = n - 1
	if cnt >= 0 {
		end = start + cnt - 1
	}
	if start >= n {
		start, end = n-1, n-2
	}
	if end >= n {
		end = n - 1
	}
	return start, end
}

// CString is b up to its first NUL byte: what C string functions see of it.
func CString(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}

// Item is one element to sort and its sort key.
type Item struct {
	Elem  []byte
	Score float64
	Cmp   []byte // ALPHA BY: the value looked up
	Has   bool   // ALPHA BY: whether it was found
}

// Sort sorts items as Redis's sortCompare orders them (stable: equal
// items keep their order).
func Sort(items []Item, alpha, byPattern, store, desc bool) {
	cmpBytes := func(a, b []byte) int {
		if store {
			return bytes.Compare(a, b)
		}
		return bytes.Compare(CString(a), CString(b)) // strcoll in the C locale
	}
	slices.SortStableFunc(items, func(a, b Item) int {
		var c int
		switch {
		case !alpha:
			switch {
			case a.Score > b.Score:
				c = 1
			case a.Score < b.Score:
				c = -1
			default:
				c = bytes.Compare(a.Elem, b.Elem)
			}
		case byPattern:
			switch {
			case !a.Has || !b.Has:
				switch {
				case a.Has == b.Has:
					c = 0
				case !a.Has:
					c = -1
				default:
					c = 1
				}
			default:
				c = cmpBytes(a.Cmp, b.Cmp)
			}
		default:
			c = cmpBytes(a.Elem, b.Elem)
		}
		if desc {
			return -c
		}
		return c
	})
}

// HashOrder puts the members of a set in the order Redis 7.0 iterates
// them where that is known: a set of at most 512 integers is an intset,
// iterated in ascending numeric order. Any other set is a hash table whose
// order is unspecified; kvorum keeps byte order.
func HashOrder(all [][]byte) {
	if len(all) > 512 {
		return
	}
	nums := make([]int64, len(all))
	for i, m := range all {
		v, ok := redisnum.ParseInt(m)
		if !ok {
			return
		}
		nums[i] = v
	}
	idx := make([]int, len(all))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(i, j int) bool { return nums[idx[i]] < nums[idx[j]] })
	sorted := make([][]byte, len(all))
	for i, k := range idx {
		sorted[i] = all[k]
	}
	copy(all, sorted)
}

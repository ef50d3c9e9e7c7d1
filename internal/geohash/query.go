package geohash

import (
	"bytes"
	"strings"

	"github.com/kvorum/kvorum/internal/redisnum"
	"github.com/kvorum/kvorum/internal/reply"
)

// GEOSEARCH, GEOSEARCHSTORE, GEORADIUS, GEORADIUSBYMEMBER and their _RO
// forms: the query, parsed as Redis's georadiusGeneric parses it.

var (
	errGeoMember = reply.Error("ERR could not decode requested zset member")
	errGeoCount  = reply.Error("ERR COUNT must be > 0")
	errGeoAny    = reply.Error("ERR the ANY argument requires COUNT argument")
)

// Variants of georadiusGeneric.
const (
	RadiusCoords = 1 << iota // around coordinates
	RadiusMember             // around a member
	NoStore                  // no STORE/STOREDIST option
	SearchCmd                // GEOSEARCH's arguments
	SearchStore              // GEOSEARCHSTORE: the STOREDIST flag
)

const (
	SortNone = iota
	SortAsc
	SortDesc
)

// Variant returns the command's flags and the position of its source key.
func Variant(name []byte) (flags, src int) {
	switch strings.ToLower(string(name)) {
	case "georadius":
		return RadiusCoords, 1
	case "georadiusbymember":
		return RadiusMember, 1
	case "georadius_ro":
		return RadiusCoords | NoStore, 1
	case "georadiusbymember_ro":
		return RadiusMember | NoStore, 1
	case "geosearchstore":
		return SearchCmd | SearchStore, 2
	}
	return SearchCmd, 1
}

// HasStore reports whether a GEORADIUS or GEORADIUSBYMEMBER command has
// a STORE or STOREDIST option with its key, looking where Redis's
// georadiusGetKeys looks: a write.
func HasStore(args [][]byte) bool {
	for i := 5; i+1 < len(args); i++ {
		if Eq(args[i], "store") || Eq(args[i], "storedist") {
			return true
		}
	}
	return false
}

// Query is a parsed search.
type Query struct {
	Shape                         Shape
	Store                         []byte // nil: reply
	StoreDist                     bool
	WithDist, WithHash, WithCoord bool
	Any                           bool
	Sort                          int
	Count                         int64 // 0: all
}

// Source is what parsing needs of the source key: whether it exists
// (as a sorted set) and the positions of its members.
type Source struct {
	Exists bool
	Pos    func(member []byte) (lon, lat float64, ok bool, err error)
	// Fail is the reply to an error of Pos.
	Fail func(error) reply.Reply
}

// ParseQuery parses a search as georadiusGeneric does after the type
// check: in order, the first error wins, members are looked up (src.pos)
// where Redis looks them up.
func ParseQuery(args [][]byte, flags int, src Source) (q Query, r reply.Reply, ok bool) {
	memberPos := func(m []byte) (reply.Reply, bool) {
		lon, lat, found, err := src.Pos(m)
		if err != nil {
			return src.Fail(err), false
		}
		if !found {
			return errGeoMember, false
		}
		q.Shape.Lon, q.Shape.Lat = lon, lat
		return reply.Reply{}, true
	}
	var base int
	switch {
	case flags&RadiusCoords != 0:
		base = 6
		q.Shape.Type = Circle
		if q.Shape.Lon, q.Shape.Lat, r, ok = ParseLonLat(args[2], args[3]); !ok {
			return q, r, false
		}
		if r, ok = q.Shape.ParseDistance(args[4], args[5]); !ok {
			return q, r, false
		}
	case flags&RadiusMember != 0 && !src.Exists:
		// No source key: the options are still parsed, for the reply.
		base = 5
	case flags&RadiusMember != 0:
		base = 5
		q.Shape.Type = Circle
		if r, ok = memberPos(args[2]); !ok {
			return q, r, false
		}
		if r, ok = q.Shape.ParseDistance(args[3], args[4]); !ok {
			return q, r, false
		}
	default:
		base = 2
		if flags&SearchStore != 0 {
			base = 3
			q.Store = args[1]
		}
	}

	search := flags&SearchCmd != 0
	canStore := flags&(NoStore|SearchCmd) == 0
	var fromMember, fromLoc, byRadius, byBox bool
	remaining := len(args) - base
	for i := 0; i < remaining; i++ {
		a := args[base+i]
		switch {
		case Eq(a, "withdist"):
			q.WithDist = true
		case Eq(a, "withhash"):
			q.WithHash = true
		case Eq(a, "withcoord"):
			q.WithCoord = true
		case Eq(a, "any"):
			q.Any = true
		case Eq(a, "asc"):
			q.Sort = SortAsc
		case Eq(a, "desc"):
			q.Sort = SortDesc
		case Eq(a, "count") && i+1 < remaining:
			n, ok := redisnum.ParseInt(args[base+i+1])
			if !ok {
				return q, reply.ErrNotInt, false
			}
			if n <= 0 {
				return q, errGeoCount, false
			}
			q.Count = n
			i++
		case Eq(a, "store") && i+1 < remaining && canStore:
			q.Store, q.StoreDist = args[base+i+1], false
			i++
		case Eq(a, "storedist") && i+1 < remaining && canStore:
			q.Store, q.StoreDist = args[base+i+1], true
			i++
		case Eq(a, "storedist") && search && flags&SearchStore != 0:
			q.StoreDist = true
		case Eq(a, "frommember") && i+1 < remaining && search && !fromLoc:
			if src.Exists {
				if r, ok = memberPos(args[base+i+1]); !ok {
					return q, r, false
				}
			}
			fromMember = true
			i++
		case Eq(a, "fromlonlat") && i+2 < remaining && search && !fromMember:
			if q.Shape.Lon, q.Shape.Lat, r, ok = ParseLonLat(args[base+i+1], args[base+i+2]); !ok {
				return q, r, false
			}
			fromLoc = true
			i += 2
		case Eq(a, "byradius") && i+2 < remaining && search && !byBox:
			if r, ok = q.Shape.ParseDistance(args[base+i+1], args[base+i+2]); !ok {
				return q, r, false
			}
			q.Shape.Type = Circle
			byRadius = true
			i += 2
		case Eq(a, "bybox") && i+3 < remaining && search && !byRadius:
			if r, ok = q.Shape.ParseBox(args[base+i+1], args[base+i+2], args[base+i+3]); !ok {
				return q, r, false
			}
			q.Shape.Type = Box
			byBox = true
			i += 3
		default:
			return q, reply.ErrSyntax, false
		}
	}

	if q.Store != nil && (q.WithDist || q.WithHash || q.WithCoord) {
		what := "STORE option in GEORADIUS"
		if flags&SearchStore != 0 {
			what = "GEOSEARCHSTORE"
		}
		return q, reply.Error("ERR " + what + " is not compatible with WITHDIST, WITHHASH and WITHCOORD options"), false
	}
	if search && !fromMember && !fromLoc {
		return q, reply.Error("ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for " + string(args[0])), false
	}
	if search && !byRadius && !byBox {
		return q, reply.Error("ERR exactly one of BYRADIUS and BYBOX can be specified for " + string(args[0])), false
	}
	if q.Any && q.Count == 0 {
		return q, errGeoAny, false
	}
	return q, reply.Reply{}, true
}

// CheckSearch parses the write forms (GEOSEARCHSTORE; GEORADIUS and
// GEORADIUSBYMEMBER with STORE) before they are proposed, with the source
// key assumed to be a sorted set holding every member it is asked for.
// A command is refused only if Redis fails it whatever the data, with the
// same error if the key is missing: GEORADIUSBYMEMBER does not even parse
// its radius when the key is missing (Redis then deletes the destination
// and replies 0). The read forms are checked when they run, in Redis's
// order (the key's type first).
func CheckSearch(args [][]byte) (reply.Reply, bool) {
	flags, _ := Variant(args[0])
	if flags&SearchStore == 0 && !HasStore(args) {
		return reply.Reply{}, true
	}
	found := func([]byte) (float64, float64, bool, error) { return 0, 0, true, nil }
	_, r, ok := ParseQuery(args, flags, Source{Exists: true, Pos: found})
	if ok {
		return reply.Reply{}, true
	}
	if flags&RadiusMember != 0 {
		// Without the key Redis skips the radius: unless that fails the
		// same way, the data decides (run replies the error, if any).
		if _, r2, ok := ParseQuery(args, flags, Source{Exists: false, Pos: found}); ok || !bytes.Equal(r.Str, r2.Str) {
			return reply.Reply{}, true
		}
	}
	return r, false
}

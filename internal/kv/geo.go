package kv

import (
	"bytes"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/kvorum/kvorum/internal/geohash"
	"github.com/kvorum/kvorum/internal/redisnum"
)

// GEO commands, a port of Redis 7.0's geo.c (package geohash has the
// arithmetic). A geospatial index is a sorted set whose scores are 52-bit
// interleaved geohashes; GEOADD is ZADD with computed scores.
//
// A search (GEOSEARCH, GEORADIUS*) reads the 9 score ranges of the center
// cell and its neighbours, in Redis's order (center, N, S, E, W, NE, NW,
// SE, SW; each range in index order), keeps the members inside the shape
// and sorts them by distance when asked (ASC/DESC, or COUNT without ANY):
// the unsorted order is Redis's, and members at equal distances, whose
// order Redis leaves to qsort, keep the index order (a stable sort), so
// STORE results are the same on every replica.
//
// GEORADIUS and GEORADIUSBYMEMBER are writes for Redis (STORE); without a
// STORE or STOREDIST option they are served as reads (cmdDef.readOnly).
//
// Errors: Redis checks the source key's type first, then parses the
// arguments, looking members up as it meets them. The read forms do
// exactly that at run time. The write forms (GEOSEARCHSTORE, GEORADIUS*
// with STORE) are also parsed by the check function so that a command that
// fails whatever the data never reaches the log; its error text is the one
// Redis gives for an existing sorted set holding the members named (with a
// wrong type or a missing member Redis may report that first). Where a
// missing key changes the error (GEORADIUSBYMEMBER does not parse its
// radius then), the command runs and the data decides.
//
// Replies: distances are bulk strings with 4 decimals in both protocols
// (fixedpoint_d2string), WITHHASH an integer. Coordinates (GEOPOS,
// WITHCOORD) are sent by Redis as the "%.17Lf" digits of the long double
// (trailing zeros removed): a RESP3 double, a RESP2 bulk string. kvorum
// replies a Double holding the number that text stands for (Float) and the
// text itself (Str), which the resp layer and Lua's RESP2 conversion send
// as is, so both protocols get Redis's bytes (0.00000268220901489, not
// %.17g's 2.6822090148900001e-06).

func init() {
	const g = "geo"
	defParsed("geoadd", -5, "write denyoom", 1, 1, 1, g, "Add one or more geospatial items in the geospatial index represented using a sorted set", parseGeoAdd, cmdGeoAdd)
	defParsed("geodist", -4, "readonly", 1, 1, 1, g, "Returns the distance between two members of a geospatial index", parseGeoDist, cmdGeoDist)
	def("geohash", -2, "readonly", 1, 1, 1, g, "Returns members of a geospatial index as standard geohash strings", cmdGeoHash, nil)
	def("geopos", -2, "readonly", 1, 1, 1, g, "Returns longitude and latitude of members of a geospatial index", cmdGeoPos, nil)
	// A search is parsed when it runs, after the source key's type check;
	// checkGeoSearch refuses early the writes that fail whatever the data.
	def("georadius", -6, "write denyoom movablekeys", 1, 1, 1, g, "Query a sorted set representing a geospatial index to fetch members matching a given maximum distance from a point", cmdGeoSearch, checkGeoSearch)
	def("georadiusbymember", -5, "write denyoom movablekeys", 1, 1, 1, g, "Query a sorted set representing a geospatial index to fetch members matching a given maximum distance from a member", cmdGeoSearch, checkGeoSearch)
	def("georadius_ro", -6, "readonly", 1, 1, 1, g, "A read-only variant for GEORADIUS", cmdGeoSearch, nil)
	def("georadiusbymember_ro", -5, "readonly", 1, 1, 1, g, "A read-only variant for GEORADIUSBYMEMBER", cmdGeoSearch, nil)
	def("geosearch", -7, "readonly", 1, 1, 1, g, "Query a sorted set representing a geospatial index to fetch members inside an area of a box or a circle.", cmdGeoSearch, nil)
	def("geosearchstore", -8, "write denyoom", 1, 2, 1, g, "Query a sorted set representing a geospatial index to fetch members inside an area of a box or a circle, and store the result in another key.", cmdGeoSearch, checkGeoSearch)
	notStore := func(args [][]byte) bool { return !geoHasStore(args) }
	table["georadius"].readOnly = notStore
	table["georadiusbymember"].readOnly = notStore
}

// Redis error texts of the GEO commands.
var (
	errGeoMember = Error("ERR could not decode requested zset member")
	errGeoCount  = Error("ERR COUNT must be > 0")
	errGeoAny    = Error("ERR the ANY argument requires COUNT argument")
)

// ---------------------------------------------------------------------------
// GEOADD

// parseGeoAdd parses GEOADD key [NX|XX] [CH] lon lat member ... as Redis
// does before it looks at the key, and returns the ZADD arguments it
// stands for.
func parseGeoAdd(args [][]byte) ([][]byte, Reply, bool) {
	zargs := [][]byte{[]byte("zadd"), args[1]}
	nx, xx := false, false
	i := 2
opts:
	for ; i < len(args); i++ {
		switch {
		case geohash.Eq(args[i], "nx"):
			nx = true
			zargs = append(zargs, []byte("nx"))
		case geohash.Eq(args[i], "xx"):
			xx = true
			zargs = append(zargs, []byte("xx"))
		case geohash.Eq(args[i], "ch"):
			zargs = append(zargs, []byte("ch"))
		default:
			break opts
		}
	}
	if (len(args)-i)%3 != 0 || (xx && nx) {
		return nil, errSyntax, false
	}
	if i == len(args) {
		return nil, errSyntax, false // ZADD's: no score-member pair
	}
	for ; i < len(args); i += 3 {
		lon, lat, r, ok := geohash.ParseLonLat(args[i], args[i+1])
		if !ok {
			return nil, r, false
		}
		zargs = append(zargs, strconv.AppendUint(nil, geohash.EncodeScore(lon, lat), 10), args[i+2])
	}
	return zargs, Reply{}, true
}

func cmdGeoAdd(x *ctx, _ [][]byte, zargs [][]byte) Reply { return cmdZAdd(x, zargs) }

// ---------------------------------------------------------------------------
// GEOPOS, GEODIST, GEOHASH

// geoMemberPos returns the position of member in z; ok=false if it is not
// a member.
func geoMemberPos(z *zview, member []byte) (lon, lat float64, ok bool, err error) {
	score, ok, err := z.score(member)
	if err != nil || !ok {
		return 0, 0, false, err
	}
	lon, lat = geohash.DecodeScore(score)
	return lon, lat, true, nil
}

func cmdGeoPos(x *ctx, args [][]byte) Reply {
	return geoEachMember(x, args, NilArray, func(lon, lat float64) Reply {
		return Array(geohash.CoordReply(lon), geohash.CoordReply(lat))
	})
}

// geoEachMember is GEOPOS and GEOHASH: one reply per member args[2:] of
// the sorted set args[1], made by fn from its position, or missing.
func geoEachMember(x *ctx, args [][]byte, missing Reply, fn func(lon, lat float64) Reply) Reply {
	c, exists, err := x.loadColl(args[1], typeZSet)
	if err != nil {
		return errReply(err)
	}
	out := make([]Reply, len(args)-2)
	var z *zview
	if exists {
		z = x.zview(c)
	}
	for i, m := range args[2:] {
		out[i] = missing
		if !exists {
			continue
		}
		lon, lat, ok, err := geoMemberPos(z, m)
		if err != nil {
			return errReply(err)
		}
		if ok {
			out[i] = fn(lon, lat)
		}
	}
	return Array(out...)
}

// parseGeoDist reads GEODIST's unit: the factor converting it to meters.
func parseGeoDist(args [][]byte) (float64, Reply, bool) {
	switch len(args) {
	case 4:
		return 1, Reply{}, true
	case 5:
		return geohash.ParseUnit(args[4])
	}
	return 0, errSyntax, false
}

func cmdGeoDist(x *ctx, args [][]byte, toMeters float64) Reply {
	c, exists, err := x.loadColl(args[1], typeZSet)
	if err != nil || !exists {
		return errOr(err, Nil)
	}
	z := x.zview(c)
	lon1, lat1, ok1, err := geoMemberPos(z, args[2])
	if err != nil || !ok1 {
		return errOr(err, Nil)
	}
	lon2, lat2, ok2, err := geoMemberPos(z, args[3])
	if err != nil || !ok2 {
		return errOr(err, Nil)
	}
	return Bulk(redisnum.FormatFixed4(geohash.Distance(lon1, lat1, lon2, lat2) / toMeters))
}

func cmdGeoHash(x *ctx, args [][]byte) Reply {
	return geoEachMember(x, args, Nil, func(lon, lat float64) Reply { return Bulk(geohash.Base32(lon, lat)) })
}

// ---------------------------------------------------------------------------
// GEOSEARCH, GEOSEARCHSTORE, GEORADIUS, GEORADIUSBYMEMBER and their _RO forms

// Variants of georadiusGeneric.
const (
	geoRadiusCoords = 1 << iota // around coordinates
	geoRadiusMember             // around a member
	geoNoStore                  // no STORE/STOREDIST option
	geoSearchCmd                // GEOSEARCH's arguments
	geoSearchStore              // GEOSEARCHSTORE: the STOREDIST flag
)

const (
	geoSortNone = iota
	geoSortAsc
	geoSortDesc
)

// geoVariant returns the command's flags and the position of its source key.
func geoVariant(name []byte) (flags, src int) {
	switch strings.ToLower(string(name)) {
	case "georadius":
		return geoRadiusCoords, 1
	case "georadiusbymember":
		return geoRadiusMember, 1
	case "georadius_ro":
		return geoRadiusCoords | geoNoStore, 1
	case "georadiusbymember_ro":
		return geoRadiusMember | geoNoStore, 1
	case "geosearchstore":
		return geoSearchCmd | geoSearchStore, 2
	}
	return geoSearchCmd, 1
}

// geoHasStore reports whether a GEORADIUS or GEORADIUSBYMEMBER command has
// a STORE or STOREDIST option with its key, looking where Redis's
// georadiusGetKeys looks: a write.
func geoHasStore(args [][]byte) bool {
	for i := 5; i+1 < len(args); i++ {
		if geohash.Eq(args[i], "store") || geohash.Eq(args[i], "storedist") {
			return true
		}
	}
	return false
}

// geoQuery is a parsed search.
type geoQuery struct {
	shape                         geohash.Shape
	store                         []byte // nil: reply
	storeDist                     bool
	withDist, withHash, withCoord bool
	any                           bool
	sort                          int
	count                         int64 // 0: all
}

// geoSource is what parsing needs of the source key: whether it exists
// (as a sorted set) and the positions of its members.
type geoSource struct {
	exists bool
	pos    func(member []byte) (lon, lat float64, ok bool, err error)
}

// parseGeoQuery parses a search as georadiusGeneric does after the type
// check: in order, the first error wins, members are looked up (src.pos)
// where Redis looks them up.
func parseGeoQuery(args [][]byte, flags int, src geoSource) (q geoQuery, r Reply, ok bool) {
	memberPos := func(m []byte) (Reply, bool) {
		lon, lat, found, err := src.pos(m)
		if err != nil {
			return errReply(err), false
		}
		if !found {
			return errGeoMember, false
		}
		q.shape.Lon, q.shape.Lat = lon, lat
		return Reply{}, true
	}
	var base int
	switch {
	case flags&geoRadiusCoords != 0:
		base = 6
		q.shape.Type = geohash.Circle
		if q.shape.Lon, q.shape.Lat, r, ok = geohash.ParseLonLat(args[2], args[3]); !ok {
			return q, r, false
		}
		if r, ok = q.shape.ParseDistance(args[4], args[5]); !ok {
			return q, r, false
		}
	case flags&geoRadiusMember != 0 && !src.exists:
		// No source key: the options are still parsed, for the reply.
		base = 5
	case flags&geoRadiusMember != 0:
		base = 5
		q.shape.Type = geohash.Circle
		if r, ok = memberPos(args[2]); !ok {
			return q, r, false
		}
		if r, ok = q.shape.ParseDistance(args[3], args[4]); !ok {
			return q, r, false
		}
	default:
		base = 2
		if flags&geoSearchStore != 0 {
			base = 3
			q.store = args[1]
		}
	}

	search := flags&geoSearchCmd != 0
	canStore := flags&(geoNoStore|geoSearchCmd) == 0
	var fromMember, fromLoc, byRadius, byBox bool
	remaining := len(args) - base
	for i := 0; i < remaining; i++ {
		a := args[base+i]
		switch {
		case geohash.Eq(a, "withdist"):
			q.withDist = true
		case geohash.Eq(a, "withhash"):
			q.withHash = true
		case geohash.Eq(a, "withcoord"):
			q.withCoord = true
		case geohash.Eq(a, "any"):
			q.any = true
		case geohash.Eq(a, "asc"):
			q.sort = geoSortAsc
		case geohash.Eq(a, "desc"):
			q.sort = geoSortDesc
		case geohash.Eq(a, "count") && i+1 < remaining:
			n, ok := redisnum.ParseInt(args[base+i+1])
			if !ok {
				return q, errNotInt, false
			}
			if n <= 0 {
				return q, errGeoCount, false
			}
			q.count = n
			i++
		case geohash.Eq(a, "store") && i+1 < remaining && canStore:
			q.store, q.storeDist = args[base+i+1], false
			i++
		case geohash.Eq(a, "storedist") && i+1 < remaining && canStore:
			q.store, q.storeDist = args[base+i+1], true
			i++
		case geohash.Eq(a, "storedist") && search && flags&geoSearchStore != 0:
			q.storeDist = true
		case geohash.Eq(a, "frommember") && i+1 < remaining && search && !fromLoc:
			if src.exists {
				if r, ok = memberPos(args[base+i+1]); !ok {
					return q, r, false
				}
			}
			fromMember = true
			i++
		case geohash.Eq(a, "fromlonlat") && i+2 < remaining && search && !fromMember:
			if q.shape.Lon, q.shape.Lat, r, ok = geohash.ParseLonLat(args[base+i+1], args[base+i+2]); !ok {
				return q, r, false
			}
			fromLoc = true
			i += 2
		case geohash.Eq(a, "byradius") && i+2 < remaining && search && !byBox:
			if r, ok = q.shape.ParseDistance(args[base+i+1], args[base+i+2]); !ok {
				return q, r, false
			}
			q.shape.Type = geohash.Circle
			byRadius = true
			i += 2
		case geohash.Eq(a, "bybox") && i+3 < remaining && search && !byRadius:
			if r, ok = q.shape.ParseBox(args[base+i+1], args[base+i+2], args[base+i+3]); !ok {
				return q, r, false
			}
			q.shape.Type = geohash.Box
			byBox = true
			i += 3
		default:
			return q, errSyntax, false
		}
	}

	if q.store != nil && (q.withDist || q.withHash || q.withCoord) {
		what := "STORE option in GEORADIUS"
		if flags&geoSearchStore != 0 {
			what = "GEOSEARCHSTORE"
		}
		return q, Error("ERR " + what + " is not compatible with WITHDIST, WITHHASH and WITHCOORD options"), false
	}
	if search && !fromMember && !fromLoc {
		return q, Error("ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for " + string(args[0])), false
	}
	if search && !byRadius && !byBox {
		return q, Error("ERR exactly one of BYRADIUS and BYBOX can be specified for " + string(args[0])), false
	}
	if q.any && q.count == 0 {
		return q, errGeoAny, false
	}
	return q, Reply{}, true
}

// checkGeoSearch parses the write forms (GEOSEARCHSTORE; GEORADIUS and
// GEORADIUSBYMEMBER with STORE) before they are proposed, with the source
// key assumed to be a sorted set holding every member it is asked for.
// A command is refused only if Redis fails it whatever the data, with the
// same error if the key is missing: GEORADIUSBYMEMBER does not even parse
// its radius when the key is missing (Redis then deletes the destination
// and replies 0). The read forms are checked when they run, in Redis's
// order (the key's type first).
func checkGeoSearch(args [][]byte) (Reply, bool) {
	flags, _ := geoVariant(args[0])
	if flags&geoSearchStore == 0 && !geoHasStore(args) {
		return Reply{}, true
	}
	found := func([]byte) (float64, float64, bool, error) { return 0, 0, true, nil }
	_, r, ok := parseGeoQuery(args, flags, geoSource{exists: true, pos: found})
	if ok {
		return Reply{}, true
	}
	if flags&geoRadiusMember != 0 {
		// Without the key Redis skips the radius: unless that fails the
		// same way, the data decides (run replies the error, if any).
		if _, r2, ok := parseGeoQuery(args, flags, geoSource{exists: false, pos: found}); ok || !bytes.Equal(r.Str, r2.Str) {
			return Reply{}, true
		}
	}
	return r, false
}

// geoPoint is a member found by a search.
type geoPoint struct {
	member   []byte
	score    float64
	lon, lat float64
	dist     float64 // meters
}

// geoPointsInRange is geoGetPointsInRange: appends the members of scores
// [lo, hi) that are inside the shape, stopping once there are limit
// points (0: no limit).
func geoPointsInRange(z *zview, lo, hi float64, s *geohash.Shape, pts []geoPoint, limit int) ([]geoPoint, error) {
	err := z.walk(zPos(redisnum.Sortable(lo)), false, func(u uint64, m []byte) bool {
		score := redisnum.Unsortable(u)
		if !(score < hi) {
			return false
		}
		lon, lat := geohash.DecodeScore(score)
		if d, ok := s.Within(lon, lat); ok {
			pts = append(pts, geoPoint{member: bytes.Clone(m), score: score, lon: lon, lat: lat, dist: d})
		}
		return limit == 0 || len(pts) < limit
	})
	return pts, err
}

// geoMembersOfAllNeighbors is membersOfAllNeighbors: the members of the 9
// cells (fewer: zero cells are skipped, and so is a cell equal to the one
// searched just before it, as Redis does for huge radiuses).
func geoMembersOfAllNeighbors(z *zview, r *geohash.Areas, s *geohash.Shape, limit int) ([]geoPoint, error) {
	var pts []geoPoint
	last := 0
	for i, cell := range r.Cells {
		if cell.IsZero() {
			continue
		}
		if last != 0 && cell == r.Cells[last] {
			continue
		}
		if limit != 0 && len(pts) > 0 && len(pts) >= limit {
			break
		}
		lo := cell.Align52()
		cell.Bits++
		hi := cell.Align52()
		var err error
		if pts, err = geoPointsInRange(z, float64(lo), float64(hi), s, pts, limit); err != nil {
			return nil, err
		}
		last = i
	}
	return pts, nil
}

func cmdGeoSearch(x *ctx, args [][]byte) Reply {
	flags, si := geoVariant(args[0])
	c, exists, err := x.loadColl(args[si], typeZSet)
	if err != nil {
		return errReply(err)
	}
	var z *zview
	if exists {
		z = x.zview(c)
	}
	q, r, ok := parseGeoQuery(args, flags, geoSource{exists: exists, pos: func(m []byte) (float64, float64, bool, error) {
		return geoMemberPos(z, m)
	}})
	if !ok {
		return r
	}
	if q.store != nil && x.w == nil {
		return Error("ERR internal: " + strings.ToUpper(string(args[0])) + " with a store key sent to Read")
	}
	if !exists {
		if q.store != nil {
			return x.zStore(q.store, nil, "") // deletes it, replies 0
		}
		return Array()
	}
	// COUNT without ANY returns the nearest members.
	if q.count != 0 && q.sort == geoSortNone && !q.any {
		q.sort = geoSortAsc
	}
	areas := geohash.AreasByShape(&q.shape)
	limit := 0
	if q.any {
		limit = int(min(q.count, math.MaxInt32))
	}
	pts, err := geoMembersOfAllNeighbors(z, &areas, &q.shape, limit)
	if err != nil {
		return errReply(err)
	}
	if len(pts) == 0 && q.store == nil {
		return Array()
	}
	switch q.sort {
	case geoSortAsc:
		sort.SliceStable(pts, func(i, j int) bool { return pts[i].dist < pts[j].dist })
	case geoSortDesc:
		sort.SliceStable(pts, func(i, j int) bool { return pts[i].dist > pts[j].dist })
	}
	if q.count != 0 && int64(len(pts)) > q.count {
		pts = pts[:q.count]
	}
	if q.store != nil {
		ents := make([]zent, 0, len(pts))
		seen := make(map[string]bool, len(pts))
		for _, p := range pts {
			if seen[string(p.member)] {
				continue // cannot happen (the cells are distinct); Redis would assert
			}
			seen[string(p.member)] = true
			score := p.score
			if q.storeDist {
				score = p.dist / q.shape.Conv
			}
			ents = append(ents, zent{member: p.member, score: score})
		}
		ev := "georadiusstore"
		if flags&geoSearchCmd != 0 {
			ev = "geosearchstore"
		}
		return x.zStore(q.store, ents, ev)
	}
	out := make([]Reply, len(pts))
	for i, p := range pts {
		if !q.withDist && !q.withHash && !q.withCoord {
			out[i] = Bulk(p.member)
			continue
		}
		el := []Reply{Bulk(p.member)}
		if q.withDist {
			el = append(el, Bulk(redisnum.FormatFixed4(p.dist/q.shape.Conv)))
		}
		if q.withHash {
			el = append(el, Int(int64(p.score)))
		}
		if q.withCoord {
			el = append(el, Array(geohash.CoordReply(p.lon), geohash.CoordReply(p.lat)))
		}
		out[i] = Array(el...)
	}
	return Array(out...)
}

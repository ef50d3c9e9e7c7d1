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
	// geohash.CheckSearch refuses early the writes that fail whatever the data.
	def("georadius", -6, "write denyoom movablekeys", 1, 1, 1, g, "Query a sorted set representing a geospatial index to fetch members matching a given maximum distance from a point", cmdGeoSearch, geohash.CheckSearch)
	def("georadiusbymember", -5, "write denyoom movablekeys", 1, 1, 1, g, "Query a sorted set representing a geospatial index to fetch members matching a given maximum distance from a member", cmdGeoSearch, geohash.CheckSearch)
	def("georadius_ro", -6, "readonly", 1, 1, 1, g, "A read-only variant for GEORADIUS", cmdGeoSearch, nil)
	def("georadiusbymember_ro", -5, "readonly", 1, 1, 1, g, "A read-only variant for GEORADIUSBYMEMBER", cmdGeoSearch, nil)
	def("geosearch", -7, "readonly", 1, 1, 1, g, "Query a sorted set representing a geospatial index to fetch members inside an area of a box or a circle.", cmdGeoSearch, nil)
	def("geosearchstore", -8, "write denyoom", 1, 2, 1, g, "Query a sorted set representing a geospatial index to fetch members inside an area of a box or a circle, and store the result in another key.", cmdGeoSearch, geohash.CheckSearch)
	notStore := func(args [][]byte) bool { return !geohash.HasStore(args) }
	table["georadius"].readOnly = notStore
	table["georadiusbymember"].readOnly = notStore
}

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
	flags, si := geohash.Variant(args[0])
	c, exists, err := x.loadColl(args[si], typeZSet)
	if err != nil {
		return errReply(err)
	}
	var z *zview
	if exists {
		z = x.zview(c)
	}
	q, r, ok := geohash.ParseQuery(args, flags, geohash.Source{Exists: exists, Fail: errReply, Pos: func(m []byte) (float64, float64, bool, error) {
		return geoMemberPos(z, m)
	}})
	if !ok {
		return r
	}
	if q.Store != nil && x.w == nil {
		return Error("ERR internal: " + strings.ToUpper(string(args[0])) + " with a store key sent to Read")
	}
	if !exists {
		if q.Store != nil {
			return x.zStore(q.Store, nil, "") // deletes it, replies 0
		}
		return Array()
	}
	// COUNT without ANY returns the nearest members.
	if q.Count != 0 && q.Sort == geohash.SortNone && !q.Any {
		q.Sort = geohash.SortAsc
	}
	areas := geohash.AreasByShape(&q.Shape)
	limit := 0
	if q.Any {
		limit = int(min(q.Count, math.MaxInt32))
	}
	pts, err := geoMembersOfAllNeighbors(z, &areas, &q.Shape, limit)
	if err != nil {
		return errReply(err)
	}
	if len(pts) == 0 && q.Store == nil {
		return Array()
	}
	switch q.Sort {
	case geohash.SortAsc:
		sort.SliceStable(pts, func(i, j int) bool { return pts[i].dist < pts[j].dist })
	case geohash.SortDesc:
		sort.SliceStable(pts, func(i, j int) bool { return pts[i].dist > pts[j].dist })
	}
	if q.Count != 0 && int64(len(pts)) > q.Count {
		pts = pts[:q.Count]
	}
	if q.Store != nil {
		ents := make([]zent, 0, len(pts))
		seen := make(map[string]bool, len(pts))
		for _, p := range pts {
			if seen[string(p.member)] {
				continue // cannot happen (the cells are distinct); Redis would assert
			}
			seen[string(p.member)] = true
			score := p.score
			if q.StoreDist {
				score = p.dist / q.Shape.Conv
			}
			ents = append(ents, zent{member: p.member, score: score})
		}
		ev := "georadiusstore"
		if flags&geohash.SearchCmd != 0 {
			ev = "geosearchstore"
		}
		return x.zStore(q.Store, ents, ev)
	}
	out := make([]Reply, len(pts))
	for i, p := range pts {
		if !q.WithDist && !q.WithHash && !q.WithCoord {
			out[i] = Bulk(p.member)
			continue
		}
		el := []Reply{Bulk(p.member)}
		if q.WithDist {
			el = append(el, Bulk(redisnum.FormatFixed4(p.dist/q.Shape.Conv)))
		}
		if q.WithHash {
			el = append(el, Int(int64(p.score)))
		}
		if q.WithCoord {
			el = append(el, Array(geohash.CoordReply(p.lon), geohash.CoordReply(p.lat)))
		}
		out[i] = Array(el...)
	}
	return Array(out...)
}

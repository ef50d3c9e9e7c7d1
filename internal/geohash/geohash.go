// Package geohash is the geometry of Redis's GEO commands, following
// Redis 7.0's geohash.c and geohash_helper.c step for step so that scores,
// search areas and distances come out bit for bit the same: a position is
// two 26-bit fixed-point offsets (latitude in the even bits, longitude in
// the odd bits) interleaved into a 52-bit integer, the sorted set score
// (EncodeScore, DecodeScore). A search covers a Shape (a circle or a box)
// with the center cell and its 8 neighbours at a precision that fits
// (AreasByShape); Shape.Within keeps the positions inside it, at their
// haversine Distance from the center. Base32 is the standard geohash
// text GEOHASH replies.
//
// Floating-point expressions keep C's evaluation order; explicit float64
// conversions forbid the compiler to fuse a multiplication and an addition
// (Go may use FMA on some platforms, gcc on x86-64 does not), and the
// constants derived from pi are computed in float64 arithmetic as C does.
//
// sin, cos and asin: Go's math package and glibc's libm disagree on the
// last bit of 10 to 30% of the results (Go's are often 1 ulp off), which
// shows in full-precision distances (GEOSEARCHSTORE ... STOREDIST).
// The package computes them correctly rounded instead (double-double
// arithmetic: sin, cos, asin); glibc 2.36 is correctly rounded but for
// about 0.1% of arguments, so Redis's stored distances match to the last
// bit nearly always (4-decimal replies practically always). The results
// do not depend on the platform either, which replicas need: no fused
// operations but math.FMA's exact ones, and Go's math functions only give
// a starting point (asin) or a pre-filter with a wide margin
// (surelyBeyond).
//
// The package depends on nothing but the standard library.
package geohash

import (
	"math"
)

// The limits of a score's position (EPSG:900913: no poles) and its
// precision, in bits per coordinate.
const (
	StepMax = 26 // 26*2 = 52 bits
	LatMin  = -85.05112878
	LatMax  = 85.05112878
	LongMin = -180.0
	LongMax = 180.0
)

const (
	earthRadius = 6372797.560856 // Earth's quadratic mean radius for WGS-84, meters
	mercatorMax = 20037726.37    // MERCATOR_MAX
)

// pi is M_PI as a double; degToRad is D_R (M_PI / 180.0) computed in double
// precision as gcc folds it.
var (
	pi       = math.Pi
	degToRad = pi / 180.0
)

func degRad(ang float64) float64 { return ang * degToRad }
func radDeg(ang float64) float64 { return ang / degToRad }

// Hash is GeoHashBits: the interleaved bits of a cell and its precision
// in bits per coordinate. The zero value is "no cell" (GZERO).
type Hash struct {
	Bits uint64
	Step uint8
}

// IsZero reports whether h is "no cell".
func (h Hash) IsZero() bool { return h.Bits == 0 && h.Step == 0 }

// interval is GeoHashRange.
type interval struct{ min, max float64 }

func (r interval) isZero() bool { return r.max == 0 && r.min == 0 }

// area is GeoHashArea: a cell and the coordinates it covers.
type area struct {
	hash      Hash
	long, lat interval
}

// The coordinate ranges of Redis's scores (EPSG:900913 limits: no poles).
var (
	longRange = interval{LongMin, LongMax}
	latRange  = interval{LatMin, LatMax}
)

// interleave spreads xlo over the even bits and ylo over the odd bits.
func interleave(xlo, ylo uint32) uint64 {
	b := [...]uint64{0x5555555555555555, 0x3333333333333333, 0x0F0F0F0F0F0F0F0F, 0x00FF00FF00FF00FF, 0x0000FFFF0000FFFF}
	s := [...]uint{1, 2, 4, 8, 16}
	x, y := uint64(xlo), uint64(ylo)
	for i := 4; i >= 0; i-- {
		x = (x | x<<s[i]) & b[i]
		y = (y | y<<s[i]) & b[i]
	}
	return x | y<<1
}

// deinterleave undoes interleave: the even bits in the low 32 bits
// of the result, the odd bits in the high 32.
func deinterleave(v uint64) uint64 {
	b := [...]uint64{0x5555555555555555, 0x3333333333333333, 0x0F0F0F0F0F0F0F0F, 0x00FF00FF00FF00FF, 0x0000FFFF0000FFFF, 0x00000000FFFFFFFF}
	s := [...]uint{0, 1, 2, 4, 8, 16}
	x, y := v, v>>1
	for i := range b {
		x = (x | x>>s[i]) & b[i]
		y = (y | y>>s[i]) & b[i]
	}
	return x | y<<32
}

// encode is geohashEncode: ok=false for an invalid step or a position
// outside Redis's limits or the given ranges.
func encode(longR, latR interval, lon, lat float64, step uint8) (Hash, bool) {
	if step > 32 || step == 0 || latR.isZero() || longR.isZero() {
		return Hash{}, false
	}
	if lon > LongMax || lon < LongMin || lat > LatMax || lat < LatMin {
		return Hash{}, false
	}
	h := Hash{Step: step}
	if lat < latR.min || lat > latR.max || lon < longR.min || lon > longR.max {
		return h, false
	}
	latOff := (lat - latR.min) / (latR.max - latR.min)
	longOff := (lon - longR.min) / (longR.max - longR.min)
	scale := float64(uint64(1) << step)
	latOff *= scale
	longOff *= scale
	h.Bits = interleave(uint32(latOff), uint32(longOff))
	return h, true
}

// decode is geohashDecode: the area a cell covers.
func decode(longR, latR interval, h Hash) (area, bool) {
	if h.IsZero() || latR.isZero() || longR.isZero() {
		return area{}, false
	}
	sep := deinterleave(h.Bits) // [LAT][LONG]
	latScale := latR.max - latR.min
	longScale := longR.max - longR.min
	ilato := uint32(sep)
	ilono := uint32(sep >> 32)
	div := float64(uint64(1) << h.Step)
	a := area{hash: h}
	a.lat.min = latR.min + float64(float64(float64(ilato)/div)*latScale)
	a.lat.max = latR.min + float64(float64(float64(ilato+1)/div)*latScale)
	a.long.min = longR.min + float64(float64(float64(ilono)/div)*longScale)
	a.long.max = longR.min + float64(float64(float64(ilono+1)/div)*longScale)
	return a, true
}

// areaCenter is geohashDecodeAreaToLongLat: the center of the area,
// clamped to Redis's limits.
func areaCenter(a area) (lon, lat float64) {
	lon = (a.long.min + a.long.max) / 2
	lon = min(max(lon, LongMin), LongMax)
	lat = (a.lat.min + a.lat.max) / 2
	lat = min(max(lat, LatMin), LatMax)
	return lon, lat
}

// scoreBits converts a score to the uint64 C's (uint64_t) cast gives on
// x86-64 (gcc): truncation; below 2^63 through cvttsd2si, whose result
// out of range is 1<<63; from 2^63 on, that of score-2^63 with the top bit
// flipped. Spelled out, so that every platform computes the same.
func scoreBits(score float64) uint64 {
	const indefinite = uint64(1) << 63
	switch {
	case score >= -(1<<63) && score < 1<<63:
		return uint64(int64(score))
	case score >= 1<<63 && score < 1<<64:
		return uint64(int64(score-(1<<63))) ^ 1<<63
	case score >= 1<<64:
		return indefinite ^ 1<<63
	}
	return indefinite // below -2^63, -inf (NaN is never a score)
}

// DecodeScore is decodeGeohash: the position a sorted set score stands
// for. It cannot fail for a real score (the step is never 0).
func DecodeScore(score float64) (lon, lat float64) {
	a, _ := decode(longRange, latRange, Hash{Bits: scoreBits(score), Step: StepMax})
	return areaCenter(a)
}

// EncodeScore is the score GEOADD gives to a (valid) position.
func EncodeScore(lon, lat float64) uint64 {
	h, _ := encode(longRange, latRange, lon, lat, StepMax)
	return h.Align52()
}

// Align52 is geohashAlign52Bits: the cell's bits as the high bits of a
// 52-bit score, the first score of the cell's range.
func (h Hash) Align52() uint64 { return h.Bits << (52 - uint(h.Step)*2) }

// Bits of the interleaved coordinates in Hash.Bits: longitude (x) in the
// odd positions, latitude (y) in the even ones.
const (
	xBits = 0xaaaaaaaaaaaaaaaa
	yBits = 0x5555555555555555
)

// move is geohash_move_x (mask xBits) and geohash_move_y (mask yBits): it
// moves h by d (-1, 0 or +1) cells along the coordinate whose bits are in
// mask, wrapping around at the edges.
func move(h *Hash, d int, mask uint64) {
	if d == 0 {
		return
	}
	c := h.Bits & mask // the coordinate that moves
	other := h.Bits &^ mask
	zz := ^mask >> (64 - uint(h.Step)*2)
	if d > 0 {
		c = c + (zz + 1)
	} else {
		c = c | zz
		c = c - (zz + 1)
	}
	c &= mask >> (64 - uint(h.Step)*2)
	h.Bits = c | other
}

// Indexes of the cells of a search (Areas.Cells), in the order Redis's
// membersOfAllNeighbors visits them.
const (
	Center = iota
	North
	South
	East
	West
	NorthEast
	NorthWest
	SouthEast
	SouthWest
)

// neighbors is geohashNeighbors: fills cells[1:] around cells[0].
func neighbors(cells *[9]Hash) {
	moves := [9][2]int{
		North: {0, 1}, South: {0, -1}, East: {1, 0}, West: {-1, 0},
		NorthEast: {1, 1}, NorthWest: {-1, 1}, SouthEast: {1, -1}, SouthWest: {-1, -1},
	}
	for i := 1; i < 9; i++ {
		cells[i] = cells[0]
		move(&cells[i], moves[i][0], xBits)
		move(&cells[i], moves[i][1], yBits)
	}
}

// estimateSteps is geohashEstimateStepsByRadius: the precision of the
// 9 cells of a search.
func estimateSteps(rangeMeters, lat float64) uint8 {
	if rangeMeters == 0 {
		return 26
	}
	step := 1
	for rangeMeters < mercatorMax {
		rangeMeters *= 2
		step++
	}
	step -= 2 // make sure range is included in most of the base cases
	// Wider range towards the poles.
	if lat > 66 || lat < -66 {
		step--
		if lat > 80 || lat < -80 {
			step--
		}
	}
	return uint8(min(max(step, 1), 26))
}

// ShapeType says which figure a Shape is.
type ShapeType uint8

// Search shapes (GeoShape's type).
const (
	Circle ShapeType = 1
	Box    ShapeType = 2
)

// Shape is GeoShape: a circle or a box around a center, in the unit Conv
// converts to meters.
type Shape struct {
	Type          ShapeType
	Lon, Lat      float64 // the center
	Conv          float64 // meters per unit
	Radius        float64 // Circle
	Width, Height float64 // Box
	bounds        [4]float64
}

// boundingBox is geohashBoundingBox: min lon, min lat, max lon, max lat.
func boundingBox(s *Shape) [4]float64 {
	var height, width float64
	if s.Type == Circle {
		height, width = s.Conv*s.Radius, s.Conv*s.Radius
	} else {
		height, width = s.Conv*(s.Height/2), s.Conv*(s.Width/2)
	}
	latDelta := radDeg(height / earthRadius)
	longDeltaTop := radDeg(width / earthRadius / cos(degRad(s.Lat+latDelta)))
	longDeltaBottom := radDeg(width / earthRadius / cos(degRad(s.Lat-latDelta)))
	var b [4]float64
	if s.Lat < 0 { // southern hemisphere
		b[0], b[2] = s.Lon-longDeltaBottom, s.Lon+longDeltaBottom
	} else {
		b[0], b[2] = s.Lon-longDeltaTop, s.Lon+longDeltaTop
	}
	b[1], b[3] = s.Lat-latDelta, s.Lat+latDelta
	return b
}

// Areas is GeoHashRadius: the cells to search, indexed Center to
// SouthWest (zero cells are to be skipped).
type Areas struct {
	Cells [9]Hash
	area  area
}

// AreasByShape is geohashCalculateAreasByShapeWGS84: the center cell
// and its 8 neighbours at a precision that covers the shape, without the
// neighbours the shape's bounding box does not reach.
func AreasByShape(s *Shape) Areas {
	s.bounds = boundingBox(s)
	minLon, minLat, maxLon, maxLat := s.bounds[0], s.bounds[1], s.bounds[2], s.bounds[3]
	var radiusMeters float64
	if s.Type == Circle {
		radiusMeters = s.Radius
	} else {
		radiusMeters = math.Sqrt(float64(float64((s.Width/2)*(s.Width/2)) + float64((s.Height/2)*(s.Height/2))))
	}
	radiusMeters *= s.Conv
	steps := estimateSteps(radiusMeters, s.Lat)

	var r Areas
	cells := func() {
		r.Cells[0], _ = encode(longRange, latRange, s.Lon, s.Lat, steps)
		neighbors(&r.Cells)
		r.area, _ = decode(longRange, latRange, r.Cells[0])
	}
	cells()

	// Is the step small enough at the limits of the covered area? Near an
	// edge of the center cell one of the neighbours may not reach far
	// enough.
	decrease := false
	north, _ := decode(longRange, latRange, r.Cells[North])
	south, _ := decode(longRange, latRange, r.Cells[South])
	east, _ := decode(longRange, latRange, r.Cells[East])
	west, _ := decode(longRange, latRange, r.Cells[West])
	if north.lat.max < maxLat || south.lat.min > minLat || east.long.max < maxLon || west.long.min > minLon {
		decrease = true
	}
	if steps > 1 && decrease {
		steps--
		cells()
	}

	// Exclude the neighbours the search cannot reach.
	if steps >= 2 {
		zero := func(idx ...int) {
			for _, i := range idx {
				r.Cells[i] = Hash{}
			}
		}
		if r.area.lat.min < minLat {
			zero(South, SouthWest, SouthEast)
		}
		if r.area.lat.max > maxLat {
			zero(North, NorthEast, NorthWest)
		}
		if r.area.long.min < minLon {
			zero(West, SouthWest, NorthWest)
		}
		if r.area.long.max > maxLon {
			zero(East, SouthEast, NorthEast)
		}
	}
	return r
}

// latDistance is geohashGetLatDistance.
func latDistance(lat1d, lat2d float64) float64 {
	return earthRadius * math.Abs(degRad(lat2d)-degRad(lat1d))
}

// Distance is geohashGetDistance: the haversine great circle distance
// in meters.
func Distance(lon1d, lat1d, lon2d, lat2d float64) float64 {
	lon1r := degRad(lon1d)
	lon2r := degRad(lon2d)
	v := sin((lon2r - lon1r) / 2)
	if v == 0 {
		return latDistance(lat1d, lat2d)
	}
	lat1r := degRad(lat1d)
	lat2r := degRad(lat2d)
	u := sin((lat2r - lat1r) / 2)
	a := float64(u*u) + float64(float64(float64(cos(lat1r)*cos(lat2r))*v)*v)
	return 2.0 * earthRadius * asin(math.Sqrt(a))
}

// distanceFast is Distance with Go's math functions: a few ulps
// off, but 10 times faster, for rejecting positions far enough outside a
// shape.
func distanceFast(lon1d, lat1d, lon2d, lat2d float64) float64 {
	lon1r := degRad(lon1d)
	lon2r := degRad(lon2d)
	v := math.Sin((lon2r - lon1r) / 2)
	if v == 0 {
		return latDistance(lat1d, lat2d)
	}
	lat1r := degRad(lat1d)
	lat2r := degRad(lat2d)
	u := math.Sin((lat2r - lat1r) / 2)
	a := float64(u*u) + float64(float64(float64(math.Cos(lat1r)*math.Cos(lat2r))*v)*v)
	return 2.0 * earthRadius * math.Asin(math.Sqrt(a))
}

// surelyBeyond reports whether the distance from (lon1, lat1) to (lon2,
// lat2) is certainly more than limit: the fast distance is beyond it by
// far more than it can be off (it is ill-conditioned only near antipodes,
// where it may be off by about 1e-8 of the distance).
func surelyBeyond(lon1d, lat1d, lon2d, lat2d, limit float64) bool {
	return distanceFast(lon1d, lat1d, lon2d, lat2d) > limit+limit*1e-6+1e-6
}

// Within is geoWithinShape for a decoded position: the distance from the
// shape's center in meters, ok=false if the position is outside the shape.
func (s *Shape) Within(lon, lat float64) (float64, bool) {
	if s.Type == Circle {
		r := s.Radius * s.Conv
		if surelyBeyond(s.Lon, s.Lat, lon, lat, r) {
			return 0, false
		}
		d := Distance(s.Lon, s.Lat, lon, lat)
		return d, !(d > r)
	}
	// geohashGetDistanceIfInRectangle: the latitude distance first (cheaper).
	// (NaN compares as in C: inside.)
	width, height := s.Width*s.Conv, s.Height*s.Conv
	if latDistance(lat, s.Lat) > height/2 {
		return 0, false
	}
	if surelyBeyond(lon, lat, s.Lon, lat, width/2) || Distance(lon, lat, s.Lon, lat) > width/2 {
		return 0, false
	}
	return Distance(s.Lon, s.Lat, lon, lat), true
}

const alphabet = "0123456789bcdefghjkmnpqrstuvwxyz"

// Base32 is the 11-character standard geohash of a position: Redis
// re-encodes it with latitudes in [-90, 90] (its scores use the Mercator
// limits) and, having 52 bits only, ends the string with '0'.
func Base32(lon, lat float64) []byte {
	h, _ := encode(interval{-180, 180}, interval{-90, 90}, lon, lat, 26)
	buf := make([]byte, 11)
	for i := range buf {
		idx := 0
		if i < 10 {
			idx = int(h.Bits>>(52-(uint(i)+1)*5)) & 0x1f
		}
		buf[i] = alphabet[idx]
	}
	return buf
}

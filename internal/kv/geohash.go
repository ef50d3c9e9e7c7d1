package kv

import (
	"math"
	"math/big"
)

// Geohash arithmetic for the GEO commands (geo.go), following Redis 7.0's
// geohash.c and geohash_helper.c step for step so that scores, search
// areas and distances come out bit for bit the same: a position is two
// 26-bit fixed-point offsets (latitude in the even bits, longitude in the
// odd bits) interleaved into a 52-bit integer, the sorted set score.
//
// Floating-point expressions keep C's evaluation order; explicit float64
// conversions forbid the compiler to fuse a multiplication and an addition
// (Go may use FMA on some platforms, gcc on x86-64 does not), and the
// constants derived from pi are computed in float64 arithmetic as C does.
//
// sin, cos and asin: Go's math package and glibc's libm disagree on the
// last bit of 10 to 30% of the results (Go's are often 1 ulp off), which
// shows in full-precision distances (GEOSEARCHSTORE ... STOREDIST).
// kvorum computes them correctly rounded instead (double-double
// arithmetic: geoSin, geoCos, geoAsin); glibc 2.36 is correctly rounded
// but for about 0.1% of arguments, so Redis's stored distances match to
// the last bit nearly always (4-decimal replies practically always). The
// results do not depend on the platform either, which replicas need:
// no fused operations but math.FMA's exact ones, and Go's math functions
// only give a starting point (geoAsin) or a pre-filter with a wide margin
// (geoSurelyBeyond).

const (
	geoStepMax  = 26 // 26*2 = 52 bits
	geoLatMin   = -85.05112878
	geoLatMax   = 85.05112878
	geoLongMin  = -180.0
	geoLongMax  = 180.0
	geoEarthR   = 6372797.560856 // Earth's quadratic mean radius for WGS-84, meters
	geoMercator = 20037726.37    // MERCATOR_MAX
)

// geoPi is M_PI as a double; geoDR is D_R (M_PI / 180.0) computed in double
// precision as gcc folds it.
var (
	geoPi = math.Pi
	geoDR = geoPi / 180.0
)

func geoDegRad(ang float64) float64 { return ang * geoDR }
func geoRadDeg(ang float64) float64 { return ang / geoDR }

// geoHashBits is GeoHashBits: the interleaved bits of a cell and its
// precision in bits per coordinate. The zero value is "no cell" (GZERO).
type geoHashBits struct {
	bits uint64
	step uint8
}

func (h geoHashBits) isZero() bool { return h.bits == 0 && h.step == 0 }

// geoRange is GeoHashRange.
type geoRange struct{ min, max float64 }

func (r geoRange) isZero() bool { return r.max == 0 && r.min == 0 }

// geoArea is GeoHashArea: a cell and the coordinates it covers.
type geoArea struct {
	hash      geoHashBits
	long, lat geoRange
}

// The coordinate ranges of Redis's scores (EPSG:900913 limits: no poles).
var (
	geoLongRange = geoRange{geoLongMin, geoLongMax}
	geoLatRange  = geoRange{geoLatMin, geoLatMax}
)

// geoInterleave spreads xlo over the even bits and ylo over the odd bits.
func geoInterleave(xlo, ylo uint32) uint64 {
	b := [...]uint64{0x5555555555555555, 0x3333333333333333, 0x0F0F0F0F0F0F0F0F, 0x00FF00FF00FF00FF, 0x0000FFFF0000FFFF}
	s := [...]uint{1, 2, 4, 8, 16}
	x, y := uint64(xlo), uint64(ylo)
	for i := 4; i >= 0; i-- {
		x = (x | x<<s[i]) & b[i]
		y = (y | y<<s[i]) & b[i]
	}
	return x | y<<1
}

// geoDeinterleave undoes geoInterleave: the even bits in the low 32 bits
// of the result, the odd bits in the high 32.
func geoDeinterleave(v uint64) uint64 {
	b := [...]uint64{0x5555555555555555, 0x3333333333333333, 0x0F0F0F0F0F0F0F0F, 0x00FF00FF00FF00FF, 0x0000FFFF0000FFFF, 0x00000000FFFFFFFF}
	s := [...]uint{0, 1, 2, 4, 8, 16}
	x, y := v, v>>1
	for i := range b {
		x = (x | x>>s[i]) & b[i]
		y = (y | y>>s[i]) & b[i]
	}
	return x | y<<32
}

// geoEncode is geohashEncode: ok=false for an invalid step or a position
// outside Redis's limits or the given ranges.
func geoEncode(longR, latR geoRange, lon, lat float64, step uint8) (geoHashBits, bool) {
	if step > 32 || step == 0 || latR.isZero() || longR.isZero() {
		return geoHashBits{}, false
	}
	if lon > geoLongMax || lon < geoLongMin || lat > geoLatMax || lat < geoLatMin {
		return geoHashBits{}, false
	}
	h := geoHashBits{step: step}
	if lat < latR.min || lat > latR.max || lon < longR.min || lon > longR.max {
		return h, false
	}
	latOff := (lat - latR.min) / (latR.max - latR.min)
	longOff := (lon - longR.min) / (longR.max - longR.min)
	scale := float64(uint64(1) << step)
	latOff *= scale
	longOff *= scale
	h.bits = geoInterleave(uint32(latOff), uint32(longOff))
	return h, true
}

// geoDecode is geohashDecode: the area a cell covers.
func geoDecode(longR, latR geoRange, h geoHashBits) (geoArea, bool) {
	if h.isZero() || latR.isZero() || longR.isZero() {
		return geoArea{}, false
	}
	sep := geoDeinterleave(h.bits) // [LAT][LONG]
	latScale := latR.max - latR.min
	longScale := longR.max - longR.min
	ilato := uint32(sep)
	ilono := uint32(sep >> 32)
	div := float64(uint64(1) << h.step)
	a := geoArea{hash: h}
	a.lat.min = latR.min + float64(float64(float64(ilato)/div)*latScale)
	a.lat.max = latR.min + float64(float64(float64(ilato+1)/div)*latScale)
	a.long.min = longR.min + float64(float64(float64(ilono)/div)*longScale)
	a.long.max = longR.min + float64(float64(float64(ilono+1)/div)*longScale)
	return a, true
}

// geoAreaCenter is geohashDecodeAreaToLongLat: the center of the area,
// clamped to Redis's limits.
func geoAreaCenter(a geoArea) (lon, lat float64) {
	lon = (a.long.min + a.long.max) / 2
	lon = min(max(lon, geoLongMin), geoLongMax)
	lat = (a.lat.min + a.lat.max) / 2
	lat = min(max(lat, geoLatMin), geoLatMax)
	return lon, lat
}

// geoScoreBits converts a score to the uint64 C's (uint64_t) cast gives on
// x86-64 (gcc): truncation; below 2^63 through cvttsd2si, whose result
// out of range is 1<<63; from 2^63 on, that of score-2^63 with the top bit
// flipped. Spelled out, so that every platform computes the same.
func geoScoreBits(score float64) uint64 {
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

// geoDecodeScore is decodeGeohash: the position a sorted set score stands
// for. It cannot fail for a real score (the step is never 0).
func geoDecodeScore(score float64) (lon, lat float64) {
	a, _ := geoDecode(geoLongRange, geoLatRange, geoHashBits{bits: geoScoreBits(score), step: geoStepMax})
	return geoAreaCenter(a)
}

// geoEncodeScore is the score GEOADD gives to a (valid) position.
func geoEncodeScore(lon, lat float64) uint64 {
	h, _ := geoEncode(geoLongRange, geoLatRange, lon, lat, geoStepMax)
	return geoAlign52(h)
}

// geoAlign52 is geohashAlign52Bits.
func geoAlign52(h geoHashBits) uint64 { return h.bits << (52 - uint(h.step)*2) }

func geoMoveX(h *geoHashBits, d int) {
	if d == 0 {
		return
	}
	x := h.bits & 0xaaaaaaaaaaaaaaaa
	y := h.bits & 0x5555555555555555
	zz := uint64(0x5555555555555555) >> (64 - uint(h.step)*2)
	if d > 0 {
		x = x + (zz + 1)
	} else {
		x = x | zz
		x = x - (zz + 1)
	}
	x &= 0xaaaaaaaaaaaaaaaa >> (64 - uint(h.step)*2)
	h.bits = x | y
}

func geoMoveY(h *geoHashBits, d int) {
	if d == 0 {
		return
	}
	x := h.bits & 0xaaaaaaaaaaaaaaaa
	y := h.bits & 0x5555555555555555
	zz := uint64(0xaaaaaaaaaaaaaaaa) >> (64 - uint(h.step)*2)
	if d > 0 {
		y = y + (zz + 1)
	} else {
		y = y | zz
		y = y - (zz + 1)
	}
	y &= 0x5555555555555555 >> (64 - uint(h.step)*2)
	h.bits = x | y
}

// Indexes of the cells of a search (geoRadius.cells), in the order Redis's
// membersOfAllNeighbors visits them.
const (
	geoCenter = iota
	geoNorth
	geoSouth
	geoEast
	geoWest
	geoNorthEast
	geoNorthWest
	geoSouthEast
	geoSouthWest
)

// geoNeighbors is geohashNeighbors: fills cells[1:] around cells[0].
func geoNeighbors(cells *[9]geoHashBits) {
	moves := [9][2]int{
		geoNorth: {0, 1}, geoSouth: {0, -1}, geoEast: {1, 0}, geoWest: {-1, 0},
		geoNorthEast: {1, 1}, geoNorthWest: {-1, 1}, geoSouthEast: {1, -1}, geoSouthWest: {-1, -1},
	}
	for i := 1; i < 9; i++ {
		cells[i] = cells[0]
		geoMoveX(&cells[i], moves[i][0])
		geoMoveY(&cells[i], moves[i][1])
	}
}

// geoEstimateSteps is geohashEstimateStepsByRadius: the precision of the
// 9 cells of a search.
func geoEstimateSteps(rangeMeters, lat float64) uint8 {
	if rangeMeters == 0 {
		return 26
	}
	step := 1
	for rangeMeters < geoMercator {
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

// Search shapes (GeoShape).
const (
	geoCircle = 1
	geoBox    = 2
)

// geoShape is GeoShape: a circle or a box around a center, in the unit
// conv converts to meters.
type geoShape struct {
	typ           int
	lon, lat      float64
	conv          float64
	radius        float64 // geoCircle
	width, height float64 // geoBox
	bounds        [4]float64
}

// geoBoundingBox is geohashBoundingBox: min lon, min lat, max lon, max lat.
func geoBoundingBox(s *geoShape) [4]float64 {
	var height, width float64
	if s.typ == geoCircle {
		height, width = s.conv*s.radius, s.conv*s.radius
	} else {
		height, width = s.conv*(s.height/2), s.conv*(s.width/2)
	}
	latDelta := geoRadDeg(height / geoEarthR)
	longDeltaTop := geoRadDeg(width / geoEarthR / geoCos(geoDegRad(s.lat+latDelta)))
	longDeltaBottom := geoRadDeg(width / geoEarthR / geoCos(geoDegRad(s.lat-latDelta)))
	var b [4]float64
	if s.lat < 0 { // southern hemisphere
		b[0], b[2] = s.lon-longDeltaBottom, s.lon+longDeltaBottom
	} else {
		b[0], b[2] = s.lon-longDeltaTop, s.lon+longDeltaTop
	}
	b[1], b[3] = s.lat-latDelta, s.lat+latDelta
	return b
}

// geoRadius is GeoHashRadius: the cells to search (zero cells are skipped).
type geoRadius struct {
	cells [9]geoHashBits
	area  geoArea
}

// geoAreasByShape is geohashCalculateAreasByShapeWGS84: the center cell
// and its 8 neighbours at a precision that covers the shape, without the
// neighbours the shape's bounding box does not reach.
func geoAreasByShape(s *geoShape) geoRadius {
	s.bounds = geoBoundingBox(s)
	minLon, minLat, maxLon, maxLat := s.bounds[0], s.bounds[1], s.bounds[2], s.bounds[3]
	var radiusMeters float64
	if s.typ == geoCircle {
		radiusMeters = s.radius
	} else {
		radiusMeters = math.Sqrt(float64(float64((s.width/2)*(s.width/2)) + float64((s.height/2)*(s.height/2))))
	}
	radiusMeters *= s.conv
	steps := geoEstimateSteps(radiusMeters, s.lat)

	var r geoRadius
	cells := func() {
		r.cells[0], _ = geoEncode(geoLongRange, geoLatRange, s.lon, s.lat, steps)
		geoNeighbors(&r.cells)
		r.area, _ = geoDecode(geoLongRange, geoLatRange, r.cells[0])
	}
	cells()

	// Is the step small enough at the limits of the covered area? Near an
	// edge of the center cell one of the neighbours may not reach far
	// enough.
	decrease := false
	north, _ := geoDecode(geoLongRange, geoLatRange, r.cells[geoNorth])
	south, _ := geoDecode(geoLongRange, geoLatRange, r.cells[geoSouth])
	east, _ := geoDecode(geoLongRange, geoLatRange, r.cells[geoEast])
	west, _ := geoDecode(geoLongRange, geoLatRange, r.cells[geoWest])
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
				r.cells[i] = geoHashBits{}
			}
		}
		if r.area.lat.min < minLat {
			zero(geoSouth, geoSouthWest, geoSouthEast)
		}
		if r.area.lat.max > maxLat {
			zero(geoNorth, geoNorthEast, geoNorthWest)
		}
		if r.area.long.min < minLon {
			zero(geoWest, geoSouthWest, geoNorthWest)
		}
		if r.area.long.max > maxLon {
			zero(geoEast, geoSouthEast, geoNorthEast)
		}
	}
	return r
}

// geoLatDistance is geohashGetLatDistance.
func geoLatDistance(lat1d, lat2d float64) float64 {
	return geoEarthR * math.Abs(geoDegRad(lat2d)-geoDegRad(lat1d))
}

// geoDistance is geohashGetDistance: the haversine great circle distance
// in meters.
func geoDistance(lon1d, lat1d, lon2d, lat2d float64) float64 {
	lon1r := geoDegRad(lon1d)
	lon2r := geoDegRad(lon2d)
	v := geoSin((lon2r - lon1r) / 2)
	if v == 0 {
		return geoLatDistance(lat1d, lat2d)
	}
	lat1r := geoDegRad(lat1d)
	lat2r := geoDegRad(lat2d)
	u := geoSin((lat2r - lat1r) / 2)
	a := float64(u*u) + float64(float64(float64(geoCos(lat1r)*geoCos(lat2r))*v)*v)
	return 2.0 * geoEarthR * geoAsin(math.Sqrt(a))
}

// Double-double arithmetic: an unevaluated sum hi+lo of two doubles,
// about 106 bits of precision.
type geoDD struct{ hi, lo float64 }

func geoTwoSum(a, b float64) geoDD {
	s := a + b
	bb := s - a
	return geoDD{s, (a - (s - bb)) + (b - bb)}
}

func geoFastTwoSum(a, b float64) geoDD { // |a| >= |b|
	s := a + b
	return geoDD{s, b - (s - a)}
}

func geoTwoProd(a, b float64) geoDD {
	p := a * b
	return geoDD{p, math.FMA(a, b, -p)}
}

func (a geoDD) add(b geoDD) geoDD {
	s := geoTwoSum(a.hi, b.hi)
	t := geoTwoSum(a.lo, b.lo)
	s = geoFastTwoSum(s.hi, s.lo+t.hi)
	return geoFastTwoSum(s.hi, s.lo+t.lo)
}

func (a geoDD) mul(b geoDD) geoDD {
	p := geoTwoProd(a.hi, b.hi)
	return geoFastTwoSum(p.hi, p.lo+(float64(a.hi*b.lo)+float64(a.lo*b.hi)))
}

func (a geoDD) mulF(b float64) geoDD {
	p := geoTwoProd(a.hi, b)
	return geoFastTwoSum(p.hi, p.lo+float64(a.lo*b))
}

func (a geoDD) neg() geoDD { return geoDD{-a.hi, -a.lo} }

// pi/2 as the sum of three doubles.
var geoPio2 = [3]float64{
	math.Float64frombits(0x3ff921fb54442d18),
	math.Float64frombits(0x3c91a62633145c07),
	math.Float64frombits(0xb91f1976b7ed8fbc),
}

// Taylor coefficients: geoSinC[k] = (-1)^(k+1)/(2k+3)!, geoCosC[k] =
// (-1)^(k+1)/(2k+2)!, as double-doubles.
var geoSinC, geoCosC = geoTaylor(3), geoTaylor(2)

func geoTaylor(first int64) (c [12]geoDD) {
	fact := new(big.Float).SetPrec(256).SetInt64(1)
	for n := int64(2); n < first; n++ {
		fact.Mul(fact, new(big.Float).SetInt64(n))
	}
	for k := range c {
		n := first + 2*int64(k)
		if k > 0 {
			fact.Mul(fact, new(big.Float).SetInt64((n-1)*n))
		} else if n > 1 {
			fact.Mul(fact, new(big.Float).SetInt64(n))
		}
		v := new(big.Float).SetPrec(256).Quo(big.NewFloat(1).SetPrec(256), fact)
		if k%2 == 0 {
			v.Neg(v)
		}
		hi, _ := v.Float64()
		lo, _ := new(big.Float).SetPrec(256).Sub(v, big.NewFloat(hi)).Float64()
		c[k] = geoDD{hi, lo}
	}
	return c
}

// geoPoly evaluates c[0] + c[1] z + c[2] z^2 + ... (the terms from z^4 on
// are small enough for double arithmetic).
func geoPoly(z geoDD, c *[12]geoDD) geoDD {
	q := c[11].hi
	for k := 10; k >= 4; k-- {
		q = float64(q*z.hi) + c[k].hi
	}
	p := c[3].add(z.mulF(q))
	for k := 2; k >= 0; k-- {
		p = p.mul(z).add(c[k])
	}
	return p
}

// geoSinKernel and geoCosKernel are sin and cos for |r| <= pi/4 (a bit more
// is fine).
func geoSinKernel(r geoDD) geoDD {
	z := r.mul(r)
	return r.add(r.mul(z.mul(geoPoly(z, &geoSinC))))
}

func geoCosKernel(r geoDD) geoDD {
	z := r.mul(r)
	return geoDD{1, 0}.add(z.mul(geoPoly(z, &geoCosC)))
}

// geoReduce returns r = x - k pi/2 and k mod 4, for |x| < 2^30 (exactly
// enough for |x| <= 8, where the distances need it).
func geoReduce(x float64) (geoDD, int) {
	k := math.RoundToEven(x / geoPio2[0])
	r := geoDD{x, 0}
	for _, p := range geoPio2 {
		r = r.add(geoTwoProd(k, p).neg())
	}
	return r, int(int64(k) & 3)
}

// geoSinDD is sin(x) as a double-double.
func geoSinDD(x float64) geoDD {
	r, q := geoReduce(x)
	switch q {
	case 0:
		return geoSinKernel(r)
	case 1:
		return geoCosKernel(r)
	case 2:
		return geoSinKernel(r).neg()
	}
	return geoCosKernel(r).neg()
}

// geoSin is sin(x) correctly rounded (but for arguments of 2^30 and more,
// infinities and NaN, which are math.Sin's).
func geoSin(x float64) float64 {
	if !(math.Abs(x) < 1<<30) {
		return math.Sin(x)
	}
	return geoSinDD(x).hi
}

// geoCos is cos(x) correctly rounded, like geoSin.
func geoCos(x float64) float64 {
	if !(math.Abs(x) < 1<<30) {
		return math.Cos(x)
	}
	r, q := geoReduce(x)
	switch q {
	case 0:
		return geoCosKernel(r).hi
	case 1:
		return -geoSinKernel(r).hi
	case 2:
		return -geoCosKernel(r).hi
	}
	return geoSinKernel(r).hi
}

// geoAsin is asin(x) correctly rounded: one Newton step in double-double
// from math.Asin's value.
func geoAsin(x float64) float64 {
	switch {
	case !(x >= -1 && x <= 1):
		return math.NaN()
	case x == 0:
		return x
	case x == 1:
		return geoPio2[0]
	case x == -1:
		return -geoPio2[0]
	}
	y0 := math.Asin(x)
	e := geoSinDD(y0).add(geoDD{-x, 0})
	return geoTwoSum(y0, -((e.hi + e.lo) / math.Cos(y0))).hi
}

// geoDistanceFast is geoDistance with Go's math functions: a few ulps
// off, but 10 times faster, for rejecting positions far enough outside a
// shape.
func geoDistanceFast(lon1d, lat1d, lon2d, lat2d float64) float64 {
	lon1r := geoDegRad(lon1d)
	lon2r := geoDegRad(lon2d)
	v := math.Sin((lon2r - lon1r) / 2)
	if v == 0 {
		return geoLatDistance(lat1d, lat2d)
	}
	lat1r := geoDegRad(lat1d)
	lat2r := geoDegRad(lat2d)
	u := math.Sin((lat2r - lat1r) / 2)
	a := float64(u*u) + float64(float64(float64(math.Cos(lat1r)*math.Cos(lat2r))*v)*v)
	return 2.0 * geoEarthR * math.Asin(math.Sqrt(a))
}

// geoSurelyBeyond reports whether the distance from (lon1, lat1) to (lon2,
// lat2) is certainly more than limit: the fast distance is beyond it by
// far more than it can be off (it is ill-conditioned only near antipodes,
// where it may be off by about 1e-8 of the distance).
func geoSurelyBeyond(lon1d, lat1d, lon2d, lat2d, limit float64) bool {
	return geoDistanceFast(lon1d, lat1d, lon2d, lat2d) > limit+limit*1e-6+1e-6
}

// geoInShape is geoWithinShape for a decoded position: the distance from
// the shape's center, ok=false if the position is outside the shape.
func geoInShape(s *geoShape, lon, lat float64) (float64, bool) {
	if s.typ == geoCircle {
		r := s.radius * s.conv
		if geoSurelyBeyond(s.lon, s.lat, lon, lat, r) {
			return 0, false
		}
		d := geoDistance(s.lon, s.lat, lon, lat)
		return d, !(d > r)
	}
	// geohashGetDistanceIfInRectangle: the latitude distance first (cheaper).
	// (NaN compares as in C: inside.)
	width, height := s.width*s.conv, s.height*s.conv
	if geoLatDistance(lat, s.lat) > height/2 {
		return 0, false
	}
	if geoSurelyBeyond(lon, lat, s.lon, lat, width/2) || geoDistance(lon, lat, s.lon, lat) > width/2 {
		return 0, false
	}
	return geoDistance(s.lon, s.lat, lon, lat), true
}

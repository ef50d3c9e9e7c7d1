package geohash

import (
	"bytes"
	"math"
	"strconv"
	"strings"

	"github.com/kvorum/kvorum/internal/redisnum"
	"github.com/kvorum/kvorum/internal/reply"
)

// The GEO commands' arguments, parsed as Redis parses them, with Redis's
// error replies.

var (
	errNotFloat     = reply.Error("ERR value is not a valid float")
	errGeoUnit      = reply.Error("ERR unsupported unit provided. please use M, KM, FT, MI")
	errGeoRadius    = reply.Error("ERR need numeric radius")
	errGeoRadiusNeg = reply.Error("ERR radius cannot be negative")
	errGeoWidth     = reply.Error("ERR need numeric width")
	errGeoHeight    = reply.Error("ERR need numeric height")
	errGeoBoxNeg    = reply.Error("ERR height or width cannot be negative")
)

// Eq compares an argument with a keyword as Redis's strcasecmp does on
// the C string (up to the first NUL byte).
func Eq(b []byte, kw string) bool {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return strings.EqualFold(string(b), kw)
}

// appendF appends f as C's "%f" does.
func appendF(b []byte, f float64) []byte {
	switch {
	case math.IsInf(f, 1):
		return append(b, "inf"...)
	case math.IsInf(f, -1):
		return append(b, "-inf"...)
	}
	return strconv.AppendFloat(b, f, 'f', 6, 64)
}

// ParseLonLat is extractLongLatOrReply.
func ParseLonLat(lonb, latb []byte) (lon, lat float64, r reply.Reply, ok bool) {
	if lon, ok = redisnum.ParseDouble(lonb); !ok {
		return 0, 0, errNotFloat, false
	}
	if lat, ok = redisnum.ParseDouble(latb); !ok {
		return 0, 0, errNotFloat, false
	}
	if lon < LongMin || lon > LongMax || lat < LatMin || lat > LatMax {
		b := append([]byte("ERR invalid longitude,latitude pair "), appendF(nil, lon)...)
		b = appendF(append(b, ','), lat)
		return 0, 0, reply.Error(string(b)), false
	}
	return lon, lat, reply.Reply{}, true
}

// ParseUnit is extractUnitOrReply: the factor converting the unit to
// meters.
func ParseUnit(b []byte) (float64, reply.Reply, bool) {
	switch {
	case Eq(b, "m"):
		return 1, reply.Reply{}, true
	case Eq(b, "km"):
		return 1000, reply.Reply{}, true
	case Eq(b, "ft"):
		return 0.3048, reply.Reply{}, true
	case Eq(b, "mi"):
		return 1609.34, reply.Reply{}, true
	}
	return 0, errGeoUnit, false
}

// CoordReply is addReplyHumanLongDouble's reply for a coordinate: a
// RESP3 double, a bulk string in RESP2, both with 17 decimals (which is
// not always the double's own value: 0.00000268220901489 for
// 2.6822090148925781e-06). Float holds the number that text stands for,
// what a client reads; Str holds the text, for a writer that can send it
// as the RESP2 bulk string (see the note at the top of the file).
func CoordReply(f float64) reply.Reply {
	t := redisnum.FormatHuman(f)
	v, err := strconv.ParseFloat(string(t), 64)
	if err != nil {
		v = f
	}
	return reply.Reply{Kind: reply.KindDouble, Float: v, Str: t}
}

// ParseDistance is extractDistanceOrReply (radius and unit).
func (s *Shape) ParseDistance(rb, ub []byte) (reply.Reply, bool) {
	d, ok := redisnum.ParseDouble(rb)
	if !ok {
		return errGeoRadius, false
	}
	if d < 0 {
		return errGeoRadiusNeg, false
	}
	s.Radius = d
	conv, r, ok := ParseUnit(ub)
	if !ok {
		return r, false
	}
	s.Conv = conv
	return reply.Reply{}, true
}

// ParseBox is extractBoxOrReply (width, height and unit).
func (s *Shape) ParseBox(wb, hb, ub []byte) (reply.Reply, bool) {
	w, ok := redisnum.ParseDouble(wb)
	if !ok {
		return errGeoWidth, false
	}
	h, ok := redisnum.ParseDouble(hb)
	if !ok {
		return errGeoHeight, false
	}
	if h < 0 || w < 0 {
		return errGeoBoxNeg, false
	}
	s.Width, s.Height = w, h
	conv, r, ok := ParseUnit(ub)
	if !ok {
		return r, false
	}
	s.Conv = conv
	return reply.Reply{}, true
}

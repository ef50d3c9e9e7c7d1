package kv

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/kvorum/kvorum/internal/kvdiff"
	"github.com/kvorum/kvorum/internal/reply"
)

// geoSameAsRedis compares a kv reply with redis-server's RESP2 reply (as
// kvdiff.Normalize gives it). Coordinates are Double replies whose RESP2
// text the resp layer does not take from Str yet (see geo.go): Str must
// be Redis's text and Float the number it stands for.
func geoSameAsRedis(r Reply, want any) bool { return geoMatch(r, want, nil) }

// geoMatch is geoSameAsRedis; with inexact set, other doubles (stored
// distances read back with WITHSCORES) may also be off by a few ulps
// (libm's sin, cos and asin are not always correctly rounded, see
// package geohash), each such double counted in *inexact.
func geoMatch(r Reply, want any, inexact *int) bool {
	switch {
	case r.Kind == reply.KindDouble && r.Str != nil:
		s, ok := want.(string)
		if !ok {
			return false
		}
		f, err := strconv.ParseFloat(s, 64)
		return err == nil && f == r.Float && s == string(r.Str)
	case r.Kind == reply.KindDouble && inexact != nil:
		s, ok := want.(string)
		if !ok {
			return false
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return false
		}
		if f != r.Float {
			*inexact++
			return math.Abs(f-r.Float) <= 1e-14*math.Abs(f)
		}
		return true
	case r.Kind == reply.KindArray, r.Kind == reply.KindPairs, r.Kind == reply.KindMap, r.Kind == reply.KindSet:
		w, ok := want.([]any)
		if !ok || len(w) != len(r.Elems) {
			return false
		}
		for i := range w {
			if !geoMatch(r.Elems[i], w[i], inexact) {
				return false
			}
		}
		return true
	}
	return fmt.Sprint(kvdiff.NormalizeReply("", r)) == fmt.Sprint(want)
}

// TestGeoAgainstRedis sends random GEO commands over random points
// (clusters, the antimeridian, high latitudes) to redis-server and to the
// state machine: scores, positions, hashes, distances in every unit, and
// searches of every kind with every option, sorted or in Redis's cell
// order, and their stored results.
func TestGeoAgainstRedis(t *testing.T) {
	rc := kvdiff.StartRedis(t)
	db := openMem(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(11, 12))
	n, stored, inexact := 0, 0, 0
	do := func(args ...string) {
		t.Helper()
		iargs := make([]any, len(args))
		for i, a := range args {
			iargs[i] = a
		}
		wv, werr := rc.Do(ctx, iargs...).Result()
		want := kvdiff.Normalize(strings.ToUpper(args[0]), wv, werr)
		got := runKV(db, args)
		n++
		var in *int
		if args[0] == "ZRANGE" && args[1] == "dst" {
			in = &inexact
			stored += len(got.Elems) / 2
		}
		if !geoMatch(got, want, in) {
			t.Fatalf("%s\n  redis: %#v\n  kv:    %#v", strings.Join(args, " "), want, kvdiff.NormalizeReply("", got))
		}
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	centers := [][2]float64{{13.36, 38.11}, {-0.12, 51.5}, {179.9, -16.5}, {-179.95, 65}, {20, 70}, {-40, -82}, {139.7, 35.7}, {0, 0}}
	const points = 300
	pos := make([][2]float64, points)
	for round := 0; round < 3; round++ {
		do("FLUSHALL")
		for i := range pos {
			var lon, lat float64
			if i%10 == 9 {
				lon, lat = rng.Float64()*360-180, rng.Float64()*170-85
			} else {
				c := centers[rng.IntN(len(centers))]
				spread := []float64{0.01, 0.3, 3}[rng.IntN(3)]
				lon = math.Max(-180, math.Min(180, c[0]+(rng.Float64()-0.5)*spread*2))
				lat = math.Max(-85, math.Min(85, c[1]+(rng.Float64()-0.5)*spread))
			}
			pos[i] = [2]float64{lon, lat}
			do("GEOADD", "g", f(lon), f(lat), fmt.Sprint("p", i))
		}
		do("ZRANGE", "g", "0", "-1", "WITHSCORES")
		member := func() string { return fmt.Sprint("p", rng.IntN(points+5)) } // some are missing
		unit := func() (string, float64) {
			u := []string{"m", "km", "ft", "mi", "KM"}[rng.IntN(5)]
			return u, map[string]float64{"m": 1, "km": 1000, "ft": 0.3048, "mi": 1609.34, "KM": 1000}[u]
		}
		dist := func(conv float64) string {
			return f(math.Round([]float64{500, 20e3, 200e3, 1500e3, 8000e3}[rng.IntN(5)]*(0.5+rng.Float64())/conv*1000) / 1000)
		}
		for i := 0; i < 150; i++ {
			u, _ := unit()
			do("GEODIST", "g", member(), member(), u)
			do("GEOPOS", "g", member(), member())
			do("GEOHASH", "g", member(), member(), member())
		}
		options := func(store bool) []string {
			var o []string
			if !store {
				for _, w := range []string{"WITHCOORD", "WITHDIST", "WITHHASH"} {
					if rng.IntN(2) == 0 {
						o = append(o, w)
					}
				}
			}
			switch rng.IntN(3) {
			case 0:
				o = append(o, "ASC")
			case 1:
				o = append(o, "DESC")
			}
			if rng.IntN(2) == 0 {
				o = append(o, "COUNT", strconv.Itoa(1+rng.IntN(20)))
				if rng.IntN(2) == 0 {
					o = append(o, "ANY")
				}
			}
			rng.Shuffle(len(o), func(a, b int) {
				if o[a] != "COUNT" && o[b] != "COUNT" && (a == 0 || o[a-1] != "COUNT") && (b == 0 || o[b-1] != "COUNT") {
					o[a], o[b] = o[b], o[a]
				}
			})
			return o
		}
		for i := 0; i < 400; i++ {
			c := pos[rng.IntN(points)]
			lon := f(math.Max(-180, math.Min(180, c[0]+(rng.Float64()-0.5)*0.5)))
			lat := f(math.Max(-85, math.Min(85, c[1]+(rng.Float64()-0.5)*0.5)))
			u, conv := unit()
			var from, by []string
			if rng.IntN(3) == 0 {
				from = []string{"FROMMEMBER", member()}
			} else {
				from = []string{"FROMLONLAT", lon, lat}
			}
			if rng.IntN(2) == 0 {
				by = []string{"BYRADIUS", dist(conv), u}
			} else {
				by = []string{"BYBOX", dist(conv), dist(conv), u}
			}
			switch rng.IntN(6) {
			case 0, 1:
				do(append(append(append([]string{"GEOSEARCH", "g"}, from...), by...), options(false)...)...)
			case 2:
				args := append(append(append([]string{"GEOSEARCHSTORE", "dst", "g"}, from...), by...), options(true)...)
				if rng.IntN(2) == 0 {
					args = append(args, "STOREDIST")
				}
				do(args...)
				do("ZRANGE", "dst", "0", "-1", "WITHSCORES")
			case 3:
				do(append([]string{[]string{"GEORADIUS", "GEORADIUS_RO"}[rng.IntN(2)], "g", lon, lat, dist(conv), u}, options(false)...)...)
			case 4:
				do(append([]string{[]string{"GEORADIUSBYMEMBER", "GEORADIUSBYMEMBER_RO"}[rng.IntN(2)], "g", member(), dist(conv), u}, options(false)...)...)
			case 5:
				store := []string{"STORE", "STOREDIST"}[rng.IntN(2)]
				if rng.IntN(2) == 0 {
					do(append([]string{"GEORADIUS", "g", lon, lat, dist(conv), u, store, "dst"}, options(true)...)...)
				} else {
					do(append([]string{"GEORADIUSBYMEMBER", "g", member(), dist(conv), u, store, "dst"}, options(true)...)...)
				}
				do("ZRANGE", "dst", "0", "-1", "WITHSCORES")
			}
		}
	}
	t.Logf("%d commands compared; %d of %d stored scores 1 ulp or so off", n, inexact, stored)
	if inexact*100 > stored {
		t.Errorf("%d of %d stored scores differ", inexact, stored)
	}
}

// TestGeoEdgesAgainstRedis compares the replies that carry coordinates,
// which the differential files (compared as text in RESP2 and RESP3)
// cannot hold, and a few numeric edge cases.
func TestGeoEdgesAgainstRedis(t *testing.T) {
	rc := kvdiff.StartRedis(t)
	db := openMem(t)
	ctx := context.Background()
	for _, line := range []string{
		"GEOADD Sicily 13.361389 38.115556 Palermo 15.087269 37.502669 Catania",
		"GEOPOS Sicily Palermo Catania NonExisting",
		"GEOPOS nokey a b",
		"GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km ASC WITHCOORD WITHDIST WITHHASH",
		"GEORADIUS Sicily 15 37 200 km WITHCOORD DESC",
		"GEORADIUSBYMEMBER_RO Sicily Palermo 200 km WITHCOORD",
		"GEOADD edge 180 85.05112878 ne -180 -85.05112878 sw 0 0 zero -0 -0 negzero 179.99999999 0 am",
		"GEOPOS edge ne sw zero negzero am",
		"GEOHASH edge ne sw zero negzero am",
		"ZRANGE edge 0 -1 WITHSCORES",
		"GEODIST edge ne sw",
		"GEODIST edge zero negzero",
		"GEOSEARCH edge FROMMEMBER zero BYRADIUS 0 m WITHCOORD WITHDIST",
		"GEOSEARCH edge FROMLONLAT 0 0 BYBOX 0 0 m WITHCOORD WITHDIST",
		"GEOSEARCH edge FROMLONLAT 0 0 BYRADIUS inf m WITHDIST ASC",
		"GEOSEARCH edge FROMLONLAT 0 0 BYBOX inf 1 km WITHDIST ASC",
		"GEOSEARCH edge FROMLONLAT 179 80 BYRADIUS 30000 km WITHDIST ASC",
		"GEOADD bad 1e300 1 x",
		"GEOADD bad 200.0078125 1 x",
		"GEOADD bad 1 -inf x",
		"GEOADD bad 1 85.05112879 x",
		"ZADD odd -1 neg 1e20 huge 4503599627370496 top 0.5 half",
		"GEOPOS odd neg huge top half",
		"GEOHASH odd neg huge top half",
		"ZADD odd2 inf pinf -inf ninf 1e19 big -1e19 nbig 9223372036854775808 two63",
		"GEOPOS odd2 pinf ninf big nbig two63",
		"GEOHASH odd2 pinf ninf big nbig two63",
		"GEODIST odd2 big nbig km",
		"GEOSEARCH odd2 FROMMEMBER big BYRADIUS 10000 km WITHDIST WITHHASH WITHCOORD ASC",
	} {
		args := strings.Fields(line)
		iargs := make([]any, len(args))
		for i, a := range args {
			iargs[i] = a
		}
		wv, werr := rc.Do(ctx, iargs...).Result()
		want := kvdiff.Normalize(strings.ToUpper(args[0]), wv, werr)
		if got := runKV(db, args); !geoSameAsRedis(got, want) {
			t.Errorf("%s\n  redis: %#v\n  kv:    %#v", line, want, kvdiff.NormalizeReply("", got))
		}
	}
}

// TestGeoReadOnlyForms: GEORADIUS and GEORADIUSBYMEMBER are reads unless
// they store; syntax errors of the write forms never reach Apply.
func TestGeoReadOnlyForms(t *testing.T) {
	for _, c := range []struct {
		cmd   string
		write bool
	}{
		{"GEORADIUS k 1 2 3 m", false},
		{"GEORADIUS k 1 2 3 m WITHDIST COUNT 3", false},
		{"GEORADIUS k 1 2 3 m STORE d", true},
		{"GEORADIUS k 1 2 3 m storedist d", true},
		{"GEORADIUS k 1 2 3 m STORE", false},
		{"GEORADIUSBYMEMBER k m 3 m", false},
		{"GEORADIUSBYMEMBER k m 3 m STOREDIST d", true},
		{"GEORADIUS_RO k 1 2 3 m STORE d", false},
		{"GEOSEARCH k FROMMEMBER m BYRADIUS 1 m", false},
		{"GEOSEARCHSTORE d k FROMMEMBER m BYRADIUS 1 m", true},
		{"GEOADD k 1 2 m", true},
	} {
		if got := IsWrite(toArgs(strings.Fields(c.cmd)...)); got != c.write {
			t.Errorf("IsWrite(%s) = %v", c.cmd, got)
		}
	}
	for _, c := range []struct {
		cmd string
		ok  bool
		err string
	}{
		{"GEORADIUS k 1 2 3 m STORE d WITHDIST", false, "ERR STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options"},
		{"GEORADIUS k 200 2 3 m STORE d", false, "ERR invalid longitude,latitude pair 200.000000,2.000000"},
		{"GEORADIUS k 1 2 3 m STORE d ANY", false, "ERR the ANY argument requires COUNT argument"},
		{"GEORADIUS k 1 2 3 m STORE d", true, ""},
		// A missing key stores nothing whatever the radius: Redis does not parse it.
		{"GEORADIUSBYMEMBER k m x m STORE d", true, ""},
		{"GEORADIUSBYMEMBER k m 1 m STORE d COUNT 0", false, "ERR COUNT must be > 0"},
		// The data decides between "need numeric radius" and the COUNT error.
		{"GEORADIUSBYMEMBER k m x m STORE d COUNT 0", true, ""},
		{"GEOSEARCHSTORE d k FROMMEMBER m BYRADIUS 1 m WITHHASH", false, "ERR GEOSEARCHSTORE is not compatible with WITHDIST, WITHHASH and WITHCOORD options"},
		{"GEOSEARCHSTORE d k FROMMEMBER m BYRADIUS 1 m BYBOX 1 1 m", false, "ERR syntax error"},
		{"geosearchstore d k BYRADIUS 1 m ASC ASC", false, "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for geosearchstore"},
		{"GEOSEARCHSTORE d k FROMLONLAT 1 1 BYBOX 1 1 m STOREDIST", true, ""},
		// Read forms are checked when they run (the key's type first).
		{"GEOSEARCH k FROMMEMBER m ASC ASC ASC", true, ""},
		{"GEORADIUS k 1 2 3 parsec", true, ""},
		{"GEOADD k 1 2 m n", false, "ERR syntax error"},
		{"GEOADD k NX XX 1 2 m", false, "ERR syntax error"},
		{"GEOADD k CH", false, "ERR wrong number of arguments for 'geoadd' command"},
		{"GEOADD k CH CH CH", false, "ERR syntax error"},
		{"GEOADD k 1 2 m 1 x n", false, "ERR value is not a valid float"},
		{"GEODIST k a b parsec", false, "ERR unsupported unit provided. please use M, KM, FT, MI"},
		{"GEODIST k a b m x", false, "ERR syntax error"},
	} {
		r, ok := Check(toArgs(strings.Fields(c.cmd)...), Limits{})
		if ok != c.ok || (!ok && string(r.Str) != c.err) {
			t.Errorf("Check(%s) = %v %q", c.cmd, ok, r.Str)
		}
	}
}

// TestGeoStoreIsDeterministic: equal distances keep the index order, so
// every replica stores the same members under COUNT.
func TestGeoStoreIsDeterministic(t *testing.T) {
	for i := 0; i < 2; i++ {
		db := openMem(t)
		// Four members at the same position: equal distances.
		run(t, db, 0, "GEOADD", "g", "10", "10", "d", "10", "10", "b", "10", "10", "a", "10", "10", "c", "10.1", "10", "far")
		if got := show(run(t, db, 0, "GEOSEARCHSTORE", "dst", "g", "FROMLONLAT", "10", "10", "BYRADIUS", "100", "km", "COUNT", "2")); got != "2" {
			t.Fatalf("stored %s", got)
		}
		if got := show(run(t, db, 0, "ZRANGE", "dst", "0", "-1")); got != "[a b]" {
			t.Fatalf("stored %s", got)
		}
		if got := show(run(t, db, 0, "GEOSEARCH", "g", "FROMLONLAT", "10", "10", "BYRADIUS", "100", "km", "DESC")); got != "[far a b c d]" {
			t.Fatalf("DESC %s", got)
		}
	}
}

// TestGeoErrorsAgainstRedis sends random, mostly malformed searches to
// redis-server and to the state machine. The read forms are parsed in
// Redis's order whatever the key holds; the write forms are checked before
// they are proposed, which gives Redis's error when the source key is
// missing or a sorted set holding the members named (with a wrong type or
// a missing member Redis may report that first: not drawn here).
func TestGeoErrorsAgainstRedis(t *testing.T) {
	rc := kvdiff.StartRedis(t)
	db := openMem(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	setup := [][]string{
		{"FLUSHALL"},
		{"GEOADD", "g", "13.361389", "38.115556", "Palermo", "15.087269", "37.502669", "Catania", "2.35", "48.85", "Paris"},
		{"SET", "str", "x"},
		{"ZADD", "dst", "1", "old"},
	}
	for _, c := range setup {
		runKV(db, c)
		iargs := make([]any, len(c))
		for i, a := range c {
			iargs[i] = a
		}
		rc.Do(ctx, iargs...)
	}
	tokens := []string{"WITHDIST", "WITHHASH", "WITHCOORD", "ANY", "ASC", "DESC", "COUNT", "count", "0", "-1", "3", "x", "STORE",
		"STOREDIST", "dst", "FROMMEMBER", "FROMLONLAT", "BYRADIUS", "BYBOX", "bybox", "m", "km", "KM", "mi", "ft", "parsec", "13",
		"38", "200", "-5", "inf", "1e3", "Palermo", "Catania", "", "100", "95"}
	members := map[string]bool{"Palermo": true, "Catania": true}
	n := 0
	for i := 0; i < 6000; i++ {
		var args []string
		name := []string{"GEOSEARCH", "GEOSEARCHSTORE", "GEORADIUS", "GEORADIUS_RO", "GEORADIUSBYMEMBER", "GEORADIUSBYMEMBER_RO"}[rng.IntN(6)]
		key := []string{"g", "g", "g", "nokey", "str"}[rng.IntN(5)]
		switch name {
		case "GEOSEARCHSTORE":
			args = []string{name, "dst", key}
		case "GEORADIUS", "GEORADIUS_RO":
			args = []string{name, key, tokens[rng.IntN(len(tokens))], tokens[rng.IntN(len(tokens))], tokens[rng.IntN(len(tokens))], tokens[rng.IntN(len(tokens))]}
			if rng.IntN(2) == 0 {
				args = append(args[:2], "13", "38", "200", "km")
			}
		default:
			args = []string{name, key, tokens[rng.IntN(len(tokens))], tokens[rng.IntN(len(tokens))], tokens[rng.IntN(len(tokens))]}
			if rng.IntN(2) == 0 {
				args = append(args[:2], "Palermo", "200", "km")
			}
		}
		if strings.HasPrefix(name, "GEOSEARCH") && rng.IntN(2) == 0 {
			args = append(args, []string{"FROMMEMBER", "Palermo", "FROMLONLAT", "15", "37"}[rng.IntN(2)*2:][:2+rng.IntN(2)]...)
			args = append(args, []string{"BYRADIUS", "100", "km"}...)
		}
		for j := rng.IntN(6); j > 0; j-- {
			args = append(args, tokens[rng.IntN(len(tokens))])
		}
		if IsWrite(toArgs(args...)) {
			if key == "str" {
				continue
			}
			ok := true
			for j, a := range args {
				if j > 0 && (strings.EqualFold(args[j-1], "frommember") || (j == 2 && strings.Contains(name, "MEMBER"))) && !members[a] && key != "nokey" {
					ok = false
				}
			}
			if !ok {
				continue
			}
		}
		iargs := make([]any, len(args))
		for i, a := range args {
			iargs[i] = a
		}
		wv, werr := rc.Do(ctx, iargs...).Result()
		want := kvdiff.Normalize(name, wv, werr)
		got := runKV(db, args)
		n++
		if !geoSameAsRedis(got, want) {
			t.Fatalf("%q\n  redis: %#v\n  kv:    %#v", args, want, kvdiff.NormalizeReply("", got))
		}
	}
	t.Logf("%d commands compared", n)
}

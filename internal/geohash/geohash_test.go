package geohash

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// human is "%.17f" without trailing zeros, as GEOPOS writes a coordinate.
func human(f float64) string {
	s := strconv.FormatFloat(f, 'f', 17, 64)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// knownPoints: GEOADD, ZSCORE, GEOHASH and GEOPOS of redis-server 7.0,
// including the corners of the score's range (the north-east corner's
// offsets overflow into bit 52, as in Redis).
var knownPoints = []struct {
	name           string
	lon, lat       float64
	score          uint64
	base32         string
	posLon, posLat string
}{
	{"Palermo", 13.361389, 38.115556, 3479099956230698, "sqc8b49rny0", "13.36138933897018433", "38.11555639549629859"},
	{"Catania", 15.087269, 37.502669, 3479447370796909, "sqdtr74hyu0", "15.08726745843887329", "37.50266842333162032"},
	{"sw", -180, -85.05112878, 0, "00bh0hbj200", "-179.99999731779098511", "-85.05112751263942528"},
	{"ne", 180, 85.05112878, 13510798882111488, "bp05b5048p0", "180", "85.0511287799999991"},
	{"origin", 0, 0, 3377699720527872, "s0000000000", "0.00000268220901489", "0.00000126736058093"},
	{"London", -0.1275, 51.507222, 2163557714840001, "gcpvj0e5m10", "-0.1274988055229187", "51.50722081469902491"},
	{"ESB", -73.985656, 40.748433, 1791875672649880, "dr5ru6j2c60", "", ""},
	{"Sydney", 151.2153, -33.8568, 3252046274729663, "r3gx2ux9gg0", "151.21530264616012573", "-33.85679901465208985"},
}

func TestKnownPoints(t *testing.T) {
	for _, p := range knownPoints {
		score := EncodeScore(p.lon, p.lat)
		if score != p.score {
			t.Errorf("%s: EncodeScore = %d, want %d", p.name, score, p.score)
		}
		lon, lat := DecodeScore(float64(score))
		if got := string(Base32(lon, lat)); got != p.base32 {
			t.Errorf("%s: Base32 = %s, want %s", p.name, got, p.base32)
		}
		if p.posLon != "" && (human(lon) != p.posLon || human(lat) != p.posLat) {
			t.Errorf("%s: DecodeScore = %s, %s, want %s, %s", p.name, human(lon), human(lat), p.posLon, p.posLat)
		}
		// A decoded position encodes to the same score.
		if again := EncodeScore(lon, lat); p.name != "ne" && again != score {
			t.Errorf("%s: re-encoded to %d", p.name, again)
		}
	}
}

// Distances between decoded positions, GEODIST's 4 decimals in the unit
// asked (redis-server 7.0's replies).
func TestKnownDistances(t *testing.T) {
	pos := map[string][2]float64{}
	for _, p := range knownPoints {
		lon, lat := DecodeScore(float64(p.score))
		pos[p.name] = [2]float64{lon, lat}
	}
	for _, c := range []struct {
		a, b   string
		toUnit float64 // meters per unit
		want   int64   // the reply times 10^4
	}{
		{"Palermo", "Catania", 1, 1662741516},
		{"London", "ESB", 1000, 55680010},
		{"London", "Sydney", 1, 169980720565},
		{"sw", "ne", 1, 189198445891},
		{"ESB", "Sydney", 1609.34, 99383551},
		{"Palermo", "Palermo", 1, 0},
	} {
		a, b := pos[c.a], pos[c.b]
		d := Distance(a[0], a[1], b[0], b[1]) / c.toUnit
		if got := int64(math.RoundToEven(d * 10000)); got != c.want {
			t.Errorf("Distance(%s, %s) = %.4f, want %d.%04d", c.a, c.b, d, c.want/10000, c.want%10000)
		}
	}
}

// Every position inside a shape lies in one of the cells AreasByShape
// returns: a search that reads only those cells misses nothing.
func TestAreasCoverShape(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	inside := 0
	for i := 0; i < 300; i++ {
		s := Shape{Lon: rng.Float64()*340 - 170, Lat: rng.Float64()*140 - 70, Conv: 1}
		size := math.Pow(10, 1+rng.Float64()*5) // 10 m to 1000 km
		if i%2 == 0 {
			s.Type, s.Radius = Circle, size
		} else {
			s.Type, s.Width, s.Height = Box, size*(0.5+rng.Float64()), size*(0.5+rng.Float64())
		}
		areas := AreasByShape(&s)
		degrees := size / 111000 * 2
		for j := 0; j < 200; j++ {
			lon := s.Lon + (rng.Float64()*2-1)*degrees/math.Cos(s.Lat*math.Pi/180)
			lat := s.Lat + (rng.Float64()*2-1)*degrees
			if lon < LongMin || lon > LongMax || lat < LatMin || lat > LatMax {
				continue
			}
			dlon, dlat := DecodeScore(float64(EncodeScore(lon, lat)))
			if _, in := s.Within(dlon, dlat); !in {
				continue
			}
			inside++
			score := EncodeScore(dlon, dlat)
			found := false
			for _, c := range areas.Cells {
				if c.IsZero() {
					continue
				}
				next := c
				next.Bits++
				if score >= c.Align52() && score < next.Align52() {
					found = true
				}
			}
			if !found {
				t.Fatalf("shape %+v: (%v, %v) is inside but in no cell of %+v", s, dlon, dlat, areas.Cells)
			}
		}
	}
	if inside < 5000 { // about 40% of the samples
		t.Fatalf("only %d positions inside the shapes", inside)
	}
}

// The neighbours of a cell touch it: north's bottom edge is the cell's top
// edge, and so on around.
func TestNeighborsTouch(t *testing.T) {
	var cells [9]Hash
	cells[Center], _ = encode(longRange, latRange, 13.361389, 38.115556, 10)
	neighbors(&cells)
	c, _ := decode(longRange, latRange, cells[Center])
	at := func(i int) area { a, _ := decode(longRange, latRange, cells[i]); return a }
	if n := at(North); n.lat.min != c.lat.max || n.long != c.long {
		t.Errorf("north %+v, center %+v", n, c)
	}
	if s := at(South); s.lat.max != c.lat.min || s.long != c.long {
		t.Errorf("south %+v, center %+v", s, c)
	}
	if e := at(East); e.long.min != c.long.max || e.lat != c.lat {
		t.Errorf("east %+v, center %+v", e, c)
	}
	if w := at(West); w.long.max != c.long.min || w.lat != c.lat {
		t.Errorf("west %+v, center %+v", w, c)
	}
	if ne := at(NorthEast); ne.lat.min != c.lat.max || ne.long.min != c.long.max {
		t.Errorf("north-east %+v, center %+v", ne, c)
	}
	if sw := at(SouthWest); sw.lat.max != c.lat.min || sw.long.max != c.long.min {
		t.Errorf("south-west %+v, center %+v", sw, c)
	}
}

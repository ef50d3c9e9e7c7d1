package geohash

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// bigSinCos returns sin(x) and cos(x) to 300 bits (Taylor series; |x|
// up to a few units).
func bigSinCos(x *big.Float) (sin, cos *big.Float) {
	const prec = 300
	sin, cos = new(big.Float).SetPrec(prec), new(big.Float).SetPrec(prec).SetInt64(1)
	term := new(big.Float).SetPrec(prec).SetInt64(1) // x^n/n!
	for n := int64(1); n < 120; n++ {
		term.Mul(term, x)
		term.Quo(term, new(big.Float).SetInt64(n))
		t := new(big.Float).SetPrec(prec).Set(term)
		if (n/2)%2 == 1 {
			t.Neg(t)
		}
		if n%2 == 1 {
			sin.Add(sin, t)
		} else {
			cos.Add(cos, t)
		}
	}
	return sin, cos
}

// TestTrigCorrectlyRounded: sin, cos and asin return the
// double nearest to the exact value.
func TestTrigCorrectlyRounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 1500; i++ {
		var x float64
		switch i % 4 {
		case 0:
			x = (rng.Float64()*2 - 1) * math.Pi
		case 1:
			x = (rng.Float64()*2 - 1) * 1e-3
		case 2:
			x = (rng.Float64()*2 - 1) * 8
		default:
			x = (rng.Float64()*2 - 1) * 1e-7
		}
		bs, bc := bigSinCos(new(big.Float).SetPrec(300).SetFloat64(x))
		if want, _ := bs.Float64(); sin(x) != want {
			t.Errorf("sin(%v) = %v, want %v", x, sin(x), want)
		}
		if want, _ := bc.Float64(); cos(x) != want {
			t.Errorf("cos(%v) = %v, want %v", x, cos(x), want)
		}
		// asin: Newton's method in 300 bits from math.Asin.
		a := math.Abs(x) / 8
		if i%7 == 0 {
			a = 1 - rng.Float64()*1e-9
		}
		y := new(big.Float).SetPrec(300).SetFloat64(math.Asin(a))
		for k := 0; k < 5; k++ {
			s, c := bigSinCos(y)
			s.Sub(s, new(big.Float).SetFloat64(a))
			y.Sub(y, s.Quo(s, c))
		}
		if want, _ := y.Float64(); asin(a) != want {
			t.Errorf("asin(%v) = %v, want %v", a, asin(a), want)
		}
	}
	for _, c := range []struct{ f, x, want float64 }{
		{asin(1), 1, math.Pi / 2}, {asin(-1), -1, -math.Pi / 2}, {asin(0), 0, 0}, {sin(0), 0, 0}, {cos(0), 0, 1},
	} {
		if c.f != c.want {
			t.Errorf("at %v: %v, want %v", c.x, c.f, c.want)
		}
	}
	if !math.IsNaN(asin(1.0000000000000002)) || !math.IsNaN(asin(math.NaN())) {
		t.Error("asin out of [-1, 1] is not NaN")
	}
}

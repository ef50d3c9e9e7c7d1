package geohash

import (
	"math"
	"math/big"
)

// Correctly rounded sin, cos and asin for the distances (see the package
// comment): argument reduction by pi/2 in three parts, Taylor kernels in
// double-double arithmetic, and one Newton step for asin.

// Double-double arithmetic: an unevaluated sum hi+lo of two doubles,
// about 106 bits of precision.
type dd struct{ hi, lo float64 }

func twoSum(a, b float64) dd {
	s := a + b
	bb := s - a
	return dd{s, (a - (s - bb)) + (b - bb)}
}

func fastTwoSum(a, b float64) dd { // |a| >= |b|
	s := a + b
	return dd{s, b - (s - a)}
}

func twoProd(a, b float64) dd {
	p := a * b
	return dd{p, math.FMA(a, b, -p)}
}

func (a dd) add(b dd) dd {
	s := twoSum(a.hi, b.hi)
	t := twoSum(a.lo, b.lo)
	s = fastTwoSum(s.hi, s.lo+t.hi)
	return fastTwoSum(s.hi, s.lo+t.lo)
}

func (a dd) mul(b dd) dd {
	p := twoProd(a.hi, b.hi)
	return fastTwoSum(p.hi, p.lo+(float64(a.hi*b.lo)+float64(a.lo*b.hi)))
}

func (a dd) mulF(b float64) dd {
	p := twoProd(a.hi, b)
	return fastTwoSum(p.hi, p.lo+float64(a.lo*b))
}

func (a dd) neg() dd { return dd{-a.hi, -a.lo} }

// pi/2 as the sum of three doubles.
var pio2 = [3]float64{
	math.Float64frombits(0x3ff921fb54442d18),
	math.Float64frombits(0x3c91a62633145c07),
	math.Float64frombits(0xb91f1976b7ed8fbc),
}

// Taylor coefficients: sinC[k] = (-1)^(k+1)/(2k+3)!, cosC[k] =
// (-1)^(k+1)/(2k+2)!, as double-doubles.
var sinC, cosC = taylor(3), taylor(2)

func taylor(first int64) (c [12]dd) {
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
		c[k] = dd{hi, lo}
	}
	return c
}

// poly evaluates c[0] + c[1] z + c[2] z^2 + ... (the terms from z^4 on
// are small enough for double arithmetic).
func poly(z dd, c *[12]dd) dd {
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

// sinKernel and cosKernel are sin and cos for |r| <= pi/4 (a bit more
// is fine).
func sinKernel(r dd) dd {
	z := r.mul(r)
	return r.add(r.mul(z.mul(poly(z, &sinC))))
}

func cosKernel(r dd) dd {
	z := r.mul(r)
	return dd{1, 0}.add(z.mul(poly(z, &cosC)))
}

// reduce returns r = x - k pi/2 and k mod 4, for |x| < 2^30 (exactly
// enough for |x| <= 8, where the distances need it).
func reduce(x float64) (dd, int) {
	k := math.RoundToEven(x / pio2[0])
	r := dd{x, 0}
	for _, p := range pio2 {
		r = r.add(twoProd(k, p).neg())
	}
	return r, int(int64(k) & 3)
}

// sinDD is sin(x) as a double-double.
func sinDD(x float64) dd {
	r, q := reduce(x)
	switch q {
	case 0:
		return sinKernel(r)
	case 1:
		return cosKernel(r)
	case 2:
		return sinKernel(r).neg()
	}
	return cosKernel(r).neg()
}

// sin is sin(x) correctly rounded (but for arguments of 2^30 and more,
// infinities and NaN, which are math.Sin's).
func sin(x float64) float64 {
	if !(math.Abs(x) < 1<<30) {
		return math.Sin(x)
	}
	return sinDD(x).hi
}

// cos is cos(x) correctly rounded, like sin.
func cos(x float64) float64 {
	if !(math.Abs(x) < 1<<30) {
		return math.Cos(x)
	}
	r, q := reduce(x)
	switch q {
	case 0:
		return cosKernel(r).hi
	case 1:
		return -sinKernel(r).hi
	case 2:
		return -cosKernel(r).hi
	}
	return sinKernel(r).hi
}

// asin is asin(x) correctly rounded: one Newton step in double-double
// from math.Asin's value.
func asin(x float64) float64 {
	switch {
	case !(x >= -1 && x <= 1):
		return math.NaN()
	case x == 0:
		return x
	case x == 1:
		return pio2[0]
	case x == -1:
		return -pio2[0]
	}
	y0 := math.Asin(x)
	e := sinDD(y0).add(dd{-x, 0})
	return twoSum(y0, -((e.hi + e.lo) / math.Cos(y0))).hi
}

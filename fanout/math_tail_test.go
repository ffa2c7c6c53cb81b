package fanout

import (
	"math"
	"math/big"
	"testing"
)

// exactSlowShareGoodEnough is P(S > n−k) for S ~ Binomial(n, num/den),
// computed with 256-bit floats (whose exponents do not underflow).
func exactSlowShareGoodEnough(n, k int, num, den int64) float64 {
	const prec = 256
	newF := func() *big.Float { return new(big.Float).SetPrec(prec) }
	p := newF().Quo(newF().SetInt64(num), newF().SetInt64(den))
	q := newF().Quo(newF().SetInt64(den-num), newF().SetInt64(den))
	qpow := []*big.Float{newF().SetInt64(1)} // qpow[i] = q^i
	for i := 1; i <= n; i++ {
		qpow = append(qpow, newF().Mul(qpow[i-1], q))
	}
	ppow := newF().SetInt64(1) // p^s
	sum := newF()
	for s := 0; s <= n; s++ {
		if s > 0 {
			ppow.Mul(ppow, p)
		}
		if s <= n-k {
			continue
		}
		term := newF().SetInt(new(big.Int).Binomial(int64(n), int64(s)))
		term.Mul(term, ppow)
		term.Mul(term, qpow[n-s])
		sum.Add(sum, term)
	}
	f, _ := sum.Float64()
	return f
}

// The binomial tail keeps its precision when it is tiny: 1 − P(fast)
// would cancel to 0 (or rounding noise) below about 1e-16.
func TestSlowShareGoodEnoughSmallP(t *testing.T) {
	// C(60,4)·1e-24·(1−1e-6)^56 + C(60,5)·1e-30·… ≈ 4.8763e-19.
	got, err := SlowShareGoodEnough(60, 57, 1e-6)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(got-4.8763e-19) > 1e-4*4.8763e-19 {
		t.Errorf("SlowShareGoodEnough(60, 57, 1e-6) = %g, want about 4.8763e-19", got)
	}
	for _, tc := range []struct {
		n, k     int
		num, den int64
	}{
		{60, 57, 1, 1_000_000},
		{60, 57, 1, 100},
		{60, 60, 1, 100},
		{100, 100, 1, 100},
		{100, 50, 1, 100},
		{100, 1, 1, 2},
		{100, 1, 1, 100},
		{7, 4, 1, 3},
		{1, 1, 1, 10},
		{1000, 990, 1, 1000},
		{1000, 995, 1, 1_000_000_000},
	} {
		want := exactSlowShareGoodEnough(tc.n, tc.k, tc.num, tc.den)
		got, err := SlowShareGoodEnough(tc.n, tc.k, float64(tc.num)/float64(tc.den))
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got-want) > 1e-10*want {
			t.Errorf("SlowShareGoodEnough(%d, %d, %d/%d) = %g, want %g (relative error %.2g)", tc.n, tc.k, tc.num, tc.den, got, want, math.Abs(got-want)/want)
		}
	}
}

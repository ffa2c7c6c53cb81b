package fanout

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSlowShareMatchesPaper(t *testing.T) {
	got, err := SlowShare(100, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(got-0.634) > 0.0005 {
		t.Errorf("fan-out 100 at p=0.01: %v, want 63.4%%", got)
	}
	if got, _ := SlowShare(1, 0.01); got != 0.01 {
		t.Errorf("fan-out 1: %v", got)
	}
	if got, _ := SlowShare(2000, 0.0001); math.Abs(got-(1-math.Pow(0.9999, 2000))) > 1e-12 {
		t.Errorf("fan-out 2000: %v", got)
	}
}

func TestMaxServerSlowProbability(t *testing.T) {
	p, err := MaxServerSlowProbability(60, 0.99)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(p-1.675e-4) > 0.001e-4 {
		t.Errorf("p = %v, want about 1.675e-4", p)
	}
	if got := Percentile(p); got != "p99.98" {
		t.Errorf("Percentile(%v) = %s, want p99.98", p, got)
	}
	// The inverse: at exactly that p, the request is fast 99% of the time.
	if s, _ := SlowShare(60, p); math.Abs(s-0.01) > 1e-12 {
		t.Errorf("round trip: slow share %v", s)
	}
	if p, _ := MaxServerSlowProbability(10, 0); p != 1 {
		t.Errorf("target 0: %v", p)
	}
}

func TestGoodEnough(t *testing.T) {
	// Waiting for all n is the plain formula.
	for _, n := range []int{1, 7, 60, 100} {
		all, _ := SlowShare(n, 0.01)
		ge, err := SlowShareGoodEnough(n, n, 0.01)
		if err != nil || math.Abs(all-ge) > 1e-12 {
			t.Errorf("n=%d: good-enough(n of n) %v != %v (%v)", n, ge, all, err)
		}
	}
	// 57 of 60 tolerates three slow servers.
	ge, _ := SlowShareGoodEnough(60, 57, 0.01)
	all, _ := SlowShare(60, 0.01)
	if !(ge < all/100) {
		t.Errorf("57 of 60: %v, want far below waiting for all (%v)", ge, all)
	}
	// Against a Monte Carlo estimate.
	rng := rand.New(rand.NewPCG(7, 7))
	slow := 0
	const trials = 200000
	for range trials {
		s := 0
		for range 20 {
			if rng.Float64() < 0.1 {
				s++
			}
		}
		if s > 2 {
			slow++
		}
	}
	ge, _ = SlowShareGoodEnough(20, 18, 0.1)
	if mc := float64(slow) / trials; math.Abs(mc-ge) > 0.005 {
		t.Errorf("18 of 20 at p=0.1: formula %v, simulation %v", ge, mc)
	}
	if got, _ := SlowShareGoodEnough(5, 3, 0); got != 0 {
		t.Error(got)
	}
	if got, _ := SlowShareGoodEnough(5, 3, 1); got != 1 {
		t.Error(got)
	}
}

func TestPercentile(t *testing.T) {
	cases := map[float64]string{0.01: "p99", 0.05: "p95", 0.001: "p99.9", 1.675e-4: "p99.98", 0.5: "p50", 0: "p100", 1: "p0", 0.0125: "p98.7", 1e-7: "p99.99999"}
	for p, want := range cases {
		if got := Percentile(p); got != want {
			t.Errorf("Percentile(%v) = %s, want %s", p, got, want)
		}
	}
}

func TestRejects(t *testing.T) {
	checks := []error{
		func() error { _, err := SlowShare(0, 0.1); return err }(),
		func() error { _, err := SlowShare(-3, 0.1); return err }(),
		func() error { _, err := SlowShare(3, 1.5); return err }(),
		func() error { _, err := SlowShare(3, math.NaN()); return err }(),
		func() error { _, err := MaxServerSlowProbability(0, 0.9); return err }(),
		func() error { _, err := MaxServerSlowProbability(3, -0.1); return err }(),
		func() error { _, err := SlowShareGoodEnough(3, 4, 0.1); return err }(),
		func() error { _, err := SlowShareGoodEnough(3, 0, 0.1); return err }(),
		func() error { _, err := SlowShareGoodEnough(0, 1, 0.1); return err }(),
		func() error { _, err := SlowShareGoodEnough(3, 2, 2); return err }(),
	}
	for i, err := range checks {
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("check %d: err %v", i, err)
		}
	}
}

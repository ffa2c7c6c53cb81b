package fanout

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ErrInvalid wraps every argument error of this package: its arithmetic
// and New.
var ErrInvalid = errors.New("fanout: invalid argument")

func checkFanout(n int) error {
	if n <= 0 {
		return fmt.Errorf("%w: fan-out %d must be at least 1", ErrInvalid, n)
	}
	return nil
}

func checkProbability(name string, p float64) error {
	if math.IsNaN(p) || p < 0 || p > 1 {
		return fmt.Errorf("%w: %s %v must be within [0, 1]", ErrInvalid, name, p)
	}
	return nil
}

// SlowShare returns the share of requests that are slow when each waits for
// all of n servers and each server is slow with probability p, independently:
// 1 − (1 − p)^n.
func SlowShare(n int, p float64) (float64, error) {
	if err := checkFanout(n); err != nil {
		return 0, err
	}
	if err := checkProbability("per-server slow probability", p); err != nil {
		return 0, err
	}
	// -expm1(n·log1p(-p)) keeps precision when p is tiny.
	return -math.Expm1(float64(n) * math.Log1p(-p)), nil
}

// MaxServerSlowProbability returns the largest per-server slow probability
// p for which a request waiting on n servers is fast with probability at
// least target: 1 − target^(1/n).
func MaxServerSlowProbability(n int, target float64) (float64, error) {
	if err := checkFanout(n); err != nil {
		return 0, err
	}
	if err := checkProbability("target", target); err != nil {
		return 0, err
	}
	if target == 0 {
		return 1, nil
	}
	return -math.Expm1(math.Log(target) / float64(n)), nil
}

// SlowShareGoodEnough returns the share of requests that are slow when each
// needs only k of n servers to answer (a good-enough result): the
// probability that more than n − k servers are slow, from the binomial tail.
func SlowShareGoodEnough(n, k int, p float64) (float64, error) {
	if err := checkFanout(n); err != nil {
		return 0, err
	}
	if k < 1 || k > n {
		return 0, fmt.Errorf("%w: waiting for %d of %d servers: want 1 ≤ k ≤ n", ErrInvalid, k, n)
	}
	if err := checkProbability("per-server slow probability", p); err != nil {
		return 0, err
	}
	switch p {
	case 0:
		return 0, nil
	case 1:
		return 1, nil
	}
	// P(slow) = P(S > n−k) = Σ_{s=n−k+1}^{n} C(n,s) p^s (1−p)^(n−s),
	// the upper tail summed directly: 1 − P(S ≤ n−k) would cancel to 0
	// when the answer is tiny. The terms are taken in log space, so that
	// large n neither overflows nor underflows, and added relative to the
	// largest (log-sum-exp).
	logp, logq := math.Log(p), math.Log1p(-p)
	logTerm := func(s int) float64 {
		return logChoose(n, s) + float64(s)*logp + float64(n-s)*logq
	}
	top := math.Inf(-1)
	for s := n - k + 1; s <= n; s++ {
		top = max(top, logTerm(s))
	}
	sum := 0.0
	for s := n - k + 1; s <= n; s++ {
		sum += math.Exp(logTerm(s) - top)
	}
	return max(0, min(1, math.Exp(top+math.Log(sum)))), nil
}

func logChoose(n, k int) float64 {
	a, _ := math.Lgamma(float64(n + 1))
	b, _ := math.Lgamma(float64(k + 1))
	c, _ := math.Lgamma(float64(n - k + 1))
	return a - b - c
}

// Percentile formats the quantile 1 − p as a percentile name ("p99",
// "p99.98"), with just enough decimals to tell it from its neighbours. It
// truncates rather than rounds, so the name never claims more nines than
// the arithmetic gives.
func Percentile(p float64) string {
	if p <= 0 {
		return "p100"
	}
	if p >= 1 {
		return "p0"
	}
	pct := 100 * (1 - p)
	decimals := 0
	if p*100 < 1 {
		decimals = int(math.Floor(-math.Log10(p*100))) + 1
	}
	if decimals == 0 && math.Abs(pct-math.Round(pct)) > 1e-9 {
		decimals = 1
	}
	decimals = min(decimals, 8)
	scale := math.Pow(10, float64(decimals))
	truncated := math.Floor(pct*scale+1e-9) / scale
	s := strconv.FormatFloat(truncated, 'f', decimals, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return "p" + s
}

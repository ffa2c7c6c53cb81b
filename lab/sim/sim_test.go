package sim

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

var methods = []Method{MethodExact, MethodOrderStats}

// The paper's arithmetic: a server slow 1% of the time makes
// 1 − 0.99^N of the requests that wait on N servers slow.
func TestSlowShareIsOneMinusFastToTheN(t *testing.T) {
	const p = 0.01
	lat := bimodal(time.Millisecond, 100*time.Millisecond, p)
	for _, tc := range []struct{ n, requests int }{{1, 200_000}, {10, 100_000}, {100, 50_000}, {2000, 5_000}} {
		for _, m := range methods {
			opts := Options{Requests: tc.requests, Seed: 7, SlowThreshold: 10 * time.Millisecond, Method: m}
			r, err := Run(Policy{Fanout: tc.n}, lat, opts)
			if err != nil {
				t.Fatal(err)
			}
			want := -math.Expm1(float64(tc.n) * math.Log1p(-p))
			// Sampling error of the requests, plus for the
			// order-statistics method that of the empirical slow share p̂
			// behind F, propagated through d(1−(1−p)^N)/dp.
			v := want * (1 - want) / float64(tc.requests)
			if m == MethodOrderStats {
				g := float64(tc.n) * math.Pow(1-p, float64(tc.n-1))
				v += g * g * p * (1 - p) / DefaultSampleSize
			}
			se := math.Sqrt(v)
			if d := math.Abs(r.SlowShare - want); d > 4*se+1e-12 {
				t.Errorf("N=%d %v: slow share %.5f, want %.5f ± 4×%.5f", tc.n, m, r.SlowShare, want, se)
			}
			if r.Method != m {
				t.Errorf("method %v, want %v", r.Method, m)
			}
		}
	}
}

// Table 1 of the paper: the time until 95% and until 100% of the leaves
// finish rises steeply above a single leaf's.
func TestTable1Shape(t *testing.T) {
	lat := lognormal(time.Millisecond, 1)
	t.Run("independent leaves", func(t *testing.T) {
		for _, m := range methods {
			rows, err := Table1(100, lat, Options{Requests: 20_000, Seed: 3, Method: m})
			if err != nil {
				t.Fatal(err)
			}
			checkTable1(t, rows, m, false)
			// With independent leaves the 95th of 100 answers comes at the
			// Beta(95, 6) quantile of the leaf distribution, whose p99 is
			// below 0.99 (P(Beta(95,6) > 0.99) = P(Bin(100, .01) >= 6) =
			// 0.06%): so the 95% row's p99 stays below one leaf's p99.
			// Only a cause shared by the leaves lifts it above (below).
			if one, ninety5 := rows[0], rows[1]; ninety5.P99 >= one.P99 {
				t.Errorf("%v: independent leaves: 95%% p99 %v >= one-leaf p99 %v", m, ninety5.P99, one.P99)
			}
		}
	})
	t.Run("shared cause", func(t *testing.T) {
		factor := func(rng *rand.Rand) float64 { return math.Exp(0.8 * rng.NormFloat64()) }
		for _, m := range methods {
			rows, err := Table1(100, lat, Options{Requests: 20_000, Seed: 3, Method: m, RequestFactor: factor})
			if err != nil {
				t.Fatal(err)
			}
			checkTable1(t, rows, m, true)
		}
	})
}

func checkTable1(t *testing.T, rows []Table1Row, m Method, strict bool) {
	t.Helper()
	if len(rows) != 3 || rows[0].Name != "one random leaf" || rows[1].Name != "95% of leaves" || rows[2].Name != "100% of leaves" {
		t.Fatalf("rows %+v", rows)
	}
	for _, r := range rows {
		if !(r.P50 < r.P95 && r.P95 < r.P99) {
			t.Errorf("%v %s: percentiles not rising: %+v", m, r.Name, r)
		}
	}
	col := func(r Table1Row, i int) time.Duration { return [3]time.Duration{r.P50, r.P95, r.P99}[i] }
	for i, name := range []string{"p50", "p95", "p99"} {
		one, ninety5, all := col(rows[0], i), col(rows[1], i), col(rows[2], i)
		if !(ninety5 < all && one < all) {
			t.Errorf("%v %s: one leaf %v, 95%% %v, 100%% %v: want one, 95%% < 100%%", m, name, one, ninety5, all)
		}
		if (strict || name != "p99") && one >= ninety5 {
			t.Errorf("%v %s: one leaf %v >= 95%% %v", m, name, one, ninety5)
		}
	}
	if rows[2].P50 < 5*rows[0].P50 {
		t.Errorf("%v: 100%% p50 %v not far above one-leaf p50 %v", m, rows[2].P50, rows[0].P50)
	}
}

// The order-statistics method against the exact one, at fan-out 60 with
// 10^5 requests. The tolerance comes from the sampling error of both: the
// exact p99 rests on 1,000 requests beyond it, the order-statistics p99 of
// all 60 leaves on the ~700 of 2^22 draws beyond the leaf quantile 1 − 0.01/60;
// each is about 1% in latency for this model, so p50–p99 within 3%.
func TestOrderStatsMatchesExact(t *testing.T) {
	lat := lognormal(time.Millisecond, 0.8)
	policies := []Policy{
		{Name: "all", Fanout: 60},
		{Name: "57 of 60", Fanout: 60, Need: 57},
		{Name: "30 of 60", Fanout: 60, Need: 30},
		{Name: "first", Fanout: 60, Need: 1},
		{Name: "hedged", Fanout: 60, HedgeAfter: 2 * time.Millisecond},
		{Name: "hedged 55 of 60", Fanout: 60, Need: 55, HedgeAfter: 1500 * time.Microsecond},
		{Name: "deadline", Fanout: 60, HedgeAfter: 3 * time.Millisecond, Deadline: 6 * time.Millisecond},
	}
	opts := Options{Requests: 100_000, Seed: 11, SlowThreshold: 5 * time.Millisecond}
	for _, p := range policies {
		opts.Method = MethodExact
		ex, err := Run(p, lat, opts)
		if err != nil {
			t.Fatal(err)
		}
		opts.Method = MethodOrderStats
		os, err := Run(p, lat, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []struct {
			name   string
			ex, os time.Duration
		}{{"p50", ex.P50, os.P50}, {"p90", ex.P90, os.P90}, {"p95", ex.P95, os.P95}, {"p99", ex.P99, os.P99}} {
			if d := relDiff(q.os, q.ex); d > 0.03 {
				t.Errorf("%s %s: order statistics %v, exact %v (%.1f%% off)", p.Name, q.name, q.os, q.ex, 100*d)
			}
		}
		// Shares: 4 standard errors of the difference of two estimates.
		share := func(name string, a, b, n float64) {
			se := math.Sqrt(2*max(a*(1-a), b*(1-b))/n) + 1e-9
			if math.Abs(a-b) > 4*se+0.002 {
				t.Errorf("%s %s: order statistics %.4f, exact %.4f", p.Name, name, a, b)
			}
		}
		share("partial share", os.PartialShare, ex.PartialShare, float64(opts.Requests))
		share("slow share", os.SlowShare, ex.SlowShare, float64(opts.Requests))
		share("extra attempts", os.ExtraAttemptsPct/100, ex.ExtraAttemptsPct/100, float64(opts.Requests))
	}
}

// A request that needs k answers completes at the k-th order statistic:
// with a bimodal leaf it is slow exactly when more than N−k leaves are.
func TestNeedKIsKthOrderStatistic(t *testing.T) {
	const p, n, requests = 0.05, 60, 50_000
	lat := bimodal(time.Millisecond, 100*time.Millisecond, p)
	for _, k := range []int{1, 30, 55, 57, 60} {
		want := 0.0 // P(Binomial(n, p) > n−k)
		for s := n - k + 1; s <= n; s++ {
			want += binomialPMF(n, s, p)
		}
		for _, m := range methods {
			r, err := Run(Policy{Fanout: n, Need: k}, lat, Options{Requests: requests, Seed: 5, SlowThreshold: 10 * time.Millisecond, Method: m})
			if err != nil {
				t.Fatal(err)
			}
			se := math.Sqrt(want*(1-want)/requests) + 0.002 // + the empirical p̂ for order statistics
			if math.Abs(r.SlowShare-want) > 4*se {
				t.Errorf("k=%d %v: slow share %.4f, want %.4f", k, m, r.SlowShare, want)
			}
		}
	}
}

// Hedging cuts the tail, at a cost of about 1 − F(d) extra attempts per
// shard: exactly N(1 − F(d)) hedges per request when waiting for all N,
// fewer when waiting for k, because a request that has k answers by d sends
// none.
func TestHedgingCutsTailAtKnownCost(t *testing.T) {
	const p50, sigma, n, requests = time.Millisecond, 1.0, 60, 50_000
	lat := lognormal(p50, sigma)
	d := 3 * time.Millisecond
	fd := lognormalCDF(p50, sigma, d)
	for _, m := range methods {
		opts := Options{Requests: requests, Seed: 9, Method: m}
		plain, err := Run(Policy{Fanout: n}, lat, opts)
		if err != nil {
			t.Fatal(err)
		}
		hedged, err := Run(Policy{Fanout: n, HedgeAfter: d}, lat, opts)
		if err != nil {
			t.Fatal(err)
		}
		if hedged.P99 > plain.P99/2 {
			t.Errorf("%v: hedged p99 %v, plain %v: want at least halved", m, hedged.P99, plain.P99)
		}
		if plain.ExtraAttemptsPct != 0 {
			t.Errorf("%v: plain sends %.2f%% hedges", m, plain.ExtraAttemptsPct)
		}
		want := 100 * (1 - fd)
		se := 100 * math.Sqrt(fd*(1-fd)/(requests*n))
		if math.Abs(hedged.ExtraAttemptsPct-want) > 4*se+0.1 {
			t.Errorf("%v: extra attempts %.3f%%, want %.3f%% (1 − F(d))", m, hedged.ExtraAttemptsPct, want)
		}

		// Waiting for 50 of 60: hedges = (N − A)·[A < k], A ~ Bin(N, F(d)).
		const k = 50
		d2 := 2 * time.Millisecond
		fd2 := lognormalCDF(p50, sigma, d2)
		good, err := Run(Policy{Fanout: n, Need: k, HedgeAfter: d2}, lat, opts)
		if err != nil {
			t.Fatal(err)
		}
		mean, sq := 0.0, 0.0
		for a := 0; a < k; a++ {
			pa := binomialPMF(n, a, fd2)
			mean += pa * float64(n-a)
			sq += pa * float64(n-a) * float64(n-a)
		}
		want = 100 * mean / n
		se = 100 * math.Sqrt((sq-mean*mean)/requests) / n
		if math.Abs(good.ExtraAttemptsPct-want) > 4*se+0.2 {
			t.Errorf("%v: %d of %d: extra attempts %.3f%%, want %.3f%%", m, k, n, good.ExtraAttemptsPct, want)
		}
	}
}

// A deadline returns partial results: their share is P(k-th order
// statistic > deadline), and no request takes longer than the deadline.
func TestDeadlinePartialShareAndCap(t *testing.T) {
	const p, n, requests = 0.01, 60, 50_000
	lat := bimodal(time.Millisecond, 100*time.Millisecond, p)
	deadline := 20 * time.Millisecond
	for _, k := range []int{60, 58} {
		want := 0.0 // partial when more than n−k leaves are slow
		for s := n - k + 1; s <= n; s++ {
			want += binomialPMF(n, s, p)
		}
		for _, m := range methods {
			r, err := Run(Policy{Fanout: n, Need: k, Deadline: deadline}, lat, Options{Requests: requests, Seed: 13, Method: m, SlowThreshold: 10 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			se := math.Sqrt(want*(1-want)/requests) + 0.002
			if math.Abs(r.PartialShare-want) > 4*se {
				t.Errorf("k=%d %v: partial share %.4f, want %.4f", k, m, r.PartialShare, want)
			}
			if r.Max != deadline {
				t.Errorf("k=%d %v: max %v, want the deadline %v", k, m, r.Max, deadline)
			}
			// The partial requests waited the deadline, past the threshold.
			if r.SlowShare != r.PartialShare {
				t.Errorf("k=%d %v: slow share %v != partial share %v", k, m, r.SlowShare, r.PartialShare)
			}
		}
	}
	// A hedge due at or after the deadline is never sent.
	for _, m := range methods {
		r, err := Run(Policy{Fanout: n, HedgeAfter: deadline, Deadline: deadline}, lat, Options{Requests: 10_000, Seed: 1, Method: m})
		if err != nil {
			t.Fatal(err)
		}
		if r.ExtraAttemptsPct != 0 {
			t.Errorf("%v: hedges sent at the deadline: %.2f%%", m, r.ExtraAttemptsPct)
		}
	}
}

// A budget bounds hedges by burst + fraction × shard requests, whatever
// the requests want, and forces the exact method.
func TestBudgetBoundsHedges(t *testing.T) {
	const n, requests, fraction, burst = 60, 20_000, 0.002, 10
	lat := lognormal(time.Millisecond, 1)
	p := Policy{Fanout: n, HedgeAfter: 2 * time.Millisecond, BudgetFraction: fraction}
	r, err := Run(p, lat, Options{Requests: requests, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	if r.Method != MethodExact {
		t.Errorf("method %v, want exact", r.Method)
	}
	limit := 100 * (burst/float64(requests*n) + fraction)
	if r.ExtraAttemptsPct > limit {
		t.Errorf("extra attempts %.4f%% > %.4f%%", r.ExtraAttemptsPct, limit)
	}
	// About 12% of shards want a hedge, so the budget binds: nearly all of
	// it is spent.
	if r.ExtraAttemptsPct < 0.9*100*fraction {
		t.Errorf("extra attempts %.4f%%: budget of %.2f%% left unspent", r.ExtraAttemptsPct, 100*fraction)
	}
	if _, err := Run(p, lat, Options{Requests: requests, Method: MethodOrderStats}); !errors.Is(err, ErrInvalid) {
		t.Errorf("order statistics with a budget: err %v", err)
	}

	// A budget that never binds changes nothing: the grants replay the
	// very draws of the unlimited run.
	free := p
	free.BudgetFraction, free.BudgetBurst = 1, 1e6
	got, err := Run(free, lat, Options{Requests: 5_000, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	p.BudgetFraction = 0
	want, err := Run(p, lat, Options{Requests: 5_000, Seed: 4, Method: MethodExact})
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("non-binding budget: %+v, want %+v", got, want)
	}
}

// The budget serves requests in order: starting full, earning half a
// credit per request and holding one, it allows every other request's
// hedge.
func TestBudgetInRequestOrder(t *testing.T) {
	lat := func(*rand.Rand) time.Duration { return 10 * time.Millisecond }
	p := Policy{Fanout: 1, HedgeAfter: 5 * time.Millisecond, BudgetFraction: 0.5, BudgetBurst: 1}
	r, err := Run(p, lat, Options{Requests: 10, Workers: 3})
	if err != nil {
		t.Fatal(err)
	}
	if r.ExtraAttemptsPct != 50 {
		t.Errorf("extra attempts %v%%, want 50%%", r.ExtraAttemptsPct)
	}
	// The hedge answers at 5+10ms, after the first attempt: no gain.
	if r.Max != 10*time.Millisecond {
		t.Errorf("max %v", r.Max)
	}
	// Without hedging a budget has nothing to do.
	p.HedgeAfter = 0
	if r, err = Run(p, lat, Options{Requests: 10}); err != nil || r.ExtraAttemptsPct != 0 || r.Method != MethodExact {
		t.Errorf("no hedging: %+v, %v", r, err)
	}
}

// Results depend on the Seed, not on how many goroutines ran the requests.
func TestDeterministicAcrossWorkers(t *testing.T) {
	lat := lognormal(time.Millisecond, 1)
	factor := func(rng *rand.Rand) float64 { return math.Exp(0.5 * rng.NormFloat64()) }
	cases := []struct {
		name string
		p    Policy
		o    Options
	}{
		{"exact", Policy{Fanout: 30, Need: 28, HedgeAfter: 2 * time.Millisecond, Deadline: 8 * time.Millisecond}, Options{Method: MethodExact}},
		{"order statistics", Policy{Fanout: 300, Need: 290, HedgeAfter: 2 * time.Millisecond}, Options{Method: MethodOrderStats, SampleSize: 1 << 18}},
		{"budget", Policy{Fanout: 30, HedgeAfter: 2 * time.Millisecond, BudgetFraction: 0.05}, Options{}},
		{"factor", Policy{Fanout: 30, HedgeAfter: 2 * time.Millisecond}, Options{Method: MethodOrderStats, SampleSize: 1 << 18, RequestFactor: factor}},
	}
	for _, tc := range cases {
		var first Result
		for i, w := range []int{1, 2, 3, 8} {
			o := tc.o
			o.Requests, o.Seed, o.Workers, o.SlowThreshold = 3_000, 42, w, 4*time.Millisecond
			r, err := Run(tc.p, lat, o)
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				first = r
			} else if r != first {
				t.Errorf("%s: workers %d: %+v, workers 1: %+v", tc.name, w, r, first)
			}
		}
		o := tc.o
		o.Requests, o.Seed = 3_000, 43
		if r, _ := Run(tc.p, lat, o); r == first {
			t.Errorf("%s: another seed gives the same result", tc.name)
		}
	}
}

// A shared request factor scales every attempt of a request: the
// order-statistics method must agree with the exact one under it too.
func TestRequestFactor(t *testing.T) {
	lat := lognormal(time.Millisecond, 0.5)
	factor := func(rng *rand.Rand) float64 { return math.Exp(0.5 * rng.NormFloat64()) }
	p := Policy{Fanout: 40, Need: 38, HedgeAfter: 2 * time.Millisecond, Deadline: 20 * time.Millisecond}
	opts := Options{Requests: 50_000, Seed: 8, RequestFactor: factor, Method: MethodExact}
	ex, err := Run(p, lat, opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.Method = MethodOrderStats
	os, err := Run(p, lat, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range [][2]time.Duration{{os.P50, ex.P50}, {os.P95, ex.P95}, {os.P99, ex.P99}} {
		if d := relDiff(q[0], q[1]); d > 0.03 {
			t.Errorf("order statistics %v, exact %v", q[0], q[1])
		}
	}
	if math.Abs(os.ExtraAttemptsPct-ex.ExtraAttemptsPct) > 0.5 {
		t.Errorf("extra attempts: order statistics %.2f%%, exact %.2f%%", os.ExtraAttemptsPct, ex.ExtraAttemptsPct)
	}

	// Factors that are not positive make every attempt instant.
	for _, f := range []float64{0, -1, math.NaN()} {
		opts.RequestFactor = func(*rand.Rand) float64 { return f }
		for _, m := range methods {
			opts.Method, opts.Requests = m, 1000
			r, err := Run(p, lat, opts)
			if err != nil || r.Max != 0 || r.ExtraAttemptsPct != 0 {
				t.Errorf("factor %v %v: %+v, %v", f, m, r, err)
			}
		}
	}
	// An infinite factor saturates rather than overflowing.
	opts.RequestFactor = func(*rand.Rand) float64 { return math.Inf(1) }
	for _, m := range methods {
		opts.Method = m
		r, err := Run(Policy{Fanout: 3, HedgeAfter: time.Millisecond}, lat, opts)
		if err != nil || r.Max != math.MaxInt64 || r.P50 != math.MaxInt64 {
			t.Errorf("infinite factor %v: %+v, %v", m, r, err)
		}
	}
}

// Latencies at the edges of the range: negative draws count as 0, huge
// ones saturate instead of wrapping when a hedge is added to them.
func TestExtremeLatencies(t *testing.T) {
	neg := func(*rand.Rand) time.Duration { return -time.Second }
	huge := func(*rand.Rand) time.Duration { return math.MaxInt64 - 1 }
	for _, m := range methods {
		o := Options{Requests: 1000, Method: m, SampleSize: 1 << 16}
		r, err := Run(Policy{Fanout: 5, HedgeAfter: time.Millisecond}, neg, o)
		if err != nil || r.Max != 0 || r.ExtraAttemptsPct != 0 {
			t.Errorf("%v negative: %+v, %v", m, r, err)
		}
		r, err = Run(Policy{Fanout: 5, HedgeAfter: time.Hour}, huge, o)
		if err != nil || r.P50 != math.MaxInt64-1 || r.ExtraAttemptsPct != 100 {
			t.Errorf("%v huge: %+v, %v", m, r, err)
		}
	}
}

func TestDefaults(t *testing.T) {
	calls := 0
	lat := func(*rand.Rand) time.Duration { calls++; return time.Millisecond }
	r, err := Run(Policy{Name: "one", Fanout: 1}, lat, Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests != DefaultRequests || r.Policy != "one" || r.Method != MethodExact || calls != DefaultRequests {
		t.Errorf("defaults: %+v after %d calls", r, calls)
	}
	if r.P50 != time.Millisecond || r.Mean != time.Millisecond || r.SlowShare != 0 {
		t.Errorf("constant latency: %+v", r)
	}
	// Auto picks order statistics once drawing every shard costs more than
	// estimating F.
	r, err = Run(Policy{Fanout: 100}, lognormal(time.Millisecond, 1), Options{Requests: 2_000, SampleSize: 100_000})
	if err != nil || r.Method != MethodOrderStats {
		t.Errorf("auto at 2·10^5 draws > sample: %v, %v", r.Method, err)
	}
}

func TestInvalid(t *testing.T) {
	lat := lognormal(time.Millisecond, 1)
	cases := []struct {
		name string
		p    Policy
		lat  Latency
		o    Options
	}{
		{"nil latency", Policy{Fanout: 1}, nil, Options{}},
		{"zero fan-out", Policy{}, lat, Options{}},
		{"huge fan-out", Policy{Fanout: MaxFanout + 1}, lat, Options{}},
		{"negative need", Policy{Fanout: 2, Need: -1}, lat, Options{}},
		{"need above fan-out", Policy{Fanout: 2, Need: 3}, lat, Options{}},
		{"negative hedge delay", Policy{Fanout: 2, HedgeAfter: -1}, lat, Options{}},
		{"negative deadline", Policy{Fanout: 2, Deadline: -1}, lat, Options{}},
		{"NaN fraction", Policy{Fanout: 2, BudgetFraction: math.NaN()}, lat, Options{}},
		{"negative fraction", Policy{Fanout: 2, BudgetFraction: -0.1}, lat, Options{}},
		{"fraction above 1", Policy{Fanout: 2, BudgetFraction: 1.1}, lat, Options{}},
		{"small burst", Policy{Fanout: 2, BudgetFraction: 0.1, BudgetBurst: 0.5}, lat, Options{}},
		{"NaN burst", Policy{Fanout: 2, BudgetFraction: 0.1, BudgetBurst: math.NaN()}, lat, Options{}},
		{"negative requests", Policy{Fanout: 2}, lat, Options{Requests: -1}},
		{"too many requests", Policy{Fanout: 2}, lat, Options{Requests: MaxRequests + 1}},
		{"negative workers", Policy{Fanout: 2}, lat, Options{Workers: -1}},
		{"negative threshold", Policy{Fanout: 2}, lat, Options{SlowThreshold: -1}},
		{"negative sample", Policy{Fanout: 2}, lat, Options{SampleSize: -1}},
		{"huge sample", Policy{Fanout: 2}, lat, Options{SampleSize: MaxSampleSize + 1}},
		{"unknown method", Policy{Fanout: 2}, lat, Options{Method: 9}},
		{"budget by order statistics", Policy{Fanout: 2, BudgetFraction: 0.1}, lat, Options{Method: MethodOrderStats}},
	}
	for _, tc := range cases {
		_, err := Run(tc.p, tc.lat, tc.o)
		if !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), "sim: ") {
			t.Errorf("%s: err %v", tc.name, err)
		}
	}
	if _, err := Table1(0, lat, Options{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Table1(0): %v", err)
	}
	if _, err := Table1(10, nil, Options{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Table1 nil latency: %v", err)
	}
}

func TestMethodString(t *testing.T) {
	for m, want := range map[Method]string{MethodAuto: "auto", MethodExact: "exact", MethodOrderStats: "order-statistics", 7: "Method(7)"} {
		if m.String() != want {
			t.Errorf("%d: %q, want %q", int(m), m.String(), want)
		}
	}
}

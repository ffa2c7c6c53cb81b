package lab

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestLognormalPercentiles(t *testing.T) {
	for _, m := range []Lognormal{
		{P50: 8 * time.Millisecond, P99: 90 * time.Millisecond},
		{P50: time.Millisecond, P99: 2 * time.Millisecond},
		{P50: 200 * time.Microsecond, P99: 50 * time.Millisecond},
	} {
		rng := rand.New(rand.NewPCG(11, 12))
		const n = 200000
		d := make([]time.Duration, n)
		for i := range d {
			d[i] = m.Sample(rng, Request{ID: uint64(i)})
		}
		slices.Sort(d)
		for _, c := range []struct {
			q    float64
			want time.Duration
		}{{0.5, m.P50}, {0.99, m.P99}} {
			got := rank(d, c.q)
			if rel := math.Abs(float64(got-c.want)) / float64(c.want); rel > 0.03 {
				t.Errorf("%v: p%g %v, want %v ± 3%% (off by %.1f%%)", m, 100*c.q, got, c.want, 100*rel)
			}
		}
	}
}

func TestLognormalEdges(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	if d := (Lognormal{P50: 5 * time.Millisecond, P99: 5 * time.Millisecond}).Sample(rng, Request{}); d != 5*time.Millisecond {
		t.Errorf("p50 = p99: got %v, want the constant 5ms", d)
	}
	if d := (Lognormal{}).Sample(rng, Request{}); d != 0 {
		t.Errorf("zero model: %v", d)
	}
	// An absurd sigma is capped at the limit, never overflows.
	wild := Lognormal{P50: 1, P99: time.Minute}
	for range 10000 {
		if d := wild.Sample(rng, Request{}); d < 0 || d > maxModelDuration {
			t.Fatalf("draw %v outside [0, %v]", d, maxModelDuration)
		}
	}
}

func TestStragglerExtremes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	never := Straggler{Fraction: 0, Fast: time.Millisecond, Slow: time.Second}
	always := Straggler{Fraction: 1, Fast: time.Millisecond, Slow: time.Second}
	for range 1000 {
		if never.Sample(rng, Request{}) != time.Millisecond || always.Sample(rng, Request{}) != time.Second {
			t.Fatal("fraction 0 or 1 not honoured")
		}
	}
}

func TestSlowIDs(t *testing.T) {
	const fast, slow = time.Millisecond, 80 * time.Millisecond
	ids := []uint64{3, 17, 42}
	for _, primaryOnly := range []bool{false, true} {
		m := SlowIDs{IDs: ids, Fast: fast, Slow: slow, PrimaryOnly: primaryOnly}
		for id := range uint64(100) {
			for _, hedged := range []bool{false, true} {
				want := fast
				if slices.Contains(ids, id) && !(hedged && primaryOnly) {
					want = slow
				}
				if got := m.Sample(nil, Request{ID: id, Hedge: hedged, At: time.Duration(id)}); got != want {
					t.Errorf("%v: id %d hedge %v: %v, want %v", m, id, hedged, got, want)
				}
			}
		}
	}
}

func TestStalls(t *testing.T) {
	m := Stalls{Every: time.Second, For: 100 * time.Millisecond, Base: Constant(time.Millisecond)}
	ms := time.Millisecond
	for _, c := range []struct{ at, want time.Duration }{
		{0, 101 * ms},                    // a stall at the start
		{30 * ms, 71 * ms},               // waits to the stall's end, then base
		{100*ms - 1, 1*ms + 1},           // the last nanosecond of the stall
		{100 * ms, 1 * ms},               // the stall is over (half-open)
		{500 * ms, 1 * ms},               // between stalls
		{999 * ms, 1 * ms},               // just before the next
		{time.Second, 101 * ms},          // the next stall
		{3*time.Second + 40*ms, 61 * ms}, // and a later one
	} {
		if got := m.Sample(nil, Request{At: c.at}); got != c.want {
			t.Errorf("arrival at %v: %v, want %v", c.at, got, c.want)
		}
	}
	// Base sees the request as arriving when the stall ends.
	var seen []Request
	rec := Stalls{Every: time.Second, For: 100 * ms, Base: recordModel{seen: &seen}}
	rec.Sample(nil, Request{ID: 9, At: 30 * ms})
	rec.Sample(nil, Request{ID: 10, At: 300 * ms})
	if want := []Request{{ID: 9, At: 100 * ms}, {ID: 10, At: 300 * ms}}; !reflect.DeepEqual(seen, want) {
		t.Errorf("base saw %v, want %v", seen, want)
	}
	// Nil base: the stall alone.
	if got := (Stalls{Every: time.Second, For: 100 * ms}).Sample(nil, Request{At: 50 * ms}); got != 50*ms {
		t.Errorf("nil base: %v", got)
	}
}

// recordModel is a Model that records the requests it prices and answers d.
type recordModel struct {
	seen *[]Request
	d    time.Duration
}

func (r recordModel) Sample(_ *rand.Rand, req Request) time.Duration {
	*r.seen = append(*r.seen, req)
	return r.d
}
func (recordModel) String() string { return "record" }

func TestModelRoundTrip(t *testing.T) {
	models := []Model{
		Constant(0),
		Constant(5 * time.Millisecond),
		Constant(1500 * time.Microsecond),
		Constant(time.Minute),
		Lognormal{P50: 8 * time.Millisecond, P99: 90 * time.Millisecond},
		Lognormal{P50: 3, P99: 3},
		Straggler{Fraction: 0.05, Fast: time.Millisecond, Slow: 40 * time.Millisecond},
		Straggler{Fraction: 1e-7, Fast: 0, Slow: time.Nanosecond},
		Straggler{Fraction: 1, Fast: time.Second, Slow: time.Second},
		SlowIDs{IDs: []uint64{3, 17, 42}, Fast: time.Millisecond, Slow: 80 * time.Millisecond, PrimaryOnly: true},
		SlowIDs{IDs: []uint64{math.MaxUint64, 0}, Fast: 0, Slow: time.Millisecond},
		SlowIDs{Fast: time.Millisecond, Slow: time.Second}, // no ids: all fast
		Stalls{Every: time.Second, For: 100 * time.Millisecond, Base: Constant(time.Millisecond)},
		Stalls{Every: time.Second, For: 100 * time.Millisecond, Base: Stalls{Every: 50 * time.Millisecond, For: time.Millisecond,
			Base: Straggler{Fraction: 0.25, Fast: time.Millisecond, Slow: 9 * time.Millisecond}}},
		Spikes{Fraction: 0.0001, Slow: 1800 * time.Millisecond, Base: Lognormal{P50: time.Millisecond, P99: 12 * time.Millisecond}},
		Batch{Keys: 10, Base: Spikes{Fraction: 0.00001, Slow: 1800 * time.Millisecond, Base: Lognormal{P50: time.Millisecond, P99: 6 * time.Millisecond}}},
		Batch{Keys: 1, Base: Constant(0)},
		Phase{From: 8 * time.Second, To: 20 * time.Second, Factor: 20, Base: Lognormal{P50: 2 * time.Millisecond, P99: 10 * time.Millisecond}},
		Phase{From: 0, To: time.Hour, Factor: 0.5, Base: Phase{From: time.Millisecond, To: 1500 * time.Millisecond, Factor: 1e-3, Base: Constant(time.Second)}},
	}
	for _, m := range models {
		got, err := ParseModel(m.String())
		if err != nil {
			t.Errorf("%v: %v", m, err)
			continue
		}
		if !reflect.DeepEqual(got, m) || got.String() != m.String() {
			t.Errorf("%v parsed as %#v", m, got)
		}
	}
	for text, want := range map[string]string{
		"const:5ms":                               "const:5ms",
		" const : 5000us ":                        "const:5ms",
		"lognormal:p99=90ms, p50=8ms":             "lognormal:p50=8ms,p99=90ms",
		"straggler:slow=40ms,frac=.05,fast=1ms":   "straggler:frac=0.05,fast=1ms,slow=40ms",
		"slowids:primary,ids=3/17,slow=1s,fast=0": "slowids:ids=3/17,fast=0s,slow=1s,primary",
		"stalls:for=100ms,every=1s,base=stalls:every=10ms,for=1ms,base=lognormal:p50=1ms,p99=2ms": "stalls:every=1s,for=100ms,base=stalls:every=10ms,for=1ms,base=lognormal:p50=1ms,p99=2ms",
		"phase: factor=20.0, to=20000ms,from=8s,base=spikes:frac=0.5,slow=1s,base=const:1ms":      "phase:from=8s,to=20s,factor=20,base=spikes:frac=0.5,slow=1s,base=const:1ms",
	} {
		m, err := ParseModel(text)
		if err != nil || m.String() != want {
			t.Errorf("ParseModel(%q) = %v, %v; want %s", text, m, err, want)
		}
	}
}

func TestParseModelErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "empty"},
		{"   ", "empty"},
		{"5ms", "no kind"},
		{"gamma:k=1", `unknown kind "gamma"; want one of const, lognormal, straggler, slowids, stalls`},
		{"const:", "no duration"},
		{"const:fast", `"fast" is not a duration`},
		{"const:-1ms", "duration -1ms must be at least 0"},
		{"const:2m", "duration 2m0s is above the limit of 1m0s"},
		{"lognormal:", "no keys; want lognormal:p50=DURATION,p99=DURATION"},
		{"lognormal:p50=8ms", "missing key p99"},
		{"lognormal:p50=8ms,p99=90ms,p50=9ms", "duplicate key p50"},
		{"lognormal:p50=8ms,p90=20ms", `unknown key "p90"`},
		{"lognormal:p50=8ms,p99", "key p99 has no value"},
		{"lognormal:p50=8ms,,p99=9ms", "empty field"},
		{"lognormal:p50=8ms,p99=9ms,", "trailing comma"},
		{"lognormal:p50=0s,p99=9ms", "p50 0s must be positive"},
		{"lognormal:p50=8ms,p99=7ms", "p99 7ms is below p50 8ms"},
		{"lognormal:p50=8ms,p99=2m", "p99 2m0s is above the limit"},
		{"straggler:frac=1.5,fast=1ms,slow=40ms", "frac 1.5 is outside [0, 1]"},
		{"straggler:frac=NaN,fast=1ms,slow=40ms", "frac NaN is outside [0, 1]"},
		{"straggler:frac=five,fast=1ms,slow=40ms", `frac "five" is not a number`},
		{"straggler:frac=0.1,fast=-1ms,slow=40ms", "fast -1ms must be at least 0"},
		{"straggler:frac=0.1,fast=1ms,slow=0s", "slow 0s must be positive"},
		{"straggler:frac=0.1,fast=10ms,slow=1ms", "slow 1ms is below fast 10ms"},
		{"straggler:frac=0.1,fast=1ms,slow=40", `slow: "40" is not a duration`},
		{"straggler:frac=0.1,fast=1ms", "missing key slow; want straggler:frac=FRACTION,fast=DURATION,slow=DURATION"},
		{"slowids:ids=1//2,fast=1ms,slow=2ms", `id "" in ids is not an unsigned integer`},
		{"slowids:ids=1/-2,fast=1ms,slow=2ms", `id "-2" in ids`},
		{"slowids:ids=1,fast=1ms,slow=2ms,primary=true", "flag primary takes no value"},
		{"slowids:ids=1,fast=1ms,slow=2ms,secondary", `unknown key "secondary"`},
		{"slowids:ids=1,fast=1ms,slow=2ms,primary,primary", "duplicate key primary"},
		{"stalls:every=1s,for=1s,base=const:1ms", "for 1s is not shorter than every 1s"},
		{"stalls:every=1s,for=0s,base=const:1ms", "for 0s must be positive"},
		{"stalls:every=2m,for=1s,base=const:1ms", "every 2m0s is above the limit"},
		{"stalls:every=1s,for=10ms", "missing key base"},
		{"stalls:every=1s,for=10ms,base=", "stalls: base: empty"},
		{"stalls:every=1s,base=const:1ms,for=10ms", "missing key for (base takes the rest of the text, so it comes last)"},
		{"stalls:every=1s,for=10ms,base=lognormal:p50=1ms", "stalls: base: lognormal: missing key p99"},
		{strings.Repeat("stalls:every=1s,for=1ms,base=", 9) + "const:1ms", "models nest more than 8 deep"},
		{strings.Repeat("x", maxModelText+1), "longer than the limit"},
		{"phase:from=8s,to=20s,factor=20", "missing key base"},
		{"phase:from=8s,to=20s,base=const:1ms,factor=20", "missing key factor (base takes the rest of the text, so it comes last)"},
		{"phase:from=20s,to=8s,factor=20,base=const:1ms", "to 8s is outside (from 20s, 1h0m0s]"},
		{"phase:from=8s,to=8s,factor=20,base=const:1ms", "to 8s is outside"},
		{"phase:from=-1s,to=8s,factor=20,base=const:1ms", "from -1s is outside [0, 1h0m0s]"},
		{"phase:from=0s,to=2h,factor=20,base=const:1ms", "to 2h0m0s is outside"},
		{"phase:from=0s,to=1s,factor=0,base=const:1ms", "factor 0 is outside (0, 1000]"},
		{"phase:from=0s,to=1s,factor=1001,base=const:1ms", "factor 1001 is outside"},
		{"phase:from=0s,to=1s,factor=NaN,base=const:1ms", "factor NaN is outside"},
		{"phase:from=0s,to=1s,factor=slow,base=const:1ms", `factor "slow" is not a number`},
		{"phase:from=0s,to=1s,factor=2,base=const:2m", "phase: base: const: duration 2m0s is above the limit"},
		{"phase:from=soon,to=1s,factor=2,base=const:1ms", `from: "soon" is not a duration such as 5ms; want phase:from=DURATION,to=DURATION,factor=X,base=MODEL`},
	} {
		_, err := ParseModel(c.in)
		if err == nil {
			t.Errorf("ParseModel(%q) accepted", c.in)
			continue
		}
		if !errors.Is(err, ErrModel) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseModel(%.40q) = %v; want ErrModel and %q", c.in, err, c.want)
		}
	}
}

func TestStartFixtureValidatesModel(t *testing.T) {
	for _, m := range []Model{
		Constant(-1),
		Lognormal{P50: 8 * time.Millisecond},
		Straggler{Fraction: 2, Fast: time.Millisecond, Slow: time.Second},
		SlowIDs{IDs: []uint64{1}, Fast: time.Second, Slow: time.Millisecond},
		Stalls{Every: time.Second, For: time.Millisecond},
		Stalls{Every: time.Second, For: time.Millisecond, Base: Constant(time.Hour)},
		Phase{From: time.Second, To: 2 * time.Second, Factor: 2},
		Phase{From: 2 * time.Second, To: time.Second, Factor: 2, Base: Constant(time.Millisecond)},
		Phase{From: 0, To: time.Second, Factor: math.Inf(1), Base: Constant(time.Millisecond)},
	} {
		f, err := StartFixture(FixtureConfig{Name: "bad", Model: m})
		if err == nil {
			f.Close()
			t.Errorf("%#v accepted", m)
		} else if !errors.Is(err, ErrModel) {
			t.Errorf("%#v: %v does not wrap ErrModel", m, err)
		}
	}
	if _, err := StartFixture(FixtureConfig{Capacity: -1}); err == nil || errors.Is(err, ErrModel) {
		t.Errorf("negative capacity: %v", err)
	}
	// Models of other packages are not judged.
	var seen []Request
	f, err := StartFixture(FixtureConfig{Model: recordModel{seen: &seen}})
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func FuzzParseModel(f *testing.F) {
	for _, s := range []string{
		"const:5ms",
		"lognormal:p50=8ms,p99=90ms",
		"straggler:frac=0.05,fast=1ms,slow=40ms",
		"slowids:ids=3/17/42,fast=1ms,slow=80ms,primary",
		"stalls:every=1s,for=100ms,base=const:1ms",
		"stalls:every=1s,for=100ms,base=stalls:every=10ms,for=1ms,base=slowids:ids=1,fast=0s,slow=1ms",
		"phase:from=8s,to=20s,factor=20,base=lognormal:p50=2ms,p99=10ms",
		"straggler:frac=1e-3 , fast = 1us,slow=1.5ms",
		"lognormal:p50=8ms,p99",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseModel(s)
		if err != nil {
			if m != nil || !errors.Is(err, ErrModel) {
				t.Fatalf("ParseModel(%q) = %v, %v", s, m, err)
			}
			return
		}
		text := m.String()
		again, err := ParseModel(text)
		if err != nil {
			t.Fatalf("ParseModel(%q) = %v, whose String %q does not parse: %v", s, m, text, err)
		}
		if again.String() != text || !reflect.DeepEqual(again, m) {
			t.Fatalf("ParseModel(%q): %q re-parses as %q", s, text, again)
		}
		if err := validateModel(m); err != nil {
			t.Fatalf("parsed %q but the fixture refuses it: %v", s, err)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range 3 {
			if d := m.Sample(rng, Request{ID: uint64(i), Hedge: i == 1, At: time.Duration(i) * time.Millisecond}); d < 0 {
				t.Fatalf("%v: negative sample %v", m, d)
			}
		}
	})
}

func BenchmarkSample(b *testing.B) {
	for _, m := range []Model{
		Constant(time.Millisecond),
		Lognormal{P50: 8 * time.Millisecond, P99: 90 * time.Millisecond},
		Straggler{Fraction: 0.05, Fast: time.Millisecond, Slow: 40 * time.Millisecond},
		SlowIDs{IDs: []uint64{3, 17, 42, 99, 1000, 1234, 5000, 9999}, Fast: time.Millisecond, Slow: 80 * time.Millisecond, PrimaryOnly: true},
		Stalls{Every: time.Second, For: 100 * time.Millisecond, Base: Lognormal{P50: time.Millisecond, P99: 10 * time.Millisecond}},
	} {
		kind, _, _ := strings.Cut(m.String(), ":")
		b.Run(kind, func(b *testing.B) {
			b.ReportAllocs()
			rng := rand.New(rand.NewPCG(1, 2))
			var sum time.Duration
			i := uint64(0)
			for b.Loop() {
				sum += m.Sample(rng, Request{ID: i, Hedge: i&1 == 0, At: time.Duration(i) * time.Millisecond})
				i++
			}
			if sum < 0 {
				b.Fatal(sum)
			}
		})
	}
}

func BenchmarkParseModel(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseModel("stalls:every=1s,for=100ms,base=straggler:frac=0.05,fast=1ms,slow=40ms"); err != nil {
			b.Fatal(err)
		}
	}
}

// rank returns the nearest-rank q-quantile of sorted d.
func rank(d []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(d)))) - 1
	return d[min(max(i, 0), len(d)-1)]
}

func TestSpikes(t *testing.T) {
	m := Spikes{Fraction: 0.01, Slow: time.Second, Base: Constant(time.Millisecond)}
	rng := rand.New(rand.NewPCG(5, 6))
	const n = 200000
	slow := 0
	for range n {
		switch d := m.Sample(rng, Request{}); d {
		case time.Second:
			slow++
		case time.Millisecond:
		default:
			t.Fatalf("sample %v", d)
		}
	}
	if got := float64(slow) / n; math.Abs(got-0.01) > 5*math.Sqrt(0.01*0.99/n) {
		t.Errorf("spike share %v, want 0.01", got)
	}
	for _, bad := range []string{"spikes:frac=2,slow=1s,base=const:1ms", "spikes:frac=0.1,slow=0s,base=const:1ms", "spikes:frac=0.1,slow=1s", "spikes:frac=x,slow=1s,base=const:1ms"} {
		if _, err := ParseModel(bad); !errors.Is(err, ErrModel) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestBatchIsTheSlowestKey(t *testing.T) {
	// Each key is slow with probability 0.01: a batch of 10 is slow with
	// probability 1 - 0.99^10, and takes exactly the slow time then.
	m := Batch{Keys: 10, Base: Straggler{Fraction: 0.01, Fast: time.Millisecond, Slow: time.Second}}
	rng := rand.New(rand.NewPCG(7, 8))
	const n = 100000
	slow := 0
	for range n {
		switch d := m.Sample(rng, Request{}); d {
		case time.Second:
			slow++
		case time.Millisecond:
		default:
			t.Fatalf("sample %v", d)
		}
	}
	want := 1 - math.Pow(0.99, 10)
	if got := float64(slow) / n; math.Abs(got-want) > 5*math.Sqrt(want*(1-want)/n) {
		t.Errorf("slow batches %v, want %v", got, want)
	}
	for _, bad := range []string{"batch:keys=0,base=const:1ms", "batch:keys=10001,base=const:1ms", "batch:keys=x,base=const:1ms", "batch:keys=3", "batch:keys=3,base=nope:1"} {
		if _, err := ParseModel(bad); !errors.Is(err, ErrModel) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if err := validateModel(Batch{Keys: 2}); !errors.Is(err, ErrModel) {
		t.Errorf("batch without a base: %v", err)
	}
}

func TestPhase(t *testing.T) {
	ms := time.Millisecond
	m := Phase{From: 8 * time.Second, To: 20 * time.Second, Factor: 20, Base: Constant(3 * ms)}
	for _, c := range []struct{ at, want time.Duration }{
		{0, 3 * ms},
		{8*time.Second - 1, 3 * ms},        // just before the phase
		{8 * time.Second, 60 * ms},         // its first nanosecond
		{15 * time.Second, 60 * ms},        // within it
		{20*time.Second - 1, 60 * ms},      // its last nanosecond
		{20 * time.Second, 3 * ms},         // over (half-open)
		{time.Hour, 3 * ms},                // long after
		{-time.Second, 3 * ms},             // before the fixture started
		{12*time.Second + 500*ms, 60 * ms}, // fractional seconds
	} {
		if got := m.Sample(nil, Request{At: c.at}); got != c.want {
			t.Errorf("arrival at %v: %v, want %v", c.at, got, c.want)
		}
		if m.Active(c.at) != (c.want == 60*ms) {
			t.Errorf("Active(%v) = %v", c.at, m.Active(c.at))
		}
	}
	// The same request draws the same base inside and outside the phase:
	// inside, exactly Factor times it. The base sees the request unchanged.
	base := Lognormal{P50: 2 * ms, P99: 10 * ms}
	p := Phase{From: time.Second, To: 2 * time.Second, Factor: 20, Base: base}
	for i := range uint64(1000) {
		s1, s2 := drawSeeds(7, drawKey{n: i})
		out := p.Sample(rand.New(rand.NewPCG(s1, s2)), Request{ID: i, At: 0})
		in := p.Sample(rand.New(rand.NewPCG(s1, s2)), Request{ID: i, At: 1500 * ms})
		want := base.Sample(rand.New(rand.NewPCG(s1, s2)), Request{ID: i})
		if out != want || in != time.Duration(float64(want)*20) && in != maxModelDuration {
			t.Fatalf("id %d: outside %v, inside %v; base draws %v", i, out, in, want)
		}
	}
	var seen []Request
	rec := Phase{From: 0, To: time.Second, Factor: 2, Base: recordModel{seen: &seen, d: ms}}
	if got := rec.Sample(nil, Request{ID: 4, Hedge: true, At: 10 * ms}); got != 2*ms {
		t.Errorf("recorded base: %v", got)
	}
	if want := []Request{{ID: 4, Hedge: true, At: 10 * ms}}; !reflect.DeepEqual(seen, want) {
		t.Errorf("base saw %v, want %v", seen, want)
	}
	// The product is capped at a minute; a factor below 1 speeds up; a nil
	// base is zero.
	if got := (Phase{To: time.Second, Factor: 1000, Base: Constant(time.Second)}).Sample(nil, Request{}); got != maxModelDuration {
		t.Errorf("capped: %v", got)
	}
	if got := (Phase{To: time.Second, Factor: 0.5, Base: Constant(4 * ms)}).Sample(nil, Request{}); got != 2*ms {
		t.Errorf("speed-up: %v", got)
	}
	if got := (Phase{To: time.Second, Factor: 5}).Sample(nil, Request{}); got != 0 {
		t.Errorf("nil base: %v", got)
	}
}

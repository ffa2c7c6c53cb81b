package report

import (
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// checkCDF asserts what every CDF series promises: X and Y strictly
// increase, Y is in (0, 1] and ends at 1, the ends are the extreme samples,
// and every point is an exact point of the empirical CDF of finite.
func checkCDF(t *testing.T, s Series, finite []float64, maxPoints int) {
	t.Helper()
	sorted := slices.Sorted(slices.Values(finite))
	n := float64(len(sorted))
	if len(s.Points) > maxPoints {
		t.Fatalf("%d points, want at most %d", len(s.Points), maxPoints)
	}
	for i, p := range s.Points {
		if i > 0 && (p.X <= s.Points[i-1].X || p.Y <= s.Points[i-1].Y) {
			t.Fatalf("point %d %v does not increase from %v", i, p, s.Points[i-1])
		}
		le, _ := slices.BinarySearch(sorted, math.Nextafter(p.X, math.Inf(1)))
		if want := float64(le) / n; p.Y != want {
			t.Fatalf("point %v: Y should be the fraction at or below X, %v", p, want)
		}
	}
	last := s.Points[len(s.Points)-1]
	if last.Y != 1 || last.X != sorted[len(sorted)-1] {
		t.Errorf("last point %v, want (max %v, 1)", last, sorted[len(sorted)-1])
	}
	if maxPoints >= 2 && s.Points[0].X != sorted[0] {
		t.Errorf("first point %v, want the minimum %v", s.Points[0], sorted[0])
	}
}

func lognormal(seed uint64, n int) []float64 {
	rng := rand.New(rand.NewPCG(seed, seed))
	out := make([]float64, n)
	for i := range out {
		out[i] = 5 * math.Exp(0.8*rng.NormFloat64())
	}
	return out
}

func TestCDFDownsamplingKeepsQuantilesAndTail(t *testing.T) {
	lat := lognormal(1, 20000)
	sorted := slices.Sorted(slices.Values(lat))
	for _, maxPoints := range []int{200, 500, 1000} {
		s := CDF("lat", lat, maxPoints)
		checkCDF(t, s, lat, maxPoints)
		if len(s.Points) < maxPoints*9/10 {
			t.Errorf("max %d: only %d points used", maxPoints, len(s.Points))
		}
		// The nearest-rank quantiles are points of the series.
		for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
			want := quantile(sorted, q)
			i := slices.IndexFunc(s.Points, func(p Point) bool { return p.Y >= q-1e-12 })
			if p := s.Points[i]; p.X != want || p.Y-q > 1.0/20000+1e-12 {
				t.Errorf("max %d: p%v point %v, want X %v and Y %v", maxPoints, q*100, p, want, q)
			}
		}
		// More than half of the points describe the slowest tenth, and
		// the p99–p100 stretch is not a single segment.
		tail, top := 0, 0
		for _, p := range s.Points {
			if p.Y > 0.9 {
				tail++
			}
			if p.Y > 0.99 {
				top++
			}
		}
		if tail <= len(s.Points)/2 || top < len(s.Points)/5 {
			t.Errorf("max %d: %d points above p90 and %d above p99 of %d", maxPoints, tail, top, len(s.Points))
		}
	}
}

func TestCDFSmallInputsAreExact(t *testing.T) {
	s := CDF("few", []float64{3, 1, 2, 2, math.NaN(), math.Inf(1), 0}, 0)
	want := []Point{{0, 0.2}, {1, 0.4}, {2, 0.8}, {3, 1}}
	if s.Name != "few" || !slices.Equal(s.Points, want) {
		t.Errorf("CDF = %+v, want %v", s, want)
	}
	if s := CDF("none", []float64{math.NaN()}, 10); s.Name != "none" || len(s.Points) != 0 {
		t.Errorf("CDF of no finite samples = %+v", s)
	}
	if s := CDF("one", []float64{7, 7, 7}, 10); !slices.Equal(s.Points, []Point{{7, 1}}) {
		t.Errorf("CDF of ties = %v", s.Points)
	}
}

func TestCDFBounds(t *testing.T) {
	lat := lognormal(2, 5000)
	for _, maxPoints := range []int{1, 2, 3, 4, 6, 7, 10, 50} {
		s := CDF("b", lat, maxPoints)
		if len(s.Points) != maxPoints {
			t.Errorf("max %d: %d points", maxPoints, len(s.Points))
		}
		checkCDF(t, s, lat, maxPoints)
	}
	if s := CDF("d", lat, 0); len(s.Points) != DefaultCDFPoints {
		t.Errorf("default: %d points, want %d", len(s.Points), DefaultCDFPoints)
	}
	if s := CDF("d", lat, -5); len(s.Points) != DefaultCDFPoints {
		t.Errorf("negative max: %d points, want %d", len(s.Points), DefaultCDFPoints)
	}
	// maxPoints of 3 keeps the ends and the median.
	s := CDF("m", lat, 3)
	if med := quantile(slices.Sorted(slices.Values(lat)), 0.5); s.Points[1].X != med {
		t.Errorf("3 points %v, want the median %v in the middle", s.Points, med)
	}
}

func TestCDFWithHeavyTies(t *testing.T) {
	// Quantised latencies: 1000 samples over 50 values, more than 20 points
	// must not break monotonicity or the bound.
	var lat []float64
	for i := range 1000 {
		lat = append(lat, float64(i%50)*0.5)
	}
	s := CDF("q", lat, 20)
	checkCDF(t, s, lat, 20)
}

func TestCDFPlotsOnLogAxis(t *testing.T) {
	lat := append(lognormal(3, 3000), 0, -1)
	s := CDF("with zeros", lat, 100)
	checkCDF(t, s, lat, 100)
	_, svg, caption := renderPlot(t, Plot{LogX: true, Series: []Series{s}})
	if s.Points[0].X != -1 || s.Points[1].X <= 0 {
		t.Fatalf("CDF starts %v, want the minimum -1, then a positive sample", s.Points[:2])
	}
	if n := len(coords(t, svg.all("polyline")[0])); n != len(s.Points)-1 {
		t.Errorf("%d points drawn, want all but the negative one", n)
	}
	if !strings.HasPrefix(caption, `<span class="footnote">1 point with a zero or negative value`) {
		t.Errorf("caption %q", caption)
	}
}

func BenchmarkCDF(b *testing.B) {
	lat := lognormal(4, 100000)
	b.ReportAllocs()
	for b.Loop() {
		CDF("b", lat, DefaultCDFPoints)
	}
}

func BenchmarkRenderSample(b *testing.B) {
	p := samplePage()
	b.ReportAllocs()
	for b.Loop() {
		if err := RenderHTML(io.Discard, p); err != nil {
			b.Fatal(err)
		}
	}
}

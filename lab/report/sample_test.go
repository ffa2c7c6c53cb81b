package report

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestWriteSample writes the sample page to the path in REPORT_SAMPLE, for
// looking at the rendering in a browser or taking a screenshot:
//
//	REPORT_SAMPLE=/tmp/report-sample.html go test ./lab/report -run TestWriteSample
//	chromium --headless --no-sandbox --disable-gpu --window-size=1200,2400 \
//	    --screenshot=/tmp/report-sample.png file:///tmp/report-sample.html
func TestWriteSample(t *testing.T) {
	path := os.Getenv("REPORT_SAMPLE")
	if path == "" {
		t.Skip("set REPORT_SAMPLE=/path/to/file.html to write the sample page")
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := RenderHTML(f, samplePage()); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", path)
}

// TestSamplePage checks the realistic page end to end: every plot becomes
// one SVG with its caption, nothing is dropped, and nothing needs the
// network or a script.
func TestSamplePage(t *testing.T) {
	p := samplePage()
	var buf bytes.Buffer
	if err := RenderHTML(&buf, p); err != nil {
		t.Fatal(err)
	}
	doc := buf.String()
	plots := 0
	for _, s := range p.Sections {
		plots += len(s.Plots)
	}
	if got := strings.Count(doc, "<svg "); got != plots {
		t.Errorf("%d <svg> elements, want %d", got, plots)
	}
	if got := strings.Count(doc, "<figcaption>"); got != plots {
		t.Errorf("%d figcaptions, want %d", got, plots)
	}
	for _, bad := range []string{"<script", "http://", "https://", "url(http", "@import", `class="footnote"`} {
		if strings.Contains(strings.ReplaceAll(doc, `xmlns="http://www.w3.org/2000/svg"`, ""), bad) {
			t.Errorf("sample page contains %q", bad)
		}
	}
	if !strings.Contains(doc, ">knee: hedge after p95 (") {
		t.Error("the frontier's knee note is missing")
	}
}

// simulate draws plain read latencies (ms) from a lognormal body with 4%
// stragglers ten to forty times slower, and the latencies of the same
// requests hedged after delay ms to an independent replica.
func simulate(rng *rand.Rand, n int, delay float64) (plain, hedged []float64) {
	draw := func() float64 {
		v := 4 * math.Exp(0.45*rng.NormFloat64())
		if rng.Float64() < 0.04 {
			v *= 10 + 30*rng.Float64()
		}
		return v
	}
	for range n {
		a := draw()
		plain = append(plain, a)
		h := a
		if a > delay {
			h = math.Min(a, delay+draw())
		}
		hedged = append(hedged, h)
	}
	return plain, hedged
}

func quantile(sorted []float64, q float64) float64 {
	return sorted[min(max(int(math.Ceil(q*float64(len(sorted))))-1, 0), len(sorted)-1)]
}

func samplePage() Page {
	rng := rand.New(rand.NewPCG(2013, 1))
	base, _ := simulate(rng, 5000, math.Inf(1))
	sorted := slices.Sorted(slices.Values(base))
	p95 := quantile(sorted, 0.95)
	_, hedged := simulate(rand.New(rand.NewPCG(2013, 1)), 5000, p95)
	hs := slices.Sorted(slices.Values(hedged))

	// The frontier: p99 against extra attempts as the hedge delay moves from
	// the median to p99.9 of the plain latency.
	var frontier Series
	frontier.Name = "hedge after delay (p50 … p99.9 of plain latency)"
	frontier.Marker = true
	var knee Note
	for _, q := range []float64{0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.93, 0.95, 0.97, 0.98, 0.99, 0.999} {
		d := quantile(sorted, q)
		plain, h := simulate(rand.New(rand.NewPCG(7, 7)), 5000, d)
		extra := 0
		for _, v := range plain {
			if v > d {
				extra++
			}
		}
		pt := Point{X: 100 * float64(extra) / float64(len(plain)), Y: quantile(slices.Sorted(slices.Values(h)), 0.99)}
		frontier.Points = append(frontier.Points, pt)
		if q == 0.95 {
			knee = Note{X: pt.X, Y: pt.Y, Text: fmt.Sprintf("knee: hedge after p95 (%.1f ms)", d)}
		}
	}
	plainPt := Series{Name: "no hedging", Points: []Point{{X: 0, Y: quantile(sorted, 0.99)}}, Marker: true}

	// Overload: attempts per request as offered load passes capacity. Without
	// a budget every slow request hedges and the hedges slow the rest.
	var naive, bounded Series
	naive = Series{Name: "hedging without budget", Marker: true, Dashed: true}
	bounded = Series{Name: "tailgate: 5% budget + gate", Marker: true}
	for load := 10.0; load <= 150; load += 10 {
		hedgeShare := 0.05 + 0.95/(1+math.Exp(-(load-85)/8))
		naive.Points = append(naive.Points, Point{X: load, Y: 1 + hedgeShare})
		b := 1 + math.Min(hedgeShare, 0.05)
		if load >= 90 {
			b = 1 + 0.05*math.Max(0, (100-load)/10)
		}
		bounded.Points = append(bounded.Points, Point{X: load, Y: b})
	}

	// A timeline: p99 per second through a 20-second replica slowdown.
	var tlBase, tlHedged Series
	tlBase = Series{Name: "plain p99", Dashed: true}
	tlHedged = Series{Name: "hedged p99"}
	for s := 0; s <= 60; s++ {
		slow := 1.0
		if s >= 20 && s < 40 {
			slow = 3
		}
		tlBase.Points = append(tlBase.Points, Point{X: float64(s), Y: slow * (60 + 8*math.Sin(float64(s)))})
		tlHedged.Points = append(tlHedged.Points, Point{X: float64(s), Y: (1 + (slow-1)*0.15) * (14 + 2*math.Cos(float64(s)))})
	}

	row := func(q float64, name string) []string {
		b, h := quantile(sorted, q), quantile(hs, q)
		return []string{name, fmt.Sprintf("%.2f ms", b), fmt.Sprintf("%.2f ms", h), fmt.Sprintf("%+.0f%%", 100*(h-b)/b)}
	}
	extra := 0
	for _, v := range base {
		if v > p95 {
			extra++
		}
	}
	return Page{
		Title:    "Hedged reads against two straggling replicas",
		Subtitle: "Plain reads versus reads hedged after the p95 delay, 5000 requests each on loopback.",
		Meta: [][2]string{
			{"seed", "2013"}, {"requests", "5000 per arm"}, {"replicas", "2 × lognormal(4 ms, σ 0.45) + 4% stragglers"},
			{"hedge delay", fmt.Sprintf("p95 = %.1f ms", p95)}, {"budget", "5% of admissions, burst 10"},
			{"Go", "go1.26.8 linux/amd64"}, {"cores", "2"}, {"date", "2026-03-14T10:00:00Z"},
		},
		Sections: []Section{
			{
				Heading: "Latency distribution",
				Text: "Hedging leaves the body of the distribution alone and cuts the tail: a request that has not answered by the hedge delay gets a second chance on the other replica.\n\n" +
					"Curves further left are faster; the gap at the top is the tail that hedging removes.",
				Plots: []Plot{{
					Title: "Latency CDF, plain vs hedged", XLabel: "latency (ms, log scale)", YLabel: "fraction of requests ≤ latency",
					LogX:    true,
					Series:  []Series{func() Series { s := CDF("plain", base, 400); s.Dashed = true; return s }(), CDF("hedged after p95", hedged, 400)},
					Caption: "Read across at a fraction to find its latency: at 0.99 the dashed plain curve is far right of the hedged one.",
				}},
				Tables: []Table{{
					Title:   "Percentiles",
					Columns: []string{"percentile", "plain", "hedged", "change"},
					Rows:    [][]string{row(0.5, "p50"), row(0.9, "p90"), row(0.99, "p99"), row(0.999, "p99.9"), {"extra attempts", "0%", fmt.Sprintf("%.1f%%", 100*float64(extra)/5000), ""}},
				}},
			},
			{
				Heading: "Latency against extra work",
				Text:    "Each marker is one hedge delay. A shorter delay buys a lower p99 with more duplicate attempts; past the knee each extra percent of work buys little.",
				Plots: []Plot{{
					Title: "p99 latency vs extra attempts", XLabel: "extra attempts (% of requests)", YLabel: "p99 latency (ms)",
					LogY:    true,
					Series:  []Series{frontier, plainPt},
					Notes:   []Note{knee},
					Caption: "Lower and further left is better; the knee marks the delay where the curve flattens.",
				}},
			},
			{
				Heading: "Overload",
				Text:    "Past capacity, unbudgeted hedging doubles the work exactly when the system can least afford it; the budget and the gate keep attempts per request near one.",
				Plots: []Plot{{
					Title: "Amplification under overload", XLabel: "offered load (% of capacity)", YLabel: "attempts per request",
					Series:  []Series{naive, bounded},
					Caption: "A flat line at 1.0 means no amplification; the dashed line shows a hedge storm beginning at about 80% load.",
				}},
			},
			{
				Heading: "Timeline",
				Text:    "One replica slows down threefold between 20 s and 40 s.",
				Plots: []Plot{{
					Title: "p99 per second through a replica slowdown", XLabel: "time (s)", YLabel: "p99 latency (ms)",
					Series:  []Series{tlBase, tlHedged},
					Caption: "The hedged p99 barely moves while the slow replica is avoided by the hedge.",
				}},
			},
		},
	}
}

package report

import (
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// A CDF out of all requests tops out at the share that got a latency: the
// rest never arrived.
func TestCDFOutOfTopsOutAtAnsweredShare(t *testing.T) {
	s := CDFOutOf("few", []float64{3, 1, 2, 2, math.NaN(), 0}, 10, 0)
	want := []Point{{0, 0.1}, {1, 0.2}, {2, 0.4}, {3, 0.5}}
	if s.Name != "few" || !slices.Equal(s.Points, want) {
		t.Errorf("CDFOutOf = %+v, want %v", s, want)
	}
	// +Inf samples are requests that never answered: they count in the
	// total whether or not the caller counted them.
	if s := CDFOutOf("inf", []float64{1, math.Inf(1), 2, math.Inf(1)}, 0, 0); !slices.Equal(s.Points, []Point{{1, 0.25}, {2, 0.5}}) {
		t.Errorf("CDFOutOf with +Inf samples = %v", s.Points)
	}
	if s := CDFOutOf("inf", []float64{1, math.Inf(1), 2, math.Inf(1)}, 8, 0); !slices.Equal(s.Points, []Point{{1, 0.125}, {2, 0.25}}) {
		t.Errorf("CDFOutOf with +Inf samples and a total = %v", s.Points)
	}
	// A total below the samples cannot be: it is taken as the samples.
	if s := CDFOutOf("low", []float64{1, 2}, 1, 0); !slices.Equal(s.Points, []Point{{1, 0.5}, {2, 1}}) {
		t.Errorf("CDFOutOf with a short total = %v", s.Points)
	}
	if s := CDFOutOf("none", nil, 5, 0); len(s.Points) != 0 {
		t.Errorf("no samples: %v", s.Points)
	}
	// Downsampled, it keeps CDF's points, scaled.
	lat := lognormal(3, 5000)
	full, part := CDF("a", lat, 100), CDFOutOf("a", lat, 10000, 100)
	if len(full.Points) != len(part.Points) || part.Points[len(part.Points)-1].Y != 0.5 {
		t.Fatalf("downsampled: %d points, %d; ends at %v", len(full.Points), len(part.Points), part.Points[len(part.Points)-1])
	}
	for i := range full.Points {
		if full.Points[i].X != part.Points[i].X || math.Abs(full.Points[i].Y/2-part.Points[i].Y) > 1e-12 {
			t.Fatalf("point %d: %v against %v", i, part.Points[i], full.Points[i])
		}
	}
	// CDF itself is unchanged: Y counts finite samples only.
	if s := CDF("c", []float64{1, math.Inf(1)}, 0); !slices.Equal(s.Points, []Point{{1, 1}}) {
		t.Errorf("CDF = %v", s.Points)
	}
}

// Long unbroken strings (model specs, URLs) wrap instead of running out of
// the page.
func TestLongStringsWrap(t *testing.T) {
	long := "lognormal:p50=8ms,p99=90ms+spikes:every=250ms,for=40ms,extra=120ms+batch:size=16,wait=2ms"
	var b strings.Builder
	err := RenderHTML(&b, Page{Title: long, Sections: []Section{{Heading: long, Text: long,
		Tables: []Table{{Title: long, Columns: []string{long, "p99 ms"}, Rows: [][]string{{long, "12.5"}}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	doc := b.String()
	rules := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^([^{}\n]+)\{([^}]*)\}`).FindAllStringSubmatch(doc, -1) {
		for _, sel := range strings.Split(m[1], ",") {
			rules[strings.TrimSpace(sel)] += m[2] + ";"
		}
	}
	for _, sel := range []string{"h1", "h2", "p", "caption", "th.w", "td.w", "figcaption"} {
		// Table cells break anywhere only when they hold a word too long
		// for any column (class w); elsewhere break-word keeps a short
		// word like "frontier" whole (TestTableCellsKeepWords).
		if !strings.Contains(rules[sel], "overflow-wrap:anywhere") {
			t.Errorf("%s does not wrap long words: %q", sel, rules[sel])
		}
		if strings.Contains(rules[sel], "white-space:nowrap") {
			t.Errorf("%s cannot wrap: %q", sel, rules[sel])
		}
	}
	if !strings.Contains(doc, `<td class="w">`+long) || !strings.Contains(doc, `<th scope="col" class="w">`+long) {
		t.Errorf("the long cells are not marked to break anywhere")
	}
	// Numbers still do not break.
	if !strings.Contains(rules["td.r"], "white-space:nowrap") {
		t.Errorf("numeric cells may break: %q", rules["td.r"])
	}
}

// The reviewer's check of log-axis positions: equal ratios are equal
// distances and equal CDF steps equal heights. It held before; kept as a
// guard.
func TestLogAxisPositionsAreLogarithmic(t *testing.T) {
	p := Plot{Title: "t", LogX: true, Series: []Series{CDF("a", []float64{1, 10, 100, 1000}, 0)}}
	var b strings.Builder
	if err := RenderHTML(&b, Page{Sections: []Section{{Plots: []Plot{p}}}}); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`<polyline[^>]*points="([^"]*)"`).FindStringSubmatch(b.String())
	if m == nil {
		t.Fatal("no polyline")
	}
	var xs, ys []float64
	for _, pr := range strings.Fields(m[1]) {
		x, y, _ := strings.Cut(pr, ",")
		fx, _ := strconv.ParseFloat(x, 64)
		fy, _ := strconv.ParseFloat(y, 64)
		xs, ys = append(xs, fx), append(ys, fy)
	}
	if len(xs) != 4 {
		t.Fatalf("points %v", m[1])
	}
	for i := 2; i < 4; i++ {
		if d0, d := xs[1]-xs[0], xs[i]-xs[i-1]; math.Abs(d-d0) > 0.2 || d <= 0 {
			t.Errorf("decades not equally spaced: %v", xs)
		}
		if e0, e := ys[0]-ys[1], ys[i-1]-ys[i]; math.Abs(e-e0) > 0.2 || e <= 0 {
			t.Errorf("CDF steps not equal or not rising: %v", ys)
		}
	}
}

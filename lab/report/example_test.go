package report_test

import (
	"fmt"
	"math"
	"os"
	"regexp"
	"strings"

	"github.com/tailgate-dev/tailgate/lab/report"
)

func Example() {
	// Latencies in milliseconds as a lab run would collect them: most
	// requests take 2-6 ms and every twentieth straggles at 80 ms, unless
	// a hedge after 10 ms rescues it (10 ms + a fresh 2-6 ms attempt).
	var plain, hedged []float64
	for i := range 1000 {
		v := 2 + 4*float64(i%97)/96
		if i%20 == 0 {
			plain, hedged = append(plain, 80), append(hedged, 10+v)
			continue
		}
		plain, hedged = append(plain, v), append(hedged, v)
	}
	baseline := report.CDF("plain", plain, 200)
	baseline.Dashed = true

	page := report.Page{
		Title: "Hedged reads",
		Meta:  [][2]string{{"seed", "1"}, {"requests", "1000 per arm"}},
		Sections: []report.Section{{
			Heading: "Latency",
			Text:    "Hedging after 10 ms cuts the straggler tail.",
			Plots: []report.Plot{{
				Title:   "Latency CDF",
				XLabel:  "latency (ms)",
				YLabel:  "fraction of requests ≤ latency",
				LogX:    true,
				Series:  []report.Series{baseline, report.CDF("hedged after 10 ms", hedged, 200)},
				Caption: "Curves further left are faster.",
			}},
			Tables: []report.Table{{
				Columns: []string{"arm", "p99"},
				Rows:    [][]string{{"plain", "80 ms"}, {"hedged", "15.9 ms"}},
			}},
		}},
	}
	var b strings.Builder
	if err := report.RenderHTML(&b, page); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	doc := b.String()
	last := baseline.Points[len(baseline.Points)-1]
	fmt.Println("plain CDF points:", len(baseline.Points), "ending at", last)
	fmt.Println("plots:", strings.Count(doc, "<svg "), "tables:", strings.Count(doc, "<table>"), "scripts:", strings.Count(doc, "<script"))
	var xticks []string // the x tick labels are the numbers centred under the axis
	for _, m := range regexp.MustCompile(`text-anchor="middle">([0-9.]+)</text>`).FindAllStringSubmatch(doc, -1) {
		xticks = append(xticks, m[1])
	}
	fmt.Println("log x axis labels:", xticks)
	fmt.Println("numbers right-aligned:", strings.Contains(doc, `<td class="r">80 ms</td>`))
	// Output:
	// plain CDF points: 98 ending at {80 1}
	// plots: 1 tables: 1 scripts: 0
	// log x axis labels: [2 5 10 20 50 100]
	// numbers right-aligned: true
}

func ExampleCDF() {
	// Ten samples, one of them an unusable NaN: every point is exact, with
	// Y the fraction of the nine finite samples at or below X.
	lat := []float64{4, 1, 3, 2, 2, 9, 5, 3, 2, math.NaN()}
	for _, p := range report.CDF("lat", lat, 0).Points {
		fmt.Printf("%g ms: %.3f\n", p.X, p.Y)
	}
	// Output:
	// 1 ms: 0.111
	// 2 ms: 0.444
	// 3 ms: 0.667
	// 4 ms: 0.778
	// 5 ms: 0.889
	// 9 ms: 1.000
}

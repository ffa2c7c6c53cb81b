package exp

import (
	"io"
	"math"
	"strconv"
	"time"

	"github.com/tailgate-dev/tailgate/lab/load"
	"github.com/tailgate-dev/tailgate/lab/report"
)

// Sectioner is an experiment report that can show itself in the HTML page.
type Sectioner interface {
	Section() report.Section
}

// WriteHTML writes one self-contained HTML page holding the given reports.
func WriteHTML(w io.Writer, title string, env Environment, parts ...Sectioner) error {
	p := report.Page{
		Title:    title,
		Subtitle: "Tailgate lab: what hedging and fan-out policies gain in latency, and what they cost in duplicate work",
		Meta: [][2]string{
			{"Go", env.GoVersion},
			{"CPUs", strconv.Itoa(env.CPUs) + " (GOMAXPROCS " + strconv.Itoa(env.GOMAXPROCS) + ")"},
			{"Seed", strconv.FormatUint(env.Seed, 10)},
			{"Started", env.Started.Format(time.RFC3339)},
		},
	}
	for _, s := range parts {
		p.Sections = append(p.Sections, s.Section())
	}
	return report.RenderHTML(w, p)
}

// F1, F2 and F3 write a figure with one, two and three decimals.
func F1(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }
func F2(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) }
func F3(x float64) string { return strconv.FormatFloat(x, 'f', 3, 64) }

// Cell writes a latency percentile in ms (see load.Summary) for a table: "failed" when it is
// infinite, as the request at its rank got no good answer, and "—" when
// there is none (no requests).
func Cell(x float64) string {
	switch {
	case math.IsInf(x, 1):
		return "failed"
	case math.IsNaN(x) || math.IsInf(x, -1):
		return "—"
	}
	return F1(x)
}

// Drawable reports whether a value can be placed on a plot.
func Drawable(x float64) bool { return !math.IsInf(x, 0) && !math.IsNaN(x) }

// LatencyCDF is the CDF series of a side's successful latencies out of all
// its requests, so that it tops out at the share that succeeded.
func LatencyCDF(name string, latenciesMs []float64, requests int, dashed bool) report.Series {
	s := report.CDFOutOf(name, latenciesMs, requests, 300)
	s.Dashed = dashed
	return s
}

// cdfCaption ends the caption of a latency CDF.
const cdfCaption = " A curve rises to the share of reads that succeeded: failed reads never arrive, so a curve that stops short of 1 shows them."

// LatencyColumns are the columns of a latency table, then extra ones.
func LatencyColumns(extra ...string) []string {
	return append([]string{"", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms"}, extra...)
}

// LatencyRow is the row of LatencyColumns for s, named name, then extra
// cells.
func LatencyRow(name string, s load.Summary, extra ...string) []string {
	return append([]string{name, Cell(s.P50Ms), Cell(s.P90Ms), Cell(s.P99Ms), Cell(s.P999Ms), Cell(s.MaxMs)}, extra...)
}

// ReadsCDF is the plot of reads' latency CDFs (series of LatencyCDF),
// captioned with caption and what every such plot says of failed reads.
func ReadsCDF(caption string, series ...report.Series) report.Plot {
	return report.Plot{Title: "Latency CDF", XLabel: "latency (ms, log scale)", YLabel: "fraction of reads", LogX: true, YMin: 0, YMax: 1,
		Series: series, Caption: caption + cdfCaption}
}

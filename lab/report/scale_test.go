package report

import (
	"math"
	"strings"
	"testing"
)

func labels(ts []tick) string {
	var out []string
	for _, t := range ts {
		l := t.label
		if l == "" {
			l = "·"
		}
		if t.major {
			l = "[" + l + "]"
		}
		out = append(out, l)
	}
	return strings.Join(out, " ")
}

func TestLogTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   string
	}{
		// Three decades: decades labelled, 2 and 5 ticks unlabelled.
		{0.5, 500, "· [1] · · [10] · · [100] · ·"},
		// Up to about two decades the 2 and 5 ticks are labelled too.
		{1, 50, "[1] 2 5 [10] 20 50"},
		{0.002, 0.05, "0.002 0.005 [0.01] 0.02 0.05"},
		// Inside one decade every mantissa gets a tick.
		{3, 8, "3 4 5 6 7 8"},
		{2, 5, "2 3 4 5"},
		{0.5, 2, "0.5 0.6 0.7 0.8 0.9 [1] 2"},
		// Beyond 8 decades, decades only.
		{1e-3, 1e6, "[0.001] [0.01] [0.1] [1] [10] [100] [1k] [10k] [100k] [1M]"},
		// No 1-9 × 10^k value at all: the ends.
		{3.1, 3.9, "3.1 3.9"},
		// Far from everyday magnitudes labels switch to exponents.
		{1e5, 1e7, "[100k] 200k 500k [1M] 2M 5M [10M]"},
		{1e-5, 1e-4, "[10⁻⁵] 2×10⁻⁵ 5×10⁻⁵ [10⁻⁴]"},
		{2e-4, 0.5, "· · [0.001] · · [0.01] · · [0.1] · ·"},
		{1e-4, 0.5, "[10⁻⁴] · · [10⁻³] · · [10⁻²] · · [10⁻¹] · ·"},
		{0.5, 2e6, "· [1] · · [10] · · [100] · · [1k] · · [10k] · · [100k] · · [1M] ·"},
	} {
		if got := labels(logTicks(c.lo, c.hi)); got != c.want {
			t.Errorf("logTicks(%v, %v) = %s, want %s", c.lo, c.hi, got, c.want)
		}
	}
	// Forty decades: labels every few decades, no sub-ticks, a bounded count.
	ts := logTicks(1e-20, 1e20)
	if len(ts) < 5 || len(ts) > 12 {
		t.Errorf("%d ticks for 40 decades: %s", len(ts), labels(ts))
	}
	for _, tk := range ts {
		if !tk.major || tk.label == "" {
			t.Errorf("tick %+v on a huge range, want labelled decades only", tk)
		}
	}
}

func TestLinearTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   string
	}{
		{0, 1, "0 0.2 0.4 0.6 0.8 1.0"},
		{0, 160, "0 50 100 150"},
		{0, 140, "0 20 40 60 80 100 120 140"},
		{-1, 1, "-1.0 -0.5 0 0.5 1.0"},
		{0.3, 0.7, "0.3 0.4 0.5 0.6 0.7"},
		{0, 3e6, "0 0.5M 1.0M 1.5M 2.0M 2.5M 3.0M"},
		{0, 1.2e9, "0 0.2G 0.4G 0.6G 0.8G 1.0G 1.2G"},
		{0, 5e-6, "0 1×10⁻⁶ 2×10⁻⁶ 3×10⁻⁶ 4×10⁻⁶ 5×10⁻⁶"},
		{1e15, 1e15 + 4, "1.000000000000000×10¹⁵ 1.000000000000001×10¹⁵ 1.000000000000002×10¹⁵ 1.000000000000003×10¹⁵ 1.000000000000004×10¹⁵"},
		{0, 1e-3, "0 0.0002 0.0004 0.0006 0.0008 0.0010"},
		{-2e6, 2e6, "-2M -1M 0 1M 2M"},
		{1, 1.00004, "1.00000 1.00001 1.00002 1.00003 1.00004"},
	} {
		var got []string
		for _, tk := range linearTicks(c.lo, c.hi, 5) {
			got = append(got, tk.label)
		}
		if s := strings.Join(got, " "); s != c.want {
			t.Errorf("linearTicks(%v, %v) = %s, want %s", c.lo, c.hi, s, c.want)
		}
	}
}

func TestNiceRanges(t *testing.T) {
	for _, c := range []struct{ lo, hi, wlo, whi float64 }{
		{0.7, 480, 0.5, 500},
		{1, 100, 1, 100},
		{3, 3.5, 2, 5},
		{0.013, 0.21, 0.01, 0.5},
	} {
		if lo, hi := niceLogRange(c.lo, c.hi); math.Abs(lo-c.wlo) > 1e-15 || math.Abs(hi-c.whi) > 1e-12 {
			t.Errorf("niceLogRange(%v, %v) = %v, %v; want %v, %v", c.lo, c.hi, lo, hi, c.wlo, c.whi)
		}
	}
	if lo, hi := niceLinearRange(3, 97, 5); lo != 0 || hi != 100 {
		t.Errorf("niceLinearRange(3, 97) = %v, %v", lo, hi)
	}
	// Values at the edge of float64 cannot be widened; the data range stands.
	if lo, hi := resolveRange(0, 0, []float64{-1e308, 1e308}, false, 5); !usable(lo, hi, false) {
		t.Errorf("huge range %v, %v", lo, hi)
	}
	if lo, hi := resolveRange(0, 0, []float64{-math.MaxFloat64, math.MaxFloat64}, false, 5); lo != 0 || hi != 1 {
		t.Errorf("range wider than float64 = %v, %v; want the fallback 0, 1", lo, hi)
	}
}

func TestFormatValue(t *testing.T) {
	for v, want := range map[float64]string{
		0: "0", 1: "1", 12.3456: "12.35", 0.5: "0.5", 99999: "99999", 123456: "123456",
		2.5e6: "2.5e6", 0.00012: "1.2e-4", -3.14159: "-3.142",
	} {
		if got := formatValue(v); got != want {
			t.Errorf("formatValue(%v) = %q, want %q", v, got, want)
		}
	}
	if got := formatExp(1.5, 2); got != "1.5" {
		t.Errorf("formatExp(1.5) = %q", got)
	}
}

func TestTextWidthErrsWide(t *testing.T) {
	// Widths measured in Chromium with DejaVu Sans at 12px.
	for s, measured := range map[string]float64{
		"hedge after delay (p50 … p99.9 of plain latency)": 292.8,
		"no hedging":                     67.5,
		"tailgate: 5% budget + gate":     163.8,
		"0123456789":                     76.4,
		"fraction of requests ≤ latency": 178.9,
		"ABCDEFGHIJKLMNOPQRSTUVWXYZ":     209.7,
	} {
		if got := textWidth(s, 12); got < measured || got > measured*1.15 {
			t.Errorf("textWidth(%q) = %.1f, measured %.1f", s, got, measured)
		}
	}
}

func TestClipSegment(t *testing.T) {
	box := [4]float64{0, 0, 10, 10}
	for _, c := range []struct {
		a, b, wa, wb [2]float64
		ok           bool
	}{
		{[2]float64{2, 2}, [2]float64{8, 8}, [2]float64{2, 2}, [2]float64{8, 8}, true},
		{[2]float64{-10, 5}, [2]float64{20, 5}, [2]float64{0, 5}, [2]float64{10, 5}, true},
		{[2]float64{5, -10}, [2]float64{5, 5}, [2]float64{5, 0}, [2]float64{5, 5}, true},
		{[2]float64{-5, 15}, [2]float64{15, -5}, [2]float64{0, 10}, [2]float64{10, 0}, true},
		{[2]float64{1e300, 5}, [2]float64{5, 5}, [2]float64{10, 5}, [2]float64{5, 5}, true},
		{[2]float64{-1e300, 3}, [2]float64{1e300, 7}, [2]float64{0, 5}, [2]float64{10, 5}, true},
		{[2]float64{5, 1e300}, [2]float64{5, 6}, [2]float64{5, 10}, [2]float64{5, 6}, true},
		{[2]float64{-5, -5}, [2]float64{-1, 20}, [2]float64{}, [2]float64{}, false},       // left of the box
		{[2]float64{-5, 4}, [2]float64{4, 15}, [2]float64{}, [2]float64{}, false},         // passes the corner
		{[2]float64{1e300, -1e299}, [2]float64{20, 9}, [2]float64{}, [2]float64{}, false}, // rounding must not let it in
		{[2]float64{-1, 11}, [2]float64{11, 11}, [2]float64{}, [2]float64{}, false},
		{[2]float64{math.Inf(1), 5}, [2]float64{5, 5}, [2]float64{}, [2]float64{}, false},
	} {
		a, b, ok := clipSegment(c.a, c.b, box)
		if ok != c.ok || (ok && (dist(a, c.wa) > 1e-9 || dist(b, c.wb) > 1e-9)) {
			t.Errorf("clipSegment(%v, %v) = %v, %v, %v; want %v, %v, %v", c.a, c.b, a, b, ok, c.wa, c.wb, c.ok)
		}
	}
	runs := clipRuns([][2]float64{{-5, 5}, {5, 5}, {5, 20}, {6, 20}, {6, 5}, {8, 5}}, box)
	if len(runs) != 2 || len(runs[0]) != 3 || len(runs[1]) != 3 {
		t.Errorf("clipRuns = %v, want two runs of three points", runs)
	}
}

func dist(a, b [2]float64) float64 { return math.Hypot(a[0]-b[0], a[1]-b[1]) }

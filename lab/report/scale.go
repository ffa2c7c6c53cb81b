package report

import (
	"math"
	"strconv"
	"strings"
)

// axis maps data values on one dimension to SVG coordinates.
type axis struct {
	log    bool
	lo, hi float64 // the shown range; both positive on a log axis
	p0, p1 float64 // the coordinates of lo and hi (p1 < p0 for a y axis)
}

// pos returns the coordinate of v, which must be positive on a log axis.
func (a axis) pos(v float64) float64 {
	var t float64
	if a.log {
		t = (math.Log10(v) - math.Log10(a.lo)) / (math.Log10(a.hi) - math.Log10(a.lo))
	} else {
		t = (v - a.lo) / (a.hi - a.lo)
	}
	return a.p0 + t*(a.p1-a.p0)
}

// tick is a tick mark; major ticks get a stronger gridline. An empty label
// means a tick without a label.
type tick struct {
	v     float64
	major bool
	label string
}

// resolveRange picks the shown range of an axis. A (0, 0) pair means
// automatic; any other pair is used as given when it is usable (min < max),
// and a non-positive minimum on a log axis is taken from the data, but at
// least a decade below max, so a caller can write XMin: 0, XMax: 1000 on a
// latency axis and mean "up to one second".
// Automatic ranges are widened to nice values so that the ends carry ticks
// (target is the number of tick intervals wanted on a linear axis).
// vals holds the finite values that can be drawn (positive ones on a log axis).
func resolveRange(min, max float64, vals []float64, log bool, target int) (lo, hi float64) {
	dlo, dhi, ok := extent(vals)
	if min != 0 || max != 0 {
		lo, hi = min, max
		if log && lo <= 0 {
			lo = hi / 10 // at least a decade, more if the data reach lower
			if ok {
				lo = math.Min(dlo, lo)
			}
		}
		if usable(lo, hi, log) {
			return lo, hi
		}
	}
	if !ok {
		if log {
			return 1, 10
		}
		return 0, 1
	}
	if dlo == dhi { // a flat series: pad so that it sits inside, not on the frame
		if log {
			dlo, dhi = dlo/2, dhi*2
		} else if d := math.Abs(dlo) * 0.1; d > 0 {
			dlo, dhi = dlo-d, dhi+d
		} else {
			dlo, dhi = dlo-1, dhi+1
		}
	}
	if log {
		lo, hi = niceLogRange(dlo, dhi)
	} else {
		lo, hi = niceLinearRange(dlo, dhi, target)
	}
	if !usable(lo, hi, log) { // values at the edge of float64: give up on niceness
		lo, hi = dlo, dhi
	}
	if !usable(lo, hi, log) {
		if log {
			return 1, 10
		}
		return 0, 1
	}
	return lo, hi
}

func usable(lo, hi float64, log bool) bool {
	if !finite(lo) || !finite(hi) || !(lo < hi) || !finite(hi-lo) {
		return false
	}
	return !log || lo > 0
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func extent(vals []float64) (lo, hi float64, ok bool) {
	if len(vals) == 0 {
		return 0, 0, false
	}
	lo, hi = vals[0], vals[0]
	for _, v := range vals[1:] {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	return lo, hi, true
}

// niceStep returns the 1, 2 or 5 × 10^k step that divides span into about
// target intervals, rounding geometrically (at √2, √10 and √50) so that the
// number of intervals stays within a factor of about 1.4 of target.
func niceStep(span float64, target int) float64 {
	raw := span / float64(target)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	switch f := raw / mag; {
	case f < math.Sqrt2:
		return mag
	case f < math.Sqrt(10):
		return 2 * mag
	case f < math.Sqrt(50):
		return 5 * mag
	default:
		return 10 * mag
	}
}

// eps absorbs floating-point error when values that should be multiples of a
// step are compared with it.
const eps = 1e-9

// niceLinearRange widens [lo, hi] to multiples of the step that ticks for
// target intervals will use, so that both ends carry a tick.
func niceLinearRange(lo, hi float64, target int) (float64, float64) {
	step := niceStep(hi-lo, target)
	return math.Floor(lo/step+eps) * step, math.Ceil(hi/step-eps) * step
}

// niceLogRange widens [lo, hi] to the nearest 1, 2 or 5 × 10^k values rather
// than whole decades, which would waste up to half the plot on a range of
// 0.5 to 500 ms.
func niceLogRange(lo, hi float64) (float64, float64) {
	nlo, nhi := lo, hi
	d := math.Floor(math.Log10(lo) + eps)
	for _, m := range []float64{5, 2, 1} {
		if v := pow10m(m, d); v <= lo*(1+eps) {
			nlo = v
			break
		}
	}
	d = math.Floor(math.Log10(hi) - eps)
	for _, m := range []float64{1, 2, 5, 10} {
		if v := pow10m(m, d); v >= hi*(1-eps) {
			nhi = v
			break
		}
	}
	return nlo, nhi
}

// pow10m returns m × 10^d, dividing for negative d so that values like 0.5
// and 0.002 come out as the closest float64 to the decimal.
func pow10m(m, d float64) float64 {
	if d < 0 {
		return m / math.Pow(10, -d)
	}
	return m * math.Pow(10, d)
}

// linearTicks returns ticks at multiples of a nice step inside [lo, hi].
func linearTicks(lo, hi float64, target int) []tick {
	step := niceStep(hi-lo, target)
	var ts []tick
	for i := math.Ceil(lo/step - eps); i <= math.Floor(hi/step+eps) && len(ts) <= 4*target; i++ {
		ts = append(ts, tick{v: i * step, major: true})
	}
	labelLinear(ts, step)
	return ts
}

// labelLinear labels all ticks of a linear axis in one style, with as many
// decimals as the step needs (so 0.1 + 0.2 reads "0.3" and neighbours never
// look alike): plain numbers, SI prefixes from a million up ("1.5M" rather
// than "1500000", which has to be counted), and a shared power of ten for
// the very small or when a prefix would need many decimals.
func labelLinear(ts []tick, step float64) {
	amax := 0.0
	for _, t := range ts {
		amax = math.Max(amax, math.Abs(t.v))
	}
	k := int(math.Floor(math.Log10(step) + eps)) // the decade of the step
	label := func(scale float64, decimals int, suffix string) {
		for i, t := range ts {
			if math.Abs(t.v) < step/2 {
				ts[i].label = "0" // not "-0" or "1e-17"
				continue
			}
			ts[i].label = strconv.FormatFloat(t.v/scale, 'f', decimals, 64) + suffix
		}
	}
	e := 0
	if amax > 0 {
		e = int(math.Floor(math.Log10(amax) + eps))
	}
	switch {
	case e >= 6 && e < 21 && e/3*3-k <= 3:
		label(math.Pow(10, float64(e/3*3)), max(e/3*3-k, 0), siPrefix[e/3])
	case e >= -3 && e < 6 && -k <= 9:
		label(1, max(-k, 0), "")
	default:
		label(math.Pow(10, float64(e)), max(e-k, 0), "×10"+superscript(e))
	}
}

var siPrefix = [...]string{"", "k", "M", "G", "T", "P", "E"}

// superscript writes k in superscript digits, for powers of ten in plain
// text ("10⁻⁴"), since a tick label is a single SVG text element.
func superscript(k int) string {
	const digits = "⁰¹²³⁴⁵⁶⁷⁸⁹"
	var b strings.Builder
	for _, r := range strconv.Itoa(k) {
		if r == '-' {
			b.WriteRune('⁻')
			continue
		}
		b.WriteRune([]rune(digits)[r-'0'])
	}
	return b.String()
}

// logTicks returns ticks for a log axis: decades are major and labelled, 2
// and 5 sub-ticks are minor. On short ranges, where decades alone would give
// fewer than two labels, sub-ticks are labelled too; within a decade every
// integer mantissa gets a tick, and as a last resort the ends of the range
// are labelled.
func logTicks(lo, hi float64) []tick {
	d0 := math.Floor(math.Log10(lo) + eps)
	d1 := math.Ceil(math.Log10(hi) - eps)
	// Beyond 8 decades sub-ticks only add clutter, and beyond 15 so would
	// a label per decade.
	stride, subticks := 1.0, d1-d0 <= 8
	if d1-d0 > 15 {
		stride = math.Ceil((d1 - d0) / 10)
	}
	inside := func(v float64) bool { return v >= lo*(1-eps) && v <= hi*(1+eps) }
	const on = "·" // marks a tick to be labelled, until labelLog labels it
	var ts []tick
	for d := d0; d <= d1; d += stride {
		for _, m := range []float64{1, 2, 5} {
			if v := pow10m(m, d); inside(v) && (m == 1 || subticks) {
				ts = append(ts, tick{v: v, major: m == 1})
			}
		}
	}
	labelled := 0
	for i := range ts {
		if ts[i].major {
			ts[i].label = on
			labelled++
		}
	}
	if labelled < 2 || math.Log10(hi/lo) <= 2.1 {
		for i := range ts {
			if ts[i].label == "" {
				ts[i].label = on
				labelled++
			}
		}
	}
	// Within a decade, 2 and 5 alone leave the axis bare: use every mantissa.
	if (labelled < 2 || math.Log10(hi/lo) < 1) && d1-d0 <= 2 {
		ts = ts[:0]
		for d := d0; d <= d1; d++ {
			for m := 1.0; m <= 9; m++ {
				if v := pow10m(m, d); inside(v) {
					ts = append(ts, tick{v: v, major: m == 1, label: on})
				}
			}
		}
		labelled = len(ts)
	}
	if labelled < 2 {
		ts = append([]tick{{v: lo, label: on}}, ts...)
		ts = append(ts, tick{v: hi, label: on})
	}
	labelLog(ts)
	return ts
}

// labelLog labels the marked ticks of a log axis in one style: plain
// numbers ("0.5", "1", "10", "100"), SI prefixes from 1000 up when the axis
// reaches a million ("100k", "1M"), and powers of ten ("10⁻⁴", "2×10⁻⁴")
// when it reaches below 0.001, where zeros would have to be counted.
func labelLog(ts []tick) {
	amin, amax := math.Inf(1), 0.0
	for _, t := range ts {
		if t.label != "" {
			amin, amax = math.Min(amin, t.v), math.Max(amax, t.v)
		}
	}
	for i, t := range ts {
		if t.label == "" {
			continue
		}
		d := int(math.Floor(math.Log10(t.v) + eps))
		switch {
		case amin < 1e-3 || amax >= 1e21:
			m := strconv.FormatFloat(roundSig(t.v/math.Pow(10, float64(d)), 3), 'f', -1, 64)
			if m == "1" {
				ts[i].label = "10" + superscript(d)
			} else {
				ts[i].label = m + "×10" + superscript(d)
			}
		case amax >= 1e6 && d >= 3:
			ts[i].label = strconv.FormatFloat(roundSig(t.v/math.Pow(10, float64(d/3*3)), 4), 'f', -1, 64) + siPrefix[d/3]
		default:
			ts[i].label = strconv.FormatFloat(roundSig(t.v, 4), 'f', -1, 64)
		}
	}
}

// roundSig rounds v to n significant digits, so that labels do not show the
// binary noise of values like 3 × 0.1.
func roundSig(v float64, n int) float64 {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', n, 64), 64)
	return r
}

// formatExp writes v in short scientific notation with prec digits after
// the point at most: "1e6", "2.5e-5" rather than Go's "1.0e+06".
func formatExp(v float64, prec int) string {
	s := strconv.FormatFloat(v, 'e', prec, 64)
	mant, exp, _ := strings.Cut(s, "e")
	if strings.Contains(mant, ".") {
		mant = strings.TrimRight(strings.TrimRight(mant, "0"), ".")
	}
	sign := ""
	if exp[0] == '-' {
		sign = "-"
	}
	if exp = strings.TrimLeft(exp[1:], "0"); exp == "" {
		return mant
	}
	return mant + "e" + sign + exp
}

// formatValue writes a data value for tooltips and descriptions: four
// significant digits, without exponent for everyday magnitudes.
func formatValue(v float64) string {
	if a := math.Abs(v); v != 0 && (a < 1e-3 || a >= 1e6) {
		return formatExp(v, 2)
	}
	s := strconv.FormatFloat(v, 'g', 4, 64)
	if strings.ContainsRune(s, 'e') { // 'g' switches to exponents above 1e4
		s = strconv.FormatFloat(v, 'f', 0, 64)
	}
	return s
}

// textWidth estimates the width of s in a proportional sans-serif font of the
// given size. SVG cannot measure text before it is drawn and the page has no
// script, so the layout reserves room from this estimate. The widths per
// character are those of DejaVu Sans, the widest of the common system
// fonts, so that the estimate errs wide elsewhere.
func textWidth(s string, size float64) float64 {
	w := 0.0
	for _, r := range s {
		switch {
		case strings.ContainsRune(" .,:;'|!()[]{}ijlftI", r):
			w += 0.37
		case r >= '0' && r <= '9':
			w += 0.64
		case strings.ContainsRune("mwMW%@", r), r >= 0x2e80: // wide letters and CJK
			w += 0.96
		case r >= 'A' && r <= 'Z':
			w += 0.73
		case r > 0x7f: // symbols such as "≤", "σ", "…"
			w += 0.84
		default:
			w += 0.6
		}
	}
	return w * size * 1.04 // a margin for glyphs wider than the class average
}

// boldWidth is textWidth for semibold and bold text, which is wider.
func boldWidth(s string, size float64) float64 { return textWidth(s, size) * 1.12 }

package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// palette is the Okabe–Ito palette, reordered so that the first colours
// have the most contrast on white and with each other (blue against
// vermillion for the usual baseline/hedged pair); its yellow is last as it
// is hard to see on white.
var palette = [...]string{
	"#0072B2", // blue
	"#D55E00", // vermillion
	"#009E73", // bluish green
	"#CC79A7", // reddish purple
	"#E69F00", // orange
	"#56B4E9", // sky blue
	"#000000", // black
	"#F0E442", // yellow
}

// Color returns the colour of the i-th series of a plot as "#RRGGBB", so that
// tables and text can refer to a series by its colour. Colours repeat after
// eight series.
func Color(i int) string {
	return palette[((i%len(palette))+len(palette))%len(palette)]
}

// Layout of a plot in SVG units. The width is fixed and the SVG scales to
// the page, so one SVG unit is one CSS pixel at the page's full width.
const (
	svgWidth    = 960.0
	plotHeight  = 340.0 // of the data area
	titleSize   = 16.0
	labelSize   = 13.0 // axis labels and legend
	tickSize    = 12.0
	legendRow   = 22.0
	clipPad     = 6.0 // lets markers and lines on the frame show in full
	tickLen     = 5.0
	minLabelGap = 8.0
	xTicks      = 6 // intervals wanted on a linear axis
	yTicks      = 5
)

// shape is a plot's data after dropping what cannot be drawn.
type shape struct {
	series      [][]Point
	notes       []Note
	nonFinite   int
	nonPositive int
	points      int
}

func prepare(p Plot) shape {
	var s shape
	keep := func(x, y float64) bool {
		switch {
		case !finite(x) || !finite(y):
			s.nonFinite++
			return false
		case (p.LogX && x <= 0) || (p.LogY && y <= 0):
			s.nonPositive++
			return false
		}
		return true
	}
	s.series = make([][]Point, len(p.Series))
	for i, ser := range p.Series {
		for _, pt := range ser.Points {
			if keep(pt.X, pt.Y) {
				s.series[i] = append(s.series[i], pt)
			}
		}
		s.points += len(s.series[i])
	}
	for _, n := range p.Notes {
		if keep(n.X, n.Y) {
			s.notes = append(s.notes, n)
		}
	}
	return s
}

// frame is the computed geometry of one plot.
type frame struct {
	x, y                     axis
	left, right, top, bottom float64 // edges of the data area
	height                   float64 // of the whole SVG
	xticks, yticks           []tick
	legend                   []legendItem
}

type legendItem struct {
	x, y  float64
	label string
	idx   int
}

func layout(p Plot, s shape) frame {
	var xs, ys []float64
	for _, pts := range s.series {
		for _, pt := range pts {
			xs, ys = append(xs, pt.X), append(ys, pt.Y)
		}
	}
	for _, n := range s.notes {
		xs, ys = append(xs, n.X), append(ys, n.Y)
	}
	var f frame
	f.x.log, f.y.log = p.LogX, p.LogY
	f.x.lo, f.x.hi = resolveRange(p.XMin, p.XMax, xs, p.LogX, xTicks)
	f.y.lo, f.y.hi = resolveRange(p.YMin, p.YMax, ys, p.LogY, yTicks)
	f.xticks = ticksFor(f.x, xTicks)
	f.yticks = ticksFor(f.y, yTicks)

	// Left margin: the y axis label (rotated), then the widest tick label.
	widest := 0.0
	for _, t := range f.yticks {
		widest = math.Max(widest, textWidth(t.label, tickSize))
	}
	f.left = 14 + widest + tickLen + 4
	if p.YLabel != "" {
		f.left += labelSize + 10
	}
	// Right margin: half of the last x tick label, which is centred on its tick.
	f.right = svgWidth - 24
	if n := len(f.xticks); n > 0 && f.xticks[n-1].label != "" {
		f.right = math.Min(f.right, svgWidth-8-textWidth(f.xticks[n-1].label, tickSize)/2)
	}

	y := 12.0
	if p.Title != "" {
		y += titleSize + 8
	}
	// The legend sits above the data area in rows, so it never hides data.
	x := f.left
	rowY := y + legendRow/2
	for i, ser := range p.Series {
		label := legendLabel(i, ser, s.series[i])
		w := 34 + textWidth(label, labelSize) + 22
		if x > f.left && x+w > svgWidth-8 {
			x, rowY = f.left, rowY+legendRow
		}
		f.legend = append(f.legend, legendItem{x: x, y: rowY, label: label, idx: i})
		x += w
	}
	if len(f.legend) > 0 {
		y = rowY + legendRow/2
	}
	f.top = y + 10
	f.bottom = f.top + plotHeight
	f.height = f.bottom + tickLen + tickSize + 10
	if p.XLabel != "" {
		f.height += labelSize + 10
	}
	f.height += 6

	f.x.p0, f.x.p1 = f.left, f.right
	f.y.p0, f.y.p1 = f.bottom, f.top
	f.xticks = thin(f.xticks, f.x, func(t tick) float64 { return textWidth(t.label, tickSize) })
	f.yticks = thin(f.yticks, f.y, func(tick) float64 { return tickSize })
	return f
}

// legendLabel names a series in the legend; unnamed series get a number,
// and a series with nothing to draw says so instead of silently vanishing.
func legendLabel(i int, ser Series, drawn []Point) string {
	label := ser.Name
	if label == "" {
		label = "series " + strconv.Itoa(i+1)
	}
	if r := []rune(label); len(r) > 60 {
		label = string(r[:59]) + "…"
	}
	if len(drawn) == 0 {
		label += " (no data)"
	}
	return label
}

func ticksFor(a axis, target int) []tick {
	if a.log {
		return logTicks(a.lo, a.hi)
	}
	return linearTicks(a.lo, a.hi, target)
}

// thin drops tick labels that would overlap a neighbour, keeping labels of
// major ticks first and then minor ones where room is left. The ticks stay.
func thin(ts []tick, a axis, size func(tick) float64) []tick {
	type span struct{ lo, hi float64 }
	var kept []span
	fits := func(t tick) bool {
		c, h := a.pos(t.v), size(t)/2+minLabelGap/2
		for _, k := range kept {
			if c+h > k.lo && c-h < k.hi {
				return false
			}
		}
		kept = append(kept, span{c - h, c + h})
		return true
	}
	out := make([]tick, len(ts))
	copy(out, ts)
	for _, major := range []bool{true, false} {
		for i, t := range out {
			if t.label != "" && t.major == major && !fits(t) {
				out[i].label = ""
			}
		}
	}
	return out
}

// num formats an SVG coordinate: one decimal is a tenth of a pixel at full
// width, and fewer digits keep the page small.
func num(v float64) string {
	s := strconv.FormatFloat(v, 'f', 1, 64)
	s = strings.TrimSuffix(s, ".0")
	if s == "-0" {
		return "0"
	}
	return s
}

func (r *renderer) plot(p Plot) {
	r.plots++
	id := "plot" + strconv.Itoa(r.plots)
	s := prepare(p)
	f := layout(p, s)

	title := p.Title
	if title == "" {
		title = "Plot " + strconv.Itoa(r.plots)
	}
	r.w("<figure class=\"plot\" id=\"", id, "\">\n")
	r.w(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 `, num(svgWidth), " ", num(f.height),
		`" role="img" aria-label="`, esc(title), `" aria-describedby="`, id, `-desc" font-family="system-ui,sans-serif">`, "\n")
	r.w("<title>", esc(title), "</title>\n<desc id=\"", id, "-desc\">", esc(describe(p, s, f)), "</desc>\n")
	r.w(`<defs><clipPath id="`, id, `-clip"><rect x="`, num(f.left-clipPad), `" y="`, num(f.top-clipPad),
		`" width="`, num(f.right-f.left+2*clipPad), `" height="`, num(f.bottom-f.top+2*clipPad), `"/></clipPath></defs>`, "\n")
	r.w(`<rect x="0" y="0" width="`, num(svgWidth), `" height="`, num(f.height), `" fill="#fff"/>`, "\n")
	r.grid(f)
	r.axes(p, f)
	if p.Title != "" {
		r.w(`<text x="`, num(f.left), `" y="`, num(12+titleSize), `" font-size="`, num(titleSize),
			`" font-weight="600" fill="#111"`, fitText(boldWidth(p.Title, titleSize), svgWidth-8-f.left), ">", esc(p.Title), "</text>\n")
	}
	r.legend(p, f)
	r.w(`<g clip-path="url(#`, id, `-clip)">`, "\n")
	for _, markers := range []bool{false, true} {
		for i, ser := range p.Series {
			r.series(i, ser, s.series[i], f, markers)
		}
	}
	r.w("</g>\n")
	outside := r.notes(s.notes, f)
	if s.points == 0 && len(s.notes) == 0 {
		r.w(`<text x="`, num((f.left+f.right)/2), `" y="`, num((f.top+f.bottom)/2), `" font-size="15" fill="#6b7280" text-anchor="middle" dominant-baseline="middle">no data</text>`, "\n")
	}
	r.w("</svg>\n<figcaption>", esc(p.Caption))
	for _, fn := range footnotes(s, outside, p) {
		r.w(`<span class="footnote">`, esc(fn), "</span>")
	}
	r.w("</figcaption>\n</figure>\n")
}

// fitText squeezes text that the estimate says is wider than room, rather
// than let it run off the SVG.
func fitText(width, room float64) string {
	if width <= room {
		return ""
	}
	return ` textLength="` + num(room) + `" lengthAdjust="spacingAndGlyphs"`
}

func footnotes(s shape, outside int, p Plot) []string {
	var out []string
	if s.nonPositive > 0 {
		var axes []string
		if p.LogX {
			axes = append(axes, "x")
		}
		if p.LogY {
			axes = append(axes, "y")
		}
		out = append(out, fmt.Sprintf("%s with a zero or negative value cannot be shown on the log %s axis and %s left out.",
			count(s.nonPositive, "point"), strings.Join(axes, "/"), were(s.nonPositive)))
	}
	if s.nonFinite > 0 {
		out = append(out, fmt.Sprintf("%s with a NaN or infinite value %s left out.", count(s.nonFinite, "point"), were(s.nonFinite)))
	}
	if outside > 0 {
		out = append(out, fmt.Sprintf("%s outside the plotted range %s not shown.", count(outside, "note"), were(outside)))
	}
	return out
}

// count writes "1 point", "2 points"; nouns ending in s ("series") keep
// their form.
func count(n int, noun string) string {
	if n != 1 && !strings.HasSuffix(noun, "s") {
		noun += "s"
	}
	return strconv.Itoa(n) + " " + noun
}

func were(n int) string {
	if n == 1 {
		return "was"
	}
	return "were"
}

// describe summarises a plot for screen readers in its <desc>.
func describe(p Plot, s shape, f frame) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Line chart with %s.", count(len(p.Series), "series"))
	for i, ser := range p.Series {
		style := "solid"
		if ser.Dashed {
			style = "dashed"
		}
		fmt.Fprintf(&b, " %s: %s line, %s.", legendLabel(i, ser, s.series[i]), style, count(len(s.series[i]), "point"))
	}
	axisDesc := func(name, label string, a axis) {
		scale := "linear"
		if a.log {
			scale = "logarithmic"
		}
		if label == "" {
			label = "unlabelled"
		}
		fmt.Fprintf(&b, " %s axis: %s, %s from %s to %s.", name, label, scale, formatValue(a.lo), formatValue(a.hi))
	}
	axisDesc("X", p.XLabel, f.x)
	axisDesc("Y", p.YLabel, f.y)
	return b.String()
}

func (r *renderer) grid(f frame) {
	r.w(`<g stroke-width="1" fill="none">`, "\n")
	line := func(x1, y1, x2, y2 float64, major bool) {
		colour := "#f0f1f3"
		if major {
			colour = "#dcdfe3"
		}
		r.w(`<line x1="`, num(x1), `" y1="`, num(y1), `" x2="`, num(x2), `" y2="`, num(y2), `" stroke="`, colour, `"/>`, "\n")
	}
	// Minor lines first so that major ones are drawn over them.
	for _, major := range []bool{false, true} {
		for _, t := range f.xticks {
			if t.major == major {
				x := f.x.pos(t.v)
				line(x, f.top, x, f.bottom, major)
			}
		}
		for _, t := range f.yticks {
			if t.major == major {
				y := f.y.pos(t.v)
				line(f.left, y, f.right, y, major)
			}
		}
	}
	r.w("</g>\n")
}

func (r *renderer) axes(p Plot, f frame) {
	r.w(`<g stroke="#4b5563" stroke-width="1" fill="none">`, "\n")
	r.w(`<path d="M`, num(f.left), " ", num(f.top), "V", num(f.bottom), "H", num(f.right), `"/>`, "\n")
	for _, t := range f.xticks {
		x, l := f.x.pos(t.v), tickLen
		if !t.major {
			l = tickLen - 2
		}
		r.w(`<line x1="`, num(x), `" y1="`, num(f.bottom), `" x2="`, num(x), `" y2="`, num(f.bottom+l), `"/>`, "\n")
	}
	for _, t := range f.yticks {
		y, l := f.y.pos(t.v), tickLen
		if !t.major {
			l = tickLen - 2
		}
		r.w(`<line x1="`, num(f.left-l), `" y1="`, num(y), `" x2="`, num(f.left), `" y2="`, num(y), `"/>`, "\n")
	}
	r.w("</g>\n")
	r.w(`<g font-size="`, num(tickSize), `" fill="#374151">`, "\n")
	for _, t := range f.xticks {
		if t.label != "" {
			r.w(`<text x="`, num(f.x.pos(t.v)), `" y="`, num(f.bottom+tickLen+tickSize+3), `" text-anchor="middle">`, esc(t.label), "</text>\n")
		}
	}
	for _, t := range f.yticks {
		if t.label != "" {
			r.w(`<text x="`, num(f.left-tickLen-4), `" y="`, num(f.y.pos(t.v)+tickSize*0.35), `" text-anchor="end">`, esc(t.label), "</text>\n")
		}
	}
	r.w("</g>\n")
	if p.XLabel != "" {
		r.w(`<text x="`, num((f.left+f.right)/2), `" y="`, num(f.bottom+tickLen+tickSize+10+labelSize+2), `" font-size="`, num(labelSize),
			`" fill="#1f2937" text-anchor="middle"`, fitText(textWidth(p.XLabel, labelSize), f.right-f.left), ">", esc(p.XLabel), "</text>\n")
	}
	if p.YLabel != "" {
		cy := (f.top + f.bottom) / 2
		r.w(`<text transform="translate(`, num(14+labelSize*0.8), " ", num(cy), `) rotate(-90)" font-size="`, num(labelSize),
			`" fill="#1f2937" text-anchor="middle"`, fitText(textWidth(p.YLabel, labelSize), f.bottom-f.top), ">", esc(p.YLabel), "</text>\n")
	}
}

func dash(ser Series) string {
	if ser.Dashed {
		return ` stroke-dasharray="7 4"`
	}
	return ""
}

func (r *renderer) legend(p Plot, f frame) {
	if len(f.legend) == 0 {
		return
	}
	r.w(`<g font-size="`, num(labelSize), `" fill="#1f2937">`, "\n")
	for _, it := range f.legend {
		ser, colour := p.Series[it.idx], Color(it.idx)
		if !ser.NoLine {
			r.w(`<line x1="`, num(it.x), `" y1="`, num(it.y), `" x2="`, num(it.x+28), `" y2="`, num(it.y), `" stroke="`, colour, `" stroke-width="2.5"`, dash(ser), "/>\n")
		}
		if ser.Marker || ser.NoLine {
			r.w(`<circle cx="`, num(it.x+14), `" cy="`, num(it.y), `" r="3.5" fill="`, colour, `" stroke="#fff" stroke-width="1"/>`, "\n")
		}
		r.w(`<text x="`, num(it.x+34), `" y="`, num(it.y+labelSize*0.35), `">`, esc(it.label), "</text>\n")
	}
	r.w("</g>\n")
}

// series draws the line of a series (markers is false) or its markers.
// Markers of all series go over the lines of all series, so that a line
// drawn later cannot hide the points of an earlier series.
func (r *renderer) series(i int, ser Series, pts []Point, f frame, markers bool) {
	// A lone point has no line to show, so it gets a marker regardless.
	marked := ser.Marker || ser.NoLine
	if len(pts) == 0 || (markers && !marked && len(pts) > 1) || (!markers && (len(pts) == 1 || ser.NoLine)) {
		return
	}
	colour := Color(i)
	name := legendLabel(i, ser, pts)
	xy := make([][2]float64, len(pts))
	for k, pt := range pts {
		xy[k] = [2]float64{f.x.pos(pt.X), f.y.pos(pt.Y)}
	}
	box := [4]float64{f.left - clipPad, f.top - clipPad, f.right + clipPad, f.bottom + clipPad}
	if !markers {
		r.w(`<g class="series"><title>`, esc(name), "</title>\n")
		for _, run := range clipRuns(xy, box) {
			r.w(`<polyline fill="none" stroke="`, colour, `" stroke-width="2" stroke-linejoin="round" stroke-linecap="round"`, dash(ser), ` points="`)
			for k, c := range run {
				if k > 0 {
					r.w(" ")
				}
				r.w(num(c[0]), ",", num(c[1]))
			}
			r.w(`"/>`, "\n")
		}
		r.w("</g>\n")
		return
	}
	r.w(`<g class="markers">`, "\n")
	for k, c := range xy {
		if inBox(c, box) {
			r.w(`<circle cx="`, num(c[0]), `" cy="`, num(c[1]), `" r="4" fill="`, colour, `" stroke="#fff" stroke-width="1.2"><title>`,
				esc(name), ": ", esc(formatValue(pts[k].X)), ", ", esc(formatValue(pts[k].Y)), "</title></circle>\n")
		}
	}
	r.w("</g>\n")
}

// notes draws each note as a ring around its point and a label placed
// towards the inside of the plot, and returns how many fell outside.
func (r *renderer) notes(ns []Note, f frame) (outside int) {
	for _, n := range ns {
		c := [2]float64{f.x.pos(n.X), f.y.pos(n.Y)}
		if !inBox(c, [4]float64{f.left - clipPad, f.top - clipPad, f.right + clipPad, f.bottom + clipPad}) {
			outside++
			continue
		}
		r.w(`<g class="note"><circle cx="`, num(c[0]), `" cy="`, num(c[1]), `" r="7" fill="none" stroke="#111" stroke-width="1.5"/>`, "\n")
		if n.Text != "" {
			w := boldWidth(n.Text, labelSize)
			tx, anchor := c[0]+10, "start"
			if tx+w > f.right {
				tx, anchor = c[0]-10, "end"
			}
			ty := c[1] - 11
			if ty-labelSize < f.top {
				ty = c[1] + 11 + labelSize
			}
			r.w(`<text x="`, num(tx), `" y="`, num(ty), `" font-size="`, num(labelSize), `" font-weight="600" fill="#111" text-anchor="`, anchor,
				`" stroke="#fff" stroke-width="4" stroke-linejoin="round" paint-order="stroke">`, esc(n.Text), "</text>\n")
		}
		r.w("</g>\n")
	}
	return outside
}

package report

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// node is an XML element; the SVG of each plot must parse as XML, so that it
// can also be cut out of the page and used on its own.
type node struct {
	XMLName xml.Name
	Attrs   []xml.Attr `xml:",any,attr"`
	Nodes   []node     `xml:",any"`
	Text    string     `xml:",chardata"`
}

func (n node) attr(name string) string {
	for _, a := range n.Attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

// all returns the elements called name in n's subtree, in document order.
func (n node) all(name string) []node {
	var out []node
	for _, c := range n.Nodes {
		if c.XMLName.Local == name {
			out = append(out, c)
		}
		out = append(out, c.all(name)...)
	}
	return out
}

// texts returns the text of the <text> elements of n.
func (n node) texts() []string {
	var out []string
	for _, t := range n.all("text") {
		out = append(out, t.Text)
	}
	return out
}

func render(t *testing.T, p Page) string {
	t.Helper()
	var buf bytes.Buffer
	if err := RenderHTML(&buf, p); err != nil {
		t.Fatalf("RenderHTML: %v", err)
	}
	return buf.String()
}

// svgs parses every <svg> element of doc.
func svgs(t *testing.T, doc string) []node {
	t.Helper()
	var out []node
	for rest := doc; ; {
		i := strings.Index(rest, "<svg ")
		if i < 0 {
			return out
		}
		j := strings.Index(rest[i:], "</svg>")
		if j < 0 {
			t.Fatal("unterminated <svg>")
		}
		var n node
		if err := xml.Unmarshal([]byte(rest[i:i+j+len("</svg>")]), &n); err != nil {
			t.Fatalf("plot SVG is not well-formed XML: %v", err)
		}
		out = append(out, n)
		rest = rest[i+j:]
	}
}

var captionRE = regexp.MustCompile(`(?s)<figcaption>(.*?)</figcaption>`)

// renderPlot renders one plot on a page and returns the document, its SVG
// and its figcaption.
func renderPlot(t *testing.T, p Plot) (doc string, svg node, caption string) {
	t.Helper()
	doc = render(t, Page{Sections: []Section{{Plots: []Plot{p}}}})
	ss := svgs(t, doc)
	if len(ss) != 1 {
		t.Fatalf("%d SVGs for one plot", len(ss))
	}
	m := captionRE.FindStringSubmatch(doc)
	if m == nil {
		t.Fatal("no figcaption")
	}
	return doc, ss[0], m[1]
}

// coords parses the points attribute of a polyline.
func coords(t *testing.T, pl node) [][2]float64 {
	t.Helper()
	var out [][2]float64
	for _, f := range strings.Fields(pl.attr("points")) {
		x, y, ok := strings.Cut(f, ",")
		xv, err1 := strconv.ParseFloat(x, 64)
		yv, err2 := strconv.ParseFloat(y, 64)
		if !ok || err1 != nil || err2 != nil {
			t.Fatalf("bad point %q", f)
		}
		out = append(out, [2]float64{xv, yv})
	}
	return out
}

// clipBox returns the clip rectangle of a plot as minX, minY, maxX, maxY.
func clipBox(t *testing.T, svg node) [4]float64 {
	t.Helper()
	rects := svg.all("clipPath")
	if len(rects) != 1 || len(rects[0].Nodes) != 1 {
		t.Fatal("want one clipPath with one rect")
	}
	r := rects[0].Nodes[0]
	v := func(name string) float64 {
		f, err := strconv.ParseFloat(r.attr(name), 64)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	return [4]float64{v("x"), v("y"), v("x") + v("width"), v("y") + v("height")}
}

func linePlot(series ...Series) Plot {
	return Plot{Title: "t", XLabel: "x", YLabel: "y", Series: series}
}

func TestOneSVGPerPlotWithTitleAndCaption(t *testing.T) {
	page := Page{Title: "T", Sections: []Section{
		{Heading: "a", Plots: []Plot{
			{Title: "first", Caption: "read it so", Series: []Series{{Name: "s", Points: []Point{{1, 1}, {2, 2}}}}},
			{Title: "second"},
		}},
		{Heading: "b", Plots: []Plot{{}}},
	}}
	doc := render(t, page)
	ss := svgs(t, doc)
	if len(ss) != 3 {
		t.Fatalf("%d SVGs, want 3", len(ss))
	}
	caps := captionRE.FindAllStringSubmatch(doc, -1)
	if len(caps) != 3 || caps[0][1] != "read it so" {
		t.Fatalf("figcaptions %q", caps)
	}
	wantTitles := []string{"first", "second", "Plot 3"}
	ids := map[string]bool{}
	for i, s := range ss {
		if s.attr("viewBox") == "" || s.attr("role") != "img" {
			t.Errorf("plot %d: viewBox %q role %q", i, s.attr("viewBox"), s.attr("role"))
		}
		if s.attr("aria-label") != wantTitles[i] || len(s.Nodes) == 0 || s.Nodes[0].XMLName.Local != "title" || s.Nodes[0].Text != wantTitles[i] {
			t.Errorf("plot %d: aria-label %q, want a first <title> %q", i, s.attr("aria-label"), wantTitles[i])
		}
		desc := s.all("desc")
		if len(desc) != 1 || !strings.Contains(desc[0].Text, "X axis") {
			t.Errorf("plot %d: desc %v", i, desc)
		}
		if i == 0 && !strings.HasPrefix(desc[0].Text, "Line chart with 1 series. s: solid line, 2 points. X axis: unlabelled, linear from 1 to 2.") {
			t.Errorf("desc %q", desc[0].Text)
		}
		// Ids must be unique on the page or the second plot would be
		// clipped by the first one's rectangle.
		clip := s.all("clipPath")[0].attr("id")
		if ids[clip] {
			t.Errorf("clip id %q repeated", clip)
		}
		ids[clip] = true
		if g := s.all("g"); !strings.Contains(doc, `clip-path="url(#`+clip+`)"`) || len(g) == 0 {
			t.Errorf("clip path %q not used", clip)
		}
	}
	if !strings.Contains(doc, `<a href="#s1">a</a>`) || !strings.Contains(doc, `<section id="s2">`) {
		t.Error("table of contents or section anchors missing")
	}
}

func TestPolylinePointCounts(t *testing.T) {
	var a, b Series
	a.Name, b.Name, b.Dashed = "a", "b", true
	for i := range 37 {
		a.Points = append(a.Points, Point{float64(i), float64(i * i)})
	}
	for i := range 5 {
		b.Points = append(b.Points, Point{float64(i), 3})
	}
	_, svg, _ := renderPlot(t, linePlot(a, b))
	pls := svg.all("polyline")
	if len(pls) != 2 {
		t.Fatalf("%d polylines, want 2", len(pls))
	}
	if n := len(coords(t, pls[0])); n != 37 {
		t.Errorf("first polyline has %d points, want 37", n)
	}
	if n := len(coords(t, pls[1])); n != 5 {
		t.Errorf("second polyline has %d points, want 5", n)
	}
	if pls[0].attr("stroke") != Color(0) || pls[1].attr("stroke") != Color(1) {
		t.Errorf("colours %s %s, want palette order", pls[0].attr("stroke"), pls[1].attr("stroke"))
	}
	if pls[0].attr("stroke-dasharray") != "" || pls[1].attr("stroke-dasharray") == "" {
		t.Error("want the first series solid and the second dashed")
	}
	if len(svg.all("circle")) != 0 {
		t.Error("markers drawn without Marker")
	}
	// x increases along the line and y decreases (SVG y points down) as
	// the data rise, and all of it sits in the clip box.
	box := clipBox(t, svg)
	c := coords(t, pls[0])
	for i, p := range c {
		if !inBox(p, box) {
			t.Fatalf("point %v outside the plot %v", p, box)
		}
		if i > 0 && (p[0] <= c[i-1][0] || p[1] > c[i-1][1]) {
			t.Fatalf("point %d %v does not follow %v", i, p, c[i-1])
		}
	}
}

func TestMarkersAndLegend(t *testing.T) {
	s := Series{Name: "sweep", Marker: true, Dashed: true, Points: []Point{{1, 5}, {2, 4}, {3, 3.5}}}
	_, svg, _ := renderPlot(t, linePlot(s, Series{Points: []Point{{1, 1}, {3, 6}}}))
	// 3 markers, plus one in the legend swatch.
	circles := svg.all("circle")
	if len(circles) != 4 {
		t.Fatalf("%d circles, want 3 markers and 1 legend swatch", len(circles))
	}
	var tips []string
	for _, c := range circles {
		if ts := c.all("title"); len(ts) == 1 {
			tips = append(tips, ts[0].Text)
		}
	}
	if strings.Join(tips, "|") != "sweep: 1, 5|sweep: 2, 4|sweep: 3, 3.5" {
		t.Errorf("marker tooltips %q", tips)
	}
	if texts := svg.texts(); !contains(texts, "sweep") || !contains(texts, "series 2") {
		t.Errorf("legend labels missing in %q", texts)
	}
	var dashed int
	for _, l := range svg.all("line") {
		if l.attr("stroke") == Color(0) && l.attr("stroke-dasharray") != "" {
			dashed++
		}
	}
	if dashed != 1 {
		t.Errorf("%d dashed legend swatches in the first colour, want 1", dashed)
	}
}

func tickLabels(svg node) []string {
	var out []string
	for _, g := range svg.Nodes {
		if g.XMLName.Local == "g" && g.attr("font-size") == num(tickSize) {
			out = append(out, g.texts()...)
		}
	}
	return out
}

func TestLogAxisTicks(t *testing.T) {
	s := Series{Name: "lat", Points: []Point{{0.5, 0.1}, {5, 0.5}, {500, 1}}}
	_, svg, _ := renderPlot(t, Plot{LogX: true, Series: []Series{s}})
	labels := strings.Join(tickLabels(svg), " ")
	for _, want := range []string{"1", "10", "100"} {
		if !strings.Contains(" "+labels+" ", " "+want+" ") {
			t.Errorf("tick labels %q lack %s", labels, want)
		}
	}
	// The range is 0.5 to 500, so the line spans the plot from edge to edge.
	pl := svg.all("polyline")
	box := clipBox(t, svg)
	c := coords(t, pl[0])
	if math.Abs(c[0][0]-(box[0]+clipPad)) > 0.1 || math.Abs(c[2][0]-(box[2]-clipPad)) > 0.1 {
		t.Errorf("line from x %v to %v, want the plot edges %v", c[0][0], c[2][0], box)
	}
	// On a log axis 5 is halfway between 0.5 and 500 in decades... one
	// third of the way, as 0.5→5 is one decade of three.
	if want := c[0][0] + (c[2][0]-c[0][0])/3; math.Abs(c[1][0]-want) > 0.2 {
		t.Errorf("x of 5 is %v, want %v", c[1][0], want)
	}
}

func TestLinearAxisNiceTicks(t *testing.T) {
	s := Series{Points: []Point{{3, 0.013}, {97, 0.049}}}
	_, svg, _ := renderPlot(t, Plot{Series: []Series{s}})
	got := strings.Join(tickLabels(svg), " ")
	want := "0 20 40 60 80 100 0.01 0.02 0.03 0.04 0.05"
	if got != want {
		t.Errorf("tick labels %q, want %q", got, want)
	}
}

func TestEscaping(t *testing.T) {
	evil := `<script>alert("x")</script>&'`
	p := Page{
		Title: evil, Subtitle: evil, Meta: [][2]string{{evil, evil}},
		Sections: []Section{{
			Heading: evil, Text: evil,
			Plots: []Plot{{
				Title: evil, XLabel: evil, YLabel: evil, Caption: evil,
				Series: []Series{{Name: evil, Marker: true, Points: []Point{{1, 2}, {2, 3}}}},
				Notes:  []Note{{1, 2, evil}},
			}},
			Tables: []Table{{Title: evil, Columns: []string{evil}, Rows: [][]string{{evil}}}},
		}, {Heading: "second"}},
	}
	doc := render(t, p)
	if strings.Contains(strings.ToLower(doc), "<script") {
		t.Fatal("a string reached the page unescaped")
	}
	const escaped = `&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&amp;&#39;`
	// Page title, h1, subtitle, meta key and value, TOC entry, h2,
	// paragraph, plot aria-label, <title>, svg title text, x label, y label,
	// legend, series <title>, marker tooltips (2), note, caption, table
	// caption, header, cell.
	if n := strings.Count(doc, escaped); n < 21 {
		t.Errorf("escaped string appears %d times, want at least 21", n)
	}
	svgs(t, doc) // and the SVG still parses, attributes included
}

func TestDeterministic(t *testing.T) {
	a, b := render(t, samplePage()), render(t, samplePage())
	if a != b {
		t.Fatal("two renderings of the same page differ")
	}
	if len(a) > 400_000 {
		t.Errorf("sample page is %d bytes; CDF downsampling should keep it small", len(a))
	}
}

func TestEmptyPlotSaysNoData(t *testing.T) {
	for name, p := range map[string]Plot{
		"no series":    {Title: "empty"},
		"empty series": {Series: []Series{{Name: "baseline"}}, LogX: true, LogY: true},
		"all NaN":      {Series: []Series{{Name: "n", Points: []Point{{math.NaN(), 1}, {1, math.Inf(1)}}}}},
	} {
		t.Run(name, func(t *testing.T) {
			_, svg, _ := renderPlot(t, p)
			texts := svg.texts()
			if !contains(texts, "no data") {
				t.Errorf("texts %q lack \"no data\"", texts)
			}
			if len(svg.all("polyline")) != 0 {
				t.Error("a line was drawn without data")
			}
			if len(tickLabels(svg)) < 4 {
				t.Errorf("axes without tick labels: %q", tickLabels(svg))
			}
			if len(p.Series) > 0 && !contains(texts, p.Series[0].Name+" (no data)") {
				t.Errorf("legend does not say the series is empty: %q", texts)
			}
		})
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func TestSinglePointGetsAMarker(t *testing.T) {
	_, svg, _ := renderPlot(t, Plot{LogX: true, Series: []Series{{Name: "one", Points: []Point{{42, 7}}}}})
	if len(svg.all("polyline")) != 0 {
		t.Error("a one-point polyline draws nothing; want a marker instead")
	}
	var markers []node
	for _, c := range svg.all("circle") {
		if len(c.all("title")) == 1 {
			markers = append(markers, c)
		}
	}
	if len(markers) != 1 {
		t.Fatalf("%d markers, want 1", len(markers))
	}
	// The padded range puts the point inside the frame, not on it.
	box := clipBox(t, svg)
	x, _ := strconv.ParseFloat(markers[0].attr("cx"), 64)
	y, _ := strconv.ParseFloat(markers[0].attr("cy"), 64)
	if x <= box[0]+clipPad+10 || x >= box[2]-clipPad-10 || y <= box[1]+clipPad+10 || y >= box[3]-clipPad-10 {
		t.Errorf("marker at %v,%v is on the edge of %v", x, y, box)
	}
}

func TestFlatSeriesIsPadded(t *testing.T) {
	for _, v := range []float64{0, 5, -3, 1e-9} {
		_, svg, _ := renderPlot(t, Plot{Series: []Series{{Points: []Point{{1, v}, {2, v}, {3, v}}}}})
		box := clipBox(t, svg)
		c := coords(t, svg.all("polyline")[0])
		mid := (box[1] + box[3]) / 2
		for _, p := range c {
			if math.Abs(p[1]-mid) > (box[3]-box[1])/4 {
				t.Errorf("flat series at %v drawn at y %v, far from the middle %v", v, p[1], mid)
			}
		}
		// The x range is 1..3 and nice, so the ends are on the frame.
		if c[0][0] != box[0]+clipPad || c[2][0] != box[2]-clipPad {
			t.Errorf("x from %v to %v, want the frame of %v", c[0][0], c[2][0], box)
		}
	}
}

func TestSkippedPointsAreFootnoted(t *testing.T) {
	s := Series{Name: "s", Points: []Point{{-1, 0.5}, {0, 0.6}, {1, 0.7}, {math.NaN(), 1}, {10, math.Inf(-1)}, {100, 0.9}}}
	_, svg, caption := renderPlot(t, Plot{LogX: true, Series: []Series{s}, Caption: "how to read"})
	if n := len(coords(t, svg.all("polyline")[0])); n != 2 {
		t.Errorf("%d points drawn, want the 2 positive finite ones", n)
	}
	for _, want := range []string{"how to read", "2 points with a zero or negative value cannot be shown on the log x axis and were left out.", "2 points with a NaN or infinite value were left out."} {
		if !strings.Contains(caption, want) {
			t.Errorf("caption %q lacks %q", caption, want)
		}
	}
	_, _, caption = renderPlot(t, Plot{LogX: true, LogY: true, Series: []Series{{Points: []Point{{1, 0}, {2, 2}, {3, 3}}}}})
	if !strings.Contains(caption, "1 point with a zero or negative value cannot be shown on the log x/y axis and was left out.") {
		t.Errorf("caption %q", caption)
	}
	_, _, caption = renderPlot(t, Plot{Series: []Series{{Points: []Point{{-1, -2}, {2, 2}}}}})
	if strings.Contains(caption, "footnote") {
		t.Errorf("negative values on linear axes footnoted: %q", caption)
	}
}

func TestNotes(t *testing.T) {
	s := Series{Name: "frontier", Marker: true, Points: []Point{{0, 100}, {5, 20}, {50, 12}}}
	p := Plot{LogY: true, Series: []Series{s}, Notes: []Note{{5, 20, "knee"}, {50, 12, "a long note near the right edge"}}}
	_, svg, _ := renderPlot(t, p)
	var notes []node
	for _, g := range svg.all("g") {
		if g.attr("class") == "note" {
			notes = append(notes, g)
		}
	}
	if len(notes) != 2 {
		t.Fatalf("%d notes, want 2", len(notes))
	}
	if ts := notes[0].texts(); len(ts) != 1 || ts[0] != "knee" {
		t.Errorf("note text %q", ts)
	}
	// The second note would run off the plot to the right, so it is set to
	// the left of its point.
	if a := notes[1].all("text")[0].attr("text-anchor"); a != "end" {
		t.Errorf("note at the right edge anchored %q, want end", a)
	}
	if a := notes[0].all("text")[0].attr("text-anchor"); a != "start" {
		t.Errorf("note in the middle anchored %q, want start", a)
	}

	p.XMin, p.XMax = 0, 10
	p.Notes = append(p.Notes, Note{math.NaN(), 1, "lost"})
	_, svg, caption := renderPlot(t, p)
	if !strings.Contains(caption, "1 note outside the plotted range was not shown.") || !strings.Contains(caption, "1 point with a NaN") {
		t.Errorf("caption %q", caption)
	}
	if strings.Contains(strings.Join(svg.texts(), "|"), "right edge") {
		t.Error("a note outside the range was drawn")
	}
}

func TestFixedRangeClipsLines(t *testing.T) {
	s := Series{Points: []Point{{0, 0}, {5, 5}, {10, 10}, {1e300, 20}, {20, 0}, {-5, 5}}}
	_, svg, _ := renderPlot(t, Plot{XMin: 0, XMax: 10, YMin: 0, YMax: 10, Series: []Series{s}})
	box := clipBox(t, svg)
	pls := svg.all("polyline")
	if len(pls) == 0 {
		t.Fatal("no line drawn")
	}
	for _, pl := range pls {
		for _, c := range coords(t, pl) {
			if !inBox(c, box) {
				t.Errorf("point %v outside the clip box %v", c, box)
			}
		}
	}
	labels := tickLabels(svg)
	if labels[0] != "0" || !contains(labels, "10") {
		t.Errorf("fixed range ticks %q", labels)
	}
}

func TestFixedRangeRules(t *testing.T) {
	data := []float64{2, 300}
	for _, c := range []struct {
		min, max float64
		log      bool
		lo, hi   float64
	}{
		{0, 0, false, 0, 300},     // automatic and nice
		{0, 0, true, 2, 500},      // 1-2-5 on a log axis
		{-10, 10, false, -10, 10}, // as given
		{0, 1000, true, 2, 1000},  // "from the data" below a log max
		{0, 100, true, 2, 100},
		{0, 1, true, 0.1, 1},  // but at least a decade below the max
		{5, 1, false, 0, 300}, // unusable: automatic
		{math.NaN(), 1, false, 0, 300},
		{-1, -0.5, true, 1, 10}, // nothing positive: fall back
	} {
		vals := data
		if c.min == -1 {
			vals = nil
		}
		lo, hi := resolveRange(c.min, c.max, vals, c.log, 5)
		if math.Abs(lo-c.lo) > 1e-12 || math.Abs(hi-c.hi) > 1e-12 {
			t.Errorf("resolveRange(%v, %v, log %v) = %v, %v; want %v, %v", c.min, c.max, c.log, lo, hi, c.lo, c.hi)
		}
	}
}

func TestTables(t *testing.T) {
	tab := Table{
		Title:   "Percentiles",
		Columns: []string{"metric", "plain", "hedged", "note"},
		Rows: [][]string{
			{"p50", "4.1 ms", "4.0 ms", "same"},
			{"p99", "150.8 ms", "17.3 ms", "-89%"},
			{"extra", "0", "5.0%"}, // short row
		},
		Align: []string{"", "", "left", "center"},
	}
	doc := render(t, Page{Sections: []Section{{Tables: []Table{tab}}}})
	for _, want := range []string{
		"<caption>Percentiles</caption>",
		`<thead><tr><th scope="col">metric</th><th scope="col" class="r">plain</th><th scope="col">hedged</th><th scope="col" class="c">note</th></tr></thead>`,
		`<tr><td>p50</td><td class="r">4.1 ms</td><td>4.0 ms</td><td class="c">same</td></tr>`,
		`<tr><td>extra</td><td class="r">0</td><td>5.0%</td><td class="c"></td></tr>`,
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("table lacks %s", want)
		}
	}
	// No columns, ragged rows: render what there is.
	doc = render(t, Page{Sections: []Section{{Tables: []Table{{Rows: [][]string{{"a"}, {"b", "2"}}}}}}})
	if strings.Contains(doc, "<thead>") || !strings.Contains(doc, `<tr><td>a</td><td class="r"></td></tr>`) || !strings.Contains(doc, `<tr><td>b</td><td class="r">2</td></tr>`) {
		t.Errorf("ragged table:\n%s", doc[strings.Index(doc, "<table>"):])
	}
}

func TestIsNumeric(t *testing.T) {
	for _, c := range []string{"0", "12.5", "-3%", "+5.0%", "4.1 ms", "1.8×", "1,200 req/s", ".5", "1e-3", "−4%", "≈ 12 ms", "2.5x", " 7 "} {
		if !IsNumeric(c) {
			t.Errorf("IsNumeric(%q) = false", c)
		}
	}
	for _, c := range []string{"", "p99", "n/a", "same", "2026-03-14", "v1.2", "1.2.3", "12 ms ± 3", "-"} {
		if IsNumeric(c) {
			t.Errorf("IsNumeric(%q) = true", c)
		}
	}
}

func TestPageHeader(t *testing.T) {
	doc := render(t, Page{Title: "Lab", Subtitle: "sub", Meta: [][2]string{{"seed", "42"}, {"cores", "8"}},
		Sections: []Section{{Heading: "only", Text: "one\n\n\n two \r\n\r\nthree\nlines"}}})
	for _, want := range []string{
		"<title>Lab</title>", "<h1>Lab</h1>", `<p class="subtitle">sub</p>`,
		"<div><dt>seed</dt><dd>42</dd></div>\n<div><dt>cores</dt><dd>8</dd></div>",
		"<p>one</p>\n<p>two</p>\n<p>three\nlines</p>",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(doc, "<nav") {
		t.Error("a table of contents for a single section")
	}
	for _, bad := range []string{"<h1>", "subtitle\"", "<dl"} {
		if strings.Contains(render(t, Page{}), bad) {
			t.Errorf("empty page has %q", bad)
		}
	}
	if !strings.Contains(render(t, Page{}), "<title>Tailgate lab report</title>") {
		t.Error("empty page lacks a default title")
	}
}

type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	if w.n < 0 {
		return 0, io.ErrClosedPipe
	}
	return min(len(p), w.n), nil
}

func TestWriterErrors(t *testing.T) {
	err := RenderHTML(&failWriter{n: -1}, samplePage())
	if !errors.Is(err, io.ErrClosedPipe) || !strings.HasPrefix(err.Error(), "report: ") {
		t.Errorf("failing writer: %v", err)
	}
	err = RenderHTML(&failWriter{n: 10}, Page{})
	if !errors.Is(err, io.ErrShortWrite) {
		t.Errorf("short writer: %v", err)
	}
}

func TestLongLabelsAreFitted(t *testing.T) {
	long := strings.Repeat("a very long title ", 10)
	_, svg, _ := renderPlot(t, Plot{Title: long, XLabel: long, YLabel: long, Series: []Series{{Name: long, Points: []Point{{1, 1}, {2, 2}}}}})
	fitted := 0
	for _, tx := range svg.all("text") {
		if tx.attr("textLength") != "" {
			fitted++
		}
	}
	if fitted != 3 {
		t.Errorf("%d texts fitted, want title and both axis labels", fitted)
	}
	if !contains(svg.texts(), strings.Repeat("a very long title ", 4)[:59]+"…") {
		t.Error("long legend label not shortened")
	}
}

func TestManyLegendItemsWrap(t *testing.T) {
	var ss []Series
	for i := range 12 {
		ss = append(ss, Series{Name: "series with a name " + strconv.Itoa(i), Points: []Point{{1, float64(i)}, {2, float64(i + 1)}}})
	}
	_, svg, _ := renderPlot(t, Plot{Series: ss})
	rows := map[string]bool{}
	var swatches []node
	for _, l := range svg.all("line") {
		if l.attr("stroke-width") == "2.5" {
			swatches = append(swatches, l)
			rows[l.attr("y1")] = true
		}
	}
	if len(swatches) != 12 || len(rows) < 3 {
		t.Errorf("%d swatches in %d rows, want 12 in at least 3", len(swatches), len(rows))
	}
	// The ninth series reuses the first colour.
	if swatches[8].attr("stroke") != Color(0) || Color(-1) != Color(7) {
		t.Error("palette does not cycle")
	}
}

func TestNoLineSeriesDrawsOnlyMarkers(t *testing.T) {
	var b strings.Builder
	p := Page{Sections: []Section{{Plots: []Plot{{Series: []Series{
		{Name: "scatter", NoLine: true, Points: []Point{{1, 1}, {2, 3}, {3, 2}}},
	}}}}}}
	if err := RenderHTML(&b, p); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(b.String(), "<polyline"); n != 0 {
		t.Errorf("%d polylines for a NoLine series", n)
	}
	if n := strings.Count(b.String(), "<circle"); n != 4 { // three markers and the legend swatch
		t.Errorf("%d circles, want 4", n)
	}
}

// A table's cells wrap between words only, so that a narrow column keeps
// "frontier" whole, and a heading may break after a slash, so that a
// numeric column ("attempts/read") is no wider than its figures.
func TestTableCellsKeepWords(t *testing.T) {
	var b strings.Builder
	err := RenderHTML(&b, Page{Title: "t", Sections: []Section{{Heading: "s", Tables: []Table{{
		Columns: []string{"", "attempts/read", "mark"}, Rows: [][]string{{"fixed 10ms", "1.30", "frontier"}}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, rule := range regexp.MustCompile(`(?m)^[^{}\n]*\{[^}]*\}`).FindAllString(page, -1) {
		sel, _, _ := strings.Cut(rule, "{")
		if strings.Contains(rule, "overflow-wrap:anywhere") && regexp.MustCompile(`(^|,)\s*(td|th)\s*(,|$)`).MatchString(sel) {
			t.Errorf("table cells may break inside a word: %s", rule)
		}
	}
	if !strings.Contains(page, ">attempts/<wbr>read</th>") || !strings.Contains(page, ">frontier</td>") {
		t.Errorf("table:\n%s", page[strings.Index(page, "<table>"):])
	}
}

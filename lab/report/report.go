package report

import (
	"fmt"
	"html"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Point is one data point of a Series.
type Point struct{ X, Y float64 }

// Series is one line on a Plot. Its colour follows its position in
// Plot.Series (see Color).
type Series struct {
	Name   string
	Points []Point
	Dashed bool // e.g. baseline dashed, hedged solid
	Marker bool // draw a marker at each point (frontiers, sweeps)
	// NoLine draws the points as markers only, for a scatter whose order
	// means nothing (Marker is implied).
	NoLine bool
}

// Plot is one chart. The zero value of every field is usable.
type Plot struct {
	Title, XLabel, YLabel string
	// LogX and LogY make an axis base-10 logarithmic (latency axes are log).
	// Points that are not positive cannot be placed on a log axis; they are
	// left out and counted in a footnote.
	LogX, LogY bool
	// XMin, XMax, YMin, YMax fix the shown ranges. A (0, 0) pair means an
	// automatic range from the data (for log axes: from the positive data),
	// widened to nice values. A pair with Min >= Max is ignored. On a log
	// axis a non-positive Min means "from the data", but at least one decade
	// below Max. Points outside a fixed range are clipped.
	XMin, XMax, YMin, YMax float64
	Series                 []Series
	Notes                  []Note // labelled points, e.g. "knee"
	Caption                string // one sentence under the plot saying how to read it
}

// Note labels a point of a Plot, e.g. the knee of a frontier.
type Note struct {
	X, Y float64
	Text string
}

// Table is an HTML table with a header row.
type Table struct {
	Title   string
	Columns []string
	Rows    [][]string
	// Align is "left", "right" or "center" per column. A missing or other
	// value aligns numeric-looking cells ("12.5", "-3%", "4.1 ms", "1.8×")
	// right and the rest left.
	Align []string
}

// Section is a headed part of a Page: a paragraph, then plots, then tables.
type Section struct {
	Heading string
	Text    string // a short paragraph of plain text; blank lines split paragraphs
	Plots   []Plot
	Tables  []Table
}

// Page is a whole report.
type Page struct {
	Title    string
	Subtitle string
	Meta     [][2]string // key/value pairs shown in a header box (seed, config, Go version, cores, date...)
	Sections []Section
}

// RenderHTML writes p as one self-contained HTML document. It is
// deterministic: the same Page gives the same bytes.
//
// Data that cannot be drawn is left out and mentioned on the page rather
// than reported as an error, because a report with a gap is more useful
// after a long lab run than no report; the only error is the writer's.
func RenderHTML(w io.Writer, p Page) error {
	var b strings.Builder
	r := renderer{b: &b}
	r.page(p)
	n, err := io.WriteString(w, b.String())
	if err == nil && n < b.Len() {
		err = io.ErrShortWrite
	}
	if err != nil {
		return fmt.Errorf("report: writing the page: %w", err)
	}
	return nil
}

// renderer writes a document into b and numbers its plots, so that the ids
// of SVG elements (clip paths, titles) are unique within the page and the
// same on every run.
type renderer struct {
	b     *strings.Builder
	plots int
}

func (r *renderer) w(ss ...string) {
	for _, s := range ss {
		r.b.WriteString(s)
	}
}

// esc escapes s for HTML text and quoted attribute values. Invalid UTF-8 is
// replaced so that the document stays well-formed.
func esc(s string) string {
	return html.EscapeString(strings.ToValidUTF8(s, "\uFFFD"))
}

func (r *renderer) page(p Page) {
	title := p.Title
	if title == "" {
		title = "Tailgate lab report"
	}
	r.w("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
		"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n",
		"<title>", esc(title), "</title>\n<style>\n", css, "</style>\n</head>\n<body>\n<main>\n<header>\n")
	if p.Title != "" {
		r.w("<h1>", esc(p.Title), "</h1>\n")
	}
	if p.Subtitle != "" {
		r.w("<p class=\"subtitle\">", esc(p.Subtitle), "</p>\n")
	}
	if len(p.Meta) > 0 {
		r.w("<dl class=\"meta\">\n")
		for _, kv := range p.Meta {
			r.w("<div><dt>", esc(kv[0]), "</dt><dd>", esc(kv[1]), "</dd></div>\n")
		}
		r.w("</dl>\n")
	}
	// A table of contents pays off once there is something to skip to.
	if n := headed(p.Sections); n > 1 {
		r.w("<nav class=\"toc\" aria-label=\"Contents\"><ol>\n")
		for i, s := range p.Sections {
			if s.Heading != "" {
				r.w("<li><a href=\"#s", strconv.Itoa(i+1), "\">", esc(s.Heading), "</a></li>\n")
			}
		}
		r.w("</ol></nav>\n")
	}
	r.w("</header>\n")
	for i, s := range p.Sections {
		r.section(i+1, s)
	}
	r.w("</main>\n</body>\n</html>\n")
}

func headed(ss []Section) int {
	n := 0
	for _, s := range ss {
		if s.Heading != "" {
			n++
		}
	}
	return n
}

func (r *renderer) section(n int, s Section) {
	r.w("<section id=\"s", strconv.Itoa(n), "\">\n")
	if s.Heading != "" {
		r.w("<h2>", esc(s.Heading), "</h2>\n")
	}
	for _, para := range paragraphs(s.Text) {
		r.w("<p>", esc(para), "</p>\n")
	}
	for _, p := range s.Plots {
		r.plot(p)
	}
	for _, t := range s.Tables {
		r.table(t)
	}
	r.w("</section>\n")
}

// paragraphs splits text at blank lines and drops empty paragraphs.
func paragraphs(text string) []string {
	var out []string
	for _, p := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n\n") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// numeric matches cells that read as numbers: an optional sign, digits with
// separators, an optional exponent and a short unit ("ms", "%", "×", "req/s").
var numeric = regexp.MustCompile(`^[+\-−±~≈<>≤≥]?\s?(\d[\d,_ ]*(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s?(%|×|x|[a-zA-Zµμ]{1,3}(/[a-z]{1,3})?)?$`)

// IsNumeric reports whether a table cell reads as a number, possibly with a
// sign and a short unit ("12.5", "-3%", "4.1 ms", "1.8×", "1,200 req/s");
// such cells are right-aligned by default so that digits line up.
func IsNumeric(cell string) bool {
	cell = strings.TrimSpace(cell)
	return cell != "" && numeric.MatchString(cell)
}

func (r *renderer) table(t Table) {
	width := len(t.Columns)
	for _, row := range t.Rows {
		width = max(width, len(row))
	}
	// The header follows the alignment of its column's cells: right when
	// most of them are numeric, as the numbers are what it labels.
	align := make([]string, width)
	for c := range align {
		if c < len(t.Align) {
			switch a := strings.ToLower(strings.TrimSpace(t.Align[c])); a {
			case "left", "right", "center":
				align[c] = a
				continue
			}
		}
		nums, cells := 0, 0
		for _, row := range t.Rows {
			if c < len(row) && strings.TrimSpace(row[c]) != "" {
				cells++
				if IsNumeric(row[c]) {
					nums++
				}
			}
		}
		if cells > 0 && 2*nums > cells {
			align[c] = "right"
		}
	}
	r.w("<div class=\"tablewrap\"><table>\n")
	if t.Title != "" {
		r.w("<caption>", esc(t.Title), "</caption>\n")
	}
	if len(t.Columns) > 0 {
		r.w("<thead><tr>")
		for c := range width {
			col := ""
			if c < len(t.Columns) {
				col = t.Columns[c]
			}
			// A heading may break after a slash ("attempts/read"):
			// numeric columns do not wrap, and their headings would
			// otherwise set their width.
			r.w("<th scope=\"col\"", cellClass(align[c], "left", col), ">", strings.ReplaceAll(esc(col), "/", "/<wbr>"), "</th>")
		}
		r.w("</tr></thead>\n")
	}
	r.w("<tbody>\n")
	for _, row := range t.Rows {
		r.w("<tr>")
		for c := range width {
			cell := ""
			if c < len(row) {
				cell = row[c]
			}
			def := "left"
			if IsNumeric(cell) {
				def = "right"
			}
			r.w("<td", cellClass(align[c], def, cell), ">", esc(cell), "</td>")
		}
		r.w("</tr>\n")
	}
	r.w("</tbody>\n</table></div>\n")
}

// longWord is the length from which a word in a cell may break anywhere:
// a model spec or a URL would otherwise widen its column past the page.
const longWord = 24

// cellClass returns a cell's class attribute: its alignment (a, or def),
// and "w" when it holds a word of longWord characters or more.
func cellClass(a, def, text string) string {
	if a == "" {
		a = def
	}
	var class []string
	switch a {
	case "right":
		class = append(class, "r")
	case "center":
		class = append(class, "c")
	}
	for _, word := range strings.Fields(text) {
		if utf8.RuneCountInString(word) >= longWord {
			class = append(class, "w")
			break
		}
	}
	if class == nil {
		return ""
	}
	return ` class="` + strings.Join(class, " ") + `"`
}

// css is the page's only styling. Plots carry their colours as SVG
// attributes, so they keep them when copied out of the page. Table cells
// wrap between words only (overflow-wrap:break-word, which, unlike
// anywhere, keeps a column as wide as its longest word: a narrow column
// split "frontier" as "frontie/r"), but for a cell with a word too long
// for any column (class w: a model spec, a URL), which breaks anywhere; figures do not wrap, their headings
// do, so that a heading ("extra attempts %") is no wider than its
// figures; and a wide table scrolls within the page rather than past it.
const css = `:root{color-scheme:light}
*{box-sizing:border-box}
body{margin:0;background:#f3f4f6;color:#1b1f24;font:16px/1.55 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;-webkit-text-size-adjust:100%}
main{max-width:1000px;margin:0 auto;padding:36px 40px 56px;background:#fff;min-height:100vh}
h1{font-size:1.9rem;line-height:1.2;margin:0 0 .3rem;letter-spacing:-.01em}
h2{font-size:1.35rem;line-height:1.3;margin:2.6rem 0 .6rem;padding-bottom:.3rem;border-bottom:1px solid #e3e5e8}
p{margin:.5rem 0 1rem;max-width:75ch}
.subtitle{color:#4b5563;font-size:1.1rem;margin:0 0 1.2rem}
.meta{display:grid;grid-template-columns:repeat(auto-fill,minmax(250px,1fr));gap:.3rem 1.6rem;margin:0 0 1.4rem;padding:.8rem 1.1rem;border:1px solid #dfe2e6;border-radius:6px;background:#f8f9fa;font-size:.86rem}
.meta div{display:flex;gap:.6rem;min-width:0}
.meta dt{color:#5b6470;flex:none}
.meta dd{margin:0;font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.82rem;overflow-wrap:anywhere;padding-top:.05rem}
.toc{font-size:.92rem;margin:0 0 1rem}
.toc ol{margin:0;padding-left:1.4rem;columns:2;column-gap:2rem}
.toc a{color:#0b5cad;text-decoration:none}
.toc a:hover{text-decoration:underline}
figure{margin:1.4rem 0 2.2rem}
figure svg{display:block;width:100%;height:auto}
svg text{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
figcaption{font-size:.92rem;color:#374151;margin:.3rem 0 0;max-width:80ch}
.footnote{display:block;color:#6b7280;font-size:.8rem;margin-top:.2rem}
.series:hover polyline{stroke-width:3.5}
h1,h2,p,caption,figcaption,.toc li{overflow-wrap:anywhere}
th,td{overflow-wrap:break-word}
th.w,td.w{overflow-wrap:anywhere}
.tablewrap{overflow-x:auto;margin:1.2rem 0 2rem}
table{border-collapse:collapse;font-size:.9rem;font-variant-numeric:tabular-nums;min-width:60%}
caption{text-align:left;font-weight:600;padding:0 0 .45rem}
th,td{padding:.38rem .6rem;border-bottom:1px solid #e5e7eb;text-align:left;vertical-align:top}
th{background:#f3f4f6;border-bottom:2px solid #9ca3af;font-weight:600}
tbody tr:nth-child(even){background:#fafafa}
th.r,td.r{text-align:right}
td.r{white-space:nowrap}
th.c,td.c{text-align:center}
@media (max-width:640px){main{padding:20px 14px 40px}.toc ol{columns:1}}
@media print{body{background:#fff}main{max-width:none;padding:0;min-height:0}figure,.tablewrap,tr{break-inside:avoid}h2{break-after:avoid}.toc a{color:inherit}}
`

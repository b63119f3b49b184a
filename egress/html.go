package egress

import (
	"fmt"
	"html"
	"io"
	"strings"
)

// WriteHTML writes the report as one self-contained HTML page: no scripts,
// no fonts, images or styles from the network. Three inline SVG charts
// (cost over time, by region pair, top buckets; each bar splits what was
// paid from what the cache saved, with a tooltip of the figures), the
// totals, the lines as a table and the notes. The page is also well-formed
// XML.
func WriteHTML(w io.Writer, r Report) error {
	var b strings.Builder
	t := r.Totals
	title := "fedgate egress " + windowText(r.Since, r.Until)
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n")
	fmt.Fprintf(&b, "<title>%s</title>\n", esc(title))
	b.WriteString(htmlStyle)
	b.WriteString("</head>\n<body>\n")
	fmt.Fprintf(&b, "<h1>Egress %s</h1>\n", esc(windowText(r.Since, r.Until)))
	b.WriteString("<div class=\"cards\">\n")
	for _, c := range [][2]string{
		{"Egress cost", "$" + t.Cost.String()},
		{"Saved by the cache", "$" + t.AvoidedCost.String()},
		{"Cache hit ratio", fmt.Sprintf("%.1f%%", 100*t.HitRatio)},
		{"Bytes moved", HumanBytes(t.Bytes)},
		{"Bytes avoided", HumanBytes(t.AvoidedBytes)},
	} {
		fmt.Fprintf(&b, "<div class=\"card\"><div class=\"k\">%s</div><div class=\"v\">%s</div></div>\n", esc(c[0]), esc(c[1]))
	}
	b.WriteString("</div>\n")

	b.WriteString("<h2>Cost over time (per UTC day)</h2>\n")
	timeChart(&b, r.Daily)
	b.WriteString("<h2>Cost by region pair</h2>\n")
	var pairs, buckets []bar
	for _, l := range top(r.Pairs, 10) {
		pairs = append(pairs, bar{label: star(l.Src) + " \u2192 " + star(l.Dst), line: l})
	}
	barChart(&b, "pairs", pairs)
	b.WriteString("<h2>Top buckets</h2>\n")
	for _, l := range top(r.Buckets, 10) {
		buckets = append(buckets, bar{label: star(l.Bucket), line: l})
	}
	barChart(&b, "buckets", buckets)

	fmt.Fprintf(&b, "<h2>By %s</h2>\n<table>\n<thead><tr>", esc(byText(r.By)))
	for _, c := range r.columns() {
		fmt.Fprintf(&b, "<th>%s</th>", esc(c))
	}
	b.WriteString("</tr></thead>\n<tbody>\n")
	for _, l := range r.Lines {
		b.WriteString("<tr>")
		if r.By == ByDay {
			td(&b, l.Day, false)
		}
		for _, s := range []string{l.Src, l.Dst, l.Bucket, l.Store, string(l.Direction)} {
			td(&b, star(s), false)
		}
		td(&b, HumanBytes(l.Bytes), true)
		td(&b, "$"+l.Cost.String(), true)
		td(&b, HumanBytes(l.AvoidedBytes), true)
		td(&b, "$"+l.AvoidedCost.String(), true)
		b.WriteString("</tr>\n")
	}
	b.WriteString("<tr class=\"total\">")
	n := 5
	if r.By == ByDay {
		n = 6
	}
	fmt.Fprintf(&b, "<td colspan=\"%d\">total</td>", n)
	td(&b, HumanBytes(t.Bytes), true)
	td(&b, "$"+t.Cost.String(), true)
	td(&b, HumanBytes(t.AvoidedBytes), true)
	td(&b, "$"+t.AvoidedCost.String(), true)
	b.WriteString("</tr>\n</tbody>\n</table>\n")
	fmt.Fprintf(&b, "<p>Read %s, wrote %s. Cache hit ratio = avoided / (avoided + read).</p>\n",
		esc(HumanBytes(t.ReadBytes)), esc(HumanBytes(t.WriteBytes)))
	if len(t.Budgets) > 0 {
		b.WriteString("<h2>Budgets this month</h2>\n<ul class=\"budgets\">\n")
		for _, s := range t.Budgets {
			class := "ok"
			if s.Exceeded {
				class = "spent"
			}
			fmt.Fprintf(&b, "<li class=\"%s\">%s</li>\n", class, esc(s.Message()))
		}
		b.WriteString("</ul>\n")
	}
	if len(t.Notes) > 0 {
		b.WriteString("<h2>Notes</h2>\n<ul class=\"notes\">\n")
		for _, n := range t.Notes {
			fmt.Fprintf(&b, "<li>%s</li>\n", esc(n))
		}
		b.WriteString("</ul>\n")
	}
	b.WriteString("</body>\n</html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

const htmlStyle = `<style>
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 1.6em; }
.cards { display: flex; gap: 1em; flex-wrap: wrap; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: 0.6em 1em; }
.card .k { font-size: 0.8em; color: #666; } .card .v { font-size: 1.3em; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border-bottom: 1px solid #eee; padding: 0.25em 0.6em; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
tr.total td { font-weight: bold; border-top: 1px solid #999; }
svg { display: block; margin: 0.5em 0; }
svg text { font-size: 11px; fill: #444; }
.cost { fill: #c0392b; } .saved { fill: #7dcea0; } .axis { stroke: #999; stroke-width: 1; }
.notes li { color: #555; font-size: 0.9em; }
.budgets li.spent { color: #c0392b; font-weight: bold; }
</style>
`

func esc(s string) string { return html.EscapeString(s) }

func td(b *strings.Builder, s string, num bool) {
	if num {
		fmt.Fprintf(b, "<td class=\"n\">%s</td>", esc(s))
		return
	}
	fmt.Fprintf(b, "<td>%s</td>", esc(s))
}

func top(ls []Line, n int) []Line {
	if len(ls) > n {
		return ls[:n]
	}
	return ls
}

func tip(label string, l Line) string {
	return fmt.Sprintf("%s: cost $%s for %s; saved $%s for %s avoided", label, l.Cost, HumanBytes(l.Bytes), l.AvoidedCost, HumanBytes(l.AvoidedBytes))
}

func legend(b *strings.Builder, x, y int) {
	fmt.Fprintf(b, "<rect class=\"cost\" x=\"%d\" y=\"%d\" width=\"10\" height=\"10\"/><text x=\"%d\" y=\"%d\">paid</text>\n", x, y, x+14, y+9)
	fmt.Fprintf(b, "<rect class=\"saved\" x=\"%d\" y=\"%d\" width=\"10\" height=\"10\"/><text x=\"%d\" y=\"%d\">saved by the cache</text>\n", x+54, y, x+68, y+9)
}

// timeChart draws one stacked bar per day: paid at the bottom, saved above,
// so the bar's height is what the day would have cost without the cache.
func timeChart(b *strings.Builder, days []Line) {
	const w, h, left, right, top, bottom = 760, 240, 64, 16, 24, 28
	fmt.Fprintf(b, "<svg class=\"chart\" id=\"chart-time\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"cost per day\">\n", w, h, w, h)
	legend(b, left, 4)
	maxv := 0.0
	for _, d := range days {
		maxv = max(maxv, d.Cost.Float64()+d.AvoidedCost.Float64())
	}
	plotW, plotH := float64(w-left-right), float64(h-top-bottom)
	fmt.Fprintf(b, "<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>\n", left, h-bottom, w-right, h-bottom)
	fmt.Fprintf(b, "<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>\n", left, top, left, h-bottom)
	if len(days) == 0 || maxv == 0 {
		fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\">no cost in this window</text>\n", left+10, top+30)
		b.WriteString("</svg>\n")
		return
	}
	for _, f := range []float64{0, 0.5, 1} {
		y := float64(h-bottom) - f*plotH
		fmt.Fprintf(b, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">$%s</text>\n", left-4, y+4, esc(fmt.Sprintf("%.2f", f*maxv)))
	}
	slot := plotW / float64(len(days))
	bw := max(slot*0.8, 1)
	for i, d := range days {
		x := float64(left) + float64(i)*slot + (slot-bw)/2
		ch := d.Cost.Float64() / maxv * plotH
		sh := d.AvoidedCost.Float64() / maxv * plotH
		base := float64(h - bottom)
		fmt.Fprintf(b, "<g><title>%s</title>", esc(tip(d.Day, d)))
		fmt.Fprintf(b, "<rect class=\"cost\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>", x, base-ch, bw, ch)
		fmt.Fprintf(b, "<rect class=\"saved\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>", x, base-ch-sh, bw, sh)
		b.WriteString("</g>\n")
	}
	labels := []int{0, len(days) / 2, len(days) - 1}
	if len(days) < 3 {
		labels = labels[:1]
	}
	for j, i := range labels {
		x, anchor := float64(left)+(float64(i)+0.5)*slot, "middle"
		switch {
		case len(labels) == 1:
		case j == 0:
			x, anchor = float64(left), "start"
		case j == 2:
			x, anchor = float64(w-right), "end"
		}
		fmt.Fprintf(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"%s\">%s</text>\n", x, h-bottom+16, anchor, esc(days[i].Day))
	}
	b.WriteString("</svg>\n")
}

type bar struct {
	label string
	line  Line
}

// barChart draws horizontal stacked bars (paid, then saved), one per item.
func barChart(b *strings.Builder, id string, bars []bar) {
	const w, labelW, right, rowH, top = 760, 260, 90, 22, 24
	h := top + max(len(bars), 1)*rowH + 8
	fmt.Fprintf(b, "<svg class=\"chart\" id=\"chart-%s\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"%s\">\n", esc(id), w, h, w, h, esc(id))
	legend(b, labelW, 4)
	maxv := 0.0
	for _, x := range bars {
		maxv = max(maxv, x.line.Cost.Float64()+x.line.AvoidedCost.Float64())
	}
	if len(bars) == 0 || maxv == 0 {
		fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\">no cost in this window</text>\n", labelW, top+14)
		b.WriteString("</svg>\n")
		return
	}
	plotW := float64(w - labelW - right)
	for i, x := range bars {
		y := top + i*rowH
		cw := x.line.Cost.Float64() / maxv * plotW
		sw := x.line.AvoidedCost.Float64() / maxv * plotW
		fmt.Fprintf(b, "<g><title>%s</title>", esc(tip(x.label, x.line)))
		fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>", labelW-6, y+14, esc(x.label))
		fmt.Fprintf(b, "<rect class=\"cost\" x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\"/>", labelW, y+3, cw, rowH-6)
		fmt.Fprintf(b, "<rect class=\"saved\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\"/>", float64(labelW)+cw, y+3, sw, rowH-6)
		fmt.Fprintf(b, "<text x=\"%.1f\" y=\"%d\">$%s</text>", float64(labelW)+cw+sw+4, y+14, esc(x.line.Cost.String()))
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
}

package egress

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteSimTable writes a simulation's results for a terminal: one line
// per strategy, in the order simulated, with its cost against the
// cheapest, what each strategy does, then the notes.
func WriteSimTable(w io.Writer, r *SimResult) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "Trace: %d rows (%d gets, %d puts, %d deletes), %d objects, %s to %s (%s); regions %v\n\n",
		r.Rows, r.Gets, r.Puts, r.Deletes, r.Objects, r.Start.Format(time.RFC3339), r.End.Format(time.RFC3339),
		spanText(r.End.Sub(r.Start)), r.Regions)
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\ttotal USD\tegress USD\tstorage USD\t(copies)\trequests USD\tbytes moved\thit ratio\tvs best\tvs optimum\t")
	// Ratios of amounts that all round to 0.00 say nothing: not shown.
	zero := r.Best().Total.String() == "0.00"
	for _, s := range r.Strategies {
		vb, vo := vsBest(s.VsBest), ratioText(s.VsOptimum)
		if zero {
			vb = "-"
		}
		if r.Optimum.String() == "0.00" {
			vo = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f%%\t%s\t%s\t\n", s.Name, s.Total, s.Egress, s.Storage, s.CopyStorage, s.Requests,
			HumanBytes(s.BytesMoved), 100*s.HitRatio, vb, vo)
	}
	one := "1.00×"
	if r.Optimum.String() == "0.00" {
		one = "-"
	}
	fmt.Fprintf(tw, "offline optimum\t%s\t\t\t\t\t\t\t\t%s\t\n", r.Optimum, one)
	tw.Flush()
	fmt.Fprintln(ew)
	for _, s := range r.Strategies {
		fmt.Fprintf(ew, "  %-16s %s\n", s.Name, s.Description)
	}
	if len(r.Notes) > 0 {
		fmt.Fprintln(ew, "\nNotes:")
		for _, n := range r.Notes {
			fmt.Fprintf(ew, "  - %s\n", n)
		}
	}
	return ew.err
}

// ratioText writes a cost's ratio to the offline optimum: "1.07×".
func ratioText(v float64) string {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.2f×", v)
}

func vsBest(v float64) string {
	if v == 1 {
		return "best"
	}
	return fmt.Sprintf("+%.1f%%", 100*(v-1))
}

// Best returns the cheapest strategy's result (the first of equals).
func (r *SimResult) Best() StrategyResult {
	best := r.Strategies[0]
	for _, s := range r.Strategies[1:] {
		if s.Total.Cmp(best.Total) < 0 {
			best = s
		}
	}
	return best
}

// Strategy returns the result of the strategy called name.
func (r *SimResult) Strategy(name string) (StrategyResult, bool) {
	for _, s := range r.Strategies {
		if s.Name == name {
			return s, true
		}
	}
	return StrategyResult{}, false
}

// WriteSimJSON writes a simulation's results as {"trace": {"rows",
// "gets", "puts", "deletes", "objects", "start", "end", "regions"},
// "strategies": [{"name", "description", "total_usd", "egress_usd",
// "storage_usd", "copy_storage_usd", "requests_usd", "bytes_moved",
// "read_bytes", "local_bytes", "copy_hit_bytes", "hit_ratio", "gets",
// "puts", "vs_best"}], "best", "notes"}. Amounts are rounded to the cent
// once, as in the egress report.
func WriteSimJSON(w io.Writer, r *SimResult) error {
	type strat struct {
		Name        string  `json:"name"`
		Description string  `json:"description"`
		Total       USD     `json:"total_usd"`
		Egress      USD     `json:"egress_usd"`
		Storage     USD     `json:"storage_usd"`
		CopyStorage USD     `json:"copy_storage_usd"`
		Requests    USD     `json:"requests_usd"`
		Moved       int64   `json:"bytes_moved"`
		Read        int64   `json:"read_bytes"`
		Local       int64   `json:"local_bytes"`
		CopyHit     int64   `json:"copy_hit_bytes"`
		HitRatio    float64 `json:"hit_ratio"`
		Gets        int64   `json:"gets"`
		Puts        int64   `json:"puts"`
		VsBest      float64 `json:"vs_best"`
		VsOptimum   float64 `json:"vs_optimum"`
	}
	type trace struct {
		Rows    int64    `json:"rows"`
		Gets    int64    `json:"gets"`
		Puts    int64    `json:"puts"`
		Deletes int64    `json:"deletes"`
		Objects int      `json:"objects"`
		Start   string   `json:"start"`
		End     string   `json:"end"`
		Regions []string `json:"regions"`
	}
	doc := struct {
		Trace      trace    `json:"trace"`
		Strategies []strat  `json:"strategies"`
		Best       string   `json:"best"`
		Optimum    USD      `json:"optimum_usd"`
		Notes      []string `json:"notes"`
	}{Trace: trace{r.Rows, r.Gets, r.Puts, r.Deletes, r.Objects, r.Start.Format(time.RFC3339Nano), r.End.Format(time.RFC3339Nano), r.Regions},
		Best: r.Best().Name, Optimum: r.Optimum, Notes: r.Notes}
	for _, s := range r.Strategies {
		vs := s.VsBest
		if math.IsInf(vs, 0) || math.IsNaN(vs) {
			vs = -1
		}
		vo := s.VsOptimum
		if math.IsInf(vo, 0) || math.IsNaN(vo) {
			vo = -1
		}
		doc.Strategies = append(doc.Strategies, strat{s.Name, s.Description, s.Total, s.Egress, s.Storage, s.CopyStorage, s.Requests,
			s.BytesMoved, s.ReadBytes, s.LocalBytes, s.CopyHitBytes, math.Round(s.HitRatio*1e4) / 1e4, s.Gets, s.Puts, math.Round(vs*1e4) / 1e4,
			math.Round(vo*1e4) / 1e4})
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// WriteSimHTML writes a simulation's results as one self-contained HTML
// page (no scripts, nothing from the network; well-formed XML), like the
// egress report's: the trace in figures, a chart of each strategy's cost
// split into egress (every transfer between locations), storage and
// requests (hover a bar for the
// figures), the table and the notes.
func WriteSimHTML(w io.Writer, r *SimResult) error {
	var b strings.Builder
	best := r.Best()
	title := fmt.Sprintf("fedgate egress simulate: %s to %s", r.Start.Format(time.DateOnly), r.End.Format(time.DateOnly))
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n")
	fmt.Fprintf(&b, "<title>%s</title>\n", esc(title))
	b.WriteString(htmlStyle)
	b.WriteString("<style>\n.storage { fill: #2e86c1; } .requests { fill: #999; }\n</style>\n</head>\n<body>\n")
	fmt.Fprintf(&b, "<h1>%s</h1>\n<div class=\"cards\">\n", esc(title))
	for _, c := range [][2]string{
		{"Cheapest", best.Name + ": $" + best.Total.String()},
		{"Trace rows", fmt.Sprintf("%d (%d gets, %d puts, %d deletes)", r.Rows, r.Gets, r.Puts, r.Deletes)},
		{"Objects", fmt.Sprint(r.Objects)},
		{"Span", spanText(r.End.Sub(r.Start))},
		{"Regions", strings.Join(r.Regions, ", ")},
	} {
		fmt.Fprintf(&b, "<div class=\"card\"><div class=\"k\">%s</div><div class=\"v\">%s</div></div>\n", esc(c[0]), esc(c[1]))
	}
	b.WriteString("</div>\n<h2>Total cost by strategy</h2>\n")
	simChart(&b, r.Strategies)
	b.WriteString("<h2>Strategies</h2>\n<table>\n<thead><tr>")
	for _, c := range []string{"strategy", "total", "egress", "storage", "(of it copies)", "requests", "bytes moved", "hit ratio", "vs best", "what it does"} {
		fmt.Fprintf(&b, "<th>%s</th>", esc(c))
	}
	b.WriteString("</tr></thead>\n<tbody>\n")
	for _, s := range r.Strategies {
		b.WriteString("<tr>")
		td(&b, s.Name, false)
		for _, v := range []string{"$" + s.Total.String(), "$" + s.Egress.String(), "$" + s.Storage.String(), "$" + s.CopyStorage.String(),
			"$" + s.Requests.String(), HumanBytes(s.BytesMoved), fmt.Sprintf("%.1f%%", 100*s.HitRatio), vsBest(s.VsBest)} {
			td(&b, v, true)
		}
		td(&b, s.Description, false)
		b.WriteString("</tr>\n")
	}
	b.WriteString("</tbody>\n</table>\n<p>Hit ratio = bytes read in the reading region's own location (a copy there, or data that lives there) / bytes read.</p>\n")
	if len(r.Notes) > 0 {
		b.WriteString("<h2>Notes</h2>\n<ul class=\"notes\">\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "<li>%s</li>\n", esc(n))
		}
		b.WriteString("</ul>\n")
	}
	b.WriteString("</body>\n</html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// simChart draws one horizontal bar per strategy: egress, storage,
// requests.
func simChart(b *strings.Builder, ss []StrategyResult) {
	const w, labelW, right, rowH, top = 760, 130, 150, 24, 24
	h := top + max(len(ss), 1)*rowH + 8
	fmt.Fprintf(b, "<svg class=\"chart\" id=\"chart-strategies\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"cost by strategy\">\n", w, h, w, h)
	x := labelW
	for _, l := range []struct{ class, text string }{{"cost", "egress"}, {"storage", "storage"}, {"requests", "requests"}} {
		fmt.Fprintf(b, "<rect class=\"%s\" x=\"%d\" y=\"4\" width=\"10\" height=\"10\"/><text x=\"%d\" y=\"13\">%s</text>\n", l.class, x, x+14, l.text)
		x += 90
	}
	maxv := 0.0
	for _, s := range ss {
		maxv = max(maxv, s.Total.Float64())
	}
	if maxv == 0 {
		fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\">nothing cost anything</text>\n</svg>\n", labelW, top+14)
		return
	}
	plotW := float64(w - labelW - right)
	for i, s := range ss {
		y := top + i*rowH
		fmt.Fprintf(b, "<g><title>%s</title>", esc(fmt.Sprintf("%s: $%s = egress $%s + storage $%s (copies $%s) + requests $%s; %s moved; hit ratio %.1f%%",
			s.Name, s.Total, s.Egress, s.Storage, s.CopyStorage, s.Requests, HumanBytes(s.BytesMoved), 100*s.HitRatio)))
		fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>", labelW-6, y+15, esc(s.Name))
		at := float64(labelW)
		for _, part := range []struct {
			class string
			v     USD
		}{{"cost", s.Egress}, {"storage", s.Storage}, {"requests", s.Requests}} {
			pw := part.v.Float64() / maxv * plotW
			fmt.Fprintf(b, "<rect class=\"%s\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\"/>", part.class, at, y+3, pw, rowH-6)
			at += pw
		}
		fmt.Fprintf(b, "<text x=\"%.1f\" y=\"%d\">$%s (%s)</text>", at+4, y+15, esc(s.Total.String()), esc(vsBest(s.VsBest)))
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
}

func spanText(d time.Duration) string {
	if d < 48*time.Hour {
		return d.Round(time.Minute).String()
	}
	return fmt.Sprintf("%.1f days", d.Hours()/24)
}

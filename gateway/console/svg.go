package console

import (
	"fmt"
	"html"
	"math"
	"strings"
	"time"

	"github.com/fedgate/fedgate/internal/bytesize"
)

// The charts are drawn on the server as inline SVG: no script, no font or
// file from anywhere, so they pass the console's Content-Security-Policy
// and render in any browser (and in a PNG taken by a headless one).

const (
	svgW       = 600
	svgPlotH   = 170
	svgPadL    = 74
	svgPadR    = 16
	svgPadT    = 18
	svgPadB    = 24
	svgLegendH = 18 // one legend row
	svgTicksY  = 4  // intervals on the value axis
	svgTicksX  = 6  // intervals on the time axis
)

// chartColors are the series' colours, in order.
var chartColors = []string{"#24527a", "#d0661e", "#2a8c4a", "#a4161a", "#7048a8", "#8a6d00", "#1b8a8f", "#6b6b6b"}

// renderChartSVG draws a panel: value and time axes with units, a line per
// series (broken where a value is null), a dot at each series' newest
// value, and a legend with the current values below. The <svg> carries
// id "chart-<panel>"; each line is a <path class="series"> with
// data-series (its name) and data-points (how many points it joins).
func renderChartSVG(p ChartPanel) string {
	cols := 2
	rows := (len(p.Series) + cols - 1) / cols
	if rows == 0 {
		rows = 1
	}
	h := svgPadT + svgPlotH + svgPadB + rows*svgLegendH + 6
	x0, x1 := float64(svgPadL), float64(svgW-svgPadR)
	y0, y1 := float64(svgPadT+svgPlotH), float64(svgPadT) // y0: the value 0
	from, to := p.From, p.To
	if !to.After(from) {
		to = from.Add(time.Second)
	}
	span := to.Sub(from).Seconds()
	xOf := func(t time.Time) float64 {
		f := t.Sub(from).Seconds() / span
		return x0 + (x1-x0)*math.Min(math.Max(f, 0), 1)
	}

	vmax, hasData := 0.0, false
	for _, s := range p.Series {
		for _, v := range s.Points {
			if v.V != nil {
				hasData = true
				vmax = math.Max(vmax, *v.V)
			}
		}
	}
	top, scale := chartTop(p.Unit, vmax)
	yOf := func(v float64) float64 {
		return y0 - (y0-y1)*math.Min(math.Max(v/top, 0), 1)
	}

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" id="chart-%s" class="chart" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s">`,
		esc(p.Panel), svgW, h, svgW, h, esc(p.Title))
	fmt.Fprintf(&b, `<title>%s (%s)</title>`, esc(p.Title), esc(p.Unit))
	fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="#fbfcfd" stroke="#d8dde2"/>`, x0, y1, x1-x0, y0-y1)
	// The value axis: grid lines, labels, the unit.
	for i := 0; i <= svgTicksY; i++ {
		v := top * float64(i) / svgTicksY
		y := yOf(v)
		if i > 0 {
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e6e9ec"/>`, x0, y, x1, y)
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" font-size="10" fill="#5b6670">%s</text>`, x0-5, y+3.5, esc(chartTick(p.Unit, v, scale)))
	}
	fmt.Fprintf(&b, `<text class="unit" x="4" y="11" font-size="10" font-weight="600" fill="#5b6670">%s</text>`, esc(chartUnitLabel(p.Unit)))
	// The time axis, UTC.
	layout := "15:04"
	if span < 15*60 {
		layout = "15:04:05"
	}
	for i := 0; i <= svgTicksX; i++ {
		t := from.Add(time.Duration(float64(i) / svgTicksX * span * float64(time.Second)))
		x := xOf(t)
		anchor := "middle"
		switch i {
		case 0:
			anchor = "start"
		case svgTicksX:
			anchor = "end"
		}
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#c4cad0"/>`, x, y0, x, y0+4)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="%s" font-size="10" fill="#5b6670">%s</text>`, x, y0+15, anchor, t.UTC().Format(layout))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="11" text-anchor="end" font-size="10" fill="#5b6670">UTC · last %s</text>`, x1, esc(p.Window))

	if !hasData {
		fmt.Fprintf(&b, `<text class="empty" x="%.1f" y="%.1f" text-anchor="middle" font-size="12" fill="#5b6670">no data yet</text>`, (x0+x1)/2, (y0+y1)/2)
	}
	for i, s := range p.Series {
		color := chartColors[i%len(chartColors)]
		var d strings.Builder
		n, pen := 0, false
		var last *ChartValue
		for j := range s.Points {
			v := s.Points[j]
			if v.V == nil {
				pen = false
				continue
			}
			cmd := "L"
			if !pen {
				cmd = "M"
			}
			if d.Len() > 0 {
				d.WriteByte(' ')
			}
			fmt.Fprintf(&d, "%s%.1f %.1f", cmd, xOf(v.T), yOf(*v.V))
			pen = true
			n++
			last = &s.Points[j]
		}
		if n > 0 {
			fmt.Fprintf(&b, `<path class="series" data-series="%s" data-points="%d" d="%s" fill="none" stroke="%s" stroke-width="1.6" stroke-linejoin="round"/>`,
				esc(s.Name), n, d.String(), color)
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>`, xOf(last.T), yOf(*last.V), color)
		}
		// The legend: a swatch, the name and the current value.
		lx := 8 + float64(i%cols)*float64(svgW/cols)
		ly := float64(svgPadT+svgPlotH+svgPadB+(i/cols)*svgLegendH) + 12
		cur := "-"
		if s.Current != nil {
			cur = chartValue(p.Unit, *s.Current)
		}
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="12" height="4" fill="%s"/>`, lx, ly-5, color)
		fmt.Fprintf(&b, `<text class="legend" x="%.1f" y="%.1f" font-size="11" fill="#1d2329">%s <tspan font-weight="600">%s</tspan></text>`,
			lx+17, ly, esc(s.Name), esc(cur))
	}
	b.WriteString(`</svg>`)
	return b.String()
}

func esc(s string) string { return html.EscapeString(s) }

// chartTop returns the value axis's top: a round number at or above vmax
// (1 of the unit when vmax is 0), and the scale its labels are written in
// (1024^k for bytes, 1 otherwise).
func chartTop(unit string, vmax float64) (top, scale float64) {
	scale = 1
	switch unit {
	case "ratio":
		return 1, 1
	case "bytes", "bytes/s", "bytes/h":
		for vmax/scale >= 1024 && scale < 1<<60 {
			scale *= 1024
		}
	}
	v := vmax / scale
	switch {
	case unit == "objects" && vmax < 4:
		return 4, 1 // whole objects on every tick
	case strings.HasPrefix(unit, "bytes") && vmax < 1024:
		return 1024, 1024 // 1 KiB
	case v <= 0:
		return scale, scale
	}
	mag := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 4, 5, 8, 10} {
		if m*mag >= v*(1-1e-9) {
			return m * mag * scale, scale
		}
	}
	return 10 * mag * scale, scale
}

// chartUnitLabel is the value axis's title.
func chartUnitLabel(unit string) string {
	switch unit {
	case "ratio":
		return "%"
	case "seconds":
		return "latency"
	case "bytes/h", "USD/h":
		return "per hour"
	}
	return unit
}

// chartTick writes a value axis label.
func chartTick(unit string, v, scale float64) string {
	switch unit {
	case "bytes", "bytes/s", "bytes/h":
		suffix := strings.TrimPrefix(unit, "bytes")
		if v == 0 {
			return "0"
		}
		return trimNum(v/scale) + " " + iecUnit(scale) + suffix
	}
	return chartValue(unit, v)
}

// chartValue writes a value with its unit, bytes in IEC units.
func chartValue(unit string, v float64) string {
	switch unit {
	case "bytes":
		return iecBytes(v)
	case "bytes/s":
		return iecBytes(v) + "/s"
	case "bytes/h":
		return iecBytes(v) + "/h"
	case "ratio":
		return trimNum(100*v) + "%"
	case "seconds":
		if v < 1 {
			return trimNum(v*1000) + " ms"
		}
		return trimNum(v) + " s"
	case "USD/h":
		if v == 0 {
			return "0 USD/h"
		}
		return fmt.Sprintf("%.4g USD/h", v)
	case "requests/s":
		return trimNum(v) + " req/s"
	case "objects":
		return fmt.Sprintf("%.0f", v)
	}
	return trimNum(v) + " " + unit
}

// trimNum writes v with three significant digits at most, without
// trailing zeros.
func trimNum(v float64) string {
	a := math.Abs(v)
	var s string
	switch {
	case a == 0:
		return "0"
	case a >= 100:
		s = fmt.Sprintf("%.0f", v)
	case a >= 10:
		s = fmt.Sprintf("%.1f", v)
	case a >= 1:
		s = fmt.Sprintf("%.2f", v)
	default:
		s = fmt.Sprintf("%.3g", v)
	}
	if strings.Contains(s, ".") && !strings.ContainsAny(s, "e") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

var iecUnits = []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}

func iecUnit(scale float64) string {
	i := 0
	for s := scale; s >= 1024 && i < len(iecUnits)-1; s /= 1024 {
		i++
	}
	return iecUnits[i]
}

// iecBytes writes a byte count as the CLI and the logs do
// (internal/bytesize: IEC units, two decimals): 1536 -> "1.50 KiB".
func iecBytes(v float64) string { return bytesize.Format(int64(math.Round(v))) }

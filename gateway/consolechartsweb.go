package gateway

import (
	"context"
	"html/template"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/fedgate/fedgate/adminapi"
	"github.com/fedgate/fedgate/egress"
)

// The charts page (/_fedgate/ui/charts) and the panels' JSON, for scripts:
//
//	GET /_fedgate/admin/console/panels[?window=hour|day]          SigV4, root
//	GET /_fedgate/admin/console/panels/{panel}[?window=hour|day]  SigV4, root
//	GET /_fedgate/ui/api/panels[/{panel}][?window=...]            the console's session cookie, root
//
// The charts show the whole node's traffic and egress cost, across every
// bucket, so they are root's, like the admin API.

// RunCharts samples the node's metrics for the console's charts every
// Config.ChartInterval until ctx ends. The node runs it with its loops.
func (s *Server) RunCharts(ctx context.Context) {
	s.console.charts.run(ctx, s.cfg.Now)
}

// ChartPanelList is the answer of GET .../panels: every panel over one
// window.
type ChartPanelList struct {
	Window          string       `json:"window"`
	IntervalSeconds float64      `json:"interval_seconds"` // how often the node samples
	Panels          []ChartPanel `json:"panels"`
}

// chartsRoutes are the admin API's console routes.
func (s *Server) chartsRoutes(r chi.Router) {
	r.Get("/console/panels", func(w http.ResponseWriter, r *http.Request) { s.console.writePanels(w, r) })
	r.Get("/console/panels/{panel}", func(w http.ResponseWriter, r *http.Request) { s.console.writePanel(w, r) })
}

// priceTable is the egress price table the cost chart uses: the active
// policy's prices, else the built-in rates.
func (c *console) priceTable(ctx context.Context) *egress.Table {
	pol, err := c.policy(ctx)
	if err != nil || pol == nil {
		return egress.DefaultTable()
	}
	t, err := egress.NewTable(pol.Egress.Prices)
	if err != nil {
		return egress.DefaultTable()
	}
	return t
}

// window reads ?window=, "hour" by default; false: answered 400.
func chartWindow(w http.ResponseWriter, r *http.Request) (string, bool) {
	win := r.URL.Query().Get("window")
	if win == "" {
		win = "hour"
	}
	if !chartWindowOK(win) {
		writeJSON(w, http.StatusBadRequest, adminapi.Error{Error: "window must be hour or day, not " + quoteShort(win), Code: "InvalidArgument"})
		return "", false
	}
	return win, true
}

func quoteShort(s string) string {
	if len(s) > 32 {
		s = s[:32] + "..."
	}
	return `"` + s + `"`
}

func (c *console) panels(ctx context.Context, window string) []ChartPanel {
	ctx, cancel := context.WithTimeout(ctx, consolePartTimeout)
	defer cancel()
	table := c.priceTable(ctx)
	now := c.s.cfg.Now()
	out := make([]ChartPanel, 0, len(ChartPanels))
	for _, name := range ChartPanels {
		p, _ := c.charts.panel(name, window, now, table)
		p.Node = c.s.cfg.NodeID
		out = append(out, p)
	}
	return out
}

func (c *console) writePanels(w http.ResponseWriter, r *http.Request) {
	win, ok := chartWindow(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, ChartPanelList{Window: win, IntervalSeconds: c.charts.interval.Seconds(), Panels: c.panels(r.Context(), win)})
}

func (c *console) writePanel(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "panel")
	if !chartPanelName(name) {
		writeJSON(w, http.StatusNotFound, adminapi.Error{Error: "no panel " + quoteShort(name) + "; the panels are requests, bytes-served, hit-ratio, egress-bytes, egress-cost, backlog-bytes, backlog-objects and latency", Code: "NoSuchPanel"})
		return
	}
	win, ok := chartWindow(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), consolePartTimeout)
	defer cancel()
	p, _ := c.charts.panel(name, win, c.s.cfg.Now(), c.priceTable(ctx))
	p.Node = c.s.cfg.NodeID
	writeJSON(w, http.StatusOK, p)
}

// apiUser admits a console session of root to the JSON routes: no session
// is 401, another user 403 (JSON answers, not the sign-in redirect).
func (c *console) apiUser(w http.ResponseWriter, r *http.Request) bool {
	u, ok := c.session(r)
	if !ok {
		writeJSON(w, http.StatusUnauthorized, adminapi.Error{Error: "sign in to the console first, or sign the request with the root user's keys at /_fedgate/admin/console/panels", Code: "Unauthorized"})
		return false
	}
	if ri := infoFrom(r.Context()); ri != nil {
		ri.setUser(u.Name)
	}
	if !u.Root {
		writeJSON(w, http.StatusForbidden, adminapi.Error{Error: "the charts are shown to the root user only", Code: "AccessDenied"})
		return false
	}
	return true
}

func (c *console) apiPanels(w http.ResponseWriter, r *http.Request) {
	if c.apiUser(w, r) {
		c.writePanels(w, r)
	}
}

func (c *console) apiPanel(w http.ResponseWriter, r *http.Request) {
	if c.apiUser(w, r) {
		c.writePanel(w, r)
	}
}

type chartsPage struct {
	Title    string
	User     string
	Root     bool
	Region   string
	Node     string
	Version  string
	Now      time.Time
	Refresh  int
	Window   string
	Interval time.Duration
	Step     time.Duration
	Panels   []chartView
}

type chartView struct {
	ChartPanel
	SVG template.HTML
}

func (c *console) chartsPage(w http.ResponseWriter, r *http.Request) {
	u, ok := c.session(r)
	if !ok {
		c.toLogin(w, r)
		return
	}
	if ri := infoFrom(r.Context()); ri != nil {
		ri.setUser(u.Name)
	}
	if !u.Root {
		c.render(w, http.StatusForbidden, "message", messagePage{Title: "Root only", User: u.Name,
			Message: "The charts show the whole node's traffic and egress cost, across every bucket, so only the root user sees them."})
		return
	}
	win := r.URL.Query().Get("window")
	if win == "" {
		win = "hour"
	}
	if !chartWindowOK(win) {
		c.render(w, http.StatusBadRequest, "message", messagePage{Title: "No such window", User: u.Name,
			Message: "The charts cover the last hour (window=hour) or the last day (window=day)."})
		return
	}
	_, step, _ := c.charts.window(win)
	p := chartsPage{Title: "Charts", User: u.Name, Root: true, Region: c.s.cfg.RegionName, Node: c.s.cfg.NodeID, Version: c.s.cfg.Version,
		Now: c.s.cfg.Now().UTC(), Refresh: consoleRefresh, Window: win, Interval: c.charts.interval, Step: step}
	for _, pn := range c.panels(r.Context(), win) {
		p.Panels = append(p.Panels, chartView{ChartPanel: pn, SVG: template.HTML(renderChartSVG(pn))}) // every text in it is escaped
	}
	c.render(w, http.StatusOK, "charts", p)
}

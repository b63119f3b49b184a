package console

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

// ChartPanelList is the answer of GET .../panels: every panel over one
// window.
type ChartPanelList struct {
	Window          string       `json:"window"`
	IntervalSeconds float64      `json:"interval_seconds"` // how often the node samples
	Panels          []ChartPanel `json:"panels"`
}

// priceTable is the egress price table the cost chart uses: the active
// policy's prices, else the built-in rates.
func (c *Console) priceTable(ctx context.Context) *egress.Table {
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

func (c *Console) panels(ctx context.Context, window string) []ChartPanel {
	ctx, cancel := context.WithTimeout(ctx, consolePartTimeout)
	defer cancel()
	table := c.priceTable(ctx)
	now := c.cfg.Now()
	out := make([]ChartPanel, 0, len(ChartPanels))
	for _, name := range ChartPanels {
		p, _ := c.charts.panel(name, window, now, table)
		p.Node = c.cfg.NodeID
		out = append(out, p)
	}
	return out
}

// WritePanels answers GET .../panels: every panel over ?window=.
func (c *Console) WritePanels(w http.ResponseWriter, r *http.Request) {
	win, ok := chartWindow(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, ChartPanelList{Window: win, IntervalSeconds: c.charts.interval.Seconds(), Panels: c.panels(r.Context(), win)})
}

// WritePanel answers GET .../panels/{panel}.
func (c *Console) WritePanel(w http.ResponseWriter, r *http.Request) {
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
	p, _ := c.charts.panel(name, win, c.cfg.Now(), c.priceTable(ctx))
	p.Node = c.cfg.NodeID
	writeJSON(w, http.StatusOK, p)
}

// apiUser admits a console session of root to the JSON routes: no session
// is 401, another user 403 (JSON answers, not the sign-in redirect).
func (c *Console) apiUser(w http.ResponseWriter, r *http.Request) bool {
	u, ok := c.session(r)
	if !ok {
		writeJSON(w, http.StatusUnauthorized, adminapi.Error{Error: "sign in to the console first, or sign the request with the root user's keys at /_fedgate/admin/console/panels", Code: "Unauthorized"})
		return false
	}
	c.cfg.SetUser(r.Context(), u.Name)
	if !u.Root {
		writeJSON(w, http.StatusForbidden, adminapi.Error{Error: "the charts are shown to the root user only", Code: "AccessDenied"})
		return false
	}
	return true
}

func (c *Console) apiPanels(w http.ResponseWriter, r *http.Request) {
	if c.apiUser(w, r) {
		c.WritePanels(w, r)
	}
}

func (c *Console) apiPanel(w http.ResponseWriter, r *http.Request) {
	if c.apiUser(w, r) {
		c.WritePanel(w, r)
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

func (c *Console) chartsPage(w http.ResponseWriter, r *http.Request) {
	u, ok := c.session(r)
	if !ok {
		c.toLogin(w, r)
		return
	}
	c.cfg.SetUser(r.Context(), u.Name)
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
	p := chartsPage{Title: "Charts", User: u.Name, Root: true, Region: c.cfg.RegionName, Node: c.cfg.NodeID, Version: c.cfg.Version,
		Now: c.cfg.Now().UTC(), Refresh: consoleRefresh, Window: win, Interval: c.charts.interval, Step: step}
	for _, pn := range c.panels(r.Context(), win) {
		p.Panels = append(p.Panels, chartView{ChartPanel: pn, SVG: template.HTML(renderChartSVG(pn))}) // every text in it is escaped
	}
	c.render(w, http.StatusOK, "charts", p)
}

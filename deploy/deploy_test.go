package deploy

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

const (
	rulesFile     = "prometheus/fedgate-alerts.yml"
	dashboardFile = "grafana/fedgate.json"
	dsVariable    = "DS_PROMETHEUS"
)

// promql is Prometheus's PromQL parser with its default (stable) features:
// an expression that needs an experimental flag fails here.
var promql = parser.NewParser(parser.Options{})

// targetLabels are the labels Prometheus attaches to every series it
// scrapes (job, instance) or that the scrape config adds (region,
// docs/monitoring.md): no node exports them.
var targetLabels = map[string]bool{"job": true, "instance": true, "region": true}

// selectorUse is a metric an expression selects and the labels it names:
// in the selector's matchers, or in the grouping of an aggregation over it.
type selectorUse struct {
	metric string
	labels []string
	where  string // file and rule or panel, for messages
}

// uses walks a parsed expression for every vector selector (in range
// selectors and subqueries too) and every aggregation's by-labels.
func uses(expr parser.Expr, where string) []selectorUse {
	var out []selectorUse
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			u := selectorUse{metric: n.Name, where: where}
			for _, m := range n.LabelMatchers {
				switch {
				case m.Name == model.MetricNameLabel:
					if u.metric == "" {
						u.metric = m.Value
					}
				default:
					u.labels = append(u.labels, m.Name)
				}
			}
			out = append(out, u)
		case *parser.AggregateExpr:
			if n.Without || len(n.Grouping) == 0 {
				return nil
			}
			// Every series under the aggregation must carry the labels it
			// groups by, or the groups come out without them.
			parser.Inspect(n.Expr, func(m parser.Node, _ []parser.Node) error {
				if vs, ok := m.(*parser.VectorSelector); ok {
					out = append(out, selectorUse{metric: vs.Name, labels: slices.Clone(n.Grouping), where: where})
				}
				return nil
			})
		}
		return nil
	})
	return out
}

// parseRules loads the rules file with Prometheus's own loader (strict: an
// unknown field is an error), which also parses every expression and
// checks every annotation and label template.
func parseRules(t *testing.T) *rulefmt.RuleGroups {
	t.Helper()
	groups, errs := rulefmt.ParseFile(rulesFile, false, model.UTF8Validation, promql, slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Errorf("%v", err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	return groups
}

// ruleUses returns what every rule's expression selects.
func ruleUses(t *testing.T, groups *rulefmt.RuleGroups) []selectorUse {
	t.Helper()
	var out []selectorUse
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			e, err := promql.ParseExpr(r.Expr)
			if err != nil {
				t.Fatalf("%s: alert %s: %v", rulesFile, r.Alert, err)
			}
			out = append(out, uses(e, fmt.Sprintf("%s: alert %s", rulesFile, r.Alert))...)
		}
	}
	return out
}

// docRef is a link to a doc (and a section of it) in an annotation.
var docRef = regexp.MustCompile(`docs/[a-z0-9_-]+\.md(#[a-z0-9_-]+)?`)

// TestAlertRules: the rules parse with Prometheus's rule loader, each is an
// alert with a for: duration, a severity and annotations that say what
// happened, what to do and where the runbook is, and every doc section
// they link exists.
func TestAlertRules(t *testing.T) {
	groups := parseRules(t)
	names := map[string]bool{}
	n := 0
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			n++
			name := r.Alert
			if name == "" {
				t.Errorf("%s: group %s: recording rule %q: this file holds alerts only", rulesFile, g.Name, r.Record)
				continue
			}
			names[name] = true
			if r.For <= 0 {
				t.Errorf("alert %s: no for: duration (a single bad scrape would page)", name)
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("alert %s: severity %q, want critical or warning", name, s)
			}
			for _, a := range []string{"summary", "description", "runbook"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("alert %s: no %s annotation", name, a)
				}
			}
			if rb := r.Annotations["runbook"]; !strings.HasPrefix(rb, "docs/monitoring.md#") {
				t.Errorf("alert %s: runbook %q is not a section of docs/monitoring.md", name, rb)
			}
			if !docRef.MatchString(r.Annotations["description"]) {
				t.Errorf("alert %s: the description links no doc section (docs/operations.md#...)", name)
			}
			for _, a := range r.Annotations {
				for _, ref := range docRef.FindAllString(a, -1) {
					if err := checkDocRef(ref); err != nil {
						t.Errorf("alert %s: %v", name, err)
					}
				}
			}
		}
	}
	// The list: leader loss, drain backlog, cache full, degraded
	// reads, budget spent, disk full, clock skew, node down.
	for _, want := range []string{"FedgateNoLeader", "FedgateDrainBacklogOld", "FedgateCacheFull", "FedgateDegradedReads",
		"FedgateStoreDown", "FedgateEgressBudgetSpent", "FedgateEgressBudgetBlocking", "FedgateStagingFull",
		"FedgateStagingNearlyFull", "FedgateClockSkew", "FedgateNodeDown"} {
		if !names[want] {
			t.Errorf("no alert %s", want)
		}
	}
	t.Logf("%d alerts in %d groups", n, len(groups.Groups))
}

// checkDocRef checks that docs/NAME.md exists (relative to the
// repository root) and has the section the #anchor names.
func checkDocRef(ref string) error {
	file, anchor, _ := strings.Cut(ref, "#")
	b, err := os.ReadFile(filepath.Join("..", file))
	if err != nil {
		return fmt.Errorf("links %s: %w", ref, err)
	}
	if anchor != "" && !slices.Contains(headingAnchors(string(b)), anchor) {
		return fmt.Errorf("links %s: %s has no heading with that anchor", ref, file)
	}
	return nil
}

// headingAnchors returns the anchors GitHub gives a Markdown file's
// headings: lower case, punctuation dropped, spaces as hyphens. Lines in
// fenced code blocks are not headings.
func headingAnchors(doc string) []string {
	var out []string
	fenced := false
	for line := range strings.SplitSeq(doc, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		var b strings.Builder
		for _, r := range h {
			switch {
			case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		out = append(out, b.String())
	}
	return out
}

func TestHeadingAnchors(t *testing.T) {
	doc := "# Operations\n## Write-back buckets\n```sh\n# not a heading\n```\n### `fedgate repair`: one bucket\n"
	got := headingAnchors(doc)
	want := []string{"operations", "write-back-buckets", "fedgate-repair-one-bucket"}
	if !slices.Equal(got, want) {
		t.Fatalf("headingAnchors = %q, want %q", got, want)
	}
}

// The dashboard, as far as these tests read it.
type dashboard struct {
	Inputs        []input `json:"__inputs"`
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

// input is what Grafana asks for when the dashboard is imported.
type input struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	PluginID string `json:"pluginId"`
}

type datasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource *datasourceRef `json:"datasource"`
	GridPos    *struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		RefID      string         `json:"refId"`
		Expr       string         `json:"expr"`
		Datasource *datasourceRef `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

type variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Datasource *datasourceRef  `json:"datasource"`
}

// grafanaBuiltins are Grafana's own variables an expression may use, with
// a value of the right kind to parse the expression with.
var grafanaBuiltins = map[string]string{"__rate_interval": "5m", "__interval": "1m", "__range": "1h"}

var grafanaVar = regexp.MustCompile(`\$\{([A-Za-z0-9_]+)(?::[a-z]+)?\}|\$([A-Za-z0-9_]+)`)

// expand replaces Grafana variables in expr so that Prometheus's parser
// can read it: builtins by a duration, the dashboard's variables (used in
// label matchers) by a regular expression. It fails on an unknown one.
func expand(expr string, vars map[string]bool) (string, error) {
	var err error
	out := grafanaVar.ReplaceAllStringFunc(expr, func(s string) string {
		m := grafanaVar.FindStringSubmatch(s)
		name := m[1] + m[2]
		if v, ok := grafanaBuiltins[name]; ok {
			return v
		}
		if vars[name] {
			return ".*"
		}
		err = fmt.Errorf("unknown variable $%s", name)
		return s
	})
	return out, err
}

// labelValuesQuery is Grafana's query for a variable's values.
var labelValuesQuery = regexp.MustCompile(`^label_values\((.+),\s*([A-Za-z_][A-Za-z0-9_]*)\)$`)

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// dashboardUses checks the dashboard's structure and every query in it
// (panel targets and variable queries), and returns what they select.
func dashboardUses(t *testing.T, d dashboard) []selectorUse {
	t.Helper()
	if d.SchemaVersion < 36 {
		t.Errorf("schemaVersion %d: want 36 or later (datasource references by uid)", d.SchemaVersion)
	}
	if d.UID == "" || d.Title == "" {
		t.Error("the dashboard has no uid or title")
	}
	if !slices.ContainsFunc(d.Inputs, func(in input) bool {
		return in.Name == dsVariable && in.Type == "datasource" && in.PluginID == "prometheus"
	}) {
		t.Errorf("no __inputs entry %s (a Prometheus data source asked for on import)", dsVariable)
	}
	dsUID := "${" + dsVariable + "}"
	vars := map[string]bool{}
	var out []selectorUse
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	for _, v := range d.Templating.List {
		where := fmt.Sprintf("%s: variable %s", dashboardFile, v.Name)
		switch v.Type {
		case "datasource":
			var q string
			if err := json.Unmarshal(v.Query, &q); err != nil || q != "prometheus" {
				t.Errorf("%s: query %s, want \"prometheus\"", where, v.Query)
			}
		case "query":
			if v.Datasource == nil || v.Datasource.UID != dsUID {
				t.Errorf("%s: data source is not %s", where, dsUID)
			}
			var q struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal(v.Query, &q); err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			m := labelValuesQuery.FindStringSubmatch(q.Query)
			if m == nil {
				t.Errorf("%s: query %q is not label_values(SELECTOR, LABEL)", where, q.Query)
				continue
			}
			sel, err := expand(m[1], vars)
			if err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			e, err := promql.ParseExpr(sel)
			if err != nil {
				t.Errorf("%s: %q: %v", where, sel, err)
				continue
			}
			us := uses(e, where)
			for i := range us {
				us[i].labels = append(us[i].labels, m[2])
			}
			out = append(out, us...)
		default:
			t.Errorf("%s: type %q: this test knows datasource and query variables", where, v.Type)
		}
	}
	for _, want := range []string{dsVariable, "instance", "region"} {
		if !vars[want] {
			t.Errorf("no variable %s", want)
		}
	}

	ids := map[int]bool{}
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			where := fmt.Sprintf("%s: panel %d %q", dashboardFile, p.ID, p.Title)
			if ids[p.ID] || p.ID <= 0 {
				t.Errorf("%s: id missing or not unique", where)
			}
			ids[p.ID] = true
			if g := p.GridPos; g == nil || g.W < 1 || g.H < 1 || g.X < 0 || g.X+g.W > 24 || g.Y < 0 {
				t.Errorf("%s: gridPos %+v is not within the 24 columns", where, p.GridPos)
			}
			walk(p.Panels)
			switch p.Type {
			case "row", "text":
				continue
			}
			if p.Datasource == nil || p.Datasource.UID != dsUID || p.Datasource.Type != "prometheus" {
				t.Errorf("%s: data source %+v, want prometheus %s", where, p.Datasource, dsUID)
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: no queries", where)
			}
			refs := map[string]bool{}
			for _, tg := range p.Targets {
				if tg.RefID == "" || refs[tg.RefID] {
					t.Errorf("%s: refId %q missing or not unique", where, tg.RefID)
				}
				refs[tg.RefID] = true
				if tg.Datasource != nil && tg.Datasource.UID != dsUID {
					t.Errorf("%s: query %s: data source %+v, want %s", where, tg.RefID, tg.Datasource, dsUID)
				}
				expr, err := expand(tg.Expr, vars)
				if err != nil {
					t.Errorf("%s: query %s: %v", where, tg.RefID, err)
					continue
				}
				e, err := promql.ParseExpr(expr)
				if err != nil {
					t.Errorf("%s: query %s: %q: %v", where, tg.RefID, tg.Expr, err)
					continue
				}
				out = append(out, uses(e, fmt.Sprintf("%s query %s", where, tg.RefID))...)
			}
		}
	}
	walk(d.Panels)
	return out
}

// TestDashboard: the dashboard is JSON Grafana imports (a Prometheus data
// source input and variable, instance and region variables, panels in the
// grid), and every query is valid PromQL.
func TestDashboard(t *testing.T) {
	us := dashboardUses(t, loadDashboard(t))
	metrics := map[string]bool{}
	for _, u := range us {
		metrics[u.metric] = true
	}
	t.Logf("%d selectors over %d metrics", len(us), len(metrics))
}

// TestExpandRejectsUnknownVariables: a typo in a variable is an error, not
// a silently matching regular expression.
func TestExpandRejectsUnknownVariables(t *testing.T) {
	vars := map[string]bool{"instance": true}
	if got, err := expand(`rate(x{instance=~"$instance"}[$__rate_interval])`, vars); err != nil || got != `rate(x{instance=~".*"}[5m])` {
		t.Fatalf("expand = %q, %v", got, err)
	}
	if _, err := expand(`x{instance=~"${instanse}"}`, vars); err == nil {
		t.Fatal("expand accepted $instanse")
	}
}

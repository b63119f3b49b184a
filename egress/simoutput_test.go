package egress_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/fedgate/fedgate/egress"
)

// What simulate says about traces with no rows, traces without a header,
// and costs that all round to 0.00 (issue 38).
func TestSimulatorOutputEdges(t *testing.T) {
	pol := simPolicy(t)
	run := func(name, text string) (*egress.SimResult, error) {
		return egress.Simulate(context.Background(), egress.NewTraceReader(name, strings.NewReader(text)), egress.SimOptions{Policy: pol})
	}
	if _, err := run("only-header.csv", "time,region,bucket,key,size,op\n"); err == nil || !strings.Contains(err.Error(), "only-header.csv") ||
		!strings.Contains(err.Error(), "header but no rows") {
		t.Errorf("header-only trace: %v; want an error naming the file and saying it has no rows", err)
	}
	if _, err := run("no-header.csv", "2026-11-02T00:00:00Z,gpu-gcp,scans,a,10,get\n"); err == nil || !strings.Contains(err.Error(), "no-header.csv:1") ||
		!strings.Contains(err.Error(), "header is missing") {
		t.Errorf("trace without a header: %v; want the header said to be missing", err)
	}
	res, err := run("tiny.csv", "time,region,bucket,key,size,op\n2026-11-02T00:00:00Z,gpu-gcp,scans,a,1000000,get\n2026-11-02T05:00:00Z,gpu-gcp,scans,a,1000000,get\n")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := egress.WriteSimTable(&b, res); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "+") || strings.Contains(b.String(), "×") {
		t.Errorf("every total is 0.00, yet the table shows ratios:\n%s", b.String())
	}
	// The equal-totals notes: each reason names the strategies it explains.
	for _, n := range res.Notes {
		if strings.Contains(n, "advisor") && strings.Contains(n, "cost exactly the same") && !strings.Contains(n, "advisor, ttl-12h, ttl-24h kept and dropped the same copies") {
			t.Errorf("note %q: want the advisor and TTLs named as the ones that made the same choices", n)
		}
	}
}

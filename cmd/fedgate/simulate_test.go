package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fedgate/fedgate/egress/egresstest"
)

const simPolicy = "../../egress/testdata/sim-policy.yaml"

func runFedgate(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errb)
	err = root.Execute()
	return out.String(), errb.String(), err
}

// fedgate egress simulate on a generated trace: the table, JSON, HTML, and
// the errors a user meets first.
func TestEgressSimulateCommand(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "ckpt.csv")
	f, err := os.Create(trace)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	if err := egresstest.WriteCSV(f, egresstest.Standard(start)["checkpoints"]); err != nil {
		t.Fatal(err)
	}
	f.Close()

	out, _, err := runFedgate(t, "egress", "simulate", "--trace", trace, "--policy", simPolicy)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"advisor", "t-even", "always-store", "always-evict", "ttl-12h", "ttl-24h", "single-region", "policy", "vs best"} {
		if !strings.Contains(out, s) {
			t.Errorf("table has no %q:\n%s", s, out)
		}
	}
	out, _, err = runFedgate(t, "egress", "simulate", "--trace", trace, "--policy", simPolicy, "--strategy", "advisor,ttl-6h", "--strategy", "always-evict",
		"--json", "--storage-price", "gcp=0.026", "--request-price", "gcp=0.0005/0.006")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Strategies []struct {
			Name string `json:"name"`
		} `json:"strategies"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Strategies) != 3 || doc.Strategies[1].Name != "ttl-6h" {
		t.Fatalf("JSON %v: %s", err, out)
	}
	out, _, err = runFedgate(t, "egress", "simulate", "--trace", trace, "--policy", simPolicy, "--html")
	if err != nil || !strings.HasPrefix(out, "<!DOCTYPE html>") {
		t.Fatalf("HTML: %v %.100s", err, out)
	}

	bad := filepath.Join(dir, "bad.csv")
	os.WriteFile(bad, []byte("time,region,bucket,key,size,op\n2026-11-02T00:00:00Z,gpu-gcp,checkpoints,a,1,get\n2026-11-02T00:00:01Z,gpu-gcp,checkpoints,a,1,gett\n"), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--trace", bad, "--policy", simPolicy}, bad + `:3:46: op: "gett": want get, put or delete`},
		{[]string{"--trace", trace, "--policy", simPolicy, "--strategy", "t-evn"}, `unknown strategy "t-evn"`},
		{[]string{"--trace", trace, "--policy", simPolicy, "--strategy", "t-evn"}, "did you mean t-even?"},
		{[]string{"--trace", trace}, "--trace and --policy are required"},
		{[]string{"--trace", trace, "--policy", simPolicy, "--format", "csv"}, `--format "csv": want table, json or html`},
		{[]string{"--trace", trace, "--policy", simPolicy, "--storage-price", "gcp"}, "--storage-price: storage price \"gcp\": want CLOUD[:REGION]=USD_PER_GB_MONTH"},
		{[]string{"--trace", filepath.Join(dir, "none.csv"), "--policy", simPolicy}, "--trace: open"},
	} {
		out, _, err := runFedgate(t, append([]string{"egress", "simulate"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) || out != "" {
			t.Errorf("%v: error %v, output %q; want an error with %q and no output", c.args, err, out, c.want)
		}
	}

	// The help names the strategies and hides the flags for talking to a
	// region, which simulate does not.
	out, _, _ = runFedgate(t, "egress", "simulate", "--help")
	if !strings.Contains(out, "t-even") || !strings.Contains(out, "--trace") || strings.Contains(out, "--endpoint") || strings.Contains(out, "--root-access-key") {
		t.Errorf("help:\n%s", out)
	}
	out, _, _ = runFedgate(t, "egress", "report", "--help")
	if !strings.Contains(out, "--endpoint") {
		t.Errorf("report's help lost --endpoint:\n%s", out)
	}
}

// fedgate egress trace-from-log merges node logs into one trace file,
// written whole or not at all.
func TestEgressTraceFromLogCommand(t *testing.T) {
	dir := t.TempDir()
	rec := func(ts, op string, status int, in, out int64, key string) string {
		return fmt.Sprintf(`{"time":%q,"level":"INFO","msg":"request","op":%q,"status":%d,"bytes_in":%d,"bytes_out":%d,"bucket":"checkpoints","key":%q}`+"\n",
			ts, op, status, in, out, key)
	}
	a := filepath.Join(dir, "a.log")
	b := filepath.Join(dir, "b.log")
	os.WriteFile(a, []byte(rec("2026-11-02T00:00:00Z", "PutObject", 200, 10, 0, "k")+rec("2026-11-02T00:00:02Z", "GetObject", 200, 0, 10, "k")), 0o644)
	os.WriteFile(b, []byte(rec("2026-11-02T00:00:01Z", "GetObject", 200, 0, 10, "k")+rec("2026-11-02T00:00:03Z", "HeadObject", 200, 0, 0, "k")), 0o644)
	outFile := filepath.Join(dir, "trace.csv")
	_, stderr, err := runFedgate(t, "egress", "trace-from-log", "--out", outFile, "gpu-gcp="+a, "gpu-aws="+b)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(outFile)
	want := "time,region,bucket,key,size,op\n2026-11-02T00:00:00Z,gpu-gcp,checkpoints,k,10,put\n2026-11-02T00:00:01Z,gpu-aws,checkpoints,k,10,get\n2026-11-02T00:00:02Z,gpu-gcp,checkpoints,k,10,get\n"
	if string(got) != want {
		t.Errorf("trace:\n%s\nwant:\n%s", got, want)
	}
	if !strings.Contains(stderr, "3 trace rows") || !strings.Contains(stderr, "1 other operations") {
		t.Errorf("stderr: %s", stderr)
	}
	// The trace simulates.
	if _, _, err := runFedgate(t, "egress", "simulate", "--trace", outFile, "--policy", simPolicy); err != nil {
		t.Fatal(err)
	}
	// A broken log leaves no file behind.
	os.WriteFile(b, []byte("not json\n"), 0o644)
	broken := filepath.Join(dir, "broken.csv")
	if _, _, err := runFedgate(t, "egress", "trace-from-log", "--out", broken, "gpu-gcp="+a, "gpu-aws="+b); err == nil || !strings.Contains(err.Error(), b+":1: not a JSON log record") {
		t.Errorf("err = %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 3 {
		t.Errorf("files left: %v", entries)
	}
	if _, _, err := runFedgate(t, "egress", "trace-from-log", "gpu-gcp"); err == nil || !strings.Contains(err.Error(), "want REGION=LOGFILE") {
		t.Errorf("err = %v", err)
	}
}

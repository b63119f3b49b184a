package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// A store wiped under an erasure-coded bucket, as an operator meets it:
// reads still succeed, and the degraded data shows in the metrics, the
// server log, `cluster status` and `repair --dry-run` (which writes
// nothing), until `repair` rebuilds it. `repair` of a single-store bucket
// is a plain error, with no progress-bar debris.
func TestOperatorSeesDegradedData(t *testing.T) {
	dirs := map[string]string{"a": t.TempDir(), "b": t.TempDir(), "c": t.TempDir()}
	policy := "regions:\n  - {name: lab, location: onprem:lga1}\nstores:\n"
	for _, n := range []string{"a", "b", "c"} {
		policy += "  - {name: " + n + ", kind: posix, location: onprem:lga1, path: " + dirs[n] + "}\n"
	}
	policy += "buckets:\n  - name: ckpt\n    placement:\n      erasure: {data: 2, parity: 1, stores: [a, b, c]}\n" +
		"  - {name: plain, placement: {single: a}}\ndefaults: {store: a}\n"
	pf := filepath.Join(t.TempDir(), "policy.yaml")
	mustOK(t, os.WriteFile(pf, []byte(policy), 0o644))
	s := startServer(t, "--config", pf)
	c := s.root()
	objects := map[string][]byte{"tiny": []byte("inline in its manifest"), "shards.bin": randBytes(t, 3<<20+5)}
	for k, v := range objects {
		put(t, c, "ckpt", k, v)
	}
	if out, err := s.fedgate("cluster", "status"); err != nil || !strings.Contains(out, "Degraded data: none seen") {
		t.Fatalf("cluster status before the wipe: %v\n%s", err, out)
	}

	// Wipe store a: every object has a shard or its manifest there.
	ents, err := os.ReadDir(dirs["a"])
	mustOK(t, err)
	for _, e := range ents {
		if e.Name() != "d_fedgate" { // the region's marker (a is the default store)
			mustOK(t, os.RemoveAll(filepath.Join(dirs["a"], e.Name())))
		}
	}
	for k, v := range objects {
		got, err := c.GetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String("ckpt"), Key: aws.String(k)})
		mustOK(t, err)
		b, err := io.ReadAll(got.Body)
		got.Body.Close()
		if err != nil || !bytes.Equal(b, v) {
			t.Fatalf("GET ckpt/%s after the wipe: %v", k, err)
		}
	}
	resp, err := http.Get(s.Endpoint + "/_fedgate/metrics")
	mustOK(t, err)
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !regexp.MustCompile(`fedgate_degraded_reads_total\{bucket="ckpt",store="a"\} [1-9]`).Match(metrics) {
		t.Errorf("no degraded reads of ckpt on store a in the metrics:\n%s", grepLines(string(metrics), "fedgate_degraded_reads_total"))
	}
	log, _ := os.ReadFile(filepath.Join(s.DataDir, "server.log"))
	if !strings.Contains(string(log), "degraded read") {
		t.Error("the server log has no WARN of the degraded reads")
	}
	out, err := s.fedgate("cluster", "status")
	if err != nil || !strings.Contains(out, "objects read degraded lately") || !strings.Contains(out, "shards.bin") || !strings.Contains(out, "fedgate repair") {
		t.Errorf("cluster status does not list the degraded objects: %v\n%s", err, out)
	}

	for range 2 { // a dry run writes nothing: the second finds the same
		out, err = s.fedgate("repair", "--dry-run", "ckpt")
		if err != nil || !strings.Contains(out, "Dry run, nothing written") || !strings.Contains(out, "2 need repair") ||
			!regexp.MustCompile(`(?m)^shards\.bin\s+a$`).MatchString(out) || !regexp.MustCompile(`(?m)^tiny\s+a$`).MatchString(out) {
			t.Fatalf("repair --dry-run ckpt: %v\n%s", err, out)
		}
	}
	if out, err := s.fedgate("repair", "ckpt"); err != nil || !strings.Contains(out, "2 repaired") {
		t.Fatalf("repair ckpt: %v\n%s", err, out)
	}
	if out, err := s.fedgate("repair", "--dry-run", "ckpt"); err != nil || !strings.Contains(out, "0 need repair") {
		t.Fatalf("repair --dry-run after the repair: %v\n%s", err, out)
	}

	out, err = s.fedgate("repair", "plain")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(out, "only replicated and erasure-coded buckets") ||
		strings.Contains(out, "\r") || strings.Contains(out, "repairing") {
		t.Errorf("repair of a single-store bucket: %v\n%q", err, out)
	}
}

// What an operator who is not root, or not in the server's directory, is
// told: where the CLI looked for credentials, that a key is not root's,
// and which grant an S3 user lacks and how to give it.
func TestOperatorErrorsSayWhatToDo(t *testing.T) {
	s := startServer(t)
	_, err := s.root().CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("data")})
	mustOK(t, err)

	// No credentials anywhere: the error names the file it looked for.
	elsewhere := t.TempDir()
	cmd := exec.Command(binary, "user", "list")
	cmd.Dir = elsewhere
	cmd.Env = append(withoutFedgateEnv(), "FEDGATE_ENDPOINT="+s.Endpoint)
	out, err := cmd.CombinedOutput()
	want := filepath.Join(elsewhere, "var", "root-credentials.json")
	if err == nil || !strings.Contains(string(out), want) || !strings.Contains(string(out), "--data-dir") {
		t.Errorf("user list with no credentials: %v\n%s\nwant it to name %s and --data-dir", err, out, want)
	}
	// --data-dir finds them.
	dd := t.TempDir()
	mustOK(t, os.WriteFile(filepath.Join(dd, "root-credentials.json"), []byte(`{"access_key":"`+rootAK+`","secret_key":"`+rootSK+`"}`), 0o600))
	cmd = exec.Command(binary, "user", "list", "--data-dir", dd)
	cmd.Dir = elsewhere
	cmd.Env = append(withoutFedgateEnv(), "FEDGATE_ENDPOINT="+s.Endpoint)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "root") {
		t.Errorf("user list --data-dir %s: %v\n%s", dd, err, out)
	}

	out2, err := s.fedgate("user", "add", "alice")
	mustOK(t, err)
	ak := regexp.MustCompile(`AccessKey: (\S+)`).FindStringSubmatch(out2)
	sk := regexp.MustCompile(`SecretKey: (\S+)`).FindStringSubmatch(out2)
	if ak == nil || sk == nil {
		t.Fatalf("user add alice:\n%s", out2)
	}
	if out, err := s.fedgateAs(ak[1], sk[1], "user", "list"); err == nil || !strings.Contains(out, "not the region's root user") {
		t.Errorf("user list as alice: %v\n%s", err, out)
	}
	_, err = s.s3Client(ak[1], sk[1]).GetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String("data"), Key: aws.String("k")})
	if err == nil || !strings.Contains(err.Error(), "fedgate user grant alice data read") {
		t.Errorf("GET as alice without a grant: %v; want AccessDenied naming the grant", err)
	}
}

// withoutFedgateEnv is the environment without FEDGATE_* variables.
func withoutFedgateEnv() []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "FEDGATE_") {
			env = append(env, e)
		}
	}
	return env
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// A policy applied with a new region location is in force at once: the
// egress counted after it (metrics and the report) is at the new location,
// with no restart; `policy show` prints what is in force, and the list
// commands speak JSON.
func TestPolicyApplyNewLocationWithoutRestart(t *testing.T) {
	dir := t.TempDir()
	policyAt := func(loc string) string {
		p := filepath.Join(dir, strings.ReplaceAll(loc, ":", "-")+".yaml")
		mustOK(t, os.WriteFile(p, []byte("regions:\n  - {name: lab, location: "+loc+"}\nstores:\n"+
			"  - {name: nas, kind: posix, location: onprem:lga1, path: "+filepath.Join(dir, "nas")+"}\n"+
			"  - {name: far, kind: posix, location: aws:us-east-1, path: "+filepath.Join(dir, "far")+"}\n"+
			"buckets:\n  - {name: remote, placement: {single: far}}\ndefaults: {store: nas}\n"), 0o644))
		return p
	}
	s := startServer(t, "--config", policyAt("onprem:lga1"))
	c := s.root()
	put(t, c, "remote", "before", randBytes(t, 1<<20))
	getBytes(t, c, "remote", "before")
	metricsHave := func(re string) bool {
		resp, err := http.Get(s.Endpoint + "/_fedgate/metrics")
		mustOK(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return regexp.MustCompile(re).Match(b)
	}
	if !metricsHave(`fedgate_egress_bytes_total\{direction="read",dst="onprem:lga1",src="aws:us-east-1"\} [1-9]`) {
		t.Fatal("no egress counted from aws:us-east-1 to onprem:lga1 before the change")
	}

	out, err := s.fedgate("policy", "apply", policyAt("aws:us-east-1"))
	if err != nil || !strings.Contains(out, "version 2") {
		t.Fatalf("policy apply: %v\n%s", err, out)
	}
	put(t, c, "remote", "after", randBytes(t, 1<<20))
	getBytes(t, c, "remote", "after")
	if !metricsHave(`fedgate_egress_bytes_total\{direction="read",dst="aws:us-east-1",src="aws:us-east-1"\} [1-9]`) {
		t.Error("egress after the apply is not counted at the new location (aws:us-east-1)")
	}
	out, err = s.fedgate("egress", "report", "--json")
	if err != nil || !strings.Contains(out, `"aws:us-east-1"`) || !strings.Contains(out, `"onprem:lga1"`) {
		t.Errorf("egress report --json does not show both locations: %v\n%s", err, out)
	}

	out, err = s.fedgate("policy", "show")
	if err != nil || !strings.HasPrefix(out, "# Active policy, version 2\n") || !strings.Contains(out, "location: aws:us-east-1") {
		t.Errorf("policy show: %v\n%s", err, out)
	}
	for _, args := range [][]string{{"policy", "show", "--json"}, {"user", "list", "--json"}, {"cluster", "status", "--json"},
		{"cache", "jobs", "--json"}, {"cache", "pins", "--json"}, {"egress", "advise", "--json", "--measure=false"}} {
		out, err := s.fedgate(args...)
		if err != nil || !json.Valid([]byte(out)) {
			t.Errorf("fedgate %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

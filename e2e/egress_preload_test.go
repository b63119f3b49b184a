package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestEgressSavingsSurvivePreload: a region in onprem:lab mounts an fs
// tree declared in aws:us-east-1 (priced at $100 a GB, so megabytes cost
// cents). Two objects are read twice (cold, then from the cache), two
// more are preloaded with `fedgate cache preload` and then read twice.
// The report counts the cold reads and the preload's fetch as moved, and
// every cache hit as avoided, bytes and money, whoever filled the cache:
// a preload must not cancel the savings counted before it, nor those
// after it. The console's egress panel shows the same figures.
func TestEgressSavingsSurvivePreload(t *testing.T) {
	const mb = 1_000_000
	tree := t.TempDir()
	objs := map[string][]byte{"warm/a": randBytes(t, 2*mb), "warm/b": randBytes(t, 2*mb),
		"pre/c": randBytes(t, 3*mb), "pre/d": randBytes(t, 3*mb)}
	for k, v := range objs {
		mustOK(t, os.MkdirAll(filepath.Join(tree, filepath.Dir(k)), 0o755))
		mustOK(t, os.WriteFile(filepath.Join(tree, k), v, 0o644))
	}
	policy := "regions:\n  - {name: lab, location: onprem:lab}\n" +
		"stores:\n  - {name: far, kind: fs, location: aws:us-east-1, path: " + tree + "}\n" +
		"buckets:\n  - {name: dsf, origin: far, cache: {ttl: 0s}}\n" +
		"egress:\n  prices:\n    aws:us-east-1:\n      onprem:lab: 100USD\n"
	pf := filepath.Join(t.TempDir(), "policy.yaml")
	mustOK(t, os.WriteFile(pf, []byte(policy), 0o644))
	s := startServer(t, "--config", pf, "--cache-size", "1GiB")

	read := func(keys ...string) {
		t.Helper()
		for _, k := range keys {
			if got, _ := getBytes(t, s.root(), "dsf", k); !bytes.Equal(got, objs[k]) {
				t.Fatalf("read of %s differs", k)
			}
		}
	}
	type totals struct {
		ReadBytes    int64       `json:"read_bytes"`
		CostUSD      json.Number `json:"cost_usd"`
		AvoidedBytes int64       `json:"avoided_bytes"`
		AvoidedUSD   json.Number `json:"avoided_usd"`
		HitRatio     float64     `json:"cache_hit_ratio"`
	}
	report := func(stage string, moved, avoided int64, cost, saved string) {
		t.Helper()
		out, err := s.fedgate("egress", "report", "--format", "json", "--since", "1d")
		if err != nil {
			t.Fatalf("%s: egress report: %v\n%s", stage, err, out)
		}
		var rep struct{ Totals totals }
		dec := json.NewDecoder(strings.NewReader(out))
		dec.UseNumber()
		mustOK(t, dec.Decode(&rep))
		tt := rep.Totals
		ratio := float64(avoided) / float64(avoided+moved)
		if tt.ReadBytes != moved || tt.AvoidedBytes != avoided || !sameMoney(tt.CostUSD, cost) || !sameMoney(tt.AvoidedUSD, saved) ||
			tt.HitRatio < ratio-1e-6 || tt.HitRatio > ratio+1e-6 {
			t.Fatalf("%s: totals %+v; want moved %d, avoided %d, cost %s, saved %s, hit ratio %.4f\n%s",
				stage, tt, moved, avoided, cost, saved, ratio, out)
		}
	}

	read("warm/a", "warm/b") // cold: 4 MB cross
	read("warm/a", "warm/b") // warm: 4 MB served by the cache
	report("cold then warm", 4*mb, 4*mb, "0.40", "0.40")

	out, err := s.fedgateWithin(2*time.Minute, "cache", "preload", "dsf/pre/")
	if err != nil {
		t.Fatalf("preload: %v\n%s", err, out)
	}
	// The preload's 6 MB moved; what the cache saved before stays saved.
	report("after the preload", 10*mb, 4*mb, "1.00", "0.40")

	read("pre/c", "pre/d", "pre/c", "pre/d") // all hits: 12 MB avoided
	report("preloaded objects read", 10*mb, 16*mb, "1.00", "1.60")

	// The console's egress panel: the same money saved and moved.
	page := consolePage(t, s)
	// In IEC units, as everywhere (docs/units.md): 10 MB = 9.54 MiB, 16 MB = 15.26 MiB.
	const row = `<td class="num">9.54 MiB</td><td class="num">1.00</td><td class="num">15.26 MiB</td><td class="num">1.60</td>`
	if !strings.Contains(page, row) {
		t.Errorf("console's egress panel lacks the route 10 MB (9.54 MiB) moved ($1.00), 16 MB (15.26 MiB) avoided ($1.60):\n%s", page)
	}
}

// consolePage signs in to the console as root and returns its overview.
func consolePage(t *testing.T, s *server) string {
	t.Helper()
	jar, err := cookiejar.New(nil)
	mustOK(t, err)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	form := url.Values{"access_key": {rootAK}, "secret_key": {rootSK}}
	req, err := http.NewRequest(http.MethodPost, s.Endpoint+"/_fedgate/ui/login", strings.NewReader(form.Encode()))
	mustOK(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", s.Endpoint)
	resp, err := c.Do(req)
	mustOK(t, err)
	resp.Body.Close()
	resp, err = c.Get(s.Endpoint + "/_fedgate/ui/")
	mustOK(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	mustOK(t, err)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("console: %s\n%s", resp.Status, body)
	}
	return string(body)
}

package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestCachePriorityKeepsHighBucket: in a small region cache, a scan of a
// cache.priority low bucket does not push a high-priority bucket's chunks
// out (re-reading it fetches nothing from the origin), where with equal
// priorities the same scan does.
func TestCachePriorityKeepsHighBucket(t *testing.T) {
	o := s3Origin(t)
	const mib = 1 << 20
	hot := randBytes(t, 24*mib) // 3 chunks of 8 MiB
	o.put(t, "hot/model.bin", hot)
	var scan [][]byte
	for i := range 4 {
		b := randBytes(t, 16*mib)
		scan = append(scan, b)
		o.put(t, fmt.Sprintf("scan/part-%d", i), b)
	}
	storeYAML, env := o.store(t)
	for k, v := range env {
		t.Setenv(k, v)
	}
	run := func(hotPrio, scanPrio string) (refetched float64) {
		policy := "regions:\n  - {name: e2e, location: onprem:lab}\nstores:\n  - name: origin\n" + storeYAML +
			"  - {name: nas, kind: posix, location: onprem:lab, path: " + t.TempDir() + "}\n" +
			"buckets:\n" +
			"  - {name: hot, origin: origin/hot/, cache: {ttl: 1h, priority: " + hotPrio + "}}\n" +
			"  - {name: scan, origin: origin/scan/, cache: {ttl: 1h, priority: " + scanPrio + "}}\n" +
			"defaults: {store: nas}\n"
		pf := filepath.Join(t.TempDir(), "policy.yaml")
		mustOK(t, os.WriteFile(pf, []byte(policy), 0o644))
		s := startServer(t, "--config", pf, "--cache-size", "64MiB")
		c := s.root()
		if got, _ := getBytes(t, c, "hot", "model.bin"); !bytes.Equal(got, hot) {
			t.Fatal("hot read differs")
		}
		for i, want := range scan {
			if got, _ := getBytes(t, c, "scan", fmt.Sprintf("part-%d", i)); !bytes.Equal(got, want) {
				t.Fatalf("scan part %d differs", i)
			}
		}
		before := s.metric("fedgate_cache_origin_bytes_total")
		if got, _ := getBytes(t, c, "hot", "model.bin"); !bytes.Equal(got, hot) {
			t.Fatal("hot re-read differs")
		}
		return s.metric("fedgate_cache_origin_bytes_total") - before
	}
	if n := run("high", "low"); n != 0 {
		t.Fatalf("priority high vs low: re-reading the hot bucket fetched %v bytes from the origin, want 0", n)
	}
	if n := run("normal", "normal"); n == 0 {
		t.Fatal("control, equal priorities: the scan left the hot bucket cached, so the test shows nothing")
	}
}

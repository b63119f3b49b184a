package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// sumMetric adds a metric over the live nodes of r.
func (r *region) sumMetric(name string) float64 {
	var sum float64
	for _, s := range r.nodes {
		if !s.Exited() {
			sum += s.metric(name)
		}
	}
	return sum
}

// TestClusterSharedCache: a 3-node region caches each chunk of a cloud
// object once, on its owner; other nodes read it from the owner, so the
// region's cache holds one copy and the origin is read once. With an owner
// dead, reads fall back to the origin and still return the right bytes.
func TestClusterSharedCache(t *testing.T) {
	o := s3Origin(t)
	data := randBytes(t, 100<<20+4321) // 13 chunks of 8 MiB
	o.put(t, "datasets/shard-0", data)
	storeYAML, env := o.store(t)
	for k, v := range env {
		t.Setenv(k, v)
	}
	nas := t.TempDir()
	policy := "stores:\n  - name: origin\n" + storeYAML +
		"  - name: nas\n    kind: posix\n    location: onprem:lab\n    path: " + nas + "\n" +
		"buckets:\n  - name: mounted\n    origin: origin/datasets/\n    cache: {ttl: 0s}\n" +
		"  - name: hot\n    origin: origin/hot/\n    cache: {ttl: 1h}\n" +
		"defaults: {store: nas}\n"
	pf := filepath.Join(t.TempDir(), "policy.yaml")
	mustOK(t, os.WriteFile(pf, []byte(policy), 0o644))
	r := startRegionWith(t, 3, pf, nas, "--cache-size", "1GiB")

	for _, s := range r.nodes {
		if got, _ := getBytes(t, s.root(), "mounted", "shard-0"); !bytes.Equal(got, data) {
			t.Fatalf("read through %s differs", s.Endpoint)
		}
	}
	if got := r.sumMetric("fedgate_cache_origin_bytes_total"); got != float64(len(data)) {
		t.Fatalf("the region read %v bytes from the origin for one %d-byte object read through 3 nodes; want each chunk once", got, len(data))
	}
	if got := r.sumMetric("fedgate_cache_used_bytes"); got != float64(len(data)) {
		t.Fatalf("the region caches %v bytes of one %d-byte object; want one copy", got, len(data))
	}
	if r.sumMetric("fedgate_cache_peer_read_bytes_total") < float64(len(data)) {
		t.Fatal("nodes did not read chunks they do not own from their owners")
	}
	if f := r.sumMetric("fedgate_cache_peer_fallbacks_total"); f != 0 {
		t.Fatalf("%v peer reads fell back to the origin with every node up", f)
	}

	// A bucket whose metadata is trusted for an hour: a write through node 1
	// is still seen at once by nodes 2 and 3, which had cached the old
	// version's metadata and chunks.
	old := randBytes(t, 9<<20)
	put(t, r.nodes[0].root(), "hot", "weights.bin", old)
	for _, s := range r.nodes {
		if got, _ := getBytes(t, s.root(), "hot", "weights.bin"); !bytes.Equal(got, old) {
			t.Fatalf("first read of hot/weights.bin through %s differs", s.Endpoint)
		}
	}
	fresh := randBytes(t, 9<<20)
	put(t, r.nodes[0].root(), "hot", "weights.bin", fresh)
	for _, s := range r.nodes[1:] {
		if got, _ := getBytes(t, s.root(), "hot", "weights.bin"); !bytes.Equal(got, fresh) {
			t.Fatalf("%s served the old version of an object overwritten through another node (ttl 1h)", s.Endpoint)
		}
	}
	_, err := r.nodes[2].root().DeleteObject(ctx(t), &s3.DeleteObjectInput{Bucket: aws.String("hot"), Key: aws.String("weights.bin")})
	mustOK(t, err)
	if _, err := r.nodes[1].root().HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: aws.String("hot"), Key: aws.String("weights.bin")}); !isNotFound(err) {
		t.Fatalf("HEAD through node 2 after a DELETE through node 3 (ttl 1h): %v", err)
	}

	// Kill the node caching the most: its chunks now come from the origin.
	var owner *server
	best := -1.0
	for _, s := range r.nodes {
		if u := s.metric("fedgate_cache_used_bytes"); u > best {
			owner, best = s, u
		}
	}
	owner.stop(syscall.SIGKILL)
	for _, s := range r.nodes {
		if s == owner {
			continue
		}
		if got, _ := getBytes(t, s.root(), "mounted", "shard-0"); !bytes.Equal(got, data) {
			t.Fatalf("read through %s with a chunk owner dead differs", s.Endpoint)
		}
	}
	if r.sumMetric("fedgate_cache_peer_fallbacks_total") == 0 {
		t.Fatal("no read fell back to the origin although an owner is dead")
	}
}

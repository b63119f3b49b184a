package node_test

import (
	"archive/tar"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/gateway"
	"github.com/fedgate/fedgate/internal/testenv"
	"github.com/fedgate/fedgate/internal/testserver"
	"github.com/fedgate/fedgate/node"
	"github.com/fedgate/fedgate/node/nodetest"
)

// TestBatchRegionCache: in a 3-node region, a batch through one node of a
// bucket mounted from MinIO fills the region's cache — chunks the ring
// gives to the other nodes are filled there, through peer reads — and the
// same batch through another node reads nothing from the origin.
func TestBatchRegionCache(t *testing.T) {
	srv := testenv.MinIO(t)
	bucket := srv.NewBucket(t)
	mc := s3.New(s3.Options{Region: srv.Region, BaseEndpoint: aws.String(srv.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, "")})
	ctx := testCtx(t, 3*time.Minute)
	objs := map[string][]byte{}
	var req gateway.BatchRequest
	for i := range 48 {
		k := fmt.Sprintf("train/%05d.bin", i)
		objs[k] = make([]byte, 20_000+i*700)
		rand.Read(objs[k])
		if _, err := mc.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(k), Body: bytes.NewReader(objs[k])}); err != nil {
			t.Fatal(err)
		}
		req.Entries = append(req.Entries, gateway.BatchEntry{Bucket: "mounted", Key: k})
	}
	env := map[string]string{"BATCH_AK": srv.AccessKey, "BATCH_SK": srv.SecretKey}
	r := nodetest.MakeRegion(t, 3, nodetest.Options{
		Policy: func(dir string) string {
			return fmt.Sprintf(`stores:
  - name: nas
    kind: posix
    location: onprem:lga1
    path: %s
  - name: origin
    kind: s3
    location: aws:us-east-1
    bucket: %s
    endpoint: %s
    path_style: true
    credentials: {access_key_env: BATCH_AK, secret_key_env: BATCH_SK}
buckets:
  - name: mounted
    origin: origin
    cache: {ttl: 0s}
defaults: {store: nas}
`, dir, bucket, srv.Endpoint)
		},
		Config: func(_ int, c *node.Config) {
			c.LookupEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
		},
	})
	sumMetric := func(name string) float64 {
		total := 0.0
		for i := range r.Len() {
			total += nodeMetric(t, r.Node(i).Endpoint(), name)
		}
		return total
	}
	batch := func(i int) {
		t.Helper()
		got := postBatch(t, r.Node(i).Endpoint(), req)
		if len(got) != len(req.Entries) {
			t.Fatalf("node %d: %d entries", i, len(got))
		}
		for j, e := range req.Entries {
			if got[j].name != "mounted/"+e.Key || !bytes.Equal(got[j].data, objs[e.Key]) {
				t.Fatalf("node %d entry %d: %s (%d bytes)", i, j, got[j].name, len(got[j].data))
			}
		}
	}
	via := r.Followers()[0]
	batch(via)
	cold := sumMetric("fedgate_cache_origin_bytes_total")
	if cold <= 0 {
		t.Fatal("the cold batch read nothing from the origin")
	}
	if peers := sumMetric("fedgate_cache_peer_reads_total"); peers == 0 {
		t.Fatal("no chunk was read from a peer: the batch did not use the region's ring")
	}
	other := (via + 1) % r.Len()
	batch(other)
	if d := sumMetric("fedgate_cache_origin_bytes_total") - cold; d != 0 {
		t.Fatalf("the batch through node %d read %v bytes from the origin", other, d)
	}
}

type tarFile struct {
	name string
	data []byte
}

func postBatch(t *testing.T, endpoint string, req gateway.BatchRequest) []tarFile {
	t.Helper()
	body, _ := json.Marshal(req)
	ctx := testCtx(t, time.Minute)
	hr, err := testserver.BatchRequest(ctx, endpoint, nodetest.AccessKey, nodetest.SecretKey, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("batch: %s: %s", resp.Status, b)
	}
	var out []tarFile
	tr := tar.NewReader(resp.Body)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		d, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tarFile{h.Name, d})
	}
}

func nodeMetric(t *testing.T, endpoint, name string) float64 {
	t.Helper()
	resp, err := http.Get(endpoint + "/_fedgate/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("metric %s not exported", name)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

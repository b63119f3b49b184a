package e2e

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/internal/testserver"
	"github.com/fedgate/fedgate/internal/wait"
)

// The batch GET tests sign POST /_fedgate/v1/batch with aws-sdk-go-v2's
// SigV4 signer, as a client library would, and read the tar it answers.

type batchEntry struct {
	Bucket   string `json:"bucket"`
	Key      string `json:"key"`
	Range    string `json:"range,omitempty"`
	ArchPath string `json:"archpath,omitempty"`
}

type batchReq struct {
	Entries         []batchEntry `json:"entries"`
	ContinueOnError bool         `json:"continue_on_error"`
}

type tarEntry struct {
	name   string
	data   []byte
	format tar.Format
}

type batchAnswer struct {
	status  int
	body    []byte
	entries []tarEntry
	tarErr  error // what broke the tar stream (nil: it ended cleanly)
}

// batchPost signs req with ak/sk (service s3, region us-east-1, the
// payload's SHA-256) and posts it to endpoint.
func batchPost(t *testing.T, endpoint, ak, sk string, req batchReq) batchAnswer {
	t.Helper()
	body, err := json.Marshal(req)
	mustOK(t, err)
	hr, err := testserver.BatchRequest(ctx(t), endpoint, ak, sk, body)
	mustOK(t, err)
	resp, err := http.DefaultClient.Do(hr)
	mustOK(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	a := batchAnswer{status: resp.StatusCode, body: raw}
	if err != nil {
		a.tarErr = err
	}
	if resp.StatusCode == 200 {
		tr := tar.NewReader(bytes.NewReader(raw))
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				a.tarErr = err
				break
			}
			d, err := io.ReadAll(tr)
			if err != nil {
				a.tarErr = err
				break
			}
			a.entries = append(a.entries, tarEntry{h.Name, d, h.Format})
		}
	}
	return a
}

type xmlError struct {
	Code     string
	Message  string
	Resource string
}

func parseXMLError(t *testing.T, b []byte) xmlError {
	t.Helper()
	var e xmlError
	if err := xml.Unmarshal(b, &e); err != nil {
		t.Fatalf("not an S3 error document: %v\n%s", err, b)
	}
	return e
}

func (a batchAnswer) wantError(t *testing.T, status int, code string) xmlError {
	t.Helper()
	if a.status != status {
		t.Fatalf("status %d, want %d: %s", a.status, status, a.body)
	}
	e := parseXMLError(t, a.body)
	if e.Code != code {
		t.Fatalf("code %s, want %s: %s", e.Code, code, e.Message)
	}
	return e
}

func digest(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

type member struct {
	name string
	data []byte
}

// webdatasetShards returns the same samples as a tar, a tar.gz and a zip
// (members alternately stored and deflated).
func webdatasetShards(t *testing.T, samples int) (tarB, tgzB, zipB []byte, ms []member) {
	t.Helper()
	for i := range samples {
		ms = append(ms, member{fmt.Sprintf("%06d.jpg", i), randBytes(t, 2000+i*131)}, member{fmt.Sprintf("%06d.cls", i), []byte(fmt.Sprint(i % 10))})
	}
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	for _, m := range ms {
		mustOK(t, tw.WriteHeader(&tar.Header{Name: m.name, Size: int64(len(m.data)), Mode: 0o644, Typeflag: tar.TypeReg}))
		_, err := tw.Write(m.data)
		mustOK(t, err)
	}
	mustOK(t, tw.Close())
	var gb bytes.Buffer
	zw := gzip.NewWriter(&gb)
	_, err := zw.Write(tb.Bytes())
	mustOK(t, err)
	mustOK(t, zw.Close())
	var zb bytes.Buffer
	z := zip.NewWriter(&zb)
	for i, m := range ms {
		w, err := z.CreateHeader(&zip.FileHeader{Name: m.name, Method: []uint16{zip.Store, zip.Deflate}[i%2]})
		mustOK(t, err)
		_, err = w.Write(m.data)
		mustOK(t, err)
	}
	mustOK(t, z.Close())
	return tb.Bytes(), gb.Bytes(), zb.Bytes(), ms
}

// TestBatchGet: order, names, bytes, ranges, a long key (PAX header),
// members of tar, tar.gz and zip shards, and signatures, against the real
// binary on its embedded store.
func TestBatchGet(t *testing.T) {
	s := startServer(t, "--batch-prefetch", "4", "--batch-prefetch-bytes", "64KiB")
	c := s.root()
	_, err := c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("train")})
	mustOK(t, err)
	objs := map[string][]byte{}
	var keys []string
	for i := range 24 {
		k := fmt.Sprintf("samples/%05d.jpg", i)
		objs[k] = randBytes(t, 1+i*5000) // up to 115 KB: beyond the 64 KiB held per entry
		put(t, c, "train", k, objs[k])
		keys = append(keys, k)
	}
	long := "deep/" + strings.Repeat("ünïcode-segment/", 40) + "sample.bin" // > 255 bytes, not ASCII
	objs[long] = randBytes(t, 7777)
	put(t, c, "train", long, objs[long])
	objs["big"] = randBytes(t, 5<<20+3)
	put(t, c, "train", "big", objs["big"])
	tarB, tgzB, zipB, ms := webdatasetShards(t, 40)
	put(t, c, "train", "shards/s-0000.tar", tarB)
	put(t, c, "train", "shards/s-0000.tar.gz", tgzB)
	put(t, c, "train", "shards/s-0000.zip", zipB)

	var req batchReq
	type want struct {
		name string
		sum  string
	}
	var wants []want
	add := func(e batchEntry, name string, data []byte) {
		req.Entries = append(req.Entries, e)
		wants = append(wants, want{name, digest(data)})
	}
	for i := len(keys) - 1; i >= 0; i -= 2 { // not the listing order
		add(batchEntry{Bucket: "train", Key: keys[i]}, "train/"+keys[i], objs[keys[i]])
	}
	add(batchEntry{Bucket: "train", Key: long}, "train/"+long, objs[long])
	add(batchEntry{Bucket: "train", Key: "big"}, "train/big", objs["big"])
	add(batchEntry{Bucket: "train", Key: "big", Range: "bytes=4194300-4194400"}, "train/big", objs["big"][4194300:4194401])
	add(batchEntry{Bucket: "train", Key: keys[3], Range: "bytes=-100"}, "train/"+keys[3], objs[keys[3]][len(objs[keys[3]])-100:])
	for _, sh := range []string{"shards/s-0000.tar", "shards/s-0000.tar.gz", "shards/s-0000.zip"} {
		for _, i := range []int{33, 0, 79, 12} {
			add(batchEntry{Bucket: "train", Key: sh, ArchPath: ms[i].name}, "train/"+sh+"/"+ms[i].name, ms[i].data)
		}
		add(batchEntry{Bucket: "train", Key: sh, ArchPath: ms[20].name, Range: "bytes=100-199"}, "train/"+sh+"/"+ms[20].name, ms[20].data[100:200])
	}
	a := batchPost(t, s.Endpoint, rootAK, rootSK, req)
	if a.status != 200 || a.tarErr != nil {
		t.Fatalf("status %d, tar: %v: %.300s", a.status, a.tarErr, a.body)
	}
	if len(a.entries) != len(wants) {
		t.Fatalf("%d entries, want %d", len(a.entries), len(wants))
	}
	for i, w := range wants {
		if a.entries[i].name != w.name || digest(a.entries[i].data) != w.sum {
			t.Fatalf("entry %d: %s (%d bytes), want %s", i, a.entries[i].name, len(a.entries[i].data), w.name)
		}
	}
	for _, e := range a.entries {
		if e.name == "train/"+long && e.format != tar.FormatPAX {
			t.Fatalf("the long key's entry is %v, want PAX", e.format)
		}
	}

	// Unsigned and badly signed: 403 with S3 error XML.
	resp, err := http.Post(s.Endpoint+"/_fedgate/v1/batch", "application/json", strings.NewReader(`{"entries":[{"bucket":"train","key":"big"}]}`))
	mustOK(t, err)
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	batchAnswer{status: resp.StatusCode, body: raw}.wantError(t, 403, "AccessDenied")
	batchPost(t, s.Endpoint, rootAK, "wrong-secret", batchReq{Entries: []batchEntry{{Bucket: "train", Key: "big"}}}).wantError(t, 403, "SignatureDoesNotMatch")
	// Malformed JSON.
	batchPostRaw := func(body string) batchAnswer {
		hr, err := testserver.BatchRequest(ctx(t), s.Endpoint, rootAK, rootSK, []byte(body))
		mustOK(t, err)
		resp, err := http.DefaultClient.Do(hr)
		mustOK(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return batchAnswer{status: resp.StatusCode, body: b}
	}
	batchPostRaw(`{"entries":[{"bucket":"train"`).wantError(t, 400, "InvalidRequest")
	batchPostRaw(`{"entries":[{"bucket":"train","key":"big","range":"lines=1-2"}]}`).wantError(t, 400, "InvalidArgument")
	// A missing member, before the stream; with continue_on_error, an entry.
	e := batchPost(t, s.Endpoint, rootAK, rootSK, batchReq{Entries: []batchEntry{{Bucket: "train", Key: "shards/s-0000.zip", ArchPath: "000999.jpg"}}}).
		wantError(t, 404, "NoSuchKey")
	if !strings.Contains(e.Message, `"000999.jpg"`) {
		t.Fatalf("the error does not name the member: %s", e.Message)
	}
	a = batchPost(t, s.Endpoint, rootAK, rootSK, batchReq{ContinueOnError: true, Entries: []batchEntry{
		{Bucket: "train", Key: "shards/s-0000.tar", ArchPath: "000999.jpg"}, {Bucket: "train", Key: "shards/s-0000.tar", ArchPath: "000001.cls"}}})
	if a.status != 200 || len(a.entries) != 2 || a.entries[0].name != "__errors__/train/shards/s-0000.tar/000999.jpg" || string(a.entries[1].data) != "1" {
		t.Fatalf("%d %v %v", a.status, a.entries, a.tarErr)
	}
	if s.metric("fedgate_batch_shard_index_builds_total") != 3 {
		t.Fatalf("%v shard indexes built for 3 shards", s.metric("fedgate_batch_shard_index_builds_total"))
	}
}

// TestBatchAccessAndLimits: each entry is authorized as its GET (a user
// without a grant is refused); the limits are settings with clear errors.
func TestBatchAccessAndLimits(t *testing.T) {
	s := startServer(t, "--batch-max-entries", "3", "--batch-max-bytes", "1KiB")
	c := s.root()
	for _, b := range []string{"open", "closed"} {
		_, err := c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String(b)})
		mustOK(t, err)
		put(t, c, b, "k", []byte("hello "+b))
	}
	put(t, c, "open", "large", randBytes(t, 2000))
	out, err := s.fedgate("user", "add", "carol")
	mustOK(t, err)
	m := keyRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("user add printed no keys:\n%s", out)
	}
	if out, err := s.fedgate("user", "grant", "carol", "open", "read"); err != nil {
		t.Fatalf("grant: %v %s", err, out)
	}
	ak, sk := m[1], m[2]
	entries := []batchEntry{{Bucket: "open", Key: "k"}, {Bucket: "closed", Key: "k"}, {Bucket: "open", Key: "missing"}}
	e := batchPost(t, s.Endpoint, ak, sk, batchReq{Entries: entries}).wantError(t, 403, "AccessDenied")
	if !strings.Contains(e.Message, "batch entry 1") || !strings.Contains(e.Message, "closed") {
		t.Fatalf("message %q", e.Message)
	}
	a := batchPost(t, s.Endpoint, ak, sk, batchReq{Entries: entries, ContinueOnError: true})
	if a.status != 200 || a.tarErr != nil || len(a.entries) != 3 {
		t.Fatalf("%d %v %v", a.status, a.entries, a.tarErr)
	}
	if a.entries[0].name != "open/k" || string(a.entries[0].data) != "hello open" {
		t.Fatalf("entry 0: %s %q", a.entries[0].name, a.entries[0].data)
	}
	for i, w := range []struct{ name, code string }{{"__errors__/closed/k", "AccessDenied"}, {"__errors__/open/missing", "NoSuchKey"}} {
		got := a.entries[i+1]
		if got.name != w.name || parseXMLError(t, got.data).Code != w.code {
			t.Fatalf("entry %d: %s %s", i+1, got.name, got.data)
		}
	}
	// Root reads the closed bucket.
	if a := batchPost(t, s.Endpoint, rootAK, rootSK, batchReq{Entries: entries[:2]}); a.status != 200 || len(a.entries) != 2 {
		t.Fatalf("root: %d %s", a.status, a.body)
	}
	// Limits.
	batchPost(t, s.Endpoint, rootAK, rootSK, batchReq{Entries: append(entries, entries[0])}).wantError(t, 400, "BatchTooLarge")
	batchPost(t, s.Endpoint, rootAK, rootSK, batchReq{Entries: []batchEntry{{Bucket: "open", Key: "large"}}}).wantError(t, 400, "BatchTooLarge")
	if a := batchPost(t, s.Endpoint, rootAK, rootSK, batchReq{Entries: []batchEntry{{Bucket: "open", Key: "large", Range: "bytes=0-999"}}}); a.status != 200 || len(a.entries) != 1 || len(a.entries[0].data) != 1000 {
		t.Fatalf("a range under the limit: %d %s", a.status, a.body)
	}
}

// requestCounter is a reverse proxy in front of an S3 server that counts
// the requests it forwards by method and path.
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]int // "GET /bucket/key"
}

// countRequests puts a counting proxy in front of the endpoint a store's
// policy YAML names and returns the YAML pointing at the proxy.
func countRequests(t *testing.T, storeYAML string) (string, *requestCounter) {
	m := regexp.MustCompile(`endpoint: (\S+)`).FindStringSubmatch(storeYAML)
	if m == nil {
		t.Fatalf("no endpoint in %q", storeYAML)
	}
	target, err := url.Parse(m[1])
	mustOK(t, err)
	rc := &requestCounter{counts: map[string]int{}}
	rp := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.mu.Lock()
		rc.counts[r.Method+" "+r.URL.Path]++
		rc.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.Replace(storeYAML, m[0], "endpoint: "+srv.URL, 1), rc
}

// count returns the requests of method whose path ends in suffix.
func (rc *requestCounter) count(method, suffix string) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	n := 0
	for k, v := range rc.counts {
		if strings.HasPrefix(k, method+" ") && strings.HasSuffix(k, suffix) {
			n += v
		}
	}
	return n
}

// TestBatchColdOriginFillsCache: a batch of objects and shard members of
// a bucket mounted from MinIO fills the chunk cache as it streams; the
// same batch again reads nothing from the origin. Each small object
// costs the origin one request (its bytes come with its metadata), not a
// HEAD and a GET.
func TestBatchColdOriginFillsCache(t *testing.T) {
	o := s3Origin(t)
	objs := map[string][]byte{}
	var req batchReq
	for i := range 64 {
		k := fmt.Sprintf("train/%05d.jpg", i)
		objs[k] = randBytes(t, 16<<10+i*1000)
		o.put(t, "datasets/"+k, objs[k])
		req.Entries = append(req.Entries, batchEntry{Bucket: "mounted", Key: k})
	}
	tarB, _, zipB, ms := webdatasetShards(t, 100)
	o.put(t, "datasets/shards/s-0.tar", tarB)
	o.put(t, "datasets/shards/s-0.zip", zipB)
	for _, i := range []int{150, 3, 77} {
		req.Entries = append(req.Entries, batchEntry{Bucket: "mounted", Key: "shards/s-0.tar", ArchPath: ms[i].name},
			batchEntry{Bucket: "mounted", Key: "shards/s-0.zip", ArchPath: ms[i].name})
	}
	storeYAML, env := o.store(t)
	storeYAML, counter := countRequests(t, storeYAML)
	policy := "regions:\n  - name: e2e\n    location: onprem:lab\nstores:\n  - name: origin\n" + storeYAML +
		"  - name: nas\n    kind: posix\n    location: onprem:lab\n    path: " + t.TempDir() + "\n" +
		"buckets:\n  - name: mounted\n    origin: origin/datasets/\n    cache: {ttl: 0s, quota: 1GiB}\n" +
		"defaults: {store: nas}\n"
	pf := filepath.Join(t.TempDir(), "policy.yaml")
	mustOK(t, os.WriteFile(pf, []byte(policy), 0o644))
	for k, v := range env {
		t.Setenv(k, v)
	}
	s := startServer(t, "--config", pf, "--cache-size", "1GiB")
	check := func(a batchAnswer) {
		t.Helper()
		if a.status != 200 || a.tarErr != nil || len(a.entries) != len(req.Entries) {
			t.Fatalf("status %d, %d entries, %v: %.300s", a.status, len(a.entries), a.tarErr, a.body)
		}
		for i, e := range req.Entries {
			want := objs[e.Key]
			name := "mounted/" + e.Key
			if e.ArchPath != "" {
				for _, m := range ms {
					if m.name == e.ArchPath {
						want = m.data
					}
				}
				name += "/" + e.ArchPath
			}
			if a.entries[i].name != name || !bytes.Equal(a.entries[i].data, want) {
				t.Fatalf("entry %d: %s (%d bytes), want %s (%d)", i, a.entries[i].name, len(a.entries[i].data), name, len(want))
			}
		}
	}
	before := s.metric("fedgate_cache_origin_bytes_total")
	check(batchPost(t, s.Endpoint, rootAK, rootSK, req))
	cold := s.metric("fedgate_cache_origin_bytes_total") - before
	if cold <= 0 {
		t.Fatal("the cold batch read nothing from the origin")
	}
	if gets, heads := counter.count("GET", ".jpg"), counter.count("HEAD", ".jpg"); gets != 64 || heads != 0 {
		t.Fatalf("the cold batch of 64 small objects cost the origin %d GETs and %d HEADs, want 64 and 0", gets, heads)
	}
	req.ContinueOnError = true
	check(batchPost(t, s.Endpoint, rootAK, rootSK, req))
	if warm := s.metric("fedgate_cache_origin_bytes_total") - before - cold; warm != 0 {
		t.Fatalf("the second batch read %v bytes from the origin", warm)
	}
	if s.metric("fedgate_cache_served_bytes_total") == 0 {
		t.Fatal("nothing was served from the cache")
	}
}

// TestBatchEgressBudget: a spent block-cold-reads budget refuses an
// entry's cold read as it refuses a GET; cached entries are still sent.
// Without continue_on_error the refusal comes after the stream started
// (the budget is checked as bytes are read), so the archive ends with an
// __errors__/ trailer.
func TestBatchEgressBudget(t *testing.T) {
	s, a, tries := startSpentBudget(t)
	// Wait until the node has seen the budget spent: a cold batch entry
	// (a key not read before each time) is refused.
	next := 0
	var refused batchAnswer
	wait.For(t, 20*time.Second, "a cold batch entry refused by the spent budget", func() bool {
		if next >= tries-2 {
			t.Fatal("ran out of cold keys")
		}
		k := fmt.Sprintf("b%02d", next)
		next++
		refused = batchPost(t, s.Endpoint, rootAK, rootSK, batchReq{ContinueOnError: true, Entries: []batchEntry{{Bucket: "dsb", Key: "a"}, {Bucket: "dsb", Key: k}}})
		return len(refused.entries) == 2 && strings.HasPrefix(refused.entries[1].name, "__errors__/")
	})
	if !bytes.Equal(refused.entries[0].data, a) {
		t.Fatal("the cached entry was not sent with the budget spent")
	}
	e := parseXMLError(t, refused.entries[1].data)
	if e.Code != "EgressBudgetExceeded" || !strings.Contains(e.Message, `bucket "dsb"`) {
		t.Fatalf("error entry %+v", e)
	}
	// A GET of the same kind gets the same code.
	_, err := s.root().GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("dsb"), Key: aws.String(fmt.Sprintf("b%02d", next))})
	wantCode(t, err, "EgressBudgetExceeded")
	next++
	// Without continue_on_error: the cached entry, then the trailer.
	k := fmt.Sprintf("b%02d", next)
	st := batchPost(t, s.Endpoint, rootAK, rootSK, batchReq{Entries: []batchEntry{{Bucket: "dsb", Key: "a"}, {Bucket: "dsb", Key: k}, {Bucket: "dsb", Key: "a"}}})
	if st.status != 200 || st.tarErr != nil || len(st.entries) != 2 {
		t.Fatalf("status %d, %d entries, %v", st.status, len(st.entries), st.tarErr)
	}
	if st.entries[0].name != "dsb/a" || st.entries[1].name != "__errors__/dsb/"+k || parseXMLError(t, st.entries[1].data).Code != "EgressBudgetExceeded" {
		t.Fatalf("entries %s, %s", st.entries[0].name, st.entries[1].name)
	}
}

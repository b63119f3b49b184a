package gateway_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/gateway"
	"github.com/fedgate/fedgate/gateway/gatewaytest"
	"github.com/fedgate/fedgate/store"
)

// batchEnv is newEnv with the batch endpoint tuned.
func batchEnv(t *testing.T, cfg gateway.BatchConfig) (*env, *prometheus.Registry) {
	t.Helper()
	f := gatewaytest.New()
	f.AddUser("alice", userAK, userSK)
	reg := prometheus.NewRegistry()
	srv, err := gateway.New(gateway.Config{Backend: f, Batch: cfg, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	e := &env{t: t, fake: f, url: hs.URL}
	e.root = e.client(gatewaytest.RootAccessKey, gatewaytest.RootSecretKey)
	e.user = e.client(userAK, userSK)
	return e, reg
}

type tarEntry struct {
	name string
	data []byte
}

// readTar reads every entry of a tar stream; err is what broke it.
func readTar(body []byte) ([]tarEntry, error) {
	tr := tar.NewReader(bytes.NewReader(body))
	var out []tarEntry
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return out, err
		}
		out = append(out, tarEntry{h.Name, data})
	}
}

// batch posts req signed with ak/sk and returns the response and its body.
func (e *env) batch(req gateway.BatchRequest, ak, sk string) (*http.Response, []byte) {
	e.t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.signed(http.MethodPost, gateway.BatchPath, body, nil, ak, sk)
}

// rootBatchRequest is a batch request signed with the root user's keys,
// for a test that reads the answer as it streams.
func (e *env) rootBatchRequest(br gateway.BatchRequest) *http.Request {
	e.t.Helper()
	body, err := json.Marshal(br)
	if err != nil {
		e.t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, e.url+gateway.BatchPath, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	hash := fmt.Sprintf("%x", sum)
	req.Header.Set("x-amz-content-sha256", hash)
	creds := aws.Credentials{AccessKeyID: gatewaytest.RootAccessKey, SecretAccessKey: gatewaytest.RootSecretKey}
	if err := v4.NewSigner().SignHTTP(e.t.Context(), creds, req, hash, "s3", "us-east-1", time.Now()); err != nil {
		e.t.Fatal(err)
	}
	return req
}

func (e *env) rootBatch(req gateway.BatchRequest) (*http.Response, []byte) {
	e.t.Helper()
	return e.batch(req, gatewaytest.RootAccessKey, gatewaytest.RootSecretKey)
}

type s3Error struct {
	Code     string
	Message  string
	Resource string
}

func parseS3Error(t *testing.T, b []byte) s3Error {
	t.Helper()
	var e s3Error
	if err := xml.Unmarshal(b, &e); err != nil {
		t.Fatalf("not an S3 error document: %v\n%s", err, b)
	}
	return e
}

func wantBatchErr(t *testing.T, resp *http.Response, body []byte, code string, status int) s3Error {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", resp.StatusCode, status, body)
	}
	e := parseS3Error(t, body)
	if e.Code != code {
		t.Fatalf("code %s, want %s: %s", e.Code, code, e.Message)
	}
	return e
}

func sum(b []byte) [32]byte { return sha256.Sum256(b) }

func data(seed, n int) []byte {
	b := make([]byte, n)
	x := uint32(seed*2654435761 + 1)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func TestBatchOrderNamesBytesRanges(t *testing.T) {
	e, reg := batchEnv(t, gateway.BatchConfig{Prefetch: 4, PrefetchBytes: 4096})
	e.bucket("ds")
	e.bucket("other")
	objs := map[string][]byte{}
	for i := range 40 {
		k := fmt.Sprintf("train/%05d.jpg", i)
		objs["ds/"+k] = data(i, 100+i*333) // up to 13 KiB: many are larger than PrefetchBytes
		e.fake.PutObject("ds", k, objs["ds/"+k], store.Metadata{})
	}
	objs["other/big"] = data(99, 300_000)
	e.fake.PutObject("other", "big", objs["other/big"], store.Metadata{})
	long := "deep/" + strings.Repeat("long-key-segment/", 55) + "end" // > 255 bytes: a PAX header
	objs["ds/"+long] = []byte("long key body")
	e.fake.PutObject("ds", long, objs["ds/"+long], store.Metadata{})
	objs["ds/empty"] = nil
	e.fake.PutObject("ds", "empty", nil, store.Metadata{})

	var req gateway.BatchRequest
	type want struct {
		name string
		data []byte
	}
	var wants []want
	// Reverse order, with repeats, ranges and another bucket in between.
	for i := 39; i >= 0; i -= 3 {
		k := fmt.Sprintf("train/%05d.jpg", i)
		req.Entries = append(req.Entries, gateway.BatchEntry{Bucket: "ds", Key: k})
		wants = append(wants, want{"ds/" + k, objs["ds/"+k]})
		if i%2 == 0 {
			req.Entries = append(req.Entries, gateway.BatchEntry{Bucket: "other", Key: "big", Range: "bytes=1000-200999"})
			wants = append(wants, want{"other/big", objs["other/big"][1000:201000]})
		}
	}
	req.Entries = append(req.Entries,
		gateway.BatchEntry{Bucket: "ds", Key: long},
		gateway.BatchEntry{Bucket: "ds", Key: "empty"},
		gateway.BatchEntry{Bucket: "ds", Key: "train/00001.jpg", Range: "bytes=-10"},
		gateway.BatchEntry{Bucket: "ds", Key: "train/00001.jpg", Range: "bytes=5-"},
		gateway.BatchEntry{Bucket: "other", Key: "big"},
		gateway.BatchEntry{Bucket: "ds", Key: "train/00002.jpg"})
	b1 := objs["ds/train/00001.jpg"]
	wants = append(wants, want{"ds/" + long, objs["ds/"+long]}, want{"ds/empty", nil},
		want{"ds/train/00001.jpg", b1[len(b1)-10:]}, want{"ds/train/00001.jpg", b1[5:]},
		want{"other/big", objs["other/big"]}, want{"ds/train/00002.jpg", objs["ds/train/00002.jpg"]})

	for _, cont := range []bool{false, true} {
		req.ContinueOnError = cont
		resp, body := e.rootBatch(req)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-tar" {
			t.Fatalf("status %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		got, err := readTar(body)
		if err != nil {
			t.Fatalf("tar: %v", err)
		}
		if len(got) != len(wants) {
			t.Fatalf("%d entries, want %d", len(got), len(wants))
		}
		for i, w := range wants {
			if got[i].name != w.name || sum(got[i].data) != sum(w.data) {
				t.Fatalf("entry %d: %s (%d bytes), want %s (%d bytes)", i, got[i].name, len(got[i].data), w.name, len(w.data))
			}
		}
	}
	if v := counterValue(t, reg, "fedgate_batch_entries_total", "result", "ok"); v != float64(2*len(wants)) {
		t.Fatalf("fedgate_batch_entries_total{result=ok} = %v, want %d", v, 2*len(wants))
	}
	if v := counterValue(t, reg, "fedgate_batch_prefetch_bytes", "", ""); v != 0 {
		t.Fatalf("fedgate_batch_prefetch_bytes = %v after the batches, want 0", v)
	}
}

// counterValue reads one sample of a metric from reg (label "" : the only
// one).
func counterValue(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := label == ""
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					match = true
				}
			}
			if !match {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			}
		}
	}
	return 0
}

func makeShards(t *testing.T) (tarB, tgzB, zipB []byte, members map[string][]byte) {
	t.Helper()
	members = map[string][]byte{}
	var names []string
	for i := range 30 {
		for _, ext := range []string{"jpg", "cls"} {
			n := fmt.Sprintf("%06d.%s", i, ext)
			members[n] = data(i*7+len(ext), 50+i*97)
			names = append(names, n)
		}
	}
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	for _, n := range names {
		tw.WriteHeader(&tar.Header{Name: "./" + n, Size: int64(len(members[n])), Mode: 0o644, Typeflag: tar.TypeReg})
		tw.Write(members[n])
	}
	tw.Close()
	var gb bytes.Buffer
	zw := gzip.NewWriter(&gb)
	zw.Write(tb.Bytes())
	zw.Close()
	var zb bytes.Buffer
	z := zip.NewWriter(&zb)
	for i, n := range names {
		w, _ := z.CreateHeader(&zip.FileHeader{Name: n, Method: []uint16{zip.Store, zip.Deflate}[i%2]})
		w.Write(members[n])
	}
	z.Close()
	return tb.Bytes(), gb.Bytes(), zb.Bytes(), members
}

func TestBatchArchpath(t *testing.T) {
	e, reg := batchEnv(t, gateway.BatchConfig{})
	e.bucket("shards")
	tarB, tgzB, zipB, members := makeShards(t)
	e.fake.PutObject("shards", "s-000.tar", tarB, store.Metadata{})
	e.fake.PutObject("shards", "s-000.tar.gz", tgzB, store.Metadata{})
	e.fake.PutObject("shards", "s-000.zip", zipB, store.Metadata{})
	e.fake.PutObject("shards", "noext", tarB, store.Metadata{}) // found by its first bytes
	e.fake.PutObject("shards", "text.tar", []byte("not a tar at all, just some text that is long enough"), store.Metadata{})

	var req gateway.BatchRequest
	var want []tarEntry
	for _, shard := range []string{"s-000.tar", "s-000.tar.gz", "s-000.zip", "noext"} {
		for _, m := range []string{"000017.jpg", "000003.cls", "000029.jpg"} {
			req.Entries = append(req.Entries, gateway.BatchEntry{Bucket: "shards", Key: shard, ArchPath: m})
			want = append(want, tarEntry{"shards/" + shard + "/" + m, members[m]})
		}
		req.Entries = append(req.Entries, gateway.BatchEntry{Bucket: "shards", Key: shard, ArchPath: "./000020.jpg", Range: "bytes=10-19"})
		want = append(want, tarEntry{"shards/" + shard + "/000020.jpg", members["000020.jpg"][10:20]})
	}
	resp, body := e.rootBatch(req)
	if resp.StatusCode != 200 {
		t.Fatalf("%d: %s", resp.StatusCode, body)
	}
	got, err := readTar(body)
	if err != nil || len(got) != len(want) {
		t.Fatalf("%d entries, %v", len(got), err)
	}
	for i := range want {
		if got[i].name != want[i].name || !bytes.Equal(got[i].data, want[i].data) {
			t.Fatalf("entry %d: %s (%d bytes), want %s (%d bytes)", i, got[i].name, len(got[i].data), want[i].name, len(want[i].data))
		}
	}
	if b := counterValue(t, reg, "fedgate_batch_shard_index_builds_total", "", ""); b != 4 {
		t.Fatalf("%v index builds for 4 shards", b)
	}
	// Again: the indexes are kept.
	e.rootBatch(req)
	if b := counterValue(t, reg, "fedgate_batch_shard_index_builds_total", "", ""); b != 4 {
		t.Fatalf("%v index builds after reading the same 4 shards again", b)
	}
	// A changed shard is indexed again (its validator changed).
	e.fake.PutObject("shards", "s-000.zip", zipB, store.Metadata{})
	resp, body = e.rootBatch(gateway.BatchRequest{Entries: []gateway.BatchEntry{{Bucket: "shards", Key: "s-000.zip", ArchPath: "000001.cls"}}})
	if got, _ := readTar(body); resp.StatusCode != 200 || len(got) != 1 || !bytes.Equal(got[0].data, members["000001.cls"]) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if b := counterValue(t, reg, "fedgate_batch_shard_index_builds_total", "", ""); b != 5 {
		t.Fatalf("%v index builds after the shard changed, want 5", b)
	}

	// A missing member: NoSuchKey naming it, before the stream.
	resp, body = e.rootBatch(gateway.BatchRequest{Entries: []gateway.BatchEntry{{Bucket: "shards", Key: "s-000.tar", ArchPath: "000001.jpg"}, {Bucket: "shards", Key: "s-000.tar", ArchPath: "999999.png"}}})
	se := wantBatchErr(t, resp, body, "NoSuchKey", 404)
	if !strings.Contains(se.Message, `"999999.png"`) || !strings.Contains(se.Message, "batch entry 1") {
		t.Fatalf("message %q does not name the member and the entry", se.Message)
	}
	// Not an archive.
	resp, body = e.rootBatch(gateway.BatchRequest{Entries: []gateway.BatchEntry{{Bucket: "shards", Key: "text.tar", ArchPath: "a"}}})
	wantBatchErr(t, resp, body, "InvalidRequest", 400)
	// A member range past its end.
	resp, body = e.rootBatch(gateway.BatchRequest{Entries: []gateway.BatchEntry{{Bucket: "shards", Key: "s-000.zip", ArchPath: "000000.cls", Range: "bytes=5000-"}}})
	wantBatchErr(t, resp, body, "InvalidRange", 416)
}

func TestBatchContinueOnError(t *testing.T) {
	e, reg := batchEnv(t, gateway.BatchConfig{Prefetch: 3})
	e.bucket("ds")
	e.bucket("private")
	e.object("ds", "a", "alpha")
	e.object("ds", "b", "bravo")
	e.object("private", "secret", "s3cr3t")
	e.grant("ds", "read")
	tarB, _, _, members := makeShards(t)
	e.fake.PutObject("ds", "shard.tar", tarB, store.Metadata{})
	req := gateway.BatchRequest{ContinueOnError: true, Entries: []gateway.BatchEntry{
		{Bucket: "ds", Key: "a"},
		{Bucket: "ds", Key: "missing"},
		{Bucket: "private", Key: "secret"},
		{Bucket: "nobucket", Key: "x"},
		{Bucket: "ds", Key: "b", Range: "bytes=10-"},
		{Bucket: "ds", Key: "shard.tar", ArchPath: "nope.jpg"},
		{Bucket: "ds", Key: "bad/../key"},
		{Bucket: "ds", Key: "shard.tar", ArchPath: "000002.cls"},
		{Bucket: "ds", Key: "b"},
	}}
	resp, body := e.batch(req, userAK, userSK)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	got, err := readTar(body)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ name, code, data string }{
		{"ds/a", "", "alpha"},
		{"__errors__/ds/missing", "NoSuchKey", ""},
		{"__errors__/private/secret", "AccessDenied", ""},
		{"__errors__/nobucket/x", "NoSuchBucket", ""},
		{"__errors__/ds/b", "InvalidRange", ""},
		{"__errors__/ds/shard.tar/nope.jpg", "NoSuchKey", ""},
		{"__errors__/ds/bad/%2E%2E/key", "InvalidArgument", ""},
		{"ds/shard.tar/000002.cls", "", string(members["000002.cls"])},
		{"ds/b", "", "bravo"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d entries: %v", len(got), got)
	}
	for i, w := range want {
		if got[i].name != w.name {
			t.Fatalf("entry %d is %s, want %s", i, got[i].name, w.name)
		}
		if w.code == "" {
			if string(got[i].data) != w.data {
				t.Fatalf("entry %d: %q", i, got[i].data)
			}
			continue
		}
		se := parseS3Error(t, got[i].data)
		if se.Code != w.code {
			t.Fatalf("entry %d (%s): code %s, want %s: %s", i, w.name, se.Code, w.code, se.Message)
		}
	}
	// The error entries say what a GET says.
	getErr := func(bucket, key string) s3Error {
		resp, body := e.signed(http.MethodGet, "/"+bucket+"/"+key, nil, nil, userAK, userSK)
		if resp.StatusCode < 400 {
			t.Fatalf("GET %s/%s: %d", bucket, key, resp.StatusCode)
		}
		return parseS3Error(t, body)
	}
	for i, bk := range [][2]string{{"ds", "missing"}, {"private", "secret"}} {
		se := parseS3Error(t, got[i+1].data)
		if g := getErr(bk[0], bk[1]); g.Code != se.Code || g.Message != se.Message || se.Resource != "/"+bk[0]+"/"+bk[1] {
			t.Fatalf("%s/%s: batch says %+v, GET says %+v", bk[0], bk[1], se, g)
		}
	}
	if v := counterValue(t, reg, "fedgate_batch_entry_errors_total", "code", "AccessDenied"); v != 1 {
		t.Fatalf("AccessDenied errors counted %v", v)
	}
	if v := counterValue(t, reg, "fedgate_batch_requests_total", "result", "errors"); v != 1 {
		t.Fatalf("requests{result=errors} = %v", v)
	}
}

// Without continue_on_error every entry is checked first: the first that
// fails (in request order) is the answer, a plain S3 error.
func TestBatchStrictRefusesBeforeTheStream(t *testing.T) {
	e, reg := batchEnv(t, gateway.BatchConfig{})
	e.bucket("ds")
	e.bucket("private")
	e.object("ds", "a", "alpha")
	e.object("private", "secret", "s3cr3t")
	e.grant("ds", "read")
	cases := []struct {
		entries []gateway.BatchEntry
		code    string
		status  int
	}{
		{[]gateway.BatchEntry{{Bucket: "ds", Key: "a"}, {Bucket: "ds", Key: "missing"}}, "NoSuchKey", 404},
		{[]gateway.BatchEntry{{Bucket: "ds", Key: "a"}, {Bucket: "private", Key: "secret"}, {Bucket: "ds", Key: "missing"}}, "AccessDenied", 403},
		{[]gateway.BatchEntry{{Bucket: "ds", Key: "a", Range: "bytes=100-"}}, "InvalidRange", 416},
		{[]gateway.BatchEntry{{Bucket: "nope", Key: "a"}}, "NoSuchBucket", 404},
	}
	for _, c := range cases {
		resp, body := e.batch(gateway.BatchRequest{Entries: c.entries}, userAK, userSK)
		se := wantBatchErr(t, resp, body, c.code, c.status)
		if !strings.Contains(se.Message, "batch entry") {
			t.Fatalf("%s: message %q names no entry", c.code, se.Message)
		}
	}
	// A bucket policy's explicit deny applies as it does to a GET.
	e.fake.SetPolicy("ds")
	noErr(t, e.fake.MustBucket("ds").SetConfig(ctx, backend.ConfPolicy,
		`{"Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::ds/a"}]}`))
	resp, body := e.batch(gateway.BatchRequest{Entries: []gateway.BatchEntry{{Bucket: "ds", Key: "a"}}}, userAK, userSK)
	wantBatchErr(t, resp, body, "AccessDenied", 403)
	if v := counterValue(t, reg, "fedgate_batch_requests_total", "result", "refused"); v != float64(len(cases)+1) {
		t.Fatalf("requests{result=refused} = %v", v)
	}
}

// A failure after the up-front checks (here every read is refused by an
// egress budget) ends the stream with an __errors__ entry and the end of
// the archive.
func TestBatchStrictErrorTrailer(t *testing.T) {
	e, _ := batchEnv(t, gateway.BatchConfig{})
	e.bucket("ds")
	e.object("ds", "a", "alpha")
	e.object("ds", "b", "bravo")
	e.fake.Fail(gatewaytest.OpOpen, fmt.Errorf("%w: budget ds spent", backend.ErrEgressBudget))
	resp, body := e.rootBatch(gateway.BatchRequest{Entries: []gateway.BatchEntry{{Bucket: "ds", Key: "a"}, {Bucket: "ds", Key: "b"}}})
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	got, err := readTar(body)
	if err != nil || len(got) != 1 || got[0].name != "__errors__/ds/a" {
		t.Fatalf("entries %v, %v", got, err)
	}
	if se := parseS3Error(t, got[0].data); se.Code != "EgressBudgetExceeded" {
		t.Fatalf("code %s", se.Code)
	}
	// With continue_on_error both entries are errors.
	resp, body = e.rootBatch(gateway.BatchRequest{ContinueOnError: true, Entries: []gateway.BatchEntry{{Bucket: "ds", Key: "a"}, {Bucket: "ds", Key: "b"}}})
	if got, err := readTar(body); resp.StatusCode != 200 || err != nil || len(got) != 2 || got[1].name != "__errors__/ds/b" {
		t.Fatalf("%d entries %v, %v", resp.StatusCode, got, err)
	}
}

func TestBatchLimits(t *testing.T) {
	e, _ := batchEnv(t, gateway.BatchConfig{MaxEntries: 3, MaxBytes: 100})
	e.bucket("ds")
	e.fake.PutObject("ds", "a", data(1, 60), store.Metadata{})
	e.fake.PutObject("ds", "b", data(2, 60), store.Metadata{})
	four := gateway.BatchRequest{Entries: []gateway.BatchEntry{{Bucket: "ds", Key: "a"}, {Bucket: "ds", Key: "a"}, {Bucket: "ds", Key: "a"}, {Bucket: "ds", Key: "a"}}}
	resp, body := e.rootBatch(four)
	se := wantBatchErr(t, resp, body, "BatchTooLarge", 400)
	if !strings.Contains(se.Message, "at most 3") {
		t.Fatalf("message %q", se.Message)
	}
	two := gateway.BatchRequest{Entries: []gateway.BatchEntry{{Bucket: "ds", Key: "a"}, {Bucket: "ds", Key: "b"}}}
	resp, body = e.rootBatch(two)
	se = wantBatchErr(t, resp, body, "BatchTooLarge", 400)
	if !strings.Contains(se.Message, "120 bytes") || !strings.Contains(se.Message, "at most 100") {
		t.Fatalf("message %q", se.Message)
	}
	// A range keeps it under the limit.
	two.Entries[1].Range = "bytes=0-9"
	if resp, body := e.rootBatch(two); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	// With continue_on_error the entry that does not fit is an error entry.
	two.Entries[1].Range = ""
	two.ContinueOnError = true
	resp, body = e.rootBatch(two)
	got, err := readTar(body)
	if resp.StatusCode != 200 || err != nil || len(got) != 2 || got[1].name != "__errors__/ds/b" || parseS3Error(t, got[1].data).Code != "BatchTooLarge" {
		t.Fatalf("%d %v %v", resp.StatusCode, got, err)
	}
}

func TestBatchBadRequests(t *testing.T) {
	e, _ := batchEnv(t, gateway.BatchConfig{})
	e.bucket("ds")
	e.object("ds", "a", "alpha")
	good := []byte(`{"entries":[{"bucket":"ds","key":"a"}]}`)

	// Unsigned.
	resp, err := http.Post(e.url+gateway.BatchPath, "application/json", bytes.NewReader(good))
	noErr(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	wantBatchErr(t, resp, body, "AccessDenied", 403)
	// A wrong secret.
	r, b := e.signed(http.MethodPost, gateway.BatchPath, good, nil, userAK, "not-the-secret")
	wantBatchErr(t, r, b, "SignatureDoesNotMatch", 403)
	// An unknown key.
	r, b = e.signed(http.MethodPost, gateway.BatchPath, good, nil, "NOSUCHKEY", "x")
	wantBatchErr(t, r, b, "InvalidAccessKeyId", 403)
	// A body that is not what was signed.
	req, _ := http.NewRequest(http.MethodPost, e.url+gateway.BatchPath, bytes.NewReader(good))
	other := fmt.Sprintf("%x", sha256.Sum256([]byte(`{"entries":[{"bucket":"ds","key":"b"}]}`)))
	req.Header.Set("x-amz-content-sha256", other)
	noErr(t, v4.NewSigner().SignHTTP(ctx, aws.Credentials{AccessKeyID: gatewaytest.RootAccessKey, SecretAccessKey: gatewaytest.RootSecretKey},
		req, other, "s3", "us-east-1", time.Now()))
	resp, err = http.DefaultClient.Do(req)
	noErr(t, err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	wantBatchErr(t, resp, body, "XAmzContentSHA256Mismatch", 400)
	// A GET of the endpoint.
	r, b = e.rootSigned(http.MethodGet, gateway.BatchPath, nil, nil)
	wantBatchErr(t, r, b, "MethodNotAllowed", 405)

	for name, c := range map[string]struct {
		body, code string
	}{
		"not json":          {`{"entries":`, "InvalidRequest"},
		"unknown field":     {`{"entries":[{"bucket":"ds","key":"a","vesion":"1"}]}`, "InvalidRequest"},
		"trailing data":     {`{"entries":[{"bucket":"ds","key":"a"}]} {}`, "InvalidRequest"},
		"no entries":        {`{"entries":[]}`, "InvalidRequest"},
		"no key":            {`{"entries":[{"bucket":"ds"}]}`, "InvalidRequest"},
		"no bucket":         {`{"entries":[{"key":"a"}]}`, "InvalidRequest"},
		"bad range":         {`{"entries":[{"bucket":"ds","key":"a","range":"items=0-1"}]}`, "InvalidArgument"},
		"multi range":       {`{"entries":[{"bucket":"ds","key":"a","range":"bytes=0-1,4-5"}]}`, "InvalidArgument"},
		"NUL archpath":      {`{"entries":[{"bucket":"ds","key":"a","archpath":"a\u0000b"}]}`, "InvalidRequest"},
		"empty archpath":    {`{"entries":[{"bucket":"ds","key":"a","archpath":"./"}]}`, "InvalidRequest"},
		"continue not bool": {`{"entries":[{"bucket":"ds","key":"a"}],"continue_on_error":"yes"}`, "InvalidRequest"},
	} {
		r, b := e.rootSigned(http.MethodPost, gateway.BatchPath, []byte(c.body), nil)
		if r.StatusCode != 400 {
			t.Fatalf("%s: status %d: %s", name, r.StatusCode, b)
		}
		if se := parseS3Error(t, b); se.Code != c.code {
			t.Fatalf("%s: code %s, want %s: %s", name, se.Code, c.code, se.Message)
		}
	}
	// Nothing above changed the object.
	got, _, ok := e.fake.Object("ds", "a")
	if !ok || string(got) != "alpha" {
		t.Fatal("the object changed")
	}
}

// A batch never buffers whole objects: an object much larger than the
// prefetch window streams through.
func TestBatchStreamsLargeEntries(t *testing.T) {
	e, _ := batchEnv(t, gateway.BatchConfig{Prefetch: 2, PrefetchBytes: 64 << 10})
	e.bucket("ds")
	big := data(5, 8<<20)
	e.fake.PutObject("ds", "big", big, store.Metadata{})
	e.object("ds", "small", "s")
	body, _ := json.Marshal(gateway.BatchRequest{Entries: []gateway.BatchEntry{{Bucket: "ds", Key: "big"}, {Bucket: "ds", Key: "small"}, {Bucket: "ds", Key: "big"}}})
	resp, data := e.rootSigned(http.MethodPost, gateway.BatchPath, body, nil)
	got, err := readTar(data)
	if resp.StatusCode != 200 || err != nil || len(got) != 3 || !bytes.Equal(got[0].data, big) || !bytes.Equal(got[2].data, big) {
		t.Fatalf("%d %d entries %v", resp.StatusCode, len(got), err)
	}
}

func TestParseBatchRequest(t *testing.T) {
	req, err := gateway.ParseBatchRequest([]byte(`{"entries":[{"bucket":"b","key":"k","range":"bytes=0-99","archpath":"x/y.jpg"}],"continue_on_error":true}`), 10)
	if err != nil || !req.ContinueOnError || len(req.Entries) != 1 || req.Entries[0] != (gateway.BatchEntry{Bucket: "b", Key: "k", Range: "bytes=0-99", ArchPath: "x/y.jpg"}) {
		t.Fatalf("%+v %v", req, err)
	}
	if _, err := gateway.ParseBatchRequest([]byte(`{"entries":[{"bucket":"b","key":"k"},{"bucket":"b","key":"k"}]}`), 1); err == nil || !strings.Contains(err.Error(), "BatchTooLarge") {
		t.Fatalf("over the limit: %v", err)
	}
	var se interface{ Error() string }
	_, err = gateway.ParseBatchRequest([]byte(`[]`), 1)
	if !errors.As(err, &se) {
		t.Fatal(err)
	}
}

// Entries gathered for one large write still go out while a later entry
// is slow to fetch (a cold origin): the client reads the first entries
// before the slow one is ready.
func TestBatchSendsWhatIsReadyWhileAnEntryIsSlow(t *testing.T) {
	e, _ := batchEnv(t, gateway.BatchConfig{})
	e.bucket("ds")
	e.object("ds", "a", "alpha")
	e.object("ds", "b", "bravo")
	e.object("ds", "slow", "sierra")
	release := make(chan struct{})
	e.fake.SetOpenHook(func(_, key string) {
		if key == "slow" {
			<-release
		}
	})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	req := e.rootBatchRequest(gateway.BatchRequest{Entries: []gateway.BatchEntry{{Bucket: "ds", Key: "a"}, {Bucket: "ds", Key: "b"}, {Bucket: "ds", Key: "slow"}}})
	type got struct {
		name, data string
		err        error
	}
	entries := make(chan got, 4)
	go func() {
		// The answer's header, too, must come before the slow entry.
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			entries <- got{err: err}
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			entries <- got{err: fmt.Errorf("status %d", resp.StatusCode)}
			return
		}
		tr := tar.NewReader(resp.Body)
		for {
			h, err := tr.Next()
			if err != nil {
				entries <- got{err: err}
				return
			}
			b, err := io.ReadAll(tr)
			entries <- got{h.Name, string(b), err}
		}
	}()
	for _, want := range []got{{"ds/a", "alpha", nil}, {"ds/b", "bravo", nil}} {
		select {
		case g := <-entries:
			if g != want {
				t.Fatalf("entry %+v, want %+v", g, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s did not arrive while the entry after it was still being fetched", want.name)
		}
	}
	close(release)
	for _, want := range []got{{"ds/slow", "sierra", nil}, {"", "", io.EOF}} {
		if g := <-entries; g != want {
			t.Fatalf("entry %+v, want %+v", g, want)
		}
	}
}

// The answer's status and header go out while the first entry is still
// being fetched, so a client's wait for the response header does not
// include a slow origin's.
func TestBatchAnswersBeforeASlowFirstEntry(t *testing.T) {
	e, _ := batchEnv(t, gateway.BatchConfig{})
	e.bucket("ds")
	e.object("ds", "slow", "sierra")
	e.object("ds", "a", "alpha")
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	defer unblock()
	e.fake.SetOpenHook(func(_, key string) {
		if key == "slow" {
			<-release
		}
	})
	req := e.rootBatchRequest(gateway.BatchRequest{Entries: []gateway.BatchEntry{{Bucket: "ds", Key: "slow"}, {Bucket: "ds", Key: "a"}}})
	type answer struct {
		resp *http.Response
		err  error
	}
	answers := make(chan answer, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		answers <- answer{resp, err}
	}()
	var a answer
	select {
	case a = <-answers:
	case <-time.After(10 * time.Second):
		t.Fatal("no answer header while the first entry was still being fetched")
	}
	if a.err != nil {
		t.Fatal(a.err)
	}
	defer a.resp.Body.Close()
	if a.resp.StatusCode != 200 || a.resp.Header.Get("x-fedgate-batch-entries") != "2" {
		t.Fatalf("status %d, entries %q", a.resp.StatusCode, a.resp.Header.Get("x-fedgate-batch-entries"))
	}
	unblock()
	data, err := io.ReadAll(a.resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	got, err := readTar(data)
	if err != nil || len(got) != 2 || string(got[0].data) != "sierra" || string(got[1].data) != "alpha" {
		t.Fatalf("entries %v, %v", got, err)
	}
}

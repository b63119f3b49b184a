package gateway_test

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/fedgate/fedgate/egress"
	"github.com/fedgate/fedgate/gateway"
	"github.com/fedgate/fedgate/gateway/gatewaytest"
)

// syncBuffer is a log destination the server's goroutines share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// The access log a gateway writes (--log-format json) converts to a trace
// of what moved: puts, gets (ranged ones by their range), multipart
// uploads as one put of their parts, deletes; the rest is counted as
// skipped (egress.AccessLogReader, fedgate egress trace-from-log).
func TestAccessLogToTrace(t *testing.T) {
	var log syncBuffer
	f := gatewaytest.New()
	f.SetMinPartSize(5)
	srv, err := gateway.New(gateway.Config{Backend: f, Logger: slog.New(slog.NewJSONHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	e := &env{t: t, fake: f, url: hs.URL}
	e.bucket("data")

	do := func(method, path string, body string, hdr http.Header, want int) []byte {
		t.Helper()
		resp, data := e.rootSigned(method, path, []byte(body), hdr)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, data, want)
		}
		return data
	}
	do("PUT", "/data/train/a/one", strings.Repeat("x", 1000), nil, 200)
	do("GET", "/data/train/a/one", "", nil, 200)
	do("GET", "/data/train/a/one", "", http.Header{"Range": {"bytes=0-99"}}, 206)
	do("HEAD", "/data/train/a/one", "", nil, 200)
	do("GET", "/data/missing", "", nil, 404)
	do("PUT", "/data/copy", "", http.Header{"X-Amz-Copy-Source": {"/data/train/a/one"}}, 200)
	var created struct {
		UploadID string `xml:"UploadId"`
	}
	if err := xml.Unmarshal(do("POST", "/data/big?uploads", "", nil, 200), &created); err != nil {
		t.Fatal(err)
	}
	var complete strings.Builder
	complete.WriteString("<CompleteMultipartUpload>")
	for n, part := range []string{strings.Repeat("a", 300), strings.Repeat("b", 200)} {
		resp, _ := e.rootSigned("PUT", fmt.Sprintf("/data/big?partNumber=%d&uploadId=%s", n+1, created.UploadID), []byte(part), nil)
		if resp.StatusCode != 200 {
			t.Fatalf("UploadPart: %d", resp.StatusCode)
		}
		fmt.Fprintf(&complete, "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>", n+1, resp.Header.Get("ETag"))
	}
	complete.WriteString("</CompleteMultipartUpload>")
	do("POST", "/data/big?uploadId="+created.UploadID, complete.String(), nil, 200)
	do("DELETE", "/data/train/a/one", "", nil, 204)
	do("GET", "/data?list-type=2", "", nil, 200)

	log.mu.Lock()
	text := log.b.String()
	log.mu.Unlock()
	r := egress.NewAccessLogReader("node.log", "gpu-a", strings.NewReader(text))
	var got []string
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%v\n%s", err, text)
		}
		if ev.Region != "gpu-a" || ev.Bucket != "data" || ev.Time.IsZero() {
			t.Errorf("row %+v", ev)
		}
		got = append(got, fmt.Sprintf("%s %s %d", ev.Op, ev.Key, ev.Size))
	}
	want := []string{"put train/a/one 1000", "get train/a/one 1000", "get train/a/one 100", "put big 500", "delete train/a/one 0"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows:\n%s\nwant:\n%s\nlog:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), text)
	}
	skipped := strings.Join(r.Skipped(), "; ")
	for _, s := range []string{"1 copies", "1 failed or not modified requests", "3 other operations", "2 upload parts"} {
		if !strings.Contains(skipped, s) {
			t.Errorf("skipped %q, want it to say %q", skipped, s)
		}
	}
}

package gateway

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/fedgate/fedgate/gateway/s3err"
	"github.com/fedgate/fedgate/shard"
)

// FuzzBatchRequest: any body either parses into entries that each name a
// bucket and a key, with a range of the bytes= forms and an archpath
// without NUL, or is refused with a 400 S3 error; never a panic.
func FuzzBatchRequest(f *testing.F) {
	for _, s := range []string{
		`{"entries":[{"bucket":"b","key":"k"}]}`,
		`{"entries":[{"bucket":"b","key":"k","range":"bytes=0-99","archpath":"x/000001.jpg"}],"continue_on_error":true}`,
		`{"entries":[{"bucket":"b","key":"k","range":"bytes=-5"},{"bucket":"c","key":"a/b/c","range":"bytes=7-"}]}`,
		`{"entries":[]}`, `{"entries":null}`, `[]`, `{"entries":[{"bucket":"b","key":"k"}]} x`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		const maxEntries = 8
		req, err := ParseBatchRequest(body, maxEntries)
		if err != nil {
			var se *s3err.Error
			if !errors.As(err, &se) || se.Status != http.StatusBadRequest {
				t.Fatalf("error %v is not a 400 S3 error", err)
			}
			return
		}
		if len(req.Entries) == 0 || len(req.Entries) > maxEntries {
			t.Fatalf("%d entries accepted", len(req.Entries))
		}
		for _, e := range req.Entries {
			if e.Bucket == "" || e.Key == "" || strings.IndexByte(e.ArchPath, 0) >= 0 || len(e.ArchPath) > maxArchPath || dotSegment(shard.NormalizeName(e.ArchPath)) {
				t.Fatalf("entry %+v accepted", e)
			}
			if e.Range != "" {
				if _, err := parseRangeSpec(e.Range, 1000); errors.Is(err, errRangeSyntax) {
					t.Fatalf("range %q accepted", e.Range)
				}
			}
		}
	})
}

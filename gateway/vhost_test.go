package gateway

import "testing"

func TestVirtualHostBucket(t *testing.T) {
	for _, tc := range []struct {
		host, domain, bucket string
		ok                   bool
	}{
		{"data.s3.example", "s3.example", "data", true},
		{"data.s3.example.", "s3.example", "data", true},      // a fully qualified host
		{"data.s3.example:9000", "s3.example.", "data", true}, // a port, a qualified domain
		{"Data.S3.Example", "s3.example", "data", true},
		{"a.b.s3.example", "s3.example", "a.b", true},
		{"s3.example", "s3.example", "", false}, // the endpoint itself: path style
		{"xs3.example", "s3.example", "", false},
		{"data.s3.example", "", "", false},
		{"127.0.0.1:9000", "s3.example", "", false},
	} {
		b, ok := VirtualHostBucket(tc.host, tc.domain)
		if b != tc.bucket || ok != tc.ok {
			t.Errorf("VirtualHostBucket(%q, %q) = %q, %v; want %q, %v", tc.host, tc.domain, b, ok, tc.bucket, tc.ok)
		}
	}
}

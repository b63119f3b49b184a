package gateway

import (
	"net/http/httptest"
	"testing"
)

func TestRoute(t *testing.T) {
	s := &Server{}
	for _, tc := range []struct{ method, target, copySource, op string }{
		{"GET", "/", "", "ListBuckets"},
		{"PUT", "/b", "", "CreateBucket"},
		{"PUT", "/b?x-id=CreateBucket", "", "CreateBucket"},
		{"PUT", "/b?versioning", "", "PutBucketVersioning"},
		{"GET", "/b/k?versionId=v1", "", "GetObjectVersion"},
		{"DELETE", "/b/k?versionId=v1", "", "DeleteObjectVersion"},
		{"GET", "/b/k?versionId=v1&tagging", "", "GET-version"},
		{"HEAD", "/b", "", "HeadBucket"},
		{"DELETE", "/b", "", "DeleteBucket"},
		{"GET", "/b?location", "", "GetBucketLocation"},
		{"GET", "/b?versioning", "", "GetBucketVersioning"},
		{"GET", "/b?uploads", "", "ListMultipartUploads"},
		{"GET", "/b?list-type=2&prefix=a", "", "ListObjectsV2"},
		{"GET", "/b?prefix=a&marker=x", "", "ListObjects"},
		{"GET", "/b?inventory", "", "GET-inventory"},
		{"GET", "/b?somethingnew", "", "GetBucket-unknown"},
		{"POST", "/b?delete", "", "DeleteObjects"},
		{"GET", "/b/k", "", "GetObject"},
		{"GET", "/b/k?x-id=GetObject", "", "GetObject"},
		{"GET", "/b/k?uploadId=u", "", "ListParts"},
		{"GET", "/b/k?tagging", "", "GetObjectTagging"},
		{"PUT", "/b/k?tagging", "", "PutObjectTagging"},
		{"DELETE", "/b/k?tagging", "", "DeleteObjectTagging"},
		{"POST", "/b/k?tagging", "", "Unsupported"},
		{"GET", "/b/k?tagging&versionId=v1", "", "GET-version"},
		{"GET", "/b?tagging", "", "GetBucketTagging"},
		{"PUT", "/b?tagging", "", "PutBucketTagging"},
		{"DELETE", "/b?tagging", "", "DeleteBucketTagging"},
		{"GET", "/b/k?attributes", "", "GetObjectAttributes"},
		{"HEAD", "/b/k?attributes", "", "Unsupported"},
		{"GET", "/b/k?retention", "", "GetObjectRetention"},
		{"GET", "/b/k?encryption", "", "GET-encryption"},
		{"GET", "/b/k?acl", "", "GetObjectAcl"},
		{"HEAD", "/b/k", "", "HeadObject"},
		{"PUT", "/b/k", "", "PutObject"},
		{"PUT", "/b/k", "/b/src", "CopyObject"},
		{"PUT", "/b/k?partNumber=1&uploadId=u", "", "UploadPart"},
		{"PUT", "/b/k?partNumber=1&uploadId=u", "/b/src", "UploadPartCopy"},
		{"DELETE", "/b/k", "", "DeleteObject"},
		{"DELETE", "/b/k?uploadId=u", "", "AbortMultipartUpload"},
		{"POST", "/b/k?uploads", "", "CreateMultipartUpload"},
		{"POST", "/b/k?uploadId=u", "", "CompleteMultipartUpload"},
		{"POST", "/b/k?select&select-type=2", "", "POST-select"},
		{"PATCH", "/b/k", "", "Unsupported"},
		{"OPTIONS", "/b/k", "", "PreflightCors"},
		{"OPTIONS", "/b?tagging", "", "PreflightCors"},
		{"OPTIONS", "/", "", "Unsupported"},
		{"GET", "/b?cors", "", "GetBucketCors"},
		{"PUT", "/b?cors", "", "PutBucketCors"},
		{"DELETE", "/b?cors", "", "DeleteBucketCors"},
		{"POST", "/b?cors", "", "Unsupported"},
		{"GET", "/b/k?cors", "", "Unsupported"},
	} {
		r := httptest.NewRequest(tc.method, tc.target, nil)
		if tc.copySource != "" {
			r.Header.Set("x-amz-copy-source", tc.copySource)
		}
		bucket, key := s.resolve(r)
		if op, _ := s.route(r, r.URL.Query(), bucket, key); op != tc.op {
			t.Errorf("%s %s: op %s, want %s", tc.method, tc.target, op, tc.op)
		}
	}
}

func TestVirtualHostedResolve(t *testing.T) {
	s := &Server{cfg: Config{Domain: "s3.example.test"}}
	for _, tc := range []struct{ host, path, bucket, key string }{
		{"b1.s3.example.test", "/k/x", "b1", "k/x"},
		{"b1.s3.example.test:9000", "/", "b1", ""},
		{"s3.example.test", "/b2/k", "b2", "k"},
		{"127.0.0.1:9000", "/b3/k", "b3", "k"},
	} {
		r := httptest.NewRequest("GET", tc.path, nil)
		r.Host = tc.host
		if b, k := s.resolve(r); b != tc.bucket || k != tc.key {
			t.Errorf("%s%s: %q %q, want %q %q", tc.host, tc.path, b, k, tc.bucket, tc.key)
		}
	}
}

package gateway_test

import (
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/gateway/gatewaytest"
)

// Listing a bucket of another region while its home region is down
// answers 503 ServiceUnavailable naming the region and what to do, not
// 500 InternalError; the dial error (the region's address) stays in the
// log (issue 37 item 5).
func TestHomeRegionUnreachableIs503(t *testing.T) {
	e := newEnv(t)
	e.bucket("remote-bkt")
	dial := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 9, 8, 7), Port: 9000}, Err: syscall.ECONNREFUSED}
	e.fake.Fail(gatewaytest.OpList, &backend.RegionUnreachableError{Bucket: "remote-bkt", Region: "eu-west", Err: dial})
	_, err := e.root.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("remote-bkt")})
	wantErr(t, err, "ServiceUnavailable", 503)
	var ae smithy.APIError
	errors.As(err, &ae)
	if msg := ae.ErrorMessage(); !strings.Contains(msg, "home in region eu-west, which cannot be reached now") || strings.Contains(msg, "10.9.8.7") {
		t.Fatalf("message %q: want the region named, not its address", msg)
	}
}

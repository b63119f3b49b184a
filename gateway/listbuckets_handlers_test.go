package gateway_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/gateway/gatewaytest"
)

// TestListBucketsPaged drives the SDK's ListBuckets paginator over 2,500
// buckets: every bucket once, in order, in pages of max-buckets.
func TestListBucketsPaged(t *testing.T) {
	e := newEnv(t)
	var want []string
	for i := range 2500 {
		name := fmt.Sprintf("b%05d", i)
		e.bucket(name)
		want = append(want, name)
	}

	// No paging parameter: every bucket in one answer, no token.
	out, err := e.root.ListBuckets(ctx, &s3.ListBucketsInput{})
	noErr(t, err)
	if got := bucketNames(out); !slices.Equal(got, want) || out.ContinuationToken != nil {
		t.Fatalf("unpaged: %d buckets, token %v; want all %d, no token", len(got), out.ContinuationToken, len(want))
	}

	for _, max := range []int32{1000, 7, 2500, 10000} {
		var got []string
		pages := 0
		p := s3.NewListBucketsPaginator(e.root, &s3.ListBucketsInput{MaxBuckets: aws.Int32(max)})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			noErr(t, err)
			if n := int32(len(page.Buckets)); n > max || (n < max && page.ContinuationToken != nil) {
				t.Fatalf("max-buckets %d: page of %d, token %v", max, n, page.ContinuationToken)
			}
			got = append(got, bucketNames(page)...)
			pages++
		}
		if wantPages := (2500 + int(max) - 1) / int(max); !slices.Equal(got, want) || pages != wantPages {
			t.Errorf("max-buckets %d: %d buckets in %d pages, want %d in %d", max, len(got), pages, len(want), wantPages)
		}
	}

	// prefix pages within the prefix and echoes it.
	var got []string
	p := s3.NewListBucketsPaginator(e.root, &s3.ListBucketsInput{Prefix: aws.String("b012"), MaxBuckets: aws.Int32(30)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		noErr(t, err)
		if aws.ToString(page.Prefix) != "b012" {
			t.Errorf("prefix echoed as %q", aws.ToString(page.Prefix))
		}
		got = append(got, bucketNames(page)...)
	}
	if !slices.Equal(got, want[1200:1300]) {
		t.Errorf("prefix b012: %d buckets %q..., want b01200..b01299", len(got), got[:min(3, len(got))])
	}

	// A prefix without max-buckets pages at S3's default of 10,000.
	out, err = e.root.ListBuckets(ctx, &s3.ListBucketsInput{Prefix: aws.String("b02")})
	noErr(t, err)
	if got := bucketNames(out); !slices.Equal(got, want[2000:]) || out.ContinuationToken != nil {
		t.Errorf("prefix b02: %d buckets, token %v", len(got), out.ContinuationToken)
	}

	// Another region's buckets: none here.
	out, err = e.root.ListBuckets(ctx, &s3.ListBucketsInput{BucketRegion: aws.String("eu-west-1")})
	noErr(t, err)
	if len(out.Buckets) != 0 {
		t.Errorf("bucket-region eu-west-1 lists %d buckets, want 0", len(out.Buckets))
	}
	out, err = e.root.ListBuckets(ctx, &s3.ListBucketsInput{BucketRegion: aws.String("us-east-1"), MaxBuckets: aws.Int32(3)})
	noErr(t, err)
	if got := bucketNames(out); !slices.Equal(got, want[:3]) {
		t.Errorf("bucket-region us-east-1: %q", got)
	}
}

func TestListBucketsBadParams(t *testing.T) {
	e := newEnv(t)
	e.bucket("alpha")
	for _, max := range []int32{0, -1, 10001} {
		_, err := e.root.ListBuckets(ctx, &s3.ListBucketsInput{MaxBuckets: aws.Int32(max)})
		wantErr(t, err, "InvalidArgument", http.StatusBadRequest)
	}
	for _, q := range []string{"max-buckets=ten", "max-buckets=", "continuation-token=%25%25%25"} {
		resp, body := e.rootSigned("GET", "/?"+q, nil, nil)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "<Code>InvalidArgument</Code>") {
			t.Errorf("GET /?%s: %d %s, want 400 InvalidArgument", q, resp.StatusCode, body)
		}
	}
}

// TestListBucketsCLIs lists 2,500 buckets with Debian's aws CLI v2 and
// boto3 at their defaults (both send ListBuckets without max-buckets, as
// their models predate it) and checks that every bucket comes back.
func TestListBucketsCLIs(t *testing.T) {
	awsBin, py := "/usr/bin/aws", "/usr/bin/python3"
	for _, bin := range []string{awsBin, py} {
		if _, err := os.Stat(bin); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is missing (scripts/install-test-deps.sh installs it)", bin)
			}
			t.Skipf("%s is not installed (scripts/install-test-deps.sh installs it)", bin)
		}
	}
	e := newEnv(t)
	const n = 2500
	for i := range n {
		e.bucket(fmt.Sprintf("b%05d", i))
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(),
		"AWS_ACCESS_KEY_ID=" + gatewaytest.RootAccessKey, "AWS_SECRET_ACCESS_KEY=" + gatewaytest.RootSecretKey,
		"AWS_DEFAULT_REGION=us-east-1", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"AWS_PAGER=", "AWS_EC2_METADATA_DISABLED=true"}
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Env = env
		out, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("%s %q: %v: %s", name, args, err, stderr)
		}
		return string(out)
	}
	count := func(out string) int { return strings.Count(out, "b0") }

	if got := count(run(awsBin, "--endpoint-url", e.url, "s3api", "list-buckets", "--query", "Buckets[].Name", "--output", "text")); got != n {
		t.Errorf("aws s3api list-buckets: %d buckets, want %d", got, n)
	}
	if got := count(run(awsBin, "--endpoint-url", e.url, "s3", "ls")); got != n {
		t.Errorf("aws s3 ls: %d buckets, want %d", got, n)
	}
	script := `import boto3,sys
c = boto3.client("s3", endpoint_url=sys.argv[1])
print("\n".join(b["Name"] for b in c.list_buckets()["Buckets"]))`
	if got := count(run(py, "-c", script, e.url)); got != n {
		t.Errorf("boto3 list_buckets: %d buckets, want %d", got, n)
	}
}

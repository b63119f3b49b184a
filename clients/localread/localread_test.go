package localread_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"golang.org/x/sys/unix"

	"github.com/fedgate/fedgate/clients/localread"
	"github.com/fedgate/fedgate/federation"
	"github.com/fedgate/fedgate/gateway"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/regionstate"
	"github.com/fedgate/fedgate/store"
	"github.com/fedgate/fedgate/store/posix"
)

const ak, sk = "ROOTACCESSKEY1234567", "root-secret-key-0123456789abcdefghijklm"

// node is a whole fedgate node in the test's process: its default store a
// posix store, S3 on TCP and the short-circuit read on a Unix socket.
func node(t *testing.T) (endpoint, socket string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rs, err := regionstate.Open(ctx, regionstate.Config{NodeID: "n1", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	local, err := posix.New("local", policies.Location{Cloud: "onprem", Region: "test"}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ns, err := federation.New(federation.Config{State: rs, Stores: map[string]store.Store{"local": local},
		DefaultStore: "local", Policy: &policies.Policy{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.Users().EnsureRoot(ctx, federation.Credentials{AccessKey: ak, SecretKey: sk}); err != nil {
		t.Fatal(err)
	}
	srv, err := gateway.New(gateway.Config{Backend: ns.Backend()})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	socket = filepath.Join(t.TempDir(), "s3.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	us := &http.Server{Handler: srv}
	go us.Serve(ln)
	t.Cleanup(func() { us.Close() })
	return hs.URL, socket
}

// The descriptors a short-circuit read hands over hold the object's bytes
// and nothing else: a client with GetObject that preads past the object's
// end in them reads nothing, not the ACL and tags fedgate keeps with the
// object (issue 35; a posix store's file used to carry them in a trailer).
func TestDescriptorsHoldOnlyTheObject(t *testing.T) {
	endpoint, socket := node(t)
	ctx := t.Context()
	c := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(ak, sk, "")})
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("bkt")}); err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("object bytes "), 1000)
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("obj"), Body: bytes.NewReader(body),
		ACL: types.ObjectCannedACLPublicRead, Tagging: aws.String("secret=SECRETTAGVALUE"),
		Metadata: map[string]string{"note": "SECRETMETAVALUE"}}); err != nil {
		t.Fatal(err)
	}
	lc := &localread.Client{Socket: socket, Endpoint: endpoint, AccessKey: ak, SecretKey: sk}
	f, err := lc.OpenLocal(ctx, "bkt", "obj")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Size() != int64(len(body)) {
		t.Fatalf("size %d, want %d", f.Size(), len(body))
	}
	exts, files := f.Extents()
	if len(exts) == 0 || len(files) == 0 {
		t.Fatalf("%d extents in %d files", len(exts), len(files))
	}
	got := make([]byte, len(body))
	if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("ReadAt: %v, bytes equal %v", err, bytes.Equal(got, body))
	}
	for i, fd := range files {
		// Everything the descriptor holds, from 0 to well past its end.
		all := make([]byte, 0, len(body)+1<<20)
		for off := int64(0); ; {
			buf := make([]byte, 64<<10)
			n, err := unix.Pread(int(fd.Fd()), buf, off)
			if n <= 0 || err != nil {
				break
			}
			all = append(all, buf[:n]...)
			off += int64(n)
		}
		end := exts[0].FileOffset - exts[0].ObjectOffset + int64(len(body))
		if n, _ := unix.Pread(int(fd.Fd()), make([]byte, 4096), end); n != 0 {
			t.Errorf("descriptor %d: pread past the object's end gave %d bytes", i, n)
		}
		for _, secret := range []string{"SECRETTAGVALUE", "SECRETMETAVALUE", "AllUsers", "acl", "etag"} {
			if strings.Contains(strings.ToLower(string(all)), strings.ToLower(secret)) {
				t.Errorf("descriptor %d (%d bytes) shows %q", i, len(all), secret)
			}
		}
		if !bytes.Equal(all, body) {
			t.Errorf("descriptor %d holds %d bytes, want the object's %d alone", i, len(all), len(body))
		}
	}
	// The tags and ACL are there, for those allowed to read them.
	tags, err := c.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String("bkt"), Key: aws.String("obj")})
	if err != nil || len(tags.TagSet) != 1 || aws.ToString(tags.TagSet[0].Value) != "SECRETTAGVALUE" {
		t.Errorf("GetObjectTagging = %+v, %v", tags, err)
	}
}

package s3

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/federation/store"
)

func randBytes(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)})
	r.Read(b)
	return b
}

func md5hex(b []byte) string {
	h := md5.Sum(b)
	return hex.EncodeToString(h[:])
}

// onlyReader hides every method but Read.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

var errBoom = errors.New("boom")

// failAtEOF yields r's bytes, then errBoom in place of io.EOF.
type failAtEOF struct{ r io.Reader }

func (f failAtEOF) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		err = errBoom
	}
	return n, err
}

func readAll(t *testing.T, s *Store, key string) []byte {
	t.Helper()
	rc, err := s.ReadRange(t.Context(), key, 0, -1, "")
	if err != nil {
		t.Fatalf("ReadRange(%q): %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkNoStaging asserts that no staging object or open upload is left.
func checkNoStaging(t *testing.T, s *Store) {
	t.Helper()
	ctx := t.Context()
	objs, err := s.client.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: aws.String(StagingPrefix)})
	if err != nil {
		t.Fatal(err)
	}
	ups, err := s.client.ListMultipartUploads(ctx, &awss3.ListMultipartUploadsInput{Bucket: &s.bucket, Prefix: aws.String(StagingPrefix)})
	if err != nil {
		t.Fatal(err)
	}
	if len(objs.Contents) != 0 || len(ups.Uploads) != 0 {
		t.Errorf("left behind: %d staging objects, %d staging uploads", len(objs.Contents), len(ups.Uploads))
	}
}

// TestLargePut drives the staging-upload-and-copy path with 5 MiB parts:
// known and unknown sizes, a size on a part boundary, full metadata.
func TestLargePut(t *testing.T) {
	s := newMinIO(t, func(c *Config) { c.PartSize = 5 << 20; c.Concurrency = 3 })
	ctx := t.Context()
	md := store.Metadata{
		ContentType: "application/x-ckpt", CacheControl: "no-cache", Expires: "soon",
		User:      map[string]string{"run-id": "r-1", "fedgate-etag": "user's own"},
		Checksums: map[string]string{"SHA256": "c2hh"},
	}
	for _, tc := range []struct {
		name  string
		n     int
		known bool
	}{
		{"known", 11<<20 + 5, true}, {"unknown", 11<<20 + 5, false},
		{"unknown-boundary", 10 << 20, false}, {"known-boundary", 15 << 20, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := randBytes(uint64(tc.n), tc.n)
			size := int64(-1)
			if tc.known {
				size = int64(tc.n)
			}
			late := 0
			opts := store.PutOptions{Metadata: md, LateChecksums: func() map[string]string {
				late++
				return map[string]string{"CRC32C": "Y3Jj"}
			}}
			info, err := s.Put(ctx, "big/"+tc.name, onlyReader{bytes.NewReader(b)}, size, opts)
			if err != nil {
				t.Fatal(err)
			}
			if info.ETag != md5hex(b) || info.Size != int64(tc.n) || info.Validator == "" || late != 1 {
				t.Errorf("Put = %+v (LateChecksums called %d times); want ETag %s, size %d", info, late, md5hex(b), tc.n)
			}
			st, err := s.Stat(ctx, "big/"+tc.name)
			if err != nil {
				t.Fatal(err)
			}
			if st.ETag != info.ETag || st.Validator != info.Validator || st.Size != info.Size {
				t.Errorf("Stat = %+v, Put said %+v", st, info)
			}
			if st.ContentType != md.ContentType || st.Expires != "soon" || st.User["run-id"] != "r-1" ||
				st.User["fedgate-etag"] != "user's own" || st.Checksums["SHA256"] != "c2hh" || st.Checksums["CRC32C"] != "Y3Jj" {
				t.Errorf("Stat metadata = %+v", st.Metadata)
			}
			if got := readAll(t, s, "big/"+tc.name); !bytes.Equal(got, b) {
				t.Errorf("read back %d bytes (md5 %s), want %d", len(got), md5hex(got), len(b))
			}
		})
	}
	checkNoStaging(t, s)
}

// TestLargePutFailures: a failing, short, long or canceled large body and
// failed conditions leave the old object and no staging data.
func TestLargePutFailures(t *testing.T) {
	s := newMinIO(t, func(c *Config) { c.PartSize = 5 << 20 })
	ctx := t.Context()
	old := randBytes(1, 1000)
	before, err := s.Put(ctx, "k", bytes.NewReader(old), int64(len(old)), store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b := randBytes(2, 12<<20)
	for name, put := range map[string]func() error{
		"fail at EOF, known size": func() error {
			_, err := s.Put(ctx, "k", failAtEOF{bytes.NewReader(b)}, int64(len(b)), store.PutOptions{})
			return wantIs(err, errBoom)
		},
		"fail at EOF, unknown size": func() error {
			_, err := s.Put(ctx, "k", failAtEOF{bytes.NewReader(b)}, -1, store.PutOptions{})
			return wantIs(err, errBoom)
		},
		"short": func() error {
			_, err := s.Put(ctx, "k", bytes.NewReader(b), int64(len(b))+1, store.PutOptions{})
			return wantIs(err, io.ErrUnexpectedEOF)
		},
		"long": func() error {
			_, err := s.Put(ctx, "k", bytes.NewReader(b), int64(len(b))-1, store.PutOptions{})
			return wantIs(err, errTooLong)
		},
		"IfNoneMatch": func() error {
			_, err := s.Put(ctx, "k", bytes.NewReader(b), int64(len(b)), store.PutOptions{IfNoneMatch: true})
			return wantIs(err, store.ErrPreconditionFailed)
		},
		"stale IfMatch": func() error {
			_, err := s.Put(ctx, "k", bytes.NewReader(b), -1, store.PutOptions{IfMatch: "0123456789abcdef0123456789abcdef"})
			return wantIs(err, store.ErrPreconditionFailed)
		},
		"IfMatch on a missing key": func() error {
			_, err := s.Put(ctx, "missing", bytes.NewReader(b), -1, store.PutOptions{IfMatch: before.Validator})
			return wantIs(err, store.ErrPreconditionFailed)
		},
	} {
		if err := put(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if got := readAll(t, s, "k"); !bytes.Equal(got, old) {
		t.Errorf("the old object changed: %d bytes", len(got))
	}
	if _, err := s.Stat(ctx, "missing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Stat(missing) = %v", err)
	}
	// A large conditional write that holds.
	info, err := s.Put(ctx, "k", bytes.NewReader(b), int64(len(b)), store.PutOptions{IfMatch: before.Validator})
	if err != nil || info.ETag != md5hex(b) {
		t.Errorf("IfMatch large Put = %+v, %v", info, err)
	}
	checkNoStaging(t, s)
}

func wantIs(err, target error) error {
	if !errors.Is(err, target) {
		return errors.Join(errors.New("want "+target.Error()), err)
	}
	return nil
}

// TestCopyConditions: the final copy of a large Put is conditional, so a
// key created by someone else after the early check is not overwritten.
func TestCopyConditions(t *testing.T) {
	s := newMinIO(t, nil)
	ctx := t.Context()
	src, err := s.Put(ctx, "src", strings.NewReader("source"), 6, store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dst, err := s.Put(ctx, "dst", strings.NewReader("target"), 6, store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h, _ := toHeaders(store.Metadata{}, src.ETag, nil)
	for _, opts := range []store.PutOptions{{IfNoneMatch: true}, {IfMatch: src.Validator}} {
		_, _, err := s.copyObject(ctx, "src", string(src.Validator), 6, "dst", h, opts)
		if !errors.Is(err, store.ErrPreconditionFailed) {
			t.Errorf("copy over dst with %+v: %v, want ErrPreconditionFailed", opts, err)
		}
	}
	if _, _, err := s.copyObject(ctx, "src", string(src.Validator), 6, "dst", h, store.PutOptions{IfMatch: dst.Validator}); err != nil {
		t.Errorf("copy with dst's validator: %v", err)
	}
	if got := readAll(t, s, "dst"); string(got) != "source" {
		t.Errorf("dst = %q after the copy", got)
	}
	// A changed source fails the copy, plain or multipart.
	for _, opts := range []store.PutOptions{{}, {IfNoneMatch: true}} {
		if _, _, err := s.copyObject(ctx, "src", md5hex([]byte("other")), 6, "new", h, opts); !errors.Is(err, store.ErrPreconditionFailed) {
			t.Errorf("copy of a changed source (%+v): %v, want ErrPreconditionFailed", opts, err)
		}
	}
	if _, err := s.Stat(ctx, "new"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("failed copies made an object: %v", err)
	}
	ups, err := s.client.ListMultipartUploads(ctx, &awss3.ListMultipartUploadsInput{Bucket: &s.bucket})
	if err != nil || len(ups.Uploads) != 0 {
		t.Errorf("failed copies left %v uploads (%v)", len(ups.Uploads), err)
	}
}

// TestMemoryBound: with room for one part only, large Puts still finish.
func TestMemoryBound(t *testing.T) {
	s := newMinIO(t, func(c *Config) { c.PartSize = 5 << 20; c.MaxBufferMemory = 5 << 20; c.Concurrency = 8 })
	b := randBytes(3, 16<<20)
	done := make(chan error, 3)
	for i := range 3 {
		go func() {
			_, err := s.Put(t.Context(), "m/"+string(rune('a'+i)), onlyReader{bytes.NewReader(b)}, -1, store.PutOptions{})
			done <- err
		}()
	}
	for range 3 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
	if got := readAll(t, s, "m/b"); !bytes.Equal(got, b) {
		t.Errorf("m/b: %d bytes", len(got))
	}
}

package s3

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/internal/testenv"
	"github.com/fedgate/fedgate/store"
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

// checkNoStaging asserts that no staging object and no open upload is
// left.
func checkNoStaging(t *testing.T, s *Store) {
	t.Helper()
	ctx := t.Context()
	objs, err := s.client.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: aws.String(StagingPrefix)})
	if err != nil {
		t.Fatal(err)
	}
	ups, err := s.client.ListMultipartUploads(ctx, &awss3.ListMultipartUploadsInput{Bucket: &s.bucket})
	if err != nil {
		t.Fatal(err)
	}
	if len(objs.Contents) != 0 || len(ups.Uploads) != 0 {
		t.Errorf("left behind: %d staging objects, %d uploads", len(objs.Contents), len(ups.Uploads))
	}
}

// sidecars lists the raw sidecar objects of the store's bucket.
func sidecars(t *testing.T, s *Store) []string {
	t.Helper()
	out, err := s.client.ListObjectsV2(t.Context(), &awss3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: aws.String(MetaPrefix)})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	return keys
}

// TestLargePutOneUpload: a large Put is one multipart upload straight to
// its key (the origin writes the bytes once: no staging object, no
// server-side copy), a plain S3 client reads the object with its metadata,
// and the MD5 ETag comes back through the sidecar; overwriting it in an
// unversioned bucket replaces the sidecar.
func TestLargePutOneUpload(t *testing.T) {
	var rc *testenv.S3Calls
	s := newMinIO(t, func(c *Config) {
		c.PartSize = 5 << 20
		rc = testenv.CountS3Calls(t, c.Endpoint)
		c.Endpoint = rc.URL
	})
	ctx := t.Context()
	md := store.Metadata{ContentType: "application/x-ckpt", User: map[string]string{"run-id": "r-7"}}
	var etags []string
	for i, n := range []int{16<<20 + 3, 11 << 20} {
		b := randBytes(uint64(40+i), n)
		rc.Take()
		info, err := s.Put(ctx, "ckpt/model.pt", bytes.NewReader(b), int64(n), store.PutOptions{Metadata: md,
			LateChecksums: func() map[string]string { return map[string]string{"CRC32": "Y3JjMzI="} }})
		if err != nil {
			t.Fatal(err)
		}
		parts := (n + 5<<20 - 1) / (5 << 20)
		got := rc.Take()
		want := map[string]int{"HEAD": 1, "create-upload": 1, "upload-part": parts, "PUT": 1, "complete": 1}
		if i == 1 {
			want["DELETE"] = 1 // the replaced object's sidecar
		}
		if !maps.Equal(got, want) {
			t.Errorf("put %d: requests %v, want %v", i, got, want)
		}
		if info.ETag != md5hex(b) || !strings.HasSuffix(string(info.Validator), fmt.Sprintf("-%d", parts)) {
			t.Errorf("put %d = %+v; want ETag %s and a multipart validator", i, info, md5hex(b))
		}
		st, err := s.Stat(ctx, "ckpt/model.pt")
		if err != nil {
			t.Fatal(err)
		}
		if st.ETag != info.ETag || st.Validator != info.Validator || st.Checksums["CRC32"] != "Y3JjMzI=" ||
			st.ContentType != md.ContentType || st.User["run-id"] != "r-7" || len(st.User) != 1 {
			t.Errorf("Stat = %+v, Put said %+v", st, info)
		}
		// What any S3 client sees: the bytes, the metadata, S3's own ETag.
		raw, err := s.client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &s.bucket, Key: aws.String("ckpt/model.pt")})
		if err != nil {
			t.Fatal(err)
		}
		if aws.ToString(raw.ContentType) != md.ContentType || raw.Metadata["run-id"] != "r-7" ||
			unquoteETag(aws.ToString(raw.ETag)) != string(info.Validator) {
			t.Errorf("plain HEAD = type %q, metadata %v, ETag %s", aws.ToString(raw.ContentType), raw.Metadata, aws.ToString(raw.ETag))
		}
		if got := readAll(t, s, "ckpt/model.pt"); !bytes.Equal(got, b) {
			t.Errorf("put %d: read back %d bytes", i, len(got))
		}
		etags = append(etags, info.ETag)
	}
	if sc := sidecars(t, s); len(sc) != 1 {
		t.Errorf("sidecars after an overwrite: %q, want one", sc)
	}
	// The listing shows the object alone, with S3's ETag (documented).
	var keys []string
	for e, err := range s.List(ctx, store.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, e.Key)
	}
	if !slicesEqual(keys, []string{"ckpt/model.pt"}) {
		t.Errorf("List = %q", keys)
	}
	// The sidecar gone (a bucket cleaned by hand): S3's ETag, still readable.
	for _, k := range sidecars(t, s) {
		s.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &s.bucket, Key: &k})
	}
	st, err := s.Stat(ctx, "ckpt/model.pt")
	if err != nil || st.ETag != string(st.Validator) || st.ETag == etags[1] {
		t.Errorf("Stat without its sidecar = %+v, %v; want S3's ETag", st, err)
	}
}

// TestLargePut drives the multipart-and-sidecar path with 5 MiB parts:
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

// Package versiontest is a conformance suite for S3 object versioning, run
// from the client side (aws-sdk-go-v2) against any S3 endpoint: fedgate's
// bucket kinds, MinIO, AWS. Each check follows S3's documented behaviour
// (the S3 user guide's versioning chapters and the GetObject, HeadObject,
// DeleteObject, DeleteObjects, ListObjectVersions, CopyObject and PutObject
// API reference), not one implementation's.
//
// A target's test calls Run with a function that makes a fresh, empty bucket
// for each subtest:
//
//	func TestVersioning(t *testing.T) {
//		versiontest.Run(t, func(t *testing.T) versiontest.Target {
//			name := createBucket(t)
//			return versiontest.Target{Client: c, Bucket: name, Enable: func(t *testing.T) { enable(t, name) }}
//		})
//	}
//
// Every subtest is a capability (its name); some subtests also run optional
// checks as nested subtests named by their own capability. A target declares
// what it does not do in Target.Skip, each with the reason; nothing else is
// skipped. Use [Subtests] to size a fixed pool of buckets (one per subtest).
package versiontest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// Target is one bucket the suite runs a subtest on.
type Target struct {
	Client *s3.Client
	// Bucket is empty; versioning is not yet enabled (or already enabled:
	// see Enable).
	Bucket string
	// Enable turns versioning on (PutBucketVersioning Enabled); nil when the
	// bucket is already versioned (a mounted origin). Without it the
	// pre-existing capability is skipped.
	Enable func(t *testing.T)
	// Skip lists capability names (subtest names, or the names of the
	// optional checks inside them) this target does not have, each with
	// the reason (e.g. "suspend": "managed at the origin").
	Skip map[string]string
}

// The capabilities: each subtest's name, and the optional checks nested in
// a subtest (a failure or a skip of one leaves the rest of its subtest).
const (
	CapVersions         = "versions"              // PUT/GET/HEAD of versions by id, ranged GET of an old one
	CapBucketVersioning = "get-bucket-versioning" // └ GetBucketVersioning says Enabled

	CapDeleteMarker     = "delete-marker"      // DELETE without an id adds a marker; removing it restores
	CapMarkerByID       = "marker-by-id-405"   // └ GET/HEAD of a marker's id: 405 MethodNotAllowed
	CapMarkerOverMarker = "marker-over-marker" // └ a DELETE of a key under a marker adds another
	CapDeleteAbsent     = "delete-absent-key"  // └ a DELETE of a never-written key adds a marker

	CapDeleteVersion = "delete-version" // DELETE by id removes a version for good

	CapMissing     = "missing-version"      // ids that are not there: 404 NoSuchVersion, DELETE 204
	CapMalformedID = "malformed-version-id" // └ a malformed id: 400 InvalidArgument or 404 NoSuchVersion

	CapList = "list-versions" // ListObjectVersions order, flags, prefix, delimiter

	CapListPaged      = "list-versions-paged" // MaxKeys pages through the markers are the whole listing
	CapPagedIsLatest  = "paged-is-latest"     // └ IsLatest right on every page
	CapPagedDelimiter = "paged-delimiter"     // └ paging with a delimiter

	CapListObjects  = "list-objects-hides-markers" // ListObjectsV2 leaves out keys under delete markers
	CapHiddenPrefix = "hidden-prefix"              // └ and common prefixes holding only such keys

	CapSuspend         = "suspend"                  // Suspended: the null version and null markers
	CapSuspendedDelete = "suspended-delete-headers" // └ DELETE answers x-amz-delete-marker: true, x-amz-version-id: null

	CapPreExisting = "pre-existing"        // objects from before versioning are the null version
	CapRemoveNull  = "remove-null-version" // └ DELETE versionId=null removes such an object for good

	CapCopy           = "copy-version"     // CopyObject from ?versionId= makes a new version
	CapCopyFromMarker = "copy-from-marker" // └ a marker as the copy source: 404 / 400

	CapMultipart = "multipart" // a completed upload is a new version

	CapDeleteObjects    = "delete-objects"              // DeleteObjects with and without version ids
	CapDeleteObjectsDM  = "delete-objects-marker-flags" // └ a removed marker is reported as one
	CapDeleteObjectsGap = "delete-objects-missing"      // └ a missing version id is Deleted, not an error

	CapConditional     = "conditional-write"       // If-None-Match / If-Match against the newest version
	CapConditionalOver = "conditional-over-marker" // └ a delete marker is no object
)

type subtest struct {
	name   string
	f      func(t *testing.T, tg Target)
	nested []string
}

var subtests = []subtest{
	{CapVersions, testVersions, []string{CapBucketVersioning}},
	{CapDeleteMarker, testDeleteMarker, []string{CapMarkerByID, CapMarkerOverMarker, CapDeleteAbsent}},
	{CapDeleteVersion, testDeleteVersion, nil},
	{CapMissing, testMissingVersion, []string{CapMalformedID}},
	{CapList, testList, nil},
	{CapListPaged, testListPaged, []string{CapPagedIsLatest, CapPagedDelimiter}},
	{CapListObjects, testListObjects, []string{CapHiddenPrefix}},
	{CapSuspend, testSuspend, []string{CapSuspendedDelete}},
	{CapPreExisting, testPreExisting, []string{CapRemoveNull}},
	{CapCopy, testCopy, []string{CapCopyFromMarker}},
	{CapMultipart, testMultipart, nil},
	{CapDeleteObjects, testDeleteObjects, []string{CapDeleteObjectsDM, CapDeleteObjectsGap}},
	{CapConditional, testConditional, []string{CapConditionalOver}},
}

// isCapability reports a name Target.Skip may use.
func isCapability(name string) bool {
	for _, st := range subtests {
		if st.name == name || slices.Contains(st.nested, name) {
			return true
		}
	}
	return false
}

// Subtests names Run's subtests, in order: the last element of the t.Name()
// newBucket is called with.
func Subtests() []string {
	names := make([]string, len(subtests))
	for i, s := range subtests {
		names[i] = s.name
	}
	return names
}

// Run runs the suite, one subtest per behaviour, each on a fresh bucket
// from newBucket.
func Run(t *testing.T, newBucket func(t *testing.T) Target) {
	for _, st := range subtests {
		t.Run(st.name, func(t *testing.T) {
			tg := newBucket(t)
			for c := range tg.Skip {
				if !isCapability(c) {
					t.Fatalf("Target.Skip names %q, which is no capability of the suite", c)
				}
			}
			if why, ok := tg.Skip[st.name]; ok {
				t.Skipf("%s: %s", st.name, why)
			}
			if st.name == CapPreExisting && tg.Enable == nil {
				t.Skip("pre-existing: the bucket is versioned from the start")
			}
			st.f(t, tg)
		})
	}
}

// optional runs an optional check as a nested subtest named by its
// capability, unless the target skips it.
func (tg Target) optional(t *testing.T, capability string, f func(t *testing.T)) {
	t.Helper()
	t.Run(capability, func(t *testing.T) {
		if why, ok := tg.Skip[capability]; ok {
			t.Skipf("%s: %s", capability, why)
		}
		f(t)
	})
}

func (tg Target) enable(t *testing.T) {
	t.Helper()
	if tg.Enable != nil {
		tg.Enable(t)
	}
}

func (tg Target) setVersioning(t *testing.T, status types.BucketVersioningStatus) {
	t.Helper()
	_, err := tg.Client.PutBucketVersioning(ctx(t), &s3.PutBucketVersioningInput{Bucket: &tg.Bucket,
		VersioningConfiguration: &types.VersioningConfiguration{Status: status}})
	if err != nil {
		t.Fatalf("PutBucketVersioning %s: %v", status, err)
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// data returns n deterministic pseudo-random bytes named by name.
func data(name string, n int) []byte {
	r := rand.NewChaCha8(sha256.Sum256([]byte(name)))
	b := make([]byte, n)
	_, _ = r.Read(b)
	return b
}

func (tg Target) tryPut(t *testing.T, key string, body []byte, opts ...func(*s3.PutObjectInput)) (*s3.PutObjectOutput, error) {
	t.Helper()
	in := &s3.PutObjectInput{Bucket: &tg.Bucket, Key: &key, Body: bytes.NewReader(body)}
	for _, o := range opts {
		o(in)
	}
	return tg.Client.PutObject(ctx(t), in)
}

// put PUTs body and returns the response.
func (tg Target) put(t *testing.T, key string, body []byte, opts ...func(*s3.PutObjectInput)) *s3.PutObjectOutput {
	t.Helper()
	out, err := tg.tryPut(t, key, body, opts...)
	if err != nil {
		t.Fatalf("PUT %s: %v", key, err)
	}
	return out
}

// putVersion PUTs body to a versioned bucket, checks that the answer names
// a new version, and records it in m.
func (tg Target) putVersion(t *testing.T, m *model, key string, body []byte) string {
	t.Helper()
	out := tg.put(t, key, body)
	id := aws.ToString(out.VersionId)
	if id == "" || id == nullID {
		t.Fatalf("PUT %s to a versioned bucket: x-amz-version-id %q, want a new version id", key, id)
	}
	if m.has(key, id) {
		t.Fatalf("PUT %s: version id %s was already used", key, id)
	}
	m.push(key, entry{ID: id, ETag: aws.ToString(out.ETag), Size: int64(len(body))})
	return id
}

func (tg Target) tryGet(t *testing.T, key, id string, opts ...func(*s3.GetObjectInput)) ([]byte, *s3.GetObjectOutput, error) {
	t.Helper()
	in := &s3.GetObjectInput{Bucket: &tg.Bucket, Key: &key}
	if id != "" {
		in.VersionId = &id
	}
	for _, o := range opts {
		o(in)
	}
	out, err := tg.Client.GetObject(ctx(t), in)
	if err != nil {
		return nil, nil, err
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	return b, out, err
}

// get reads key (version id, or the newest when id is "").
func (tg Target) get(t *testing.T, key, id string, opts ...func(*s3.GetObjectInput)) ([]byte, *s3.GetObjectOutput) {
	t.Helper()
	b, out, err := tg.tryGet(t, key, id, opts...)
	if err != nil {
		t.Fatalf("GET %s?versionId=%s: %v", key, id, err)
	}
	return b, out
}

// mustRead checks that key's version id (the newest when "") holds want
// and answers with x-amz-version-id wantID (unchecked when ""). The null
// version may answer without x-amz-version-id (S3's documentation does not
// say; MinIO sends none).
func (tg Target) mustRead(t *testing.T, key, id string, want []byte, wantID string) {
	t.Helper()
	got, out := tg.get(t, key, id)
	if !equal(got, want) {
		t.Fatalf("GET %s?versionId=%s: %d bytes that differ from the %d written", key, id, len(got), len(want))
	}
	if got := aws.ToString(out.VersionId); wantID != "" && got != wantID && !(wantID == nullID && got == "") {
		t.Fatalf("GET %s?versionId=%s: x-amz-version-id %q, want %q", key, id, aws.ToString(out.VersionId), wantID)
	}
}

func (tg Target) head(t *testing.T, key, id string) (*s3.HeadObjectOutput, error) {
	t.Helper()
	in := &s3.HeadObjectInput{Bucket: &tg.Bucket, Key: &key}
	if id != "" {
		in.VersionId = &id
	}
	return tg.Client.HeadObject(ctx(t), in)
}

func (tg Target) tryDelete(t *testing.T, key, id string) (*s3.DeleteObjectOutput, error) {
	t.Helper()
	in := &s3.DeleteObjectInput{Bucket: &tg.Bucket, Key: &key}
	if id != "" {
		in.VersionId = &id
	}
	return tg.Client.DeleteObject(ctx(t), in)
}

func (tg Target) del(t *testing.T, key, id string) *s3.DeleteObjectOutput {
	t.Helper()
	out, err := tg.tryDelete(t, key, id)
	if err != nil {
		t.Fatalf("DELETE %s?versionId=%s: %v", key, id, err)
	}
	return out
}

// mark DELETEs key without a version id, checks that the answer names a new
// delete marker, and records it in m.
func (tg Target) mark(t *testing.T, m *model, key string) string {
	t.Helper()
	out := tg.del(t, key, "")
	id := aws.ToString(out.VersionId)
	if !aws.ToBool(out.DeleteMarker) || id == "" {
		t.Fatalf("DELETE %s in a versioned bucket: x-amz-delete-marker %v, x-amz-version-id %q; want a new delete marker",
			key, aws.ToBool(out.DeleteMarker), id)
	}
	if m.has(key, id) {
		t.Fatalf("DELETE %s: the delete marker's id %s was already used", key, id)
	}
	m.push(key, entry{ID: id, Marker: true})
	return id
}

// remove DELETEs version id of key for good and checks the answer.
func (tg Target) remove(t *testing.T, m *model, key, id string) {
	t.Helper()
	e, ok := m.find(key, id)
	out := tg.del(t, key, id)
	if got := aws.ToString(out.VersionId); got != id && !(id == nullID && got == "") {
		t.Fatalf("DELETE %s?versionId=%s: x-amz-version-id %q", key, id, got)
	}
	// x-amz-delete-marker says whether the version removed was a marker.
	if ok && aws.ToBool(out.DeleteMarker) != e.Marker {
		t.Fatalf("DELETE %s?versionId=%s: x-amz-delete-marker %v, but the version removed was a delete marker: %v",
			key, id, aws.ToBool(out.DeleteMarker), e.Marker)
	}
	m.drop(key, id)
}

// errInfo is what an S3 error answer says: status, code and headers.
func errInfo(err error) (status int, code string, h http.Header) {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
		if re.Response != nil {
			h = re.Response.Header
		}
	}
	var ce interface{ ErrorCode() string }
	if errors.As(err, &ce) {
		code = ce.ErrorCode()
	}
	return status, code, h
}

// wantErr checks that err is an S3 error answer with status and, when codes
// are given, one of them. It returns the answer's headers.
func wantErr(t *testing.T, err error, what string, status int, codes ...string) http.Header {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: succeeded, want %d %v", what, status, codes)
	}
	st, code, h := errInfo(err)
	if st != status || (len(codes) > 0 && !slices.Contains(codes, code)) {
		t.Fatalf("%s: %d %s, want %d %v (%v)", what, st, code, status, codes, err)
	}
	return h
}

// wantMarkerHeader checks x-amz-delete-marker: true on an error answer.
func wantMarkerHeader(t *testing.T, h http.Header, what string) {
	t.Helper()
	if got := h.Get("x-amz-delete-marker"); got != "true" {
		t.Fatalf("%s: x-amz-delete-marker %q, want \"true\"", what, got)
	}
}

func equal(a, b []byte) bool { return bytes.Equal(a, b) }

// otherID returns a well-formed version id that is not id: id with its
// last character changed within its class (hex digit, letter, digit).
func otherID(id string) string {
	if id == "" {
		return "0"
	}
	last := id[len(id)-1]
	var next byte
	switch {
	case last >= '0' && last <= '8', last >= 'a' && last <= 'e', last >= 'A' && last <= 'E':
		next = last + 1
	case last == '9':
		next = '0'
	case last == 'f':
		next = 'a'
	case last == 'F':
		next = 'A'
	case last >= 'g' && last < 'z', last >= 'G' && last < 'Z':
		next = last + 1
	default:
		next = 'A'
	}
	return id[:len(id)-1] + string(next)
}

func keyID(key, id string) string { return fmt.Sprintf("%s@%s", key, id) }

// MinIOSkips are where MinIO departs from AWS's documented behaviour: a
// target that is MinIO, or passes MinIO's versions through (a fedgate
// bucket mounted from a versioned MinIO bucket), skips them.
var MinIOSkips = map[string]string{
	CapMarkerOverMarker: "MinIO: a DELETE of a key whose newest version is a delete marker answers that marker's id " +
		"and adds none (S3 user guide: a simple DELETE on a delete marker adds a new delete marker)",
	CapDeleteAbsent: "MinIO: a DELETE of a key never written adds no delete marker in a versioned bucket (S3 adds one)",
	CapHiddenPrefix: "MinIO: ListObjectsV2 with a delimiter lists a common prefix whose only keys are under delete markers",
	CapSuspendedDelete: "MinIO: a DELETE while Suspended answers without x-amz-delete-marker: true and " +
		"x-amz-version-id: null (it does make the null delete marker, as the listing shows)",
	CapCopyFromMarker: "MinIO: CopyObject naming a delete marker's id answers 405 MethodNotAllowed " +
		"(CopyObject reference: 400, a delete marker cannot be a copy source)",
	CapDeleteObjectsDM: "MinIO: DeleteObjects removing a delete marker by id reports neither DeleteMarker " +
		"nor DeleteMarkerVersionId (DeletedObject reference: both)",
}

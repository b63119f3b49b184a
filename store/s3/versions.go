package s3

// Native versions (store.Versioner): S3's own version ids, "null" for an
// object written while the bucket's versioning was off or suspended, and
// delete markers.
//
// ListObjectVersions returns a page's versions and delete markers in two
// lists, each newest first per key, which lose their order relative to
// each other: a version and a marker of the same second (S3 listings give
// LastModified to the millisecond or the second) cannot be ordered from
// the parsed page. The page's XML has them in S3's order, so listVersions
// keeps a copy of each page's raw body (one page, at most 1,000 rows) and
// reads the order from it (see versionOrder).

import (
	"bytes"
	"cmp"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/fedgate/fedgate/store"
)

var _ store.Versioner = (*Store)(nil)

// NativeVersioning returns the bucket's versioning status from
// GetBucketVersioning: "", store.VersioningEnabled or
// store.VersioningSuspended. ErrAccessDenied, ErrThrottled as the server
// says.
func (s *Store) NativeVersioning(ctx context.Context) (string, error) {
	out, err := s.client.GetBucketVersioning(ctx, &awss3.GetBucketVersioningInput{Bucket: &s.bucket})
	if err != nil {
		return "", mapErr("get versioning", s.bucket, err)
	}
	switch out.Status {
	case types.BucketVersioningStatusEnabled:
		return store.VersioningEnabled, nil
	case types.BucketVersioningStatusSuspended:
		return store.VersioningSuspended, nil
	}
	return "", nil
}

// StatVersion HEADs one version. ErrNoSuchVersion (wrapped) for an id the
// key does not have (or the server cannot parse); *store.DeleteMarker for
// a delete marker (S3 answers 405 with x-amz-delete-marker); ErrInvalidKey,
// ErrAccessDenied, ErrThrottled as Stat.
func (s *Store) StatVersion(ctx context.Context, key, id string) (store.ObjectInfo, error) {
	if err := s.checkKey("stat version", key); err != nil {
		return store.ObjectInfo{}, err
	}
	if id == "" {
		return store.ObjectInfo{}, noSuchVersion("stat version", key, id)
	}
	out, err := s.client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &s.bucket, Key: &key, VersionId: &id})
	if err != nil {
		return store.ObjectInfo{}, s.versionErr(ctx, "stat version", key, id, err)
	}
	if got := aws.ToString(out.VersionId); got != id && (got != "" || id != store.NoVersionID) {
		// A server that ignored versionId answered with another version.
		return store.ObjectInfo{}, noSuchVersion("stat version", key, id)
	}
	h := headers{
		contentType: out.ContentType, cacheControl: out.CacheControl, contentDisposition: out.ContentDisposition,
		contentEncoding: out.ContentEncoding, contentLanguage: out.ContentLanguage, expires: out.ExpiresString,
		meta: out.Metadata,
	}
	info := h.info(key, aws.ToString(out.ETag))
	info.Size = aws.ToInt64(out.ContentLength)
	info.ModTime = aws.ToTime(out.LastModified)
	info.VersionID = id
	if err := s.resolveSidecar(ctx, key, out.Metadata, &info); err != nil {
		return store.ObjectInfo{}, err
	}
	return info, nil
}

// ReadVersionRange streams length bytes (length < 0: to the end) of one
// version from offset with a ranged GET. A range starting at or after the
// end yields no bytes. Errors as StatVersion's.
func (s *Store) ReadVersionRange(ctx context.Context, key, id string, offset, length int64) (io.ReadCloser, error) {
	if err := s.checkKey("read version", key); err != nil {
		return nil, err
	}
	offset = max(offset, 0)
	if length == 0 || id == "" {
		if _, err := s.StatVersion(ctx, key, id); err != nil {
			return nil, err
		}
		return io.NopCloser(strings.NewReader("")), nil
	}
	in := &awss3.GetObjectInput{Bucket: &s.bucket, Key: &key, VersionId: &id, Range: rangeHeader(offset, length)}
	out, err := s.client.GetObject(ctx, in)
	if err != nil {
		if isCode(err, "InvalidRange") {
			// The range starts past the end: no bytes, if the version is there.
			if _, err := s.StatVersion(ctx, key, id); err != nil {
				return nil, err
			}
			return io.NopCloser(strings.NewReader("")), nil
		}
		return nil, s.versionErr(ctx, "read version", key, id, err)
	}
	if got := aws.ToString(out.VersionId); got != id && (got != "" || id != store.NoVersionID) {
		out.Body.Close()
		return nil, noSuchVersion("read version", key, id)
	}
	return out.Body, nil
}

// DeleteVersion removes one version or delete marker for good. An id the
// key does not have is not an error; ErrInvalidKey, ErrAccessDenied,
// ErrThrottled as Delete.
func (s *Store) DeleteVersion(ctx context.Context, key, id string) error {
	if err := s.checkKey("delete version", key); err != nil {
		return err
	}
	if id == "" {
		return nil
	}
	_, err := s.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &s.bucket, Key: &key, VersionId: &id})
	if err != nil {
		err = s.versionErr(ctx, "delete version", key, id, err)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return err
	}
	return nil
}

// DeleteCurrent deletes key without a version id: in a bucket with
// versioning on S3 adds a delete marker, whose id it returns ("" when the
// bucket keeps no versions). Errors as Delete's.
func (s *Store) DeleteCurrent(ctx context.Context, key string) (string, error) {
	if err := s.checkKey("delete", key); err != nil {
		return "", err
	}
	out, err := s.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &s.bucket, Key: &key})
	if err != nil {
		if err := mapErr("delete", key, err); !errors.Is(err, store.ErrNotFound) {
			return "", err
		}
		return "", nil
	}
	if !aws.ToBool(out.DeleteMarker) {
		return "", nil
	}
	return aws.ToString(out.VersionId), nil
}

// versionErr maps the error of a request for version id of key: a delete
// marker is a *store.DeleteMarker (Latest asked of the server with a HEAD
// of the key), 404s and ids the server cannot parse are ErrNoSuchVersion,
// the rest as mapErr.
func (s *Store) versionErr(ctx context.Context, op, key, id string, err error) error {
	if isDeleteMarker(err) {
		dm := &store.DeleteMarker{Key: key, VersionID: id}
		_, herr := s.client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &s.bucket, Key: &key})
		if herr != nil && isDeleteMarker(herr) {
			var re *smithyhttp.ResponseError
			if errors.As(herr, &re) {
				dm.Latest = re.Response.Header.Get("X-Amz-Version-Id") == id
			}
		}
		return store.Retried(fmt.Errorf("s3: %s %q: %w", op, key, dm))
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return mapErr(op, key, err)
	}
	code, status := errParts(err)
	switch {
	case code == "NoSuchBucket": // a configuration error, as mapErr has it
	case code == "NoSuchVersion", code == "NoSuchKey", status == 404,
		// An id the server cannot parse is one the key does not have.
		status == 400 && (code == "InvalidArgument" || code == "BadRequest"):
		return store.Retried(fmt.Errorf("s3: %s %q version %q: %w: %w", op, key, id, store.ErrNoSuchVersion, err))
	}
	return mapErr(op, key, err)
}

// isDeleteMarker reports whether err is S3's answer for a delete marker
// (405 to a HEAD or GET of a marker version, 404 to one of a key whose
// latest version is a marker), which carries x-amz-delete-marker: true.
func isDeleteMarker(err error) bool {
	var re *smithyhttp.ResponseError
	return errors.As(err, &re) && re.Response != nil && re.Response.Header.Get("X-Amz-Delete-Marker") == "true"
}

func noSuchVersion(op, key, id string) error {
	return fmt.Errorf("s3: %s %q version %q: %w", op, key, id, store.ErrNoSuchVersion)
}

// ListVersions streams ListObjectVersions pages: versions, delete markers
// and common prefixes, in S3's order, with the keys under StagingPrefix and MetaPrefix
// (and, with MinIOKeyRules, below a prefix MinIO refuses) left out as List
// leaves them. A common prefix at or before opts.KeyMarker is left out.
// Info has Key, VersionID, Size, ModTime, Validator and the server's ETag
// (as List's), and no Metadata.
//
// Errors (yielded, then the listing ends): ErrAccessDenied, ErrThrottled
// as the server says; ctx's error.
func (s *Store) ListVersions(ctx context.Context, opts store.VersionListOptions) iter.Seq2[store.VersionEntry, error] {
	return func(yield func(store.VersionEntry, error) bool) {
		if s.minioKeys {
			if i := strings.LastIndexByte(opts.Prefix, '/'); i >= 0 && MinIORefuses(opts.Prefix[:i+1]+"x") {
				return
			}
		}
		in := &awss3.ListObjectVersionsInput{Bucket: &s.bucket, EncodingType: types.EncodingTypeUrl}
		if s.versionPage > 0 {
			in.MaxKeys = aws.Int32(s.versionPage)
		}
		if opts.Prefix != "" {
			in.Prefix = &opts.Prefix
		}
		if opts.Delimiter != "" {
			in.Delimiter = &opts.Delimiter
		}
		if opts.KeyMarker != "" {
			in.KeyMarker = &opts.KeyMarker
			if opts.VersionIDMarker != "" {
				in.VersionIdMarker = &opts.VersionIDMarker
			}
		}
		var order versionOrder
		record := func(o *awss3.Options) {
			o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
				return st.Deserialize.Insert(&order, "OperationDeserializer", middleware.After)
			})
		}
		var page []store.VersionEntry
		last := opts.KeyMarker // a common prefix at or before it was yielded, or is left out
		for {
			out, err := s.client.ListObjectVersions(ctx, in, record)
			if err != nil {
				yield(store.VersionEntry{}, mapErr("list versions", opts.Prefix, err))
				return
			}
			page, err = s.versionEntries(page[:0], out, &order)
			if err != nil {
				yield(store.VersionEntry{}, err)
				return
			}
			for _, e := range page {
				if e.IsPrefix && e.Key <= last {
					// MinIO repeats a common prefix on the next page when
					// the page ended inside it.
					continue
				}
				last = e.Key
				if !yield(e, nil) {
					return
				}
			}
			if !aws.ToBool(out.IsTruncated) || aws.ToString(out.NextKeyMarker) == "" {
				return
			}
			// The markers come URL-encoded (encoding-type=url) and go back raw.
			if in.KeyMarker, err = decodeMarker(out.NextKeyMarker); err != nil {
				yield(store.VersionEntry{}, err)
				return
			}
			in.VersionIdMarker = nil
			if id := aws.ToString(out.NextVersionIdMarker); id != "" {
				in.VersionIdMarker = &id
			}
		}
	}
}

func decodeMarker(m *string) (*string, error) {
	k, err := decodeKey(aws.ToString(m))
	if err != nil {
		return nil, err
	}
	return &k, nil
}

// versionEntries decodes one page into es, in S3's order, without the
// entries the contract leaves out.
func (s *Store) versionEntries(es []store.VersionEntry, out *awss3.ListObjectVersionsOutput, order *versionOrder) ([]store.VersionEntry, error) {
	type ranked struct {
		e     store.VersionEntry
		pos   int
		known bool // pos was read from the body
	}
	rs := make([]ranked, 0, len(out.Versions)+len(out.DeleteMarkers)+len(out.CommonPrefixes))
	add := func(raw, id string, latest, marker bool, info store.ObjectInfo) error {
		key, err := decodeKey(raw)
		if err != nil {
			return err
		}
		if reservedKey(key) {
			return nil
		}
		info.Key, info.VersionID = key, id
		pos, ok := order.pos[versionRef{raw, id}]
		rs = append(rs, ranked{store.VersionEntry{Key: key, IsLatest: latest, DeleteMarker: marker, Info: info}, pos, ok})
		return nil
	}
	for _, v := range out.Versions {
		etag := unquoteETag(aws.ToString(v.ETag))
		info := store.ObjectInfo{Size: aws.ToInt64(v.Size), ModTime: aws.ToTime(v.LastModified), ETag: etag, Validator: store.Validator(etag)}
		if err := add(aws.ToString(v.Key), aws.ToString(v.VersionId), aws.ToBool(v.IsLatest), false, info); err != nil {
			return nil, err
		}
	}
	for _, m := range out.DeleteMarkers {
		info := store.ObjectInfo{ModTime: aws.ToTime(m.LastModified)}
		if err := add(aws.ToString(m.Key), aws.ToString(m.VersionId), aws.ToBool(m.IsLatest), true, info); err != nil {
			return nil, err
		}
	}
	for _, p := range out.CommonPrefixes {
		key, err := decodeKey(aws.ToString(p.Prefix))
		if err != nil {
			return nil, err
		}
		if reservedKey(key) {
			continue
		}
		rs = append(rs, ranked{e: store.VersionEntry{Key: key, IsPrefix: true}})
	}
	slices.SortStableFunc(rs, func(a, b ranked) int {
		if c := strings.Compare(a.e.Key, b.e.Key); c != 0 || a.e.IsPrefix || b.e.IsPrefix {
			return c
		}
		if a.known && b.known {
			return cmp.Compare(a.pos, b.pos)
		}
		// Without the body's order (it did not parse): the latest first,
		// then newest first.
		if a.e.IsLatest != b.e.IsLatest {
			if a.e.IsLatest {
				return -1
			}
			return 1
		}
		return b.e.Info.ModTime.Compare(a.e.Info.ModTime)
	})
	for _, r := range rs {
		es = append(es, r.e)
	}
	return es, nil
}

// versionRef names a row of a ListObjectVersions body: its key as sent
// (URL-encoded) and its version id.
type versionRef struct{ key, id string }

// versionOrder is a deserialize middleware that keeps the position of
// every Version and DeleteMarker element in a ListObjectVersions body
// before the SDK parses it. One value serves one listing, one page at a
// time.
type versionOrder struct {
	pos map[versionRef]int
}

func (*versionOrder) ID() string { return "fedgateVersionOrder" }

func (o *versionOrder) HandleDeserialize(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (
	middleware.DeserializeOutput, middleware.Metadata, error) {
	out, md, err := next.HandleDeserialize(ctx, in)
	o.pos = nil
	if err != nil {
		return out, md, err
	}
	resp, ok := out.RawResponse.(*smithyhttp.Response)
	if !ok || resp.StatusCode != 200 {
		return out, md, err
	}
	body, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	if rerr != nil {
		return out, md, rerr // the SDK's retryer sees a broken body like any
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	var doc struct {
		Rows []struct {
			XMLName   xml.Name
			Key       string `xml:"Key"`
			VersionID string `xml:"VersionId"`
		} `xml:",any"`
	}
	if xml.Unmarshal(body, &doc) == nil {
		o.pos = make(map[versionRef]int, len(doc.Rows))
		for i, r := range doc.Rows {
			if r.XMLName.Local == "Version" || r.XMLName.Local == "DeleteMarker" {
				o.pos[versionRef{r.Key, r.VersionID}] = i
			}
		}
	}
	return out, md, nil
}

package gateway

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/gateway/checksum"
	"github.com/fedgate/fedgate/gateway/s3err"
	"github.com/fedgate/fedgate/store"
)

// maxPutSize is S3's limit for one PutObject.
const maxPutSize = 5 << 30

// maxUserMetadata is S3's limit on the size of x-amz-meta-* names and values.
const maxUserMetadata = 2 << 10

// writeMetadata reads the metadata a write sets: the headers' (see
// metadataFrom) and the ACL of x-amz-acl or x-amz-grant-*.
func (s *Server) writeMetadata(q *request, b backend.Bucket) (store.Metadata, error) {
	meta, err := metadataFrom(q.r.Header)
	if err != nil {
		return meta, err
	}
	if err := checkReservedMeta(meta); err != nil {
		return meta, err
	}
	if err := s.setWriteLock(q, b, &meta); err != nil {
		return meta, err
	}
	return meta, s.setObjectACL(q, b, &meta)
}

// setObjectACL keeps the ACL a write's headers set in meta.
func (s *Server) setObjectACL(q *request, b backend.Bucket, meta *store.Metadata) error {
	acl, err := s.objectACLFrom(q, b)
	if err != nil || acl == "" {
		return err
	}
	if meta.User == nil {
		meta.User = map[string]string{}
	}
	meta.User[metaACL] = acl
	return nil
}

// metadataFrom reads the object metadata a writer sends in headers.
func metadataFrom(h http.Header) (store.Metadata, error) {
	if h.Get("x-amz-server-side-encryption-customer-algorithm") != "" {
		return store.Metadata{}, errNotImplemented("Server-side encryption with customer keys (SSE-C)")
	}
	m := store.Metadata{
		ContentType:        h.Get("Content-Type"),
		CacheControl:       h.Get("Cache-Control"),
		ContentDisposition: h.Get("Content-Disposition"),
		ContentEncoding:    h.Get("Content-Encoding"),
		ContentLanguage:    h.Get("Content-Language"),
		Expires:            h.Get("Expires"),
	}
	m.ContentEncoding = withoutAWSChunked(m.ContentEncoding)
	total := 0
	for k, v := range h {
		name, ok := cutPrefixFold(k, "X-Amz-Meta-")
		if !ok {
			continue
		}
		if m.User == nil {
			m.User = map[string]string{}
		}
		name = strings.ToLower(name)
		val := strings.Join(v, ",")
		m.User[name] = val
		total += len(name) + len(val)
	}
	if total > maxUserMetadata {
		return m, s3err.Newf(s3err.CodeMetadataTooLarge, "Your metadata headers exceed the maximum allowed metadata size (%d bytes).", maxUserMetadata)
	}
	return m, nil
}

// withoutAWSChunked is a Content-Encoding with its aws-chunked token (a
// transfer detail, not the object's encoding) removed and the rest kept as
// the client wrote it, separators included, as S3 stores it: "gzip,
// aws-chunked" is "gzip", "aws-chunked" alone is "" (no header on reads),
// "deflate, gzip" stays "deflate, gzip".
func withoutAWSChunked(enc string) string {
	parts := strings.Split(enc, ",")
	kept := parts[:0]
	for _, p := range parts {
		if !strings.EqualFold(strings.TrimSpace(p), "aws-chunked") {
			kept = append(kept, p)
		}
	}
	if len(kept) == len(parts) {
		return enc
	}
	return strings.TrimSpace(strings.Join(kept, ","))
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return "", false
}

// payloadSize is the decoded body length of a write, or MissingContentLength.
// With unknownOK, a plain body sent with Transfer-Encoding: chunked and no
// Content-Length has size -1 (S3-compatible servers take such a PUT; the
// store writes it streaming, as one of unknown length).
func (q *request) payloadSize(unknownOK bool) (int64, error) {
	if q.size >= 0 {
		return q.size, nil
	}
	awsChunked := strings.Contains(strings.ToLower(q.r.Header.Get("Content-Encoding")), "aws-chunked") ||
		strings.HasPrefix(q.r.Header.Get("x-amz-content-sha256"), "STREAMING-")
	switch {
	case awsChunked:
	case q.r.ContentLength >= 0:
		return q.r.ContentLength, nil
	case unknownOK && slices.Contains(q.r.TransferEncoding, "chunked"):
		return -1, nil
	}
	return 0, errMissingLength
}

// cappedReader fails a body of unknown length once it runs past left
// bytes (EntityTooLarge).
type cappedReader struct {
	r    io.Reader
	left int64
}

func (c *cappedReader) Read(p []byte) (int, error) {
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if c.left < 0 {
		return 0, errEntityTooLarge
	}
	return n, err
}

// exactReader fails a body that ends before, or runs past, its declared size.
type exactReader struct {
	r    io.Reader
	left int64
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.left <= 0 {
		var one [1]byte
		n, err := e.r.Read(one[:])
		if n > 0 {
			return 0, s3err.New(s3err.CodeIncompleteBody, "The request body is longer than its declared length.")
		}
		if err == nil {
			return 0, nil
		}
		return 0, err
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.r.Read(p)
	e.left -= int64(n)
	if errors.Is(err, io.EOF) && e.left > 0 {
		return n, errIncompleteBody
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return n, errIncompleteBody
	}
	return n, err
}

// writeBody wraps a write's payload so that reading it verifies its length,
// Content-MD5 and x-amz-checksum-* (header or trailer).
func (q *request) writeBody(maxSize int64, unknownOK bool) (*checksum.Reader, int64, error) {
	size, err := q.payloadSize(unknownOK)
	if err != nil {
		return nil, 0, err
	}
	if size > maxSize {
		return nil, 0, errEntityTooLarge
	}
	var body io.Reader = &exactReader{r: q.body, left: size}
	if size < 0 {
		body = &cappedReader{r: q.body, left: maxSize}
	}
	cr, err := checksum.NewReader(q.r.Header, body, q.trailer)
	if err != nil {
		return nil, 0, err
	}
	return cr, size, nil
}

func setChecksumHeaders(h http.Header, sums map[string]string) {
	for alg, v := range sums {
		h.Set("x-amz-checksum-"+strings.ToLower(alg), v)
	}
}

func (s *Server) putObject(q *request) error {
	b, err := s.bucketFor(q)
	if err != nil {
		return err
	}
	meta, err := s.writeMetadata(q, b)
	if err != nil {
		return err
	}
	if hasLockHeaders(q.r.Header) && !hasBodyDigest(q.r.Header) {
		return errLockNeedsDigest
	}
	if err := s.setObjectTags(q, b, &meta); err != nil {
		return err
	}
	opts := store.PutOptions{Metadata: meta}
	if err := s.writeConditions(q, b, &opts); err != nil {
		return err
	}
	body, size, err := q.writeBody(maxPutSize, true)
	if err != nil {
		return err
	}
	opts.LateChecksums = body.Checksums
	info, err := b.Put(q.r.Context(), q.key, body, size, opts)
	if err != nil {
		return err
	}
	h := q.w.Header()
	h.Set("ETag", `"`+info.ETag+`"`)
	setWriteVersionID(h, info.VersionID)
	setChecksumHeaders(h, info.Checksums)
	q.w.WriteHeader(http.StatusOK)
	return nil
}

// setWriteVersionID answers a write's x-amz-version-id: the id of the
// version it made in a bucket with versioning enabled. A write to a bucket
// never versioned, or suspended, makes the null version, and S3 answers no
// version id for it (the API reference: the id is returned when versioning
// is enabled; s3-tests test_versioning_bucket_atomic_upload_return_version_id).
func setWriteVersionID(h http.Header, id string) {
	if id != "" && id != nullVersion {
		h.Set("x-amz-version-id", id)
	}
}

// writeConditions maps If-None-Match: * (create-if-absent) and If-Match on a
// write to store options.
func (s *Server) writeConditions(q *request, b backend.Bucket, opts *store.PutOptions) error {
	if inm := q.r.Header.Get("If-None-Match"); inm != "" {
		if strings.TrimSpace(inm) != "*" {
			return errNotImplemented("If-None-Match with a value other than * on a write")
		}
		opts.IfNoneMatch = true
	}
	if im := q.r.Header.Get("If-Match"); im != "" {
		cur, err := b.Stat(q.r.Context(), q.key)
		if err != nil {
			return err
		}
		if !etagMatches(im, cur.ETag) {
			return errPrecondition
		}
		opts.IfMatch = cur.Validator
	}
	return nil
}

func (s *Server) headObject(q *request) error { return s.serveObject(q, false) }
func (s *Server) getObject(q *request) error  { return s.serveObject(q, true) }

// serveObject answers GetObject and HeadObject. A posix store's file is sent
// with sendfile; other stores stream through the chunk cache or the store.
func (s *Server) serveObject(q *request, withBody bool) error {
	b, check, err := s.objectFor(q)
	if err != nil {
		return err
	}
	ctx := q.r.Context()
	if lf, prefix := b.LocalFiler(); lf != nil {
		f, off, info, err := lf.OpenLocal(ctx, prefix+q.key)
		if check != nil {
			if err := check(info, err); err != nil {
				if f != nil {
					f.Close()
				}
				return err
			}
		}
		if err != nil {
			deleteMarkerAnswer(q.w, err)
			return s.hideMissing(q, b, err)
		}
		defer f.Close()
		info.Key = q.key
		return s.sendObject(q, info, withBody, func(start, n int64) (io.Reader, func(), error) {
			sent, err := b.LocalRead(ctx, info)
			if err != nil {
				return nil, nil, err
			}
			// A fresh file is at offset 0; seek only for ranges.
			if off+start != 0 {
				if _, err := f.Seek(off+start, io.SeekStart); err != nil {
					return nil, nil, err
				}
			}
			// Exactly *io.LimitedReader over *os.File: net/http sends it with sendfile.
			lr := &io.LimitedReader{R: f, N: n}
			return lr, func() { sent(n - lr.N) }, nil
		})
	}
	info, err := b.Stat(ctx, q.key)
	if check != nil {
		if err := check(info, err); err != nil {
			return err
		}
	}
	if err != nil {
		deleteMarkerAnswer(q.w, err)
		return s.hideMissing(q, b, err)
	}
	return s.sendObject(q, info, withBody, s.opener(q, b, info))
}

// errObjectChanged: the object was replaced in its store between the
// metadata lookup and the first read; the client should simply retry.
var errObjectChanged = s3err.New(s3err.CodeSlowDown, "The object changed in its store while it was being opened; please retry.")

func (s *Server) sendObject(q *request, info store.ObjectInfo, withBody bool, open func(start, n int64) (io.Reader, func(), error)) error {
	if err := checkConditions(q.r.Header, "", info); err != nil {
		if err == errNotModified {
			h := q.w.Header()
			h.Set("ETag", `"`+info.ETag+`"`)
			h.Set("Last-Modified", info.ModTime.UTC().Format(http.TimeFormat))
		}
		return err
	}
	parts := partsCount(info.ETag)
	if pn := q.query.Get("partNumber"); pn != "" {
		n, err := strconv.Atoi(pn)
		switch {
		case err != nil || n < 1 || n > maxPartNumber:
			return s3err.Newf(s3err.CodeInvalidArgument, "Part number must be an integer between 1 and %d, inclusive", maxPartNumber)
		case parts > 1:
			return errNotImplemented("Reading one part of a multipart object (partNumber)")
		case n > 1:
			return s3err.New(s3err.CodeInvalidPartNumber, "The requested partnumber is not satisfiable")
		}
		q.w.Header().Set("x-amz-mp-parts-count", "1")
	}
	rng, err := parseRange(q.r.Header.Get("Range"), info.Size)
	if err != nil {
		q.w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", info.Size))
		return err
	}
	h := q.w.Header()
	setObjectHeaders(h, info, q.query)
	if strings.EqualFold(q.r.Header.Get("x-amz-checksum-mode"), "ENABLED") && rng == nil {
		setChecksumHeaders(h, info.Checksums)
	}
	start, n, status := int64(0), info.Size, http.StatusOK
	if rng != nil {
		start, n, status = rng.Start, rng.Length, http.StatusPartialContent
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, start+n-1, info.Size))
	}
	h.Set("Content-Length", strconv.FormatInt(n, 10))
	if !withBody || n == 0 {
		q.w.WriteHeader(status)
		return nil
	}
	body, done, err := open(start, n)
	if err != nil {
		return err
	}
	defer done()
	q.w.WriteHeader(status)
	if _, err := io.Copy(q.w, body); err != nil {
		// Headers are gone: abort the connection so the client sees a
		// truncated transfer, never a clean short 200.
		if ri := infoFrom(q.r.Context()); ri != nil {
			ri.cause = err
		}
		panic(http.ErrAbortHandler)
	}
	return nil
}

var responseOverrides = map[string]string{
	"response-content-type":        "Content-Type",
	"response-content-language":    "Content-Language",
	"response-expires":             "Expires",
	"response-cache-control":       "Cache-Control",
	"response-content-disposition": "Content-Disposition",
	"response-content-encoding":    "Content-Encoding",
}

func setObjectHeaders(h http.Header, info store.ObjectInfo, q url.Values) {
	ct := info.ContentType
	if ct == "" {
		ct = "binary/octet-stream"
	}
	h.Set("Content-Type", ct)
	h.Set("ETag", `"`+info.ETag+`"`)
	h.Set("Last-Modified", info.ModTime.UTC().Format(http.TimeFormat))
	h.Set("Accept-Ranges", "bytes")
	if info.VersionID != "" {
		h.Set("x-amz-version-id", info.VersionID)
	}
	for name, v := range map[string]string{"Cache-Control": info.CacheControl, "Content-Disposition": info.ContentDisposition,
		"Content-Encoding": info.ContentEncoding, "Content-Language": info.ContentLanguage, "Expires": info.Expires} {
		if v != "" {
			h.Set(name, v)
		}
	}
	setTaggingCount(h, info)
	setLockHeaders(h, info)
	for k, v := range info.User {
		if strings.HasPrefix(k, reservedMeta) {
			continue
		}
		h["X-Amz-Meta-"+k] = []string{v}
	}
	for param, header := range responseOverrides {
		if v := q.Get(param); v != "" {
			h.Set(header, v)
		}
	}
}

func partsCount(etag string) int {
	_, n, ok := strings.Cut(etag, "-")
	if !ok {
		return 0
	}
	c, _ := strconv.Atoi(n)
	return c
}

func (s *Server) deleteObject(q *request) error {
	b, err := s.bucketFor(q)
	if err != nil {
		return err
	}
	marker, err := b.DeleteLatest(q.r.Context(), q.key)
	if err != nil {
		return err
	}
	if marker != "" {
		q.w.Header().Set("x-amz-delete-marker", "true")
		q.w.Header().Set("x-amz-version-id", marker)
	}
	q.w.WriteHeader(http.StatusNoContent)
	return nil
}

// copySource parses x-amz-copy-source: "[/]bucket/key[?versionId=...]", URL-encoded.
func copySource(h string) (bucket, key, versionID string, err error) {
	src, version, _ := strings.Cut(h, "?")
	if version != "" {
		v, _ := url.ParseQuery(version)
		versionID = v.Get("versionId")
	}
	dec, uerr := url.PathUnescape(src)
	if uerr != nil {
		return "", "", "", s3err.New(s3err.CodeInvalidArgument, "Copy Source must mention the source bucket and key: sourcebucket/sourcekey")
	}
	bucket, key, ok := strings.Cut(strings.TrimPrefix(dec, "/"), "/")
	if !ok || bucket == "" || key == "" {
		return "", "", "", s3err.New(s3err.CodeInvalidArgument, "Copy Source must mention the source bucket and key: sourcebucket/sourcekey")
	}
	if err := checkKey(key); err != nil {
		return "", "", "", err
	}
	return bucket, key, versionID, nil
}

// openCopySource resolves, authorizes and stats a copy source (a version,
// when it names one) and checks the x-amz-copy-source-if-* conditions.
func (s *Server) openCopySource(q *request) (backend.Bucket, store.ObjectInfo, error) {
	sb, sk, vid, err := copySource(q.r.Header.Get("x-amz-copy-source"))
	if err != nil {
		return nil, store.ObjectInfo{}, err
	}
	action := "s3:GetObject"
	if vid != "" {
		action = "s3:GetObjectVersion"
	}
	src, check, err := s.objectNamed(q, sb, sk, action)
	if err != nil {
		return nil, store.ObjectInfo{}, err
	}
	var info store.ObjectInfo
	if vid != "" {
		info, err = src.StatVersion(q.r.Context(), sk, vid)
		var dm *backend.DeleteMarkerError
		if errors.As(err, &dm) {
			err = s3err.New(s3err.CodeInvalidRequest, "The source of a copy request may not specifically refer to a delete marker by version id.")
		}
	} else {
		info, err = src.Stat(q.r.Context(), sk)
	}
	if check != nil {
		if err := check(info, err); err != nil {
			return nil, store.ObjectInfo{}, err
		}
	}
	if err != nil {
		return nil, store.ObjectInfo{}, err
	}
	if err := checkConditions(q.r.Header, "x-amz-copy-source-", info); err != nil {
		return nil, store.ObjectInfo{}, err
	}
	if info.VersionID != "" {
		q.w.Header().Set("x-amz-copy-source-version-id", info.VersionID)
	}
	return src, info, nil
}

func (s *Server) copyObject(q *request) error {
	dst, err := s.bucketFor(q)
	if err != nil {
		return err
	}
	src, info, err := s.openCopySource(q)
	if err != nil {
		return err
	}
	directive := strings.ToUpper(q.r.Header.Get("x-amz-metadata-directive"))
	var meta store.Metadata
	switch directive {
	case "", "COPY":
		if src.Name() == dst.Name() && info.Key == q.key && !strings.Contains(q.r.Header.Get("x-amz-copy-source"), "versionId=") {
			return s3err.New(s3err.CodeInvalidRequest, "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes.")
		}
		meta = info.Metadata
		meta.User = maps.Clone(info.User)
		meta.Checksums = maps.Clone(info.Checksums)
		// S3 does not copy an object's ACL: the copy gets the one this
		// request sets, or none.
		delete(meta.User, metaACL)
		if err := s.setObjectACL(q, dst, &meta); err != nil {
			return err
		}
		// Nor its lock: the copy is a new version, locked by this
		// request's headers or the bucket's default retention.
		delete(meta.User, backend.MetaObjectLock)
		if err := s.setWriteLock(q, dst, &meta); err != nil {
			return err
		}
	case "REPLACE":
		if meta, err = s.writeMetadata(q, dst); err != nil {
			return err
		}
		meta.Checksums = maps.Clone(info.Checksums)
	default:
		return s3err.Newf(s3err.CodeInvalidArgument, "Unknown metadata directive %q: use COPY or REPLACE.", directive)
	}
	if err := s.copyTags(q, dst, info, &meta); err != nil {
		return err
	}
	opts := store.PutOptions{Metadata: meta}
	if err := s.writeConditions(q, dst, &opts); err != nil {
		return err
	}
	ctx := q.r.Context()
	rc, err := src.Open(ctx, info, 0, info.Size)
	if err != nil {
		return err
	}
	defer rc.Close()
	out, err := dst.Put(ctx, q.key, rc, info.Size, opts)
	if err != nil {
		return err
	}
	if out.VersionID != "" {
		q.w.Header().Set("x-amz-version-id", out.VersionID)
	}
	writeXML(q.w, http.StatusOK, copyObjectResult{Xmlns: s3NS, LastModified: s3Time(out.ModTime), ETag: `"` + out.ETag + `"`})
	return nil
}

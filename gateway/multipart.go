package gateway

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/gateway/s3err"
)

// maxPartSize and maxPartNumber are S3's multipart limits.
const (
	maxPartSize   = 5 << 30
	maxPartNumber = 10000
)

func (s *Server) createMultipartUpload(q *request) error {
	b, err := s.bucketFor(q)
	if err != nil {
		return err
	}
	meta, err := s.writeMetadata(q, b)
	if err != nil {
		return err
	}
	if err := s.setObjectTags(q, b, &meta); err != nil {
		return err
	}
	alg := strings.ToUpper(q.r.Header.Get("x-amz-checksum-algorithm"))
	up, err := b.CreateUpload(q.r.Context(), q.user, q.key, meta, alg)
	if err != nil {
		return err
	}
	if alg != "" {
		q.w.Header().Set("x-amz-checksum-algorithm", alg)
	}
	writeXML(q.w, http.StatusOK, initiateMultipartUploadResult{Xmlns: s3NS, Bucket: b.Name(), Key: q.key, UploadID: up.ID})
	return nil
}

// upload resolves bucket and uploadId for the part/complete/abort/list calls.
func (s *Server) upload(q *request) (backend.Bucket, backend.Upload, error) {
	b, err := s.bucketFor(q)
	if err != nil {
		return nil, backend.Upload{}, err
	}
	up, err := b.Upload(q.query.Get("uploadId"), q.key)
	return b, up, err
}

func partNumber(q *request) (int, error) {
	n, err := strconv.Atoi(q.query.Get("partNumber"))
	if err != nil || n < 1 || n > maxPartNumber {
		return 0, s3err.Newf(s3err.CodeInvalidArgument, "Part number must be an integer between 1 and %d, inclusive", maxPartNumber)
	}
	return n, nil
}

// partTarget resolves the part number, bucket and upload of UploadPart and
// UploadPartCopy.
func (s *Server) partTarget(q *request) (int, backend.Bucket, backend.Upload, error) {
	num, err := partNumber(q)
	if err != nil {
		return 0, nil, backend.Upload{}, err
	}
	b, up, err := s.upload(q)
	return num, b, up, err
}

func (s *Server) uploadPart(q *request) error {
	num, b, up, err := s.partTarget(q)
	if err != nil {
		return err
	}
	body, size, err := q.writeBody(maxPartSize, false)
	if err != nil {
		return err
	}
	pi, err := b.UploadPart(q.r.Context(), up, num, body, size, body.Checksums)
	if err != nil {
		return err
	}
	q.w.Header().Set("ETag", `"`+pi.ETag+`"`)
	setChecksumHeaders(q.w.Header(), pi.Checksums)
	q.w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) uploadPartCopy(q *request) error {
	num, b, up, err := s.partTarget(q)
	if err != nil {
		return err
	}
	src, info, err := s.openCopySource(q)
	if err != nil {
		return err
	}
	start, n := int64(0), info.Size
	if rh := q.r.Header.Get("x-amz-copy-source-range"); rh != "" {
		first, last, err := copySourceRange(rh)
		if err != nil {
			return err
		}
		if last >= info.Size {
			return errInvalidRange
		}
		start, n = first, last-first+1
	}
	if n > maxPartSize {
		return errEntityTooLarge
	}
	ctx := q.r.Context()
	rc, err := src.Open(ctx, info, start, n)
	if err != nil {
		return err
	}
	defer rc.Close()
	pi, err := b.UploadPart(ctx, up, num, rc, n, nil)
	if err != nil {
		return err
	}
	writeXML(q.w, http.StatusOK, copyPartResult{Xmlns: s3NS, LastModified: s3Time(pi.ModTime), ETag: `"` + pi.ETag + `"`})
	return nil
}

func (s *Server) completeMultipartUpload(q *request) error {
	b, up, err := s.upload(q)
	if err != nil {
		return err
	}
	var req completeMultipartUpload
	if err := readXML(q.body, &req); err != nil {
		return err
	}
	if len(req.Parts) == 0 {
		return s3err.New(s3err.CodeMalformedXML, "You must specify at least one part")
	}
	refs := make([]backend.PartRef, len(req.Parts))
	for i, p := range req.Parts {
		refs[i] = backend.PartRef{Number: p.PartNumber, ETag: p.ETag}
	}
	ifNoneMatch := false
	if inm := q.r.Header.Get("If-None-Match"); inm != "" {
		if strings.TrimSpace(inm) != "*" {
			return errNotImplemented("If-None-Match with a value other than * on a write")
		}
		ifNoneMatch = true
	}
	info, err := b.CompleteUpload(q.r.Context(), up, refs, ifNoneMatch)
	switch {
	case errors.Is(err, backend.ErrInvalidPartOrder):
		return errInvalidPartOrder
	case errors.Is(err, backend.ErrEntityTooSmall):
		return s3err.Newf(s3err.CodeEntityTooSmall, "Your proposed upload is smaller than the minimum allowed object size: %v", err)
	case err != nil:
		return err
	}
	setWriteVersionID(q.w.Header(), info.VersionID)
	writeXML(q.w, http.StatusOK, completeMultipartUploadResult{Xmlns: s3NS, Location: "/" + b.Name() + "/" + q.key,
		Bucket: b.Name(), Key: q.key, ETag: `"` + info.ETag + `"`})
	return nil
}

func (s *Server) abortMultipartUpload(q *request) error {
	b, up, err := s.upload(q)
	if err != nil {
		return err
	}
	if err := b.AbortUpload(q.r.Context(), up); err != nil {
		return err
	}
	q.w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) listParts(q *request) error {
	b, up, err := s.upload(q)
	if err != nil {
		return err
	}
	max, err := maxKeysParam(q.query, "max-parts")
	if err != nil {
		return err
	}
	marker := 0
	if v := q.query.Get("part-number-marker"); v != "" {
		if marker, err = strconv.Atoi(v); err != nil || marker < 0 {
			return s3err.New(s3err.CodeInvalidArgument, "Provided part-number-marker not an integer or within integer range")
		}
	}
	who := owner{ID: up.Initiator, DisplayName: up.Initiator}
	res := listPartsResult{Xmlns: s3NS, Bucket: b.Name(), Key: up.Key, UploadID: up.ID, Initiator: who, Owner: who,
		StorageClass: "STANDARD", PartNumberMarker: marker, MaxParts: max}
	for _, p := range up.Parts {
		if p.Number <= marker {
			continue
		}
		if len(res.Parts) == max {
			res.IsTruncated = true
			break
		}
		res.Parts = append(res.Parts, partElem{PartNumber: p.Number, LastModified: s3Time(p.Modified), ETag: `"` + p.ETag + `"`,
			Size: p.Size, ChecksumCRC32: p.Checksums["CRC32"], ChecksumCRC32C: p.Checksums["CRC32C"],
			ChecksumSHA1: p.Checksums["SHA1"], ChecksumSHA256: p.Checksums["SHA256"], ChecksumCRC64NVME: p.Checksums["CRC64NVME"]})
		res.NextPartNumberMarker = p.Number
	}
	writeXML(q.w, http.StatusOK, res)
	return nil
}

func (s *Server) listMultipartUploads(q *request) error {
	b, err := s.bucketFor(q)
	if err != nil {
		return err
	}
	enc, encType, err := encoder(q.query)
	if err != nil {
		return err
	}
	max, err := maxKeysParam(q.query, "max-uploads")
	if err != nil {
		return err
	}
	prefix, delim := q.query.Get("prefix"), q.query.Get("delimiter")
	keyMarker, idMarker := q.query.Get("key-marker"), q.query.Get("upload-id-marker")
	res := listMultipartUploadsResult{Xmlns: s3NS, Bucket: b.Name(), KeyMarker: enc(keyMarker), UploadIDMarker: idMarker,
		Prefix: enc(prefix), Delimiter: enc(delim), MaxUploads: max, EncodingType: encType}
	// Uploads come by key, then by initiation, resuming after
	// (key-marker, upload-id-marker) in that order; reading stops at the
	// end of the page.
	lastPrefix, count := "", 0
	for up := range b.Uploads(prefix, keyMarker, idMarker) {
		if delim != "" {
			if k := strings.Index(up.Key[len(prefix):], delim); k >= 0 {
				cp := up.Key[:len(prefix)+k+len(delim)]
				if cp == lastPrefix || (keyMarker != "" && cp <= keyMarker && strings.HasPrefix(keyMarker, cp)) {
					continue // folded, or the page before ended on it
				}
				if count == max {
					res.IsTruncated = true
					break
				}
				lastPrefix = cp
				res.CommonPrefixes = append(res.CommonPrefixes, prefixElem{Prefix: enc(cp)})
				res.NextKeyMarker, res.NextUploadIDMarker = enc(cp), ""
				count++
				continue
			}
		}
		if count == max {
			res.IsTruncated = true
			break
		}
		who := owner{ID: up.Initiator, DisplayName: up.Initiator}
		res.Uploads = append(res.Uploads, uploadElem{Key: enc(up.Key), UploadID: up.ID, Initiator: who, Owner: who,
			StorageClass: "STANDARD", Initiated: s3Time(up.Created)})
		res.NextKeyMarker, res.NextUploadIDMarker = enc(up.Key), up.ID
		count++
	}
	writeXML(q.w, http.StatusOK, res)
	return nil
}

// copySourceRange parses x-amz-copy-source-range strictly: bytes=first-last
// with first <= last (no suffix or open ranges, no clamping).
func copySourceRange(h string) (first, last int64, err error) {
	bad := s3err.New(s3err.CodeInvalidArgument, "The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy")
	spec, ok := strings.CutPrefix(strings.TrimSpace(h), "bytes=")
	if !ok {
		return 0, 0, bad
	}
	a, b, ok := strings.Cut(spec, "-")
	if !ok {
		return 0, 0, bad
	}
	first, err1 := parseDigits(a)
	last, err2 := parseDigits(b)
	if err1 != nil || err2 != nil || first > last {
		return 0, 0, bad
	}
	return first, last, nil
}

package gateway

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/gateway/s3err"
)

const maxListKeys = 1000

// maxKeysParam parses max-keys / max-parts / max-uploads: default and cap 1000.
func maxKeysParam(q url.Values, name string) (int, error) {
	v := q.Get(name)
	if v == "" {
		return maxListKeys, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, s3err.Newf(s3err.CodeInvalidArgument, "Provided %s not an integer or within integer range", name)
	}
	return min(n, maxListKeys), nil
}

// encoder returns the function that encodes keys in a listing response.
func encoder(q url.Values) (func(string) string, string, error) {
	switch et := q.Get("encoding-type"); et {
	case "":
		return func(s string) string { return s }, "", nil
	case "url":
		return s3URLEncode, "url", nil
	default:
		return nil, "", s3err.New(s3err.CodeInvalidArgument, "Invalid Encoding Method specified in Request")
	}
}

// s3URLEncode encodes like S3's encoding-type=url: every byte except the
// unreserved characters (A-Z a-z 0-9 - _ . ~) and '/' is percent-encoded
// with upper-case hex, a space as %20 (not '+', which a client decoding
// with a path unescaper would keep as a plus).
func s3URLEncode(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_', c == '.', c == '~', c == '/':
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}

// listing holds what both ListObjects versions parse from the request.
type listing struct {
	b       backend.Bucket
	enc     func(string) string
	encType string
	max     int
}

func (s *Server) listingFor(q *request) (listing, error) {
	var l listing
	var err error
	if l.b, err = s.bucketFor(q); err != nil {
		return l, err
	}
	if l.enc, l.encType, err = encoder(q.query); err != nil {
		return l, err
	}
	l.max, err = maxKeysParam(q.query, "max-keys")
	return l, err
}

// elems renders a page; owner is set on every object when non-nil.
func (l listing) elems(page listPage, who *owner) ([]objectElem, []prefixElem) {
	var objs []objectElem
	var prefixes []prefixElem
	for _, e := range page.objects {
		objs = append(objs, objectElem{Key: l.enc(e.Key), LastModified: s3Time(e.Info.ModTime),
			ETag: `"` + e.Info.ETag + `"`, Size: e.Info.Size, StorageClass: "STANDARD", Owner: who})
	}
	for _, p := range page.prefixes {
		prefixes = append(prefixes, prefixElem{Prefix: l.enc(p)})
	}
	return objs, prefixes
}

func (s *Server) listObjectsV2(q *request) error {
	l, err := s.listingFor(q)
	if err != nil {
		return err
	}
	prefix, delim, startAfter := q.query.Get("prefix"), q.query.Get("delimiter"), q.query.Get("start-after")
	token := q.query.Get("continuation-token")
	marker := startAfter
	if token != "" { // an empty continuation-token= is as if absent, as in S3
		raw, err := base64.RawURLEncoding.DecodeString(token)
		if err != nil {
			return s3err.New(s3err.CodeInvalidArgument, "The continuation token provided is incorrect")
		}
		marker = string(raw)
	}
	res := listBucketResultV2{Xmlns: s3NS, Name: l.b.Name(), Prefix: l.enc(prefix), Delimiter: l.enc(delim), MaxKeys: l.max,
		EncodingType: l.encType, StartAfter: l.enc(startAfter)}
	if q.query.Has("continuation-token") {
		res.ContinuationToken = &token // echoed as sent, an empty one too (S3 does)
	}
	if l.max > 0 {
		page, err := listBucket(q, l.b, prefix, delim, marker, l.max)
		if err != nil {
			return err
		}
		var who *owner
		if q.query.Get("fetch-owner") == "true" {
			who = &owner{ID: l.b.Owner(), DisplayName: l.b.Owner()}
		}
		res.Contents, res.CommonPrefixes = l.elems(page, who)
		res.KeyCount = len(page.objects) + len(page.prefixes)
		res.IsTruncated = page.truncated
		if page.truncated {
			res.NextContinuationToken = base64.RawURLEncoding.EncodeToString([]byte(page.last))
		}
	}
	writeXML(q.w, http.StatusOK, res)
	return nil
}

// nullVersion is the version id of an object written while versioning
// was never enabled (every object today).
const nullVersion = "null"

// listObjectVersions serves ListObjectVersions. A bucket without
// versioning holds one version per key, its "null" version, the latest:
// the listing is the bucket's keys in S3's order (key, then version,
// newest first), with delimiter, key-marker/version-id-marker paging,
// max-keys and encoding-type as S3 has them. Cleanup tools (boto3's
// bucket.object_versions.delete(), the aws CLI's version-aware removes)
// list versions first.
func (s *Server) listObjectVersions(q *request) error {
	l, err := s.listingFor(q)
	if err != nil {
		return err
	}
	prefix, delim := q.query.Get("prefix"), q.query.Get("delimiter")
	keyMarker, vidMarker := q.query.Get("key-marker"), q.query.Get("version-id-marker")
	if vidMarker != "" && keyMarker == "" {
		return s3err.New(s3err.CodeInvalidArgument, "A version-id marker cannot be specified without a key marker.")
	}
	res := listVersionsResult{Xmlns: s3NS, Name: l.b.Name(), Prefix: l.enc(prefix), Delimiter: l.enc(delim), MaxKeys: l.max,
		EncodingType: l.encType, KeyMarker: l.enc(keyMarker), VersionIDMarker: vidMarker}
	if l.max > 0 {
		who := &owner{ID: l.b.Owner(), DisplayName: l.b.Owner()}
		n := 0
		var last backend.VersionEntry
		opts := backend.VersionListOptions{Prefix: prefix, Delimiter: delim, KeyMarker: keyMarker, VersionIDMarker: vidMarker}
		for e, err := range l.b.ListVersions(q.r.Context(), opts) {
			if err != nil {
				return err
			}
			if n == l.max {
				res.IsTruncated = true
				res.NextKeyMarker = l.enc(last.Key)
				if !last.IsPrefix {
					res.NextVersionIDMarker = last.Info.VersionID
				}
				break
			}
			n++
			last = e
			switch {
			case e.IsPrefix:
				res.Entries = append(res.Entries, prefixEntry{Prefix: l.enc(e.Key)})
			case e.DeleteMarker:
				res.Entries = append(res.Entries, deleteMarkerElem{Key: l.enc(e.Key), VersionID: e.Info.VersionID, IsLatest: e.IsLatest,
					LastModified: s3Time(e.Info.ModTime), Owner: who})
			default:
				res.Entries = append(res.Entries, versionElem{Key: l.enc(e.Key), VersionID: e.Info.VersionID, IsLatest: e.IsLatest,
					LastModified: s3Time(e.Info.ModTime), ETag: `"` + e.Info.ETag + `"`, Size: e.Info.Size, Owner: who, StorageClass: "STANDARD"})
			}
		}
	}
	writeXML(q.w, http.StatusOK, res)
	return nil
}

func (s *Server) listObjectsV1(q *request) error {
	l, err := s.listingFor(q)
	if err != nil {
		return err
	}
	prefix, delim, marker := q.query.Get("prefix"), q.query.Get("delimiter"), q.query.Get("marker")
	res := listBucketResultV1{Xmlns: s3NS, Name: l.b.Name(), Prefix: l.enc(prefix), Delimiter: l.enc(delim), MaxKeys: l.max,
		EncodingType: l.encType, Marker: l.enc(marker)}
	if l.max > 0 {
		page, err := listBucket(q, l.b, prefix, delim, marker, l.max)
		if err != nil {
			return err
		}
		res.Contents, res.CommonPrefixes = l.elems(page, &owner{ID: l.b.Owner(), DisplayName: l.b.Owner()})
		res.IsTruncated = page.truncated
		if page.truncated {
			res.NextMarker = l.enc(page.last)
		}
	}
	writeXML(q.w, http.StatusOK, res)
	return nil
}

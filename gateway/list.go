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

// s3URLEncode encodes like S3's encoding-type=url: every byte except
// unreserved characters and '/' is percent-encoded, space as %20... S3
// encodes space as '+'; SDKs decode with url.QueryUnescape, so '+' works.
func s3URLEncode(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "%2F", "/")
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
	if l.b, err = s.bucketFor(q, false); err != nil {
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
	if _, ok := q.query["continuation-token"]; ok {
		raw, err := base64.RawURLEncoding.DecodeString(token)
		if err != nil || token == "" {
			return s3err.New(s3err.CodeInvalidArgument, "The continuation token provided is incorrect")
		}
		marker = string(raw)
	}
	res := listBucketResultV2{Xmlns: s3NS, Name: l.b.Name(), Prefix: l.enc(prefix), Delimiter: l.enc(delim), MaxKeys: l.max,
		EncodingType: l.encType, ContinuationToken: token, StartAfter: l.enc(startAfter)}
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

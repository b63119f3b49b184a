package gateway

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"
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
		return 0, errf(400, "InvalidArgument", "Provided %s not an integer or within integer range", name)
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
		return nil, "", errf(400, "InvalidArgument", "Invalid Encoding Method specified in Request")
	}
}

// s3URLEncode encodes like S3's encoding-type=url: every byte except
// unreserved characters and '/' is percent-encoded, space as %20... S3
// encodes space as '+'; SDKs decode with url.QueryUnescape, so '+' works.
func s3URLEncode(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "%2F", "/")
}

func (s *Server) listObjectsV2(q *request) error {
	b, err := s.bucketFor(q, false)
	if err != nil {
		return err
	}
	enc, encType, err := encoder(q.q)
	if err != nil {
		return err
	}
	max, err := maxKeysParam(q.q, "max-keys")
	if err != nil {
		return err
	}
	prefix, delim, startAfter := q.q.Get("prefix"), q.q.Get("delimiter"), q.q.Get("start-after")
	token := q.q.Get("continuation-token")
	marker := startAfter
	if _, ok := q.q["continuation-token"]; ok {
		raw, err := base64.RawURLEncoding.DecodeString(token)
		if err != nil || token == "" {
			return errf(400, "InvalidArgument", "The continuation token provided is incorrect")
		}
		marker = string(raw)
	}
	res := listBucketResultV2{Xmlns: s3NS, Name: b.Name, Prefix: enc(prefix), Delimiter: enc(delim), MaxKeys: max,
		EncodingType: encType, ContinuationToken: token, StartAfter: enc(startAfter)}
	if max > 0 {
		page, err := listBucket(q, b, prefix, delim, marker, max)
		if err != nil {
			return err
		}
		fetchOwner := q.q.Get("fetch-owner") == "true"
		for _, e := range page.objects {
			oe := objectElem{Key: enc(e.Key), LastModified: s3Time(e.Info.ModTime), ETag: `"` + e.Info.ETag + `"`, Size: e.Info.Size, StorageClass: "STANDARD"}
			if fetchOwner {
				oe.Owner = &owner{ID: b.Owner, DisplayName: b.Owner}
			}
			res.Contents = append(res.Contents, oe)
		}
		for _, p := range page.prefixes {
			res.CommonPrefixes = append(res.CommonPrefixes, prefixElem{Prefix: enc(p)})
		}
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
	b, err := s.bucketFor(q, false)
	if err != nil {
		return err
	}
	enc, encType, err := encoder(q.q)
	if err != nil {
		return err
	}
	max, err := maxKeysParam(q.q, "max-keys")
	if err != nil {
		return err
	}
	prefix, delim, marker := q.q.Get("prefix"), q.q.Get("delimiter"), q.q.Get("marker")
	res := listBucketResultV1{Xmlns: s3NS, Name: b.Name, Prefix: enc(prefix), Delimiter: enc(delim), MaxKeys: max,
		EncodingType: encType, Marker: enc(marker)}
	if max > 0 {
		page, err := listBucket(q, b, prefix, delim, marker, max)
		if err != nil {
			return err
		}
		for _, e := range page.objects {
			res.Contents = append(res.Contents, objectElem{Key: enc(e.Key), LastModified: s3Time(e.Info.ModTime),
				ETag: `"` + e.Info.ETag + `"`, Size: e.Info.Size, StorageClass: "STANDARD",
				Owner: &owner{ID: b.Owner, DisplayName: b.Owner}})
		}
		for _, p := range page.prefixes {
			res.CommonPrefixes = append(res.CommonPrefixes, prefixElem{Prefix: enc(p)})
		}
		res.IsTruncated = page.truncated
		if page.truncated {
			res.NextMarker = enc(page.last)
		}
	}
	writeXML(q.w, http.StatusOK, res)
	return nil
}

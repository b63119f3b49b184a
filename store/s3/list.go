package s3

import (
	"context"
	"fmt"
	"iter"
	"net/url"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/fedgate/fedgate/store"
)

// List streams ListObjectsV2 pages (1000 entries each), keys and common
// prefixes merged in byte order. Keys travel URL-encoded, so control
// characters survive XML. A common prefix at or before opts.StartAfter is
// left out (S3 returns one when keys folded into it sort after StartAfter),
// as is everything under StagingPrefix and MetaPrefix. Entry.Info has Key, Size, ModTime,
// Validator and the server's ETag (the S3-facing one except for objects
// written by a large Put, whose MD5 ETag is in a sidecar that List does not
// read: it would cost a request per object), and
// no Metadata.
//
// Errors (yielded, then the listing ends): ErrAccessDenied, ErrThrottled
// as the server says; ctx's error.
func (s *Store) List(ctx context.Context, opts store.ListOptions) iter.Seq2[store.Entry, error] {
	return func(yield func(store.Entry, error) bool) {
		if s.minioKeys {
			// Every key under a "directory" MinIO refuses is refused too: no
			// entries (MinIO would refuse the listing).
			if i := strings.LastIndexByte(opts.Prefix, '/'); i >= 0 && MinIORefuses(opts.Prefix[:i+1]+"x") {
				return
			}
		}
		in := &awss3.ListObjectsV2Input{Bucket: &s.bucket, EncodingType: types.EncodingTypeUrl}
		if opts.Prefix != "" {
			in.Prefix = &opts.Prefix
		}
		if opts.Delimiter != "" {
			in.Delimiter = &opts.Delimiter
		}
		if opts.StartAfter != "" {
			in.StartAfter = &opts.StartAfter
		}
		var page []store.Entry
		for {
			out, err := s.client.ListObjectsV2(ctx, in)
			if err != nil {
				yield(store.Entry{}, mapErr("list", opts.Prefix, err))
				return
			}
			page, err = s.entries(page[:0], out, opts.StartAfter)
			if err != nil {
				yield(store.Entry{}, err)
				return
			}
			for _, e := range page {
				if !yield(e, nil) {
					return
				}
			}
			if !aws.ToBool(out.IsTruncated) || aws.ToString(out.NextContinuationToken) == "" {
				return
			}
			in.ContinuationToken = out.NextContinuationToken
		}
	}
}

// entries decodes one page into es, in byte order, without the entries the
// contract leaves out.
func (s *Store) entries(es []store.Entry, out *awss3.ListObjectsV2Output, startAfter string) ([]store.Entry, error) {
	for _, o := range out.Contents {
		key, err := decodeKey(aws.ToString(o.Key))
		if err != nil {
			return nil, err
		}
		if key <= startAfter || reservedKey(key) {
			continue
		}
		v := unquoteETag(aws.ToString(o.ETag))
		es = append(es, store.Entry{Key: key, Info: store.ObjectInfo{
			Key: key, Size: aws.ToInt64(o.Size), ModTime: aws.ToTime(o.LastModified),
			ETag: v, Validator: store.Validator(v),
		}})
	}
	for _, p := range out.CommonPrefixes {
		key, err := decodeKey(aws.ToString(p.Prefix))
		if err != nil {
			return nil, err
		}
		if key <= startAfter || reservedKey(key) {
			continue
		}
		es = append(es, store.Entry{Key: key, IsPrefix: true})
	}
	slices.SortFunc(es, func(a, b store.Entry) int { return strings.Compare(a.Key, b.Key) })
	return es, nil
}

// decodeKey undoes encoding-type=url.
func decodeKey(k string) (string, error) {
	d, err := url.QueryUnescape(k)
	if err != nil {
		return "", fmt.Errorf("s3: list: undecodable key %q: %w", k, err)
	}
	return d, nil
}

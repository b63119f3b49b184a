package gateway_test

import (
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/fedgate/fedgate/gateway/gatewaytest"
	"github.com/fedgate/fedgate/store"
)

// listKeys are stored in every listing test; "B" sorts before "a" in byte
// order, "é" after every ASCII key.
var listKeys = []string{"B", "a", "a/1", "a/2", "a/b/3", "c d", "dir/x", "dir/y", "é"}

func listEnv(t *testing.T) *env {
	e := newEnv(t)
	e.bucket("bkt")
	for _, k := range listKeys {
		e.object("bkt", k, "data of "+k)
	}
	return e
}

// v2Page renders one page as keys then "prefix/(p)" entries.
func v2Page(out *s3.ListObjectsV2Output) []string {
	var got []string
	for _, o := range out.Contents {
		got = append(got, aws.ToString(o.Key))
	}
	for _, p := range out.CommonPrefixes {
		got = append(got, aws.ToString(p.Prefix)+"(p)")
	}
	return got
}

func v1Page(out *s3.ListObjectsOutput) []string {
	var got []string
	for _, o := range out.Contents {
		got = append(got, aws.ToString(o.Key))
	}
	for _, p := range out.CommonPrefixes {
		got = append(got, aws.ToString(p.Prefix)+"(p)")
	}
	return got
}

func TestListObjectsV2(t *testing.T) {
	e := listEnv(t)
	for _, tc := range []struct {
		name       string
		in         s3.ListObjectsV2Input
		want       []string
		truncated  bool
		wantCount  int32
		wantPrefix string
	}{
		{name: "all", want: listKeys, wantCount: 9},
		{name: "prefix", in: s3.ListObjectsV2Input{Prefix: aws.String("a/")}, want: []string{"a/1", "a/2", "a/b/3"}, wantCount: 3, wantPrefix: "a/"},
		{name: "delimiter", in: s3.ListObjectsV2Input{Delimiter: aws.String("/")},
			want: []string{"B", "a", "c d", "é", "a/(p)", "dir/(p)"}, wantCount: 6},
		{name: "prefix and delimiter", in: s3.ListObjectsV2Input{Prefix: aws.String("a/"), Delimiter: aws.String("/")},
			want: []string{"a/1", "a/2", "a/b/(p)"}, wantCount: 3, wantPrefix: "a/"},
		{name: "start after", in: s3.ListObjectsV2Input{StartAfter: aws.String("c d")}, want: []string{"dir/x", "dir/y", "é"}, wantCount: 3},
		{name: "max keys", in: s3.ListObjectsV2Input{MaxKeys: aws.Int32(2)}, want: []string{"B", "a"}, truncated: true, wantCount: 2},
		{name: "no match", in: s3.ListObjectsV2Input{Prefix: aws.String("zzz")}, want: nil, wantPrefix: "zzz"},
		{name: "encoding url", in: s3.ListObjectsV2Input{Prefix: aws.String("c"), EncodingType: types.EncodingTypeUrl},
			want: []string{"c%20d"}, wantCount: 1, wantPrefix: "c"},
		{name: "encoding url multibyte", in: s3.ListObjectsV2Input{StartAfter: aws.String("dir/y"), EncodingType: types.EncodingTypeUrl},
			want: []string{"%C3%A9"}, wantCount: 1},
		// S3 takes an empty continuation-token= as absent.
		{name: "empty continuation token", in: s3.ListObjectsV2Input{ContinuationToken: aws.String("")}, want: listKeys, wantCount: 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			in.Bucket = aws.String("bkt")
			out, err := e.root.ListObjectsV2(ctx, &in)
			noErr(t, err)
			if got := v2Page(out); !slices.Equal(got, tc.want) {
				t.Errorf("listed %q, want %q", got, tc.want)
			}
			if aws.ToBool(out.IsTruncated) != tc.truncated {
				t.Errorf("IsTruncated %v, want %v", aws.ToBool(out.IsTruncated), tc.truncated)
			}
			if aws.ToInt32(out.KeyCount) != tc.wantCount {
				t.Errorf("KeyCount %d, want %d", aws.ToInt32(out.KeyCount), tc.wantCount)
			}
			if aws.ToString(out.Prefix) != tc.wantPrefix {
				t.Errorf("Prefix %q, want %q", aws.ToString(out.Prefix), tc.wantPrefix)
			}
			if aws.ToString(out.Name) != "bkt" {
				t.Errorf("Name %q, want bkt", aws.ToString(out.Name))
			}
		})
	}

	t.Run("object fields", func(t *testing.T) {
		out, err := e.root.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("bkt"), Prefix: aws.String("dir/x")})
		noErr(t, err)
		_, info, _ := e.fake.Object("bkt", "dir/x")
		if len(out.Contents) != 1 {
			t.Fatalf("listed %d objects, want 1", len(out.Contents))
		}
		o := out.Contents[0]
		if aws.ToString(o.ETag) != `"`+info.ETag+`"` || aws.ToInt64(o.Size) != info.Size ||
			!aws.ToTime(o.LastModified).Equal(info.ModTime.Truncate(1e6)) || o.StorageClass != types.ObjectStorageClassStandard {
			t.Errorf("object %s %d %v %s, want %q %d %v STANDARD", aws.ToString(o.ETag), aws.ToInt64(o.Size), o.LastModified,
				o.StorageClass, info.ETag, info.Size, info.ModTime)
		}
		if o.Owner != nil {
			t.Errorf("owner %+v without fetch-owner", o.Owner)
		}
	})

	for _, delim := range []string{"", "/"} {
		t.Run("paginate delimiter "+delim, func(t *testing.T) {
			var got []string
			pages := 0
			p := s3.NewListObjectsV2Paginator(e.root, &s3.ListObjectsV2Input{Bucket: aws.String("bkt"),
				Delimiter: aws.String(delim), MaxKeys: aws.Int32(2)})
			for p.HasMorePages() {
				out, err := p.NextPage(ctx)
				noErr(t, err)
				pages++
				got = append(got, v2Page(out)...)
			}
			want := listKeys
			if delim != "" {
				want = []string{"B", "a", "a/(p)", "c d", "dir/(p)", "é"}
				slices.Sort(got) // a page lists its keys before its prefixes
				slices.Sort(want)
			}
			if !slices.Equal(got, want) {
				t.Errorf("pages listed %q, want %q", got, want)
			}
			if wantPages := (len(want) + 1) / 2; pages != wantPages {
				t.Errorf("%d pages, want %d", pages, wantPages)
			}
		})
	}

	t.Run("errors", func(t *testing.T) {
		_, err := e.root.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("missing")})
		wantErr(t, err, "NoSuchBucket", 404)
		_, err = e.user.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("bkt")})
		wantErr(t, err, "AccessDenied", 403)
		_, err = e.root.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("bkt"), ContinuationToken: aws.String("!!not base64!!")})
		wantErr(t, err, "InvalidArgument", 400)
		_, err = e.root.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("bkt"), EncodingType: "bogus"})
		wantErr(t, err, "InvalidArgument", 400)
		_, err = e.root.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("bkt"), MaxKeys: aws.Int32(-1)})
		wantErr(t, err, "InvalidArgument", 400)
		e.fake.Fail(gatewaytest.OpList, store.ErrThrottled)
		defer e.fake.Fail(gatewaytest.OpList, nil)
		_, err = e.root.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("bkt")})
		wantErr(t, err, "SlowDown", 503)
	})
}

func TestListObjectsV2FetchOwner(t *testing.T) {
	e := listEnv(t)
	out, err := e.root.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("bkt"), FetchOwner: aws.Bool(true), MaxKeys: aws.Int32(1)})
	noErr(t, err)
	if len(out.Contents) != 1 || out.Contents[0].Owner == nil || aws.ToString(out.Contents[0].Owner.ID) != "root" {
		t.Fatalf("contents %+v, want one object owned by root", out.Contents)
	}
}

func TestListObjectsV1(t *testing.T) {
	e := listEnv(t)
	for _, tc := range []struct {
		name       string
		in         s3.ListObjectsInput
		want       []string
		truncated  bool
		nextMarker string
	}{
		{name: "all", want: listKeys},
		{name: "prefix and delimiter", in: s3.ListObjectsInput{Prefix: aws.String("a"), Delimiter: aws.String("/")},
			want: []string{"a", "a/(p)"}},
		{name: "marker", in: s3.ListObjectsInput{Marker: aws.String("c d")}, want: []string{"dir/x", "dir/y", "é"}},
		{name: "max keys", in: s3.ListObjectsInput{MaxKeys: aws.Int32(3)}, want: []string{"B", "a", "a/1"}, truncated: true, nextMarker: "a/1"},
		{name: "page ends on a prefix", in: s3.ListObjectsInput{Delimiter: aws.String("/"), MaxKeys: aws.Int32(3)},
			want: []string{"B", "a", "a/(p)"}, truncated: true, nextMarker: "a/"},
		{name: "marker on a prefix", in: s3.ListObjectsInput{Delimiter: aws.String("/"), Marker: aws.String("a/")},
			want: []string{"c d", "é", "dir/(p)"}},
		{name: "encoding url", in: s3.ListObjectsInput{Prefix: aws.String("c "), EncodingType: types.EncodingTypeUrl},
			want: []string{"c%20d"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			in.Bucket = aws.String("bkt")
			out, err := e.root.ListObjects(ctx, &in)
			noErr(t, err)
			if got := v1Page(out); !slices.Equal(got, tc.want) {
				t.Errorf("listed %q, want %q", got, tc.want)
			}
			if aws.ToBool(out.IsTruncated) != tc.truncated || aws.ToString(out.NextMarker) != tc.nextMarker {
				t.Errorf("IsTruncated %v NextMarker %q, want %v %q", aws.ToBool(out.IsTruncated), aws.ToString(out.NextMarker),
					tc.truncated, tc.nextMarker)
			}
			for _, o := range out.Contents {
				if o.Owner == nil || aws.ToString(o.Owner.ID) != "root" {
					t.Errorf("object %s has owner %+v, want root", aws.ToString(o.Key), o.Owner)
				}
			}
		})
	}
	t.Run("errors", func(t *testing.T) {
		_, err := e.root.ListObjects(ctx, &s3.ListObjectsInput{Bucket: aws.String("missing")})
		wantErr(t, err, "NoSuchBucket", 404)
		_, err = e.user.ListObjects(ctx, &s3.ListObjectsInput{Bucket: aws.String("bkt")})
		wantErr(t, err, "AccessDenied", 403)
		_, err = e.root.ListObjects(ctx, &s3.ListObjectsInput{Bucket: aws.String("bkt"), MaxKeys: aws.Int32(-1)})
		wantErr(t, err, "InvalidArgument", 400)
	})
	t.Run("read grant", func(t *testing.T) {
		e.grant("bkt", "read")
		out, err := e.user.ListObjects(ctx, &s3.ListObjectsInput{Bucket: aws.String("bkt"), MaxKeys: aws.Int32(1)})
		noErr(t, err)
		if got := v1Page(out); !slices.Equal(got, []string{"B"}) {
			t.Errorf("alice lists %q, want [B]", got)
		}
	})
}

// ListObjectVersions on a bucket without versioning: every object is its
// "null" version, the latest, listed in key order with prefixes, paging
// by key-marker and version-id-marker, and URL encoding.
func TestListObjectVersionsUnversioned(t *testing.T) {
	e := newEnv(t)
	e.bucket("bkt")
	for _, k := range []string{"a/1", "a/2", "b", "c d"} {
		e.object("bkt", k, "v-"+k)
	}
	list := func(in s3.ListObjectVersionsInput) *s3.ListObjectVersionsOutput {
		t.Helper()
		in.Bucket = aws.String("bkt")
		out, err := e.root.ListObjectVersions(ctx, &in)
		noErr(t, err)
		return out
	}
	out := list(s3.ListObjectVersionsInput{})
	var keys []string
	for _, v := range out.Versions {
		keys = append(keys, aws.ToString(v.Key))
		if aws.ToString(v.VersionId) != "null" || !aws.ToBool(v.IsLatest) || aws.ToInt64(v.Size) == 0 || aws.ToString(v.ETag) == "" {
			t.Errorf("version %+v: want VersionId null, IsLatest, a size and an ETag", v)
		}
	}
	if !slices.Equal(keys, []string{"a/1", "a/2", "b", "c d"}) || len(out.DeleteMarkers) != 0 || aws.ToBool(out.IsTruncated) {
		t.Fatalf("versions %v (truncated %v), want every key once", keys, aws.ToBool(out.IsTruncated))
	}
	out = list(s3.ListObjectVersionsInput{Delimiter: aws.String("/")})
	if len(out.CommonPrefixes) != 1 || aws.ToString(out.CommonPrefixes[0].Prefix) != "a/" || len(out.Versions) != 2 {
		t.Fatalf("with a delimiter: %d versions, prefixes %+v", len(out.Versions), out.CommonPrefixes)
	}
	// Paging two at a time.
	var paged []string
	var km, vm *string
	for range 5 {
		out = list(s3.ListObjectVersionsInput{MaxKeys: aws.Int32(2), KeyMarker: km, VersionIdMarker: vm})
		for _, v := range out.Versions {
			paged = append(paged, aws.ToString(v.Key))
		}
		if !aws.ToBool(out.IsTruncated) {
			break
		}
		km, vm = out.NextKeyMarker, out.NextVersionIdMarker
		if aws.ToString(vm) != "null" {
			t.Fatalf("NextVersionIdMarker %q, want null", aws.ToString(vm))
		}
	}
	if !slices.Equal(paged, []string{"a/1", "a/2", "b", "c d"}) {
		t.Fatalf("paged %v", paged)
	}
	out = list(s3.ListObjectVersionsInput{Prefix: aws.String("c"), EncodingType: types.EncodingTypeUrl})
	if len(out.Versions) != 1 || aws.ToString(out.Versions[0].Key) != "c%20d" {
		t.Fatalf("url-encoded: %+v", out.Versions)
	}
	_, err := e.root.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String("bkt"), VersionIdMarker: aws.String("null")})
	wantErr(t, err, "InvalidArgument", 400)
}

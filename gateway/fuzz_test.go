package gateway

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParseRange: any header against any size either yields a range inside
// the object, nil (whole object), or InvalidRange — never a panic or a range
// past the end.
func FuzzParseRange(f *testing.F) {
	for _, s := range []string{"bytes=0-0", "bytes=10-", "bytes=-5", "bytes=5-1", "bytes=0-1,3-4", "bytes= 1 - 2", "items=0-1", "bytes=-0", "bytes=99999999999999999999-"} {
		f.Add(s, int64(100))
	}
	f.Fuzz(func(t *testing.T, h string, size int64) {
		if size < 0 {
			size = -size
			if size < 0 {
				size = 0
			}
		}
		r, err := parseRange(h, size)
		switch {
		case err != nil:
			if !errors.Is(err, errInvalidRange) {
				t.Fatalf("parseRange(%q, %d): unexpected error %v", h, size, err)
			}
		case r != nil:
			if r.Start < 0 || r.Length <= 0 || r.Start+r.Length > size {
				t.Fatalf("parseRange(%q, %d) = %+v: outside the object", h, size, *r)
			}
		}
	})
}

// FuzzCompleteMultipartXML: the CompleteMultipartUpload body decoder never
// panics and only fails with MalformedXML.
func FuzzCompleteMultipartXML(f *testing.F) {
	f.Add([]byte(`<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>"a"</ETag></Part></CompleteMultipartUpload>`))
	f.Add([]byte(`<CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Part><ETag>x</ETag><PartNumber>2</PartNumber></Part></CompleteMultipartUpload>`))
	f.Add([]byte(`<CompleteMultipartUpload><Part><PartNumber>x</PartNumber></Part>`))
	f.Add([]byte(`<a></a><b></b>`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, data []byte) {
		var v completeMultipartUpload
		if err := decodeXML(data, &v); err != nil && err != errMalformedXML {
			t.Fatalf("unexpected error %v", err)
		}
	})
}

// FuzzDeleteObjectsXML: the DeleteObjects body decoder never panics and only
// fails with MalformedXML.
func FuzzDeleteObjectsXML(f *testing.F) {
	f.Add([]byte(`<Delete><Quiet>true</Quiet><Object><Key>a</Key></Object><Object><Key>b/c</Key><VersionId>null</VersionId></Object></Delete>`))
	f.Add([]byte(`<?xml version="1.0"?><Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Object><Key>&lt;x&gt;</Key></Object></Delete>`))
	f.Add([]byte(`<Delete><Object><Key>a</Key></Object></Delete>trailing`))
	f.Add([]byte(`<Delete><Quiet>maybe</Quiet></Delete>`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var v deleteRequest
		if err := decodeXML(data, &v); err != nil && err != errMalformedXML {
			t.Fatalf("unexpected error %v", err)
		}
		for _, o := range v.Objects {
			_ = checkKey(o.Key)
			_ = strings.Count(o.Key, "/")
		}
	})
}

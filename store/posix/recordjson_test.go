package posix

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/fedgate/fedgate/store"
)

func testRecords() []record {
	return []record{
		{},
		{Size: 0, meta: meta{ETag: `"d41d8cd98f00b204e9800998ecf8427e"`}},
		{Size: 1 << 40, meta: meta{ETag: `"abc-3"`, MetaJSON: store.MetaJSON{
			ContentType: "text/plain; charset=utf-8", CacheControl: "max-age=60", ContentDisposition: `attachment; filename="é.txt"`,
			ContentEncoding: "gzip", ContentLanguage: "fr", Expires: "Thu, 01 Dec 2094 16:00:00 GMT",
			User:      map[string]string{"owner": "ünïcode", "x": ""},
			Checksums: map[string]string{"crc32c": "AAAAAA=="},
		}}},
		{Size: -1, meta: meta{ETag: "x", MetaJSON: store.MetaJSON{User: map[string]string{"a<b": "c&d"}}}}, // json escapes < and &
		{Size: 5, Key: []byte("k\x00\xff")},
	}
}

// The records the store writes take the fast path and decode as
// encoding/json decodes them.
func TestDecodeRecordFast(t *testing.T) {
	fast := 0
	for _, r := range testRecords() {
		js, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var want record
		if err := json.Unmarshal(js, &want); err != nil {
			t.Fatal(err)
		}
		got, err := decodeRecord(js)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("decodeRecord(%s) = %+v, %v; want %+v", js, got, err, want)
		}
		if _, ok := decodeRecordFast(js); ok {
			fast++
		}
	}
	if want := len(testRecords()) - 1; fast != want { // the one with a key falls back
		t.Errorf("%d records took the fast path, want %d", fast, want)
	}
	for _, js := range []string{`{"size":1,"size":2}`, `{"Size":1}`, `{"size":1.0}`, `{"size":01}`, `{"etag":null}`,
		`{"etag":"\ud800"}`, `{"etag":"\x"}`, `{"user":{"a":"b","a":"c"}}`, "{\"etag\":\"\xff\"}", `{"size":1}x`, `{"size":99999999999999999999}`, ``} {
		if r, ok := decodeRecordFast([]byte(js)); ok {
			t.Errorf("decodeRecordFast(%q) = %+v, want a fall back to encoding/json", js, r)
		}
	}
}

// Whatever the fast path accepts, encoding/json accepts and decodes the same.
func FuzzDecodeRecord(f *testing.F) {
	for _, r := range testRecords() {
		js, _ := json.Marshal(r)
		f.Add(js)
	}
	f.Add([]byte(` { "size" : 12 , "user" : { } , "etag" : "" } `))
	f.Add([]byte(`{"size":-0,"checksums":{"a":"b"}}`))
	f.Add([]byte(`{"etag":"\"\\\/\b\f\n\r\t\u00e9\u2028"}`))
	f.Fuzz(func(t *testing.T, js []byte) {
		got, ok := decodeRecordFast(js)
		if !ok {
			return
		}
		var want record
		if err := json.Unmarshal(js, &want); err != nil {
			t.Fatalf("fast path took %q, encoding/json: %v", js, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: fast %+v, encoding/json %+v", js, got, want)
		}
	})
}

package gateway

import (
	"net/http"
	"testing"
	"time"

	"github.com/fedgate/fedgate/store"
)

func TestCheckConditionsPrecedence(t *testing.T) {
	mod := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	info := store.ObjectInfo{ETag: "abc", ModTime: mod.Add(300 * time.Millisecond)}
	before, after := mod.Add(-time.Hour).Format(http.TimeFormat), mod.Add(time.Hour).Format(http.TimeFormat)
	at := mod.Format(http.TimeFormat)
	for _, tc := range []struct {
		name string
		h    map[string]string
		want error
	}{
		{"none", nil, nil},
		{"if-match hit", map[string]string{"If-Match": `"abc"`}, nil},
		{"if-match list", map[string]string{"If-Match": `"x", "abc"`}, nil},
		{"if-match star", map[string]string{"If-Match": `*`}, nil},
		{"if-match miss", map[string]string{"If-Match": `"x"`}, errPrecondition},
		{"if-match wins over unmodified-since", map[string]string{"If-Match": `"abc"`, "If-Unmodified-Since": before}, nil},
		{"unmodified-since fails", map[string]string{"If-Unmodified-Since": before}, errPrecondition},
		{"unmodified-since same second", map[string]string{"If-Unmodified-Since": at}, nil},
		{"none-match hit", map[string]string{"If-None-Match": `"abc"`}, errNotModified},
		{"none-match miss", map[string]string{"If-None-Match": `"x"`}, nil},
		{"none-match miss wins over modified-since", map[string]string{"If-None-Match": `"x"`, "If-Modified-Since": after}, nil},
		{"modified-since not modified", map[string]string{"If-Modified-Since": after}, errNotModified},
		{"modified-since same second", map[string]string{"If-Modified-Since": at}, errNotModified},
		{"modified-since modified", map[string]string{"If-Modified-Since": before}, nil},
		{"unparsable date ignored", map[string]string{"If-Modified-Since": "yesterday"}, nil},
	} {
		h := http.Header{}
		for k, v := range tc.h {
			h.Set(k, v)
		}
		if got := checkConditions(h, "", info); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	// A copy source never answers 304: its If-None-Match hit is a 412.
	h := http.Header{}
	h.Set("x-amz-copy-source-If-None-Match", `"abc"`)
	if got := checkConditions(h, "x-amz-copy-source-", info); got != errPrecondition {
		t.Errorf("copy source if-none-match: %v", got)
	}
}

func TestParseRange(t *testing.T) {
	for _, tc := range []struct {
		h          string
		size       int64
		start, len int64
		whole, bad bool
	}{
		{h: "bytes=0-9", size: 100, start: 0, len: 10},
		{h: "bytes=90-", size: 100, start: 90, len: 10},
		{h: "bytes=-10", size: 100, start: 90, len: 10},
		{h: "bytes=-1000", size: 100, start: 0, len: 100},
		{h: "bytes=50-1000", size: 100, start: 50, len: 50},
		{h: "bytes=100-", size: 100, bad: true},
		{h: "bytes=-0", size: 100, bad: true},
		{h: "bytes=0-0", size: 0, bad: true},
		{h: "bytes=9-1", size: 100, whole: true},
		{h: "bytes=0-1,5-6", size: 100, whole: true},
		{h: "items=0-1", size: 100, whole: true},
		{h: "bytes=+1-2", size: 100, whole: true},
		{h: "", size: 100, whole: true},
	} {
		r, err := parseRange(tc.h, tc.size)
		switch {
		case tc.bad:
			if err != errInvalidRange {
				t.Errorf("%q/%d: %v %v, want InvalidRange", tc.h, tc.size, r, err)
			}
		case tc.whole:
			if r != nil || err != nil {
				t.Errorf("%q/%d: %v %v, want whole object", tc.h, tc.size, r, err)
			}
		default:
			if err != nil || r == nil || r.Start != tc.start || r.Length != tc.len {
				t.Errorf("%q/%d: %+v %v, want %d+%d", tc.h, tc.size, r, err, tc.start, tc.len)
			}
		}
	}
}

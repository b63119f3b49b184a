package versiontest

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

const nullID = "null"

// entry is one version, delete marker or common prefix of a listing.
type entry struct {
	Key    string
	ID     string
	Marker bool
	Prefix bool // a CommonPrefix; Key is the prefix
	Latest bool
	ETag   string // versions only
	Size   int64  // versions only
}

func (e entry) String() string {
	switch {
	case e.Prefix:
		return e.Key + "(prefix)"
	case e.Marker:
		return keyID(e.Key, e.ID) + "(marker)" + star(e.Latest)
	}
	return keyID(e.Key, e.ID) + star(e.Latest)
}

func star(latest bool) string {
	if latest {
		return "*"
	}
	return ""
}

func (e entry) same(o entry) bool {
	return e.Key == o.Key && e.ID == o.ID && e.Marker == o.Marker && e.Prefix == o.Prefix
}

// model is what a bucket should hold: for each key, its versions and
// delete markers, newest first.
type model struct{ keys map[string][]entry }

func newModel() *model { return &model{keys: map[string][]entry{}} }

// push adds e as key's newest version. A null version or marker replaces
// the key's previous null one (S3's Suspended state).
func (m *model) push(key string, e entry) {
	e.Key = key
	vs := m.keys[key]
	if e.ID == nullID {
		vs = slices.DeleteFunc(vs, func(o entry) bool { return o.ID == nullID })
	}
	m.keys[key] = append([]entry{e}, vs...)
}

// pushOldest adds e as key's oldest version (an object from before
// versioning).
func (m *model) pushOldest(key string, e entry) {
	e.Key = key
	m.keys[key] = append(m.keys[key], e)
}

func (m *model) find(key, id string) (entry, bool) {
	for _, e := range m.keys[key] {
		if e.ID == id {
			return e, true
		}
	}
	return entry{}, false
}

func (m *model) has(key, id string) bool { _, ok := m.find(key, id); return ok }

func (m *model) drop(key, id string) {
	m.keys[key] = slices.DeleteFunc(m.keys[key], func(e entry) bool { return e.ID == id })
	if len(m.keys[key]) == 0 {
		delete(m.keys, key)
	}
}

// current lists the keys whose newest version is an object (what
// ListObjectsV2 shows) under prefix, rolled up at delim.
func (m *model) current(prefix, delim string) []string {
	var out []string
	for _, k := range m.sortedKeys() {
		if !strings.HasPrefix(k, prefix) || m.keys[k][0].Marker {
			continue
		}
		if p, ok := rollUp(k, prefix, delim); ok {
			if len(out) == 0 || out[len(out)-1] != p {
				out = append(out, p)
			}
			continue
		}
		out = append(out, k)
	}
	return out
}

func (m *model) sortedKeys() []string {
	keys := make([]string, 0, len(m.keys))
	for k := range m.keys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// rollUp is the common prefix key falls in, if any.
func rollUp(key, prefix, delim string) (string, bool) {
	if delim == "" {
		return "", false
	}
	i := strings.Index(key[len(prefix):], delim)
	if i < 0 {
		return "", false
	}
	return key[:len(prefix)+i+len(delim)], true
}

// list is ListObjectVersions' answer in S3's order: keys ascending, each
// key's versions and markers newest first; common prefixes in key order.
func (m *model) list(prefix, delim string) []entry {
	var out []entry
	for _, k := range m.sortedKeys() {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		if p, ok := rollUp(k, prefix, delim); ok {
			if len(out) == 0 || !out[len(out)-1].Prefix || out[len(out)-1].Key != p {
				out = append(out, entry{Key: p, Prefix: true})
			}
			continue
		}
		for i, e := range m.keys[k] {
			e.Latest = i == 0
			out = append(out, e)
		}
	}
	return out
}

// checkList pages through ListObjectVersions with prefix, delim and
// maxKeys (0: the server's default) and checks it against m: the same
// entries in the same order, IsLatest on each key's newest, the ETags and
// sizes written. Within one page, Versions, DeleteMarkers and
// CommonPrefixes are separate lists, so each must be in order and together
// they must be exactly the next entries of the whole listing.
func (tg Target) checkList(t *testing.T, m *model, prefix, delim string, maxKeys int32) {
	t.Helper()
	tg.checkListing(t, m, prefix, delim, maxKeys, true)
}

// checkListing is checkList, checking the IsLatest flags only when latest.
func (tg Target) checkListing(t *testing.T, m *model, prefix, delim string, maxKeys int32, latest bool) {
	t.Helper()
	want := m.list(prefix, delim)
	what := fmt.Sprintf("ListObjectVersions prefix=%q delimiter=%q max-keys=%d", prefix, delim, maxKeys)
	in := &s3.ListObjectVersionsInput{Bucket: &tg.Bucket}
	if prefix != "" {
		in.Prefix = &prefix
	}
	if delim != "" {
		in.Delimiter = &delim
	}
	if maxKeys > 0 {
		in.MaxKeys = &maxKeys
	}
	var got []entry // in the order the pages placed them
	for page := 0; ; page++ {
		if page > len(want)+1 {
			t.Fatalf("%s: still truncated after %d pages (want %d entries)", what, page, len(want))
		}
		out, err := tg.Client.ListObjectVersions(ctx(t), in)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		var vs, ms, ps []entry
		for _, v := range out.Versions {
			vs = append(vs, entry{Key: aws.ToString(v.Key), ID: aws.ToString(v.VersionId), Latest: aws.ToBool(v.IsLatest),
				ETag: aws.ToString(v.ETag), Size: aws.ToInt64(v.Size)})
		}
		for _, d := range out.DeleteMarkers {
			ms = append(ms, entry{Key: aws.ToString(d.Key), ID: aws.ToString(d.VersionId), Latest: aws.ToBool(d.IsLatest), Marker: true})
		}
		for _, p := range out.CommonPrefixes {
			ps = append(ps, entry{Key: aws.ToString(p.Prefix), Prefix: true})
		}
		n := len(vs) + len(ms) + len(ps)
		truncated := aws.ToBool(out.IsTruncated)
		pageDump := fmt.Sprintf("page %d: versions %v, markers %v, prefixes %v; so far %v; want %v", page, vs, ms, ps, got, want)
		if maxKeys > 0 && n > int(maxKeys) {
			t.Fatalf("%s: %d entries on one page; %s", what, n, pageDump)
		}
		if n == 0 && truncated {
			t.Fatalf("%s: an empty page that is truncated; %s", what, pageDump)
		}
		pos := len(got)
		placed := make([]entry, n)
		for _, list := range [][]entry{vs, ms, ps} {
			last := -1
			for _, e := range list {
				i := slices.IndexFunc(want, func(w entry) bool { return w.same(e) })
				if i < pos || i >= pos+n || i <= last || placed[i-pos].Key != "" {
					t.Fatalf("%s: %v is not where S3 lists it; %s", what, e, pageDump)
				}
				last = i
				placed[i-pos] = e
			}
		}
		got = append(got, placed...)
		if !truncated {
			break
		}
		if aws.ToString(out.NextKeyMarker) == "" {
			t.Fatalf("%s: truncated without NextKeyMarker; %s", what, pageDump)
		}
		in.KeyMarker, in.VersionIdMarker = out.NextKeyMarker, out.NextVersionIdMarker
	}
	if len(got) != len(want) {
		t.Fatalf("%s: listed %v, want %v", what, got, want)
	}
	for i, g := range got {
		w := want[i]
		if latest && g.Latest != w.Latest {
			t.Fatalf("%s: %v has IsLatest %v, want %v; listed %v", what, g, g.Latest, w.Latest, got)
		}
		if !w.Marker && !w.Prefix && (g.ETag != w.ETag || g.Size != w.Size) {
			t.Fatalf("%s: %v has ETag %s size %d, want %s %d", what, g, g.ETag, g.Size, w.ETag, w.Size)
		}
	}
}

// checkCurrent checks ListObjectsV2 (prefix, delim) against m: the keys
// whose newest version is an object, and the common prefixes of those only.
func (tg Target) checkCurrent(t *testing.T, m *model, prefix, delim string) {
	t.Helper()
	what := fmt.Sprintf("ListObjectsV2 prefix=%q delimiter=%q", prefix, delim)
	in := &s3.ListObjectsV2Input{Bucket: &tg.Bucket}
	if prefix != "" {
		in.Prefix = &prefix
	}
	if delim != "" {
		in.Delimiter = &delim
	}
	var keys, prefixes []string
	p := s3.NewListObjectsV2Paginator(tg.Client, in)
	for p.HasMorePages() {
		out, err := p.NextPage(ctx(t))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
		for _, c := range out.CommonPrefixes {
			prefixes = append(prefixes, aws.ToString(c.Prefix))
		}
	}
	// Contents and CommonPrefixes are separate lists: merge them in key
	// order to compare with the model.
	got := append(keys, prefixes...)
	sort.Strings(got)
	if want := m.current(prefix, delim); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
}

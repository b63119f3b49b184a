package posix

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/fedgate/fedgate/store"
)

// A listing's entries are what Stat says of each object, whichever way
// the object keeps its metadata, and the fast path (listInfo) answers for
// the objects whose record is in the extended attribute and leaves the
// others to the ordinary path.
func TestListInfoMatchesStat(t *testing.T) {
	s := newAt(t, t.TempDir())
	ctx := t.Context()
	rich := store.Metadata{ContentType: "text/plain; charset=utf-8", CacheControl: "max-age=60",
		ContentDisposition: `attachment; filename="é <&> .txt"`, ContentEncoding: "gzip", ContentLanguage: "fr",
		Expires: "Thu, 01 Dec 2094 16:00:00 GMT", User: map[string]string{"a": "\"quoted\"\n", "b": ""},
		Checksums: map[string]string{"CRC32C": "AAAAAA=="}}
	fast := map[string]bool{}
	put := func(key, body string, md store.Metadata) {
		t.Helper()
		if _, err := s.Put(ctx, key, strings.NewReader(body), int64(len(body)), store.PutOptions{Metadata: md}); err != nil {
			t.Fatal(err)
		}
	}
	put("d/plain", "", store.Metadata{})
	fast["d/plain"] = true
	put("d/rich", "some bytes", rich)
	fast["d/rich"] = true
	put("d/big-meta", "x", secretMeta(8000)) // too large for ext4's attributes: a record file
	writeFormat1(t, s, "d/old", "format one", rich)

	var n int
	for e, err := range s.List(ctx, store.ListOptions{Prefix: "d/"}) {
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		n++
		want, err := s.Stat(ctx, e.Key)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(e.Info, want) {
			t.Errorf("List entry %+v\nStat             %+v", e.Info, want)
		}
		p := objectFile(t, s, e.Key)
		dirfd, err := unix.Open(filepath.Dir(p), unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		info, ok := s.listInfo(dirfd, filepath.Base(p), e.Key, make([]byte, 2048))
		unix.Close(dirfd)
		if ok != fast[e.Key] || (ok && !reflect.DeepEqual(info, want)) {
			t.Errorf("listInfo(%s) = %+v, %v; want %+v, %v", e.Key, info, ok, want, fast[e.Key])
		}
	}
	if n != 4 {
		t.Errorf("listed %d objects, want 4", n)
	}
}

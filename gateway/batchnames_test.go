package gateway_test

import (
	"archive/tar"
	"bytes"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fedgate/fedgate/gateway"
	"github.com/fedgate/fedgate/store"
)

// safeTarName: a name that no extractor writes outside its folder: local
// (filepath.IsLocal), and no "." or ".." segment with "/" or "\" as
// separators (so Windows extraction does not climb either), no NUL.
func safeTarName(t *testing.T, name string) {
	t.Helper()
	if !filepath.IsLocal(name) || strings.IndexByte(name, 0) >= 0 {
		t.Errorf("tar name %q is not local", name)
	}
	for _, seg := range strings.FieldsFunc(name, func(r rune) bool { return r == '/' || r == '\\' }) {
		if seg == "." || seg == ".." {
			t.Errorf("tar name %q has a %q segment", name, seg)
		}
	}
}

// TestBatchTarNamesStayLocal: keys and buckets with "."/".." segments, a
// leading "/", NUL and backslashes never become tar names that climb,
// whether the entry is sent or answered as __errors__/.
func TestBatchTarNamesStayLocal(t *testing.T) {
	e, _ := batchEnv(t, gateway.BatchConfig{})
	e.bucket("ds")
	e.bucket("shared")
	e.object("ds", "/abs/key", "abs")
	e.object("ds", `..\..\win.txt`, "win")
	e.object("ds", `a\.\b`, "dot")
	e.object("ds", "plain/x.jpg", "plain")
	tarB, _, _, _ := makeShards(t)
	e.fake.PutObject("ds", "shard.tar", tarB, store.Metadata{})
	entries := []gateway.BatchEntry{
		{Bucket: "shared", Key: "../../../x.txt"},
		{Bucket: "shared", Key: "../../../../../../tmp/x.txt"},
		{Bucket: "ds", Key: "./a"},
		{Bucket: "ds", Key: "a/."},
		{Bucket: "ds", Key: "a/../../.."},
		{Bucket: "..", Key: "x"},
		{Bucket: "../..", Key: "../x"},
		{Bucket: "/", Key: "etc/passwd"},
		{Bucket: "/etc", Key: "passwd"},
		{Bucket: "ds", Key: "/abs/key"},
		{Bucket: "ds", Key: "/../../x"},
		{Bucket: "ds", Key: "a\x00/../../../x"},
		{Bucket: "ds", Key: `..\..\win.txt`},
		{Bucket: "ds", Key: `a\.\b`},
		{Bucket: "ds", Key: "shard.tar", ArchPath: "/000002.cls"},
		{Bucket: "ds", Key: "plain/x.jpg"},
	}
	resp, body := e.rootBatch(gateway.BatchRequest{ContinueOnError: true, Entries: entries})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	tr := tar.NewReader(bytes.NewReader(body))
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		noErr(t, err)
		safeTarName(t, h.Name)
		names = append(names, h.Name)
	}
	if len(names) != len(entries) {
		t.Fatalf("%d entries in the answer, want %d: %q", len(names), len(entries), names)
	}
	for i, want := range []string{
		"__errors__/shared/%2E%2E/%2E%2E/%2E%2E/x.txt",
		"__errors__/shared/%2E%2E/%2E%2E/%2E%2E/%2E%2E/%2E%2E/%2E%2E/tmp/x.txt",
		"__errors__/ds/%2E/a",
		"__errors__/ds/a/%2E",
		"__errors__/ds/a/%2E%2E/%2E%2E/%2E%2E",
		"__errors__/%2E%2E/x",
		"__errors__/%2E%2E/%2E%2E/%2E%2E/x",
		"__errors__/%2F/etc/passwd",
		"__errors__/%2Fetc/passwd",
		"ds//abs/key",
		"__errors__/ds//%2E%2E/%2E%2E/x",
		"__errors__/ds/a%00/%2E%2E/%2E%2E/%2E%2E/x",
		`ds/%2E%2E\%2E%2E\win.txt`,
		`ds/a\%2E\b`,
		"ds/shard.tar/000002.cls",
		"ds/plain/x.jpg",
	} {
		if names[i] != want {
			t.Errorf("entry %d (%q): named %q, want %q", i, entries[i].Key, names[i], want)
		}
		if got := gateway.BatchEntryName(entries[i]); strings.TrimPrefix(names[i], "__errors__/") != got {
			t.Errorf("entry %d: named %q, BatchEntryName says %q", i, names[i], got)
		}
	}

	// Without continue_on_error such an entry refuses the batch as a
	// plain S3 error: no tar at all.
	resp, body = e.rootBatch(gateway.BatchRequest{Entries: []gateway.BatchEntry{{Bucket: "shared", Key: "../../../x.txt"}}})
	wantBatchErr(t, resp, body, "InvalidArgument", http.StatusBadRequest)
	// An archpath with a ".." segment is refused as a whole batch.
	resp, body = e.rootBatch(gateway.BatchRequest{ContinueOnError: true, Entries: []gateway.BatchEntry{{Bucket: "ds", Key: "shard.tar", ArchPath: "x/../../../y"}}})
	wantBatchErr(t, resp, body, "InvalidRequest", http.StatusBadRequest)
}

// FuzzBatchEntryName: whatever an entry names, its tar name and its
// __errors__/ name are local.
func FuzzBatchEntryName(f *testing.F) {
	for _, s := range [][3]string{{"ds", "../../x", ""}, {"..", "/x", "./y"}, {"/", `..\a`, ""}, {"b", "k\x00", "/"}} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, bucket, key, archpath string) {
		if bucket == "" || key == "" {
			return // refused before a name is made
		}
		n := gateway.BatchEntryName(gateway.BatchEntry{Bucket: bucket, Key: key, ArchPath: archpath})
		safeTarName(t, n)
		safeTarName(t, gateway.BatchErrorsDir+"/"+n)
	})
}

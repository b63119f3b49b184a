package regionstate

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestUploadsAfter checks the ordered upload index against a sort of every
// session: each (prefix, marker, max) gives the same sessions in the same
// order, and paging by the last result's (key, id) visits every session
// once. Aborts and completions leave the index.
func TestUploadsAfter(t *testing.T) {
	f := newTestFSM(t, t.TempDir())
	rng := rand.New(rand.NewPCG(1, 2))
	var cmds []Command
	for i := range 600 {
		cmds = append(cmds, CreateUpload{Upload: MultipartUpload{
			ID:      fmt.Sprintf("u%03d", rng.IntN(1000)*1000+i),
			Bucket:  []string{"a", "b", "c"}[rng.IntN(3)],
			Key:     []string{"x", "x/1", "x/2", "y", "ya", "z"}[rng.IntN(6)],
			Created: t0.Add(time.Duration(rng.IntN(4)) * time.Second), // ties on purpose
		}})
	}
	for i, r := range applyFSM(t, f, 1, cmds...) {
		if r != nil {
			t.Fatalf("command %d: %v", i, r)
		}
	}
	var drop []Command
	for _, c := range cmds[:100] {
		drop = append(drop, AbortUpload{UploadID: c.(CreateUpload).Upload.ID})
	}
	applyFSM(t, f, uint64(len(cmds)+1), drop...)
	s := f.state

	var all []MultipartUpload
	for _, c := range cmds[100:] {
		u := c.(CreateUpload).Upload
		u.Created = u.Created.UTC()
		all = append(all, u)
	}
	slices.SortFunc(all, func(a, b MultipartUpload) int {
		return cmp.Or(strings.Compare(a.Bucket, b.Bucket), strings.Compare(a.Key, b.Key),
			a.Created.Compare(b.Created), strings.Compare(a.ID, b.ID))
	})
	ids := func(ups []MultipartUpload) []string {
		var out []string
		for _, u := range ups {
			out = append(out, u.ID)
		}
		return out
	}
	// want follows the gateway's marker rules over the fully sorted list.
	want := func(bucket, prefix, key, id string) []MultipartUpload {
		var in []MultipartUpload
		for _, u := range all {
			if u.Bucket == bucket && strings.HasPrefix(u.Key, prefix) {
				in = append(in, u)
			}
		}
		i := 0
		if key != "" {
			for i < len(in) && in[i].Key < key {
				i++
			}
			if id == "" {
				for i < len(in) && in[i].Key == key {
					i++
				}
			} else {
				for j := i; j < len(in) && in[j].Key == key; j++ {
					if in[j].ID == id {
						i = j + 1
						break
					}
				}
			}
		}
		return in[i:]
	}
	if got := ids(s.Uploads("", "")); !slices.Equal(got, ids(all)) {
		t.Fatalf("all uploads: %d, want %d in order", len(got), len(all))
	}
	for _, bucket := range []string{"a", "b", "c", "d"} {
		for _, prefix := range []string{"", "x", "x/", "y", "q"} {
			markers := [][2]string{{"", ""}, {"x", ""}, {"x/1", ""}, {"y", "nope"}, {"w", ""}, {"zz", ""}}
			for _, u := range want(bucket, prefix, "", "") {
				markers = append(markers, [2]string{u.Key, u.ID})
			}
			for _, m := range markers {
				w := ids(want(bucket, prefix, m[0], m[1]))
				if got := ids(s.UploadsAfter(bucket, prefix, m[0], m[1], -1)); !slices.Equal(got, w) {
					t.Fatalf("UploadsAfter(%q, %q, %q, %q): %q, want %q", bucket, prefix, m[0], m[1], got, w)
				}
				if got := ids(s.UploadsAfter(bucket, prefix, m[0], m[1], 3)); !slices.Equal(got, w[:min(3, len(w))]) {
					t.Fatalf("UploadsAfter(%q, %q, %q, %q, 3): %q, want %q", bucket, prefix, m[0], m[1], got, w[:min(3, len(w))])
				}
			}
			// Paging by the last result visits each session once.
			var paged []string
			key, id := "", ""
			for {
				page := s.UploadsAfter(bucket, prefix, key, id, 7)
				paged = append(paged, ids(page)...)
				if len(page) < 7 {
					break
				}
				key, id = page[len(page)-1].Key, page[len(page)-1].ID
			}
			if w := ids(want(bucket, prefix, "", "")); !slices.Equal(paged, w) {
				t.Fatalf("paging %q %q: %d sessions, want %d", bucket, prefix, len(paged), len(w))
			}
		}
	}
}

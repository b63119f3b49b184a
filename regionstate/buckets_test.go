package regionstate

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
)

// visibleRef is VisibleBuckets the slow way: every bucket, filtered.
func visibleRef(s *State, user string, root bool, prefix, after string) []string {
	var out []string
	for _, b := range s.Buckets() {
		if strings.HasPrefix(b.Name, prefix) && b.Name > after && (root || s.CanRead(user, b.Name)) {
			out = append(out, b.Name)
		}
	}
	return out
}

// page collects at most limit names from VisibleBuckets.
func page(s *State, user string, root bool, prefix, after string, limit int) []string {
	var out []string
	for b := range s.VisibleBuckets(user, root, prefix, after) {
		if len(out) == limit {
			break
		}
		out = append(out, b.Name)
	}
	return out
}

func TestVisibleBuckets(t *testing.T) {
	f := newTestFSM(t, t.TempDir())
	cmds := []Command{
		PutUser{User: User{Name: "admin", AccessKey: "AKADMIN", SecretKey: "s", Root: true}},
		PutUser{User: User{Name: "alice", AccessKey: "AKALICE", SecretKey: "s"}},
		PutUser{User: User{Name: "bob", AccessKey: "AKBOB", SecretKey: "s"}},
		PutUser{User: User{Name: "carol", AccessKey: "AKCAROL", SecretKey: "s"}},
	}
	owners := []string{"alice", "bob", "admin"}
	for i := range 300 {
		cmds = append(cmds, CreateBucket{Bucket: Bucket{Name: fmt.Sprintf("b%d-%03d", i%3, i), Owner: owners[i%3], Store: "posix"}})
	}
	// bob reads some of alice's buckets, writes one of admin's, holds a
	// grant on a name never created and one on a bucket he owns; carol
	// only holds grants; a grant on a deleted bucket goes with it.
	cmds = append(cmds,
		Grant{User: "bob", Bucket: "b0-000", Perm: PermRead},
		Grant{User: "bob", Bucket: "b0-150", Perm: PermWrite},
		Grant{User: "bob", Bucket: "b2-002", Perm: PermWrite},
		Grant{User: "bob", Bucket: "b1-001", Perm: PermRead},
		Grant{User: "bob", Bucket: "never", Perm: PermRead},
		Grant{User: "carol", Bucket: "b0-003", Perm: PermRead},
		Grant{User: "carol", Bucket: "b1-004", Perm: PermRead},
		Grant{User: "carol", Bucket: "b0-297", Perm: PermRead},
		DeleteBucket{Name: "b0-297"},
		CreateBucket{Bucket: Bucket{Name: "b0-297", Owner: "alice", Store: "posix"}}, // carol's grant went with the old one
	)
	noErrors(t, applyFSM(t, f, 1, cmds...))
	s := f.state
	type view struct {
		user string
		root bool
	}
	views := []view{{"admin", false}, {"alice", false}, {"bob", false}, {"carol", false}, {"nobody", false}, {"nobody", true}}
	for _, v := range views {
		for _, prefix := range []string{"", "b0", "b1-0", "b2-29", "zz"} {
			for _, after := range []string{"", "b0-000", "b0-150", "b1-1", "b2-299", "a"} {
				want := visibleRef(s, v.user, v.root, prefix, after)
				if got := page(s, v.user, v.root, prefix, after, -1); !slices.Equal(got, want) {
					t.Fatalf("%+v prefix %q after %q:\n got %v\nwant %v", v, prefix, after, got, want)
				}
			}
			// Paging through in pages of 7 gives the whole list.
			want := visibleRef(s, v.user, v.root, prefix, "")
			var got []string
			for after := ""; ; {
				p := page(s, v.user, v.root, prefix, after, 7)
				got = append(got, p...)
				if len(p) < 7 {
					break
				}
				after = p[len(p)-1]
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%+v prefix %q paged:\n got %v\nwant %v", v, prefix, got, want)
			}
		}
	}
	if got := page(s, "carol", false, "", "", -1); !slices.Equal(got, []string{"b0-003", "b1-004"}) {
		t.Fatalf("carol sees %v", got)
	}
	if got := len(page(s, "bob", false, "", "", -1)); got != 100+3 {
		t.Fatalf("bob sees %d buckets, want his 100 and 3 granted", got)
	}
	// The same state from a snapshot and from the file.
	g := newTestFSM(t, t.TempDir())
	if err := g.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, f)))); err != nil {
		t.Fatal(err)
	}
	for _, v := range views {
		if got, want := page(g.state, v.user, v.root, "", "", -1), page(s, v.user, v.root, "", "", -1); !slices.Equal(got, want) {
			t.Fatalf("%+v after restore:\n got %v\nwant %v", v, got, want)
		}
	}
}

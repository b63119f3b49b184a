package federation_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/federation"
	"github.com/fedgate/fedgate/gateway"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/regionstate"
	"github.com/fedgate/fedgate/store"
)

// TestListBucketsPagedThroughGateway pages ListBuckets with the SDK's
// paginator through the gateway and a real namespace (region state, the
// policy file's buckets among the created ones) for root and for a user who
// owns one bucket in nine and holds grants on a few others: every bucket the
// caller may read once, in order, in pages of max-buckets, and no other.
func TestListBucketsPagedThroughGateway(t *testing.T) {
	ctx := context.Background()
	node := openState(t)
	pol := &policies.Policy{Buckets: []policies.Bucket{{Name: "b-0500p"}, {Name: "zz-policy"}}}
	ns, err := federation.New(federation.Config{State: node, Stores: map[string]store.Store{"local": posixStore(t, "local", testLoc)},
		DefaultStore: "local", Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	root := federation.Credentials{AccessKey: "ROOTLISTKEY000000001", SecretKey: "root-list-secret-0123456789abcdef"}
	if err := ns.Users().EnsureRoot(ctx, root); err != nil {
		t.Fatal(err)
	}
	alice := federation.Credentials{AccessKey: "ALICELISTKEY00000001", SecretKey: "alice-list-secret-0123456789abcdef"}
	if _, err := ns.Users().Add(ctx, "alice", alice); err != nil {
		t.Fatal(err)
	}
	const n = 2500
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				owner := federation.User{Name: federation.RootUser, Root: true}
				if i%9 == 0 {
					owner = federation.User{Name: "alice"}
				}
				if err := ns.CreateBucket(ctx, owner, fmt.Sprintf("b-%04d", i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	rootUser := federation.User{Name: federation.RootUser, Root: true}
	for _, name := range []string{"b-0001", "b-1300", "b-0500p"} {
		b, err := ns.Bucket(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := ns.Users().Grant(ctx, rootUser, "alice", b, "read"); err != nil {
			t.Fatal(err)
		}
	}
	var all, alices []string
	for i := range n {
		name := fmt.Sprintf("b-%04d", i)
		all = append(all, name)
		if i%9 == 0 || i == 1 || i == 1300 {
			alices = append(alices, name)
		}
		if i == 500 {
			all = append(all, "b-0500p")
			alices = append(alices, "b-0500p")
		}
	}
	all = append(all, "zz-policy")

	srv, err := gateway.New(gateway.Config{Backend: ns.Backend()})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	client := func(c federation.Credentials) *s3.Client {
		return s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(hs.URL), UsePathStyle: true,
			Credentials: credentials.NewStaticCredentialsProvider(c.AccessKey, c.SecretKey, "")})
	}
	list := func(c *s3.Client, in *s3.ListBucketsInput) (names []string, pages int) {
		t.Helper()
		p := s3.NewListBucketsPaginator(c, in)
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			max := aws.ToInt32(in.MaxBuckets)
			if n := int32(len(page.Buckets)); max > 0 && (n > max || n < max && page.ContinuationToken != nil) {
				t.Fatalf("max-buckets %d: a page of %d, token %v", max, n, page.ContinuationToken)
			}
			for _, b := range page.Buckets {
				names = append(names, aws.ToString(b.Name))
			}
			pages++
		}
		return names, pages
	}
	for _, tc := range []struct {
		who  string
		c    *s3.Client
		want []string
	}{{"root", client(root), all}, {"alice", client(alice), alices}} {
		if got, _ := list(tc.c, &s3.ListBucketsInput{}); !slices.Equal(got, tc.want) {
			t.Errorf("%s unpaged: %d buckets, want %d", tc.who, len(got), len(tc.want))
		}
		for _, max := range []int32{1000, 7, 10000} {
			got, pages := list(tc.c, &s3.ListBucketsInput{MaxBuckets: aws.Int32(max)})
			if want := (len(tc.want) + int(max) - 1) / int(max); !slices.Equal(got, tc.want) || pages != want {
				t.Errorf("%s max-buckets %d: %d buckets in %d pages, want %d in %d", tc.who, max, len(got), pages, len(tc.want), want)
			}
		}
		var want []string
		for _, name := range tc.want {
			if strings.HasPrefix(name, "b-05") {
				want = append(want, name)
			}
		}
		if got, _ := list(tc.c, &s3.ListBucketsInput{Prefix: aws.String("b-05"), MaxBuckets: aws.Int32(9)}); !slices.Equal(got, want) {
			t.Errorf("%s prefix b-05: %q, want %q", tc.who, got, want)
		}
	}
}

// TestGrantDoesNotOutliveItsBucket: a grant on a policy-file bucket stays
// in the region state when the bucket leaves the policy file (no
// DeleteBucket removes it); a bucket another user then creates under the
// name must not be readable, nor listed, for the old grantee.
func TestGrantDoesNotOutliveItsBucket(t *testing.T) {
	ctx := context.Background()
	node := openState(t)
	stores := map[string]store.Store{"local": posixStore(t, "local", testLoc)}
	ns, err := federation.New(federation.Config{State: node, Stores: stores, DefaultStore: "local",
		Policy: &policies.Policy{Buckets: []policies.Bucket{{Name: "shared"}}}})
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"alice", "bob"} {
		c := federation.Credentials{AccessKey: fmt.Sprintf("GRANTKEY%012d", i), SecretKey: "grant-secret-0123456789abcdef-" + name}
		if _, err := ns.Users().Add(ctx, name, c); err != nil {
			t.Fatal(err)
		}
	}
	rootUser := federation.User{Name: federation.RootUser, Root: true}
	bob, alice := federation.User{Name: "bob"}, federation.User{Name: "alice"}
	b, err := ns.Bucket("shared")
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.Users().Grant(ctx, rootUser, "bob", b, "read"); err != nil {
		t.Fatal(err)
	}
	if got := bucketNames(ns.ListBuckets(bob)); !slices.Equal(got, []string{"shared"}) {
		t.Fatalf("bob lists %v with his grant on the policy file's bucket", got)
	}
	if err := ns.ApplyPolicy(&policies.Policy{}, stores, "local", 2); err != nil {
		t.Fatal(err)
	}
	if err := ns.CreateBucket(ctx, alice, "shared"); err != nil {
		t.Fatal(err)
	}
	if got := bucketNames(ns.ListBuckets(bob)); len(got) != 0 {
		t.Fatalf("bob lists %v: the grant on the old bucket carried over to alice's new one", got)
	}
	if page, _ := ns.ListBucketsPage(bob, "", "", 10); len(page) != 0 {
		t.Fatalf("bob's page holds %v", bucketNames(page))
	}
	nb, err := ns.Bucket("shared")
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.Authorize(bob, nb, false); err == nil {
		t.Fatal("bob may read alice's new bucket through the old bucket's grant")
	}
}

func bucketNames(bs []*federation.Bucket) []string {
	var out []string
	for _, b := range bs {
		out = append(out, b.Name)
	}
	return out
}

// TestGrantOnStaleBucketHandle: an owner's grant checked against their
// bucket must not land on a bucket another user created under the name
// after the owner's was deleted (the handle is stale by the time the
// grant applies).
func TestGrantOnStaleBucketHandle(t *testing.T) {
	ctx := context.Background()
	node := openState(t)
	ns, err := federation.New(federation.Config{State: node, Stores: map[string]store.Store{"local": posixStore(t, "local", testLoc)},
		DefaultStore: "local", Policy: &policies.Policy{}})
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"alice", "bob", "carol"} {
		c := federation.Credentials{AccessKey: fmt.Sprintf("STALEKEY%012d", i), SecretKey: "stale-secret-0123456789abcdef-" + name}
		if _, err := ns.Users().Add(ctx, name, c); err != nil {
			t.Fatal(err)
		}
	}
	alice, bob, carol := federation.User{Name: "alice"}, federation.User{Name: "bob"}, federation.User{Name: "carol"}
	if err := ns.CreateBucket(ctx, alice, "xbucket"); err != nil {
		t.Fatal(err)
	}
	stale, err := ns.Bucket("xbucket")
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.DeleteBucket(ctx, stale); err != nil {
		t.Fatal(err)
	}
	// Deleted, not yet recreated: nothing to grant on.
	if err := ns.Users().Grant(ctx, alice, "carol", stale, "read"); !errors.Is(err, federation.ErrNoSuchBucket) {
		t.Fatalf("grant on a deleted bucket: %v, want ErrNoSuchBucket", err)
	}
	if err := ns.CreateBucket(ctx, bob, "xbucket"); err != nil {
		t.Fatal(err)
	}
	if err := ns.Users().Grant(ctx, alice, "carol", stale, "read"); !errors.Is(err, federation.ErrNoSuchBucket) {
		t.Fatalf("alice's grant through her stale handle on bob's new bucket: %v, want ErrNoSuchBucket", err)
	}
	if got := bucketNames(ns.ListBuckets(carol)); len(got) != 0 {
		t.Fatalf("carol lists %v", got)
	}
	// Through a fresh handle the owner grants as before.
	cur, err := ns.Bucket("xbucket")
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.Users().Grant(ctx, bob, "carol", cur, "read"); err != nil {
		t.Fatal(err)
	}
	if got := bucketNames(ns.ListBuckets(carol)); !slices.Equal(got, []string{"xbucket"}) {
		t.Fatalf("carol lists %v after bob's grant", got)
	}
}

// TestListBucketsPageModel pages ListBucketsPage for several users with
// every page size 1..6 and a few prefixes, the policy file's buckets among
// the region's, and compares the pages put together with the buckets the
// user may read (Authorize over every bucket); the bucket a page ended on
// is deleted before the next page is read, and nothing is skipped or
// repeated for it.
func TestListBucketsPageModel(t *testing.T) {
	ctx := context.Background()
	node := openState(t)
	pol := &policies.Policy{Buckets: []policies.Bucket{{Name: "aaa-policy"}, {Name: "b-05p"}, {Name: "b-17p"}, {Name: "zzz-policy"}}}
	ns, err := federation.New(federation.Config{State: node, Stores: map[string]store.Store{"local": posixStore(t, "local", testLoc)},
		DefaultStore: "local", Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	users := []federation.User{{Name: federation.RootUser, Root: true}, {Name: "alice"}, {Name: "bob"}, {Name: "carol"}}
	for i, u := range users[1:] {
		c := federation.Credentials{AccessKey: fmt.Sprintf("PAGEKEY%013d", i), SecretKey: "page-secret-0123456789abcdef-" + u.Name}
		if _, err := ns.Users().Add(ctx, u.Name, c); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 30 {
		if err := ns.CreateBucket(ctx, users[i%3], fmt.Sprintf("b-%02d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range []struct{ user, bucket string }{{"carol", "b-04"}, {"carol", "b-05p"}, {"carol", "b-22"}, {"bob", "b-01"}, {"bob", "zzz-policy"}} {
		b, err := ns.Bucket(g.bucket)
		if err != nil {
			t.Fatal(err)
		}
		if err := ns.Users().Grant(ctx, users[0], g.user, b, "read"); err != nil {
			t.Fatal(err)
		}
	}
	readable := func(u federation.User, prefix string) []string {
		var out []string
		for _, b := range ns.ListBuckets(users[0]) {
			if strings.HasPrefix(b.Name, prefix) && ns.Authorize(u, b, false) == nil {
				out = append(out, b.Name)
			}
		}
		return out
	}
	for _, u := range users {
		for _, prefix := range []string{"", "b-0", "b-1", "zzz", "none"} {
			want := readable(u, prefix)
			for size := 1; size <= 6; size++ {
				var got []string
				after := ""
				for range 100 {
					page, more := ns.ListBucketsPage(u, prefix, after, size)
					if len(page) > size || (more && len(page) < size) {
						t.Fatalf("%s prefix %q size %d: a page of %d, more %v", u.Name, prefix, size, len(page), more)
					}
					got = append(got, bucketNames(page)...)
					if !more {
						break
					}
					after = page[len(page)-1].Name
				}
				if !slices.Equal(got, want) {
					t.Fatalf("%s prefix %q size %d:\n got %v\nwant %v", u.Name, prefix, size, got, want)
				}
			}
		}
	}
	// The bucket a page ends on goes before the next page is read.
	page, more := ns.ListBucketsPage(users[0], "b-1", "", 3)
	if !more || len(page) != 3 {
		t.Fatalf("first page %v, more %v", bucketNames(page), more)
	}
	last := page[2]
	if last.Global {
		t.Fatalf("page ends on the policy file's %s", last.Name)
	}
	if err := ns.DeleteBucket(ctx, last); err != nil {
		t.Fatal(err)
	}
	rest, _ := ns.ListBucketsPage(users[0], "b-1", last.Name, -1)
	if got, want := append(bucketNames(page), bucketNames(rest)...), append(readable(users[0], "b-1")[:2], last.Name); !slices.Equal(got[:3], want) || slices.Contains(got[3:], last.Name) || len(got) != len(readable(users[0], "b-1"))+1 {
		t.Fatalf("pages across a deleted bucket: %v", got)
	}
}

// TestRemovedUserNameDoesNotInheritBuckets: buckets are owned by name, so
// a user who owns buckets cannot be removed (a user added later under the
// name would own them), and removing works once they are gone.
func TestRemovedUserNameDoesNotInheritBuckets(t *testing.T) {
	ctx := context.Background()
	node := openState(t)
	stores := map[string]store.Store{"local": posixStore(t, "local", testLoc)}
	ns, err := federation.New(federation.Config{State: node, Stores: stores, DefaultStore: "local"})
	if err != nil {
		t.Fatal(err)
	}
	c := federation.Credentials{AccessKey: "OWNERKEY000000000001", SecretKey: "owner-secret-0123456789abcdef"}
	if _, err := ns.Users().Add(ctx, "alice", c); err != nil {
		t.Fatal(err)
	}
	alice := federation.User{Name: "alice"}
	if err := ns.CreateBucket(ctx, alice, "alices-data"); err != nil {
		t.Fatal(err)
	}
	err = ns.Users().Remove(ctx, "alice")
	if !errors.Is(err, federation.ErrUserOwnsBuckets) || !strings.Contains(err.Error(), "alices-data") {
		t.Fatalf("removing a user who owns a bucket: %v, want ErrUserOwnsBuckets naming alices-data", err)
	}
	if _, ok := ns.Users().ByAccessKey(c.AccessKey); !ok {
		t.Fatal("the refused removal removed alice's keys")
	}
	b, err := ns.Bucket("alices-data")
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.DeleteBucket(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := ns.Users().Remove(ctx, "alice"); err != nil {
		t.Fatalf("removing alice once her bucket is gone: %v", err)
	}
	// A name that still owns buckets (left by an older version, which
	// removed owners) is not given to a new user.
	if err := node.Apply(ctx, regionstate.PutUser{User: regionstate.User{Name: "carol", AccessKey: "CAROLKEY000000000001", SecretKey: "carol-secret-0123456789abcdef"}}); err != nil {
		t.Fatal(err)
	}
	if err := ns.CreateBucket(ctx, federation.User{Name: "carol"}, "carols-data"); err != nil {
		t.Fatal(err)
	}
	if err := node.Apply(ctx, regionstate.DeleteUser{Name: "carol"}); err != nil {
		t.Fatal(err)
	}
	_, err = ns.Users().Add(ctx, "carol", federation.Credentials{})
	if !errors.Is(err, federation.ErrUserOwnsBuckets) {
		t.Fatalf("adding a user under a name that owns buckets: %v, want ErrUserOwnsBuckets", err)
	}
}

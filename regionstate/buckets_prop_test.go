package regionstate

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
)

// bucketModel is the buckets, users and grants of a region the obvious
// way: plain maps, every query a scan.
type bucketModel struct {
	users   map[string]bool           // name -> root
	buckets map[string]string         // name -> owner
	grants  map[string]map[string]int // user -> bucket -> level
}

func newBucketModel() *bucketModel {
	return &bucketModel{users: map[string]bool{}, buckets: map[string]string{}, grants: map[string]map[string]int{}}
}

// apply mirrors the FSM's rules for the commands the property test sends.
func (m *bucketModel) apply(c Command) {
	switch c := c.(type) {
	case PutUser:
		if _, ok := m.users[c.User.Name]; ok && !c.Replace {
			return
		}
		m.users[c.User.Name] = c.User.Root
	case DeleteUser:
		if _, ok := m.users[c.Name]; ok {
			delete(m.users, c.Name)
			delete(m.grants, c.Name)
		}
	case CreateBucket:
		if _, ok := m.buckets[c.Bucket.Name]; !ok {
			m.buckets[c.Bucket.Name] = c.Bucket.Owner
			for user := range m.grants { // a new bucket is its owner's alone
				m.setGrant(user, c.Bucket.Name, 0)
			}
		}
	case DeleteBucket:
		if _, ok := m.buckets[c.Name]; ok {
			delete(m.buckets, c.Name)
			for _, g := range m.grants {
				delete(g, c.Name)
			}
		}
	case Grant:
		if _, ok := m.users[c.User]; ok {
			m.setGrant(c.User, c.Bucket, c.Perm.level())
		}
	case Revoke:
		if _, ok := m.users[c.User]; ok {
			cur := m.grants[c.User][c.Bucket]
			m.setGrant(c.User, c.Bucket, max(0, min(cur, c.Perm.level()-1)))
		}
	}
}

func (m *bucketModel) setGrant(user, bucket string, level int) {
	if m.grants[user] == nil {
		m.grants[user] = map[string]int{}
	}
	if level == 0 {
		delete(m.grants[user], bucket)
	} else {
		m.grants[user][bucket] = level
	}
	if len(m.grants[user]) == 0 {
		delete(m.grants, user)
	}
}

func (m *bucketModel) visible(user string, root bool, prefix, after string) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(m.buckets)) {
		if !strings.HasPrefix(name, prefix) || name <= after {
			continue
		}
		if root || m.users[user] || m.buckets[name] == user || m.grants[user][name] >= 1 {
			out = append(out, name)
		}
	}
	return out
}

// randomBucketCommand draws one command over a few users and bucket names
// (few, so that names are deleted, recreated by another owner and granted
// while they do not exist).
func randomBucketCommand(r *rand.Rand, users, names []string) Command {
	user := users[r.IntN(len(users))]
	name := names[r.IntN(len(names))]
	perms := []Perm{PermRead, PermWrite, ""}
	switch r.IntN(10) {
	case 0:
		return PutUser{User: User{Name: user, AccessKey: "AK" + user, SecretKey: "s", Root: r.IntN(5) == 0}, Replace: true}
	case 1:
		return DeleteUser{Name: user, Force: true}
	case 2, 3, 4:
		return CreateBucket{Bucket: Bucket{Name: name, Owner: user, Store: "posix", Prefix: name + "/"}}
	case 5, 6:
		return DeleteBucket{Name: name}
	case 7, 8:
		return Grant{User: user, Bucket: name, Perm: perms[r.IntN(2)]}
	default:
		return Revoke{User: user, Bucket: name, Perm: perms[r.IntN(3)]}
	}
}

// catalogIndexes is a catalog's bucket and grant tables with their
// indexes, as plain maps.
type catalogIndexes struct {
	Buckets  []string
	ByOwner  map[string][]string
	Grants   map[string]map[string]Perm
	Grantees map[string]map[string]Perm
}

func indexesOf(c *catalog) catalogIndexes {
	x := catalogIndexes{ByOwner: map[string][]string{}, Grants: map[string]map[string]Perm{}, Grantees: map[string]map[string]Perm{}}
	for name := range c.buckets.all() {
		x.Buckets = append(x.Buckets, name)
	}
	for owner, owned := range c.byOwner.all() {
		for name := range owned.all() {
			x.ByOwner[owner] = append(x.ByOwner[owner], name)
		}
	}
	for user, g := range c.grants.all() {
		x.Grants[user] = map[string]Perm{}
		for b, p := range g.all() {
			x.Grants[user][b] = p
		}
	}
	for bucket, g := range c.grantees.all() {
		x.Grantees[bucket] = maps.Collect(g.all())
	}
	return x
}

// checkIndexes fails unless byOwner and grantees are what buckets and
// grants say they are.
func checkIndexes(t *testing.T, what string, c *catalog) {
	t.Helper()
	x := indexesOf(c)
	owners := map[string][]string{}
	for _, b := range c.buckets.all() {
		owners[b.Owner] = append(owners[b.Owner], b.Name)
	}
	if !reflect.DeepEqual(x.ByOwner, owners) {
		t.Fatalf("%s: byOwner %v, the buckets say %v", what, x.ByOwner, owners)
	}
	inverted := map[string]map[string]Perm{}
	for user, g := range x.Grants {
		if len(g) == 0 {
			t.Fatalf("%s: user %q holds an empty grant map", what, user)
		}
		for b, p := range g {
			if inverted[b] == nil {
				inverted[b] = map[string]Perm{}
			}
			inverted[b][user] = p
		}
	}
	if !reflect.DeepEqual(x.Grantees, inverted) {
		t.Fatalf("%s: grantees %v, the grants say %v", what, x.Grantees, inverted)
	}
}

// TestVisibleBucketsModel applies random runs of user, bucket and grant
// commands and compares, after every batch, VisibleBuckets (whole lists
// and pages) with the model, checks the per-owner and per-bucket indexes
// against the tables they index, and checks that a snapshot restored
// and the reopened file give the same tables and indexes.
func TestVisibleBucketsModel(t *testing.T) {
	users := []string{"u0", "u1", "u2", "u3"}
	var names []string
	for i := range 40 { // > 32: the sorted map has branch nodes
		names = append(names, fmt.Sprintf("b%d-%02d", i%3, i))
	}
	views := append(slices.Clone(users), "nobody")
	prefixes := []string{"", "b0", "b1-1", "b2-", "zz"}
	for seed := range uint64(6) {
		r := rand.New(rand.NewPCG(seed, 1))
		dir := t.TempDir()
		f := newTestFSM(t, dir)
		m := newBucketModel()
		index := uint64(1)
		for batch := range 40 {
			cmds := make([]Command, 1+r.IntN(20))
			for i := range cmds {
				cmds[i] = randomBucketCommand(r, users, names)
				m.apply(cmds[i])
			}
			applyFSM(t, f, index, cmds...)
			index += uint64(len(cmds))
			what := fmt.Sprintf("seed %d batch %d", seed, batch)
			checkIndexes(t, what, f.state.load())
			for _, u := range users {
				want := map[string]Perm{}
				for b, l := range m.grants[u] {
					want[b] = permOf(l)
				}
				got := f.state.Grants(u)
				if got == nil {
					got = map[string]Perm{}
				}
				if !maps.Equal(got, want) {
					t.Fatalf("%s: %s's grants %v, want %v", what, u, got, want)
				}
			}
			for _, v := range views {
				for _, root := range []bool{false, true} {
					prefix := prefixes[r.IntN(len(prefixes))]
					after := ""
					if r.IntN(2) == 0 {
						after = names[r.IntN(len(names))]
					}
					want := m.visible(v, root, prefix, after)
					if got := page(f.state, v, root, prefix, after, -1); !slices.Equal(got, want) {
						t.Fatalf("%s: %s root=%v prefix %q after %q:\n got %v\nwant %v", what, v, root, prefix, after, got, want)
					}
					// Pages of 1..5 put back together give the whole list.
					size := 1 + r.IntN(5)
					var got []string
					for after := after; ; {
						p := page(f.state, v, root, prefix, after, size)
						got = append(got, p...)
						if len(p) < size {
							break
						}
						after = p[len(p)-1]
					}
					if !slices.Equal(got, want) {
						t.Fatalf("%s: %s root=%v prefix %q paged by %d:\n got %v\nwant %v", what, v, root, prefix, size, got, want)
					}
				}
			}
		}
		want := indexesOf(f.state.load())
		g := newTestFSM(t, t.TempDir())
		if err := g.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, f)))); err != nil {
			t.Fatal(err)
		}
		if got := indexesOf(g.state.load()); !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: after restore:\n got %+v\nwant %+v", seed, got, want)
		}
		f.close()
		h := newTestFSM(t, dir)
		if got := indexesOf(h.state.load()); !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: reopened file:\n got %+v\nwant %+v", seed, got, want)
		}
	}
}

// TestVisibleBucketsWhileApplying reads pages from published states
// while the FSM applies bucket and grant commands (run with -race): a
// page read from one state is sorted and never changes afterwards.
func TestVisibleBucketsWhileApplying(t *testing.T) {
	users := []string{"u0", "u1", "u2"}
	var names []string
	for i := range 64 {
		names = append(names, fmt.Sprintf("b%02d", i))
	}
	f := newTestFSM(t, t.TempDir())
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				s := &State{}
				s.cur.Store(f.state.load())
				first := page(s, "u1", false, "", "", -1)
				if !slices.IsSorted(first) {
					t.Errorf("page not sorted: %v", first)
					return
				}
				if again := page(s, "u1", false, "", "", -1); !slices.Equal(first, again) {
					t.Errorf("one state read twice: %v then %v", first, again)
					return
				}
			}
		})
	}
	r := rand.New(rand.NewPCG(7, 7))
	index := uint64(1)
	for range 200 {
		cmds := make([]Command, 1+r.IntN(8))
		for i := range cmds {
			cmds[i] = randomBucketCommand(r, users, names)
		}
		applyFSM(t, f, index, cmds...)
		index += uint64(len(cmds))
	}
	close(stop)
	wg.Wait()
}

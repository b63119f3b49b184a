package federation

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/regionstate"
)

// RootUser is the name of the user who can do everything.
const RootUser = backend.RootUser

// User is an identity that signs S3 requests.
type User = backend.User

// Users manages credentials and grants; they are Raft state.
type Users struct {
	rs  RegionState
	now func() time.Time
	// catchUp waits until this node has applied what the region committed
	// (Region.ReadBarrier), so a user added through another node a moment
	// ago is known here too.
	catchUp func() bool
	// cat is the global catalog of peered regions (nil: users are the
	// region's own). There, every user but root is a catalog user: its key
	// works in every region, and only the catalog says which keys exist
	// (a region's own record of a user serves its grants).
	cat Catalog
}

// byKey looks an access key up, catching up with the region on a miss.
func (u *Users) byKey(accessKey string) (regionstate.User, bool) {
	if u.cat != nil {
		if rec, ok := u.rs.State().UserByAccessKey(accessKey); ok && rec.Root {
			return rec, true
		}
		cu, ok := u.cat.UserByKey(accessKey)
		if !ok {
			return regionstate.User{}, false
		}
		return regionstate.User{Name: cu.Name, AccessKey: cu.AccessKey, SecretKey: cu.SecretKey, Created: cu.Created}, true
	}
	rec, ok := u.rs.State().UserByAccessKey(accessKey)
	if !ok && u.catchUp != nil && u.catchUp() {
		rec, ok = u.rs.State().UserByAccessKey(accessKey)
	}
	return rec, ok
}

// SecretFor returns the secret key for an access key (the SigV4 lookup).
func (u *Users) SecretFor(accessKey string) (string, bool) {
	rec, ok := u.byKey(accessKey)
	if !ok {
		return "", false
	}
	return rec.SecretKey, true
}

// ByAccessKey returns the user owning an access key.
func (u *Users) ByAccessKey(accessKey string) (User, bool) {
	rec, ok := u.byKey(accessKey)
	if !ok {
		return User{}, false
	}
	return toUser(rec), true
}

func toUser(r regionstate.User) User {
	return User{Name: r.Name, AccessKey: r.AccessKey, Root: r.Root, Created: r.Created}
}

// UserInfo is a user with its grants, as `fedgate user list` shows it.
type UserInfo = backend.UserInfo

// List returns every user and its grants.
func (u *Users) List() []UserInfo {
	st := u.rs.State()
	var out []UserInfo
	recs := st.Users()
	if u.cat != nil {
		recs = recs[:0:0]
		if root, ok := st.User(RootUser); ok {
			recs = append(recs, root)
		}
		for _, cu := range u.cat.Users() {
			recs = append(recs, regionstate.User{Name: cu.Name, AccessKey: cu.AccessKey, Created: cu.Created})
		}
	}
	for _, r := range recs {
		ui := UserInfo{User: toUser(r), Grants: map[string]string{}}
		for bucket, perm := range st.Grants(r.Name) {
			ui.Grants[bucket] = string(perm)
		}
		out = append(out, ui)
	}
	return out
}

var userNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@+=-]{0,63}$`)
var accessKeyRE = regexp.MustCompile(`^[A-Za-z0-9._~+/=-]{3,128}$`)

// Credentials is a new user's key pair. The secret is shown only once.
type Credentials = backend.Credentials

// NewCredentials generates a random access key (20 upper-case letters and
// digits) and secret key (40 characters), like AWS's.
func NewCredentials() Credentials {
	return Credentials{AccessKey: randomString(20, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"),
		SecretKey: randomString(40, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}
}

func randomString(n int, alphabet string) string {
	// 256 is a multiple of len(alphabet) for 64; for 36 the bias is tiny
	// but avoidable: reject bytes past the largest multiple.
	limit := byte(256 - 256%len(alphabet))
	out := make([]byte, 0, n)
	var buf [64]byte
	for len(out) < n {
		_, _ = rand.Read(buf[:])
		for _, b := range buf {
			if (limit == 0 || b < limit) && len(out) < n {
				out = append(out, alphabet[int(b)%len(alphabet)])
			}
		}
	}
	return string(out)
}

// Add creates a user. Empty credentials are generated. ErrUserExists,
// ErrAccessKeyInUse.
func (u *Users) Add(ctx context.Context, name string, c Credentials) (Credentials, error) {
	if !userNameRE.MatchString(name) || name == RootUser {
		return Credentials{}, fmt.Errorf("invalid user name %q: use 1-64 letters, digits or ._@+=- (and not %q)", name, RootUser)
	}
	if (c.AccessKey == "") != (c.SecretKey == "") {
		return Credentials{}, errors.New("give both an access key and a secret key, or neither")
	}
	if c.AccessKey == "" {
		c = NewCredentials()
	}
	if err := validCredentials(c); err != nil {
		return Credentials{}, err
	}
	if err := u.freeName(name); err != nil {
		return Credentials{}, err
	}
	rec := regionstate.User{Name: name, AccessKey: c.AccessKey, SecretKey: c.SecretKey, Created: u.now().UTC()}
	if u.cat != nil {
		if root, ok := u.rs.State().User(RootUser); ok && root.AccessKey == c.AccessKey {
			return Credentials{}, ErrAccessKeyInUse
		}
		if _, ok := u.cat.UserByKey(c.AccessKey); ok {
			return Credentials{}, ErrAccessKeyInUse
		}
		if _, ok := u.cat.UserNamed(name); ok {
			return Credentials{}, ErrUserExists
		}
		// The catalog first: the name and key are unique across regions.
		if err := u.cat.PutUser(ctx, CatalogUser{Name: name, AccessKey: c.AccessKey, SecretKey: c.SecretKey, Created: rec.Created}); err != nil {
			return Credentials{}, err
		}
		return c, mapUserErr(u.rs.Apply(ctx, regionstate.PutUser{Replace: true, User: rec}))
	}
	err := u.rs.Apply(ctx, regionstate.PutUser{User: rec})
	return c, mapUserErr(err)
}

func validCredentials(c Credentials) error {
	if !accessKeyRE.MatchString(c.AccessKey) {
		return fmt.Errorf("invalid access key: use 3-128 characters from A-Z a-z 0-9 . _ ~ + / = -")
	}
	if len(c.SecretKey) < 8 || len(c.SecretKey) > 128 {
		return fmt.Errorf("invalid secret key: use 8-128 characters")
	}
	return nil
}

// EnsureRoot makes c the root user's credentials (creating or replacing them).
func (u *Users) EnsureRoot(ctx context.Context, c Credentials) error {
	if err := validCredentials(c); err != nil {
		return err
	}
	if cur, ok := u.rs.State().User(RootUser); ok && cur.AccessKey == c.AccessKey && cur.SecretKey == c.SecretKey {
		return nil
	}
	err := u.rs.Apply(ctx, regionstate.PutUser{Replace: true, User: regionstate.User{Name: RootUser, Root: true,
		AccessKey: c.AccessKey, SecretKey: c.SecretKey, Created: u.now().UTC()}})
	return mapUserErr(err)
}

// Remove deletes a user and its grants. ErrNoSuchUser.
func (u *Users) Remove(ctx context.Context, name string) error {
	if name == RootUser {
		return errors.New("the root user cannot be removed; change its keys with --access-key/--secret-key on the server")
	}
	// Buckets are owned by name: a user added later under this name would
	// own them.
	if err := u.ownsNothing(name, "delete them first (aws s3 rb), or a user added later under this name would own them"); err != nil {
		return err
	}
	if u.cat != nil {
		if _, known := u.cat.UserNamed(name); known {
			if err := u.cat.DeleteUser(ctx, name); err != nil {
				return err
			}
			// The region's record held its grants here.
			if err := u.rs.Apply(ctx, regionstate.DeleteUser{Name: name}); err != nil && !errors.Is(err, regionstate.ErrNoSuchUser) {
				return err
			}
			return nil
		}
	}
	return mapUserErr(u.rs.Apply(ctx, regionstate.DeleteUser{Name: name}))
}

// Grant gives user read or write access to a bucket. Only the bucket's owner
// or root may grant.
func (u *Users) Grant(ctx context.Context, caller User, name string, b *Bucket, perm string) error {
	if perm != "read" && perm != "write" {
		return fmt.Errorf("permission %q: want read or write", perm)
	}
	if !caller.Root && caller.Name != b.Owner {
		return ErrAccessDenied
	}
	if _, ok := u.rs.State().User(name); !ok {
		if err := u.localCopy(ctx, name); err != nil {
			return err
		}
	}
	g := regionstate.Grant{User: name, Bucket: b.Name, Perm: regionstate.Perm(perm)}
	if !b.Global && b.remote == "" {
		// A bucket of the region's: the grant is for this incarnation
		// only (b may be a handle on a bucket deleted, and the name
		// created again by someone else, since the caller's check). With
		// a catalog, the region may not have recorded the bucket yet (see
		// catalogCreate): the name alone is checked then.
		if _, ok := u.rs.State().Bucket(b.Name); ok || u.cat == nil {
			g.Prefix = b.prefix
		}
	}
	err := u.rs.Apply(ctx, g)
	if errors.Is(err, regionstate.ErrNoSuchBucket) {
		return ErrNoSuchBucket
	}
	return mapUserErr(err)
}

// localCopy records a catalog user (made in another region) in this
// region, so that this region's grants can name it. ErrNoSuchUser when
// the catalog does not know it either.
func (u *Users) localCopy(ctx context.Context, name string) error {
	if u.cat == nil {
		return ErrNoSuchUser
	}
	cu, ok := u.cat.UserNamed(name)
	if !ok {
		return ErrNoSuchUser
	}
	return mapUserErr(u.rs.Apply(ctx, regionstate.PutUser{Replace: true, User: regionstate.User{Name: cu.Name,
		AccessKey: cu.AccessKey, SecretKey: cu.SecretKey, Created: cu.Created}}))
}

// Revoke removes a user's grant on a bucket.
func (u *Users) Revoke(ctx context.Context, caller User, name string, b *Bucket) error {
	if !caller.Root && caller.Name != b.Owner {
		return ErrAccessDenied
	}
	return mapUserErr(u.rs.Apply(ctx, regionstate.Revoke{User: name, Bucket: b.Name}))
}

func mapUserErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, regionstate.ErrNoSuchUser):
		return ErrNoSuchUser
	case errors.Is(err, regionstate.ErrUserExists):
		return ErrUserExists
	case errors.Is(err, regionstate.ErrAccessKeyInUse):
		return ErrAccessKeyInUse
	}
	return err
}

// ownsNothing is nil when no bucket of the region is owned by name, else
// ErrUserOwnsBuckets naming a few of them and what to do.
func (u *Users) ownsNothing(name, what string) error {
	owned := u.rs.State().OwnedBuckets(name, 4)
	if len(owned) == 0 {
		return nil
	}
	list := strings.Join(owned[:min(len(owned), 3)], ", ")
	if len(owned) > 3 {
		list += ", ..."
	}
	return fmt.Errorf("%w: %q owns %s; %s", ErrUserOwnsBuckets, name, list, what)
}

// freeName refuses, for a name no user has here or in the catalog, a name
// that still owns buckets (left by an older version, which removed users
// who owned buckets): the new user would own them. A name in use is left
// to the existence checks (ErrUserExists).
func (u *Users) freeName(name string) error {
	if _, ok := u.rs.State().User(name); ok {
		return nil
	}
	if u.cat != nil {
		if _, ok := u.cat.UserNamed(name); ok {
			return nil
		}
	}
	return u.ownsNothing(name, "its buckets were left by a user of that name removed by an older version: delete them as root first (or they would belong to the new user)")
}

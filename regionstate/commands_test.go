package regionstate

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// applyErr applies one command on n and returns its error.
func applyErr(n *Node, c Command) error { return n.Apply(context.Background(), c) }

func wantErr(t *testing.T, n *Node, c Command, want error) {
	t.Helper()
	if err := applyErr(n, c); !errors.Is(err, want) {
		t.Fatalf("Apply(%T %+v) = %v, want %v", c, c, err, want)
	}
}

func TestCommands(t *testing.T) {
	n := openNode(t, testConfig(t, t.TempDir()))
	s := n.State()
	apply(t, n,
		PutUser{User: User{Name: "root", AccessKey: "AKROOT", Root: true}},
		PutUser{User: User{Name: "alice", AccessKey: "AKA"}},
		PutUser{User: User{Name: "bob", AccessKey: "AKB"}},
	)

	t.Run("buckets", func(t *testing.T) {
		created := time.Date(2024, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600))
		apply(t, n, CreateBucket{Bucket: Bucket{Name: "b1", Owner: "alice", Store: "s", Prefix: "b1/", Created: created}})
		apply(t, n, CreateBucket{Bucket: Bucket{Name: "b2", Owner: "bob"}})
		b, ok := s.Bucket("b1")
		if !ok || b.Owner != "alice" || b.Store != "s" || b.Prefix != "b1/" || !b.Created.Equal(created) || b.Created.Location() != time.UTC {
			t.Fatalf("Bucket(b1) = %+v, %v", b, ok)
		}
		if b2, _ := s.Bucket("b2"); b2.Created.IsZero() {
			t.Fatal("a zero Created was not stamped with the entry's append time")
		}
		err := applyErr(n, CreateBucket{Bucket: Bucket{Name: "b1", Owner: "bob"}})
		var exists *BucketExistsError
		if !errors.Is(err, ErrBucketExists) || !errors.As(err, &exists) || exists.Owner != "alice" {
			t.Fatalf("duplicate CreateBucket = %v, want BucketExistsError owned by alice", err)
		}
		wantErr(t, n, CreateBucket{Bucket: Bucket{Name: ""}}, ErrInvalid)
		wantErr(t, n, CreateBucket{Bucket: Bucket{Name: "a\x00b"}}, ErrInvalid)
		if got := s.Buckets(); len(got) != 2 || got[0].Name != "b1" || got[1].Name != "b2" {
			t.Fatalf("Buckets() = %+v", got)
		}

		apply(t, n, Grant{User: "bob", Bucket: "b2gone", Perm: PermRead},
			CreateBucket{Bucket: Bucket{Name: "b2gone", Owner: "alice"}},
			Grant{User: "alice", Bucket: "b1", Perm: PermRead})
		apply(t, n, DeleteBucket{Name: "b2gone"})
		if _, ok := s.Bucket("b2gone"); ok {
			t.Fatal("deleted bucket still present")
		}
		if g := s.Grants("bob"); g != nil {
			t.Fatalf("grants on a deleted bucket survive: %v", g)
		}
		if g := s.Grants("alice"); g["b1"] != PermRead {
			t.Fatalf("unrelated grant dropped: %v", g)
		}
		wantErr(t, n, DeleteBucket{Name: "b2gone"}, ErrNoSuchBucket)
	})

	t.Run("bucket configs", func(t *testing.T) {
		apply(t, n, CreateBucket{Bucket: Bucket{Name: "conf", Owner: "alice"}},
			SetBucketConfig{Bucket: "conf", Kind: BucketConfPolicy, Value: `{"p":1}`},
			SetBucketConfig{Bucket: "conf", Kind: BucketConfACL, Value: "acl"},
			SetBucketConfig{Bucket: "conf", Kind: BucketConfACL, Delete: true},
			SetBucketConfig{Bucket: "conf", Kind: BucketConfTagging, Delete: true})
		if v, ok := s.BucketConfig("conf", BucketConfPolicy); !ok || v != `{"p":1}` {
			t.Fatalf("policy = %q, %v", v, ok)
		}
		if _, ok := s.BucketConfig("conf", BucketConfACL); ok {
			t.Fatal("deleted ACL still present")
		}
		wantErr(t, n, SetBucketConfig{Bucket: "conf", Kind: "website", Value: "x"}, ErrInvalid)
		wantErr(t, n, SetBucketConfig{Bucket: "", Kind: BucketConfPolicy, Value: "x"}, ErrInvalid)
		wantErr(t, n, SetBucketConfig{Bucket: "conf", Kind: BucketConfCORS, Value: string(make([]byte, MaxBucketConfig+1))}, ErrInvalid)
		// DeleteBucket drops them; a configuration set while a bucket was
		// being deleted does not reach the next bucket of that name.
		apply(t, n, DeleteBucket{Name: "conf"},
			SetBucketConfig{Bucket: "conf", Kind: BucketConfACL, Value: "public-read"})
		if _, ok := s.BucketConfig("conf", BucketConfPolicy); ok {
			t.Fatal("policy survived DeleteBucket")
		}
		apply(t, n, CreateBucket{Bucket: Bucket{Name: "conf", Owner: "bob"}})
		if got := s.BucketConfigs()["conf"]; got != nil {
			t.Fatalf("new bucket inherited configurations %v", got)
		}
		apply(t, n, DeleteBucket{Name: "conf"})
	})

	t.Run("users", func(t *testing.T) {
		wantErr(t, n, PutUser{User: User{Name: "alice", AccessKey: "AKZ"}}, ErrUserExists)
		wantErr(t, n, PutUser{User: User{Name: "carol", AccessKey: "AKA"}}, ErrAccessKeyInUse)
		wantErr(t, n, PutUser{User: User{Name: "alice", AccessKey: "AKB"}, Replace: true}, ErrAccessKeyInUse)
		wantErr(t, n, PutUser{User: User{Name: "carol"}}, ErrInvalid)
		wantErr(t, n, PutUser{User: User{AccessKey: "AKC"}}, ErrInvalid)

		before, _ := s.User("alice")
		apply(t, n, PutUser{User: User{Name: "alice", AccessKey: "AKA2", SecretKey: "new"}, Replace: true})
		if _, ok := s.UserByAccessKey("AKA"); ok {
			t.Fatal("old access key still resolves after Replace")
		}
		u, ok := s.UserByAccessKey("AKA2")
		if !ok || u.Name != "alice" || u.SecretKey != "new" || !u.Created.Equal(before.Created) {
			t.Fatalf("UserByAccessKey(AKA2) = %+v, %v (Created should be kept: %v)", u, ok, before.Created)
		}
		if got := s.Users(); len(got) != 3 || got[0].Name != "alice" || got[2].Name != "root" {
			t.Fatalf("Users() = %+v", got)
		}

		apply(t, n, PutUser{User: User{Name: "carol", AccessKey: "AKC"}}, Grant{User: "carol", Bucket: "b1", Perm: PermWrite})
		apply(t, n, DeleteUser{Name: "carol"})
		if _, ok := s.User("carol"); ok {
			t.Fatal("deleted user still present")
		}
		if _, ok := s.UserByAccessKey("AKC"); ok {
			t.Fatal("deleted user's access key still resolves")
		}
		if s.Grants("carol") != nil || s.CanWrite("carol", "b1") {
			t.Fatal("deleted user's grants survive")
		}
		wantErr(t, n, DeleteUser{Name: "carol"}, ErrNoSuchUser)
		wantErr(t, n, DeleteUser{Name: "root"}, ErrRootUser)
		apply(t, n, PutUser{User: User{Name: "root2", AccessKey: "AKR2", Root: true}}, DeleteUser{Name: "root2", Force: true})
		if _, ok := s.User("root2"); ok {
			t.Fatal("forced delete of a root user did nothing")
		}
	})

	t.Run("grants", func(t *testing.T) {
		apply(t, n, PutUser{User: User{Name: "dave", AccessKey: "AKD"}})
		check := func(user, bucket string, read, write bool) {
			t.Helper()
			if r, w := s.CanRead(user, bucket), s.CanWrite(user, bucket); r != read || w != write {
				t.Fatalf("%s on %s: CanRead %v CanWrite %v, want %v %v", user, bucket, r, w, read, write)
			}
		}
		check("dave", "b1", false, false)
		check("root", "anything", true, true)
		check("alice", "b1", true, true) // owner
		check("nobody", "b1", false, false)
		apply(t, n, Grant{User: "dave", Bucket: "b1", Perm: PermRead})
		check("dave", "b1", true, false)
		apply(t, n, Grant{User: "dave", Bucket: "b1", Perm: PermWrite})
		check("dave", "b1", true, true)
		apply(t, n, Revoke{User: "dave", Bucket: "b1", Perm: PermWrite})
		check("dave", "b1", true, false)
		apply(t, n, Revoke{User: "dave", Bucket: "b1", Perm: PermRead})
		check("dave", "b1", false, false)
		apply(t, n, Grant{User: "dave", Bucket: "b1", Perm: PermWrite}, Revoke{User: "dave", Bucket: "b1"})
		check("dave", "b1", false, false)
		apply(t, n, Revoke{User: "dave", Bucket: "never"}) // nothing to revoke is fine
		wantErr(t, n, Grant{User: "nobody", Bucket: "b1", Perm: PermRead}, ErrNoSuchUser)
		wantErr(t, n, Revoke{User: "nobody", Bucket: "b1"}, ErrNoSuchUser)
		wantErr(t, n, Grant{User: "dave", Bucket: "b1", Perm: "admin"}, ErrInvalid)
		wantErr(t, n, Grant{User: "dave", Bucket: "b1"}, ErrInvalid)
		wantErr(t, n, Revoke{User: "dave", Bucket: "b1", Perm: "admin"}, ErrInvalid)
		apply(t, n, Grant{User: "dave", Bucket: "b1", Perm: PermRead})
		g := s.Grants("dave")
		g["b1"] = PermWrite // a copy: must not change the state
		if s.CanWrite("dave", "b1") {
			t.Fatal("Grants returned the state's own map")
		}
	})

	t.Run("uploads", func(t *testing.T) {
		t1 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		up := func(id, bucket, key string, created time.Time) Command {
			return CreateUpload{Upload: MultipartUpload{ID: id, Bucket: bucket, Key: key, Created: created,
				Meta: ObjectMeta{User: map[string]string{"k": "v"}}}}
		}
		apply(t, n, up("u3", "b1", "b", t1), up("u1", "b1", "a", t1.Add(time.Hour)), up("u2", "b1", "a", t1),
			up("u4", "b2", "a", t1), up("u0", "b1", "a", t1))
		wantErr(t, n, up("u1", "b1", "x", t1), ErrUploadExists)
		wantErr(t, n, up("", "b1", "x", t1), ErrInvalid)
		ids := func(us []MultipartUpload) (out []string) {
			for _, u := range us {
				if u.Parts != nil {
					t.Fatalf("listing carries parts: %+v", u)
				}
				out = append(out, u.ID)
			}
			return out
		}
		if got := ids(s.Uploads("b1", "")); !slices.Equal(got, []string{"u0", "u2", "u1", "u3"}) {
			t.Fatalf("Uploads(b1) = %v, want by key, then created, then id", got)
		}
		if got := ids(s.Uploads("b1", "b")); !slices.Equal(got, []string{"u3"}) {
			t.Fatalf("Uploads(b1, b) = %v", got)
		}
		if got := ids(s.Uploads("b2", "")); !slices.Equal(got, []string{"u4"}) {
			t.Fatalf("Uploads(b2) = %v", got)
		}

		apply(t, n, PutPart{UploadID: "u1", Part: Part{Number: 2, Size: 3, ETag: "e2", Checksums: map[string]string{"sha256": "h"}}},
			PutPart{UploadID: "u1", Part: Part{Number: 1, Size: 5, ETag: "e1"}},
			PutPart{UploadID: "u1", Part: Part{Number: 1, Size: 6, ETag: "e1b"}})
		wantErr(t, n, PutPart{UploadID: "nope", Part: Part{Number: 1}}, ErrNoSuchUpload)
		wantErr(t, n, PutPart{UploadID: "u1", Part: Part{Number: 0}}, ErrInvalid)
		wantErr(t, n, PutPart{UploadID: "u1", Part: Part{Number: 10001}}, ErrInvalid)
		u, ok := s.Upload("u1")
		if !ok || len(u.Parts) != 2 || u.Parts[1].ETag != "e1b" || u.Parts[1].Size != 6 || u.Parts[2].Checksums["sha256"] != "h" || u.Parts[1].Modified.IsZero() {
			t.Fatalf("Upload(u1) = %+v, %v", u, ok)
		}
		u.Parts[2].Checksums["sha256"] = "mutated"
		u.Parts[3] = Part{}
		u.Meta.User["k"] = "mutated"
		if again, _ := s.Upload("u1"); len(again.Parts) != 2 || again.Parts[2].Checksums["sha256"] != "h" || again.Meta.User["k"] != "v" {
			t.Fatalf("Upload returned shared maps: %+v", again)
		}

		apply(t, n, CreateUpload{Upload: MultipartUpload{ID: "u5", Bucket: "b1", Key: "z",
			Parts: map[int]Part{1: {Size: 1, ETag: "p"}}}})
		if u5, _ := s.Upload("u5"); len(u5.Parts) != 1 || u5.Parts[1].Number != 1 || u5.Parts[1].ETag != "p" {
			t.Fatalf("CreateUpload with parts: %+v", u5)
		}
		wantErr(t, n, CreateUpload{Upload: MultipartUpload{ID: "u6", Bucket: "b1", Parts: map[int]Part{0: {}}}}, ErrInvalid)

		apply(t, n, CompleteUpload{UploadID: "u1"}, AbortUpload{UploadID: "u2"})
		for _, id := range []string{"u1", "u2"} {
			if _, ok := s.Upload(id); ok {
				t.Fatalf("upload %s still present", id)
			}
		}
		wantErr(t, n, CompleteUpload{UploadID: "u1"}, ErrNoSuchUpload)
		wantErr(t, n, AbortUpload{UploadID: "u2"}, ErrNoSuchUpload)
	})

	t.Run("policy and settings", func(t *testing.T) {
		if _, ok := s.Policy(); ok {
			t.Fatal("policy before any SetPolicy")
		}
		apply(t, n, SetPolicy{YAML: []byte("a: 1"), Version: 1})
		wantErr(t, n, SetPolicy{YAML: []byte("a: 2"), Version: 1}, ErrStalePolicy)
		apply(t, n, SetPolicy{YAML: []byte("a: 3"), Version: 3})
		p, ok := s.Policy()
		if !ok || string(p.YAML) != "a: 3" || p.Version != 3 {
			t.Fatalf("Policy() = %+v, %v", p, ok)
		}
		p.YAML[0] = 'X'
		if again, _ := s.Policy(); string(again.YAML) != "a: 3" {
			t.Fatal("Policy returned the state's own bytes")
		}

		apply(t, n, SetSetting{Key: "region", Value: "us-east-gpu"})
		if v, ok := s.Setting("region"); !ok || v != "us-east-gpu" {
			t.Fatalf("Setting(region) = %q, %v", v, ok)
		}
		apply(t, n, SetSetting{Key: "region", Delete: true}, SetSetting{Key: "absent", Delete: true})
		if _, ok := s.Setting("region"); ok {
			t.Fatal("deleted setting still present")
		}
		wantErr(t, n, SetSetting{Value: "x"}, ErrInvalid)
	})
}

func TestUnknownCommands(t *testing.T) {
	n := openNode(t, testConfig(t, t.TempDir()))
	before := dumpState(n.State())

	if err := applyErr(n, rawCommand{t: IgnoreUnknown | 0x7e, body: `{"x":1}`}); err != nil {
		t.Fatalf("ignorable unknown command: %v, want nil", err)
	}
	applied := n.State().AppliedIndex()
	wantErr(t, n, rawCommand{t: 0x7e, body: `{"x":1}`}, ErrUnknownCommand)
	wantErr(t, n, rawCommand{t: TypeCreateBucket, body: `[1,2]`}, ErrInvalid)
	if got := n.State().AppliedIndex(); got != applied+2 {
		t.Fatalf("applied index %d, want %d: rejected entries are still consumed", got, applied+2)
	}
	sameState(t, "after unknown commands", dumpState(n.State()), before)
	// A known type with the ignorable bit set still runs.
	apply(t, n, rawCommand{t: IgnoreUnknown | TypeSetSetting, body: `{"Key":"k","Value":"v"}`})
	if v, _ := n.State().Setting("k"); v != "v" {
		t.Fatal("known command with the ignorable bit was not applied")
	}
	if _, err := Decode(nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Decode(nil) = %v", err)
	}
}

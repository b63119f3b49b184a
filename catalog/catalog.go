// Package catalog is the global bucket catalog of peered regions
// (docs/regions.md). Bucket names are unique across every region: a bucket is
// created, changed and deleted through a small hashicorp/raft group of its
// own with one voter per region, separate from each region's Raft group.
// Bucket creation is rare and must be correct, so it takes a majority of
// regions; everything else a region does (reads and writes of existing
// buckets) never waits for the catalog, and each region serves from its
// applied copy while the catalog has no majority.
//
// The state machine (this file) holds buckets and users; command.go lists
// its commands (raft/envelope entries); node.go runs it on Raft and
// member.go on the network, both on the plumbing of raft/.
package catalog

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Bucket is one bucket of the global namespace.
type Bucket struct {
	Name string `json:"name"`
	// Owner is the creating user; Home the region whose stores hold the
	// bucket's data (reads from other regions go through its gateway).
	Owner string `json:"owner"`
	Home  string `json:"home"`
	Store string `json:"store"`
	// Prefix is where in Store the home region keeps the bucket's objects.
	Prefix string `json:"prefix,omitempty"`
	// Policy, ACL and Versioning travel with the bucket (their S3
	// documents, as the home region keeps them).
	Policy     string    `json:"policy,omitempty"`
	ACL        string    `json:"acl,omitempty"`
	Versioning string    `json:"versioning,omitempty"`
	Created    time.Time `json:"created"`
	// Configs are the bucket's S3 configuration documents by kind (policy,
	// acl, tagging, ...), as its home region set them.
	Configs map[string]string `json:"configs,omitempty"`
}

// User is one fedgate user and its key pair, the same in every region
// (grants stay per region). Home is the region that created it, the only
// one that may change or remove it. The secret key is here because every
// region verifies the user's signatures: the catalog's links carry it (use
// the peering TLS).
type User struct {
	Name      string    `json:"name"`
	AccessKey string    `json:"access_key"`
	SecretKey string    `json:"secret_key"`
	Home      string    `json:"home"`
	Created   time.Time `json:"created"`
}

// BucketExistsError is a create of a taken name.
type BucketExistsError struct {
	Existing Bucket
	// OwnedByCaller: the same user owns it (S3's BucketAlreadyOwnedByYou).
	OwnedByCaller bool
}

func (e *BucketExistsError) Error() string {
	return fmt.Sprintf("catalog: bucket %q exists (owner %s, home region %s)", e.Existing.Name, e.Existing.Owner, e.Existing.Home)
}

func (e *BucketExistsError) Unwrap() error { return ErrBucketExists }

// Errors of the catalog's commands.
var (
	// ErrBucketExists: the name is taken (BucketExistsError says by whom).
	ErrBucketExists = errors.New("catalog: bucket exists")
	ErrNoSuchBucket = errors.New("catalog: no such bucket")
	// ErrNotHome: a change of a bucket sent by a region that is not its home.
	ErrNotHome = errors.New("catalog: not the bucket's home region")
	// ErrKeyInUse: a user's access key belongs to another user.
	ErrKeyInUse = errors.New("catalog: access key in use by another user")
)

// Command is one change of the catalog. Op names its type (TypeCreate's
// "create", ...); Raft carries it in the envelope of raft/envelope: the
// type's byte, then the rest of the command as JSON.
type Command struct {
	Op     string  `json:"op,omitempty"` // create, update, set-config, delete, put-user, delete-user
	Bucket *Bucket `json:"bucket,omitempty"`
	Name   string  `json:"name,omitempty"`   // set-config, delete, delete-user
	Kind   string  `json:"kind,omitempty"`   // set-config
	Value  string  `json:"value,omitempty"`  // set-config ("": remove)
	Region string  `json:"region,omitempty"` // the sending region (delete, update)
	User   *User   `json:"user,omitempty"`
}

// State is the catalog as one region has applied it. Its methods are safe
// for concurrent use.
type State struct {
	mu      sync.RWMutex
	buckets map[string]Bucket
	users   map[string]User
	applied uint64
	changed chan struct{} // closed and replaced at each apply
}

func newState() *State {
	return &State{buckets: map[string]Bucket{}, users: map[string]User{}, changed: make(chan struct{})}
}

// Bucket returns the named bucket.
func (s *State) Bucket(name string) (Bucket, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	b, ok := s.buckets[name]
	return b, ok
}

// Buckets returns every bucket, by name.
func (s *State) Buckets() []Bucket { return byName(s, s.buckets) }

// byName returns m's values in the order of their keys, under s's lock.
func byName[T any](s *State, m map[string]T) []T {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]T, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[k])
	}
	return out
}

// User returns the user holding access key ak.
func (s *State) User(ak string) (User, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, u := range s.users {
		if u.AccessKey == ak {
			return u, true
		}
	}
	return User{}, false
}

// UserNamed returns the named user.
func (s *State) UserNamed(name string) (User, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	u, ok := s.users[name]
	return u, ok
}

// Users returns every user, by name.
func (s *State) Users() []User { return byName(s, s.users) }

// Applied is the last Raft index applied.
func (s *State) Applied() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.applied
}

// apply runs change (nil: none, for an entry skipped or refused) as the
// entry at index; the error is the change's answer.
func (s *State) apply(index uint64, change func(*State, Command) error, c Command) error {
	s.mu.Lock()
	defer func() {
		s.applied = index
		close(s.changed)
		s.changed = make(chan struct{})
		s.mu.Unlock()
	}()
	if change == nil {
		return nil
	}
	return change(s, c)
}

func (s *State) create(c Command) error {
	if c.Bucket == nil || c.Bucket.Name == "" {
		return errors.New("catalog: create without a bucket")
	}
	if old, ok := s.buckets[c.Bucket.Name]; ok {
		return &BucketExistsError{Existing: old, OwnedByCaller: old.Owner == c.Bucket.Owner}
	}
	s.buckets[c.Bucket.Name] = *c.Bucket
	return nil
}

func (s *State) update(c Command) error {
	if c.Bucket == nil {
		return errors.New("catalog: update without a bucket")
	}
	old, err := s.homeBucket(c.Bucket.Name, c.Region)
	if err != nil {
		return err
	}
	nb := *c.Bucket
	nb.Owner, nb.Home, nb.Store, nb.Prefix, nb.Created, nb.Configs = old.Owner, old.Home, old.Store, old.Prefix, old.Created, old.Configs
	s.buckets[nb.Name] = nb
	return nil
}

func (s *State) setConfig(c Command) error {
	if c.Kind == "" {
		return errors.New("catalog: set-config without a kind")
	}
	old, err := s.homeBucket(c.Name, c.Region)
	if err != nil {
		return err
	}
	old.Configs = maps.Clone(old.Configs)
	if c.Value == "" {
		delete(old.Configs, c.Kind)
	} else {
		if old.Configs == nil {
			old.Configs = map[string]string{}
		}
		old.Configs[c.Kind] = c.Value
	}
	s.buckets[c.Name] = old
	return nil
}

func (s *State) delete(c Command) error {
	old, ok := s.buckets[c.Name]
	switch {
	case !ok:
		return nil // deleting what is gone is done
	case old.Home != c.Region:
		return fmt.Errorf("%w: %s is at home in %s, not %s", ErrNotHome, old.Name, old.Home, c.Region)
	}
	delete(s.buckets, c.Name)
	return nil
}

func (s *State) putUser(c Command) error {
	if c.User == nil || c.User.Name == "" || c.User.AccessKey == "" {
		return errors.New("catalog: put-user without a user and key")
	}
	if old, ok := s.users[c.User.Name]; ok && old.Home != c.User.Home {
		return fmt.Errorf("%w: user %s is at home in %s, not %s", ErrNotHome, old.Name, old.Home, c.User.Home)
	}
	for _, o := range s.users {
		if o.AccessKey == c.User.AccessKey && o.Name != c.User.Name {
			return fmt.Errorf("%w (%s)", ErrKeyInUse, o.Name)
		}
	}
	s.users[c.User.Name] = *c.User
	return nil
}

func (s *State) deleteUser(c Command) error {
	if old, ok := s.users[c.Name]; ok && old.Home != c.Region {
		return fmt.Errorf("%w: user %s is at home in %s, not %s", ErrNotHome, old.Name, old.Home, c.Region)
	}
	delete(s.users, c.Name)
	return nil
}

// homeBucket is a bucket a change from region may touch: ErrNoSuchBucket,
// or ErrNotHome when region is not its home.
func (s *State) homeBucket(name, region string) (Bucket, error) {
	old, ok := s.buckets[name]
	switch {
	case !ok:
		return Bucket{}, fmt.Errorf("%w: %s", ErrNoSuchBucket, name)
	case old.Home != region:
		return Bucket{}, fmt.Errorf("%w: %s is at home in %s, not %s", ErrNotHome, old.Name, old.Home, region)
	}
	return old, nil
}

// fsm runs State on Raft.
type fsm struct {
	s   *State
	log *slog.Logger
}

// Apply applies an entry. An entry of an unknown type marked
// envelope.IgnoreUnknown is skipped; one the catalog cannot decode (an
// unknown type without it, a malformed body) is refused with an error as
// its answer. Either way the entry is consumed and the member goes on.
func (f fsm) Apply(l *raft.Log) any {
	c, change, err := decode(l.Data)
	switch {
	case err != nil:
		f.log.Warn("catalog: command refused", "index", l.Index, "err", err)
		err = fmt.Errorf("catalog: undecodable command at %d: %w", l.Index, err)
	case change == nil:
		f.log.Debug("catalog: skipped an unknown ignorable command", "index", l.Index, "type", l.Data[0])
	}
	if aerr := f.s.apply(l.Index, change, c); aerr != nil {
		return aerr
	}
	if err != nil {
		return err
	}
	return nil
}

type snapshot struct {
	Buckets map[string]Bucket `json:"buckets"`
	Users   map[string]User   `json:"users"`
}

func (f fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.s.mu.RLock()
	defer f.s.mu.RUnlock()
	return snapshot{Buckets: maps.Clone(f.s.buckets), Users: maps.Clone(f.s.users)}, nil
}

func (f fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var sn snapshot
	if err := json.NewDecoder(rc).Decode(&sn); err != nil {
		return fmt.Errorf("catalog: restore: %w", err)
	}
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	f.s.buckets, f.s.users = sn.Buckets, sn.Users
	if f.s.buckets == nil {
		f.s.buckets = map[string]Bucket{}
	}
	if f.s.users == nil {
		f.s.users = map[string]User{}
	}
	return nil
}

func (sn snapshot) Persist(sink raft.SnapshotSink) error {
	if err := json.NewEncoder(sink).Encode(sn); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (snapshot) Release() {}

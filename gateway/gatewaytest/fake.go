// Package gatewaytest holds an in-memory backend for testing the gateway's
// handlers without a region: Fake implements backend.Backend,
// backend.Bucket (through its buckets), backend.Users and backend.Admin,
// keeps objects and multipart uploads in maps, and lets a test make any
// operation fail with the error it chooses (Fail).
//
// It is a test double, not a product: every call takes one lock, bodies are
// held in memory, and nothing is persisted.
package gatewaytest

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"iter"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/egress"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
)

// Names of the operations Fail can make fail: the method names of the
// backend interfaces. Users' methods are prefixed "Users.".
const (
	OpReady          = "Ready"
	OpAwaitAcked     = "AwaitAcked"
	OpBucket         = "Bucket"
	OpCreateBucket   = "CreateBucket"
	OpDeleteBucket   = "DeleteBucket"
	OpStat           = "Stat"
	OpOpen           = "Open"
	OpPut            = "Put"
	OpDelete         = "Delete"
	OpList           = "List"
	OpLocalRead      = "LocalRead"
	OpCreateUpload   = "CreateUpload"
	OpUpload         = "Upload"
	OpUploadPart     = "UploadPart"
	OpCompleteUpload = "CompleteUpload"
	OpAbortUpload    = "AbortUpload"
	OpUsersAdd       = "Users.Add"
	OpUsersRemove    = "Users.Remove"
	OpUsersGrant     = "Users.Grant"
	OpUsersRevoke    = "Users.Revoke"
	OpPin            = "Pin"
	OpUnpin          = "Unpin"
	OpStartPreload   = "StartPreload"
	OpJob            = "Job"
	OpCancelPreload  = "CancelPreload"
	OpEgressLedger   = "EgressLedger"
	OpRepair         = "Repair"
	OpDegraded       = "Degraded"
)

// Root credentials every Fake starts with.
const (
	RootAccessKey = "ROOTACCESSKEY"
	RootSecretKey = "ROOTSECRETKEY"
)

// DefaultMinPartSize is S3's minimum size of a part other than the last.
const DefaultMinPartSize = 5 << 20

// Fake is an in-memory region. The zero value is not usable; call New.
type Fake struct {
	mu sync.Mutex
	// minPart is the smallest part, other than the last, a completion
	// accepts (SetMinPartSize).
	minPart int64
	now     func() time.Time
	seq     int // validators, upload ids, job ids
	fail    map[string]error
	buckets map[string]*bucket
	users   map[string]*user // by name
	keys    map[string]*user // by access key
	pins    []backend.Pin
	jobs    map[string]backend.PreloadStatus
	policy  bool
	pab     policies.PublicAccessBlock
	// degraded is what Degraded reports (SetDegraded).
	degraded backend.Degraded
	// forgotten counts Forget calls by key.
	forgotten map[string]int
	// openHook runs before every Open (SetOpenHook).
	openHook func(bucket, key string)
	// pending are writes acknowledged but not applied yet (Acknowledge),
	// applied by the next AwaitAcked; awaited counts AwaitAcked calls.
	pending []pendingWrite
	awaited int
}

// pendingWrite is an object put a follower acknowledged before applying.
type pendingWrite struct {
	bucket, key string
	data        []byte
}

type user struct {
	backend.User
	secret string
	grants map[string]string // bucket -> read|write
}

type bucket struct {
	f       *Fake
	name    string
	owner   string
	created time.Time
	policy  bool // declared in the policy file: DeleteBucket refuses it
	conf    map[string]string
	objects map[string]*object
	uploads map[string]*upload
}

type object struct {
	data []byte
	info store.ObjectInfo
}

type upload struct {
	backend.Upload
	meta  store.Metadata
	alg   string
	seq   int
	parts map[int]*part
}

type part struct {
	backend.Part
	data []byte
}

var (
	_ backend.Backend = (*Fake)(nil)
	_ backend.Admin   = (*Fake)(nil)
	_ backend.Users   = fakeUsers{}
	_ backend.Bucket  = (*bucket)(nil)
)

// New returns an empty Fake with the root user (RootAccessKey,
// RootSecretKey), the real clock and S3's 5 MiB minimum part size.
func New() *Fake {
	f := &Fake{
		minPart:   DefaultMinPartSize,
		now:       time.Now,
		fail:      map[string]error{},
		buckets:   map[string]*bucket{},
		users:     map[string]*user{},
		keys:      map[string]*user{},
		jobs:      map[string]backend.PreloadStatus{},
		forgotten: map[string]int{},
	}
	root := &user{User: backend.User{Name: backend.RootUser, AccessKey: RootAccessKey, Root: true, Created: f.now().UTC()},
		secret: RootSecretKey, grants: map[string]string{}}
	f.users[root.Name] = root
	f.keys[root.AccessKey] = root
	return f
}

// SetClock replaces the clock that stamps objects, parts and buckets.
func (f *Fake) SetClock(now func() time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = now
}

// SetMinPartSize sets the smallest part (other than the last) that
// CompleteUpload accepts, so tests need not send 5 MiB parts.
func (f *Fake) SetMinPartSize(n int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.minPart = n
}

// SetPolicy makes HasPolicy true and bucket one the policy file declares
// (DeleteBucket answers backend.ErrPolicyBucket); bucket may be "".
func (f *Fake) SetPolicy(bucketName string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.policy = true
	if b, ok := f.buckets[bucketName]; ok {
		b.policy = true
	}
}

// Fail makes every later call of op return err (nil: succeed again). op is
// one of the Op* names.
func (f *Fake) Fail(op string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.fail, op)
		return
	}
	f.fail[op] = err
}

// SetOpenHook makes every later Open call hook(bucket, key) first, outside
// the fake's lock (a hook may block, to stand for a slow origin).
func (f *Fake) SetOpenHook(hook func(bucket, key string)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.openHook = hook
}

// failure returns the error injected for op; f.mu is held.
func (f *Fake) failure(op string) error { return f.fail[op] }

// Forgotten reports how many times Forget was called for bucket/key.
func (f *Fake) Forgotten(bucketName, key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.forgotten[bucketName+"/"+key]
}

// AddUser adds a user with the given credentials, for test setup.
func (f *Fake) AddUser(name, accessKey, secretKey string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	u := &user{User: backend.User{Name: name, AccessKey: accessKey, Created: f.now().UTC()}, secret: secretKey, grants: map[string]string{}}
	f.users[name] = u
	f.keys[accessKey] = u
}

// AddBucket creates a bucket owned by owner, for test setup.
func (f *Fake) AddBucket(name, owner string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.buckets[name] = f.newBucket(name, owner)
}

func (f *Fake) newBucket(name, owner string) *bucket {
	return &bucket{f: f, name: name, owner: owner, created: f.now().UTC(),
		objects: map[string]*object{}, uploads: map[string]*upload{}}
}

// MustBucket returns the named bucket, for assertions; it panics when
// there is none.
func (f *Fake) MustBucket(name string) backend.Bucket {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.buckets[name]
	if !ok {
		panic("gatewaytest: no bucket " + name)
	}
	return b
}

// Object returns a copy of the bytes and the info of bucket/key, for
// assertions.
func (f *Fake) Object(bucketName, key string) ([]byte, store.ObjectInfo, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.buckets[bucketName]
	if !ok {
		return nil, store.ObjectInfo{}, false
	}
	o, ok := b.objects[key]
	if !ok {
		return nil, store.ObjectInfo{}, false
	}
	return bytes.Clone(o.data), o.info, true
}

// PutObject stores an object directly, for test setup.
func (f *Fake) PutObject(bucketName, key string, data []byte, meta store.Metadata) store.ObjectInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.buckets[bucketName]
	if !ok {
		panic("gatewaytest: PutObject into missing bucket " + bucketName)
	}
	return b.store(key, data, meta)
}

// store commits data under key; f.mu is held.
func (b *bucket) store(key string, data []byte, meta store.Metadata) store.ObjectInfo {
	sum := md5.Sum(data)
	return b.commit(key, data, hex.EncodeToString(sum[:]), meta)
}

func (b *bucket) commit(key string, data []byte, etag string, meta store.Metadata) store.ObjectInfo {
	b.f.seq++
	meta.User = maps.Clone(meta.User)
	meta.Checksums = maps.Clone(meta.Checksums)
	info := store.ObjectInfo{Key: key, Size: int64(len(data)), ModTime: b.f.now().UTC(), ETag: etag,
		Validator: store.Validator(fmt.Sprintf("v%d", b.f.seq)), Metadata: meta}
	b.objects[key] = &object{data: data, info: info}
	return info
}

// Acknowledge stands for a write this node acknowledged before applying it
// (a follower's ApplyAcked): bucket/key holds data only once AwaitAcked
// has run, so a handler that reads without calling it first misses it.
func (f *Fake) Acknowledge(bucketName, key string, data []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.buckets[bucketName]; !ok {
		panic("gatewaytest: Acknowledge into missing bucket " + bucketName)
	}
	f.pending = append(f.pending, pendingWrite{bucketName, key, bytes.Clone(data)})
}

// AwaitAckedCalls reports how many times AwaitAcked was called.
func (f *Fake) AwaitAckedCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.awaited
}

// AwaitAcked applies the writes Acknowledge left pending, unless
// Fail(OpAwaitAcked) says otherwise (then they stay pending).
func (f *Fake) AwaitAcked(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.awaited++
	if err := f.failure(OpAwaitAcked); err != nil {
		return err
	}
	for _, w := range f.pending {
		if b, ok := f.buckets[w.bucket]; ok {
			b.store(w.key, w.data, store.Metadata{})
		}
	}
	f.pending = nil
	return nil
}

// Ready is nil unless Fail(OpReady) says otherwise.
func (f *Fake) Ready(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failure(OpReady)
}

// Users returns the fake's users.
func (f *Fake) Users() backend.Users { return fakeUsers{f} }

// Bucket returns the named bucket, or backend.ErrNoSuchBucket.
func (f *Fake) Bucket(name string) (backend.Bucket, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failure(OpBucket); err != nil {
		return nil, err
	}
	b, ok := f.buckets[name]
	if !ok {
		return nil, backend.ErrNoSuchBucket
	}
	return b, nil
}

// ListBuckets returns the buckets u may read, by name.
func (f *Fake) ListBuckets(u backend.User) []backend.Bucket {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []backend.Bucket
	for _, name := range slices.Sorted(maps.Keys(f.buckets)) {
		b := f.buckets[name]
		if b.authorize(u, false) == nil {
			out = append(out, b)
		}
	}
	return out
}

// ListBucketsPage cuts a page out of ListBuckets (the fake holds few
// buckets; the namespace's pages do not build the whole list).
func (f *Fake) ListBucketsPage(u backend.User, prefix, after string, limit int) ([]backend.Bucket, bool) {
	all := f.ListBuckets(u) // sorted by name
	i := sort.Search(len(all), func(i int) bool { return all[i].Name() >= prefix })
	if after != "" {
		i = max(i, sort.Search(len(all), func(i int) bool { return all[i].Name() > after }))
	}
	j := i
	for j < len(all) && strings.HasPrefix(all[j].Name(), prefix) {
		j++ // sorted: no later name has the prefix
	}
	if limit >= 0 && j-i > limit {
		return all[i : i+limit], true
	}
	return all[i:j], false
}

// CreateBucket creates a bucket owned by u.
func (f *Fake) CreateBucket(_ context.Context, u backend.User, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failure(OpCreateBucket); err != nil {
		return err
	}
	if err := policies.ValidBucketName(name); err != nil {
		return fmt.Errorf("%w: %v", backend.ErrInvalidBucketName, err)
	}
	if b, ok := f.buckets[name]; ok {
		return &backend.BucketExistsError{Bucket: name, OwnedByCaller: b.owner == u.Name}
	}
	f.buckets[name] = f.newBucket(name, u.Name)
	return nil
}

// DeleteBucket removes an empty bucket.
func (f *Fake) DeleteBucket(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failure(OpDeleteBucket); err != nil {
		return err
	}
	b, ok := f.buckets[name]
	switch {
	case !ok:
		return backend.ErrNoSuchBucket
	case b.policy:
		return backend.ErrPolicyBucket
	case len(b.objects) > 0:
		return backend.ErrBucketNotEmpty
	}
	delete(f.buckets, name)
	for _, u := range f.users {
		delete(u.grants, name)
	}
	return nil
}

// Config returns a configuration set with SetConfig.
func (b *bucket) Config(kind string) (string, bool) {
	b.f.mu.Lock()
	defer b.f.mu.Unlock()
	v, ok := b.conf[kind]
	return v, ok
}

// SetConfig stores a configuration; value "" removes it.
func (b *bucket) SetConfig(ctx context.Context, kind, value string) error {
	b.f.mu.Lock()
	defer b.f.mu.Unlock()
	if value == "" {
		delete(b.conf, kind)
		return nil
	}
	if b.conf == nil {
		b.conf = map[string]string{}
	}
	b.conf[kind] = value
	return nil
}

// PublicAccessDefault returns what SetPublicAccessDefault set.
func (f *Fake) PublicAccessDefault() policies.PublicAccessBlock {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pab
}

// SetPublicAccessDefault sets the region-wide Block Public Access setting.
func (f *Fake) SetPublicAccessDefault(p policies.PublicAccessBlock) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pab = p
}

func (b *bucket) Name() string       { return b.name }
func (b *bucket) Owner() string      { return b.owner }
func (b *bucket) Created() time.Time { return b.created }

// Authorize lets root and the owner do anything, and others what their
// grant allows (write implies read).
func (b *bucket) Authorize(u backend.User, write bool) error {
	b.f.mu.Lock()
	defer b.f.mu.Unlock()
	return b.authorize(u, write)
}

func (b *bucket) authorize(u backend.User, write bool) error {
	if u.Root || u.Name == b.owner {
		return nil
	}
	if fu, ok := b.f.users[u.Name]; ok {
		switch fu.grants[b.name] {
		case "write":
			return nil
		case "read":
			if !write {
				return nil
			}
		}
	}
	return backend.ErrAccessDenied
}

func (b *bucket) Stat(_ context.Context, key string) (store.ObjectInfo, error) {
	b.f.mu.Lock()
	defer b.f.mu.Unlock()
	if err := b.f.failure(OpStat); err != nil {
		return store.ObjectInfo{}, err
	}
	o, ok := b.objects[key]
	if !ok {
		return store.ObjectInfo{}, store.ErrNotFound
	}
	return o.info, nil
}

// Open returns bytes [off, off+n) of the object info describes:
// store.ErrPreconditionFailed once it was replaced or deleted.
func (b *bucket) Open(_ context.Context, info store.ObjectInfo, off, n int64) (io.ReadCloser, error) {
	b.f.mu.Lock()
	hook := b.f.openHook
	b.f.mu.Unlock()
	if hook != nil {
		hook(b.name, info.Key)
	}
	b.f.mu.Lock()
	defer b.f.mu.Unlock()
	if err := b.f.failure(OpOpen); err != nil {
		return nil, err
	}
	o, ok := b.objects[info.Key]
	if !ok || o.info.Validator != info.Validator {
		return nil, store.ErrPreconditionFailed
	}
	if off < 0 || n < 0 || off+n > int64(len(o.data)) {
		return nil, fmt.Errorf("gatewaytest: read [%d, %d) of a %d-byte object", off, off+n, len(o.data))
	}
	return io.NopCloser(bytes.NewReader(o.data[off : off+n])), nil
}

// LocalExtents hands over the object's bytes in a memfd, one extent
// (the fake has no files of its own).
func (b *bucket) LocalExtents(_ context.Context, info store.ObjectInfo, off, n int64) ([]backend.Extent, func(), error) {
	b.f.mu.Lock()
	o, ok := b.objects[info.Key]
	var data []byte
	if ok {
		data = o.data
	}
	b.f.mu.Unlock()
	if !ok || o.info.Validator != info.Validator {
		return nil, nil, store.ErrPreconditionFailed
	}
	if off < 0 || n < 0 || off+n > int64(len(data)) {
		return nil, nil, fmt.Errorf("gatewaytest: extents [%d, %d) of a %d-byte object: %w", off, off+n, len(data), backend.ErrInvalidArgument)
	}
	fd, err := unix.MemfdCreate("gatewaytest-object", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, nil, err
	}
	f := os.NewFile(uintptr(fd), "gatewaytest-object")
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, nil, err
	}
	return []backend.Extent{{File: f, FileOffset: off, Length: n, ObjectOffset: off}}, func() { f.Close() }, nil
}

func (b *bucket) Forget(key string) {
	b.f.mu.Lock()
	defer b.f.mu.Unlock()
	b.f.forgotten[b.name+"/"+key]++
}

// readBody reads a body as a store does: exactly size bytes when size >= 0,
// then to io.EOF, so a verifying reader can fail the write at its end.
func readBody(body io.Reader, size int64) ([]byte, error) {
	if size < 0 {
		data, err := io.ReadAll(body)
		if err != nil {
			return nil, fmt.Errorf("gatewaytest: reading body: %w", err)
		}
		return data, nil
	}
	data := make([]byte, size)
	if _, err := io.ReadFull(body, data); err != nil {
		return nil, fmt.Errorf("gatewaytest: reading body: %w", err)
	}
	if err := store.ExpectEOF(body); err != nil {
		return nil, fmt.Errorf("gatewaytest: reading body: %w", err)
	}
	return data, nil
}

func (b *bucket) Put(ctx context.Context, key string, body io.Reader, size int64, opts store.PutOptions) (store.ObjectInfo, error) {
	b.f.mu.Lock()
	err := b.f.failure(OpPut)
	b.f.mu.Unlock()
	if err != nil {
		return store.ObjectInfo{}, err
	}
	data, err := readBody(body, size)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.ObjectInfo{}, err
	}
	meta := opts.Metadata
	if opts.LateChecksums != nil {
		meta.Checksums = store.MergeMaps(meta.Checksums, opts.LateChecksums())
	}
	b.f.mu.Lock()
	defer b.f.mu.Unlock()
	cur, exists := b.objects[key]
	if opts.IfNoneMatch && exists {
		return store.ObjectInfo{}, store.ErrPreconditionFailed
	}
	if opts.IfMatch != "" && (!exists || cur.info.Validator != opts.IfMatch) {
		return store.ObjectInfo{}, store.ErrPreconditionFailed
	}
	return b.store(key, data, meta), nil
}

func (b *bucket) Delete(_ context.Context, key string) error {
	b.f.mu.Lock()
	defer b.f.mu.Unlock()
	if err := b.f.failure(OpDelete); err != nil {
		return err
	}
	delete(b.objects, key)
	return nil
}

// List yields the objects in byte order of their keys, following
// store.ListOptions: keys under Prefix, those with Delimiter after it folded
// into one common prefix each, only entries strictly after StartAfter (a
// common prefix at or before StartAfter is left out).
func (b *bucket) List(_ context.Context, opts store.ListOptions) iter.Seq2[store.Entry, error] {
	b.f.mu.Lock()
	err := b.f.failure(OpList)
	var entries []store.Entry
	if err == nil {
		entries = listEntries(b.objects, opts)
	}
	b.f.mu.Unlock()
	return func(yield func(store.Entry, error) bool) {
		if err != nil {
			yield(store.Entry{}, err)
			return
		}
		for _, e := range entries {
			if !yield(e, nil) {
				return
			}
		}
	}
}

func listEntries(objects map[string]*object, opts store.ListOptions) []store.Entry {
	var out []store.Entry
	lastPrefix := ""
	for _, key := range slices.Sorted(maps.Keys(objects)) {
		rest, ok := strings.CutPrefix(key, opts.Prefix)
		if !ok {
			continue
		}
		if opts.Delimiter != "" {
			if i := strings.Index(rest, opts.Delimiter); i >= 0 {
				cp := key[:len(opts.Prefix)+i+len(opts.Delimiter)]
				if cp == lastPrefix {
					continue
				}
				lastPrefix = cp
				if cp > opts.StartAfter {
					out = append(out, store.Entry{Key: cp, IsPrefix: true})
				}
				continue
			}
		}
		if key > opts.StartAfter {
			out = append(out, store.Entry{Key: key, Info: objects[key].info})
		}
	}
	return out
}

// LocalFiler: the fake's objects are never local files.
func (b *bucket) LocalFiler() (store.LocalFiler, string) { return nil, "" }

func (b *bucket) LocalRead(context.Context, store.ObjectInfo) (func(int64), error) {
	b.f.mu.Lock()
	defer b.f.mu.Unlock()
	if err := b.f.failure(OpLocalRead); err != nil {
		return nil, err
	}
	return func(int64) {}, nil
}

func (b *bucket) CreateUpload(_ context.Context, u backend.User, key string, meta store.Metadata, checksumAlg string) (backend.Upload, error) {
	b.f.mu.Lock()
	defer b.f.mu.Unlock()
	if err := b.f.failure(OpCreateUpload); err != nil {
		return backend.Upload{}, err
	}
	b.f.seq++
	up := &upload{Upload: backend.Upload{ID: fmt.Sprintf("upload-%d", b.f.seq), Bucket: b.name, Key: key,
		Initiator: u.Name, Created: b.f.now().UTC()}, meta: meta, alg: checksumAlg, seq: b.f.seq, parts: map[int]*part{}}
	b.uploads[up.ID] = up
	return up.view(), nil
}

// view is the upload as backend.Upload, parts by number; b.f.mu is held.
func (up *upload) view() backend.Upload {
	out := up.Upload
	out.Parts = nil
	for _, n := range slices.Sorted(maps.Keys(up.parts)) {
		p := up.parts[n].Part
		p.Checksums = maps.Clone(p.Checksums)
		out.Parts = append(out.Parts, p)
	}
	return out
}

func (b *bucket) Upload(id, key string) (backend.Upload, error) {
	b.f.mu.Lock()
	defer b.f.mu.Unlock()
	if err := b.f.failure(OpUpload); err != nil {
		return backend.Upload{}, err
	}
	up, ok := b.uploads[id]
	if !ok || up.Key != key {
		return backend.Upload{}, backend.ErrNoSuchUpload
	}
	return up.view(), nil
}

func (b *bucket) Uploads(prefix, keyMarker, idMarker string) iter.Seq[backend.Upload] {
	ups := b.sortedUploads(prefix)
	i := 0
	if keyMarker != "" {
		for i < len(ups) && ups[i].Key < keyMarker {
			i++
		}
		if idMarker == "" {
			for i < len(ups) && ups[i].Key == keyMarker {
				i++
			}
		} else {
			for j := i; j < len(ups) && ups[j].Key == keyMarker; j++ {
				if ups[j].ID == idMarker {
					i = j + 1
					break
				}
			}
		}
	}
	return slices.Values(ups[i:])
}

func (b *bucket) sortedUploads(prefix string) []backend.Upload {
	b.f.mu.Lock()
	defer b.f.mu.Unlock()
	var ups []*upload
	for _, up := range b.uploads {
		if strings.HasPrefix(up.Key, prefix) {
			ups = append(ups, up)
		}
	}
	slices.SortFunc(ups, func(x, y *upload) int {
		if c := strings.Compare(x.Key, y.Key); c != 0 {
			return c
		}
		return x.seq - y.seq
	})
	out := make([]backend.Upload, len(ups))
	for i, up := range ups {
		out[i] = up.view()
	}
	return out
}

func (b *bucket) UploadPart(ctx context.Context, bu backend.Upload, number int, body io.Reader, size int64, checksums func() map[string]string) (store.PartInfo, error) {
	b.f.mu.Lock()
	err := b.f.failure(OpUploadPart)
	b.f.mu.Unlock()
	if err != nil {
		return store.PartInfo{}, err
	}
	data, err := readBody(body, size)
	if err != nil {
		return store.PartInfo{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.PartInfo{}, err
	}
	sum := md5.Sum(data)
	pi := store.PartInfo{Number: number, Size: int64(len(data)), ETag: hex.EncodeToString(sum[:])}
	if checksums != nil {
		pi.Checksums = checksums()
	}
	b.f.mu.Lock()
	defer b.f.mu.Unlock()
	up, ok := b.uploads[bu.ID]
	if !ok || up.Key != bu.Key {
		return store.PartInfo{}, backend.ErrNoSuchUpload
	}
	pi.ModTime = b.f.now().UTC()
	up.parts[number] = &part{Part: backend.Part{Number: number, Size: pi.Size, ETag: pi.ETag,
		Checksums: maps.Clone(pi.Checksums), Modified: pi.ModTime}, data: data}
	return pi, nil
}

// CompleteUpload checks refs as the region does (ascending numbers, known
// parts with matching ETags, every part but the last at least the minimum
// part size) and joins the parts; the ETag is S3's "<md5 of md5s>-N".
func (b *bucket) CompleteUpload(_ context.Context, bu backend.Upload, refs []backend.PartRef, ifNoneMatch bool) (store.ObjectInfo, error) {
	b.f.mu.Lock()
	defer b.f.mu.Unlock()
	if err := b.f.failure(OpCompleteUpload); err != nil {
		return store.ObjectInfo{}, err
	}
	up, ok := b.uploads[bu.ID]
	if !ok || up.Key != bu.Key {
		return store.ObjectInfo{}, backend.ErrNoSuchUpload
	}
	if len(refs) == 0 {
		return store.ObjectInfo{}, fmt.Errorf("%w: a completion needs at least one part", store.ErrInvalidPart)
	}
	for i := 1; i < len(refs); i++ {
		if refs[i].Number <= refs[i-1].Number {
			return store.ObjectInfo{}, backend.ErrInvalidPartOrder
		}
	}
	var data, sums []byte
	for i, ref := range refs {
		p, ok := up.parts[ref.Number]
		if !ok || strings.Trim(ref.ETag, `"`) != p.ETag {
			return store.ObjectInfo{}, fmt.Errorf("%w: part %d", store.ErrInvalidPart, ref.Number)
		}
		if i < len(refs)-1 && p.Size < b.f.minPart {
			return store.ObjectInfo{}, fmt.Errorf("%w: part %d is %d bytes", backend.ErrEntityTooSmall, p.Number, p.Size)
		}
		raw, _ := hex.DecodeString(p.ETag)
		sums = append(sums, raw...)
		data = append(data, p.data...)
	}
	if _, exists := b.objects[up.Key]; exists && ifNoneMatch {
		return store.ObjectInfo{}, store.ErrPreconditionFailed
	}
	sum := md5.Sum(sums)
	info := b.commit(up.Key, data, fmt.Sprintf("%s-%d", hex.EncodeToString(sum[:]), len(refs)), up.meta)
	delete(b.uploads, up.ID)
	return info, nil
}

func (b *bucket) AbortUpload(_ context.Context, bu backend.Upload) error {
	b.f.mu.Lock()
	defer b.f.mu.Unlock()
	if err := b.f.failure(OpAbortUpload); err != nil {
		return err
	}
	up, ok := b.uploads[bu.ID]
	if !ok || up.Key != bu.Key {
		return backend.ErrNoSuchUpload
	}
	delete(b.uploads, up.ID)
	return nil
}

// fakeUsers is the Fake's backend.Users.
type fakeUsers struct{ f *Fake }

func (fu fakeUsers) SecretFor(accessKey string) (string, bool) {
	fu.f.mu.Lock()
	defer fu.f.mu.Unlock()
	u, ok := fu.f.keys[accessKey]
	if !ok {
		return "", false
	}
	return u.secret, true
}

func (fu fakeUsers) ByAccessKey(accessKey string) (backend.User, bool) {
	fu.f.mu.Lock()
	defer fu.f.mu.Unlock()
	u, ok := fu.f.keys[accessKey]
	if !ok {
		return backend.User{}, false
	}
	return u.User, true
}

func (fu fakeUsers) List() []backend.UserInfo {
	fu.f.mu.Lock()
	defer fu.f.mu.Unlock()
	var out []backend.UserInfo
	for _, name := range slices.Sorted(maps.Keys(fu.f.users)) {
		u := fu.f.users[name]
		out = append(out, backend.UserInfo{User: u.User, Grants: maps.Clone(u.grants)})
	}
	return out
}

func (fu fakeUsers) Add(_ context.Context, name string, c backend.Credentials) (backend.Credentials, error) {
	f := fu.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failure(OpUsersAdd); err != nil {
		return backend.Credentials{}, err
	}
	if _, ok := f.users[name]; ok {
		return backend.Credentials{}, backend.ErrUserExists
	}
	f.seq++
	if c.AccessKey == "" {
		c.AccessKey = fmt.Sprintf("AK%08d", f.seq)
	}
	if c.SecretKey == "" {
		c.SecretKey = fmt.Sprintf("SK%08d", f.seq)
	}
	if _, ok := f.keys[c.AccessKey]; ok {
		return backend.Credentials{}, backend.ErrAccessKeyInUse
	}
	u := &user{User: backend.User{Name: name, AccessKey: c.AccessKey, Created: f.now().UTC()}, secret: c.SecretKey, grants: map[string]string{}}
	f.users[name] = u
	f.keys[c.AccessKey] = u
	return c, nil
}

func (fu fakeUsers) Remove(_ context.Context, name string) error {
	f := fu.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failure(OpUsersRemove); err != nil {
		return err
	}
	u, ok := f.users[name]
	if !ok {
		return backend.ErrNoSuchUser
	}
	delete(f.users, name)
	delete(f.keys, u.AccessKey)
	return nil
}

// Grant gives name read or write on bucketName; only root and the
// bucket's owner may grant.
func (fu fakeUsers) Grant(_ context.Context, caller backend.User, name, bucketName, perm string) error {
	f := fu.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failure(OpUsersGrant); err != nil {
		return err
	}
	u, ok := f.users[name]
	if !ok {
		return backend.ErrNoSuchUser
	}
	b, ok := f.buckets[bucketName]
	if !ok {
		return backend.ErrNoSuchBucket
	}
	if !caller.Root && caller.Name != b.owner {
		return backend.ErrAccessDenied
	}
	if perm != "read" && perm != "write" {
		return fmt.Errorf("gatewaytest: permission %q: want read or write", perm)
	}
	u.grants[bucketName] = perm
	return nil
}

func (fu fakeUsers) Revoke(_ context.Context, caller backend.User, name, bucketName string) error {
	f := fu.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failure(OpUsersRevoke); err != nil {
		return err
	}
	u, ok := f.users[name]
	if !ok {
		return backend.ErrNoSuchUser
	}
	if b, ok := f.buckets[bucketName]; ok && !caller.Root && caller.Name != b.owner {
		return backend.ErrAccessDenied
	}
	delete(u.grants, bucketName)
	return nil
}

// Admin: pins and preload jobs are kept as records; nothing is warmed.

func (f *Fake) Pins() []backend.Pin {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.pins)
}

func (f *Fake) Pin(_ context.Context, bucketName, prefix string) (backend.Pin, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failure(OpPin); err != nil {
		return backend.Pin{}, err
	}
	if _, ok := f.buckets[bucketName]; !ok {
		return backend.Pin{}, backend.ErrNoSuchBucket
	}
	if len(prefix) > store.MaxKeyLen || strings.IndexByte(prefix, 0) >= 0 {
		return backend.Pin{}, backend.ErrInvalidPrefix
	}
	p := backend.Pin{Bucket: bucketName, Prefix: prefix, Created: f.now().UTC()}
	f.pins = append(f.pins, p)
	return p, nil
}

func (f *Fake) Unpin(_ context.Context, bucketName, prefix string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failure(OpUnpin); err != nil {
		return err
	}
	i := slices.IndexFunc(f.pins, func(p backend.Pin) bool { return p.Bucket == bucketName && p.Prefix == prefix })
	if i < 0 {
		return backend.ErrNoSuchPin
	}
	f.pins = slices.Delete(f.pins, i, i+1)
	return nil
}

// StartPreload records a job that is done at once.
func (f *Fake) StartPreload(_ context.Context, bucketName, prefix string, pin bool) (backend.PreloadStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failure(OpStartPreload); err != nil {
		return backend.PreloadStatus{}, err
	}
	if _, ok := f.buckets[bucketName]; !ok {
		return backend.PreloadStatus{}, backend.ErrNoSuchBucket
	}
	f.seq++
	st := backend.PreloadStatus{ID: fmt.Sprintf("job-%d", f.seq), Bucket: bucketName, Prefix: prefix, Pin: pin,
		Created: f.now().UTC(), Done: true}
	f.jobs[st.ID] = st
	return st, nil
}

func (f *Fake) Jobs() []backend.PreloadStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]backend.PreloadStatus, 0, len(f.jobs))
	for _, id := range slices.Sorted(maps.Keys(f.jobs)) {
		out = append(out, f.jobs[id])
	}
	return out
}

func (f *Fake) Job(id string) (backend.PreloadStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failure(OpJob); err != nil {
		return backend.PreloadStatus{}, err
	}
	st, ok := f.jobs[id]
	if !ok {
		return backend.PreloadStatus{}, backend.ErrNoSuchJob
	}
	return st, nil
}

// CancelPreload drops a job (they are all finished): removed is true.
func (f *Fake) CancelPreload(_ context.Context, id string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failure(OpCancelPreload); err != nil {
		return false, err
	}
	if _, ok := f.jobs[id]; !ok {
		return false, backend.ErrNoSuchJob
	}
	delete(f.jobs, id)
	return true, nil
}

// EgressLedger has no rows.
func (f *Fake) EgressLedger(context.Context, time.Time, time.Time) ([]egress.Row, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return nil, f.failure(OpEgressLedger)
}

func (f *Fake) RegionLocation() string { return "onprem:test" }

func (f *Fake) HasPolicy() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.policy
}

// SetDegraded sets what Degraded reports.
func (f *Fake) SetDegraded(d backend.Degraded) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.degraded = d
}

// Degraded reports what SetDegraded set (nothing by default).
func (f *Fake) Degraded(context.Context) (backend.Degraded, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.degraded, f.failure(OpDegraded)
}

// Repair: every fake bucket is a single-store bucket.
func (f *Fake) Repair(_ context.Context, bucketName, _ string, _ func(backend.RepairProgress), _ func(string, []string)) (backend.RepairStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failure(OpRepair); err != nil {
		return backend.RepairStats{}, err
	}
	if _, ok := f.buckets[bucketName]; !ok {
		return backend.RepairStats{}, backend.ErrNoSuchBucket
	}
	return backend.RepairStats{}, backend.ErrNothingToRepair
}

// The fake keeps no versions: every object is its key's null version, and
// versioning cannot be turned on (versioning is tested against the real
// namespace).

// DeleteLatest deletes key; there is no delete marker.
func (b *bucket) DeleteLatest(ctx context.Context, key string) (string, error) {
	return "", b.Delete(ctx, key)
}

// Versioning is always "" (never versioned).
func (b *bucket) Versioning() string { return "" }

// SetVersioning is refused.
func (b *bucket) SetVersioning(context.Context, string) error {
	return fmt.Errorf("%w: the test fake keeps no versions", backend.ErrVersioningNotSupported)
}

// SetObjectLock is refused: the fake keeps no versions (object lock is
// tested end to end, e2e/objectlock_test.go).
func (b *bucket) SetObjectLock(context.Context, string, string, backend.LockChange) error {
	return fmt.Errorf("%w: the test fake keeps no versions", backend.ErrObjectLockNotSupported)
}

// StatVersion knows the null version only.
func (b *bucket) StatVersion(ctx context.Context, key, id string) (store.ObjectInfo, error) {
	if id != "null" {
		return store.ObjectInfo{}, backend.ErrNoSuchVersion
	}
	info, err := b.Stat(ctx, key)
	info.VersionID = "null"
	return info, err
}

// DeleteVersion deletes the null version.
func (b *bucket) DeleteVersion(ctx context.Context, key, id string) (bool, error) {
	if id != "null" {
		return false, nil
	}
	return false, b.Delete(ctx, key)
}

// ListVersions lists every object as its null, latest, version.
func (b *bucket) ListVersions(ctx context.Context, opts backend.VersionListOptions) iter.Seq2[backend.VersionEntry, error] {
	return func(yield func(backend.VersionEntry, error) bool) {
		for e, err := range b.List(ctx, store.ListOptions{Prefix: opts.Prefix, Delimiter: opts.Delimiter, StartAfter: opts.KeyMarker}) {
			if err != nil {
				yield(backend.VersionEntry{}, err)
				return
			}
			e.Info.VersionID = "null"
			if !yield(backend.VersionEntry{Key: e.Key, IsPrefix: e.IsPrefix, IsLatest: !e.IsPrefix, Info: e.Info}, nil) {
				return
			}
		}
	}
}

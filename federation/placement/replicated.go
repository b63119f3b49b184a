package placement

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
)

// Replicated is a placement that keeps a full copy of every object in each
// of its stores. See the package documentation for the write and read
// rules; it is a store.Store and a store.Multiparter.
type Replicated struct {
	base
	natives nativeCache
}

var (
	_ store.Store       = (*Replicated)(nil)
	_ store.Multiparter = (*Replicated)(nil)
)

// Reserved user-metadata names of a copy. A user name that starts with
// repMetaPrefix is stored behind repMetaEscape, so every name round-trips.
const (
	repMetaPrefix  = "fedgate-rep-"
	repMetaVersion = repMetaPrefix + "version" // the version id of the write
	repMetaETag    = repMetaPrefix + "etag"    // the S3 ETag, on copies made by copying
	repMetaEscape  = repMetaPrefix + "u-"

	repValidatorPrefix    = "rv-" // + version id
	nativeValidatorPrefix = "rn-" // + store index + "-" + the store's validator
)

// NewReplicated returns the placement that writes every object to each of
// stores and reads it from the first healthy one in read order
// (WithRank). It understands WithRank and WithCooldown.
func NewReplicated(name string, loc policies.Location, stores []store.Store, opts ...Option) (*Replicated, error) {
	b, err := newBase("replicated", name, loc, stores, opts)
	if err != nil {
		return nil, err
	}
	return &Replicated{base: b}, nil
}

// encodeRepMeta returns m with its user names escaped and the placement's
// own entries added. m is not modified.
func encodeRepMeta(m store.Metadata, version, etag string) store.Metadata {
	user := make(map[string]string, len(m.User)+2)
	for k, v := range m.User {
		if strings.HasPrefix(k, repMetaPrefix) {
			k = repMetaEscape + k
		}
		user[k] = v
	}
	if version != "" {
		user[repMetaVersion] = version
	}
	if etag != "" {
		user[repMetaETag] = etag
	}
	m.User = user
	return m
}

// decodeRepMeta undoes encodeRepMeta.
func decodeRepMeta(m store.Metadata) (_ store.Metadata, version, etag string) {
	if len(m.User) == 0 {
		return m, "", ""
	}
	user := make(map[string]string, len(m.User))
	for k, v := range m.User {
		switch {
		case strings.HasPrefix(k, repMetaEscape):
			user[k[len(repMetaEscape):]] = v
		case k == repMetaVersion:
			version = v
		case k == repMetaETag:
			etag = v
		case strings.HasPrefix(k, repMetaPrefix):
			// an entry of a later format: not the user's
		default:
			user[k] = v
		}
	}
	if len(user) == 0 {
		user = nil
	}
	m.User = user
	return m, version, etag
}

// decodeInfo turns store i's info about a copy into the placement's.
func (r *Replicated) decodeInfo(i int, info store.ObjectInfo) (store.ObjectInfo, string) {
	meta, version, etag := decodeRepMeta(info.Metadata)
	info.Metadata = meta
	if etag != "" {
		info.ETag = etag
	}
	info.Validator = r.validator(i, version, info.Validator)
	return info, version
}

// validator is the placement's Validator of a copy: derived from the
// version id every copy of one write carries, so it is the same whichever
// copy answers. A copy without one (written around fedgate) gets its
// store's own validator, tagged with the store.
func (r *Replicated) validator(i int, version string, native store.Validator) store.Validator {
	if version != "" {
		return store.Validator(repValidatorPrefix + version)
	}
	if native == "" {
		return ""
	}
	return store.Validator(nativeValidatorPrefix + strconv.Itoa(i) + "-" + string(native))
}

// Stat returns the object's info from the first store in read order that
// has it. A store that fails is skipped; a store that does not have the
// key is skipped too (its copy may be missing after a partial write), so
// ErrNotFound means no reachable store has the key.
func (r *Replicated) Stat(ctx context.Context, key string) (store.ObjectInfo, error) {
	var errs []error
	notFound := false
	for _, i := range r.order() {
		info, err := r.stores[i].Stat(ctx, key)
		r.observe(i, err)
		switch {
		case err == nil:
			info, _ = r.decodeInfo(i, info)
			return info, nil
		case errors.Is(err, store.ErrNotFound):
			notFound = true
		case errors.Is(err, store.ErrInvalidKey), ctx.Err() != nil:
			return store.ObjectInfo{}, fmt.Errorf("placement %s: stat %s: %w", r.name, quote(key), err)
		default:
			errs = append(errs, r.storeErr(i, err))
		}
	}
	if notFound {
		return store.ObjectInfo{}, fmt.Errorf("placement %s: stat %s: %w", r.name, quote(key), store.ErrNotFound)
	}
	return store.ObjectInfo{}, fmt.Errorf("placement %s: stat %s: %w", r.name, quote(key), errors.Join(errs...))
}

// ReadRange streams the range from the first store in read order that has
// the key, failing over on errors and on ErrNotFound as Stat does. With
// ifMatch, a copy is read only if it holds that version (checked against
// the store's own validator, so the bytes read are the ones matched); a
// copy of another version gives ErrPreconditionFailed. A read that fails
// part-way is not resumed on another copy: the caller retries.
func (r *Replicated) ReadRange(ctx context.Context, key string, offset, length int64, ifMatch store.Validator) (io.ReadCloser, error) {
	var errs []error
	var without []int // stores that lacked or failed to give their copy
	notFound := false
	for _, i := range r.order() {
		rc, err := r.readCopy(ctx, i, key, offset, length, ifMatch)
		r.observe(i, err)
		switch {
		case err == nil:
			r.reportDegraded(ctx, key, without)
			return rc, nil
		case errors.Is(err, store.ErrNotFound):
			notFound = true
			without = append(without, i)
		case errors.Is(err, store.ErrInvalidKey), errors.Is(err, store.ErrPreconditionFailed), ctx.Err() != nil:
			return nil, fmt.Errorf("placement %s: read %s: %w", r.name, quote(key), err)
		default:
			errs = append(errs, r.storeErr(i, err))
			without = append(without, i)
		}
	}
	if notFound {
		return nil, fmt.Errorf("placement %s: read %s: %w", r.name, quote(key), store.ErrNotFound)
	}
	return nil, fmt.Errorf("placement %s: read %s: %w", r.name, quote(key), errors.Join(errs...))
}

func (r *Replicated) readCopy(ctx context.Context, i int, key string, offset, length int64, ifMatch store.Validator) (io.ReadCloser, error) {
	s := r.stores[i]
	v := string(ifMatch)
	switch {
	case v == "":
		return s.ReadRange(ctx, key, offset, length, "")
	case strings.HasPrefix(v, nativeValidatorPrefix):
		idx, native, ok := strings.Cut(v[len(nativeValidatorPrefix):], "-")
		if !ok || idx != strconv.Itoa(i) {
			return nil, store.ErrPreconditionFailed
		}
		return s.ReadRange(ctx, key, offset, length, store.Validator(native))
	case !strings.HasPrefix(v, repValidatorPrefix):
		return nil, store.ErrPreconditionFailed
	}
	version := v[len(repValidatorPrefix):]
	if native, ok := r.natives.get(i, key, version); ok {
		rc, err := s.ReadRange(ctx, key, offset, length, native)
		if !errors.Is(err, store.ErrPreconditionFailed) {
			return rc, err
		}
		r.natives.drop(i, key, version)
	}
	info, err := s.Stat(ctx, key)
	if err != nil {
		return nil, err
	}
	if _, got := r.decodeInfo(i, info); got != version {
		return nil, store.ErrPreconditionFailed
	}
	rc, err := s.ReadRange(ctx, key, offset, length, info.Validator)
	if err == nil {
		r.natives.put(i, key, version, info.Validator)
	}
	return rc, err
}

// Put writes body to every store at once (the body is read once and teed
// through pipes; see tee for the memory bound) and returns when every
// store has committed it. An error from any store fails the Put: when one
// fails before the body's end the others are aborted and nothing changes;
// when one fails as it commits, the others may already hold the new
// object, so the key may differ between stores until a later Put, Delete
// or Repair. The error names the store.
//
// Every copy carries the write's version id in its metadata; the
// Validator is derived from it. After the copies are committed the Put
// checks that they all hold the same version: when a concurrent Put of the
// same key interleaved with it, the copies that hold the older version are
// replaced by the newer one (by version id), so concurrent writers leave
// one version everywhere.
//
// Conditional writes (IfNoneMatch, IfMatch) are decided by the first
// listed store, the primary: the body is written there with the condition
// (IfMatch compares the placement's Validator, then uses the primary's own
// validator for the atomic check), and, once committed, copied from the
// primary to the others. So a losing conditional write changes nothing
// anywhere, at the cost of reading the object back from the primary.
func (r *Replicated) Put(ctx context.Context, key string, body io.Reader, size int64, opts store.PutOptions) (store.ObjectInfo, error) {
	if err := checkKey(key); err != nil {
		return store.ObjectInfo{}, fmt.Errorf("placement %s: put %s: %w", r.name, quote(key), err)
	}
	if err := ctx.Err(); err != nil {
		return store.ObjectInfo{}, err
	}
	version := newVersion(r.opts.now(), "")
	if opts.IfNoneMatch || opts.IfMatch != "" {
		return r.putConditional(ctx, key, body, size, opts, version)
	}
	late := &lateOnce{f: opts.LateChecksums}
	inner := store.PutOptions{Metadata: encodeRepMeta(opts.Metadata, version, ""), LateChecksums: late.fn()}
	infos := make([]store.ObjectInfo, len(r.stores))
	sinkCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	sinks := make([]func(io.Reader) error, len(r.stores))
	for i, s := range r.stores {
		sinks[i] = func(rd io.Reader) error {
			info, err := s.Put(sinkCtx, key, rd, size, inner)
			infos[i] = info
			r.observe(i, err)
			return err
		}
	}
	sinkErrs, bodyErr := Tee(ctx, body, size, sinks, true, cancel)
	if bodyErr != nil {
		return store.ObjectInfo{}, fmt.Errorf("placement %s: put %s: read body: %w", r.name, quote(key), bodyErr)
	}
	if err := r.sinkError(sinkErrs); err != nil {
		return store.ObjectInfo{}, fmt.Errorf("placement %s: put %s: %w", r.name, quote(key), err)
	}
	// Converge with a concurrent writer of the key, if there was one. A
	// failure here leaves the copies as the stores committed them: each
	// holds a whole version, and Repair settles them.
	_, _ = r.converge(ctx, key, false)
	meta := opts.Metadata
	meta.Checksums = store.MergeMaps(meta.Checksums, late.get())
	return r.resultInfo(key, infos[0], version, meta), nil
}

// sinkError reports the stores that failed, the ones that failed on their
// own before the ones aborted because of them.
func (r *Replicated) sinkError(errs []error) error {
	var own, aborted []error
	for i, err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, errAborted):
			aborted = append(aborted, r.storeErr(i, err))
		default:
			own = append(own, r.storeErr(i, err))
		}
	}
	if len(own) > 0 {
		return errors.Join(own...)
	}
	return errors.Join(aborted...)
}

func (r *Replicated) resultInfo(key string, info store.ObjectInfo, version string, meta store.Metadata) store.ObjectInfo {
	info.Key = key
	info.Validator = store.Validator(repValidatorPrefix + version)
	info.Metadata = meta
	return info
}

func (r *Replicated) putConditional(ctx context.Context, key string, body io.Reader, size int64, opts store.PutOptions, version string) (store.ObjectInfo, error) {
	p := r.stores[0]
	late := &lateOnce{f: opts.LateChecksums}
	inner := store.PutOptions{
		IfNoneMatch:   opts.IfNoneMatch,
		Metadata:      encodeRepMeta(opts.Metadata, version, ""),
		LateChecksums: late.fn(),
	}
	if opts.IfMatch != "" {
		cur, err := p.Stat(ctx, key)
		r.observe(0, err)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return store.ObjectInfo{}, fmt.Errorf("placement %s: put %s: %w", r.name, quote(key), store.ErrPreconditionFailed)
		case err != nil:
			return store.ObjectInfo{}, fmt.Errorf("placement %s: put %s: %w", r.name, quote(key), r.storeErr(0, err))
		}
		if got, _ := r.decodeInfo(0, cur); got.Validator != opts.IfMatch {
			return store.ObjectInfo{}, fmt.Errorf("placement %s: put %s: %w", r.name, quote(key), store.ErrPreconditionFailed)
		}
		inner.IfMatch = cur.Validator
	} else if _, err := p.Stat(ctx, key); err == nil {
		// Fail early rather than after sending the body; the primary's
		// create-if-absent decides anyway.
		return store.ObjectInfo{}, fmt.Errorf("placement %s: put %s: %w", r.name, quote(key), store.ErrPreconditionFailed)
	}
	info, err := p.Put(ctx, key, body, size, inner)
	r.observe(0, err)
	if err != nil {
		return store.ObjectInfo{}, fmt.Errorf("placement %s: put %s: %w", r.name, quote(key), r.storeErr(0, err))
	}
	meta := opts.Metadata
	meta.Checksums = store.MergeMaps(meta.Checksums, late.get())
	targets := make([]int, 0, len(r.stores)-1)
	for i := 1; i < len(r.stores); i++ {
		targets = append(targets, i)
	}
	if err := r.copyOut(ctx, key, 0, info.Validator, info.Size, encodeRepMeta(meta, version, info.ETag), version, targets); err != nil {
		return store.ObjectInfo{}, fmt.Errorf("placement %s: put %s: written to %s but not copied to every store: %w",
			r.name, quote(key), p.Name(), err)
	}
	return r.resultInfo(key, info, version, meta), nil
}

// copyOut copies the version of key that store src holds (its own
// validator srcNative) to the stores in targets, reading it once. A target
// that already holds that version or a newer one is left alone; an older
// copy is replaced only if it did not change meanwhile (IfMatch on its
// validator), an absent one only if it is still absent. When the source
// no longer holds the version (a newer write replaced it) there is nothing
// to copy and copyOut returns nil.
func (r *Replicated) copyOut(ctx context.Context, key string, src int, srcNative store.Validator, size int64, meta store.Metadata, version string, targets []int) error {
	var failed []error
	for attempt := 0; len(targets) > 0; attempt++ {
		if attempt == 5 {
			failed = append(failed, fmt.Errorf("copies of %s kept changing", quote(key)))
			break
		}
		conds := make([]store.PutOptions, len(targets))
		skip := make([]bool, len(targets))
		errs := parallel(len(targets), len(targets), func(k int) error {
			i := targets[k]
			cur, err := r.stores[i].Stat(ctx, key)
			r.observe(i, err)
			switch {
			case errors.Is(err, store.ErrNotFound):
				conds[k] = store.PutOptions{Metadata: meta, IfNoneMatch: true}
			case err != nil:
				return r.storeErr(i, err)
			default:
				if _, v := r.decodeInfo(i, cur); v >= version {
					skip[k] = true
				}
				conds[k] = store.PutOptions{Metadata: meta, IfMatch: cur.Validator}
			}
			return nil
		})
		var active []int
		var activeConds []store.PutOptions
		for k, err := range errs {
			switch {
			case err != nil:
				failed = append(failed, err)
			case !skip[k]:
				active = append(active, targets[k])
				activeConds = append(activeConds, conds[k])
			}
		}
		if len(active) == 0 {
			break
		}
		rc, err := r.stores[src].ReadRange(ctx, key, 0, -1, srcNative)
		r.observe(src, err)
		if errors.Is(err, store.ErrPreconditionFailed) || errors.Is(err, store.ErrNotFound) {
			break // superseded at the source: the newer write copies itself
		}
		if err != nil {
			failed = append(failed, r.storeErr(src, err))
			break
		}
		if n, ok := ctx.Value(repairReadKey{}).(*atomic.Int64); ok {
			rc = &readCounter{ReadCloser: rc, n: n} // a repair's bytes read
		}
		sinks := make([]func(io.Reader) error, len(active))
		for k, i := range active {
			sinks[k] = func(rd io.Reader) error {
				_, err := r.stores[i].Put(ctx, key, rd, size, activeConds[k])
				r.observe(i, err)
				return err
			}
		}
		sinkErrs, bodyErr := Tee(ctx, rc, size, sinks, false, nil)
		rc.Close()
		if bodyErr != nil {
			failed = append(failed, fmt.Errorf("reading the copy from %s: %w", r.stores[src].Name(), bodyErr))
			break
		}
		targets = targets[:0]
		for k, err := range sinkErrs {
			switch {
			case err == nil:
			case errors.Is(err, store.ErrPreconditionFailed):
				targets = append(targets, active[k]) // changed meanwhile: look again
			default:
				failed = append(failed, r.storeErr(active[k], err))
			}
		}
	}
	return errors.Join(failed...)
}

// converge makes every copy of key that holds an older version than the
// newest copy hold the newest one; with missing, stores without a copy get
// one too. It returns how many copies it wrote.
func (r *Replicated) converge(ctx context.Context, key string, missing bool) (int, error) {
	n := len(r.stores)
	infos := make([]store.ObjectInfo, n)
	versions := make([]string, n)
	errs := parallel(n, n, func(i int) error {
		info, err := r.stores[i].Stat(ctx, key)
		r.observe(i, err)
		if err == nil {
			infos[i], versions[i] = info, ""
			_, versions[i] = r.decodeInfo(i, info)
		}
		return err
	})
	newest := -1
	for i := range n {
		if errs[i] == nil && (newest < 0 || versions[i] > versions[newest]) {
			newest = i
		}
	}
	if newest < 0 || versions[newest] == "" {
		return 0, nil // nothing, or only copies written around fedgate
	}
	var targets []int
	var failed []error
	for i := range n {
		switch {
		case errs[i] == nil && versions[i] < versions[newest]:
			targets = append(targets, i)
		case errors.Is(errs[i], store.ErrNotFound) && missing:
			targets = append(targets, i)
		case errs[i] != nil && !errors.Is(errs[i], store.ErrNotFound):
			failed = append(failed, r.storeErr(i, errs[i]))
		}
	}
	if found := dryRun(ctx); found != nil {
		if len(targets) > 0 {
			found(key, r.names(targets))
		}
		return len(targets), errors.Join(failed...)
	}
	if len(targets) > 0 {
		src := infos[newest]
		meta, version, etag := decodeRepMeta(src.Metadata)
		if etag == "" {
			etag = src.ETag
		}
		if err := r.copyOut(ctx, key, newest, src.Validator, src.Size, encodeRepMeta(meta, version, etag), version, targets); err != nil {
			failed = append(failed, err)
			return 0, errors.Join(failed...)
		}
	}
	return len(targets), errors.Join(failed...)
}

// Delete removes the key from every store. It is idempotent. When a store
// fails, the others have still deleted their copy and the error names the
// store; the object stays readable from the failed store's copy until a
// later Delete succeeds there.
func (r *Replicated) Delete(ctx context.Context, key string) error {
	errs := parallel(len(r.stores), len(r.stores), func(i int) error {
		err := r.stores[i].Delete(ctx, key)
		r.observe(i, err)
		if err != nil {
			return r.storeErr(i, err)
		}
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("placement %s: delete %s: %w", r.name, quote(key), err)
	}
	return nil
}

// List lists the first healthy store in read order, resuming on the next
// one after the last entry when a store fails part-way. Entries carry the
// copy's S3 ETag; their Validator is the placement's when the store's
// listing gives the copy's metadata (posix), and empty otherwise (Stat
// gives it).
func (r *Replicated) List(ctx context.Context, opts store.ListOptions) iter.Seq2[store.Entry, error] {
	return func(yield func(store.Entry, error) bool) {
		for e, err := range r.listFailover(ctx, opts, func(ctx context.Context, i int, o store.ListOptions) iter.Seq2[store.Entry, error] {
			return r.stores[i].List(ctx, o)
		}) {
			if err == nil && !e.IsPrefix {
				meta, version, etag := decodeRepMeta(e.Info.Metadata)
				e.Info.Metadata = meta
				if etag != "" {
					e.Info.ETag = etag
				}
				e.Info.Validator = ""
				if version != "" {
					e.Info.Validator = store.Validator(repValidatorPrefix + version)
				}
			}
			if !yield(e, err) {
				return
			}
		}
	}
}

// Repair makes every object under prefix present, at its newest version,
// in every store: it lists the keys of all stores (their union), and for
// each key copies the newest copy to the stores that miss it or hold an
// older version. progress, when set, is called after each object with the
// objects done and the total (counted by a first listing pass). Under
// DryRun it only reports.
func (r *Replicated) Repair(ctx context.Context, prefix string, progress func(RepairProgress)) (RepairStats, error) {
	var st RepairStats
	var errs repairErrors
	// The copies read to rewrite others count as BytesRead (copyOut).
	var read atomic.Int64
	ctx = context.WithValue(ctx, repairReadKey{}, &read)
	lists := func() iter.Seq2[string, error] {
		ls := make([]iter.Seq2[store.Entry, error], len(r.stores))
		for i, s := range r.stores {
			ls[i] = s.List(ctx, store.ListOptions{Prefix: prefix})
		}
		return mergeKeys(ls)
	}
	var total int64
	for _, err := range lists() {
		if err == nil {
			total++
		}
	}
	for key, err := range lists() {
		if err != nil {
			errs.add(err)
			continue
		}
		if ctx.Err() != nil {
			return st, ctx.Err()
		}
		st.Objects++
		n, err := r.converge(ctx, key, true)
		st.Copies += int64(n)
		switch {
		case err != nil:
			st.Failed++
			errs.add(fmt.Errorf("%s: %w", quote(key), err))
		case n > 0:
			st.Repaired++
		default:
			st.Healthy++
		}
		st.BytesRead = read.Load()
		if progress != nil {
			progress(RepairProgress{Objects: st.Objects, Total: max(total, st.Objects), BytesRead: st.BytesRead})
		}
	}
	st.BytesRead = read.Load()
	if err := errs.err(); err != nil {
		return st, fmt.Errorf("placement %s: repair %s: %w", r.name, quote(prefix), err)
	}
	return st, nil
}

// repairReadKey carries, in a Repair's context, the counter of the bytes
// it read from stores.
type repairReadKey struct{}

// readCounter adds the bytes read through it to n.
type readCounter struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c *readCounter) Read(p []byte) (int, error) {
	k, err := c.ReadCloser.Read(p)
	c.n.Add(int64(k))
	return k, err
}

// nativeCache remembers, per store, which of the store's own validators
// holds which version of a key, so a read with ifMatch needs no Stat. It
// is bounded: it forgets everything when full.
type nativeCache struct {
	mu sync.Mutex
	m  map[string]store.Validator
}

const nativeCacheSize = 4096

func nativeKey(i int, key, version string) string {
	return strconv.Itoa(i) + "\x00" + version + "\x00" + key
}

func (c *nativeCache) get(i int, key, version string) (store.Validator, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[nativeKey(i, key, version)]
	return v, ok
}

func (c *nativeCache) put(i int, key, version string, v store.Validator) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= nativeCacheSize {
		c.m = make(map[string]store.Validator)
	}
	c.m[nativeKey(i, key, version)] = v
}

func (c *nativeCache) drop(i int, key, version string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, nativeKey(i, key, version))
}

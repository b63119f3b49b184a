package azure

// Native versions (store.Versioner): Azure blob versions. A version id is
// Azure's (a timestamp such as 2026-01-02T03:04:05.1234567Z, so ids sort
// by age); a blob written while versioning was off has none and is listed
// as the "null" version, as S3 lists one. Azure has no delete markers:
// deleting a blob makes its current version a previous one, and a key
// whose blob was deleted lists only previous versions, none latest.
//
// Every request for one version checks that the answer is that version
// (x-ms-version-id): a server that ignores versionid (Azurite keeps no
// versions and answers, and deletes, the current blob) must not pass the
// current blob off as the version asked for, nor delete it.
//
// NativeVersioning: versioning is a setting of the storage account's blob
// service that only the management API (Microsoft.Storage, ARM) shows; the
// blob service's own Get Blob Service Properties does not carry it. So the
// store asks the data, reading before it writes: a current blob with a
// version id in the first page of the container's listing shows that the
// last write of that blob was versioned (answer cached versioningTTL).
// Without one (an empty container, or blobs from before versioning), it
// writes an empty probe blob under the reserved prefix and looks for the
// x-ms-version-id every write gets while versioning is on, then deletes the
// probe and its version; that answer is cached probeTTL, so a node writes a
// probe at most every ten minutes into a container it mounts. With a
// credential that may not write (a read-only SAS) the listing's answer
// stands. Azure has no "suspended": the answer is store.VersioningEnabled
// or "" (with versioning turned off again, versions written before stay
// listed).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/fedgate/fedgate/store"
)

var _ store.Versioner = (*Store)(nil)

// versioningTTL is how long NativeVersioning's answer from the listing is
// reused, probeTTL how long one from a probe write is.
const (
	versioningTTL = 30 * time.Second
	probeTTL      = 10 * time.Minute
)

// probePrefix is where NativeVersioning writes its probe blobs.
const probePrefix = reservedPrefix + "probe/"

// NativeVersioning returns store.VersioningEnabled when writes to the
// container get version ids, else "" (see the file comment for how it
// finds out). ErrAccessDenied, ErrThrottled as mapped from Azure.
func (s *Store) NativeVersioning(ctx context.Context) (string, error) {
	s.vmu.Lock()
	if !s.vat.IsZero() && s.now().Before(s.vat) {
		st := s.vstate
		s.vmu.Unlock()
		return st, nil
	}
	s.vmu.Unlock()
	st, ttl, err := s.askVersioning(ctx)
	if err != nil {
		return "", err
	}
	s.vmu.Lock()
	s.vstate, s.vat = st, s.now().Add(ttl)
	s.vmu.Unlock()
	return st, nil
}

// askVersioning asks the listing, then (when it shows nothing) a probe
// write, and says how long the answer holds.
func (s *Store) askVersioning(ctx context.Context) (string, time.Duration, error) {
	st, err := s.versioningFromListing(ctx)
	if err != nil || st != "" {
		return st, versioningTTL, err
	}
	st, err = s.probeVersioning(ctx)
	if errors.Is(err, store.ErrAccessDenied) {
		return "", versioningTTL, nil // may not write: the listing's answer stands
	}
	return st, probeTTL, err
}

// DeleteCurrent deletes key as Delete does: with versioning on, Azure keeps
// the current version as a previous one and adds no delete marker, so the
// id is always "".
func (s *Store) DeleteCurrent(ctx context.Context, key string) (string, error) {
	return "", s.Delete(ctx, key)
}

// probeVersioning writes an empty blob and reads the answer's version id.
func (s *Store) probeVersioning(ctx context.Context) (string, error) {
	name := probePrefix + store.RandomID()
	resp, err := s.cont.NewBlockBlobClient(name).Upload(ctx, streaming.NopCloser(bytes.NewReader(nil)), nil)
	if err != nil {
		return "", s.mapErr("get versioning", name, err)
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_, _ = s.cont.NewBlobClient(name).Delete(dctx, nil)
	if resp.VersionID == nil || *resp.VersionID == "" {
		return "", nil
	}
	// The delete made the probe a previous version: remove it for good.
	if vc, err := s.cont.NewBlobClient(name).WithVersionID(*resp.VersionID); err == nil {
		_, _ = vc.Delete(dctx, nil)
	}
	return store.VersioningEnabled, nil
}

// versioningFromListing looks for a current blob with a version id in the
// first page of the container's listing.
func (s *Store) versioningFromListing(ctx context.Context) (string, error) {
	resp, err := s.cont.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{
		Include: container.ListBlobsInclude{Versions: true}, MaxResults: to.Ptr[int32](listPageSize),
	}).NextPage(ctx)
	if err != nil {
		return "", s.mapErr("get versioning", "", err)
	}
	if resp.Segment != nil {
		for _, it := range resp.Segment.BlobItems {
			if it != nil && it.VersionID != nil && it.IsCurrentVersion != nil && *it.IsCurrentVersion {
				return store.VersioningEnabled, nil
			}
		}
	}
	return "", nil
}

// noSuchVersion is the error of a version key does not have; err, when
// set, is Azure's answer.
func (s *Store) noSuchVersion(op, key, id string, err error) error {
	if err == nil {
		return fmt.Errorf("azure: %s %q version %q: %w", op, key, id, store.ErrNoSuchVersion)
	}
	return store.Retried(fmt.Errorf("azure: %s %q version %q: %w: %w", op, key, id, store.ErrNoSuchVersion,
		&azError{msg: s.scrub(describe(err)), err: err}))
}

// isNoSuchVersion reports whether err is Azure's answer for a version that
// is not there: 404, or 400 for an id it cannot parse.
func isNoSuchVersion(err error) bool {
	var re *azcore.ResponseError
	if errors.As(err, &re) && re.StatusCode == http.StatusBadRequest {
		return true
	}
	return errors.Is(kindOf(err), store.ErrNotFound)
}

// sameVersion reports whether an answer's x-ms-version-id is version id.
func sameVersion(got *string, id string) bool {
	if id == store.NoVersionID {
		return got == nil || *got == ""
	}
	return got != nil && *got == id
}

// versionClient is the client of one version of key: the blob itself for
// the null version.
func (s *Store) versionClient(key, id string) (*blob.Client, error) {
	bc := s.cont.NewBlobClient(key)
	if id == store.NoVersionID {
		return bc, nil
	}
	return bc.WithVersionID(id)
}

// versionProps returns the properties of one version of key.
func (s *Store) versionProps(ctx context.Context, op, key, id string) (blob.GetPropertiesResponse, error) {
	if id == "" {
		return blob.GetPropertiesResponse{}, s.noSuchVersion(op, key, id, nil)
	}
	vc, err := s.versionClient(key, id)
	if err != nil {
		return blob.GetPropertiesResponse{}, s.noSuchVersion(op, key, id, nil)
	}
	resp, err := vc.GetProperties(ctx, nil)
	switch {
	case err != nil && isNoSuchVersion(err):
		return resp, s.noSuchVersion(op, key, id, err)
	case err != nil:
		return resp, s.mapErr(op, key, err)
	case !sameVersion(resp.VersionID, id):
		return resp, s.noSuchVersion(op, key, id, nil)
	}
	return resp, nil
}

// StatVersion returns one version's info. ErrNoSuchVersion for an id key
// does not have ("null" when its blob has a version id); ErrInvalidKey;
// ErrAccessDenied, ErrThrottled as Stat.
func (s *Store) StatVersion(ctx context.Context, key, id string) (store.ObjectInfo, error) {
	if err := checkKey("stat version", key); err != nil {
		return store.ObjectInfo{}, err
	}
	resp, err := s.versionProps(ctx, "stat version", key, id)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	info := infoOf(key, propsOf(resp))
	info.VersionID = id
	return info, nil
}

// ReadVersionRange streams length bytes (length < 0: to the end) of one
// version from offset. A range starting at or after the end yields no
// bytes. Errors as StatVersion's.
func (s *Store) ReadVersionRange(ctx context.Context, key, id string, offset, length int64) (io.ReadCloser, error) {
	if err := checkKey("read version", key); err != nil {
		return nil, err
	}
	offset = max(offset, 0)
	if length == 0 || id == "" {
		if _, err := s.versionProps(ctx, "read version", key, id); err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	vc, err := s.versionClient(key, id)
	if err != nil {
		return nil, s.noSuchVersion("read version", key, id, nil)
	}
	rng := blob.HTTPRange{Offset: offset}
	if length > 0 {
		rng.Count = length
	}
	resp, err := vc.DownloadStream(ctx, &blob.DownloadStreamOptions{Range: rng})
	switch {
	case bloberror.HasCode(err, bloberror.InvalidRange):
		// offset at or past the end: nothing to read, if the version is there.
		if _, err := s.versionProps(ctx, "read version", key, id); err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(nil)), nil
	case err != nil && isNoSuchVersion(err):
		return nil, s.noSuchVersion("read version", key, id, err)
	case err != nil:
		return nil, s.mapErr("read version", key, err)
	case !sameVersion(resp.VersionID, id):
		resp.Body.Close()
		return nil, s.noSuchVersion("read version", key, id, nil)
	}
	// A resumed read asks for the same ETag: the null version's bytes are
	// those of the blob, which may be rewritten meanwhile.
	body := resp.NewRetryReader(ctx, &blob.RetryReaderOptions{MaxRetries: 3})
	return &readCloser{rc: body, s: s, key: key}, nil
}

// DeleteVersion removes one version for good. An id key does not have is
// not an error; ErrInvalidKey, ErrAccessDenied, ErrThrottled as Delete.
// The version is looked up first (so a server that ignores versionid
// deletes nothing). The current version is deleted in two steps, as Azure
// documents them: the blob (its current version becomes a previous one,
// if its ETag is still that version's), then the version.
func (s *Store) DeleteVersion(ctx context.Context, key, id string) error {
	if err := checkKey("delete version", key); err != nil {
		if errors.Is(err, store.ErrInvalidKey) && key != "" && !strings.HasPrefix(key, reservedPrefix) {
			return nil // never stored, so not there
		}
		return err
	}
	props, err := s.versionProps(ctx, "delete version", key, id)
	if errors.Is(err, store.ErrNoSuchVersion) {
		return nil
	}
	if err != nil {
		return err
	}
	bc := s.cont.NewBlobClient(key)
	if id == store.NoVersionID || (props.IsCurrentVersion != nil && *props.IsCurrentVersion) {
		cond := ifMatch(validatorOf(props.ETag))
		_, err := bc.Delete(ctx, &blob.DeleteOptions{AccessConditions: cond})
		switch k := kindOf(err); {
		case err == nil, errors.Is(k, store.ErrNotFound), errors.Is(k, store.ErrPreconditionFailed):
			// Deleted, or no longer the current blob: a previous version now.
		default:
			return s.mapErr("delete version", key, err)
		}
		if id == store.NoVersionID {
			return nil
		}
	}
	vc, err := bc.WithVersionID(id)
	if err != nil {
		return nil
	}
	if _, err := vc.Delete(ctx, nil); err != nil && !isNoSuchVersion(err) {
		return s.mapErr("delete version", key, err)
	}
	return nil
}

// versionGroup is one key's rows of a version listing, or a common prefix.
type versionGroup struct {
	prefix bool
	rows   []store.VersionEntry
}

// ListVersions yields every version under opts.Prefix in S3's order, one
// Azure page (1,000 entries, versions included) at a time, with common
// prefixes folded as List folds them and keys under ".fedgate/" left out.
// A key's versions (Azure lists them together, oldest first) are held
// until the key's last one has come, then yielded newest first: the
// current version (or the blob without a version id) first, the others by
// descending id. The byte-order repair and the resume cache are List's
// (order.go, list.go): a listing that resumes at a KeyMarker yielded just
// before starts at the Azure page that held it. Errors as List's.
func (s *Store) ListVersions(ctx context.Context, opts store.VersionListOptions) iter.Seq2[store.VersionEntry, error] {
	return func(yield func(store.VersionEntry, error) bool) {
		if opts.KeyMarker > opts.Prefix && !strings.HasPrefix(opts.KeyMarker, opts.Prefix) {
			return // every key with the prefix sorts before KeyMarker
		}
		lopts := store.ListOptions{Prefix: opts.Prefix, Delimiter: opts.Delimiter}
		mkey := func(name string) markerKey { return markerKey{opts.Prefix, opts.Delimiter + "\x00versions", name} }
		marker := ""
		if opts.KeyMarker != "" {
			marker = s.markers.get(mkey(opts.KeyMarker))
		}
		type seen struct{ name, marker string }
		var recent [2]seen
		var markers []string
		var order reorder[versionGroup]
		last, any := "", false
		// emit yields the groups order has made final; false when the
		// consumer stopped.
		emit := func(end bool) bool {
			for {
				h, ok := order.pop(end)
				if !ok {
					return true
				}
				if strings.HasPrefix(h.key, reservedPrefix) || (any && h.key <= last) {
					continue
				}
				rows := h.v.rows
				switch {
				case h.v.prefix:
					if h.key <= opts.KeyMarker {
						continue
					}
					rows = []store.VersionEntry{{Key: h.key, IsPrefix: true}}
				case h.key < opts.KeyMarker:
					continue
				case h.key == opts.KeyMarker:
					rows = rowsAfter(rows, opts.VersionIDMarker)
				}
				last, any = h.key, true
				resume := markers[order.oldestPage(h.page)]
				for _, e := range rows {
					recent[0], recent[1] = recent[1], seen{e.Key, resume}
					if !yield(e, nil) {
						for _, r := range recent {
							if r.marker != "" {
								s.markers.put(mkey(r.name), r.marker)
							}
						}
						return false
					}
				}
			}
		}
		// The key whose versions are being gathered, and the page of its first.
		var cur []store.VersionEntry
		curName, curPage := "", 0
		flush := func() {
			if len(cur) > 0 {
				sortVersions(cur)
				order.push(cur[0].Key, versionGroup{rows: cur}, curName, curPage)
				cur = nil
			}
		}
		for {
			page, next, err := s.listPage(ctx, lopts, true, marker)
			if err != nil {
				yield(store.VersionEntry{}, err)
				return
			}
			markers = append(markers, marker)
			for _, l := range page {
				if l.e.IsPrefix {
					flush()
					order.push(l.e.Key, versionGroup{prefix: true}, l.name, len(markers)-1)
				} else {
					if len(cur) > 0 && cur[0].Key != l.e.Key {
						flush()
					}
					if len(cur) == 0 {
						curName, curPage = l.name, len(markers)-1
					}
					cur = append(cur, versionEntry(l))
				}
				if !emit(false) {
					return
				}
			}
			if next == "" {
				flush()
				emit(true)
				return
			}
			marker = next
		}
	}
}

// versionEntry is the row of one listed blob version.
func versionEntry(l listed) store.VersionEntry {
	e := store.VersionEntry{Key: l.e.Key, Info: l.e.Info}
	if l.version == nil || *l.version == "" {
		e.Info.VersionID, e.IsLatest = store.NoVersionID, true // the blob itself
	} else {
		e.Info.VersionID, e.IsLatest = *l.version, l.current
	}
	return e
}

// sortVersions puts one key's rows newest first: the latest, then by
// descending id (Azure's ids are timestamps of one width).
func sortVersions(rows []store.VersionEntry) {
	slices.SortStableFunc(rows, func(a, b store.VersionEntry) int {
		if a.IsLatest != b.IsLatest {
			if a.IsLatest {
				return -1
			}
			return 1
		}
		return strings.Compare(b.Info.VersionID, a.Info.VersionID)
	})
}

// rowsAfter returns the rows (newest first) that come after version id of
// their key: none for id "" (a KeyMarker alone is after every version of
// its key), the rows older than id when id is not among them.
func rowsAfter(rows []store.VersionEntry, id string) []store.VersionEntry {
	if id == "" {
		return nil
	}
	for i, e := range rows {
		if e.Info.VersionID == id {
			return rows[i+1:]
		}
	}
	// Not (or no longer) there: the rows older than it.
	var out []store.VersionEntry
	for _, e := range rows {
		if !e.IsLatest && e.Info.VersionID != store.NoVersionID && e.Info.VersionID < id {
			out = append(out, e)
		}
	}
	return out
}

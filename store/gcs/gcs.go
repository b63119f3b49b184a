// Package gcs is the store kind "gcs": one Google Cloud Storage bucket,
// through cloud.google.com/go/storage (JSON API for writes, listings and
// metadata; XML API for reads).
//
// Names (see meta.go): ObjectInfo.ETag is the hex MD5 of the bytes, kept in
// the object's metadata under the reserved name "fedgate-etag" (for
// multipart uploads "<md5 of the parts' MD5s>-N"); an object not written by
// fedgate gets GCS's own MD5, or for a composite object without one the
// stable "<hex>-<componentCount>" described at etagOf. Validator is the
// object's generation as a decimal string: every write (upload or compose)
// makes a new generation, a metadata-only change keeps it.
//
// Writes (put.go): a body of at most ChunkSize bytes is read into memory,
// then sent in one request carrying its MD5 (checked by GCS) and all its
// metadata, with the write's precondition (ifGenerationMatch=0 for
// IfNoneMatch, ifGenerationMatch=<Validator> for IfMatch). A longer body is
// streamed with a resumable upload into a temporary object under the
// reserved prefix, then committed by composing that one object into the key
// with the final metadata (ETag, late checksums) and the precondition, and
// the temporary object is deleted: the key changes atomically and only after
// the body has been read to its end.
//
// Multipart (multipart.go): each part is an object under the reserved
// prefix; completion composes them, in a tree when there are more than 32.
//
// Reserved names: every object whose name starts with ".fedgate/" belongs to
// the store (temporary uploads, multipart parts). Such keys are refused with
// ErrInvalidKey and List never shows them. A compose deletes its sources
// (deleteSourceObjects: a hard delete, so a bucket's soft-delete retention
// does not keep them); what a crashed gateway or an abandoned upload leaves
// is removed by a bucket lifecycle rule deleting objects with prefix
// ".fedgate/" older than a few days.
//
// Keys GCS cannot hold are refused with ErrInvalidKey: keys with a carriage
// return or line feed, invalid UTF-8, "." and "..", and keys under
// ".well-known/acme-challenge/".
package gcs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"cloud.google.com/go/storage"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/option"

	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
)

var (
	_ store.Store       = (*Store)(nil)
	_ store.Multiparter = (*Store)(nil)
)

// DefaultChunkSize is the default Config.ChunkSize.
const DefaultChunkSize = 16 << 20

// Config describes one GCS store.
type Config struct {
	Name     string
	Location policies.Location
	Bucket   string
	// Endpoint overrides the JSON API endpoint (an emulator). A bare
	// "http://host:port" gets "/storage/v1/" appended.
	Endpoint string
	// CredentialsFile is a service-account JSON key file. Empty: Application
	// Default Credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud's ADC
	// file, or the metadata server of a GCE/GKE node), found by the SDK.
	CredentialsFile string
	// WithoutAuthentication sends requests without credentials (emulators).
	WithoutAuthentication bool
	// ChunkSize is the most bytes one upload request carries (rounded up to
	// a multiple of 256 KiB); bodies up to it are sent in one request, which
	// is also how much a Put may hold in memory. 0: DefaultChunkSize.
	ChunkSize int
}

// Store is one GCS bucket.
type Store struct {
	name   string
	loc    policies.Location
	bucket string
	client *storage.Client
	bkt    *storage.BucketHandle // no retry settings: see object
	lbkt   *storage.BucketHandle // for listings
	chunk  int
	// fanIn is the most sources of one compose request (GCS: 32), listPage
	// the entries a listing asks for per request; tests lower both.
	fanIn    int
	listPage int
}

// New makes the store's client. It does not contact GCS: a missing bucket
// or missing permissions show up on the first operation. Errors: an invalid
// Config, or the SDK's failure to set up credentials (wrapped).
func New(ctx context.Context, cfg Config) (*Store, error) {
	switch {
	case cfg.Name == "":
		return nil, errors.New("gcs: empty store name")
	case cfg.Bucket == "" || strings.ContainsAny(cfg.Bucket, "/ "):
		return nil, fmt.Errorf("gcs: store %s: invalid bucket name %q", cfg.Name, cfg.Bucket)
	case cfg.ChunkSize < 0:
		return nil, fmt.Errorf("gcs: store %s: negative chunk size", cfg.Name)
	case cfg.WithoutAuthentication && cfg.CredentialsFile != "":
		return nil, fmt.Errorf("gcs: store %s: both a credentials file and no authentication", cfg.Name)
	}
	var opts []option.ClientOption
	if cfg.Endpoint != "" {
		ep, err := normEndpoint(cfg.Endpoint)
		if err != nil {
			return nil, fmt.Errorf("gcs: store %s: %w", cfg.Name, err)
		}
		opts = append(opts, option.WithEndpoint(ep))
	}
	switch {
	case cfg.WithoutAuthentication:
		opts = append(opts, option.WithoutAuthentication())
	case cfg.CredentialsFile != "":
		// Only a service-account key: the SDK's generic loader would also
		// accept external-account files that run commands.
		opts = append(opts, option.WithAuthCredentialsFile(option.ServiceAccount, cfg.CredentialsFile))
	}
	c, err := storage.NewClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("gcs: store %s: client: %w", cfg.Name, redact(err))
	}
	chunk := cfg.ChunkSize
	if chunk == 0 {
		chunk = DefaultChunkSize
	}
	chunk = roundChunk(chunk)
	return &Store{
		name: cfg.Name, loc: cfg.Location, bucket: cfg.Bucket,
		client: c, bkt: c.Bucket(cfg.Bucket), chunk: chunk, fanIn: maxComposeSources, listPage: defaultListPage,
		lbkt: c.Bucket(cfg.Bucket).Retryer(retryOpts()...),
	}, nil
}

// Retries. Every call fedgate makes may be retried (RetryAlways): reads,
// listings and deletes are idempotent, and writes are conditional or write
// a whole object, so a repeated attempt leaves the same result (see
// recoverOwn for a conditional write whose first attempt succeeded unseen).
// The backoff is exponential with full jitter. A call is tried at most
// maxAttempts times and never past ctx; a resumable upload instead retries
// each chunk for up to the Writer's ChunkRetryDeadline (32 s).
//
// The retry settings go on each handle, never on the client or on s.bkt:
// the SDK's Retryer modifies the settings a handle shares with its parent.
const maxAttempts = 8

func retryOpts() []storage.RetryOption {
	return []storage.RetryOption{
		storage.WithPolicy(storage.RetryAlways),
		storage.WithBackoff(gax.Backoff{Initial: 100 * time.Millisecond, Max: 8 * time.Second, Multiplier: 2}),
		storage.WithMaxAttempts(maxAttempts),
	}
}

// object is the handle for one operation (or a few) on name. Its retries
// are counted on the handle: the SDK's one-request uploads ignore
// WithMaxAttempts and would otherwise retry until ctx ends.
func (s *Store) object(name string) *storage.ObjectHandle {
	var tries atomic.Int32
	return s.bkt.Object(name).Retryer(append(retryOpts(), storage.WithErrorFunc(func(err error) bool {
		return storage.ShouldRetry(err) && tries.Add(1) < maxAttempts
	}))...)
}

// streamObject is the handle of a resumable upload to name, whose chunks
// are retried within their deadline.
func (s *Store) streamObject(name string) *storage.ObjectHandle {
	return s.bkt.Object(name).Retryer(retryOpts()...)
}

// normEndpoint returns the JSON API base URL for endpoint.
func normEndpoint(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "", fmt.Errorf("endpoint %q: want scheme://host[:port][/storage/v1/]", endpoint)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/storage/v1/"
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	return u.String(), nil
}

// roundChunk rounds n up to a multiple of 256 KiB, as the SDK does.
func roundChunk(n int) int {
	const q = 256 << 10
	return max(q, (n+q-1)/q*q)
}

// Close releases the client. The Store must not be used after.
func (s *Store) Close() error { return s.client.Close() }

// Name is the store's name in the policy file.
func (s *Store) Name() string { return s.name }

// Location is the bucket's cloud and region.
func (s *Store) Location() policies.Location { return s.loc }

// reservedPrefix starts the name of every object the store keeps for
// itself; tmpPrefix and mpuPrefix are under it.
const (
	reservedPrefix = ".fedgate/"
	tmpPrefix      = reservedPrefix + "tmp/"
	mpuPrefix      = reservedPrefix + "mpu/"
)

// checkKey returns ErrInvalidKey (wrapped) for a key the store cannot hold.
func checkKey(key string) error {
	why := ""
	switch {
	case key == "":
		why = "empty"
	case len(key) > store.MaxKeyLen:
		why = "longer than " + strconv.Itoa(store.MaxKeyLen) + " bytes"
	case strings.IndexByte(key, 0) >= 0:
		why = "holds a NUL byte"
	case !utf8.ValidString(key):
		why = "not UTF-8"
	case strings.ContainsAny(key, "\r\n"):
		why = "GCS object names cannot hold CR or LF"
	case key == "." || key == "..":
		why = "GCS object names cannot be . or .."
	case strings.HasPrefix(key, ".well-known/acme-challenge/"):
		why = "GCS refuses names under .well-known/acme-challenge/"
	case strings.HasPrefix(key, reservedPrefix):
		why = "names under " + reservedPrefix + " are reserved for the store"
	default:
		return nil
	}
	return fmt.Errorf("%w: %s", store.ErrInvalidKey, why)
}

// Stat returns the object's info. ErrNotFound when key does not exist;
// ErrInvalidKey for a key the store cannot hold; ErrAccessDenied,
// ErrThrottled as mapped by mapErr.
func (s *Store) Stat(ctx context.Context, key string) (store.ObjectInfo, error) {
	if err := checkKey(key); err != nil {
		return store.ObjectInfo{}, fmt.Errorf("gcs: stat %q: %w", key, err)
	}
	a, err := s.object(key).Attrs(ctx)
	if err != nil {
		return store.ObjectInfo{}, mapErr("stat", key, err)
	}
	return infoOf(a), nil
}

// ReadRange streams length bytes from offset (length < 0: to the end) of the
// bytes as stored: a gzip Content-Encoding is not decoded. With ifMatch the
// read is pinned to that generation, so the bytes are the ones matched.
// ErrNotFound when key does not exist; ErrPreconditionFailed when ifMatch is
// set and is not the object's current Validator; ErrInvalidKey.
func (s *Store) ReadRange(ctx context.Context, key string, offset, length int64, ifMatch store.Validator) (io.ReadCloser, error) {
	if err := checkKey(key); err != nil {
		return nil, fmt.Errorf("gcs: read %q: %w", key, err)
	}
	h := s.object(key).ReadCompressed(true)
	if ifMatch != "" {
		gen, ok := parseValidator(ifMatch)
		if !ok {
			return nil, s.staleRead(ctx, key, ifMatch)
		}
		h = h.Generation(gen)
	}
	if length == 0 {
		// Nothing to read, but the object (and generation) must exist.
		if _, err := h.Attrs(ctx); err != nil {
			if ifMatch != "" && errors.Is(err, storage.ErrObjectNotExist) {
				return nil, s.staleRead(ctx, key, ifMatch)
			}
			return nil, mapErr("read", key, err)
		}
		return io.NopCloser(strings.NewReader("")), nil
	}
	r, err := h.NewRangeReader(ctx, max(offset, 0), length)
	switch {
	case err == nil:
		return &reader{r: r, key: key}, nil
	case ifMatch != "" && errors.Is(err, storage.ErrObjectNotExist):
		// The generation is gone: overwritten, or the key deleted.
		return nil, s.staleRead(ctx, key, ifMatch)
	case httpCode(err) == 416: // offset at or past the end
		return io.NopCloser(strings.NewReader("")), nil
	}
	return nil, mapErr("read", key, err)
}

// staleRead is the error of a read whose validator names no current
// generation: ErrPreconditionFailed when key exists, ErrNotFound when not.
func (s *Store) staleRead(ctx context.Context, key string, v store.Validator) error {
	a, err := s.object(key).Attrs(ctx)
	if err != nil {
		return mapErr("read", key, err)
	}
	return fmt.Errorf("gcs: read %q: validator %s, object is at %d: %w", key, v, a.Generation, store.ErrPreconditionFailed)
}

// reader maps the SDK's errors while the body streams.
type reader struct {
	r   *storage.Reader
	key string
}

func (r *reader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		err = mapErr("read", r.key, err)
	}
	return n, err
}

func (r *reader) Close() error { return r.r.Close() }

// Delete removes the object. A missing key is not an error; ErrInvalidKey
// for a key the store cannot hold; ErrAccessDenied, ErrThrottled.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return fmt.Errorf("gcs: delete %q: %w", key, err)
	}
	err := s.object(key).Delete(ctx)
	if err != nil && !errors.Is(err, storage.ErrObjectNotExist) {
		return mapErr("delete", key, err)
	}
	return nil
}

// parseValidator returns the generation a Validator names.
func parseValidator(v store.Validator) (int64, bool) {
	g, err := strconv.ParseInt(string(v), 10, 64)
	return g, err == nil && g > 0
}

func validatorOf(gen int64) store.Validator { return store.Validator(strconv.FormatInt(gen, 10)) }

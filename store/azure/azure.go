// Package azure is the store kind "azure": one container of an Azure Blob
// Storage account, through github.com/Azure/azure-sdk-for-go/sdk/storage/azblob.
//
// Keys are blob names, unchanged, so existing data mounts as it is. Objects
// are block blobs. A Put of up to one block is one Put Blob request; a
// longer one stages blocks (Config.BlockSize bytes, Config.Concurrency at
// once, so a write holds at most (Concurrency+1) blocks in memory) and
// commits them with Put Block List, which is the atomic step: a failed or
// canceled Put leaves the old object as it was. Conditions are HTTP
// conditions of that commit: IfNoneMatch is If-None-Match: *, IfMatch is
// If-Match: <Azure ETag>.
//
// ObjectInfo.ETag is the MD5 computed while streaming, kept in blob metadata
// (see meta.go); for a blob fedgate did not write it is its Content-MD5, or
// failing that its Azure ETag. ObjectInfo.Validator is the Azure ETag.
//
// Multipart uploads (multipart.go) stage each part as blocks of the target
// blob, with IDs that carry the part's number and MD5 (blockid.go), and
// keep a small manifest blob under ".fedgate/uploads/". Keys under
// ".fedgate/" are reserved and never listed.
//
// Limits of Azure that show through:
//   - Keys Azure cannot hold are refused with ErrInvalidKey: control
//     characters (0x00-0x1f, 0x7f), a backslash (Azure turns it into "/"),
//     a "/"-separated segment that ends in "." (which covers "." and ".."),
//     and more than 254 segments.
//   - Put Block List, Put Blob and Delete Blob discard every uncommitted
//     block of the blob: a Put, completion or Delete of a key while a
//     multipart upload (or a long Put) of the same key is in flight makes
//     the other one fail (ErrInvalidPart for a completion, ErrThrottled for
//     a Put, which the client retries).
//   - Uncommitted blocks cannot be deleted: those of aborted uploads and
//     failed Puts are garbage-collected by Azure after 7 days.
//   - A blob holds at most 50,000 committed blocks; Put grows its block size
//     so that any size fits, but a multipart object is limited to 50,000
//     blocks in all (parts are cut into blocks of BlockSize, or larger for
//     a part whose size is given, see UploadPart).
package azure

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
)

var (
	_ store.Store       = (*Store)(nil)
	_ store.Multiparter = (*Store)(nil)
)

// Config describes one container. Secrets are passed in (cmd reads them
// from the environment); with none of AccountKey, SASToken and
// ConnectionString set, credentials are found by azidentity's
// DefaultAzureCredential (environment, workload identity, managed identity,
// Azure CLI).
type Config struct {
	Name      string
	Location  policies.Location
	Account   string
	Container string
	// Endpoint overrides the account's blob endpoint
	// (https://<account>.blob.core.windows.net), e.g. Azurite's
	// http://127.0.0.1:10000/devstoreaccount1.
	Endpoint string
	// AccountKey authenticates with the account's shared key.
	AccountKey string
	// AccountKeyFunc, with AccountKey, returns the current account key
	// (a credential file read again when it changes); it is asked before
	// each request and a changed key replaces the old one.
	AccountKeyFunc func() (string, error)
	// SASToken authenticates with a shared access signature (the query
	// string, with or without its leading "?").
	SASToken string
	// ConnectionString replaces Account, Endpoint and the secrets (tests,
	// Azurite).
	ConnectionString string

	// BlockSize is the size of a staged block (default 8 MiB); a write
	// holds at most (Concurrency+1) blocks in memory.
	BlockSize int64
	// Concurrency is how many blocks one write stages at once (default 4).
	Concurrency int
	// MaxRetries of one request on a transient failure (default 5);
	// retries back off exponentially with jitter and stop with ctx.
	MaxRetries int32

	policies []policy.Policy // more per-call policies (tests)
}

const (
	defaultBlockSize = 8 << 20
	maxBlockSize     = 4000 << 20 // Azure's largest block
	maxBlocks        = 50_000     // committed blocks of one blob
	reservedPrefix   = ".fedgate/"
	maxSegments      = 254
)

// Store is one Azure container.
type Store struct {
	name        string
	loc         policies.Location
	cont        *container.Client
	blockSize   int64
	concurrency int
	secretsMu   sync.Mutex
	secrets     []string
	markers     *markerCache
	now         func() time.Time
	// pageSize is the entries a listing asks for per request
	// (listPageSize; tests lower it).
	pageSize int32
	// NativeVersioning's answer and when it was found (zero: not yet).
	vmu    sync.Mutex
	vstate string
	vat    time.Time
}

// New makes the store for cfg. It checks the configuration and builds the
// client; it does not contact Azure (the first request does), so a missing
// container or a wrong credential shows on first use, as ErrAccessDenied
// or a plain error naming the container.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cfg.Container == "" {
		return nil, errors.New("azure: no container")
	}
	if cfg.ConnectionString == "" && cfg.Account == "" && cfg.Endpoint == "" {
		return nil, errors.New("azure: no account, endpoint or connection string")
	}
	s := &Store{
		name:        cfg.Name,
		loc:         cfg.Location,
		blockSize:   cfg.BlockSize,
		concurrency: cfg.Concurrency,
		secrets:     secretsOf(cfg),
		markers:     newMarkerCache(1024),
		now:         time.Now,
		pageSize:    listPageSize,
	}
	if s.blockSize <= 0 {
		s.blockSize = defaultBlockSize
	}
	s.blockSize = min(s.blockSize, maxBlockSize)
	if s.concurrency <= 0 {
		s.concurrency = 4
	}
	retries := cfg.MaxRetries
	if retries == 0 {
		retries = 5
	}
	opts := &container.ClientOptions{ClientOptions: azcore.ClientOptions{
		Retry: policy.RetryOptions{
			MaxRetries:    retries,
			RetryDelay:    200 * time.Millisecond,
			MaxRetryDelay: 10 * time.Second,
		},
		Telemetry: policy.TelemetryOptions{Disabled: true},
		// Go's transport would gunzip a blob stored with Content-Encoding
		// gzip if it were left to ask for gzip itself.
		PerCallPolicies: append([]policy.Policy{identityEncoding{}}, cfg.policies...),
	}}
	endpoint := strings.TrimSuffix(cfg.Endpoint, "/")
	if endpoint == "" {
		endpoint = "https://" + cfg.Account + ".blob.core.windows.net"
	}
	curl := endpoint + "/" + cfg.Container
	var err error
	switch {
	case cfg.ConnectionString != "":
		s.cont, err = container.NewClientFromConnectionString(cfg.ConnectionString, cfg.Container, opts)
	case cfg.AccountKey != "":
		var cred *container.SharedKeyCredential
		cred, err = container.NewSharedKeyCredential(cfg.Account, cfg.AccountKey)
		if err == nil && cfg.AccountKeyFunc != nil {
			r := &keyRefresh{cred: cred, get: cfg.AccountKeyFunc, key: cfg.AccountKey, s: s}
			opts.PerCallPolicies = append(opts.PerCallPolicies, r)
		}
		if err == nil {
			s.cont, err = container.NewClientWithSharedKeyCredential(curl, cred, opts)
		}
	case cfg.SASToken != "":
		s.cont, err = container.NewClientWithNoCredential(curl+"?"+strings.TrimPrefix(cfg.SASToken, "?"), opts)
	default:
		var cred *azidentity.DefaultAzureCredential
		cred, err = azidentity.NewDefaultAzureCredential(nil)
		if err == nil {
			s.cont, err = container.NewClient(curl, cred, opts)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("azure: store %s: %s", cfg.Name, s.scrub(err.Error()))
	}
	return s, nil
}

// keyRefresh puts a rotated account key in force before a request.
type keyRefresh struct {
	cred *container.SharedKeyCredential
	get  func() (string, error)
	s    *Store
	mu   sync.Mutex
	key  string
}

func (k *keyRefresh) Do(req *policy.Request) (*http.Response, error) {
	if v, err := k.get(); err == nil {
		k.mu.Lock()
		if v != k.key {
			if err := k.cred.SetAccountKey(v); err == nil {
				k.key = v
				k.s.addSecret(v)
			}
		}
		k.mu.Unlock()
	}
	return req.Next()
}

// identityEncoding asks for the stored bytes as they are.
type identityEncoding struct{}

func (identityEncoding) Do(req *policy.Request) (*http.Response, error) {
	req.Raw().Header.Set("Accept-Encoding", "identity")
	return req.Next()
}

// Name is the store's name in the policy file.
func (s *Store) Name() string { return s.name }

// Location is the store's cloud and region.
func (s *Store) Location() policies.Location { return s.loc }

// checkKey returns ErrInvalidKey (wrapped) for a key the store does not
// hold: empty, longer than store.MaxKeyLen, reserved (".fedgate/"), or one
// Azure cannot hold (see the package comment).
func checkKey(op, key string) error {
	bad := func(why string) error {
		return fmt.Errorf("azure: %s %.60q: %s: %w", op, key, why, store.ErrInvalidKey)
	}
	switch {
	case key == "":
		return bad("empty key")
	case len(key) > store.MaxKeyLen:
		return bad("longer than 1024 bytes")
	case strings.HasPrefix(key, reservedPrefix):
		return bad("reserved prefix " + reservedPrefix)
	case strings.ContainsRune(key, '\\'):
		return bad("Azure turns a backslash into a slash")
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] == 0x7f {
			return bad("control character")
		}
	}
	n := 0
	for seg := range strings.SplitSeq(key, "/") {
		if n++; n > maxSegments {
			return bad("more than 254 path segments")
		}
		if strings.HasSuffix(seg, ".") {
			return bad("a path segment ends in a dot")
		}
	}
	return nil
}

// SkipKey reports the keys this store refuses although S3 holds them (see
// the package comment): for storetest.Capabilities.SkipKey.
func SkipKey(key string) bool {
	return key != "" && len(key) <= store.MaxKeyLen && !strings.HasPrefix(key, reservedPrefix) &&
		!strings.ContainsRune(key, 0) && checkKey("", key) != nil
}

// Stat returns the object's info. ErrNotFound when key does not exist;
// ErrInvalidKey for a key the store does not hold; ErrAccessDenied,
// ErrThrottled as mapped from Azure.
func (s *Store) Stat(ctx context.Context, key string) (store.ObjectInfo, error) {
	if err := checkKey("stat", key); err != nil {
		return store.ObjectInfo{}, err
	}
	resp, err := s.cont.NewBlobClient(key).GetProperties(ctx, nil)
	if err != nil {
		return store.ObjectInfo{}, s.mapErr("stat", key, err)
	}
	info := infoOf(key, propsOf(resp))
	info.VersionID = valueOf(resp.VersionID) // where the account keeps versions
	return info, nil
}

// blobProps are the properties infoOf needs.
type blobProps struct {
	props
	size  *int64
	mtime *time.Time
	etag  *azcore.ETag
	md5   []byte
}

func propsOf(r blob.GetPropertiesResponse) blobProps {
	return blobProps{
		props: props{
			contentType: r.ContentType, cacheControl: r.CacheControl, disposition: r.ContentDisposition,
			encoding: r.ContentEncoding, language: r.ContentLanguage, metadata: r.Metadata,
		},
		size: r.ContentLength, mtime: r.LastModified, etag: r.ETag, md5: r.ContentMD5,
	}
}

func validatorOf(e *azcore.ETag) store.Validator {
	if e == nil {
		return ""
	}
	return store.Validator(strings.Trim(string(*e), `"`))
}

// etagOf is the S3 ETag of a blob: fedgate's own, else the Content-MD5,
// else the Azure ETag.
func etagOf(reserved map[string]string, md5 []byte, v store.Validator) string {
	if e := reserved[metaETag]; e != "" {
		return e
	}
	if len(md5) == 16 {
		return hex.EncodeToString(md5)
	}
	return string(v)
}

func infoOf(key string, p blobProps) store.ObjectInfo {
	md, reserved := decodeMeta(p.props)
	info := store.ObjectInfo{Key: key, Validator: validatorOf(p.etag), Metadata: md}
	if p.size != nil {
		info.Size = *p.size
	}
	if p.mtime != nil {
		info.ModTime = p.mtime.UTC()
	}
	info.ETag = etagOf(reserved, p.md5, info.Validator)
	return info
}

// ifMatch is the access condition for a Validator.
func ifMatch(v store.Validator) *blob.AccessConditions {
	e := azcore.ETag(`"` + strings.Trim(string(v), `"`) + `"`)
	return &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: &e}}
}

// ReadRange streams length bytes from offset (length < 0: to the end).
// ErrNotFound when key does not exist; ErrPreconditionFailed when ifMatch
// is set and the Azure ETag differs (If-Match on the read, and on every
// resumed read of the same stream, so the bytes are of one version).
func (s *Store) ReadRange(ctx context.Context, key string, offset, length int64, ifMatchV store.Validator) (io.ReadCloser, error) {
	if err := checkKey("read", key); err != nil {
		return nil, err
	}
	bc := s.cont.NewBlobClient(key)
	var cond *blob.AccessConditions
	if ifMatchV != "" {
		cond = ifMatch(ifMatchV)
	}
	offset = max(offset, 0)
	if length == 0 {
		if _, err := bc.GetProperties(ctx, &blob.GetPropertiesOptions{AccessConditions: cond}); err != nil {
			return nil, s.mapErr("read", key, err)
		}
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	rng := blob.HTTPRange{Offset: offset}
	if length > 0 {
		rng.Count = length
	}
	resp, err := bc.DownloadStream(ctx, &blob.DownloadStreamOptions{Range: rng, AccessConditions: cond})
	if bloberror.HasCode(err, bloberror.InvalidRange) {
		// offset at or past the end: nothing to read, as in posix.
		if _, err := bc.GetProperties(ctx, &blob.GetPropertiesOptions{AccessConditions: cond}); err != nil {
			return nil, s.mapErr("read", key, err)
		}
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	if err != nil && cond != nil {
		return nil, s.readErr(ctx, key, err)
	}
	if err != nil {
		return nil, s.mapErr("read", key, err)
	}
	body := resp.NewRetryReader(ctx, &blob.RetryReaderOptions{MaxRetries: 3})
	return &readCloser{rc: body, s: s, key: key}, nil
}

// readCloser maps the errors of a download stream.
type readCloser struct {
	rc  io.ReadCloser
	s   *Store
	key string
}

func (r *readCloser) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	if err != nil && err != io.EOF {
		err = r.s.mapErr("read", r.key, err)
	}
	return n, err
}

func (r *readCloser) Close() error { return r.rc.Close() }

// Delete removes key. Idempotent: a missing key is not an error.
// ErrInvalidKey for an empty or reserved key (other keys the store cannot
// hold are absent, so deleting them succeeds). Azure drops the uncommitted
// blocks of the blob with it: the parts of a multipart upload of key in
// progress are lost (its completion fails with ErrInvalidPart).
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := checkKey("delete", key); err != nil {
		if errors.Is(err, store.ErrInvalidKey) && key != "" && !strings.HasPrefix(key, reservedPrefix) {
			return nil // never stored, so not there
		}
		return err
	}
	_, err := s.cont.NewBlobClient(key).Delete(ctx, &blob.DeleteOptions{DeleteSnapshots: to.Ptr(blob.DeleteSnapshotsOptionTypeInclude)})
	if err != nil && !errors.Is(kindOf(err), store.ErrNotFound) {
		return s.mapErr("delete", key, err)
	}
	return nil
}

// valueOf is *p, or "" for nil.
func valueOf(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

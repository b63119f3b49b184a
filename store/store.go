// Package store defines the interface every storage backend of fedgate
// implements (one folder per kind: posix, s3, gcs, azure), the sentinel
// errors they map their failures to, and the small value types they share.
//
// A Store is one bucket, container or directory in one cloud or on-prem
// system. It knows nothing about S3 requests, buckets of the gateway or
// policies (it borrows only the policies.Location value type): keys are
// opaque strings of up to 1024 bytes of UTF-8.
package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"time"

	"github.com/fedgate/fedgate/policies"
)

// Sentinel errors. Every method documents which of these it returns; the
// conformance suite (storetest) checks them with errors.Is.
var (
	ErrNotFound           = errors.New("store: not found")
	ErrPreconditionFailed = errors.New("store: precondition failed")
	ErrThrottled          = errors.New("store: throttled") // retryable
	ErrAccessDenied       = errors.New("store: access denied")
	// ErrInvalidKey: a key that is empty, longer than MaxKeyLen or holds a
	// NUL byte; a store may also refuse keys it cannot hold (dot segments).
	ErrInvalidKey   = errors.New("store: invalid key")
	ErrNotSupported = errors.New("store: not supported")
	// ErrNoSuchUpload: a multipart upload id the store does not know.
	ErrNoSuchUpload = errors.New("store: no such multipart upload")
	// ErrInvalidPart: a part listed in a completion is missing or its ETag differs.
	ErrInvalidPart = errors.New("store: invalid part")
	// ErrReadOnly: a write to a store the policy file makes read-only. It
	// is an ErrAccessDenied.
	ErrReadOnly = fmt.Errorf("%w: the store is read-only", ErrAccessDenied)
	// ErrMetadataNotSupported: metadata the store has nowhere to keep (a
	// file tree on a filesystem without extended attributes). It is an
	// ErrNotSupported.
	ErrMetadataNotSupported = fmt.Errorf("%w: metadata the store cannot keep", ErrNotSupported)
)

// MaxKeyLen is the longest key, in bytes, that every store accepts (S3's limit).
const MaxKeyLen = 1024

// Validator is a store's strong change detector for one object (S3 ETag, GCS
// generation, Azure ETag, posix inode+mtime+size). The cache keys chunks by
// it. It is opaque and is not the S3-facing ETag.
//
// It is stable while the object is unchanged and differs whenever the bytes
// differ. A store whose Validator is derived from the bytes (an S3 MD5 ETag)
// may keep it when identical bytes are rewritten; other stores (posix, GCS
// generations, Azure ETags) change it on every write.
type Validator string

// Metadata is what a writer says about an object, stored with it and given
// back by Stat.
type Metadata struct {
	ContentType        string
	CacheControl       string
	ContentDisposition string
	ContentEncoding    string
	ContentLanguage    string
	Expires            string
	// User holds x-amz-meta-* values keyed by the lower-case name without the
	// "x-amz-meta-" prefix. Stores encode names they cannot hold reversibly.
	User map[string]string
	// Checksums maps an algorithm (CRC32, CRC32C, SHA1, SHA256, CRC64NVME) to
	// its base64 value, as S3 returns it in x-amz-checksum-*.
	Checksums map[string]string
}

// ObjectInfo describes one stored object. Its maps (User, Checksums) may be
// shared with the store's caches: callers must not modify them (clone first).
type ObjectInfo struct {
	Key     string
	Size    int64
	ModTime time.Time
	// ETag is what S3 clients see (hex MD5, or "<md5-of-md5s>-N" after a
	// multipart upload), without quotes.
	ETag      string
	Validator Validator
	Metadata
	// VersionID is the object's version id in a versioned bucket ("" in an
	// unversioned one). The namespace sets it for the buckets it versions;
	// a store sets it only for its bucket's own versions (Versioner).
	VersionID string
	// StoreKey, when set, is the key of the object's bytes in the bucket's
	// store (a version's own key) instead of the bucket's prefix + Key.
	StoreKey string
}

// PartInfo describes one uploaded part of a multipart upload.
type PartInfo struct {
	Number  int
	Size    int64
	ETag    string // hex MD5 of the part, without quotes
	ModTime time.Time
	// Checksums of the part's bytes, like Metadata.Checksums.
	Checksums map[string]string
}

// PutOptions controls a Put or a multipart completion.
type PutOptions struct {
	// IfNoneMatch makes the write create-if-absent: ErrPreconditionFailed when
	// the key exists. The check and the commit are one atomic step.
	IfNoneMatch bool
	// IfMatch, when set, makes the write conditional on the current object's
	// Validator: ErrPreconditionFailed when it differs or the key is missing.
	IfMatch Validator
	Metadata
	// LateChecksums, when set, is called once after body has returned io.EOF
	// and before the object is committed; its entries are added to
	// Metadata.Checksums. It carries checksums that arrive in a trailer.
	LateChecksums func() map[string]string
}

// ListOptions selects what List returns.
type ListOptions struct {
	Prefix string
	// Delimiter, when set, folds keys that contain it after Prefix into one
	// common-prefix entry each.
	Delimiter string
	// StartAfter: only keys (and common prefixes) strictly greater than it.
	// A common prefix at or before StartAfter is not yielded even when keys
	// folded into it sort after StartAfter, so paging with StartAfter set to
	// the last entry yielded (key or common prefix) yields each entry once.
	StartAfter string
}

// Entry is one List result: an object, or a common prefix when IsPrefix.
type Entry struct {
	Key      string
	IsPrefix bool
	Info     ObjectInfo // set when !IsPrefix; Metadata may be left empty
}

// Store is one bucket/container/directory in one cloud or on-prem system.
// Every method is safe for concurrent use and honours ctx cancellation.
type Store interface {
	Name() string
	Location() policies.Location

	// Stat returns the object's info, or ErrNotFound.
	Stat(ctx context.Context, key string) (ObjectInfo, error)
	// ReadRange streams length bytes from offset (length < 0: to the end).
	// ErrNotFound when the key does not exist; when ifMatch is set and the
	// object's Validator differs, ErrPreconditionFailed. Callers check
	// offset/length against the size they got from Stat.
	ReadRange(ctx context.Context, key string, offset, length int64, ifMatch Validator) (io.ReadCloser, error)
	// Put streams body (size may be -1 when unknown) and returns the new
	// object's info (Metadata may be left empty). With size >= 0 it reads
	// exactly size bytes; a shorter body fails with io.ErrUnexpectedEOF
	// (wrapped), a longer one fails too. It always reads body until io.EOF
	// before committing, so a verifying reader (checksums, chunk signatures)
	// can fail the write at the end. If reading body fails, nothing is written and the read
	// error is returned (wrapped); so is ctx's error. ErrPreconditionFailed
	// per opts; ErrInvalidKey for a key the store cannot hold. On any error
	// an object already under key is left unchanged.
	Put(ctx context.Context, key string, body io.Reader, size int64, opts PutOptions) (ObjectInfo, error)
	// Delete is idempotent: deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// List yields entries in byte order of their keys; it never buffers the
	// whole listing. The caller may stop iterating at any time. Errors are
	// yielded as (Entry, err), with Entry.Key set when one object is at
	// fault; a store may end the listing after yielding one.
	List(ctx context.Context, opts ListOptions) iter.Seq2[Entry, error]
}

// Checker is the optional health check of a store whose ordinary calls
// cannot tell a missing or replaced store from an empty one (a posix
// directory removed or unmounted under a running node). Check returns nil
// when the store is usable.
type Checker interface {
	Check(ctx context.Context) error
}

// Multiparter is the optional native multipart ability: S3 multipart, GCS
// compose, Azure block lists, a posix staging folder. Part bytes live in the
// store's own staging area, never on a gateway node's disk.
type Multiparter interface {
	// CreateMultipart starts an upload and returns the store's handle for it.
	CreateMultipart(ctx context.Context, key string, opts PutOptions) (uploadID string, err error)
	// UploadPart stores one part (1..10000); re-uploading a number replaces
	// it. size may be -1; a body shorter than size fails with
	// io.ErrUnexpectedEOF. ErrNoSuchUpload for an unknown upload or one
	// created for another key. A body read error stores nothing; like Put it reads body to io.EOF.
	UploadPart(ctx context.Context, key, uploadID string, number int, body io.Reader, size int64) (PartInfo, error)
	// CompleteMultipart joins parts, in the order given, into the object
	// without copying it through memory. The resulting ETag is
	// "<md5 of the parts' binary MD5s>-<len(parts)>". ErrInvalidPart when a
	// part is missing or its ETag differs; ErrPreconditionFailed per opts;
	// ErrNoSuchUpload as for UploadPart. The object's metadata is the one
	// given to CreateMultipart, with the fields opts.Metadata sets
	// overriding it. The upload's staging data is removed on success; after
	// a failure the upload stays usable.
	CompleteMultipart(ctx context.Context, key, uploadID string, parts []PartInfo, opts PutOptions) (ObjectInfo, error)
	// AbortMultipart discards the upload's parts. Idempotent: an unknown
	// upload is not an error.
	AbortMultipart(ctx context.Context, key, uploadID string) error
}

// LocalFiler is the optional ability of a store whose bytes are in a local
// file: the caller can send them with sendfile, and the store needs no
// cache in front of it.
type LocalFiler interface {
	// OpenLocal opens the object's file. The object's bytes are
	// [dataOffset, dataOffset+info.Size) of f. The caller closes f.
	// ErrNotFound when the key does not exist.
	OpenLocal(ctx context.Context, key string) (f *os.File, dataOffset int64, info ObjectInfo, err error)
}

package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
)

// Native versioning of a cloud bucket (S3 version ids, GCS generations,
// Azure blob versions), for buckets fedgate mounts from an existing bucket
// (policy origin:). fedgate lays out its own versions itself (federation/
// versions.go); this interface only passes through what the origin keeps.

// Native versioning states, as S3 names them ("" : never enabled).
const (
	VersioningEnabled   = "Enabled"
	VersioningSuspended = "Suspended"
)

// NoVersionID is the id S3 gives an object written while versioning was
// off or suspended ("null").
const NoVersionID = "null"

// ErrNoSuchVersion: the key has no version with that id. It matches
// ErrNotFound too.
var ErrNoSuchVersion = fmt.Errorf("%w: no such version", ErrNotFound)

// DeleteMarker is the error of StatVersion and ReadVersionRange for a
// version that is a delete marker. It matches ErrNotFound.
type DeleteMarker struct {
	Key, VersionID string
	// Latest: the marker is the key's current version.
	Latest bool
}

func (e *DeleteMarker) Error() string {
	return fmt.Sprintf("store: not found: %s (its version %s is a delete marker)", e.Key, e.VersionID)
}

func (e *DeleteMarker) Unwrap() error { return ErrNotFound }

// IsDeleteMarker returns the delete marker err is, if it is one.
func IsDeleteMarker(err error) (*DeleteMarker, bool) {
	var dm *DeleteMarker
	ok := errors.As(err, &dm)
	return dm, ok
}

// VersionListOptions selects a version listing. Prefix and Delimiter are
// List's; the listing starts after (KeyMarker, VersionIDMarker): with a
// VersionIDMarker, after that version of KeyMarker; without, after every
// version of KeyMarker.
type VersionListOptions struct {
	Prefix, Delimiter          string
	KeyMarker, VersionIDMarker string
}

// VersionEntry is one row of a version listing: a version (an object or a
// delete marker) or a common prefix. Info.VersionID is the version's id;
// for a delete marker only Key, ModTime and VersionID are set.
type VersionEntry struct {
	Key      string
	IsPrefix bool
	// IsLatest: the key's current version. A key whose live object was
	// deleted in a store without delete markers (GCS, Azure) has no
	// version marked latest.
	IsLatest     bool
	DeleteMarker bool
	Info         ObjectInfo
}

// Versioner is the optional ability of a store whose bucket keeps versions
// of its own. Version ids are the store's (S3 version ids, GCS generations
// in decimal, Azure version ids); an id names immutable bytes.
type Versioner interface {
	// NativeVersioning returns the bucket's versioning state: "",
	// VersioningEnabled or VersioningSuspended.
	NativeVersioning(ctx context.Context) (string, error)
	// ListVersions yields every version under opts.Prefix in S3's order:
	// keys ascending, each key's versions newest first, common prefixes
	// (folded by Delimiter) once, in key order. It never buffers the whole
	// listing; errors are yielded as (VersionEntry{}, err).
	ListVersions(ctx context.Context, opts VersionListOptions) iter.Seq2[VersionEntry, error]
	// StatVersion returns one version's info (VersionID set). ErrNoSuchVersion
	// for an id the key does not have, *DeleteMarker for a delete marker.
	StatVersion(ctx context.Context, key, id string) (ObjectInfo, error)
	// ReadVersionRange streams length bytes (length < 0: to the end) of one
	// version from offset. Errors as StatVersion's.
	ReadVersionRange(ctx context.Context, key, id string, offset, length int64) (io.ReadCloser, error)
	// DeleteVersion removes one version (a delete marker too) for good.
	// Deleting an id the key does not have is not an error.
	DeleteVersion(ctx context.Context, key, id string) error
	// DeleteCurrent is Delete in a bucket with versioning on: it returns
	// the id of the delete marker it added ("" in a store that adds none:
	// there the current version becomes noncurrent).
	DeleteCurrent(ctx context.Context, key string) (markerID string, err error)
}

// In a bucket with versioning on (or suspended), a Versioner's Stat, Put
// and CompleteMultipart set ObjectInfo.VersionID to the version they saw
// or created, and Stat of a key whose current version is a delete marker
// returns *DeleteMarker with Latest set (it matches ErrNotFound, as
// before). In a bucket without versioning a store may still set VersionID
// (GCS: every object has a generation): callers use it only when
// NativeVersioning says the bucket keeps versions.

package backend

import (
	"time"

	"github.com/fedgate/fedgate/store"
)

// VersionListOptions selects a version listing (ListObjectVersions).
type VersionListOptions struct {
	Prefix, Delimiter          string
	KeyMarker, VersionIDMarker string
}

// VersionEntry is one row of a version listing: a version (an object, or a
// delete marker) or a common prefix. Info.VersionID is the version's id.
type VersionEntry struct {
	Key          string
	IsPrefix     bool
	DeleteMarker bool
	IsLatest     bool
	Info         store.ObjectInfo
}

// RootUser is the name of the region's root user.
const RootUser = "root"

// User is an authenticated caller.
type User struct {
	Name      string
	AccessKey string
	Root      bool
	Created   time.Time
}

// UserInfo is a user with its grants (bucket -> read|write).
type UserInfo struct {
	User
	Grants map[string]string
}

// Credentials are an access key and its secret.
type Credentials struct {
	AccessKey string `json:"access_key"`
	SecretKey string `json:"secret_key"`
}

// Upload is a multipart upload in progress.
type Upload struct {
	ID        string
	Bucket    string
	Key       string
	Initiator string // user name
	Created   time.Time
	// Parts are the parts uploaded so far, by part number.
	Parts []Part
}

// Part is one uploaded part.
type Part struct {
	Number    int
	Size      int64
	ETag      string
	Checksums map[string]string // algorithm -> value
	Modified  time.Time
}

// PartRef names a part in CompleteMultipartUpload.
type PartRef struct {
	Number int
	ETag   string
}

// Pin keeps a bucket prefix in the region's cache.
type Pin struct {
	Bucket  string
	Prefix  string
	Created time.Time
}

// PreloadStatus is a cache preload job with its progress summed over the
// region.
type PreloadStatus struct {
	ID           string
	Bucket       string
	Prefix       string
	Pin          bool
	Created      time.Time
	Canceled     bool
	TotalObjects int64 // 0 while unknown
	TotalBytes   int64
	// Objects is how many objects every current member has finished.
	Objects int64
	// Bytes is the bytes of the chunks warmed, summed over the nodes.
	Bytes int64
	// Errors is the chunks that could not be warmed.
	Errors int64
	// Done: every current member has finished its share.
	Done bool
	// Pending names the members that have not finished yet.
	Pending []string
	// Uncached: the bucket is read from local files and never cached.
	Uncached bool
	// Nodes holds each node's progress by node id.
	Nodes map[string]JobProgress
}

// State is "canceled", "done" or "running".
func (s PreloadStatus) State() string {
	switch {
	case s.Canceled:
		return "canceled"
	case s.Done:
		return "done"
	}
	return "running"
}

// JobProgress is one node's share of a preload job.
type JobProgress struct {
	After   string // the last key this node finished
	Objects int64
	Bytes   int64
	Errors  int64
	Done    bool
	Updated time.Time
}

// Degraded is what a node knows of degraded data: stores that fail their
// periodic health check, and objects read lately by reconstruction or from
// a fallback copy because a member store lacked its copy or shards.
type Degraded struct {
	// Stores holds every store's last health check.
	Stores []StoreHealth
	// Buckets counts degraded reads per bucket and store since start.
	Buckets []DegradedBucket
	// Objects are the objects read degraded lately (newest first, at
	// most a few hundred).
	Objects []DegradedObject
}

// StoreHealth is one store's last health check.
type StoreHealth struct {
	Store   string
	Kind    string // s3, gcs, azure, posix
	Healthy bool
	Error   string // why not healthy
	Checked time.Time
	// Latency is the check's round trip.
	Latency time.Duration
}

// DegradedBucket counts the degraded reads of one bucket whose copy or
// shards on Store were missing or unreadable.
type DegradedBucket struct {
	Bucket string
	Store  string
	Reads  int64
	Last   time.Time
}

// DegradedObject is one object read degraded: Stores lacked its copy or
// shards (repair rebuilds them).
type DegradedObject struct {
	Bucket string
	Key    string
	Stores []string
	Seen   time.Time
}

package regionstate

import (
	"log/slog"
	"maps"
	"slices"
	"time"
)

// Bucket is a bucket created through S3 in this region. Buckets declared in
// the policy file are not recorded here; they belong to the root user.
type Bucket struct {
	Name    string
	Owner   string // user name
	Store   string // store that holds the bucket's objects
	Prefix  string // key prefix inside Store, usually "<bucket>/"
	Created time.Time
}

// User is an S3 identity of the region. SecretKey is kept because SigV4
// verification needs it; it is never logged (see LogValue).
type User struct {
	Name      string
	AccessKey string
	SecretKey string
	Root      bool
	Created   time.Time
}

// LogValue keeps the secret key out of logs.
func (u User) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("name", u.Name),
		slog.String("access_key", u.AccessKey),
		slog.Bool("root", u.Root),
	)
}

// Perm is a permission granted to a user on a bucket. Write implies read.
type Perm string

// The permissions a Grant may give.
const (
	PermRead  Perm = "read"
	PermWrite Perm = "write"
)

func (p Perm) level() int {
	switch p {
	case PermRead:
		return 1
	case PermWrite:
		return 2
	}
	return 0
}

func permOf(level int) Perm {
	switch level {
	case 1:
		return PermRead
	case 2:
		return PermWrite
	}
	return ""
}

// ObjectMeta is the metadata a multipart upload gives the object it
// completes.
type ObjectMeta struct {
	ContentType        string            `json:",omitempty"`
	CacheControl       string            `json:",omitempty"`
	ContentDisposition string            `json:",omitempty"`
	ContentEncoding    string            `json:",omitempty"`
	ContentLanguage    string            `json:",omitempty"`
	Expires            string            `json:",omitempty"`
	User               map[string]string `json:",omitempty"` // x-amz-meta-* without the prefix
	ChecksumAlgorithm  string            `json:",omitempty"`
}

func (m ObjectMeta) clone() ObjectMeta {
	m.User = maps.Clone(m.User)
	return m
}

// Part is one uploaded part of a multipart upload.
type Part struct {
	Number    int
	Size      int64
	ETag      string
	Checksums map[string]string `json:",omitempty"` // algorithm -> value
	Modified  time.Time
	// Staged, in a write-back upload, is where the part's bytes are staged.
	Staged *Segment `json:",omitempty"`
}

func (p Part) clone() Part {
	p.Checksums = maps.Clone(p.Checksums)
	if p.Staged != nil {
		s := *p.Staged
		s.Nodes = slices.Clone(s.Nodes)
		p.Staged = &s
	}
	return p
}

// MultipartUpload is the session state of one multipart upload.
type MultipartUpload struct {
	ID            string // fedgate's upload id, chosen by the caller
	Bucket        string
	Key           string
	Store         string // store that holds the parts
	StoreUploadID string // the store's own upload id, if it has one
	Initiator     string // user name
	Created       time.Time
	Meta          ObjectMeta
	// WriteBack: parts are staged on the region's nodes, and completion
	// journals the object instead of assembling it in the store.
	WriteBack bool `json:",omitempty"`
	// StoreKey, when set, is the store key the upload assembles into (a
	// version's own key in a versioned bucket) instead of the bucket's
	// prefix + Key; VersionID is the id the version gets.
	StoreKey  string       `json:",omitempty"`
	VersionID string       `json:",omitempty"`
	Parts     map[int]Part `json:",omitempty"` // by part number
	// Claim and ClaimedAt: the completion or abort under way (ClaimUpload).
	Claim     string    `json:",omitempty"`
	ClaimedAt time.Time `json:",omitzero"`
}

func (u MultipartUpload) clone() MultipartUpload {
	u.Meta = u.Meta.clone()
	if u.Parts != nil {
		parts := make(map[int]Part, len(u.Parts))
		for n, p := range u.Parts {
			parts[n] = p.clone()
		}
		u.Parts = parts
	}
	return u
}

// Policy is the region's active policy file, kept as raw bytes.
type Policy struct {
	YAML    []byte
	Version uint64
}

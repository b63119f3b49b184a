// Package mount is `fedgate mount`: a FUSE file system over fedgate's S3
// API (docs/mount.md): lookups and attributes
// from HEAD and from directory listings (ListObjectsV2 with a delimiter,
// paged), a stat cache with a TTL and negative entries, and reads as
// ranged GETs pinned to the ETag seen at open, with sequential detection
// and readahead; with a node's --local-socket, opens by short-circuit and
// FUSE passthrough for whole files. Writes (write.go): a new file written
// sequentially streams as a multipart upload completed at close; unlink,
// mkdir, rmdir and rename of a file map to S3 calls (docs/mount.md,
// "Writes"). It is a client only: it talks S3
// through aws-sdk-go-v2 and imports no fedgate package but
// internal/backoff and clients/localread.
package mount

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/fedgate/fedgate/clients/localread"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/prometheus/client_golang/prometheus"
)

// API is the part of the S3 client the mount uses; *s3.Client has it.
type API interface {
	PutObject(context.Context, *s3.PutObjectInput, ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	DeleteObject(context.Context, *s3.DeleteObjectInput, ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
	CopyObject(context.Context, *s3.CopyObjectInput, ...func(*s3.Options)) (*s3.CopyObjectOutput, error)
	CreateMultipartUpload(context.Context, *s3.CreateMultipartUploadInput, ...func(*s3.Options)) (*s3.CreateMultipartUploadOutput, error)
	UploadPart(context.Context, *s3.UploadPartInput, ...func(*s3.Options)) (*s3.UploadPartOutput, error)
	UploadPartCopy(context.Context, *s3.UploadPartCopyInput, ...func(*s3.Options)) (*s3.UploadPartCopyOutput, error)
	CompleteMultipartUpload(context.Context, *s3.CompleteMultipartUploadInput, ...func(*s3.Options)) (*s3.CompleteMultipartUploadOutput, error)
	AbortMultipartUpload(context.Context, *s3.AbortMultipartUploadInput, ...func(*s3.Options)) (*s3.AbortMultipartUploadOutput, error)
	HeadObject(context.Context, *s3.HeadObjectInput, ...func(*s3.Options)) (*s3.HeadObjectOutput, error)
	GetObject(context.Context, *s3.GetObjectInput, ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	ListObjectsV2(context.Context, *s3.ListObjectsV2Input, ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
	ListBuckets(context.Context, *s3.ListBucketsInput, ...func(*s3.Options)) (*s3.ListBucketsOutput, error)
	HeadBucket(context.Context, *s3.HeadBucketInput, ...func(*s3.Options)) (*s3.HeadBucketOutput, error)
}

// Config is one mount.
type Config struct {
	Client API
	// Bucket, when set, is the mount's root (with Prefix, a prefix in it,
	// without its trailing slash); else the root lists every bucket.
	Bucket, Prefix string
	// StatTTL is how long an answer about a path (its size, mtime and
	// ETag, or that it does not exist) is used without asking again.
	StatTTL time.Duration
	// UID and GID own every file; AllowOther lets other users in.
	UID, GID   uint32
	AllowOther bool
	// BlockSize is the unit of a ranged GET; ReadAhead the most a
	// sequential reader fetches ahead of its reads, per open file.
	BlockSize, ReadAhead int64
	// MaxParallel bounds the ranged GETs in flight across the mount.
	MaxParallel int
	// RequestTimeout is the deadline of one try of one S3 request; Tries
	// the most tries of a throttled or failed request before EIO.
	RequestTimeout time.Duration
	Tries          int
	// Local, when set, opens files through the node's --local-socket
	// first (short-circuit reads, FUSE passthrough for whole files).
	Local *localread.Client
	// ReadOnly mounts MS_RDONLY: every write gets EROFS from the kernel.
	ReadOnly bool
	// PartSize is the part of a multipart upload of a file written
	// through the mount (5 MiB to 5 GiB); a file smaller is one PutObject.
	PartSize int64
	// WriteParallel bounds the parts of one file uploading at once.
	WriteParallel int
	// MaxMemory bounds the bytes held across the mount for write part
	// buffers and read blocks; a writer waits for room.
	MaxMemory int64
	// StatCacheEntries bounds the stat cache.
	StatCacheEntries int
	Logger           *slog.Logger
	Registerer       prometheus.Registerer
	FUSEDebug        bool
}

// Defaults of the zero Config fields.
const (
	DefaultStatTTL        = time.Second
	DefaultBlockSize      = 1 << 20
	DefaultReadAhead      = 16 << 20
	DefaultMaxParallel    = 32
	DefaultRequestTimeout = 30 * time.Second
	DefaultTries          = 5
	DefaultPartSize       = 16 << 20
	DefaultWriteParallel  = 4
	DefaultMaxMemory      = 1 << 30
	// MinPartSize and MaxPartSize are S3's bounds of a part.
	MinPartSize = 5 << 20
	MaxPartSize = 5 << 30
)

// FS is a mounted file system's shared state.
type FS struct {
	cfg     Config
	api     API
	log     *slog.Logger
	metrics *metrics
	stats   *statCache
	dirs    *dirCache
	sem     chan struct{}
	started time.Time
	ctx     context.Context
	stop    context.CancelFunc

	mem      *budget
	partPool sync.Pool
	wmu      sync.Mutex
	writers  map[string]*writer // files open for writing, by cache key
}

func newFS(cfg Config) (*FS, error) {
	if cfg.Client == nil {
		return nil, errors.New("mount: no S3 client")
	}
	if cfg.Bucket == "" && cfg.Prefix != "" {
		return nil, errors.New("mount: a prefix needs a bucket")
	}
	cfg.Prefix = strings.Trim(cfg.Prefix, "/")
	if cfg.StatTTL < 0 {
		cfg.StatTTL = 0
	}
	if cfg.BlockSize <= 0 {
		cfg.BlockSize = DefaultBlockSize
	}
	if cfg.ReadAhead < 0 {
		cfg.ReadAhead = 0
	}
	if cfg.MaxParallel <= 0 {
		cfg.MaxParallel = DefaultMaxParallel
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.Tries <= 0 {
		cfg.Tries = DefaultTries
	}
	if cfg.PartSize == 0 {
		cfg.PartSize = DefaultPartSize
	}
	if cfg.PartSize < MinPartSize || cfg.PartSize > MaxPartSize {
		return nil, fmt.Errorf("mount: part size %d is outside S3's bounds of a part, %d (5 MiB) to %d (5 GiB)", cfg.PartSize, MinPartSize, int64(MaxPartSize))
	}
	if cfg.WriteParallel <= 0 {
		cfg.WriteParallel = DefaultWriteParallel
	}
	if cfg.MaxMemory == 0 {
		cfg.MaxMemory = DefaultMaxMemory
	}
	if cfg.MaxMemory < cfg.PartSize {
		return nil, fmt.Errorf("mount: max memory %d is less than one part (%d)", cfg.MaxMemory, cfg.PartSize)
	}
	if cfg.StatCacheEntries <= 0 {
		cfg.StatCacheEntries = 1 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ctx, stop := context.WithCancel(context.Background())
	m := newMetrics(cfg.Registerer)
	return &FS{
		mem:     newBudget(cfg.MaxMemory, func(n int64) { m.memory.Set(float64(n)) }),
		writers: map[string]*writer{},
		cfg:     cfg, api: cfg.Client, log: cfg.Logger,
		metrics: m,
		stats:   newStatCache(cfg.StatTTL, cfg.StatCacheEntries),
		dirs:    newDirCache(cfg.StatTTL),
		sem:     make(chan struct{}, cfg.MaxParallel),
		started: time.Now(),
		ctx:     ctx, stop: stop,
	}, nil
}

// Mount mounts cfg's namespace on dir and serves it until the
// returned server is unmounted (Unmount, then Wait).
func Mount(dir string, cfg Config) (*fuse.Server, error) {
	m, err := Start(dir, cfg)
	if err != nil {
		return nil, err
	}
	return m.Server, nil
}

// Mounted is a mounted file system.
type Mounted struct {
	*fuse.Server
	f *FS
}

// AbortWrites aborts the upload of every file still open for writing and
// reports how many it aborted: for a daemon that exits while files are
// open (their closes will never reach it), so that no multipart upload is
// left behind.
func (m *Mounted) AbortWrites() int { return m.f.abortWrites() }

// Start is Mount, keeping the file system's handle.
func Start(dir string, cfg Config) (*Mounted, error) {
	f, err := newFS(cfg)
	if err != nil {
		return nil, err
	}
	var rootKey string
	if cfg.Bucket != "" && cfg.Prefix != "" {
		rootKey = f.cfg.Prefix + "/"
	}
	root := newNode(f, cfg.Bucket, rootKey, true)
	flags := uintptr(syscall.MS_NOSUID | syscall.MS_NODEV)
	if cfg.ReadOnly {
		// Read-only at the VFS: every write gets EROFS from the kernel.
		flags |= syscall.MS_RDONLY
	}
	ttl := f.cfg.StatTTL
	opts := &fs.Options{
		EntryTimeout:    &ttl,
		AttrTimeout:     &ttl,
		NegativeTimeout: &ttl,
		UID:             cfg.UID,
		GID:             cfg.GID,
		MountOptions: fuse.MountOptions{
			FsName:            "fedgate",
			Name:              "fedgate",
			DirectMount:       true,
			DirectMountStrict: true,
			DirectMountFlags:  flags,
			AllowOther:        cfg.AllowOther,
			MaxReadAhead:      1 << 20,
			MaxWrite:          1 << 20,
			// O_TRUNC comes with the OPEN, not as a SETATTR after it, so
			// that an open for writing without it can be told apart.
			ExtraCapabilities: fuse.CAP_ATOMIC_O_TRUNC,
			Debug:             cfg.FUSEDebug,
		},
	}
	srv, err := fs.Mount(dir, root, opts)
	if err != nil {
		f.stop()
		return nil, fmt.Errorf("mount %s: %w", dir, err)
	}
	go func() { srv.Wait(); f.stop() }()
	return &Mounted{Server: srv, f: f}, nil
}

// Package mount is `fedgate mount`: a FUSE file system over fedgate's S3
// API (docs/mount.md). This slice is read-only: lookups and attributes
// from HEAD and from directory listings (ListObjectsV2 with a delimiter,
// paged), a stat cache with a TTL and negative entries, and reads as
// ranged GETs pinned to the ETag seen at open, with sequential detection
// and readahead; with a node's --local-socket, opens by short-circuit and
// FUSE passthrough for whole files. It is a client only: it talks S3
// through aws-sdk-go-v2 and imports no fedgate package but
// internal/backoff and clients/localread.
package mount

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
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
)

// FS is a mounted file system's shared state.
type FS struct {
	cfg     Config
	api     API
	log     *slog.Logger
	metrics *metrics
	stats   *statCache
	sem     chan struct{}
	started time.Time
	ctx     context.Context
	stop    context.CancelFunc
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
	if cfg.StatCacheEntries <= 0 {
		cfg.StatCacheEntries = 1 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ctx, stop := context.WithCancel(context.Background())
	return &FS{
		cfg: cfg, api: cfg.Client, log: cfg.Logger,
		metrics: newMetrics(cfg.Registerer),
		stats:   newStatCache(cfg.StatTTL, cfg.StatCacheEntries),
		sem:     make(chan struct{}, cfg.MaxParallel),
		started: time.Now(),
		ctx:     ctx, stop: stop,
	}, nil
}

// Mount mounts cfg's namespace read-only on dir and serves it until the
// returned server is unmounted (Unmount, then Wait).
func Mount(dir string, cfg Config) (*fuse.Server, error) {
	f, err := newFS(cfg)
	if err != nil {
		return nil, err
	}
	root := &node{f: f, dir: true}
	if cfg.Bucket != "" {
		root.bucket = cfg.Bucket
		if cfg.Prefix != "" {
			root.key = f.cfg.Prefix + "/"
		}
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
			// Read-only at the VFS: every write gets EROFS from the kernel.
			DirectMountFlags: syscall.MS_NOSUID | syscall.MS_NODEV | syscall.MS_RDONLY,
			AllowOther:       cfg.AllowOther,
			MaxReadAhead:     1 << 20,
			Debug:            cfg.FUSEDebug,
		},
	}
	srv, err := fs.Mount(dir, root, opts)
	if err != nil {
		f.stop()
		return nil, fmt.Errorf("mount %s: %w", dir, err)
	}
	go func() { srv.Wait(); f.stop() }()
	return srv, nil
}

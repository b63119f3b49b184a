package mount

import (
	"context"
	"hash/fnv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// node is a directory (a bucket, a prefix) or a file (an object).
type node struct {
	fs.Inode
	f *FS
	// loc is where the node is: set at construction, and replaced (never
	// changed in place) when a file is renamed, while other operations on
	// the inode may run.
	loc atomic.Pointer[objPath]
	dir bool

	mu       sync.Mutex
	lastETag string // the ETag of the last open: same again keeps the page cache
	passOpen int    // open passthrough handles, all of passETag
	passETag string
}

// objPath is a node's place in the namespace.
type objPath struct {
	// bucket is "" only for the root of a mount of every bucket.
	bucket string
	// key is the object's key, or the directory's prefix with its
	// trailing slash ("" for a bucket's root).
	key string
}

func newNode(f *FS, bucket, key string, dir bool) *node {
	n := &node{f: f, dir: dir}
	n.loc.Store(&objPath{bucket: bucket, key: key})
	return n
}

// at is where the node is now.
func (n *node) at() objPath { return *n.loc.Load() }

var (
	_ fs.NodeLookuper  = (*node)(nil)
	_ fs.NodeGetattrer = (*node)(nil)
	_ fs.NodeReaddirer = (*node)(nil)
	_ fs.NodeOpener    = (*node)(nil)
	_ fs.NodeStatfser  = (*node)(nil)
	_ fs.NodeCreater   = (*node)(nil)
	_ fs.NodeSetattrer = (*node)(nil)
	_ fs.NodeUnlinker  = (*node)(nil)
	_ fs.NodeMkdirer   = (*node)(nil)
	_ fs.NodeRmdirer   = (*node)(nil)
	_ fs.NodeRenamer   = (*node)(nil)
)

// mtime is an object's Last-Modified to the second: HEAD answers in
// seconds (an HTTP date) and listings in milliseconds, and one file must
// not change its mtime with the request that saw it (the kernel drops a
// file's cached pages when its mtime changes).
func mtime(t *time.Time) time.Time { return aws.ToTime(t).Truncate(time.Second) }

// cacheKey is the stat cache's key of a child path.
func cacheKey(bucket, key string) string { return bucket + "/" + key }

// ino is a stable inode number for a path, so that a path keeps its
// number across lookups (find, cp -a, tar rely on it).
func ino(bucket, key string, dir bool) uint64 {
	h := fnv.New64a()
	if dir {
		h.Write([]byte{'d'})
	} else {
		h.Write([]byte{'f'})
	}
	h.Write([]byte(bucket))
	h.Write([]byte{0})
	h.Write([]byte(key))
	v := h.Sum64()
	if v <= 1 {
		v += 2 // 1 is the root
	}
	return v
}

func (n *node) fill(a *fuse.Attr, m meta) {
	a.Uid, a.Gid = n.f.cfg.UID, n.f.cfg.GID
	if m.dir {
		a.Mode = syscall.S_IFDIR | 0o755
		if n.f.cfg.ReadOnly {
			a.Mode = syscall.S_IFDIR | 0o555
		}
		a.Nlink = 2
		t := n.f.started
		if !m.mtime.IsZero() {
			t = m.mtime
		}
		a.SetTimes(&t, &t, &t)
		a.Size = 4096
		a.Blocks = 8
	} else {
		a.Mode = syscall.S_IFREG | 0o644
		if n.f.cfg.ReadOnly {
			a.Mode = syscall.S_IFREG | 0o444
		}
		a.Nlink = 1
		a.Size = uint64(m.size)
		a.Blocks = (uint64(m.size) + 511) / 512
		a.SetTimes(&m.mtime, &m.mtime, &m.mtime)
	}
	a.Blksize = 1 << 20
}

func (n *node) child(ctx context.Context, name string, m meta, out *fuse.EntryOut) *fs.Inode {
	p := n.at()
	cp := objPath{bucket: p.bucket}
	mode := uint32(syscall.S_IFREG)
	if p.bucket == "" {
		cp.bucket = name
	} else {
		cp.key = p.key + name
	}
	if m.dir {
		mode = syscall.S_IFDIR
		if p.bucket != "" {
			cp.key += "/"
		}
	}
	c := newNode(n.f, cp.bucket, cp.key, m.dir)
	n.fill(&out.Attr, m)
	out.Ino = ino(cp.bucket, cp.key, m.dir)
	in := n.NewInode(ctx, c, fs.StableAttr{Mode: mode, Ino: out.Ino})
	if got, ok := in.Operations().(*node); ok && got.at() != cp {
		// The inode of this number was renamed away (it keeps the number
		// of its old path): this path gets a number of its own.
		in = n.NewInode(ctx, c, fs.StableAttr{Mode: mode})
		out.Ino = in.StableAttr().Ino
	}
	return in
}

// Lookup answers from the stat cache (filled by listings and earlier
// lookups) or asks S3.
func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	p := n.at()
	var ck string
	if p.bucket == "" {
		ck = cacheKey(name, "")
	} else {
		ck = cacheKey(p.bucket, p.key+name)
		if w := n.f.activeWriter(ck); w != nil {
			return n.child(ctx, name, w.meta(), out), 0
		}
	}
	if e, ok := n.f.stats.get(ck); ok {
		if !e.ok {
			n.f.metrics.statCache.WithLabelValues("negative_hit").Inc()
			return nil, syscall.ENOENT
		}
		n.f.metrics.statCache.WithLabelValues("hit").Inc()
		return n.child(ctx, name, e.m, out), 0
	}
	n.f.metrics.statCache.WithLabelValues("miss").Inc()
	var m meta
	var err error
	if p.bucket == "" {
		m, err = n.f.statBucket(ctx, name)
	} else {
		m, err = n.f.statPath(ctx, p.bucket, p.key+name)
	}
	if err != nil {
		errno := toErrno(err)
		if errno == syscall.ENOENT {
			n.f.stats.putMissing(ck)
		} else if errno != syscall.EINTR {
			n.f.log.Warn("lookup failed", "bucket", p.bucket, "key", p.key+name, "err", err)
		}
		return nil, errno
	}
	n.f.stats.put(ck, m)
	return n.child(ctx, name, m, out), 0
}

// Getattr of a file: the stat cache, else HEAD; of an open file, what was
// pinned at open.
func (n *node) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	p := n.at()
	if h, ok := fh.(*handle); ok {
		n.fill(&out.Attr, h.m)
		return 0
	}
	if n.dir {
		n.fill(&out.Attr, meta{dir: true})
		return 0
	}
	if wh, ok := fh.(*writeHandle); ok && wh.w.active() {
		n.fill(&out.Attr, wh.w.meta())
		return 0
	}
	if w := n.f.activeWriter(cacheKey(p.bucket, p.key)); w != nil {
		n.fill(&out.Attr, w.meta())
		return 0
	}
	m, err := n.f.fileMeta(ctx, p.bucket, p.key)
	if err != nil {
		return toErrno(err)
	}
	n.fill(&out.Attr, m)
	return 0
}

func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	out.Bsize = 1 << 20
	out.Frsize = 1 << 20
	if !n.f.cfg.ReadOnly {
		// Tools that check for room before writing (df, installers) see
		// 1 PiB free: S3 has no size to report.
		out.Blocks, out.Bfree, out.Bavail = 1<<30, 1<<30, 1<<30
	}
	out.NameLen = 1024
	return 0
}

// Open pins the object's ETag (from a stat younger than the TTL, else a
// fresh HEAD) for every read through this handle, and keeps the kernel's
// page cache when the ETag is the one of the last open.
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	p := n.at()
	if n.dir {
		return nil, 0, syscall.EISDIR
	}
	if flags&(syscall.O_WRONLY|syscall.O_RDWR|syscall.O_TRUNC|syscall.O_APPEND) != 0 {
		return n.openWrite(ctx, flags)
	}
	if n.f.activeWriter(cacheKey(p.bucket, p.key)) != nil {
		n.f.log.Warn("open for reading refused: the file is being written in this mount; open it after the writer closes it", "bucket", p.bucket, "key", p.key)
		return nil, 0, syscall.EBUSY
	}
	m, err := n.f.fileMeta(ctx, p.bucket, p.key)
	if err != nil {
		return nil, 0, toErrno(err)
	}
	if m.dir {
		return nil, 0, syscall.EISDIR
	}
	if n.f.cfg.Local != nil {
		if h, fl, ok := n.openLocal(ctx, m); ok {
			return h, fl, 0
		}
	} else {
		n.f.metrics.opens.WithLabelValues("s3").Inc()
	}
	return newHandle(n.f, p.bucket, p.key, m), n.keepCache(m.etag), 0
}

// keepCache is FOPEN_KEEP_CACHE when etag is the one of the last open.
func (n *node) keepCache(etag string) uint32 {
	n.mu.Lock()
	defer n.mu.Unlock()
	keep := etag != "" && etag == n.lastETag
	n.lastETag = etag
	if keep {
		return fuse.FOPEN_KEEP_CACHE
	}
	return 0
}

// fileMeta is a file's meta: from the stat cache, else HEAD.
func (f *FS) fileMeta(ctx context.Context, bucket, key string) (meta, error) {
	ck := cacheKey(bucket, key)
	if e, ok := f.stats.get(ck); ok && e.ok && !e.m.dir {
		f.metrics.statCache.WithLabelValues("hit").Inc()
		return e.m, nil
	}
	f.metrics.statCache.WithLabelValues("miss").Inc()
	m, err := f.head(ctx, bucket, key)
	if err != nil {
		if toErrno(err) == syscall.ENOENT {
			f.stats.putMissing(ck)
		}
		return meta{}, err
	}
	f.stats.put(ck, m)
	return m, nil
}

func (f *FS) head(ctx context.Context, bucket, key string) (meta, error) {
	var out *s3.HeadObjectOutput
	err := f.do(ctx, "HeadObject", func(ctx context.Context) error {
		var err error
		out, err = f.api.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: &key})
		return err
	})
	if err != nil {
		return meta{}, err
	}
	return meta{size: aws.ToInt64(out.ContentLength), mtime: mtime(out.LastModified), etag: aws.ToString(out.ETag)}, nil
}

// statPath asks S3 what key is: a directory when any key lies under
// key+"/" (it wins over an object of the same name), else the object,
// else nothing. The HEAD and the one-key listing run at the same time.
func (f *FS) statPath(ctx context.Context, bucket, key string) (meta, error) {
	type res struct {
		m   meta
		err error
	}
	headc := make(chan res, 1)
	go func() {
		m, err := f.head(ctx, bucket, key)
		headc <- res{m, err}
	}()
	prefix := key + "/"
	var lo *s3.ListObjectsV2Output
	lerr := f.do(ctx, "ListObjectsV2", func(ctx context.Context) error {
		var err error
		lo, err = f.api.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix, MaxKeys: aws.Int32(1)})
		return err
	})
	h := <-headc
	if lerr == nil && (len(lo.Contents) > 0 || len(lo.CommonPrefixes) > 0) {
		return meta{dir: true}, nil
	}
	if h.err == nil {
		return h.m, nil
	}
	if toErrno(h.err) == syscall.ENOENT && lerr != nil && toErrno(lerr) != syscall.ENOENT {
		return meta{}, lerr
	}
	return meta{}, h.err
}

func (f *FS) statBucket(ctx context.Context, bucket string) (meta, error) {
	err := f.do(ctx, "HeadBucket", func(ctx context.Context) error {
		_, err := f.api.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &bucket})
		return err
	})
	if err != nil {
		return meta{}, err
	}
	return meta{dir: true}, nil
}

// Readdir lists the directory page by page (ListObjectsV2 with a
// delimiter), filling the stat cache so that READDIRPLUS and the stats
// of `ls -l` cost no request per entry.
func (n *node) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	p := n.at()
	if p.bucket == "" {
		var out *s3.ListBucketsOutput
		err := n.f.do(ctx, "ListBuckets", func(ctx context.Context) error {
			var err error
			out, err = n.f.api.ListBuckets(ctx, &s3.ListBucketsInput{})
			return err
		})
		if err != nil {
			return nil, toErrno(err)
		}
		var es []fuse.DirEntry
		for _, b := range out.Buckets {
			name := aws.ToString(b.Name)
			n.f.stats.put(cacheKey(name, ""), meta{dir: true, mtime: mtime(b.CreationDate)})
			es = append(es, fuse.DirEntry{Name: name, Mode: syscall.S_IFDIR, Ino: ino(name, "", true)})
		}
		return fs.NewListDirStream(es), 0
	}
	dk := cacheKey(p.bucket, p.key)
	if es, ok := n.f.dirs.get(dk); ok {
		n.f.metrics.dirCache.WithLabelValues("hit").Inc()
		d := &dirStream{n: n, seen: make(map[string]bool, len(es)), cached: true}
		d.buf = append(d.buf, es...)
		for _, e := range es {
			d.seen[e.Name] = true
		}
		return d, 0
	}
	n.f.metrics.dirCache.WithLabelValues("miss").Inc()
	d := &dirStream{n: n, seen: map[string]bool{}, more: true}
	d.gen, d.at = n.f.dirs.start()
	// The first page now, so that a listing error is the opendir's.
	if errno := d.page(ctx); errno != 0 {
		return nil, errno
	}
	return d, 0
}

// dirStream is a directory read one ListObjectsV2 page at a time.
type dirStream struct {
	n     *node
	token *string
	more  bool
	buf   []fuse.DirEntry
	seen  map[string]bool
	err   syscall.Errno
	// writers: the files being written here were added.
	writers bool
	// all: every entry of S3's listing so far, kept in the dirCache once
	// the listing is complete (unless cached: it came from there); gen
	// and at: when the listing began.
	all    []fuse.DirEntry
	cached bool
	gen    uint64
	at     time.Time
}

func (d *dirStream) page(ctx context.Context) syscall.Errno {
	n := d.n
	loc := n.at()
	var out *s3.ListObjectsV2Output
	err := n.f.do(ctx, "ListObjectsV2", func(ctx context.Context) error {
		var err error
		out, err = n.f.api.ListObjectsV2(ctx, &s3.ListObjectsV2Input{
			Bucket: &loc.bucket, Prefix: &loc.key, Delimiter: aws.String("/"), ContinuationToken: d.token,
		})
		return err
	})
	if err != nil {
		n.f.log.Warn("listing failed", "bucket", loc.bucket, "prefix", loc.key, "err", err)
		return toErrno(err)
	}
	d.token = out.NextContinuationToken
	d.more = aws.ToBool(out.IsTruncated) && d.token != nil
	for _, cp := range out.CommonPrefixes {
		name := strings.TrimSuffix(strings.TrimPrefix(aws.ToString(cp.Prefix), loc.key), "/")
		if name == "" || strings.Contains(name, "/") || d.seen[name] {
			continue
		}
		d.seen[name] = true
		n.f.stats.put(cacheKey(loc.bucket, loc.key+name), meta{dir: true})
		e := fuse.DirEntry{Name: name, Mode: syscall.S_IFDIR, Ino: ino(loc.bucket, loc.key+name+"/", true)}
		d.buf = append(d.buf, e)
		d.all = append(d.all, e)
	}
	for _, o := range out.Contents {
		key := aws.ToString(o.Key)
		name := strings.TrimPrefix(key, loc.key)
		if name == "" || strings.Contains(name, "/") || d.seen[name] {
			continue
		}
		d.seen[name] = true
		n.f.stats.put(cacheKey(loc.bucket, key), meta{size: aws.ToInt64(o.Size), mtime: mtime(o.LastModified), etag: aws.ToString(o.ETag)})
		e := fuse.DirEntry{Name: name, Mode: syscall.S_IFREG, Ino: ino(loc.bucket, key, false)}
		d.buf = append(d.buf, e)
		d.all = append(d.all, e)
	}
	return 0
}

func (d *dirStream) HasNext() bool {
	dp := d.n.at()
	for len(d.buf) == 0 && d.more && d.err == 0 {
		ctx, cancel := context.WithTimeout(d.n.f.ctx, time.Duration(d.n.f.cfg.Tries)*d.n.f.cfg.RequestTimeout)
		d.err = d.page(ctx)
		cancel()
	}
	if len(d.buf) == 0 && !d.more && d.err == 0 && !d.writers {
		if !d.cached {
			d.n.f.dirs.put(cacheKey(dp.bucket, dp.key), d.all, d.gen, d.at)
		}
		// Files being written in this mount, not yet in S3's listing.
		d.writers = true
		for name, w := range d.n.f.writersUnder(dp.bucket, dp.key) {
			if !d.seen[name] {
				d.seen[name] = true
				d.buf = append(d.buf, fuse.DirEntry{Name: name, Mode: syscall.S_IFREG, Ino: ino(w.bucket, w.key, false)})
			}
		}
	}
	return len(d.buf) > 0 || d.err != 0
}

func (d *dirStream) Next() (fuse.DirEntry, syscall.Errno) {
	if len(d.buf) == 0 {
		return fuse.DirEntry{}, d.err
	}
	e := d.buf[0]
	d.buf = d.buf[1:]
	return e, 0
}

func (d *dirStream) Close() {}

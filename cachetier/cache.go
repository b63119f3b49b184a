// Package cachetier is a region's read-through chunk cache on local NVMe.
//
// An object version is cut into fixed-size chunks (8 MiB by default). Each
// chunk is keyed by (store, key, the store's Validator, chunk index), so a
// changed object can never serve stale bytes: its new Validator names other
// chunks, and the old ones age out. A chunk lives in its own file under the
// cache directory, so a hit can be sent with sendfile (Cache.Chunk) or read
// as a stream (Cache.NewReader). Concurrent misses for one chunk share one
// origin fetch, which writes straight into the chunk's file; readers stream
// the bytes as they land. Capacity is bounded for the whole cache and per
// group (a bucket, with the quota its policy gives) by LRU eviction. The
// index is kept in a bbolt file beside the chunks and survives restarts.
//
// In a region of several nodes each chunk has one owner, named by the
// region's hash ring (Ring, installed with SetMembers), and only its owner
// caches it: a node reads a chunk another node owns from that node
// (Config.Peers), falling back to the origin when the peer fails or is
// slow. Pinned chunks (SetPins) are never evicted.
//
// The cache only ever holds copies of bytes that live in a store: it may
// drop any chunk at any time, so it must never be the home of write-back
// data (that is staging's job).
//
// See docs/cache.md for the layout on disk and the guarantees.
package cachetier

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/fedgate/fedgate/store"
)

// Errors returned by the cache. Fetch errors are returned wrapped, so
// errors.Is sees the store's sentinel (store.ErrPreconditionFailed, ...).
var (
	// ErrClosed: the Cache (or the reader) was closed.
	ErrClosed = errors.New("cachetier: closed")
	// ErrInvalidRange: an offset, length or chunk index outside the object.
	ErrInvalidRange = errors.New("cachetier: invalid range")
	// ErrNoValidator: the ObjectID has no Validator, so the cache could not
	// tell a changed object from an unchanged one.
	ErrNoValidator = errors.New("cachetier: object has no validator")
	// ErrNoRoom: Warm fetched a chunk but could not keep it (pinned chunks
	// and fills in progress fill the capacity or the group's quota, or the
	// chunk is larger than either).
	ErrNoRoom = errors.New("cachetier: no room to keep the chunk")
)

// Defaults for Config and ReadOptions.
const (
	DefaultChunkSize   = 8 << 20
	DefaultReadAhead   = 4
	DefaultConcurrency = 8
	DefaultPeerTimeout = 2 * time.Second
	minChunkSize       = 4 << 10
)

// Config is the cache's configuration; Open validates it.
type Config struct {
	// Dir holds the chunk files, the index and the fill area (required).
	Dir string
	// ChunkSize is the size of every chunk but an object's last (default
	// 8 MiB, at least 4 KiB). Changing it empties the cache on Open.
	ChunkSize int64
	// Capacity bounds the bytes of all chunks, fills in progress included
	// (> 0, or 0 with CapacityFor).
	Capacity int64
	// CapacityFor, when Capacity is 0, chooses it once the index is loaded,
	// from the bytes of the chunks the cache already holds (so that a size
	// computed from free space counts what a full cache occupies). An
	// error fails Open; a non-positive answer is an error too.
	CapacityFor func(held int64) (int64, error)
	// NoSync skips the sync of chunk files before their index records
	// are written, and the index's own fsync. After a crash a kept chunk
	// file may then hold bytes that never reached the disk (zeros), so use
	// it only where a crash empties Dir anyway (tmpfs) or in tests.
	NoSync bool
	// Self is this node's id in the region's hash ring. "" is a node on its
	// own: every chunk is cached here and Peers is not used.
	Self string
	// Peers reads chunks from the nodes that own them (required with Self).
	// Until SetMembers installs a ring that has Self as a member, every
	// chunk is cached here.
	Peers PeerClient
	// PeerTimeout bounds the wait for a peer's first byte of a chunk, and
	// any later wait for its next bytes, before the read falls back to the
	// origin (default 2s). A peer that timed out is skipped for five times
	// as long.
	PeerTimeout time.Duration
	// OpenFiles is how many cached chunks' files stay open between reads
	// (default DefaultOpenFiles; negative: none), so that a hit costs one
	// pread. Each is a file descriptor of the process.
	OpenFiles int
	Logger    *slog.Logger
	Now       func() time.Time // clock for last-access times (default time.Now)
}

// ObjectID identifies one version of one object.
type ObjectID struct {
	Store, Key string
	Validator  store.Validator
	Size       int64
}

// ChunkKey names one chunk of one object version: what the region's hash
// ring places on a node.
type ChunkKey struct {
	ObjectID
	Index int64
}

// Fetcher reads [off, off+n) of the object from its origin: typically a
// store.ReadRange with ifMatch set to the ObjectID's Validator. It must
// return exactly n bytes; fewer is an error (io.ErrUnexpectedEOF). It is
// called on the cache's own goroutines with a context that ends when no
// reader wants the chunk any more or the Cache closes.
type Fetcher func(ctx context.Context, off, n int64) (io.ReadCloser, error)

// PeerClient reads [off, off+n) of chunk k from node's cache over the
// region's internal API; the owner serves it with Cache.ReadChunk. Serving
// any part of a chunk makes its owner fill the whole chunk, which is how
// Warm and read-ahead warm a chunk on its owner: they ask for its last byte.
//
// The stream must end (with an error) soon after ctx ends: that is how a
// slow peer is given up on. A stream that fails, or ends before n bytes,
// costs nothing but time: the cache reads the rest from the origin.
type PeerClient interface {
	ReadChunk(ctx context.Context, node string, k ChunkKey, off, n int64) (io.ReadCloser, error)
}

// ReadOptions tune one read. The zero value is usable.
type ReadOptions struct {
	// Group is the bucket (or other unit) the bytes are accounted to, for
	// quotas and per-group stats; chunks belong to the group that fetched them.
	Group string
	// GroupQuota bounds the bytes of Group's chunks (0: no quota; the policy's
	// cache.quota). The latest value given for a group applies.
	GroupQuota int64
	// GroupPriority is Group's eviction class (the policy's cache.priority;
	// PriorityUnset keeps the group's, normal for a new group). The latest
	// value given for a group applies, to its cached chunks too.
	GroupPriority Priority
	// ReadAhead is how many chunks past the one being read a reader keeps
	// requested (default 4; negative: none). When a reader starts where the
	// previous reader of the object ended (a client reading an object with
	// consecutive ranged GETs), the ReadAhead chunks after its range are
	// fetched too, for the next request.
	ReadAhead int
	// Concurrency bounds a reader's chunk fetches in flight (default 8),
	// peer reads included.
	Concurrency int
	// Local caches every chunk of the read on this node, whatever the ring
	// says, and never reads from a peer: for serving a peer's
	// PeerClient.ReadChunk (membership views can differ for a moment, and
	// a chunk must never be forwarded twice) and for preloads of this
	// node's own.
	Local bool
}

func (o ReadOptions) withDefaults() ReadOptions {
	switch {
	case o.ReadAhead == 0:
		o.ReadAhead = DefaultReadAhead
	case o.ReadAhead < 0:
		o.ReadAhead = 0
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	return o
}

// ChunkRef is one chunk as a region of a file, for sendfile and friends.
// File is private to this ChunkRef (its offset is the caller's to move) and
// read-only. It stays readable until Release, even if the chunk is evicted
// or invalidated meanwhile. Release closes File; it may be called twice.
type ChunkRef struct {
	File           *os.File
	Offset, Length int64
	Release        func()
}

// Stats is a snapshot of the cache's counters.
type Stats struct {
	Hits        int64 // chunk lookups served by a cached chunk
	Misses      int64 // chunk lookups that needed a fetch (own or shared); reads from peers count in PeerReads
	Fetches     int64 // origin fetches started
	FetchErrors int64
	// BytesFromOrigin counts bytes fetched; BytesFromCache bytes served from
	// cached chunks (what egress saves).
	BytesFromOrigin, BytesFromCache int64
	Evictions                       int64
	// BadChunks counts chunks loaded at Open and dropped because their file
	// was missing, of another size, or failed its checksum (verify.go).
	BadChunks      int64
	Used, Capacity int64 // bytes; Used includes fills in progress
	// PinnedBytes counts the bytes of pinned chunks (part of Used).
	PinnedBytes int64
	Chunks      int
	Filling     int64 // fills in progress (abandoned ones included)
	// PeerReads counts reads of chunk parts asked of the owning peer;
	// PeerReadBytes the bytes peers delivered; PeerFallbacks the reads of
	// peer-owned chunks that went to the origin instead (the peer failed,
	// gave no first byte within PeerTimeout, broke off, or timed out a
	// moment ago). Bytes read from the origin after a fallback count in
	// BytesFromOrigin.
	PeerReads, PeerReadBytes, PeerFallbacks int64
	Groups                                  map[string]GroupStats
}

// GroupStats is one group's part of Stats.
type GroupStats struct {
	Used, Quota int64
	Pinned      int64 // bytes of the group's pinned chunks (part of Used)
	Chunks      int
	Priority    Priority
}

type counters struct {
	hits, misses, fetches, fetchErrors atomic.Int64
	originBytes, cacheBytes, evictions atomic.Int64
	filling, verifyDropped             atomic.Int64
	peerReads, peerBytes, peerFallback atomic.Int64
}

// Cache is a read-through chunk cache. Its methods are safe for concurrent use.
type Cache struct {
	cfg      Config
	log      *slog.Logger
	db       *bolt.DB
	chunkDir string
	tmpDir   string

	ctx    context.Context // ends at Close; parent of every fill
	cancel context.CancelFunc
	fills  sync.WaitGroup // fills and warms of peer chunks in progress
	st     counters

	ring     atomic.Pointer[Ring] // nil until SetMembers
	peerMu   sync.Mutex
	peerDown map[string]time.Time // peers that timed out, skipped until then

	persistWake chan struct{}
	persistStop chan struct{}
	persistDone chan struct{}
	// syncFS makes every chunk file renamed so far durable before their
	// records are written (flush): syncfs(2) of Dir's filesystem.
	syncFS func() error
	dir    *os.File // Dir, held open for syncFS
	// syncBroken is set, by the persister only, once syncFS failed.
	syncBroken bool

	mu       sync.Mutex
	closed   bool
	idx      index
	inflight map[chunkID]*fill
	pending  []op             // index writes not yet persisted, in order
	writing  []op             // the batch flush is writing (repin reads identities from it)
	seqEnd   map[objKey]int64 // where each object's last reader ended
	pins     PinFunc
	// leases counts the short-circuit leases of each chunk (Lease): a
	// leased chunk is pinned, including one whose fill commits after the
	// lease was taken.
	leases map[chunkID]int
	// committing counts the fills renaming their file onto each chunk
	// name, outside the lock: removeLocked leaves that file alone.
	committing map[[32]byte]int
	warming    map[chunkID]struct{} // peer-owned chunks being warmed on their owner
	open       openFiles

	// Background load (load.go): loading until every record of
	// index.db is in memory; cursor is the last record name the loader
	// has brought in (names up to it are resolved); tombs names the chunks
	// removed while loading, invKeys the keys invalidated meanwhile (their
	// records are not loaded again). All nil once loaded.
	loading bool
	cursor  []byte
	tombs   map[[32]byte]struct{}
	invKeys map[storeKey]struct{}
	beyond  map[[32]byte]struct{} // entries made beyond the cursor (for repin)
	// invPending: keys invalidated during the load, to be kept in index.db
	// (bucket "invalidated") so that a restart before the loader met their
	// records still drops them; invClear: the load ended, the kept ones are
	// spent; recount: the load found index.db's totals off its records, so
	// flush recounts them. Written by the next flush.
	invPending []storeKey
	invKept    bool // index.db holds (or invPending will give it) kept keys
	invClear   bool
	recount    bool
	loadedCh   chan struct{}
	// Background verification (verify.go): the entries brought in from
	// index.db and not checked yet, handed to verifyLoop (verifyWake says
	// there are more, or loading ended); fresh names the files committed
	// since Open, until the orphan sweep ends (nil then).
	verifyQ    []*entry
	verifyWake chan struct{}
	fresh      map[[32]byte]struct{}
	verifiedCh chan struct{}
}

// Open opens (creating if needed) the cache in cfg.Dir and serves at once:
// it reads index.db's totals (bytes and chunks held, per group) and
// removes every partial fill left by a crash. In the background it loads
// the index's records into memory (load.go; Loaded says when that is
// done; a read of a chunk not loaded yet looks for its record in index.db
// directly), evicts down to Capacity, checks each loaded chunk against
// its file, dropping the bad ones, and removes chunk files the index does
// not know (verify.go; Verified says when that is done); a read of a chunk
// not checked yet checks it first. It returns an error for an invalid
// Config or when Dir or the index cannot be opened (the index is locked by
// another process for longer than a second, for example).
func Open(cfg Config) (*Cache, error) {
	if cfg.Dir == "" {
		return nil, errors.New("cachetier: Config.Dir is required")
	}
	if cfg.ChunkSize == 0 {
		cfg.ChunkSize = DefaultChunkSize
	}
	if cfg.ChunkSize < minChunkSize {
		return nil, fmt.Errorf("cachetier: ChunkSize %d is below %d", cfg.ChunkSize, minChunkSize)
	}
	if cfg.Capacity < 0 || cfg.Capacity == 0 && cfg.CapacityFor == nil {
		return nil, errors.New("cachetier: Config.Capacity must be > 0 (or 0 with Config.CapacityFor)")
	}
	if cfg.Self != "" && cfg.Peers == nil {
		return nil, errors.New("cachetier: Config.Peers is required with Config.Self")
	}
	if cfg.PeerTimeout <= 0 {
		cfg.PeerTimeout = DefaultPeerTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.OpenFiles == 0 {
		cfg.OpenFiles = DefaultOpenFiles
	}
	c := &Cache{
		cfg:         cfg,
		log:         cfg.Logger.With("component", "cachetier"),
		chunkDir:    filepath.Join(cfg.Dir, "chunks"),
		tmpDir:      filepath.Join(cfg.Dir, "tmp"),
		persistWake: make(chan struct{}, 1),
		persistStop: make(chan struct{}),
		persistDone: make(chan struct{}),
		inflight:    make(map[chunkID]*fill),
		seqEnd:      make(map[objKey]int64),
		warming:     make(map[chunkID]struct{}),
		committing:  make(map[[32]byte]int),
		peerDown:    make(map[string]time.Time),
		idx:         newIndex(),
		open:        openFiles{max: cfg.OpenFiles},
		fresh:       make(map[[32]byte]struct{}),
		verifiedCh:  make(chan struct{}),
		verifyWake:  make(chan struct{}, 1),
		loadedCh:    make(chan struct{}),
		tombs:       make(map[[32]byte]struct{}),
		invKeys:     make(map[storeKey]struct{}),
		beyond:      make(map[[32]byte]struct{}),
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("cachetier: %w", err)
	}
	// The index's file lock is the directory's: take it before touching files.
	db, err := bolt.Open(filepath.Join(cfg.Dir, "index.db"), 0o600,
		&bolt.Options{Timeout: time.Second, NoSync: cfg.NoSync})
	if err != nil {
		return nil, fmt.Errorf("cachetier: open index: %w", err)
	}
	// Partial fills never become chunks: the fill area is emptied on start.
	err = os.RemoveAll(c.tmpDir)
	for _, d := range []string{c.chunkDir, c.tmpDir} {
		if err == nil {
			err = os.MkdirAll(d, 0o700)
		}
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("cachetier: prepare %s: %w", cfg.Dir, err)
	}
	c.db = db
	dir, err := os.Open(cfg.Dir)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("cachetier: %w", err)
	}
	c.dir = dir
	c.syncFS = func() error { return syncfs(dir) }
	if err := c.load(); err != nil {
		db.Close()
		dir.Close()
		var ce capacityError
		if errors.As(err, &ce) {
			return nil, ce.err
		}
		return nil, fmt.Errorf("cachetier: load index: %w", err)
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	go c.persistLoop()
	c.fills.Add(2)
	go c.loadLoop()
	go c.verifyLoop()
	return c, nil
}

// Close cancels fills in progress, waits for them, writes the index
// (last-access times included) and closes it. Readers and ChunkRefs already
// handed out stay readable until closed or released. A second Close returns
// ErrClosed; otherwise the error is the index's.
func (c *Cache) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.closed = true
	c.closeAllOpenLocked()
	c.mu.Unlock()
	c.cancel()
	c.fills.Wait()
	close(c.persistStop)
	<-c.persistDone
	c.dir.Close()
	return c.db.Close()
}

// ChunkSize returns the configured chunk size.
func (c *Cache) ChunkSize() int64 { return c.cfg.ChunkSize }

// NumChunks returns how many chunks an object of size bytes has.
func (c *Cache) NumChunks(size int64) int64 {
	return (size + c.cfg.ChunkSize - 1) / c.cfg.ChunkSize
}

func (c *Cache) chunkLen(size, idx int64) int64 {
	return min(c.cfg.ChunkSize, size-idx*c.cfg.ChunkSize)
}

func checkID(id ObjectID) error {
	if id.Validator == "" {
		return ErrNoValidator
	}
	if id.Size < 0 {
		return fmt.Errorf("%w: size %d", ErrInvalidRange, id.Size)
	}
	return nil
}

// Invalidate drops every cached version of store/key (after a write or
// delete through fedgate) and returns how many chunks it dropped (those in
// memory: while the index loads, the key's records not loaded yet are
// dropped as the loader meets them). A key whose 64-bit hash collides
// with this one's loses its chunks too (keyHashOf). Fills in
// progress for the key finish for their readers but are not kept.
func (c *Cache) Invalidate(storeName, key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	drop := c.keyChainLocked(storeName, key)
	if c.loading {
		// Its records not loaded yet are dropped as the loader meets them
		// (and, after a restart, by the next load: invPending).
		k := storeKey{storeName, key}
		if _, ok := c.invKeys[k]; !ok {
			c.invKeys[k] = struct{}{}
			c.invPending = append(c.invPending, k)
			c.invKept = true
		}
	}
	for _, e := range drop {
		c.removeLocked(e, true)
		n++
	}
	for id, fl := range c.inflight {
		if id.obj.store == storeName && id.obj.key == key {
			fl.abandoned = true
			delete(c.inflight, id)
		}
	}
	c.wakePersist()
	return n
}

// Stats returns a snapshot of the counters and of the space in use.
func (c *Cache) Stats() Stats {
	s := Stats{
		Hits:            c.st.hits.Load(),
		Misses:          c.st.misses.Load(),
		Fetches:         c.st.fetches.Load(),
		FetchErrors:     c.st.fetchErrors.Load(),
		BytesFromOrigin: c.st.originBytes.Load(),
		BytesFromCache:  c.st.cacheBytes.Load(),
		Evictions:       c.st.evictions.Load(),
		BadChunks:       c.st.verifyDropped.Load(),
		Filling:         c.st.filling.Load(),
		Capacity:        c.cfg.Capacity,
		PeerReads:       c.st.peerReads.Load(),
		PeerReadBytes:   c.st.peerBytes.Load(),
		PeerFallbacks:   c.st.peerFallback.Load(),
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s.Used, s.Chunks, s.PinnedBytes = c.idx.used, c.chunkCount(), c.idx.pinnedBytes
	s.Groups = make(map[string]GroupStats, len(c.idx.groups))
	for name, g := range c.idx.groups {
		s.Groups[name] = GroupStats{Used: g.used, Quota: g.quota, Pinned: g.pinnedBytes, Priority: Priority(g.class + 1),
			Chunks: g.lru.Len() + g.pinned.Len() + g.unloaded}
	}
	return s
}

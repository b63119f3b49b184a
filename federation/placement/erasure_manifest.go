package placement

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sort"
	"time"

	"github.com/fedgate/fedgate/store"
)

// The on-store layout of an erasure-coded object (see doc.go):
//
//	<key>                                              manifest, one copy per store
//	.fedgate-ec/<kh>/<set>/<segment>.<shard>           shards
//	.fedgate-ec/<kh>/u-<upload>/upload                 a multipart upload (primary only)
//	.fedgate-ec/<kh>/u-<upload>/p-<part>               one uploaded part (primary only)
//
// kh is the first 32 hex digits of the key's SHA-256 (so shard names have a
// fixed length whatever the key), set a version-id-shaped id made by each
// write, segment a 6-digit and shard a 3-digit number.
const (
	reservedPrefix = ".fedgate-ec/"
	// reservedSkip sorts after every name this package makes under
	// reservedPrefix (they use [0-9a-z./-] only): a listing restarted
	// after it has left the reserved names behind.
	reservedSkip = reservedPrefix + "~"

	manifestType  = "application/vnd.fedgate.erasure-manifest+json"
	metaECVersion = "fedgate-ec-version"
	// manifestFormat is the format this package writes: 2, striped
	// shards (see segment). Format 1 (contiguous shards, never released)
	// is still parsed, so Stat, List, Delete, overwrites and Repair work
	// on such objects, but reads refuse it (see loadManifest).
	manifestFormat   = 2
	contiguousFormat = 1
	headerProbe      = 16 << 10
	maxManifestSize  = 256 << 20
	validatorPrefix  = "ec-"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func keyHash(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:16])
}

func shardKey(kh, set string, segment, shard int) string {
	return fmt.Sprintf("%s%s/%s/%06d.%03d", reservedPrefix, kh, set, segment, shard)
}

// header is the manifest's first line: what Stat and List need.
type header struct {
	Format  int            `json:"fedgate_erasure"`
	KeyHash string         `json:"key_hash"`
	Version string         `json:"version"`
	Size    int64          `json:"size"`
	ETag    string         `json:"etag"`
	ModTime time.Time      `json:"mtime"`
	Meta    store.Metadata `json:"meta"`
	Data    int            `json:"k"`
	Parity  int            `json:"m"`
	Block   int64          `json:"block"`
	// Stores names the stores of the layout; segments index into it.
	Stores []string `json:"stores"`
}

// body is the manifest's second line: where the bytes are.
type body struct {
	// Inline holds the bytes of a small object (then there are no
	// segments), InlineCRC their CRC32C.
	Inline    []byte    `json:"inline,omitempty"`
	InlineCRC uint32    `json:"inline_crc,omitempty"`
	Segments  []segment `json:"segments,omitempty"`
}

// segment is up to a segment size of the object's bytes, cut into Data
// shards of Shard bytes each plus Parity parity shards of the same length.
//
// The data shards are striped in blocks of the manifest's Block size B
// (format 2): stripe (row) r is block r of every shard, and data shard j's
// block r holds the segment's bytes [(r*K+j)*B, (r*K+j+1)*B). The last
// stripe holds the rem <= K*B bytes left, in blocks of B' = ceil(rem/K)
// bytes (zero padded at the end of the last data shards), so every
// shard's blocks are B bytes but the last, B', and Shard = (R-1)*B + B'
// for R stripes. Parity block r is the Reed-Solomon parity of stripe r.
// Each block of each shard has its CRC32C in Sums. (Format 1 cut the
// segment into K contiguous shards, shard j holding [j*Shard,
// (j+1)*Shard); its blocks are checksummed the same way.)
type segment struct {
	Set   string `json:"set"`
	Index int    `json:"i"`
	Size  int64  `json:"n"` // object bytes in the segment
	Shard int64  `json:"s"` // bytes of each shard
	// Stores[j] is the index (in header.Stores) of the store of shard j.
	Stores []int `json:"st"`
	// Sums[j] holds the big-endian CRC32C of each Block-sized block of shard j.
	Sums [][]byte `json:"c"`
}

type manifest struct {
	header
	body
	offs []int64 // offs[i]: object offset of segment i
}

func (m *manifest) validator() store.Validator { return store.Validator(validatorPrefix + m.Version) }

func (m *manifest) info(key string) store.ObjectInfo {
	return store.ObjectInfo{
		Key: key, Size: m.Size, ModTime: m.ModTime, ETag: m.ETag,
		Validator: m.validator(), Metadata: m.Meta,
	}
}

func (m *manifest) encode() []byte {
	var b bytes.Buffer
	h, _ := json.Marshal(m.header)
	bd, _ := json.Marshal(m.body)
	b.Grow(len(h) + len(bd) + 2)
	b.Write(h)
	b.WriteByte('\n')
	b.Write(bd)
	b.WriteByte('\n')
	return b.Bytes()
}

// blocks is the number of checksum blocks of a shard of n bytes (for a
// striped segment, its number of stripes).
func blocks(n, block int64) int64 { return (n + block - 1) / block }

// stripedShard is the shard size of a segment of n bytes striped over k
// data shards in blocks of b bytes: full stripes of b bytes per shard,
// then a last one of ceil(rem/k) for the rem bytes left.
func stripedShard(n int64, k int, b int64) int64 {
	w := int64(k) * b
	rows := (n + w - 1) / w
	rem := n - (rows-1)*w
	return (rows-1)*b + (rem+int64(k)-1)/int64(k)
}

// blockLen is the length of block (stripe) r of the segment's shards.
func (s *segment) blockLen(r, block int64) int64 { return min(block, s.Shard-r*block) }

// decodeManifest parses a manifest of key; with headerOnly, b may hold just
// the first line.
func decodeManifest(b []byte, key string, headerOnly bool) (*manifest, error) {
	line, rest, ok := bytes.Cut(b, []byte{'\n'})
	if !ok && !headerOnly {
		return nil, fmt.Errorf("%w: no header line", ErrCorrupt)
	}
	m := &manifest{}
	if err := json.Unmarshal(line, &m.header); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrCorrupt, err)
	}
	h := &m.header
	switch {
	case h.Format != manifestFormat && h.Format != contiguousFormat:
		return nil, fmt.Errorf("%w: format %d, want %d", ErrCorrupt, h.Format, manifestFormat)
	case h.KeyHash != keyHash(key):
		return nil, fmt.Errorf("%w: manifest of another key", ErrCorrupt)
	case !validID(h.Version):
		return nil, fmt.Errorf("%w: version %q", ErrCorrupt, h.Version)
	case h.Data < 1 || h.Parity < 0 || h.Data+h.Parity > 256 || h.Block < 1 || len(h.Stores) == 0 || h.Size < 0:
		return nil, fmt.Errorf("%w: layout k=%d m=%d block=%d stores=%d size=%d", ErrCorrupt, h.Data, h.Parity, h.Block, len(h.Stores), h.Size)
	}
	if headerOnly {
		return m, nil
	}
	if err := json.Unmarshal(bytes.TrimSuffix(rest, []byte{'\n'}), &m.body); err != nil {
		return nil, fmt.Errorf("%w: body: %v", ErrCorrupt, err)
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	return m, nil
}

// check validates the body against the header and computes offs.
func (m *manifest) check() error {
	n := m.Data + m.Parity
	if len(m.Segments) == 0 {
		if int64(len(m.Inline)) != m.Size {
			return fmt.Errorf("%w: %d inline bytes for size %d", ErrCorrupt, len(m.Inline), m.Size)
		}
		if crc32.Checksum(m.Inline, castagnoli) != m.InlineCRC {
			return fmt.Errorf("%w: inline bytes fail their checksum", ErrCorrupt)
		}
		return nil
	}
	m.offs = make([]int64, len(m.Segments))
	var off int64
	for i, s := range m.Segments {
		if !validID(s.Set) || s.Index < 0 || s.Size < 1 || s.Shard < 1 || s.Shard*int64(m.Data) < s.Size ||
			len(s.Stores) != n || len(s.Sums) != n {
			return fmt.Errorf("%w: segment %d", ErrCorrupt, i)
		}
		if want := stripedShard(s.Size, m.Data, m.Block); m.Format == manifestFormat && s.Shard != want {
			return fmt.Errorf("%w: segment %d: shards of %d bytes, want %d for %d bytes striped over %d in %d-byte blocks",
				ErrCorrupt, i, s.Shard, want, s.Size, m.Data, m.Block)
		}
		for j := range n {
			if s.Stores[j] < 0 || s.Stores[j] >= len(m.Stores) || int64(len(s.Sums[j])) != 4*blocks(s.Shard, m.Block) {
				return fmt.Errorf("%w: segment %d shard %d", ErrCorrupt, i, j)
			}
		}
		m.offs[i] = off
		off += s.Size
	}
	if off != m.Size {
		return fmt.Errorf("%w: segments hold %d bytes, size is %d", ErrCorrupt, off, m.Size)
	}
	return nil
}

// segmentAt returns the index of the segment holding object offset off.
func (m *manifest) segmentAt(off int64) int {
	return sort.Search(len(m.offs), func(i int) bool { return m.offs[i] > off }) - 1
}

// sets returns the shard sets the manifest refers to.
func (m *manifest) sets() map[string]bool {
	out := map[string]bool{}
	for _, s := range m.Segments {
		out[s.Set] = true
	}
	return out
}

// blockSum returns the CRC32C of block b of shard j of segment s.
func (s *segment) blockSum(j int, b int64) uint32 {
	c := s.Sums[j][4*b : 4*b+4]
	return uint32(c[0])<<24 | uint32(c[1])<<16 | uint32(c[2])<<8 | uint32(c[3])
}

// sumBlocks returns the per-block CRC32C of a shard.
func sumBlocks(shard []byte, block int64) []byte {
	out := make([]byte, 0, 4*blocks(int64(len(shard)), block))
	for off := int64(0); off < int64(len(shard)); off += block {
		c := crc32.Checksum(shard[off:min(off+block, int64(len(shard)))], castagnoli)
		out = append(out, byte(c>>24), byte(c>>16), byte(c>>8), byte(c))
	}
	return out
}

// isManifest reports whether a store's info is of a manifest this package
// wrote, and its version.
func isManifest(info store.ObjectInfo) (string, bool) {
	v := info.Metadata.User[metaECVersion]
	return v, info.ContentType == manifestType && validID(v)
}

// readManifest reads store i's manifest of key. With headerOnly it reads
// only as much as the header needs (when it fits in headerProbe bytes).
func (e *Erasure) readManifest(ctx context.Context, i int, key string, ifMatch store.Validator, headerOnly bool) (*manifest, error) {
	length := int64(-1)
	if headerOnly {
		length = headerProbe
	}
	for {
		rc, err := e.stores[i].ReadRange(ctx, key, 0, length, ifMatch)
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(io.LimitReader(rc, maxManifestSize+1))
		rc.Close()
		if err != nil {
			return nil, err
		}
		if len(b) > maxManifestSize {
			return nil, fmt.Errorf("%w: over %d bytes", ErrCorrupt, maxManifestSize)
		}
		if length > 0 && int64(len(b)) == length && bytes.IndexByte(b, '\n') < 0 {
			length = -1 // a header longer than the probe: read it all
			continue
		}
		return decodeManifest(b, key, headerOnly)
	}
}

// loadManifest reads key's manifest from the first store in read order
// that has an intact one. ErrNotFound when no reachable store has one.
// A whole manifest (not headerOnly) is for reading the object, so one of
// format 1 (contiguous shards, which this version no longer reads) is
// skipped like a damaged copy, and ErrCorrupt names its format when no
// store has a readable one.
func (e *Erasure) loadManifest(ctx context.Context, op, key string, headerOnly bool) (*manifest, error) {
	m, _, err := e.loadManifestFrom(ctx, op, key, headerOnly)
	return m, err
}

// loadManifestFrom is loadManifest that also returns the stores tried
// before the one that gave the manifest (they lack it or failed).
func (e *Erasure) loadManifestFrom(ctx context.Context, op, key string, headerOnly bool) (*manifest, []int, error) {
	var errs []error
	var without []int
	notFound := false
	for _, i := range e.order() {
		m, err := e.readManifest(ctx, i, key, "", headerOnly)
		e.observe(i, err)
		if err == nil && !headerOnly && m.Format != manifestFormat {
			err = fmt.Errorf("%w: format %d (contiguous shards, from before the striped format %d) is no longer readable: delete the object, or read it with the build that wrote it",
				ErrCorrupt, m.Format, manifestFormat)
		}
		switch {
		case err == nil:
			return m, without, nil
		case errors.Is(err, store.ErrNotFound):
			notFound = true
			without = append(without, i)
		case errors.Is(err, store.ErrInvalidKey), ctx.Err() != nil:
			return nil, nil, fmt.Errorf("placement %s: %s %s: %w", e.name, op, quote(key), err)
		default:
			errs = append(errs, e.storeErr(i, err))
			without = append(without, i)
		}
	}
	if notFound && len(errs) == 0 {
		return nil, nil, fmt.Errorf("placement %s: %s %s: %w", e.name, op, quote(key), store.ErrNotFound)
	}
	if notFound {
		// Some stores have no manifest and the others' are unreadable: a
		// damaged or foreign object is an error, an outage is not news.
		for _, err := range errs {
			if errors.Is(err, ErrCorrupt) {
				return nil, nil, fmt.Errorf("placement %s: %s %s: %w", e.name, op, quote(key), errors.Join(errs...))
			}
		}
		return nil, nil, fmt.Errorf("placement %s: %s %s: %w", e.name, op, quote(key), store.ErrNotFound)
	}
	return nil, nil, fmt.Errorf("placement %s: %s %s: %w", e.name, op, quote(key), errors.Join(errs...))
}

// installResult is what install did.
type installResult struct {
	// superseded: a newer version reached a store first; the new
	// manifest is in no store any more.
	superseded bool
	// replaced holds the older manifests that the new one replaced (one per
	// version), so their shards can go.
	replaced []*manifest
	// installed counts the stores that hold the new manifest.
	installed int
}

const maxCAS = 16

// install writes m to every store, in listed order, each with a
// compare-and-swap (IfNoneMatch when the key is absent, IfMatch on the
// store's validator otherwise). The first store is the sequencer: there
// opts' conditions are checked and m gets its version id, later than the
// version it replaces; on the others m replaces only older versions. So
// every store's manifest only moves forward in version order, concurrent
// writers end with the newest version everywhere, and a writer that finds
// a newer version ahead of it stops (superseded). The error says where it
// stopped: res.installed stores hold m.
func (e *Erasure) install(ctx context.Context, key string, m *manifest, opts store.PutOptions) (installResult, error) {
	var res installResult
	var enc []byte
	seen := map[string]bool{}
	for i, s := range e.stores {
		done := false
		for attempt := 0; !done; attempt++ {
			if attempt == maxCAS {
				return res, e.storeErr(i, fmt.Errorf("manifest kept changing under %d writes", maxCAS))
			}
			cur, err := s.Stat(ctx, key)
			e.observe(i, err)
			exists := err == nil
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return res, e.storeErr(i, err)
			}
			curVer, ours := "", false
			if exists {
				curVer, ours = isManifest(cur)
			}
			if i == 0 {
				if opts.IfNoneMatch && exists {
					return res, store.ErrPreconditionFailed
				}
				if opts.IfMatch != "" && (!ours || store.Validator(validatorPrefix+curVer) != opts.IfMatch) {
					return res, store.ErrPreconditionFailed
				}
				m.Version = newVersion(e.opts.now(), curVer)
				enc = m.encode()
			} else if ours && curVer >= m.Version {
				if curVer == m.Version {
					res.installed++
					break
				}
				res.superseded = true
				return res, nil
			}
			if ours && !seen[curVer] {
				old, err := e.readManifest(ctx, i, key, cur.Validator, false)
				if errors.Is(err, store.ErrPreconditionFailed) || errors.Is(err, store.ErrNotFound) {
					continue // changed since the Stat
				}
				seen[curVer] = true
				if err == nil {
					res.replaced = append(res.replaced, old)
				}
			}
			po := store.PutOptions{Metadata: store.Metadata{
				ContentType: manifestType,
				User:        map[string]string{metaECVersion: m.Version},
			}}
			if exists {
				po.IfMatch = cur.Validator
			} else {
				po.IfNoneMatch = true
			}
			_, err = s.Put(ctx, key, bytes.NewReader(enc), int64(len(enc)), po)
			e.observe(i, err)
			switch {
			case err == nil:
				res.installed++
				done = true
			case errors.Is(err, store.ErrPreconditionFailed):
				// changed since the Stat: look again
			default:
				return res, e.storeErr(i, err)
			}
		}
	}
	return res, nil
}

// Package shard reads single members out of archive objects — tar,
// tar.gz (.tgz) and zip "shards", as WebDataset and similar training
// pipelines store samples — through ranged reads of the object, without
// reading the whole shard where the format allows.
//
// Build makes a member index of one shard version:
//
//   - tar: the 512-byte headers are read with ranged reads of at most
//     4 MiB, skipping every member's data (a gap of more than 1 MiB is
//     skipped by opening a new range; smaller gaps are read through on the
//     open one), so a shard of large members costs a few small reads and
//     one of small members a sequential pass in consecutive ranges;
//   - zip: the end-of-central-directory record (and its zip64 form) in the
//     last 64 KiB, then the central directory: nothing of the members;
//   - tar.gz: gzip cannot seek, so the index is made by decompressing the
//     whole shard once; the index keeps each member's offset in the
//     uncompressed stream.
//
// Index.Open then reads one member: tar and zip stored members are one
// ranged read of exactly their bytes; zip deflated members are one ranged
// read of their compressed bytes, inflated as they stream (and checked
// against their CRC-32 when read whole); a tar.gz member is decompressed
// from the start of the shard up to the member (then its bytes stream).
//
// The package knows nothing of S3, stores or caches: it reads through a
// ReadRange function. Cache keeps indexes, bounded by their size, keyed by
// whatever names a shard version (the caller uses bucket, key, ETag and
// validator, so a changed shard is indexed again). It is a leaf: it imports
// nothing of fedgate.
package shard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// ReadRange opens n bytes of the shard from off (n < 0: to its end). The
// errors it returns reach the caller of Build and Open unchanged (wrapped),
// so errors.Is sees them.
type ReadRange func(ctx context.Context, off, n int64) (io.ReadCloser, error)

// Format is an archive format.
type Format int

// The formats.
const (
	Unknown Format = iota
	Tar
	TarGz
	Zip
)

func (f Format) String() string {
	switch f {
	case Tar:
		return "tar"
	case TarGz:
		return "tar.gz"
	case Zip:
		return "zip"
	}
	return "unknown"
}

// FormatOf returns the format a key's suffix names (case-insensitive):
// .tar, .tar.gz or .tgz, .zip; Unknown for any other.
func FormatOf(key string) Format {
	k := strings.ToLower(key)
	switch {
	case strings.HasSuffix(k, ".tar"):
		return Tar
	case strings.HasSuffix(k, ".tar.gz"), strings.HasSuffix(k, ".tgz"):
		return TarGz
	case strings.HasSuffix(k, ".zip"):
		return Zip
	}
	return Unknown
}

// SniffLen is how many leading bytes Sniff looks at.
const SniffLen = 512

// Sniff returns the format the first bytes of an object show: a zip local
// header (or an empty zip's end record), a gzip header (taken as tar.gz),
// or a ustar/GNU tar header; Unknown otherwise.
func Sniff(head []byte) Format {
	switch {
	case len(head) >= 4 && (string(head[:4]) == "PK\x03\x04" || string(head[:4]) == "PK\x05\x06"):
		return Zip
	case len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b:
		return TarGz
	case len(head) >= 263 && (string(head[257:262]) == "ustar"):
		return Tar
	}
	return Unknown
}

// Errors.
var (
	// ErrNoMember: the shard has no member of that name. The error
	// Lookup-based callers get is a *MemberError wrapping it.
	ErrNoMember = errors.New("shard: no such member")
	// ErrFormat: the object is not a readable archive of its format
	// (corrupt, truncated, or a variant this package does not read).
	ErrFormat = errors.New("shard: not a readable archive")
	// ErrUnsupported: the member exists but cannot be read (a sparse tar
	// member, an encrypted zip member, a zip compression method other than
	// stored or deflate).
	ErrUnsupported = errors.New("shard: member cannot be read")
	// ErrChecksum: a zip member's bytes do not match its CRC-32.
	ErrChecksum = errors.New("shard: member checksum mismatch")
)

// MemberError names the member an ErrNoMember or ErrUnsupported is about.
type MemberError struct {
	Name string
	Err  error
}

func (e *MemberError) Error() string { return fmt.Sprintf("%v: %q", e.Err, e.Name) }
func (e *MemberError) Unwrap() error { return e.Err }

func formatErr(f Format, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrFormat, f, fmt.Sprintf(format, args...))
}

// Member is one file of a shard.
type Member struct {
	Name string
	// Offset is where the member starts: for tar, the first byte of its
	// data in the shard; for tar.gz, the first byte of its data in the
	// uncompressed stream; for zip, its local file header in the shard.
	Offset int64
	// Size is the member's (uncompressed) length.
	Size int64
	// CompSize is a zip member's compressed length (Size for tar).
	CompSize int64
	// Method is a zip member's compression method (0 stored, 8 deflate).
	Method uint16
	// CRC32 is a zip member's checksum of its uncompressed bytes.
	CRC32 uint32
	// unsupported says why the member cannot be read ("": it can).
	unsupported string
}

// Index is the member index of one shard version. It is immutable and safe
// for concurrent use.
type Index struct {
	Format Format
	// Size is the shard's length the index was built for.
	Size    int64
	members []Member       // in archive order
	byName  map[string]int // normalized name -> index in members (the last of duplicates)
}

// NormalizeName is how member names are matched: a leading "./" (repeated)
// and leading "/" are dropped, so "./000123.jpg" is found as "000123.jpg".
func NormalizeName(name string) string {
	for {
		switch {
		case strings.HasPrefix(name, "./"):
			name = name[2:]
		case strings.HasPrefix(name, "/"):
			name = name[1:]
		default:
			return name
		}
	}
}

func newIndex(f Format, size int64, ms []Member) *Index {
	ix := &Index{Format: f, Size: size, members: ms, byName: make(map[string]int, len(ms))}
	for i, m := range ms {
		ix.byName[NormalizeName(m.Name)] = i
	}
	return ix
}

// Len is the number of members.
func (ix *Index) Len() int { return len(ix.members) }

// Members returns the members in archive order (duplicates included).
func (ix *Index) Members() []Member { return append([]Member(nil), ix.members...) }

// Names returns the distinct member names, sorted.
func (ix *Index) Names() []string {
	out := make([]string, 0, len(ix.byName))
	for n := range ix.byName {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Lookup returns the member of that name (matched after NormalizeName; of
// duplicates, the last in the archive, as tar extraction leaves it), or a
// *MemberError wrapping ErrNoMember or ErrUnsupported.
func (ix *Index) Lookup(name string) (Member, error) {
	i, ok := ix.byName[NormalizeName(name)]
	if !ok {
		return Member{}, &MemberError{Name: name, Err: ErrNoMember}
	}
	m := ix.members[i]
	if m.unsupported != "" {
		return Member{}, &MemberError{Name: name, Err: fmt.Errorf("%w (%s)", ErrUnsupported, m.unsupported)}
	}
	return m, nil
}

// MemoryBytes estimates what the index holds in memory.
func (ix *Index) MemoryBytes() int64 {
	n := int64(128)
	for _, m := range ix.members {
		n += int64(2*len(m.Name)) + 112 // the name is kept once; the map key shares it
	}
	return n
}

// Build reads the member index of a shard of the given format and size.
// Errors: ErrFormat (wrapped, with what was wrong) for a corrupt or
// unreadable archive, or what rr returned.
func Build(ctx context.Context, f Format, size int64, rr ReadRange) (*Index, error) {
	switch f {
	case Tar:
		return buildTar(ctx, size, rr)
	case TarGz:
		return buildTarGz(ctx, size, rr)
	case Zip:
		return buildZip(ctx, size, rr)
	}
	return nil, fmt.Errorf("%w: not a tar, tar.gz or zip archive", ErrFormat)
}

// Open streams bytes [start, start+n) of member m (n < 0: to its end) of
// the shard ix indexes, reading it through rr. start and n must lie within
// the member (the caller resolved its range against m.Size).
func (ix *Index) Open(ctx context.Context, m Member, rr ReadRange, start, n int64) (io.ReadCloser, error) {
	if n < 0 {
		n = m.Size - start
	}
	if start < 0 || n < 0 || start+n > m.Size {
		return nil, fmt.Errorf("shard: range [%d, +%d) outside member %q of %d bytes", start, n, m.Name, m.Size)
	}
	if n == 0 {
		return io.NopCloser(strings.NewReader("")), nil
	}
	switch ix.Format {
	case Tar:
		return rr(ctx, m.Offset+start, n)
	case TarGz:
		return openTarGzMember(ctx, ix.Size, m, rr, start, n)
	case Zip:
		return openZipMember(ctx, ix.Size, m, rr, start, n)
	}
	return nil, fmt.Errorf("%w: unknown format", ErrFormat)
}

// skipReader discards n bytes of r, failing with io.ErrUnexpectedEOF when
// r ends first.
func skip(r io.Reader, n int64) error {
	if n <= 0 {
		return nil
	}
	got, err := io.CopyN(io.Discard, r, n)
	if got < n && (err == nil || errors.Is(err, io.EOF)) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readCloser joins a reader with the Close of what it reads from.
type readCloser struct {
	io.Reader
	close func() error
}

func (r readCloser) Close() error { return r.close() }

package shard

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

// maxSkip is the largest gap the tar scan reads through on its open range
// rather than opening a new one at the next header.
const maxSkip = 1 << 20

// scanBuf is the read buffer of a scan's open range.
const scanBuf = 64 << 10

// scanWindow is the most a scan's range asks for at once: a bounded range
// does not make the reader below fetch far ahead (the chunk cache reads
// ahead within a range) past a member the scan then skips.
const scanWindow = 4 << 20

// rangeSeeker is an io.ReadSeeker over a shard's ranged reads, for
// archive/tar: it seeks over member data (tar.Reader seeks a Seeker instead
// of reading what it skips) and keeps one range (of at most scanWindow)
// open while reads go forward, so a scan of small members is a sequential
// read in consecutive ranges.
type rangeSeeker struct {
	ctx   context.Context
	rr    ReadRange
	size  int64
	pos   int64 // where the next Read reads
	rc    io.ReadCloser
	br    *bufio.Reader
	rcPos int64 // where br's next byte is
	rcEnd int64 // where the open range ends
	opens int   // ranges opened, for tests
}

func (s *rangeSeeker) Read(p []byte) (int, error) {
	if s.pos >= s.size {
		return 0, io.EOF
	}
	if s.br != nil && (s.pos < s.rcPos || s.pos-s.rcPos > maxSkip || s.pos >= s.rcEnd) {
		s.close()
	}
	if s.br == nil {
		n := min(s.size-s.pos, scanWindow)
		rc, err := s.rr(s.ctx, s.pos, n)
		if err != nil {
			return 0, err
		}
		s.opens++
		s.rc, s.rcPos, s.rcEnd = rc, s.pos, s.pos+n
		s.br = bufio.NewReaderSize(rc, scanBuf)
	}
	if gap := s.pos - s.rcPos; gap > 0 {
		n, err := s.br.Discard(int(gap))
		s.rcPos += int64(n)
		if err != nil {
			s.close()
			return 0, unexpected(err)
		}
	}
	if left := s.rcEnd - s.pos; int64(len(p)) > left {
		p = p[:left]
	}
	n, err := s.br.Read(p)
	s.pos += int64(n)
	s.rcPos += int64(n)
	if err != nil {
		s.close()
		if errors.Is(err, io.EOF) {
			if s.pos < s.rcEnd {
				return n, io.ErrUnexpectedEOF // the range ended before its length
			}
			err = nil
		}
	}
	return n, err
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

func (s *rangeSeeker) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		off += s.pos
	case io.SeekEnd:
		off += s.size
	default:
		return 0, errors.New("shard: bad whence")
	}
	if off < 0 {
		return 0, errors.New("shard: seek before start")
	}
	s.pos = off
	return off, nil
}

func (s *rangeSeeker) close() {
	if s.rc != nil {
		s.rc.Close()
	}
	s.rc, s.br = nil, nil
}

// tarMember turns a tar header into a member: only regular files are
// members (directories, links and special files are not); a sparse file
// is one that cannot be read.
func tarMember(h *tar.Header, off int64) (Member, bool) {
	if h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeGNUSparse && h.Typeflag != '\x00' {
		return Member{}, false
	}
	m := Member{Name: h.Name, Offset: off, Size: h.Size, CompSize: h.Size}
	if h.Typeflag == tar.TypeGNUSparse {
		m.unsupported = "a sparse tar member"
	}
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			m.unsupported = "a sparse tar member"
		}
	}
	if m.Name == "" || strings.HasSuffix(m.Name, "/") {
		return Member{}, false
	}
	return m, true
}

func buildTar(ctx context.Context, size int64, rr ReadRange) (*Index, error) {
	s := &rangeSeeker{ctx: ctx, rr: rr, size: size}
	defer s.close()
	ms, err := scanTar(s, func() int64 { return s.pos })
	if err != nil {
		return nil, err
	}
	return newIndex(Tar, size, ms), nil
}

// scanTar lists the members of the tar stream r; pos tells where r is
// (the first byte of a member's data right after tar.Reader.Next: it
// reads headers exactly, never ahead).
func scanTar(r io.Reader, pos func() int64) ([]Member, error) {
	tr := tar.NewReader(r)
	var ms []Member
	for {
		h, err := tr.Next()
		if errors.Is(err, tar.ErrInsecurePath) && h != nil {
			err = nil // a name like "../x" is still a name to look up
		}
		if errors.Is(err, io.EOF) {
			return ms, nil
		}
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, formatErr(Tar, "truncated archive")
			}
			if errors.Is(err, tar.ErrHeader) || errors.Is(err, tar.ErrFieldTooLong) {
				return nil, formatErr(Tar, "%v", err)
			}
			if strings.HasPrefix(err.Error(), "archive/tar:") {
				return nil, formatErr(Tar, "%v", err)
			}
			return nil, err
		}
		if h.Size < 0 {
			return nil, formatErr(Tar, "member %q has a negative size", h.Name)
		}
		if m, ok := tarMember(h, pos()); ok {
			ms = append(ms, m)
		}
	}
}

// countingReader counts what was read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func buildTarGz(ctx context.Context, size int64, rr ReadRange) (*Index, error) {
	rc, err := rr(ctx, 0, size)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	src := &storeErrReader{r: bufio.NewReaderSize(rc, scanBuf)}
	zr, err := gzip.NewReader(src)
	if err != nil {
		if src.err != nil {
			return nil, src.err
		}
		return nil, formatErr(TarGz, "%v", err)
	}
	cr := &countingReader{r: zr}
	ms, err := scanTar(cr, func() int64 { return cr.n })
	if err != nil {
		if src.err != nil {
			return nil, src.err
		}
		if errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader) || isFlateErr(err) {
			return nil, formatErr(TarGz, "%v", err)
		}
		if errors.Is(err, ErrFormat) {
			return nil, fmt.Errorf("%w: tar.gz: %s", ErrFormat, strings.TrimPrefix(err.Error(), ErrFormat.Error()+": tar: "))
		}
		return nil, err
	}
	return newIndex(TarGz, size, ms), nil
}

// storeErrReader remembers an error of the shard's own reads, so that a
// store failure under gzip is reported as itself, not as corrupt data.
type storeErrReader struct {
	r   io.Reader
	err error
}

func (s *storeErrReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		s.err = err
	}
	return n, err
}

func isFlateErr(err error) bool {
	return strings.Contains(err.Error(), "flate:")
}

// openTarGzMember decompresses the shard from its start, discards up to
// the member's offset (plus start) and streams n bytes.
func openTarGzMember(ctx context.Context, size int64, m Member, rr ReadRange, start, n int64) (io.ReadCloser, error) {
	rc, err := rr(ctx, 0, size)
	if err != nil {
		return nil, err
	}
	src := &storeErrReader{r: bufio.NewReaderSize(rc, scanBuf)}
	fail := func(err error) (io.ReadCloser, error) {
		rc.Close()
		if src.err != nil {
			return nil, src.err
		}
		return nil, formatErr(TarGz, "reading up to member %q: %v", m.Name, err)
	}
	zr, err := gzip.NewReader(src)
	if err != nil {
		return fail(err)
	}
	if err := skip(zr, m.Offset+start); err != nil {
		return fail(err)
	}
	body := &exactReader{r: zr, left: n, src: src, name: m.Name}
	return readCloser{Reader: body, close: rc.Close}, nil
}

// exactReader reads exactly left bytes of r: an early end is corrupt data
// (or the store's own error).
type exactReader struct {
	r    io.Reader
	left int64
	src  *storeErrReader
	name string
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.r.Read(p)
	e.left -= int64(n)
	if err != nil {
		if e.src != nil && e.src.err != nil {
			return n, e.src.err
		}
		if errors.Is(err, io.EOF) {
			if e.left == 0 {
				return n, io.EOF
			}
			err = io.ErrUnexpectedEOF
		}
		return n, formatErr(TarGz, "member %q: %v", e.name, err)
	}
	return n, nil
}

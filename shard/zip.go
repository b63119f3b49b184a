package shard

import (
	"bufio"
	"compress/flate"
	"context"
	"encoding/binary"
	"errors"
	"hash"
	"hash/crc32"
	"io"
	"strings"
)

// Zip record signatures and sizes (APPNOTE.TXT).
const (
	zipLocalSig     = 0x04034b50
	zipCentralSig   = 0x02014b50
	zipEndSig       = 0x06054b50
	zip64EndSig     = 0x06064b50
	zip64LocatorSig = 0x07064b50
	zipLocalLen     = 30
	zipCentralLen   = 46
	zipEndLen       = 22
	zip64EndLen     = 56
	zip64LocatorLen = 20
	zipMaxComment   = 65535
	zipStored       = 0
	zipDeflate      = 8
)

// readAt reads exactly len(p) bytes of the shard at off with one range.
func readAt(ctx context.Context, rr ReadRange, off int64, p []byte) error {
	rc, err := rr(ctx, off, int64(len(p)))
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = io.ReadFull(rc, p)
	return unexpected(err)
}

func buildZip(ctx context.Context, size int64, rr ReadRange) (*Index, error) {
	if size < zipEndLen {
		return nil, formatErr(Zip, "%d bytes is too short for a zip archive", size)
	}
	tailLen := min(size, zipEndLen+zipMaxComment+zip64LocatorLen)
	tail := make([]byte, tailLen)
	if err := readAt(ctx, rr, size-tailLen, tail); err != nil {
		return nil, shardReadErr(Zip, err)
	}
	// The end record is the last signature whose comment reaches the end.
	end := -1
	for i := len(tail) - zipEndLen; i >= 0; i-- {
		if binary.LittleEndian.Uint32(tail[i:]) == zipEndSig {
			clen := int(binary.LittleEndian.Uint16(tail[i+20:]))
			if i+zipEndLen+clen <= len(tail) {
				end = i
				break
			}
		}
	}
	if end < 0 {
		return nil, formatErr(Zip, "no end of central directory record")
	}
	e := tail[end:]
	entries := uint64(binary.LittleEndian.Uint16(e[10:]))
	cdSize := uint64(binary.LittleEndian.Uint32(e[12:]))
	cdOff := uint64(binary.LittleEndian.Uint32(e[16:]))
	endPos := size - tailLen + int64(end)
	if end >= zip64LocatorLen && binary.LittleEndian.Uint32(tail[end-zip64LocatorLen:]) == zip64LocatorSig {
		loc := tail[end-zip64LocatorLen:]
		off := binary.LittleEndian.Uint64(loc[8:])
		if off > uint64(endPos) || uint64(endPos)-off < zip64EndLen {
			return nil, formatErr(Zip, "zip64 end record out of bounds")
		}
		rec := make([]byte, zip64EndLen)
		if err := readAt(ctx, rr, int64(off), rec); err != nil {
			return nil, shardReadErr(Zip, err)
		}
		if binary.LittleEndian.Uint32(rec) != zip64EndSig {
			return nil, formatErr(Zip, "bad zip64 end record")
		}
		entries = binary.LittleEndian.Uint64(rec[32:])
		cdSize = binary.LittleEndian.Uint64(rec[40:])
		cdOff = binary.LittleEndian.Uint64(rec[48:])
		endPos = int64(off)
	}
	if cdOff > uint64(endPos) || cdSize > uint64(endPos)-cdOff {
		return nil, formatErr(Zip, "central directory out of bounds")
	}
	if entries > cdSize/zipCentralLen {
		return nil, formatErr(Zip, "%d entries cannot fit a %d-byte central directory", entries, cdSize)
	}
	ms := make([]Member, 0, int(entries))
	if cdSize > 0 {
		rc, err := rr(ctx, int64(cdOff), int64(cdSize))
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		br := bufio.NewReaderSize(io.LimitReader(rc, int64(cdSize)), scanBuf)
		for range entries {
			m, ok, err := readCentral(br, size)
			if err != nil {
				return nil, err
			}
			if ok {
				ms = append(ms, m)
			}
		}
	}
	return newIndex(Zip, size, ms), nil
}

// shardReadErr reports a short read of the shard's own bytes as a format
// error (the archive is shorter than its records say), anything else as is.
func shardReadErr(f Format, err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return formatErr(f, "truncated archive")
	}
	return err
}

// readCentral reads one central directory header; ok is false for an
// entry that is not a member (a directory).
func readCentral(r io.Reader, size int64) (Member, bool, error) {
	var h [zipCentralLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return Member{}, false, shardReadErr(Zip, unexpected(err))
	}
	if binary.LittleEndian.Uint32(h[:]) != zipCentralSig {
		return Member{}, false, formatErr(Zip, "bad central directory header")
	}
	flags := binary.LittleEndian.Uint16(h[8:])
	m := Member{
		Method:   binary.LittleEndian.Uint16(h[10:]),
		CRC32:    binary.LittleEndian.Uint32(h[16:]),
		CompSize: int64(binary.LittleEndian.Uint32(h[20:])),
		Size:     int64(binary.LittleEndian.Uint32(h[24:])),
		Offset:   int64(binary.LittleEndian.Uint32(h[42:])),
	}
	nameLen := int(binary.LittleEndian.Uint16(h[28:]))
	extraLen := int(binary.LittleEndian.Uint16(h[30:]))
	commentLen := int(binary.LittleEndian.Uint16(h[32:]))
	buf := make([]byte, nameLen+extraLen+commentLen)
	if _, err := io.ReadFull(r, buf); err != nil {
		return Member{}, false, shardReadErr(Zip, unexpected(err))
	}
	m.Name = string(buf[:nameLen])
	extra := buf[nameLen : nameLen+extraLen]
	// zip64: the fields set to all ones are in the 0x0001 extra field, in
	// this order.
	need64 := []*int64{}
	for _, f := range []*int64{&m.Size, &m.CompSize, &m.Offset} {
		if *f == 0xFFFFFFFF {
			need64 = append(need64, f)
		}
	}
	for len(extra) >= 4 && len(need64) > 0 {
		id := binary.LittleEndian.Uint16(extra)
		n := int(binary.LittleEndian.Uint16(extra[2:]))
		if 4+n > len(extra) {
			break
		}
		if id == 0x0001 {
			data := extra[4 : 4+n]
			for _, f := range need64 {
				if len(data) < 8 {
					return Member{}, false, formatErr(Zip, "short zip64 extra field of %q", m.Name)
				}
				*f = int64(binary.LittleEndian.Uint64(data))
				data = data[8:]
			}
			need64 = nil
		}
		extra = extra[4+n:]
	}
	if m.Size < 0 || m.CompSize < 0 || m.Offset < 0 || m.Offset >= size || m.CompSize > size-m.Offset {
		return Member{}, false, formatErr(Zip, "member %q lies outside the archive", m.Name)
	}
	if strings.HasSuffix(m.Name, "/") || m.Name == "" {
		return m, false, nil
	}
	switch {
	case flags&0x1 != 0:
		m.unsupported = "an encrypted zip member"
	case m.Method != zipStored && m.Method != zipDeflate:
		m.unsupported = "zip compression method " + itoa(int(m.Method)) + " (only stored and deflate are read)"
	case m.Method == zipStored && m.CompSize != m.Size:
		return Member{}, false, formatErr(Zip, "stored member %q has different compressed and plain sizes", m.Name)
	}
	return m, true, nil
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

// openZipMember reads the member's local header and streams [start,
// start+n) of its bytes: a stored member's straight from the shard, a
// deflated one's inflated from its compressed bytes.
func openZipMember(ctx context.Context, size int64, m Member, rr ReadRange, start, n int64) (io.ReadCloser, error) {
	// One range usually holds the local header and the data: the header's
	// name is the central directory's, its extra field is guessed short
	// and read again exactly when it is longer.
	guess := int64(zipLocalLen + len(m.Name) + 128)
	span := min(size-m.Offset, guess+m.CompSize)
	if m.Method == zipStored && start > maxSkip {
		span = min(size-m.Offset, guess) // read the header, then seek to the range
	}
	rc, err := rr(ctx, m.Offset, span)
	if err != nil {
		return nil, err
	}
	src := &storeErrReader{r: rc}
	var h [zipLocalLen]byte
	if _, err := io.ReadFull(src, h[:]); err != nil {
		rc.Close()
		if src.err != nil {
			return nil, src.err
		}
		return nil, formatErr(Zip, "member %q: truncated local header", m.Name)
	}
	if binary.LittleEndian.Uint32(h[:]) != zipLocalSig {
		rc.Close()
		return nil, formatErr(Zip, "member %q: bad local header", m.Name)
	}
	hdrLen := int64(zipLocalLen) + int64(binary.LittleEndian.Uint16(h[26:])) + int64(binary.LittleEndian.Uint16(h[28:]))
	dataOff := m.Offset + hdrLen
	if dataOff > size || m.CompSize > size-dataOff {
		rc.Close()
		return nil, formatErr(Zip, "member %q lies outside the archive", m.Name)
	}
	var comp io.Reader
	closeFn := rc.Close
	switch {
	case m.Method == zipStored && hdrLen+m.CompSize > span:
		// A far range, or a header longer than guessed: read the bytes
		// straight (no CRC check then: it needs the whole member read
		// through here).
		rc.Close()
		direct, err := rr(ctx, dataOff+start, n)
		if err != nil {
			return nil, err
		}
		return direct, nil
	case hdrLen+m.CompSize > span:
		rc.Close()
		if rc, err = rr(ctx, dataOff, m.CompSize); err != nil {
			return nil, err
		}
		src = &storeErrReader{r: rc}
		closeFn = rc.Close
	default:
		if err := skip(src, hdrLen-zipLocalLen); err != nil {
			rc.Close()
			if src.err != nil {
				return nil, src.err
			}
			return nil, formatErr(Zip, "member %q: truncated local header", m.Name)
		}
	}
	comp = io.LimitReader(src, m.CompSize)
	var plain io.Reader = comp
	var fr io.ReadCloser
	if m.Method == zipDeflate {
		fr = flate.NewReader(comp)
		plain = fr
		closeFn = func() error { fr.Close(); return rc.Close() }
	}
	z := &zipReader{r: plain, src: src, name: m.Name, left: n}
	if start == 0 && n == m.Size {
		z.crc, z.want = crc32.NewIEEE(), m.CRC32
	}
	if err := skip(plain, start); err != nil {
		closeFn()
		if src.err != nil {
			return nil, src.err
		}
		return nil, formatErr(Zip, "member %q: %v", m.Name, err)
	}
	return readCloser{Reader: z, close: closeFn}, nil
}

// zipReader streams exactly left bytes of a member, checking its CRC-32
// when it reads the whole member.
type zipReader struct {
	r    io.Reader
	src  *storeErrReader
	name string
	left int64
	crc  hash.Hash32
	want uint32
}

func (z *zipReader) Read(p []byte) (int, error) {
	if z.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > z.left {
		p = p[:z.left]
	}
	n, err := z.r.Read(p)
	z.left -= int64(n)
	if z.crc != nil {
		z.crc.Write(p[:n])
	}
	if z.left == 0 {
		if z.crc != nil && z.crc.Sum32() != z.want {
			return n, &MemberError{Name: z.name, Err: ErrChecksum}
		}
		return n, io.EOF
	}
	if err != nil {
		if z.src.err != nil {
			return n, z.src.err
		}
		return n, formatErr(Zip, "member %q: %v", z.name, unexpected(err))
	}
	return n, nil
}

package posix

// The object file format: one file holds the object's bytes from offset 0
// (so sendfile can serve it as is), then a JSON metadata trailer, then a
// fixed-size footer:
//
//	data (dataSize bytes) | JSON (metaLen bytes) | footer (24 bytes)
//
//	footer: magic "FGPOSX01" | dataSize uint64 BE | metaLen uint32 BE |
//	        CRC-32C of the JSON uint32 BE
//
// The footer is checked against the file's size, so a truncated or
// overwritten file is reported as ErrCorrupt, never served short.
// Multipart parts use the same format, with only the ETag in the JSON.

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"syscall"

	"github.com/fedgate/fedgate/federation/store"
)

// ErrCorrupt is returned (wrapped) for an object or part file whose footer
// or metadata trailer does not check out.
var ErrCorrupt = errors.New("posix: corrupt object file")

const footerSize = 24

var footerMagic = [8]byte{'F', 'G', 'P', 'O', 'S', 'X', '0', '1'}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// meta is the JSON trailer. Its names are the on-disk format: keep them.
type meta struct {
	ETag string `json:"etag"`
	store.MetaJSON
}

func metaOf(m store.Metadata) meta { return meta{MetaJSON: store.MetaJSONOf(m)} }

func (m meta) metadata() store.Metadata { return m.Metadata() }

// writeTrailer appends m's JSON and the footer at f's current offset, which
// must be the end of dataSize bytes of data.
func writeTrailer(f *os.File, dataSize int64, m *meta) error {
	js, err := json.Marshal(m)
	if err != nil {
		return err
	}
	buf := make([]byte, len(js)+footerSize)
	copy(buf, js)
	ft := buf[len(js):]
	copy(ft, footerMagic[:])
	binary.BigEndian.PutUint64(ft[8:], uint64(dataSize))
	binary.BigEndian.PutUint32(ft[16:], uint32(len(js)))
	binary.BigEndian.PutUint32(ft[20:], crc32.Checksum(js, castagnoli))
	_, err = f.Write(buf)
	return err
}

// readFooter returns the data size and the trailer's length and checksum
// from the footer of f, whose size is fileSize. ErrCorrupt when they do not
// add up.
// tailRead is how much of a file's end Stat reads in one pread: the footer
// and, for all but objects with large metadata, the whole JSON trailer.
const tailRead = 2048

// parseFooter checks the footer ft of a file of fileSize bytes.
func parseFooter(name string, ft []byte, fileSize int64) (dataSize int64, metaLen int, sum uint32, err error) {
	if [8]byte(ft[:8]) != footerMagic {
		return 0, 0, 0, fmt.Errorf("%w: %s: bad footer magic %q", ErrCorrupt, name, ft[:8])
	}
	ds := binary.BigEndian.Uint64(ft[8:])
	ml := int64(binary.BigEndian.Uint32(ft[16:]))
	if ds > uint64(fileSize) || int64(ds)+ml+footerSize != fileSize {
		return 0, 0, 0, fmt.Errorf("%w: %s: footer says %d data + %d metadata bytes, file has %d",
			ErrCorrupt, name, ds, ml, fileSize)
	}
	return int64(ds), int(ml), binary.BigEndian.Uint32(ft[20:]), nil
}

// readFooter reads and checks the footer of f.
func readFooter(f *os.File, fileSize int64) (dataSize int64, metaLen int, sum uint32, err error) {
	if fileSize < footerSize {
		return 0, 0, 0, fmt.Errorf("%w: %s: %d bytes, shorter than a footer", ErrCorrupt, f.Name(), fileSize)
	}
	var ft [footerSize]byte
	if _, err := f.ReadAt(ft[:], fileSize-footerSize); err != nil {
		return 0, 0, 0, fmt.Errorf("posix: read footer of %s: %w", f.Name(), err)
	}
	return parseFooter(f.Name(), ft[:], fileSize)
}

// readTrailer reads the footer and the JSON trailer of f, usually with one
// pread of the file's last tailRead bytes (this is on every GET's path).
func readTrailer(f *os.File, fileSize int64) (dataSize int64, m meta, err error) {
	if fileSize < footerSize {
		return 0, meta{}, fmt.Errorf("%w: %s: %d bytes, shorter than a footer", ErrCorrupt, f.Name(), fileSize)
	}
	var buf [tailRead]byte
	tail := buf[:min(int64(tailRead), fileSize)]
	if _, err := f.ReadAt(tail, fileSize-int64(len(tail))); err != nil {
		return 0, meta{}, fmt.Errorf("posix: read footer of %s: %w", f.Name(), err)
	}
	dataSize, metaLen, sum, err := parseFooter(f.Name(), tail[len(tail)-footerSize:], fileSize)
	if err != nil {
		return 0, meta{}, err
	}
	var js []byte
	if metaLen+footerSize <= len(tail) {
		js = tail[len(tail)-footerSize-metaLen : len(tail)-footerSize]
	} else {
		js = make([]byte, metaLen)
		if _, err := f.ReadAt(js, dataSize); err != nil {
			return 0, meta{}, fmt.Errorf("posix: read metadata of %s: %w", f.Name(), err)
		}
	}
	if crc32.Checksum(js, castagnoli) != sum {
		return 0, meta{}, fmt.Errorf("%w: %s: metadata checksum mismatch", ErrCorrupt, f.Name())
	}
	if err := json.Unmarshal(js, &m); err != nil {
		return 0, meta{}, fmt.Errorf("%w: %s: metadata: %v", ErrCorrupt, f.Name(), err)
	}
	return dataSize, m, nil
}

// validatorOf is inode, mtime in nanoseconds and size, in hex. Every commit
// stamps a fresh nanosecond mtime, so a rewrite changes it even when a freed
// inode number is reused.
func validatorOf(fi os.FileInfo) store.Validator {
	var ino uint64
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ino = uint64(st.Ino)
	}
	return store.Validator(fmt.Sprintf("%x-%x-%x", ino, fi.ModTime().UnixNano(), fi.Size()))
}

// readInfo returns the ObjectInfo of the open object file f.
func readInfo(f *os.File, key string) (store.ObjectInfo, error) {
	fi, err := f.Stat()
	if err != nil {
		return store.ObjectInfo{}, err
	}
	size, m, err := readTrailer(f, fi.Size())
	if err != nil {
		return store.ObjectInfo{}, err
	}
	return infoOf(key, size, m, fi), nil
}

func infoOf(key string, size int64, m meta, fi os.FileInfo) store.ObjectInfo {
	return store.ObjectInfo{
		Key:       key,
		Size:      size,
		ModTime:   fi.ModTime().UTC(),
		ETag:      m.ETag,
		Validator: validatorOf(fi),
		Metadata:  m.metadata(),
	}
}

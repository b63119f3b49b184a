package posix

// The object file format. An object's file holds its bytes and nothing
// else, from offset 0 to its end: sendfile serves it as it is, and a
// short-circuit read (docs/gpu-data-path.md) hands the file itself to a
// client, which then reads nothing but the object, however far it reads.
// The metadata (ETag, content headers, user metadata, checksums, and
// with them the ACL and tags the gateway keeps there) is a JSON record
// (record) kept with the inode, so one rename commits data and metadata
// together:
//
//   - in the extended attribute user.fedgate.posix of the file itself,
//     set before the file is fsynced and renamed into place;
//   - where the filesystem keeps no user extended attributes (NFSv3, say)
//     or the record is too large for them (ext4 keeps about 4 KiB per
//     inode), in a record file .meta/<xx>/<validator> (validatorOf: the
//     file's inode, nanosecond mtime and size, all fixed before the
//     commit), written and fsynced before the file is renamed into place.
//
// The record holds the object's size, checked against the file's, so a
// truncated or extended file is reported as ErrCorrupt, never served
// short. Files are the node's user's alone (fileMode): a client of another
// user given an object's file reads its bytes through the descriptor, not
// its extended attribute.
//
// Format 1, of builds before format 2, kept the record as a trailer in the
// data file (a client given the file could read it past the object's
// end):
//
//	data (dataSize bytes) | JSON (metaLen bytes) | footer (24 bytes)
//
//	footer: magic "FGPOSX01" | dataSize uint64 BE | metaLen uint32 BE |
//	        CRC-32C of the JSON uint32 BE
//
// Such files are still read (a file with neither an attribute nor a
// record file is taken for one), and are converted to format 2 before
// their file is handed out (OpenLocal, see migrate). Multipart parts, never
// handed out, keep format 1.

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/fedgate/fedgate/store"
)

// ErrCorrupt is returned (wrapped) for an object or part file whose
// metadata is missing or does not check out against the file.
var ErrCorrupt = errors.New("posix: corrupt object file")

// metaAttr is the extended attribute that holds a format 2 file's record.
const metaAttr = "user.fedgate.posix"

// fileMode is the mode of object and record files: the node's user alone
// reads them. A client handed an object's file (a short-circuit read) reads
// its bytes through the descriptor, but the extended attribute holding the
// metadata is checked against the file's mode and the client's own user
// (fgetxattr(2) on the descriptor is refused to any other user), and no
// other user opens the file, or a record file, by its path.
const fileMode = 0o600

// recordDir holds the record files of format 2 objects whose record is not
// in metaAttr (a name starting with '.': no key's).
const recordDir = ".meta"

const footerSize = 24

var footerMagic = [8]byte{'F', 'G', 'P', 'O', 'S', 'X', '0', '1'}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// meta is the JSON trailer of format 1. Its names are the on-disk format:
// keep them.
type meta struct {
	ETag string `json:"etag"`
	store.MetaJSON
}

func metaOf(m store.Metadata) meta { return meta{MetaJSON: store.MetaJSONOf(m)} }

func (m meta) metadata() store.Metadata { return m.Metadata() }

// record is format 2's metadata: the object's size and meta, and in a
// record file the key (bytes: JSON strings cannot carry every key), for
// whoever reads the folder. Its names are the on-disk format: keep them.
type record struct {
	Size int64  `json:"size"`
	Key  []byte `json:"key,omitempty"`
	meta
}

// form is how a file holds its metadata.
type form uint8

const (
	formAttr    form = iota // format 2, record in metaAttr
	formFile                // format 2, record in recordDir
	formTrailer             // format 1: a trailer after the data
	// formHalf: a conversion from format 1 stopped between setting
	// metaAttr and cutting the trailer off (see migrate).
	formHalf
)

// exclusive reports whether the file holds nothing but the object's bytes.
func (f form) exclusive() bool { return f == formAttr || f == formFile }

// recordPath is the record file of the object file fi: fanned out by the
// inode's low byte, named by the validator.
func recordPath(fi os.FileInfo) string {
	var ino uint64
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ino = uint64(st.Ino)
	}
	return fmt.Sprintf("%s/%02x/%s", recordDir, ino&0xff, validatorOf(fi))
}

// noAttr reports an error of setting or reading metaAttr that says the
// filesystem keeps no user extended attributes.
func noAttr(err error) bool {
	return errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EOPNOTSUPP)
}

// attrTooSmall reports an error of setting metaAttr that says the record
// does not fit in the file's extended attributes (ENOSPC: ext4's one
// block per inode is full; a full disk fails the record file too).
func attrTooSmall(err error) bool {
	return errors.Is(err, unix.E2BIG) || errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.ERANGE)
}

// getAttr reads metaAttr of f into buf, or a larger buffer when it does
// not fit; unix.ENODATA when f has none.
func getAttr(f *os.File, buf []byte) ([]byte, error) {
	for {
		n, err := unix.Fgetxattr(int(f.Fd()), metaAttr, buf)
		if errors.Is(err, unix.ERANGE) && len(buf) < 1<<20 {
			if n, err = unix.Fgetxattr(int(f.Fd()), metaAttr, nil); err == nil {
				buf = make([]byte, n+1)
			} else {
				buf = make([]byte, 4*len(buf))
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
}

// parseRecord decodes a record and checks it against the file's size.
// A format 1 file that a conversion left with its trailer is formHalf.
func parseRecord(f *os.File, fi os.FileInfo, js []byte, fm form) (record, form, error) {
	r, err := decodeRecord(js)
	if err != nil {
		return r, fm, fmt.Errorf("%w: %s: metadata record: %v", ErrCorrupt, f.Name(), err)
	}
	switch {
	case r.Size == fi.Size():
		return r, fm, nil
	case fm == formAttr && r.Size < fi.Size():
		if ds, _, _, err := readFooter(f, fi.Size()); err == nil && ds == r.Size {
			return r, formHalf, nil
		}
	}
	return r, fm, fmt.Errorf("%w: %s: the metadata says %d bytes, the file has %d", ErrCorrupt, f.Name(), r.Size, fi.Size())
}

// loadMeta reads the metadata of the open object file f (fi: its stat):
// metaAttr, else its record file, else a format 1 trailer.
func (s *Store) loadMeta(f *os.File, fi os.FileInfo) (int64, meta, form, error) {
	if !s.noAttrs.Load() {
		var buf [2048]byte
		js, err := getAttr(f, buf[:])
		switch {
		case err == nil:
			r, fm, err := parseRecord(f, fi, js, formAttr)
			return r.Size, r.meta, fm, err
		case noAttr(err):
			s.noAttrs.Store(true)
		case !errors.Is(err, unix.ENODATA):
			return 0, meta{}, 0, fmt.Errorf("posix: read metadata of %s: %w", f.Name(), err)
		}
	}
	js, err := s.root.ReadFile(recordPath(fi))
	switch {
	case err == nil:
		s.records.Store(true)
		r, fm, err := parseRecord(f, fi, js, formFile)
		return r.Size, r.meta, fm, err
	case !isNotExist(err):
		return 0, meta{}, 0, fmt.Errorf("posix: read metadata of %s: %w", f.Name(), err)
	}
	size, m, err := readTrailer(f, fi.Size())
	return size, m, formTrailer, err
}

// writeRecord records r for the staged file st (its stat final): in
// metaAttr where it fits, else in its record file, fsynced with its
// folder. It returns where.
func (st *staged) writeRecord(key string, r record) (form, error) {
	s := st.s
	js, err := json.Marshal(r)
	if err != nil {
		return 0, err
	}
	if !s.noAttrs.Load() {
		err := unix.Fsetxattr(int(st.f.Fd()), metaAttr, js, 0)
		switch {
		case err == nil:
			return formAttr, nil
		case noAttr(err):
			s.noAttrs.Store(true)
		case !attrTooSmall(err):
			return 0, fmt.Errorf("set extended attribute %s: %w", metaAttr, err)
		}
	}
	r.Key = []byte(key)
	if js, err = json.Marshal(r); err != nil {
		return 0, err
	}
	return formFile, s.writeRecordFile(recordPath(st.fi), js)
}

// writeRecordFile writes js to rel (in recordDir), fsyncing it and its
// folder (made when missing).
func (s *Store) writeRecordFile(rel string, js []byte) error {
	s.records.Store(true)
	dir := parentDir(rel)
	if err := s.mkdirs(dir); err != nil {
		return err
	}
	if err := s.writeSynced(rel, os.O_TRUNC, fileMode, js); err != nil {
		return err
	}
	return s.syncDir(dir)
}

// writeSynced creates rel (os.O_WRONLY|os.O_CREATE plus flag) with data,
// fsynced; the caller syncs its folder.
func (s *Store) writeSynced(rel string, flag int, mode os.FileMode, data []byte) error {
	f, err := s.root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|flag, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// dropRecord removes the record file of the object file fi, if it has one
// (a replaced or deleted object's). Only where the store has record
// files.
func (s *Store) dropRecord(fi os.FileInfo) {
	if fi != nil && s.records.Load() {
		s.root.Remove(recordPath(fi))
	}
}

// writeTrailer appends m's JSON and the footer at f's current offset, which
// must be the end of dataSize bytes of data (format 1: multipart parts).
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

// tailRead is how much of a format 1 file's end readTrailer reads in one
// pread: the footer and, for all but large metadata, the whole trailer.
const tailRead = 2048

// parseFooter checks the footer ft of a file of fileSize bytes.
func parseFooter(name string, ft []byte, fileSize int64) (dataSize int64, metaLen int, sum uint32, err error) {
	if [8]byte(ft[:8]) != footerMagic {
		return 0, 0, 0, fmt.Errorf("%w: %s: no metadata (bad footer magic %q)", ErrCorrupt, name, ft[:8])
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
		return 0, 0, 0, fmt.Errorf("%w: %s: no metadata (%d bytes, shorter than a footer)", ErrCorrupt, f.Name(), fileSize)
	}
	var ft [footerSize]byte
	if _, err := f.ReadAt(ft[:], fileSize-footerSize); err != nil {
		return 0, 0, 0, fmt.Errorf("posix: read footer of %s: %w", f.Name(), err)
	}
	return parseFooter(f.Name(), ft[:], fileSize)
}

// readTrailer reads the footer and the JSON trailer of the format 1 file
// f, usually with one pread of the file's last tailRead bytes.
func readTrailer(f *os.File, fileSize int64) (dataSize int64, m meta, err error) {
	if fileSize < footerSize {
		return 0, meta{}, fmt.Errorf("%w: %s: no metadata (%d bytes, shorter than a footer)", ErrCorrupt, f.Name(), fileSize)
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
	return makeValidator(ino, fi.ModTime().UnixNano(), fi.Size())
}

// makeValidator formats a validator as fmt's "%x-%x-%x" would, without fmt.
func makeValidator(ino uint64, mtimeNs, size int64) store.Validator {
	b := make([]byte, 0, 48)
	b = strconv.AppendUint(b, ino, 16)
	b = append(b, '-')
	b = strconv.AppendInt(b, mtimeNs, 16)
	b = append(b, '-')
	b = strconv.AppendInt(b, size, 16)
	return store.Validator(b)
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

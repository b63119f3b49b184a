package fs

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"os"
	"path"

	"golang.org/x/sys/unix"

	"github.com/fedgate/fedgate/store"
)

// metaAttr is the extended attribute that holds a file's metadata.
const metaAttr = "user.fedgate"

// meta is the JSON in metaAttr. Its names are the on-disk format: keep
// them. ETag and Checksums describe the bytes written with them: they count
// only while the file's inode, size and mtime are the ones recorded (ctime
// is not recorded: the rename that commits a write changes it). The rest
// is the file's, like its name: it stays when the bytes change.
type meta struct {
	ETag  string `json:"etag,omitempty"`
	Ino   uint64 `json:"ino,omitempty"`
	Size  int64  `json:"size,omitempty"`
	Mtime int64  `json:"mtime_ns,omitempty"`
	store.MetaJSON
}

func metaOf(m store.Metadata) meta { return meta{MetaJSON: store.MetaJSONOf(m)} }

// bound reports whether m's ETag and checksums describe fi's bytes.
func (m meta) bound(fi os.FileInfo) bool {
	id := idOf(fi)
	return m.ETag != "" && m.Ino == id.ino && m.Size == id.size && m.Mtime == id.mtime
}

// etag is the MD5 ETag recorded for fi's bytes or, without one, an ETag
// made from the Validator that is not 32 hex digits, so that no client
// takes it for an MD5.
func (m meta) etag(fi os.FileInfo) string {
	if m.bound(fi) {
		return m.ETag
	}
	sum := sha256.Sum256([]byte(validatorOf(fi)))
	return hex.EncodeToString(sum[:12]) + "-fs"
}

// metadata is what Stat reports: the file's own fields, its checksums
// while they are bound, and a Content-Type from the name's extension when
// none was recorded.
func (m meta) metadata(key string, fi os.FileInfo) store.Metadata {
	md := m.stored()
	if !m.bound(fi) {
		md.Checksums = nil
	}
	if md.ContentType == "" {
		md.ContentType = mime.TypeByExtension(path.Ext(key))
	}
	return md
}

// stored is the metadata recorded, checksums included.
func (m meta) stored() store.Metadata { return m.Metadata() }

// onlyDerived reports whether m holds nothing a filesystem without
// extended attributes loses: a Content-Type is given back from the name's
// extension, and checksums were checked on the way in.
func onlyDerived(m store.Metadata) bool {
	return len(m.User) == 0 && m.CacheControl == "" && m.ContentDisposition == "" &&
		m.ContentEncoding == "" && m.ContentLanguage == "" && m.Expires == ""
}

// readMeta reads f's metadata attribute; a file without one (or a
// filesystem without extended attributes, or an attribute that does not
// parse) has none.
func readMeta(f *os.File) meta {
	var m meta
	buf := make([]byte, 4096)
	for {
		n, err := unix.Fgetxattr(int(f.Fd()), metaAttr, buf)
		if errors.Is(err, unix.ERANGE) && len(buf) < 1<<16 {
			buf = make([]byte, 4*len(buf))
			continue
		}
		if err != nil || json.Unmarshal(buf[:n], &m) != nil {
			return meta{}
		}
		return m
	}
}

// bind ties m's ETag and checksums to fi's inode, size and mtime.
func (m *meta) bind(fi os.FileInfo) {
	id := idOf(fi)
	m.Ino, m.Size, m.Mtime = id.ino, id.size, id.mtime
}

// writeMeta records m on f.
func writeMeta(f *os.File, m meta) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := unix.Fsetxattr(int(f.Fd()), metaAttr, b, 0); err != nil {
		if errors.Is(err, unix.E2BIG) || errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.ERANGE) {
			return fmt.Errorf("the object's metadata (%d bytes) does not fit in this filesystem's extended attributes: %w", len(b), store.ErrMetadataNotSupported)
		}
		return fmt.Errorf("set extended attribute %s: %w", metaAttr, err)
	}
	return nil
}

// probeXattrs reports whether the tree's filesystem keeps user extended
// attributes, with a temporary file in the root (a failure to create one
// is an error: the tree is not writable).
func (s *Store) probeXattrs() (bool, error) {
	name := tmpPrefix + "probe-" + store.RandomID()
	f, err := s.root.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return false, err
	}
	defer s.root.Remove(name)
	defer f.Close()
	err = unix.Fsetxattr(int(f.Fd()), metaAttr, []byte("{}"), 0)
	return err == nil, nil
}

package posix

// Multipart uploads live in .multipart/<uploadID>/ inside the root:
// upload.json (the key and the metadata given to CreateMultipart) and one
// file per part, named by its number, in format 1 (data, then a trailer
// holding the part's MD5; see format.go). Everything is on the store's own disk, so
// a restarted process, or another node on the same NAS, sees the upload.

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/fedgate/fedgate/store"
)

const maxPartNumber = 10000

type upload struct {
	Key  []byte `json:"key"` // bytes: JSON strings cannot carry every key
	Meta meta   `json:"meta"`
}

func uploadDir(id string) string { return multipartDir + "/" + id }

func partPath(id string, n int) string { return uploadDir(id) + "/" + strconv.Itoa(n) }

// CreateMultipart starts an upload for key. opts.Metadata is kept for the
// completed object; opts' conditions are checked at completion only.
// ErrInvalidKey for a key no store holds.
func (s *Store) CreateMultipart(ctx context.Context, key string, opts store.PutOptions) (string, error) {
	if _, err := objectPath(key); err != nil {
		return "", fmt.Errorf("posix: create multipart %q: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	js, err := json.Marshal(upload{Key: []byte(key), Meta: metaOf(opts.Metadata)})
	if err != nil {
		return "", err
	}
	id := store.RandomID()
	dir := uploadDir(id)
	err = s.root.Mkdir(dir, 0o755)
	if errors.Is(err, fs.ErrNotExist) { // emptied under the node: see newStaged
		if err = s.root.Mkdir(multipartDir, 0o755); err == nil || errors.Is(err, fs.ErrExist) {
			err = s.root.Mkdir(dir, 0o755)
		}
	}
	if err != nil {
		return "", mapErr("create multipart", key, err)
	}
	err = func() error {
		err := s.writeSynced(dir+"/upload.json", os.O_EXCL, 0o644, js)
		if err == nil {
			err = s.syncDir(dir)
		}
		if err == nil {
			err = s.syncDir(multipartDir)
		}
		return err
	}()
	if err != nil {
		s.root.RemoveAll(dir)
		return "", mapErr("create multipart", key, err)
	}
	return id, nil
}

// loadUpload returns the upload's record. ErrNoSuchUpload when id is not an
// upload of key.
func (s *Store) loadUpload(key, id string) (upload, error) {
	var u upload
	if !store.ValidRandomID(id) {
		return u, fmt.Errorf("posix: upload %q: %w", id, store.ErrNoSuchUpload)
	}
	js, err := s.root.ReadFile(uploadDir(id) + "/upload.json")
	if isNotExist(err) {
		return u, fmt.Errorf("posix: upload %s: %w", id, store.ErrNoSuchUpload)
	}
	if err != nil {
		return u, mapErr("upload "+id, key, err)
	}
	if err := json.Unmarshal(js, &u); err != nil {
		return u, fmt.Errorf("posix: upload %s: %w: %v", id, ErrCorrupt, err)
	}
	if string(u.Key) != key {
		return u, fmt.Errorf("posix: upload %s is not for key %q: %w", id, key, store.ErrNoSuchUpload)
	}
	return u, nil
}

// UploadPart stores part number (1..10000) of the upload, replacing an
// earlier one with that number. ErrNoSuchUpload for an unknown upload;
// ErrInvalidPart (wrapped) for a number out of range; a body read error is
// returned wrapped and stores nothing.
func (s *Store) UploadPart(ctx context.Context, key, uploadID string, number int, body io.Reader, size int64) (store.PartInfo, error) {
	if number < 1 || number > maxPartNumber {
		return store.PartInfo{}, fmt.Errorf("posix: part number %d not in 1..%d: %w", number, maxPartNumber, store.ErrInvalidPart)
	}
	if _, err := s.loadUpload(key, uploadID); err != nil {
		return store.PartInfo{}, err
	}
	st, err := s.newStaged()
	if err != nil {
		return store.PartInfo{}, mapErr("upload part", key, err)
	}
	defer st.discard()
	if err := st.copyBody(ctx, body, size); err != nil {
		return store.PartInfo{}, fmt.Errorf("posix: upload part %d of %q: %w", number, key, err)
	}
	if err := st.finishPart(&meta{ETag: st.etag}); err != nil {
		return store.PartInfo{}, mapErr("upload part", key, err)
	}
	if err := s.root.Rename(st.rel, partPath(uploadID, number)); err != nil {
		if isNotExist(err) { // aborted or completed meanwhile
			return store.PartInfo{}, fmt.Errorf("posix: upload %s: %w", uploadID, store.ErrNoSuchUpload)
		}
		return store.PartInfo{}, mapErr("upload part", key, err)
	}
	st.moved = true
	if err := s.syncDir(uploadDir(uploadID)); err != nil {
		return store.PartInfo{}, mapErr("upload part", key, err)
	}
	return store.PartInfo{Number: number, Size: st.size, ETag: st.etag, ModTime: st.fi.ModTime().UTC()}, nil
}

// CompleteMultipart joins the listed parts, in the order given, into key:
// each part is copied in the kernel (copy_file_range) into a staging file,
// which is committed like a Put; the upload is then removed. The object's
// metadata is the one given to CreateMultipart, with the fields opts sets
// overriding it. ErrNoSuchUpload for an unknown upload; ErrInvalidPart when
// parts is empty or a part is missing or its ETag differs;
// ErrPreconditionFailed per opts.
func (s *Store) CompleteMultipart(ctx context.Context, key, uploadID string, parts []store.PartInfo, opts store.PutOptions) (store.ObjectInfo, error) {
	rel, err := objectPath(key)
	if err != nil {
		return store.ObjectInfo{}, fmt.Errorf("posix: complete multipart %q: %w", key, err)
	}
	u, err := s.loadUpload(key, uploadID)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	if len(parts) == 0 {
		return store.ObjectInfo{}, fmt.Errorf("posix: complete multipart %q: no parts: %w", key, store.ErrInvalidPart)
	}
	st, err := s.newStaged()
	if err != nil {
		return store.ObjectInfo{}, mapErr("complete multipart", key, err)
	}
	defer st.discard()
	sums := md5.New()
	for _, p := range parts {
		if err := ctx.Err(); err != nil {
			return store.ObjectInfo{}, err
		}
		n, sum, err := s.appendPart(st.f, uploadID, p)
		if err != nil {
			return store.ObjectInfo{}, fmt.Errorf("posix: complete multipart %q: %w", key, err)
		}
		st.size += n
		sums.Write(sum)
	}
	m := metaOf(u.Meta.metadata().Override(opts.Metadata))
	m.ETag = fmt.Sprintf("%x-%d", sums.Sum(nil), len(parts))
	if opts.LateChecksums != nil {
		m.Checksums = store.MergeMaps(m.Checksums, opts.LateChecksums())
	}
	if err := st.finish(key, &m); err != nil {
		return store.ObjectInfo{}, mapErr("complete multipart", key, err)
	}
	if err := s.commit(ctx, key, rel, st, opts); err != nil {
		return store.ObjectInfo{}, err
	}
	if err := s.root.RemoveAll(uploadDir(uploadID)); err != nil {
		return store.ObjectInfo{}, mapErr("complete multipart", key, err)
	}
	return infoOf(key, st.size, m, st.fi), nil
}

// appendPart copies part p's bytes to the end of dst and returns their
// length and binary MD5. ErrInvalidPart when it is missing or its ETag
// differs.
func (s *Store) appendPart(dst *os.File, uploadID string, p store.PartInfo) (int64, []byte, error) {
	if p.Number < 1 || p.Number > maxPartNumber {
		return 0, nil, fmt.Errorf("part %d: %w", p.Number, store.ErrInvalidPart)
	}
	f, err := s.root.Open(partPath(uploadID, p.Number))
	if isNotExist(err) {
		return 0, nil, fmt.Errorf("part %d was not uploaded: %w", p.Number, store.ErrInvalidPart)
	}
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, nil, err
	}
	size, m, err := readTrailer(f, fi.Size())
	if err != nil {
		return 0, nil, err
	}
	if want := strings.Trim(p.ETag, `"`); m.ETag != want {
		return 0, nil, fmt.Errorf("part %d has ETag %s, not %s: %w", p.Number, m.ETag, want, store.ErrInvalidPart)
	}
	sum, err := hex.DecodeString(m.ETag)
	if err != nil {
		return 0, nil, fmt.Errorf("part %d: %w: ETag %q", p.Number, ErrCorrupt, m.ETag)
	}
	// *os.File to *os.File through io.LimitedReader: copy_file_range.
	if n, err := io.CopyN(dst, f, size); err != nil {
		return 0, nil, fmt.Errorf("part %d: copied %d of %d bytes: %w", p.Number, n, size, err)
	}
	return size, sum, nil
}

// AbortMultipart removes the upload and its parts. Idempotent: an unknown
// upload is not an error. ErrNoSuchUpload when the upload belongs to
// another key.
func (s *Store) AbortMultipart(ctx context.Context, key, uploadID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !store.ValidRandomID(uploadID) {
		return nil
	}
	js, err := s.root.ReadFile(uploadDir(uploadID) + "/upload.json")
	switch {
	case err == nil:
		var u upload
		if json.Unmarshal(js, &u) == nil && string(u.Key) != key {
			return fmt.Errorf("posix: upload %s is not for key %q: %w", uploadID, key, store.ErrNoSuchUpload)
		}
	case !isNotExist(err):
		return mapErr("abort multipart", key, err)
	}
	if err := s.root.RemoveAll(uploadDir(uploadID)); err != nil && !isNotExist(err) {
		return mapErr("abort multipart", key, err)
	}
	return nil
}

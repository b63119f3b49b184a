package fs

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"strconv"

	"github.com/fedgate/fedgate/store"
)

// Multipart uploads keep their parts in a hidden folder at the root,
// <root>/.fedgate-tmp-uploads/<upload id>/ (never listed, and no key can
// name it): upload.json (the key and its metadata), and per part its bytes
// (<n>) and record (<n>.json). The completion copies the parts into a
// temporary file beside the key (copy_file_range where the filesystem has
// it) and renames it into place like a Put.
const uploadsDir = tmpPrefix + "uploads"

const maxPartNumber = 10000

type upload struct {
	Key  string `json:"key"`
	Meta meta   `json:"meta"`
}

type partRecord struct {
	ETag string `json:"etag"`
	Size int64  `json:"size"`
}

func uploadPath(id string) string { return uploadsDir + "/" + id }

// writeFile writes b to rel through a temporary name and a rename, fsynced.
func (s *Store) writeFile(rel string, b []byte) error {
	tmp := rel + ".tmp-" + store.RandomID()
	f, err := s.root.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.root.Rename(tmp, rel)
	}
	if err != nil {
		s.root.Remove(tmp)
	}
	return err
}

// CreateMultipart starts an upload of key; opts.Metadata is kept for the
// completed object, opts' conditions are checked at completion.
func (s *Store) CreateMultipart(ctx context.Context, key string, opts store.PutOptions) (string, error) {
	if s.opts.ReadOnly {
		return "", fmt.Errorf("fs: create multipart %q: %w", key, store.ErrReadOnly)
	}
	if _, err := keyPath(key); err != nil {
		return "", fmt.Errorf("fs: create multipart: %w", err)
	}
	if !s.xattrs && !onlyDerived(opts.Metadata) {
		return "", fmt.Errorf("fs: create multipart %q: the filesystem under %s has no extended attributes to keep user metadata and content headers in: %w", key, s.dir, store.ErrMetadataNotSupported)
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	js, err := json.Marshal(upload{Key: key, Meta: metaOf(opts.Metadata)})
	if err != nil {
		return "", err
	}
	id := store.RandomID()
	if err := s.root.MkdirAll(uploadPath(id), 0o755); err != nil {
		return "", mapErr("create multipart", key, err)
	}
	if err := s.writeFile(uploadPath(id)+"/upload.json", js); err != nil {
		s.root.RemoveAll(uploadPath(id))
		return "", mapErr("create multipart", key, err)
	}
	return id, nil
}

// loadUpload returns the upload's record; ErrNoSuchUpload when id is not
// an upload of key.
func (s *Store) loadUpload(key, id string) (upload, error) {
	var u upload
	if !store.ValidRandomID(id) {
		return u, fmt.Errorf("fs: upload %q: %w", id, store.ErrNoSuchUpload)
	}
	js, err := s.root.ReadFile(uploadPath(id) + "/upload.json")
	if errors.Is(err, iofs.ErrNotExist) {
		return u, fmt.Errorf("fs: upload %s: %w", id, store.ErrNoSuchUpload)
	}
	if err != nil {
		return u, mapErr("upload "+id, key, err)
	}
	if err := json.Unmarshal(js, &u); err != nil {
		return u, fmt.Errorf("fs: upload %s: damaged record: %v", id, err)
	}
	if u.Key != key {
		return u, fmt.Errorf("fs: upload %s is not for key %q: %w", id, key, store.ErrNoSuchUpload)
	}
	return u, nil
}

// UploadPart stores part number of the upload, replacing one with that
// number.
func (s *Store) UploadPart(ctx context.Context, key, uploadID string, number int, body io.Reader, size int64) (store.PartInfo, error) {
	if s.opts.ReadOnly {
		return store.PartInfo{}, fmt.Errorf("fs: upload part %q: %w", key, store.ErrReadOnly)
	}
	if number < 1 || number > maxPartNumber {
		return store.PartInfo{}, fmt.Errorf("fs: part number %d not in 1..%d: %w", number, maxPartNumber, store.ErrInvalidPart)
	}
	if _, err := s.loadUpload(key, uploadID); err != nil {
		return store.PartInfo{}, err
	}
	dir := uploadPath(uploadID)
	rel := dir + "/" + strconv.Itoa(number)
	tmp := rel + ".tmp-" + store.RandomID()
	f, err := s.root.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return store.PartInfo{}, mapErr("upload part", key, err)
	}
	t := &temp{s: s, rel: tmp, f: f}
	defer t.discard()
	etag, err := t.copyBody(ctx, body, size)
	if err != nil {
		return store.PartInfo{}, fmt.Errorf("fs: upload part %d of %q: %w", number, key, err)
	}
	if err := f.Sync(); err != nil {
		return store.PartInfo{}, mapErr("upload part", key, err)
	}
	fi, err := f.Stat()
	if err != nil {
		return store.PartInfo{}, mapErr("upload part", key, err)
	}
	js, _ := json.Marshal(partRecord{ETag: etag, Size: fi.Size()})
	// The record first, then the bytes: a completion that reads a record
	// and finds other bytes (a re-upload racing it) sees their size or
	// their checked ETag differ.
	if err := s.writeFile(rel+".json", js); err != nil {
		return store.PartInfo{}, mapErr("upload part", key, err)
	}
	if err := s.root.Rename(t.rel, rel); err != nil {
		return store.PartInfo{}, mapErr("upload part", key, err)
	}
	t.f.Close()
	t.f = nil
	return store.PartInfo{Number: number, Size: fi.Size(), ETag: etag, ModTime: fi.ModTime()}, nil
}

// CompleteMultipart joins the parts, in the order given, into key.
func (s *Store) CompleteMultipart(ctx context.Context, key, uploadID string, parts []store.PartInfo, opts store.PutOptions) (store.ObjectInfo, error) {
	if s.opts.ReadOnly {
		return store.ObjectInfo{}, fmt.Errorf("fs: complete multipart %q: %w", key, store.ErrReadOnly)
	}
	u, err := s.loadUpload(key, uploadID)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	rel, err := keyPath(key)
	if err != nil {
		return store.ObjectInfo{}, fmt.Errorf("fs: complete multipart: %w", err)
	}
	if err := s.adoptLegacy(key); err != nil {
		return store.ObjectInfo{}, err
	}
	t, err := s.newTemp(key, rel)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	defer t.discard()
	sums := md5.New()
	for _, p := range parts {
		if err := ctx.Err(); err != nil {
			return store.ObjectInfo{}, err
		}
		sum, err := s.appendPart(t.f, uploadID, p)
		if err != nil {
			return store.ObjectInfo{}, fmt.Errorf("fs: complete multipart %q: %w", key, err)
		}
		sums.Write(sum)
	}
	m := metaOf(u.Meta.stored().Override(opts.Metadata))
	m.ETag = hex.EncodeToString(sums.Sum(nil)) + "-" + strconv.Itoa(len(parts))
	info, err := s.commit(ctx, key, rel, t, m, opts)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	s.root.RemoveAll(uploadPath(uploadID))
	return info, nil
}

// appendPart copies part p's bytes to dst after checking its ETag; it
// returns the part's binary MD5.
func (s *Store) appendPart(dst *os.File, uploadID string, p store.PartInfo) ([]byte, error) {
	rel := uploadPath(uploadID) + "/" + strconv.Itoa(p.Number)
	js, err := s.root.ReadFile(rel + ".json")
	if errors.Is(err, iofs.ErrNotExist) {
		return nil, fmt.Errorf("part %d was not uploaded: %w", p.Number, store.ErrInvalidPart)
	}
	if err != nil {
		return nil, err
	}
	var rec partRecord
	if err := json.Unmarshal(js, &rec); err != nil {
		return nil, fmt.Errorf("part %d: damaged record: %v", p.Number, err)
	}
	if rec.ETag != p.ETag {
		return nil, fmt.Errorf("part %d has ETag %s, not %s: %w", p.Number, rec.ETag, p.ETag, store.ErrInvalidPart)
	}
	src, err := s.root.Open(rel)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	n, err := io.Copy(dst, src)
	if err != nil {
		return nil, err
	}
	if n != rec.Size {
		return nil, fmt.Errorf("part %d is %d bytes, its record says %d (uploaded again meanwhile?): %w", p.Number, n, rec.Size, store.ErrInvalidPart)
	}
	return hex.DecodeString(rec.ETag)
}

// AbortMultipart removes the upload's parts; an unknown upload is not an
// error.
func (s *Store) AbortMultipart(ctx context.Context, key, uploadID string) error {
	if s.opts.ReadOnly {
		return fmt.Errorf("fs: abort multipart %q: %w", key, store.ErrReadOnly)
	}
	if !store.ValidRandomID(uploadID) {
		return nil // no upload has that id
	}
	if _, err := s.loadUpload(key, uploadID); err != nil {
		if _, serr := s.root.Stat(uploadPath(uploadID)); errors.Is(serr, iofs.ErrNotExist) {
			return nil
		}
		return err
	}
	return s.root.RemoveAll(uploadPath(uploadID))
}

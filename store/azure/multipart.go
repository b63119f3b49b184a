package azure

// Multipart uploads are block lists. CreateMultipart writes an empty
// manifest blob, .fedgate/uploads/<uploadID>, whose properties and metadata
// are the object's (see meta.go) plus fedgate_key, the SHA-256 of the key
// the upload belongs to. UploadPart stages the part as blocks of the target
// blob (IDs in blockid.go: the last block of a part carries its MD5).
// CompleteMultipart reads the blob's uncommitted block list, picks for each
// listed part the latest fully staged attempt, checks its MD5 against the
// part's ETag, and commits those blocks with one Put Block List; it then
// deletes the manifest. AbortMultipart deletes the manifest, so the upload
// id is unknown from then on (ErrNoSuchUpload); Azure cannot delete
// uncommitted blocks, which it garbage-collects after 7 days (or drops at
// the next commit of the blob). All of an upload's state is in the
// container, so upload IDs survive a gateway restart and work on any node.

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"

	"github.com/fedgate/fedgate/store"
)

const (
	uploadsPrefix    = reservedPrefix + "uploads/"
	maxPartNumber    = 10_000
	partBlocks       = 5        // blocks per part of known size, up to maxPartBlock
	maxPartBlockSize = 64 << 20 // largest block of a part
)

// errOtherKey: an upload ID used with a key it was not created for.
var errOtherKey = errors.New("upload is for another key")

func manifestName(id string) string { return uploadsPrefix + id }

func keyHash(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:])
}

// parseUploadID decodes an upload ID: 32 lower-case hex digits.
func parseUploadID(id string) ([16]byte, bool) {
	var raw [16]byte
	if len(id) != 32 || strings.ToLower(id) != id {
		return raw, false
	}
	if _, err := hex.Decode(raw[:], []byte(id)); err != nil {
		return raw, false
	}
	return raw, true
}

// CreateMultipart starts an upload for key and returns its ID. opts'
// metadata is kept for the object; its conditions are checked at
// completion. ErrInvalidKey for a key the store does not hold.
func (s *Store) CreateMultipart(ctx context.Context, key string, opts store.PutOptions) (string, error) {
	if err := checkKey("create multipart", key); err != nil {
		return "", err
	}
	raw := randomID()
	id := hex.EncodeToString(raw[:])
	meta, headers := encodeMeta(opts.Metadata, "", map[string]string{metaKeyHash: keyHash(key)})
	_, err := s.cont.NewBlockBlobClient(manifestName(id)).Upload(ctx, streaming.NopCloser(bytes.NewReader(nil)),
		&blockblob.UploadOptions{Metadata: meta, HTTPHeaders: headers, AccessConditions: &blob.AccessConditions{
			ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfNoneMatch: to.Ptr(azcore.ETagAny)}}})
	if err != nil {
		return "", s.mapErr("create multipart", key, err)
	}
	return id, nil
}

// manifest returns the metadata kept for upload id of key, and the
// manifest's version id ("" without versioning). ErrNoSuchUpload when
// there is no such upload for key.
func (s *Store) manifest(ctx context.Context, op, key, id string) (store.Metadata, string, error) {
	if _, ok := parseUploadID(id); !ok {
		return store.Metadata{}, "", fmt.Errorf("azure: %s %q: upload %.40q: %w", op, key, id, store.ErrNoSuchUpload)
	}
	resp, err := s.cont.NewBlobClient(manifestName(id)).GetProperties(ctx, nil)
	if errors.Is(kindOf(err), store.ErrNotFound) {
		return store.Metadata{}, "", fmt.Errorf("azure: %s %q: upload %s: %w", op, key, id, store.ErrNoSuchUpload)
	}
	if err != nil {
		return store.Metadata{}, "", s.mapErr(op, key, err)
	}
	md, reserved := decodeMeta(propsOf(resp).props)
	if reserved[metaKeyHash] != keyHash(key) {
		return store.Metadata{}, "", fmt.Errorf("azure: %s %q: upload %s: %w: %w", op, key, id, errOtherKey, store.ErrNoSuchUpload)
	}
	version := ""
	if resp.VersionID != nil {
		version = *resp.VersionID
	}
	return md, version, nil
}

// removeManifest deletes upload id's manifest and, in an account with
// versioning, the version its delete leaves (a manifest is written once,
// so it has one). It reports the blob delete's error.
func (s *Store) removeManifest(ctx context.Context, id, version string) error {
	_, err := s.cont.NewBlobClient(manifestName(id)).Delete(ctx, nil)
	if version != "" && (err == nil || errors.Is(kindOf(err), store.ErrNotFound)) {
		if vc, verr := s.cont.NewBlobClient(manifestName(id)).WithVersionID(version); verr == nil {
			_, _ = vc.Delete(ctx, nil)
		}
	}
	return err
}

// partBlockSize: parts of known size are cut into at most partBlocks
// blocks of at most maxPartBlockSize (and at least BlockSize), so 10,000
// parts of up to 320 MiB fit in a blob's 50,000 blocks.
func (s *Store) partBlockSize(size int64) int64 {
	if size < 0 {
		return s.blockSize
	}
	return max(s.blockSize, min((size+partBlocks-1)/partBlocks, maxPartBlockSize))
}

// UploadPart stages part number (1..10000) of the upload as blocks of key;
// a later upload of the same number supersedes it. The body is read to
// io.EOF first: a body read error, a short body (io.ErrUnexpectedEOF) or
// ctx's error leave the earlier part of that number in place.
// ErrNoSuchUpload for an unknown upload or one of another key;
// ErrInvalidPart (wrapped) for a number out of range.
func (s *Store) UploadPart(ctx context.Context, key, uploadID string, number int, body io.Reader, size int64) (store.PartInfo, error) {
	if err := checkKey("upload part", key); err != nil {
		return store.PartInfo{}, err
	}
	if number < 1 || number > maxPartNumber {
		return store.PartInfo{}, fmt.Errorf("azure: upload part %q: part number %d not in 1..%d: %w", key, number, maxPartNumber, store.ErrInvalidPart)
	}
	if _, _, err := s.manifest(ctx, "upload part", key, uploadID); err != nil {
		return store.PartInfo{}, err
	}
	raw, _ := parseUploadID(uploadID)
	bb := s.cont.NewBlockBlobClient(key)
	src := newSource(ctx, body, size)
	bs := s.partBlockSize(size)
	if size >= 0 {
		bs = min(bs, size+1)
	}
	first := make([]byte, max(bs, 1))
	n, eof, err := src.fill(first)
	if err != nil {
		return store.PartInfo{}, fmt.Errorf("azure: upload part %d of %q: reading body: %w", number, key, err)
	}
	attempt := newAttempt(s.now())
	name := func(idx int, final bool) string {
		b := blockID{kind: kindPartBlock, id: raw, part: uint16(number), attempt: attempt, index: uint32(idx)}
		if final {
			b.kind = kindPartFinal
			copy(b.md5[:], src.sum())
		}
		return b.String()
	}
	if eof && n == 0 {
		// An empty part has no block; a one-byte marker block, never
		// committed, records it.
		b := blockID{kind: kindEmptyPart, id: raw, part: uint16(number), attempt: attempt}
		copy(b.md5[:], src.sum())
		if _, err := bb.StageBlock(ctx, b.String(), streaming.NopCloser(bytes.NewReader([]byte{0})), nil); err != nil {
			return store.PartInfo{}, s.mapErr("upload part", key, err)
		}
	} else if _, err := s.stageAll(ctx, bb, src, first[:n], eof, func(int) int64 { return s.partBlockSize(size) }, name); err != nil {
		return store.PartInfo{}, fmt.Errorf("azure: upload part %d of %q: %w", number, key, err)
	}
	return store.PartInfo{Number: number, Size: src.n, ETag: hex.EncodeToString(src.sum()), ModTime: s.now().UTC()}, nil
}

// stagedPart is one attempt at a part, from the uncommitted block list.
type stagedPart struct {
	attempt uint64
	names   map[uint32]string
	sizes   map[uint32]int64
	final   int64 // index of the last block; -1 until seen; -2 for an empty part
	md5     [16]byte
}

// stagedParts returns, by part number, every fully staged attempt of a
// part of upload raw found among key's uncommitted blocks.
func (s *Store) stagedParts(ctx context.Context, bb *blockblob.Client, raw [16]byte) (map[int][]*stagedPart, error) {
	resp, err := bb.GetBlockList(ctx, blockblob.BlockListTypeUncommitted, nil)
	if err != nil && !errors.Is(kindOf(err), store.ErrNotFound) {
		return nil, err
	}
	attempts := map[[2]uint64]*stagedPart{}
	for _, b := range resp.UncommittedBlocks {
		if b == nil || b.Name == nil {
			continue
		}
		id, ok := parseBlockID(*b.Name)
		if !ok || id.id != raw || id.kind == kindPut {
			continue
		}
		k := [2]uint64{uint64(id.part), id.attempt}
		a := attempts[k]
		if a == nil {
			a = &stagedPart{attempt: id.attempt, names: map[uint32]string{}, sizes: map[uint32]int64{}, final: -1}
			attempts[k] = a
		}
		switch id.kind {
		case kindEmptyPart:
			a.final, a.md5 = -2, id.md5
			continue
		case kindPartFinal:
			a.final, a.md5 = int64(id.index), id.md5
		}
		a.names[id.index] = *b.Name
		if b.Size != nil {
			a.sizes[id.index] = *b.Size
		}
	}
	parts := map[int][]*stagedPart{}
	for k, a := range attempts {
		if a.final == -1 || int64(len(a.names)) < a.final+1 {
			continue // still being staged, or failed
		}
		parts[int(k[0])] = append(parts[int(k[0])], a)
	}
	return parts, nil
}

// pick returns the attempt at a part that a completion naming etag uses:
// of the attempts begun in the latest millisecond (normally one: the last
// upload of the part), the latest whose MD5 is etag; nil if none is.
func pick(attempts []*stagedPart, etag string) *stagedPart {
	var latest uint64
	for _, a := range attempts {
		latest = max(latest, a.attempt>>16)
	}
	var best *stagedPart
	for _, a := range attempts {
		if a.attempt>>16 == latest && hex.EncodeToString(a.md5[:]) == etag && (best == nil || a.attempt > best.attempt) {
			best = a
		}
	}
	return best
}

// CompleteMultipart commits the listed parts, in the order given, as key's
// block list: no byte is copied. The ETag is "<md5 of the part MD5s>-N".
// ErrNoSuchUpload for an unknown upload or one of another key;
// ErrInvalidPart when parts is empty, a part was not uploaded (or was
// discarded by another commit of key), its ETag is not that of its latest
// upload, a number repeats, or the object would exceed 50,000 blocks;
// ErrPreconditionFailed per opts. After a failure the upload stays usable.
func (s *Store) CompleteMultipart(ctx context.Context, key, uploadID string, parts []store.PartInfo, opts store.PutOptions) (store.ObjectInfo, error) {
	const op = "complete multipart"
	if err := checkKey(op, key); err != nil {
		return store.ObjectInfo{}, err
	}
	md, manifestVersion, err := s.manifest(ctx, op, key, uploadID)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("azure: %s %q: %s: %w", op, key, fmt.Sprintf(format, args...), store.ErrInvalidPart)
	}
	if len(parts) == 0 {
		return store.ObjectInfo{}, invalid("no parts")
	}
	raw, _ := parseUploadID(uploadID)
	bb := s.cont.NewBlockBlobClient(key)
	staged, err := s.stagedParts(ctx, bb, raw)
	if err != nil {
		return store.ObjectInfo{}, s.mapErr(op, key, err)
	}
	var ids []string
	var size int64
	sums := md5.New()
	seen := map[int]bool{}
	for _, p := range parts {
		a := pick(staged[p.Number], strings.Trim(p.ETag, `"`))
		switch {
		case seen[p.Number]:
			return store.ObjectInfo{}, invalid("part %d listed twice", p.Number)
		case len(staged[p.Number]) == 0:
			return store.ObjectInfo{}, invalid("part %d was not uploaded (or a write or delete of the key dropped it)", p.Number)
		case a == nil:
			return store.ObjectInfo{}, invalid("part %d: its last upload has another ETag than %s", p.Number, p.ETag)
		}
		seen[p.Number] = true
		for i := int64(0); i <= a.final; i++ {
			ids = append(ids, a.names[uint32(i)])
			size += a.sizes[uint32(i)]
		}
		sums.Write(a.md5[:])
	}
	if len(ids) > maxBlocks {
		return store.ObjectInfo{}, invalid("%d blocks, more than Azure's %d", len(ids), maxBlocks)
	}
	etag := fmt.Sprintf("%x-%d", sums.Sum(nil), len(parts))
	md = md.Override(opts.Metadata)
	if opts.LateChecksums != nil {
		md.Checksums = store.MergeMaps(md.Checksums, opts.LateChecksums())
	}
	meta, headers := encodeMeta(md, etag, nil)
	resp, err := bb.CommitBlockList(ctx, ids, &blockblob.CommitBlockListOptions{
		Metadata: meta, HTTPHeaders: headers, AccessConditions: writeConditions(opts),
	})
	if err != nil {
		return store.ObjectInfo{}, s.writeErr(ctx, op, key, err, opts)
	}
	// The object is committed; a manifest left behind by a failed delete
	// only keeps the upload ID known (its blocks are gone).
	_ = s.removeManifest(ctx, uploadID, manifestVersion)
	return store.ObjectInfo{Key: key, Size: size, ModTime: timeOf(resp.LastModified), ETag: etag,
		Validator: validatorOf(resp.ETag), Metadata: md, VersionID: valueOf(resp.VersionID)}, nil
}

// AbortMultipart forgets the upload: later UploadPart and CompleteMultipart
// calls get ErrNoSuchUpload. Its staged blocks stay, uncommitted and
// invisible, until Azure garbage-collects them (7 days) or the next commit
// of key drops them. Idempotent: an unknown upload is not an error;
// ErrNoSuchUpload when the upload belongs to another key.
func (s *Store) AbortMultipart(ctx context.Context, key, uploadID string) error {
	if err := checkKey("abort multipart", key); err != nil {
		return err
	}
	_, version, err := s.manifest(ctx, "abort multipart", key, uploadID)
	if err != nil {
		if errors.Is(err, store.ErrNoSuchUpload) && !errors.Is(err, errOtherKey) {
			return nil
		}
		return err
	}
	err = s.removeManifest(ctx, uploadID, version)
	if err != nil && !errors.Is(kindOf(err), store.ErrNotFound) {
		return s.mapErr("abort multipart", key, err)
	}
	return nil
}

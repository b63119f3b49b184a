package gcs

// GCS custom metadata holds what GCS has no field for. Reserved names start
// with "fedgate-":
//
//	fedgate-etag            the S3-facing ETag
//	fedgate-expires         the Expires header
//	fedgate-checksum-<alg>  a checksum, alg lower-case ("sha256")
//	fedgate-wid             a random id of the write that made the object
//
// Every other name is a user metadata name. A user name that itself starts
// with "fedgate-" is stored as "fedgate-u-<name>", so the encoding is
// reversible and a user can never overwrite a reserved entry.

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"cloud.google.com/go/storage"

	"github.com/fedgate/fedgate/store"
)

const (
	metaPrefix   = "fedgate-"
	metaETag     = metaPrefix + "etag"
	metaExpires  = metaPrefix + "expires"
	metaChecksum = metaPrefix + "checksum-"
	metaWriteID  = metaPrefix + "wid"
	metaUser     = metaPrefix + "u-"
)

// objectAttrs is what a write sets on key: m's fields, etag and the write's id.
func objectAttrs(key string, m store.Metadata, etag, wid string) storage.ObjectAttrs {
	md := make(map[string]string, len(m.User)+len(m.Checksums)+3)
	for k, v := range m.User {
		if strings.HasPrefix(k, metaPrefix) {
			k = metaUser + k
		}
		md[k] = v
	}
	for alg, v := range m.Checksums {
		md[metaChecksum+strings.ToLower(alg)] = v
	}
	if m.Expires != "" {
		md[metaExpires] = m.Expires
	}
	md[metaETag] = etag
	if wid != "" {
		md[metaWriteID] = wid
	}
	return storage.ObjectAttrs{
		Name:               key,
		ContentType:        m.ContentType,
		CacheControl:       m.CacheControl,
		ContentDisposition: m.ContentDisposition,
		ContentEncoding:    m.ContentEncoding,
		ContentLanguage:    m.ContentLanguage,
		Metadata:           md,
	}
}

// infoOf is the ObjectInfo of an object as GCS describes it.
func infoOf(a *storage.ObjectAttrs) store.ObjectInfo {
	info := store.ObjectInfo{
		Key:       a.Name,
		Size:      a.Size,
		ModTime:   a.Updated,
		ETag:      etagOf(a),
		Validator: validatorOf(a.Generation),
		// The generation is the version id where the bucket keeps versions
		// (the namespace ignores it where it does not).
		VersionID: strconv.FormatInt(a.Generation, 10),
		Metadata: store.Metadata{
			ContentType:        a.ContentType,
			CacheControl:       a.CacheControl,
			ContentDisposition: a.ContentDisposition,
			ContentEncoding:    a.ContentEncoding,
			ContentLanguage:    a.ContentLanguage,
		},
	}
	if info.ModTime.IsZero() {
		info.ModTime = a.Created
	}
	for k, v := range a.Metadata {
		switch {
		case k == metaExpires:
			info.Expires = v
		case strings.HasPrefix(k, metaChecksum):
			if info.Checksums == nil {
				info.Checksums = map[string]string{}
			}
			info.Checksums[strings.ToUpper(k[len(metaChecksum):])] = v
		case strings.HasPrefix(k, metaUser):
			info.User = setUser(info.User, k[len(metaUser):], v)
		case strings.HasPrefix(k, metaPrefix):
			// reserved: etag, wid, names of later versions
		default:
			info.User = setUser(info.User, strings.ToLower(k), v)
		}
	}
	return info
}

func setUser(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m
}

// etagOf is the S3-facing ETag of an object:
//   - GCS's MD5 when it has one (every object written in one upload), unless
//     fedgate-etag holds a multipart ETag ("<hex>-N");
//   - else fedgate-etag (objects fedgate composed);
//   - else, for a composite object written outside fedgate, which GCS gives
//     no MD5, "<hex>-<componentCount>" where hex is the MD5 of
//     "gcs:<generation>:<crc32c>": stable while the object is unchanged, and
//     shaped like a multipart ETag so that no client mistakes it for the MD5
//     of the bytes.
func etagOf(a *storage.ObjectAttrs) string {
	etag := a.Metadata[metaETag]
	switch {
	case len(a.MD5) == md5.Size && (etag == "" || !strings.Contains(etag, "-")):
		return hex.EncodeToString(a.MD5)
	case etag != "":
		return etag
	}
	sum := md5.Sum(fmt.Appendf(nil, "gcs:%d:%08x", a.Generation, a.CRC32C))
	return fmt.Sprintf("%x-%d", sum, max(a.ComponentCount, 1))
}

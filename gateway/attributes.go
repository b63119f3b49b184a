package gateway

import (
	"net/http"
	"slices"
	"strings"

	"github.com/fedgate/fedgate/gateway/s3err"
)

// objectAttributeNames are the values x-amz-object-attributes may name.
var objectAttributeNames = []string{"ETag", "Checksum", "ObjectParts", "StorageClass", "ObjectSize"}

// objectAttributes is GetObjectAttributes' answer: only the attributes
// asked for are set.
type objectAttributes struct {
	XMLName      struct{}         `xml:"GetObjectAttributesResponse"`
	Xmlns        string           `xml:"xmlns,attr"`
	ETag         string           `xml:"ETag,omitempty"`
	Checksum     *attrChecksum    `xml:"Checksum,omitempty"`
	ObjectParts  *attrObjectParts `xml:"ObjectParts,omitempty"`
	StorageClass string           `xml:"StorageClass,omitempty"`
	ObjectSize   *int64           `xml:"ObjectSize,omitempty"`
}

type attrChecksum struct {
	ChecksumCRC32     string `xml:"ChecksumCRC32,omitempty"`
	ChecksumCRC32C    string `xml:"ChecksumCRC32C,omitempty"`
	ChecksumCRC64NVME string `xml:"ChecksumCRC64NVME,omitempty"`
	ChecksumSHA1      string `xml:"ChecksumSHA1,omitempty"`
	ChecksumSHA256    string `xml:"ChecksumSHA256,omitempty"`
	ChecksumType      string `xml:"ChecksumType,omitempty"`
}

// attrObjectParts is what fedgate knows of a multipart object's parts:
// their number (the ETag's "-N"). It keeps no per-part record once an
// upload is complete, so no Part list; S3 itself lists parts only for
// objects uploaded with additional checksums.
type attrObjectParts struct {
	PartsCount int `xml:"PartsCount"`
}

// requestedAttributes reads x-amz-object-attributes (comma-separated, and
// possibly repeated): InvalidRequest when it names nothing, InvalidArgument
// for a name S3 does not know.
func requestedAttributes(h http.Header) (map[string]bool, error) {
	want := map[string]bool{}
	for _, v := range h.Values("X-Amz-Object-Attributes") {
		for name := range strings.SplitSeq(v, ",") {
			name = strings.TrimSpace(name)
			if name == "" {
				continue
			}
			if !slices.Contains(objectAttributeNames, name) {
				return nil, s3err.Newf(s3err.CodeInvalidArgument, "Invalid attribute name specified: %q (x-amz-object-attributes takes %s).", name, strings.Join(objectAttributeNames, ", "))
			}
			want[name] = true
		}
	}
	if len(want) == 0 {
		return nil, s3err.New(s3err.CodeInvalidRequest, "The x-amz-object-attributes header specifying the attributes to be retrieved is either missing or empty")
	}
	return want, nil
}

// getObjectAttributes answers GetObjectAttributes from the object's
// metadata, without reading it. x-amz-max-parts and
// x-amz-part-number-marker page a Part list fedgate never returns, so
// they change nothing (S3 ignores invalid values of them too).
func (s *Server) getObjectAttributes(q *request) error {
	want, err := requestedAttributes(q.r.Header)
	if err != nil {
		return err
	}
	_, info, err := s.statObject(q)
	if err != nil {
		return err
	}
	res := objectAttributes{Xmlns: s3NS}
	if want["ETag"] {
		res.ETag = info.ETag
	}
	if want["StorageClass"] {
		res.StorageClass = "STANDARD"
	}
	if want["ObjectSize"] {
		size := info.Size
		res.ObjectSize = &size
	}
	parts := partsCount(info.ETag)
	if want["ObjectParts"] && parts > 0 {
		res.ObjectParts = &attrObjectParts{PartsCount: parts}
	}
	if c := info.Checksums; want["Checksum"] && len(c) > 0 && parts == 0 {
		// Checksums of a whole-object PUT (fedgate computes no composite
		// checksum of a multipart object).
		res.Checksum = &attrChecksum{ChecksumCRC32: c["CRC32"], ChecksumCRC32C: c["CRC32C"], ChecksumCRC64NVME: c["CRC64NVME"],
			ChecksumSHA1: c["SHA1"], ChecksumSHA256: c["SHA256"], ChecksumType: "FULL_OBJECT"}
	}
	q.w.Header().Set("Last-Modified", info.ModTime.UTC().Format(http.TimeFormat))
	writeXML(q.w, http.StatusOK, res)
	return nil
}

package gateway

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/fedgate/fedgate/gateway/s3err"
)

const s3NS = "http://s3.amazonaws.com/doc/2006-03-01/"

// maxXMLBody bounds request bodies that are parsed as XML (DeleteObjects with
// 1000 maximal keys is about 1.1 MB).
const maxXMLBody = 2 << 20

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// writeXML encodes v fully before writing, so an encoding failure still
// becomes a clean error response.
func writeXML(w http.ResponseWriter, status int, v any) {
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer bufPool.Put(buf)
	buf.WriteString(xml.Header)
	if err := xml.NewEncoder(buf).Encode(v); err != nil {
		http.Error(w, "xml encoding failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// readXML decodes an S3 request body of at most maxXMLBody bytes into v.
// Any syntax error, trailing garbage or oversize body is MalformedXML.
func readXML(body io.Reader, v any) error {
	lr := &io.LimitedReader{R: body, N: maxXMLBody + 1}
	data, err := io.ReadAll(lr)
	if err != nil {
		return err
	}
	if len(data) > maxXMLBody {
		return s3err.Newf(s3err.CodeMalformedXML, "The XML body is larger than %d bytes.", maxXMLBody)
	}
	return decodeXML(data, v)
}

func decodeXML(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return errMalformedXML
	}
	dec := xml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return errMalformedXML
	}
	// Nothing but whitespace, comments or processing instructions may follow.
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return errMalformedXML
		}
		switch t := tok.(type) {
		case xml.CharData:
			if len(bytes.TrimSpace(t)) != 0 {
				return errMalformedXML
			}
		case xml.Comment, xml.ProcInst:
		default:
			return errMalformedXML
		}
	}
}

func s3Time(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

type owner struct {
	ID          string `xml:"ID"`
	DisplayName string `xml:"DisplayName"`
}

type listAllMyBucketsResult struct {
	XMLName xml.Name     `xml:"ListAllMyBucketsResult"`
	Xmlns   string       `xml:"xmlns,attr"`
	Owner   owner        `xml:"Owner"`
	Buckets []bucketElem `xml:"Buckets>Bucket"`
	// ContinuationToken is set when more buckets follow this page;
	// Prefix is echoed in a paged listing.
	ContinuationToken string  `xml:"ContinuationToken,omitempty"`
	Prefix            *string `xml:"Prefix"`
}

type bucketElem struct {
	Name         string `xml:"Name"`
	CreationDate string `xml:"CreationDate"`
	BucketRegion string `xml:"BucketRegion,omitempty"`
}

type locationConstraint struct {
	XMLName xml.Name `xml:"LocationConstraint"`
	Xmlns   string   `xml:"xmlns,attr"`
	Value   string   `xml:",chardata"`
}

type createBucketConfiguration struct {
	XMLName            xml.Name `xml:"CreateBucketConfiguration"`
	LocationConstraint string   `xml:"LocationConstraint"`
}

type objectElem struct {
	Key          string `xml:"Key"`
	LastModified string `xml:"LastModified"`
	ETag         string `xml:"ETag"`
	Size         int64  `xml:"Size"`
	StorageClass string `xml:"StorageClass"`
	Owner        *owner `xml:"Owner,omitempty"`
}

type prefixElem struct {
	Prefix string `xml:"Prefix"`
}

type listBucketResultV2 struct {
	XMLName               xml.Name     `xml:"ListBucketResult"`
	Xmlns                 string       `xml:"xmlns,attr"`
	Name                  string       `xml:"Name"`
	Prefix                string       `xml:"Prefix"`
	Delimiter             string       `xml:"Delimiter,omitempty"`
	MaxKeys               int          `xml:"MaxKeys"`
	EncodingType          string       `xml:"EncodingType,omitempty"`
	KeyCount              int          `xml:"KeyCount"`
	IsTruncated           bool         `xml:"IsTruncated"`
	ContinuationToken     *string      `xml:"ContinuationToken,omitempty"` // present (even empty) when the request sent one
	NextContinuationToken string       `xml:"NextContinuationToken,omitempty"`
	StartAfter            string       `xml:"StartAfter,omitempty"`
	Contents              []objectElem `xml:"Contents"`
	CommonPrefixes        []prefixElem `xml:"CommonPrefixes"`
}

type listBucketResultV1 struct {
	XMLName        xml.Name     `xml:"ListBucketResult"`
	Xmlns          string       `xml:"xmlns,attr"`
	Name           string       `xml:"Name"`
	Prefix         string       `xml:"Prefix"`
	Marker         string       `xml:"Marker"`
	NextMarker     string       `xml:"NextMarker,omitempty"`
	Delimiter      string       `xml:"Delimiter,omitempty"`
	MaxKeys        int          `xml:"MaxKeys"`
	EncodingType   string       `xml:"EncodingType,omitempty"`
	IsTruncated    bool         `xml:"IsTruncated"`
	Contents       []objectElem `xml:"Contents"`
	CommonPrefixes []prefixElem `xml:"CommonPrefixes"`
}

// listVersionsResult is ListObjectVersions' answer.
type listVersionsResult struct {
	XMLName             xml.Name `xml:"ListVersionsResult"`
	Xmlns               string   `xml:"xmlns,attr"`
	Name                string   `xml:"Name"`
	Prefix              string   `xml:"Prefix"`
	KeyMarker           string   `xml:"KeyMarker"`
	VersionIDMarker     string   `xml:"VersionIdMarker"`
	NextKeyMarker       string   `xml:"NextKeyMarker,omitempty"`
	NextVersionIDMarker string   `xml:"NextVersionIdMarker,omitempty"`
	MaxKeys             int      `xml:"MaxKeys"`
	Delimiter           string   `xml:"Delimiter,omitempty"`
	EncodingType        string   `xml:"EncodingType,omitempty"`
	IsTruncated         bool     `xml:"IsTruncated"`
	// Entries are Version, DeleteMarker and CommonPrefixes elements in
	// listing order, as S3 interleaves them.
	Entries []any
}

// deleteMarkerElem is a delete marker in a version listing.
type deleteMarkerElem struct {
	XMLName      xml.Name `xml:"DeleteMarker"`
	Key          string   `xml:"Key"`
	VersionID    string   `xml:"VersionId"`
	IsLatest     bool     `xml:"IsLatest"`
	LastModified string   `xml:"LastModified"`
	Owner        *owner   `xml:"Owner,omitempty"`
}

// prefixEntry is a common prefix in a version listing.
type prefixEntry struct {
	XMLName xml.Name `xml:"CommonPrefixes"`
	Prefix  string   `xml:"Prefix"`
}

// versionElem is one version of an object in a version listing.
type versionElem struct {
	XMLName      xml.Name `xml:"Version"`
	Key          string   `xml:"Key"`
	VersionID    string   `xml:"VersionId"`
	IsLatest     bool     `xml:"IsLatest"`
	LastModified string   `xml:"LastModified"`
	ETag         string   `xml:"ETag"`
	Size         int64    `xml:"Size"`
	Owner        *owner   `xml:"Owner,omitempty"`
	StorageClass string   `xml:"StorageClass"`
}

type copyObjectResult struct {
	XMLName      xml.Name `xml:"CopyObjectResult"`
	Xmlns        string   `xml:"xmlns,attr"`
	LastModified string   `xml:"LastModified"`
	ETag         string   `xml:"ETag"`
}

type copyPartResult struct {
	XMLName      xml.Name `xml:"CopyPartResult"`
	Xmlns        string   `xml:"xmlns,attr"`
	LastModified string   `xml:"LastModified"`
	ETag         string   `xml:"ETag"`
}

// deleteRequest is the body of DeleteObjects.
type deleteRequest struct {
	XMLName xml.Name `xml:"Delete"`
	Quiet   bool     `xml:"Quiet"`
	Objects []struct {
		Key       string `xml:"Key"`
		VersionID string `xml:"VersionId"`
	} `xml:"Object"`
}

type deletedElem struct {
	Key                   string `xml:"Key"`
	VersionID             string `xml:"VersionId,omitempty"`
	DeleteMarker          bool   `xml:"DeleteMarker,omitempty"`
	DeleteMarkerVersionID string `xml:"DeleteMarkerVersionId,omitempty"`
}

type deleteErrorElem struct {
	Key       string `xml:"Key"`
	VersionID string `xml:"VersionId,omitempty"`
	Code      string `xml:"Code"`
	Message   string `xml:"Message"`
}

type deleteResult struct {
	XMLName xml.Name          `xml:"DeleteResult"`
	Xmlns   string            `xml:"xmlns,attr"`
	Deleted []deletedElem     `xml:"Deleted"`
	Errors  []deleteErrorElem `xml:"Error"`
}

type initiateMultipartUploadResult struct {
	XMLName  xml.Name `xml:"InitiateMultipartUploadResult"`
	Xmlns    string   `xml:"xmlns,attr"`
	Bucket   string   `xml:"Bucket"`
	Key      string   `xml:"Key"`
	UploadID string   `xml:"UploadId"`
}

// completeMultipartUpload is the body of CompleteMultipartUpload.
type completeMultipartUpload struct {
	XMLName xml.Name `xml:"CompleteMultipartUpload"`
	Parts   []struct {
		PartNumber     int    `xml:"PartNumber"`
		ETag           string `xml:"ETag"`
		ChecksumCRC32  string `xml:"ChecksumCRC32"`
		ChecksumCRC32C string `xml:"ChecksumCRC32C"`
		ChecksumSHA1   string `xml:"ChecksumSHA1"`
		ChecksumSHA256 string `xml:"ChecksumSHA256"`
	} `xml:"Part"`
}

type completeMultipartUploadResult struct {
	XMLName  xml.Name `xml:"CompleteMultipartUploadResult"`
	Xmlns    string   `xml:"xmlns,attr"`
	Location string   `xml:"Location"`
	Bucket   string   `xml:"Bucket"`
	Key      string   `xml:"Key"`
	ETag     string   `xml:"ETag"`
}

type partElem struct {
	PartNumber        int    `xml:"PartNumber"`
	LastModified      string `xml:"LastModified"`
	ETag              string `xml:"ETag"`
	Size              int64  `xml:"Size"`
	ChecksumCRC32     string `xml:"ChecksumCRC32,omitempty"`
	ChecksumCRC32C    string `xml:"ChecksumCRC32C,omitempty"`
	ChecksumSHA1      string `xml:"ChecksumSHA1,omitempty"`
	ChecksumSHA256    string `xml:"ChecksumSHA256,omitempty"`
	ChecksumCRC64NVME string `xml:"ChecksumCRC64NVME,omitempty"`
}

type listPartsResult struct {
	XMLName              xml.Name   `xml:"ListPartsResult"`
	Xmlns                string     `xml:"xmlns,attr"`
	Bucket               string     `xml:"Bucket"`
	Key                  string     `xml:"Key"`
	UploadID             string     `xml:"UploadId"`
	Initiator            owner      `xml:"Initiator"`
	Owner                owner      `xml:"Owner"`
	StorageClass         string     `xml:"StorageClass"`
	PartNumberMarker     int        `xml:"PartNumberMarker"`
	NextPartNumberMarker int        `xml:"NextPartNumberMarker"`
	MaxParts             int        `xml:"MaxParts"`
	IsTruncated          bool       `xml:"IsTruncated"`
	Parts                []partElem `xml:"Part"`
}

type uploadElem struct {
	Key          string `xml:"Key"`
	UploadID     string `xml:"UploadId"`
	Initiator    owner  `xml:"Initiator"`
	Owner        owner  `xml:"Owner"`
	StorageClass string `xml:"StorageClass"`
	Initiated    string `xml:"Initiated"`
}

type listMultipartUploadsResult struct {
	XMLName            xml.Name     `xml:"ListMultipartUploadsResult"`
	Xmlns              string       `xml:"xmlns,attr"`
	Bucket             string       `xml:"Bucket"`
	KeyMarker          string       `xml:"KeyMarker"`
	UploadIDMarker     string       `xml:"UploadIdMarker"`
	NextKeyMarker      string       `xml:"NextKeyMarker"`
	NextUploadIDMarker string       `xml:"NextUploadIdMarker"`
	Prefix             string       `xml:"Prefix"`
	Delimiter          string       `xml:"Delimiter,omitempty"`
	EncodingType       string       `xml:"EncodingType,omitempty"`
	MaxUploads         int          `xml:"MaxUploads"`
	IsTruncated        bool         `xml:"IsTruncated"`
	Uploads            []uploadElem `xml:"Upload"`
	CommonPrefixes     []prefixElem `xml:"CommonPrefixes"`
}

type versioningConfiguration struct {
	XMLName   xml.Name `xml:"VersioningConfiguration"`
	Xmlns     string   `xml:"xmlns,attr,omitempty"`
	Status    string   `xml:"Status,omitempty"`
	MfaDelete string   `xml:"MfaDelete,omitempty"`
}

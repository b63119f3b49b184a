package loadgen

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// BatchPath is fedgate's batch GET route on its S3 port.
const BatchPath = "/_fedgate/v1/batch"

// ErrorPrefix starts the name of a tar entry that reports a failed entry
// (continue_on_error): "__errors__/<bucket>/<key>", holding S3 error XML.
const ErrorPrefix = "__errors__/"

// BatchEntry is one object (or a byte range of it, or a member of a tar or
// zip shard) asked for in a batch.
type BatchEntry struct {
	Bucket   string `json:"bucket"`
	Key      string `json:"key"`
	Range    string `json:"range,omitempty"`    // "bytes=0-99"
	ArchPath string `json:"archpath,omitempty"` // a member of the shard at Key
}

// Name is the entry's name in the answer: "<bucket>/<key>[/<archpath>]".
func (e BatchEntry) Name() string {
	n := e.Bucket + "/" + e.Key
	if e.ArchPath != "" {
		n += "/" + e.ArchPath
	}
	return n
}

// BatchRequest is the JSON body of POST /_fedgate/v1/batch.
type BatchRequest struct {
	Entries         []BatchEntry `json:"entries"`
	ContinueOnError bool         `json:"continue_on_error"`
}

// BatchResult is what a batch answer held.
type BatchResult struct {
	// Objects is the entries answered with their bytes; Bytes their total.
	Objects int
	Bytes   int64
	// Errors are the entries answered as __errors__ entries.
	Errors []EntryError
	// FirstEntry is the time from sending the request to reading the
	// first entry's tar header.
	FirstEntry time.Duration
}

// EntryError is one failed entry of a batch.
type EntryError struct {
	Name    string // the entry's name, without __errors__/
	Code    string // the S3 error code of the XML in the entry
	Message string
}

func (e EntryError) Error() string {
	if e.Message == "" {
		return e.Code
	}
	return e.Code + ": " + e.Message
}

// BatchHTTPError is a batch request the server refused as a whole.
type BatchHTTPError struct {
	Status  int
	Code    string // S3 error code, when the answer was S3 error XML
	Message string
}

func (e *BatchHTTPError) Error() string {
	switch {
	case e.Code != "" && e.Message != "":
		return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
	case e.Code != "":
		return fmt.Sprintf("%d %s", e.Status, e.Code)
	case e.Message != "":
		return fmt.Sprintf("%d %s", e.Status, e.Message)
	}
	return fmt.Sprintf("%d %s", e.Status, http.StatusText(e.Status))
}

// BatchClient sends fedgate batch GETs, SigV4-signed for service s3 and
// the endpoint's signing region, with the SHA-256 of the JSON body as
// payload hash.
type BatchClient struct {
	Endpoint    string // "http://host:port"
	Region      string
	Credentials aws.CredentialsProvider
	HTTP        *http.Client
	signer      *v4.Signer
}

// NewBatchClient returns a client for the fedgate server at endpoint.
func NewBatchClient(endpoint, region string, creds aws.CredentialsProvider, hc *http.Client) *BatchClient {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &BatchClient{Endpoint: strings.TrimRight(endpoint, "/"), Region: region, Credentials: creds, HTTP: hc, signer: v4.NewSigner()}
}

// Get sends req and reads the whole answer: a tar with one entry per
// request entry, in request order, named Entry.Name(), or, for a failed
// entry with ContinueOnError, "__errors__/"+Name() holding S3 error XML.
// Errors: *BatchHTTPError when the server refused the batch; an
// EntryError when an entry failed without ContinueOnError (the server's
// stream ends with that error entry); any other error when the answer is
// not such a tar (names out of order, an entry missing, a short entry).
func (c *BatchClient) Get(ctx context.Context, req BatchRequest) (BatchResult, error) {
	var res BatchResult
	body, err := json.Marshal(req)
	if err != nil {
		return res, err
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.Endpoint+BatchPath, bytes.NewReader(body))
	if err != nil {
		return res, err
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("X-Amz-Content-Sha256", hash)
	creds, err := c.Credentials.Retrieve(ctx)
	if err != nil {
		return res, fmt.Errorf("credentials: %w", err)
	}
	start := time.Now()
	if err := c.signer.SignHTTP(ctx, creds, hr, hash, "s3", c.Region, start); err != nil {
		return res, err
	}
	resp, err := c.HTTP.Do(hr)
	if err != nil {
		return res, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		he := &BatchHTTPError{Status: resp.StatusCode}
		var x s3Error
		if xml.Unmarshal(data, &x) == nil && x.Code != "" {
			he.Code, he.Message = x.Code, x.Message
		} else {
			he.Message = strings.TrimSpace(string(data[:min(len(data), 200)]))
		}
		return res, he
	}
	tr := tar.NewReader(resp.Body)
	for i, e := range req.Entries {
		want := e.Name()
		h, err := tr.Next()
		if err == io.EOF {
			return res, fmt.Errorf("the answer ended after %d of %d entries", i, len(req.Entries))
		}
		if err != nil {
			return res, fmt.Errorf("reading entry %d of the answer: %w", i+1, err)
		}
		if i == 0 {
			res.FirstEntry = time.Since(start)
		}
		switch h.Name {
		case want:
			n, err := io.Copy(io.Discard, tr)
			if err != nil {
				return res, fmt.Errorf("reading entry %d (%s): %w", i+1, want, err)
			}
			res.Objects++
			res.Bytes += n
		case ErrorPrefix + want:
			ee := readEntryError(tr, want)
			if !req.ContinueOnError {
				return res, ee
			}
			res.Errors = append(res.Errors, ee)
		default:
			if name, ok := strings.CutPrefix(h.Name, ErrorPrefix); ok {
				// An error entry for another name: the server's trailer
				// for a stream it could not finish.
				return res, fmt.Errorf("the answer stopped at entry %d (%s): %w", i+1, want, readEntryError(tr, name))
			}
			return res, fmt.Errorf("entry %d of the answer is %q, want %q (entries must come in request order)", i+1, h.Name, want)
		}
	}
	h, err := tr.Next()
	switch {
	case err == io.EOF:
		return res, nil
	case err != nil:
		return res, fmt.Errorf("reading the end of the answer: %w", err)
	case strings.HasPrefix(h.Name, ErrorPrefix):
		return res, fmt.Errorf("the answer ends with an error entry: %w", readEntryError(tr, strings.TrimPrefix(h.Name, ErrorPrefix)))
	}
	return res, fmt.Errorf("the answer has more entries than the %d asked for (%q)", len(req.Entries), h.Name)
}

type s3Error struct {
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

func readEntryError(r io.Reader, name string) EntryError {
	data, _ := io.ReadAll(io.LimitReader(r, 64<<10))
	_, _ = io.Copy(io.Discard, r)
	var x s3Error
	if err := xml.Unmarshal(data, &x); err != nil || x.Code == "" {
		return EntryError{Name: name, Code: "UnreadableError", Message: strings.TrimSpace(string(data[:min(len(data), 200)]))}
	}
	return EntryError{Name: name, Code: x.Code, Message: x.Message}
}

// unsupportedBatch is the error of a target whose server has no batch GET.
func unsupportedBatch(endpoint string, err error) error {
	var he *BatchHTTPError
	if errors.As(err, &he) {
		return fmt.Errorf("%s does not serve fedgate's batch GET: POST %s answered %v; batch mode needs a fedgate server with batch reads (use get to load any S3 server)",
			endpoint, BatchPath, he)
	}
	return fmt.Errorf("%s: the first batch GET (POST %s) failed: %w", endpoint, BatchPath, err)
}

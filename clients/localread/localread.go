// Package localread is the Go client of fedgate's short-circuit read
// (docs/gpu-data-path.md): a process on a node that runs fedgate with
// --local-socket opens an object and gets the open files that hold its
// bytes (the node's cache chunk files, passed with SCM_RIGHTS), and reads
// them with pread (or O_DIRECT, or cuFile on a GPU host) without a copy
// through the gateway. When the socket is absent, or the node cannot hand
// the bytes over as files (NotLocal), Open falls back to signed HTTP GETs.
//
//	c := &localread.Client{Socket: "/run/fedgate/s3.sock", Endpoint: "http://127.0.0.1:9000",
//		AccessKey: ak, SecretKey: sk}
//	f, err := c.Open(ctx, "datasets", "train/shard-0001.tar")
//	...
//	defer f.Close()
//	n, err := f.ReadAt(buf, off)
//
// It imports no fedgate package: only the standard library, x/sys/unix and
// the AWS SDK's SigV4 signer.
package localread

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"golang.org/x/sys/unix"
)

// Path is the short-circuit read's route on the socket.
const Path = "/_fedgate/v1/local"

// Align is the block size O_DIRECT reads are aligned to.
const Align = 4096

// Client opens objects through a node's Unix socket.
type Client struct {
	// Socket is the node's --local-socket path.
	Socket string
	// Endpoint is the S3 endpoint for the HTTP fallback ("": S3 over the
	// socket itself).
	Endpoint string
	// Region is the signing region (default us-east-1).
	Region               string
	AccessKey, SecretKey string
	// Direct opens the passed descriptors with O_DIRECT (set with fcntl on
	// the client's own copy) and reads whole aligned blocks: the page
	// cache is bypassed, as a GPUDirect Storage read does.
	Direct bool
	// HTTP is the fallback's client (default: one that dials Endpoint, or
	// the socket when Endpoint is "").
	HTTP *http.Client

	once sync.Once
	hc   *http.Client
}

// Error is an S3 error answer.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("fedgate: %s (HTTP %d): %s", e.Code, e.Status, e.Message)
}

// Extent is Length bytes at FileOffset of descriptor FD (an index into
// Lease.Files), the object's bytes at ObjectOffset.
type Extent struct {
	FD           int   `json:"fd"`
	FileOffset   int64 `json:"file_offset"`
	Length       int64 `json:"length"`
	ObjectOffset int64 `json:"object_offset"`
}

type answer struct {
	Size         int64    `json:"size"`
	ETag         string   `json:"etag"`
	LastModified string   `json:"last_modified"`
	VersionID    string   `json:"version_id"`
	Offset       int64    `json:"offset"`
	Length       int64    `json:"length"`
	Align        int      `json:"align"`
	LeaseSeconds int      `json:"lease_seconds"`
	FDs          int      `json:"fds"`
	Extents      []Extent `json:"extents"`
}

func (c *Client) region() string {
	if c.Region == "" {
		return "us-east-1"
	}
	return c.Region
}

// sign signs req (body is its payload) for service s3.
func (c *Client) sign(ctx context.Context, req *http.Request, body []byte) error {
	sum := sha256.Sum256(body)
	req.Header.Set("X-Amz-Content-Sha256", hex.EncodeToString(sum[:]))
	creds := aws.Credentials{AccessKeyID: c.AccessKey, SecretAccessKey: c.SecretKey}
	return v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "s3", c.region(), time.Now())
}

// File is an open object: local extents, or the HTTP fallback.
type File struct {
	c            *Client
	bucket, key  string
	size         int64
	etag         string
	lastModified time.Time
	local        *lease // nil: HTTP
	pos          int64
}

// lease is a short-circuit answer: its descriptors and the connection
// whose closing lets the node release its own.
type lease struct {
	conn    *net.UnixConn
	files   []*os.File
	extents []Extent
	direct  bool
}

// Open opens the whole object: by short-circuit when the socket is there
// and the node holds (or fills) its bytes as files, else over HTTP.
func (c *Client) Open(ctx context.Context, bucket, key string) (*File, error) {
	f, err := c.OpenLocal(ctx, bucket, key)
	if err == nil {
		return f, nil
	}
	var se *Error
	if !errors.Is(err, errNoSocket) && !(errors.As(err, &se) && se.Code == "NotLocal") {
		return nil, err
	}
	return c.openHTTP(ctx, bucket, key)
}

var errNoSocket = errors.New("localread: no socket")

// OpenLocal opens the object by short-circuit only.
func (c *Client) OpenLocal(ctx context.Context, bucket, key string) (*File, error) {
	if c.Socket == "" {
		return nil, errNoSocket
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.Socket)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ECONNREFUSED) {
			return nil, fmt.Errorf("%w: %v", errNoSocket, err)
		}
		return nil, err
	}
	uc := conn.(*net.UnixConn)
	l, ans, err := c.request(ctx, uc, bucket, key)
	if err != nil {
		uc.Close()
		return nil, err
	}
	lm, _ := http.ParseTime(ans.LastModified)
	return &File{c: c, bucket: bucket, key: key, size: ans.Size, etag: ans.ETag, lastModified: lm, local: l}, nil
}

// request sends the signed request on uc and reads the answer with its
// descriptors.
func (c *Client) request(ctx context.Context, uc *net.UnixConn, bucket, key string) (*lease, answer, error) {
	var ans answer
	body, _ := json.Marshal(map[string]any{"bucket": bucket, "key": key, "offset": 0})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://localhost"+Path, bytes.NewReader(body))
	if err != nil {
		return nil, ans, err
	}
	req.Header.Set("Content-Type", "application/json")
	if err := c.sign(ctx, req, body); err != nil {
		return nil, ans, err
	}
	if dl, ok := ctx.Deadline(); ok {
		uc.SetDeadline(dl)
		defer uc.SetDeadline(time.Time{})
	}
	if err := req.Write(uc); err != nil {
		return nil, ans, err
	}
	// The descriptors come with the answer's first bytes: read with
	// recvmsg until the header and body are in.
	var buf []byte
	var fds []int
	oob := make([]byte, unix.CmsgSpace(4*256))
	chunk := make([]byte, 64<<10)
	closeFDs := func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	for {
		n, oobn, _, _, err := uc.ReadMsgUnix(chunk, oob)
		if oobn > 0 {
			msgs, perr := unix.ParseSocketControlMessage(oob[:oobn])
			if perr == nil {
				for _, m := range msgs {
					if got, err := unix.ParseUnixRights(&m); err == nil {
						fds = append(fds, got...)
					}
				}
			}
		}
		buf = append(buf, chunk[:n]...)
		if resp, ok := complete(buf); ok {
			if resp.StatusCode != http.StatusOK {
				closeFDs()
				return nil, ans, readError(resp)
			}
			if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil {
				closeFDs()
				return nil, ans, fmt.Errorf("localread: answer: %w", err)
			}
			if len(fds) != ans.FDs {
				closeFDs()
				return nil, ans, fmt.Errorf("localread: %d descriptors received, the answer names %d", len(fds), ans.FDs)
			}
			break
		}
		if err != nil {
			closeFDs()
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, ans, fmt.Errorf("localread: reading the answer: %w", err)
		}
	}
	l := &lease{conn: uc, extents: ans.Extents, direct: c.Direct}
	for _, fd := range fds {
		unix.CloseOnExec(fd)
		if c.Direct {
			fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
			if err == nil {
				_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl|unix.O_DIRECT)
			}
			if err != nil {
				closeFDs()
				return nil, ans, fmt.Errorf("localread: O_DIRECT on a passed descriptor: %w", err)
			}
		}
		l.files = append(l.files, os.NewFile(uintptr(fd), "fedgate-chunk"))
	}
	return l, ans, nil
}

// complete parses buf as a whole HTTP answer (header and Content-Length
// bytes of body).
func complete(buf []byte) (*http.Response, bool) {
	i := bytes.Index(buf, []byte("\r\n\r\n"))
	if i < 0 {
		return nil, false
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(buf)), nil)
	if err != nil {
		return nil, false
	}
	if resp.ContentLength >= 0 && int64(len(buf)-(i+4)) < resp.ContentLength {
		return nil, false
	}
	return resp, true
}

func readError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &Error{Status: resp.StatusCode}
	var x struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	}
	if err := xml.Unmarshal(body, &x); err == nil {
		e.Code, e.Message = x.Code, x.Message
	} else {
		e.Code, e.Message = http.StatusText(resp.StatusCode), strings.TrimSpace(string(body))
	}
	return e
}

// Size is the object's size; ETag and LastModified its validators.
func (f *File) Size() int64             { return f.size }
func (f *File) ETag() string            { return f.etag }
func (f *File) LastModified() time.Time { return f.lastModified }

// Local reports whether f reads the node's files (not HTTP).
func (f *File) Local() bool { return f.local != nil }

// Extents returns the short-circuit extents and their files (nil over
// HTTP), for a caller that reads them itself (cuFile registers the files'
// descriptors). The files belong to f: they close with it.
func (f *File) Extents() ([]Extent, []*os.File) {
	if f.local == nil {
		return nil, nil
	}
	return f.local.extents, f.local.files
}

// ReadAt reads len(p) bytes at off (io.ReaderAt).
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("localread: negative offset")
	}
	if off >= f.size {
		return 0, io.EOF
	}
	want := p
	if rem := f.size - off; int64(len(p)) > rem {
		want = p[:rem]
	}
	var n int
	var err error
	if f.local != nil {
		n, err = f.local.readAt(want, off)
	} else {
		n, err = f.httpReadAt(want, off)
	}
	if err == nil && n < len(p) {
		err = io.EOF
	}
	return n, err
}

// Read reads from the current offset (io.Reader).
func (f *File) Read(p []byte) (int, error) {
	n, err := f.ReadAt(p, f.pos)
	f.pos += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

// Seek sets the offset of Read (io.Seeker).
func (f *File) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		offset += f.pos
	case io.SeekEnd:
		offset += f.size
	}
	if offset < 0 {
		return f.pos, errors.New("localread: seek before the start")
	}
	f.pos = offset
	return offset, nil
}

// Close closes the descriptors and the connection: the node lets go of
// its own copies (the lease ends).
func (f *File) Close() error {
	if f.local == nil {
		return nil
	}
	for _, file := range f.local.files {
		file.Close()
	}
	err := f.local.conn.Close()
	f.local = nil
	return err
}

func (l *lease) readAt(p []byte, off int64) (int, error) {
	done := 0
	for _, e := range l.extents {
		if done == len(p) {
			break
		}
		at := off + int64(done)
		if at < e.ObjectOffset || at >= e.ObjectOffset+e.Length {
			continue
		}
		in := at - e.ObjectOffset
		n := int(min(int64(len(p)-done), e.Length-in))
		var err error
		if l.direct {
			err = preadDirect(l.files[e.FD], p[done:done+n], e.FileOffset+in)
		} else {
			_, err = l.files[e.FD].ReadAt(p[done:done+n], e.FileOffset+in)
		}
		if err != nil {
			return done, fmt.Errorf("localread: read extent at %d: %w", e.ObjectOffset, err)
		}
		done += n
	}
	if done < len(p) {
		return done, fmt.Errorf("localread: the extents hold bytes up to %d of %d", off+int64(done), off+int64(len(p)))
	}
	return done, nil
}

// directBufs are aligned buffers for O_DIRECT reads (4 MiB each).
var directBufs = sync.Pool{New: func() any {
	b, err := unix.Mmap(-1, 0, 4<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil
	}
	return &b
}}

// preadDirect fills p from f at off with O_DIRECT reads of whole aligned
// blocks into a page-aligned buffer. A GPUDirect Storage reader does the
// same into GPU memory, without the final copy.
func preadDirect(f *os.File, p []byte, off int64) error {
	bp, _ := directBufs.Get().(*[]byte)
	if bp == nil {
		return errors.New("localread: no aligned buffer")
	}
	defer directBufs.Put(bp)
	buf := *bp
	for len(p) > 0 {
		start := off &^ (Align - 1)
		skip := int(off - start)
		span := min(len(buf), (skip+len(p)+Align-1)&^(Align-1))
		n, err := unix.Pread(int(f.Fd()), buf[:span], start)
		if err != nil {
			return err
		}
		if n <= skip {
			return io.ErrUnexpectedEOF
		}
		c := copy(p, buf[skip:n])
		p, off = p[c:], off+int64(c)
	}
	return nil
}

// --- the HTTP fallback

func (c *Client) httpClient() *http.Client {
	c.once.Do(func() {
		switch {
		case c.HTTP != nil:
			c.hc = c.HTTP
		case c.Endpoint == "":
			sock := c.Socket
			c.hc = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", sock)
			}}}
		default:
			c.hc = http.DefaultClient
		}
	})
	return c.hc
}

func (c *Client) objectURL(bucket, key string) string {
	base := c.Endpoint
	if base == "" {
		base = "http://localhost"
	}
	return strings.TrimRight(base, "/") + "/" + bucket + "/" + (&url.URL{Path: key}).EscapedPath()
}

func (c *Client) openHTTP(ctx context.Context, bucket, key string) (*File, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, c.objectURL(bucket, key), nil)
	if err != nil {
		return nil, err
	}
	if err := c.sign(ctx, req, nil); err != nil {
		return nil, err
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, &Error{Status: resp.StatusCode, Code: http.StatusText(resp.StatusCode), Message: "HEAD " + bucket + "/" + key}
	}
	lm, _ := http.ParseTime(resp.Header.Get("Last-Modified"))
	return &File{c: c, bucket: bucket, key: key, size: resp.ContentLength, etag: strings.Trim(resp.Header.Get("ETag"), `"`), lastModified: lm}, nil
}

func (f *File) httpReadAt(p []byte, off int64) (int, error) {
	ctx := context.Background()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.c.objectURL(f.bucket, f.key), nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Range", "bytes="+strconv.FormatInt(off, 10)+"-"+strconv.FormatInt(off+int64(len(p))-1, 10))
	if f.etag != "" {
		req.Header.Set("If-Match", `"`+f.etag+`"`)
	}
	if err := f.c.sign(ctx, req, nil); err != nil {
		return 0, err
	}
	resp, err := f.c.httpClient().Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusPartialContent && resp.StatusCode != http.StatusOK {
		return 0, readError(resp)
	}
	return io.ReadFull(resp.Body, p)
}

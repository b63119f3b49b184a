package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fedgate/fedgate/adminapi"
	"github.com/fedgate/fedgate/gateway/s3err"
)

// LocalPath is the short-circuit read (docs/gpu-data-path.md): served only
// on the node's Unix socket (--local-socket), it answers with the open
// files that hold an object's bytes, passed with SCM_RIGHTS.
const LocalPath = adminapi.ReservedPrefix + "v1/local"

// DefaultLocalLease is how long the node keeps a short-circuit read's
// descriptors at most when the client does not let go of them first.
const DefaultLocalLease = 10 * time.Minute

// LocalAlign is the alignment the extents' file offsets keep relative to
// the object's: chunk files hold their chunk from offset 0, so an O_DIRECT
// reader reads whole 4 KiB blocks (the object's offset rounded down) and
// drops what is before the range.
const LocalAlign = 4096

// LocalRequest is the JSON body of POST /_fedgate/v1/local.
type LocalRequest struct {
	Bucket string `json:"bucket"`
	Key    string `json:"key"`
	// VersionID reads one version ("" the current one).
	VersionID string `json:"version_id,omitempty"`
	// Offset and Length select the range; Length < 0 (or absent with
	// Offset 0): to the end.
	Offset int64  `json:"offset"`
	Length *int64 `json:"length,omitempty"`
}

// LocalExtent is one run of the object's bytes: Length bytes at
// FileOffset of descriptor FD (an index into the descriptors passed with
// the answer) are the object's bytes at ObjectOffset.
type LocalExtent struct {
	FD           int   `json:"fd"`
	FileOffset   int64 `json:"file_offset"`
	Length       int64 `json:"length"`
	ObjectOffset int64 `json:"object_offset"`
}

// LocalAnswer is the JSON body of a 200 answer; the descriptors come with
// its first byte.
type LocalAnswer struct {
	Size         int64         `json:"size"`
	ETag         string        `json:"etag"`
	LastModified string        `json:"last_modified"`
	VersionID    string        `json:"version_id,omitempty"`
	Offset       int64         `json:"offset"`
	Length       int64         `json:"length"`
	Align        int           `json:"align"`
	LeaseSeconds int           `json:"lease_seconds"`
	FDs          int           `json:"fds"`
	Extents      []LocalExtent `json:"extents"`
}

// isLocalConn reports whether r came in on a Unix socket.
func isLocalConn(r *http.Request) bool {
	_, ok := r.Context().Value(http.LocalAddrContextKey).(*net.UnixAddr)
	return ok
}

// localRead serves POST /_fedgate/v1/local: the request is signed and
// authorized as the GetObject of the same object would be; the node makes
// the range present in files here (its cache, filled as a GET fills it),
// answers the extents with their descriptors, and keeps its own
// descriptors until the client closes the connection or the lease ends.
func (s *Server) localRead(w http.ResponseWriter, r *http.Request) {
	ri := infoFrom(r.Context())
	ri.op = "LocalRead"
	s.metrics.inFlight.Inc()
	defer s.metrics.inFlight.Dec()
	refuse := func(err error) {
		ri.cause = err
		writeError(w, r, err)
	}
	if !isLocalConn(r) {
		refuse(s3err.New(s3err.CodeMethodNotAllowed, "The short-circuit read is served only on the node's Unix socket (--local-socket)."))
		return
	}
	user, body, err := s.signedPayloadRequest(w, r, "a short-circuit read")
	if err != nil {
		refuse(err)
		return
	}
	raw, err := io.ReadAll(io.LimitReader(body, 8<<10))
	if err != nil {
		refuse(err)
		return
	}
	var req LocalRequest
	if err := json.Unmarshal(raw, &req); err != nil || req.Bucket == "" || req.Key == "" || req.Offset < 0 {
		refuse(s3err.Newf(s3err.CodeInvalidArgument, "The short-circuit read request must be JSON {\"bucket\":..., \"key\":..., \"offset\":N, \"length\":N} with a bucket, a key and offset >= 0 (%v).", err))
		return
	}
	ri.bucket, ri.key = req.Bucket, req.Key
	q := &request{w: w, r: r, query: url.Values{}, user: user, action: "s3:GetObject", bucket: req.Bucket, key: req.Key, body: http.NoBody}
	if req.VersionID != "" {
		q.query.Set("versionId", req.VersionID)
		q.action = "s3:GetObjectVersion"
	}
	b, check, err := s.objectFor(q)
	if err != nil {
		refuse(err)
		return
	}
	ctx := r.Context()
	stat, err := b.Stat(ctx, req.Key)
	if req.VersionID != "" {
		stat, err = b.StatVersion(ctx, req.Key, req.VersionID)
	}
	if check != nil {
		if cerr := check(stat, err); cerr != nil {
			refuse(cerr)
			return
		}
	}
	if err != nil {
		refuse(s.hideMissing(q, b, err))
		return
	}
	off, n := req.Offset, stat.Size-req.Offset
	if req.Length != nil && *req.Length >= 0 {
		n = min(*req.Length, n)
	}
	if off > stat.Size || (off == stat.Size && stat.Size > 0) {
		refuse(errInvalidRange)
		return
	}
	exts, release, err := b.LocalExtents(ctx, stat, off, n)
	if err != nil {
		refuse(err)
		return
	}
	defer release()

	ans := LocalAnswer{Size: stat.Size, ETag: stat.ETag, LastModified: stat.ModTime.UTC().Format(http.TimeFormat),
		VersionID: stat.VersionID, Offset: off, Length: n, Align: LocalAlign, LeaseSeconds: int(s.localLease() / time.Second)}
	var fds []int
	index := map[uintptr]int{}
	for _, e := range exts {
		fd := e.File.Fd()
		i, ok := index[fd]
		if !ok {
			i = len(fds)
			index[fd] = i
			fds = append(fds, int(fd))
		}
		ans.Extents = append(ans.Extents, LocalExtent{FD: i, FileOffset: e.FileOffset, Length: e.Length, ObjectOffset: e.ObjectOffset})
	}
	ans.FDs = len(fds)
	js, _ := json.Marshal(ans)

	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		refuse(fmt.Errorf("gateway: the connection cannot be taken over: %w", err))
		return
	}
	defer conn.Close()
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return
	}
	head := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(js)) +
		"\r\nX-Fedgate-Fds: " + strconv.Itoa(len(fds)) + "\r\nConnection: close\r\n\r\n"
	msg := append([]byte(head), js...)
	// The descriptors ride on the answer's first byte: one sendmsg with
	// the whole answer (a few KiB).
	if err := sendWithRights(uc, msg, fds); err != nil {
		s.log.Warn("short-circuit read: sending the answer", "bucket", req.Bucket, "key", req.Key, "err", err)
		return
	}
	s.holdLease(uc, rw.Reader)
}

// sendWithRights writes msg on c with fds attached to its first byte.
func sendWithRights(c *net.UnixConn, msg []byte, fds []int) error {
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	n, oobn, err := c.WriteMsgUnix(msg, oob, nil)
	if err != nil {
		return err
	}
	if oobn != len(oob) {
		return fmt.Errorf("sent %d of %d bytes of descriptors", oobn, len(oob))
	}
	if n < len(msg) {
		_, err = c.Write(msg[n:])
	}
	return err
}

// holdLease keeps the answer's descriptors (the caller's deferred release)
// until the client closes its end or sends anything, or the lease ends.
func (s *Server) holdLease(c *net.UnixConn, br *bufio.Reader) {
	ctx, cancel := context.WithTimeout(context.Background(), s.localLease())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		var b [1]byte
		br.Read(b[:]) // EOF, a byte, or the deadline below
	}()
	select {
	case <-done:
	case <-ctx.Done():
		c.SetReadDeadline(time.Now())
		<-done
	}
}

func (s *Server) localLease() time.Duration {
	if s.cfg.LocalLease > 0 {
		return s.cfg.LocalLease
	}
	return DefaultLocalLease
}

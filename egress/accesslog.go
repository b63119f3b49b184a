package egress

import (
	"bufio"
	"bytes"
	"container/heap"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// What a gateway records per request, and so what a trace can be made
// from: the access log. Every S3 request a node serves is one log record,
// "msg":"request", with its op (GetObject, PutObject, UploadPart,
// CompleteMultipartUpload, DeleteObject, ...), status, bucket, key,
// bytes_in and bytes_out, at the time it finished (gateway/server.go,
// Server.finish). The egress ledger is no substitute: it keeps bytes per
// hour and prefix, not per object, so no trace of objects can be made from
// it, nor from the Prometheus counters.

// AccessLogReader turns one node's access log (fedgate server
// --log-format json, the default when stderr is not a terminal) into trace
// rows of the region the node serves:
//
//   - GetObject (200, 206) is a get of bytes_out bytes (a ranged read is
//     a get of its range);
//   - PutObject (200) is a put of bytes_in bytes (with aws-chunked
//     uploads, a little more than the object: the chunk signatures);
//   - UploadPart (200) bytes are added up per bucket and key until the
//     CompleteMultipartUpload (200) of that key, a put of their sum;
//   - DeleteObject (200, 204) is a delete.
//
// Everything else is skipped and counted (Skipped): other operations,
// failed and not-modified requests, CopyObject and UploadPartCopy (the log
// does not say how many bytes were copied), DeleteObjects (the log does not
// name the keys), completions whose parts are not in the log, and log
// records that are not requests. Records come in the order they finished,
// which concurrent requests may shuffle by a little: rows are held for
// Reorder (default 1 minute) and put in time order; a record more than
// Reorder older than one before it is an error.
type AccessLogReader struct {
	file, region string
	sc           *bufio.Scanner
	line         int
	// Reorder is how far back in time a record may come after a later
	// one; set it before the first Next.
	Reorder time.Duration
	held    eventHeap
	latest  time.Time // of the records read
	out     time.Time // of the last row given out
	parts   map[[2]string]int64
	skipped map[string]int64
	done    bool
	seq     int64
}

// NewAccessLogReader reads the access log of a node of region; file names
// it in errors.
func NewAccessLogReader(file, region string, r io.Reader) *AccessLogReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	return &AccessLogReader{file: file, region: region, sc: sc, Reorder: time.Minute, parts: map[[2]string]int64{}, skipped: map[string]int64{}}
}

type heldEvent struct {
	ev  TraceEvent
	seq int64
}

type eventHeap []heldEvent

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if !h[i].ev.Time.Equal(h[j].ev.Time) {
		return h[i].ev.Time.Before(h[j].ev.Time)
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(heldEvent)) }
func (h *eventHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// accessRecord is the part of a log record the reader uses.
type accessRecord struct {
	Time     string `json:"time"`
	Msg      string `json:"msg"`
	Op       string `json:"op"`
	Status   int    `json:"status"`
	BytesIn  int64  `json:"bytes_in"`
	BytesOut int64  `json:"bytes_out"`
	Bucket   string `json:"bucket"`
	Key      string `json:"key"`
}

// Next returns the next row in time order, io.EOF after the last, or an
// error naming the file and line.
func (a *AccessLogReader) Next() (TraceEvent, error) {
	for {
		if len(a.held) > 0 && (a.done || a.held[0].ev.Time.Add(a.Reorder).Before(a.latest)) {
			ev := heap.Pop(&a.held).(heldEvent).ev
			a.out = ev.Time
			return ev, nil
		}
		if a.done {
			return TraceEvent{}, io.EOF
		}
		if !a.sc.Scan() {
			if err := a.sc.Err(); err != nil {
				return TraceEvent{}, fmt.Errorf("%s:%d: %w", a.file, a.line+1, err)
			}
			a.done = true
			for k := range a.parts {
				a.skipped["multipart uploads not completed in the log"]++
				delete(a.parts, k)
			}
			continue
		}
		a.line++
		raw := bytes.TrimSpace(a.sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		if raw[0] != '{' {
			return TraceEvent{}, fmt.Errorf("%s:%d: not a JSON log record: read the log of fedgate server --log-format json (text logs are not read)", a.file, a.line)
		}
		var rec accessRecord
		if err := json.Unmarshal(raw, &rec); err != nil {
			return TraceEvent{}, fmt.Errorf("%s:%d: not a fedgate JSON log record: %v", a.file, a.line, err)
		}
		if rec.Msg != "request" {
			a.skipped["log records that are not requests"]++
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, rec.Time)
		if err != nil {
			return TraceEvent{}, fmt.Errorf("%s:%d: field time: %q is not an RFC 3339 time", a.file, a.line, rec.Time)
		}
		t = t.UTC()
		ev, why := a.convert(rec, t)
		if why != "" {
			a.skipped[why]++
			continue
		}
		if t.Add(a.Reorder).Before(a.latest) || t.Before(a.out) {
			return TraceEvent{}, fmt.Errorf("%s:%d: a request that finished at %s comes after one of %s, more than %v later: the log is not in time order (give each node's log as its own file: they are merged)",
				a.file, a.line, t.Format(time.RFC3339Nano), a.latest.Format(time.RFC3339Nano), a.Reorder)
		}
		if t.After(a.latest) {
			a.latest = t
		}
		a.seq++
		heap.Push(&a.held, heldEvent{ev: ev, seq: a.seq})
	}
}

// convert returns the row of a request, or why it has none.
func (a *AccessLogReader) convert(rec accessRecord, t time.Time) (TraceEvent, string) {
	ok := rec.Status == 200
	ev := TraceEvent{Time: t, Region: a.region, Bucket: rec.Bucket, Key: rec.Key}
	switch rec.Op {
	case "GetObject":
		ev.Op, ev.Size = OpGet, rec.BytesOut
		ok = ok || rec.Status == 206
	case "PutObject":
		ev.Op, ev.Size = OpPut, rec.BytesIn
	case "DeleteObject":
		ev.Op = OpDelete
		ok = ok || rec.Status == 204
	case "UploadPart":
		if ok && rec.Bucket != "" && rec.Key != "" {
			a.parts[[2]string{rec.Bucket, rec.Key}] += rec.BytesIn
			return ev, "upload parts (added to their completion)"
		}
		return ev, "failed or not modified requests"
	case "CompleteMultipartUpload":
		k := [2]string{rec.Bucket, rec.Key}
		n, seen := a.parts[k]
		if ok && !seen {
			return ev, "multipart completions whose parts are not in the log"
		}
		if ok {
			delete(a.parts, k)
			ev.Op, ev.Size = OpPut, n
		}
	case "CopyObject", "UploadPartCopy":
		return ev, "copies (the log does not say how many bytes were copied)"
	case "DeleteObjects":
		return ev, "multi-object deletes (the log does not name the keys)"
	default:
		return ev, "other operations (listings, HEAD, configuration, admin)"
	}
	switch {
	case !ok:
		return ev, "failed or not modified requests"
	case ev.Bucket == "" || ev.Key == "" || len(ev.Key) > 1024:
		return ev, "requests without a bucket and key"
	}
	return ev, ""
}

// Skipped says what the reader left out so far: how many records of each
// kind, in words, sorted.
func (a *AccessLogReader) Skipped() []string {
	out := make([]string, 0, len(a.skipped))
	for why, n := range a.skipped {
		out = append(out, fmt.Sprintf("%d %s", n, why))
	}
	sort.Slice(out, func(i, j int) bool {
		return strings.SplitN(out[i], " ", 2)[1] < strings.SplitN(out[j], " ", 2)[1]
	})
	return out
}

// MergeTraces returns the rows of several time-ordered sources in time
// order (rows of the same time in the order of the sources): each node's
// log is its own source.
func MergeTraces(sources ...interface{ Next() (TraceEvent, error) }) func() (TraceEvent, error) {
	heads := make([]*TraceEvent, len(sources))
	started := false
	return func() (TraceEvent, error) {
		if !started {
			started = true
			for i, s := range sources {
				ev, err := s.Next()
				if err == io.EOF {
					continue
				}
				if err != nil {
					return TraceEvent{}, err
				}
				heads[i] = &ev
			}
		}
		best := -1
		for i, h := range heads {
			if h != nil && (best < 0 || h.Time.Before(heads[best].Time)) {
				best = i
			}
		}
		if best < 0 {
			return TraceEvent{}, io.EOF
		}
		ev := *heads[best]
		next, err := sources[best].Next()
		switch {
		case err == io.EOF:
			heads[best] = nil
		case err != nil:
			return TraceEvent{}, err
		default:
			heads[best] = &next
		}
		return ev, nil
	}
}

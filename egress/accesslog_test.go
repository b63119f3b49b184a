package egress

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

func logLine(t time.Time, op string, status int, in, out int64, key string) string {
	return fmt.Sprintf(`{"time":%q,"level":"INFO","msg":"request","op":%q,"status":%d,"bytes_in":%d,"bytes_out":%d,"bucket":"b","key":%q}`,
		t.Format(time.RFC3339Nano), op, status, in, out, key)
}

// Records shuffled by concurrency come out in time order; a record later
// than the reorder window is an error naming the line; text logs and
// broken records are errors; node logs merge by time.
func TestAccessLogReader(t *testing.T) {
	t0 := time.Date(2026, 11, 2, 8, 0, 0, 0, time.UTC)
	lines := []string{
		`{"time":"2026-11-02T07:59:00Z","level":"INFO","msg":"node started"}`,
		logLine(t0.Add(2*time.Second), "GetObject", 200, 0, 10, "k2"),
		logLine(t0.Add(time.Second), "GetObject", 200, 0, 20, "k1"), // finished first, logged second
		logLine(t0.Add(3*time.Minute), "PutObject", 200, 30, 0, "k3"),
		logLine(t0.Add(4*time.Minute), "CompleteMultipartUpload", 200, 200, 0, "k4"), // parts not in the log
		logLine(t0.Add(5*time.Minute), "GetObject", 304, 0, 0, "k3"),
	}
	r := NewAccessLogReader("n.log", "gpu", strings.NewReader(strings.Join(lines, "\n")+"\n"))
	var got []string
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %s %d", ev.Op, ev.Key, ev.Size))
	}
	if want := "get k1 20,get k2 10,put k3 30"; strings.Join(got, ",") != want {
		t.Errorf("rows %v, want %s", got, want)
	}
	if s := strings.Join(r.Skipped(), "; "); s != "1 failed or not modified requests; 1 log records that are not requests; 1 multipart completions whose parts are not in the log" {
		t.Errorf("skipped: %s", s)
	}

	for _, c := range []struct{ in, want string }{
		{logLine(t0.Add(2*time.Minute), "GetObject", 200, 0, 1, "a") + "\n" + logLine(t0, "GetObject", 200, 0, 1, "b"),
			"n.log:2: a request that finished at 2026-11-02T08:00:00Z comes after one of 2026-11-02T08:02:00Z, more than 1m0s later"},
		{`time=2026-11-02T08:00:00Z level=INFO msg=request op=GetObject`, "n.log:1: not a JSON log record: read the log of fedgate server --log-format json"},
		{`{"time":"yesterday","msg":"request","op":"GetObject","status":200}`, `n.log:1: field time: "yesterday" is not an RFC 3339 time`},
		{`{"time":`, "n.log:1: not a fedgate JSON log record"},
	} {
		r := NewAccessLogReader("n.log", "gpu", strings.NewReader(c.in))
		var err error
		for err == nil {
			_, err = r.Next()
		}
		if err == io.EOF || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.in, err, c.want)
		}
	}

	a := NewAccessLogReader("a.log", "gpu-a", strings.NewReader(logLine(t0, "GetObject", 200, 0, 1, "a1")+"\n"+logLine(t0.Add(2*time.Second), "GetObject", 200, 0, 1, "a2")))
	b := NewAccessLogReader("b.log", "gpu-b", strings.NewReader(logLine(t0.Add(time.Second), "PutObject", 200, 1, 0, "b1")))
	next := MergeTraces(a, b)
	got = nil
	for {
		ev, err := next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.Region+":"+ev.Key)
	}
	if want := "gpu-a:a1,gpu-b:b1,gpu-a:a2"; strings.Join(got, ",") != want {
		t.Errorf("merged %v, want %s", got, want)
	}
}

package egress

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func readAll(t *testing.T, name, in string) ([]TraceEvent, error) {
	t.Helper()
	tr := NewTraceReader(name, strings.NewReader(in))
	var out []TraceEvent
	for {
		ev, err := tr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			if _, again := tr.Next(); again != err {
				t.Errorf("the reader did not stop at its error: next call gave %v", again)
			}
			return out, err
		}
		out = append(out, ev)
	}
}

// Both formats read to the same rows; CSV columns may come in any order;
// comments and blank lines are skipped; times may be RFC 3339 or Unix
// seconds.
func TestTraceFormats(t *testing.T) {
	want := []TraceEvent{
		{Time: time.Date(2026, 11, 2, 8, 0, 0, 0, time.UTC), Region: "gpu-a", Bucket: "data", Key: "train/a/x,1.tar", Size: 1 << 28, Op: OpGet},
		{Time: time.Date(2026, 11, 2, 8, 0, 0, 250_000_000, time.UTC), Region: "gpu-b", Bucket: "ckpt", Key: "run/step-1/shard-00", Size: 5, Op: OpPut},
		{Time: time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC), Region: "gpu-b", Bucket: "ckpt", Key: "run/step-1/shard-00", Size: 0, Op: OpDelete},
	}
	csvIn := "# a trace\n\nsize,op,time,region,bucket,key\n" +
		"268435456,get,2026-11-02T08:00:00Z,gpu-a,data,\"train/a/x,1.tar\"\n" +
		"5,PUT,1793606400.25,gpu-b,ckpt,run/step-1/shard-00\n" +
		"# skipped\n" +
		"0,delete,2026-11-02T10:00:00+01:00,gpu-b,ckpt,run/step-1/shard-00\n"
	jsonIn := "\n" + `{"time":"2026-11-02T08:00:00Z","region":"gpu-a","bucket":"data","key":"train/a/x,1.tar","size":268435456,"op":"get"}` + "\n" +
		`{"op":"put","size":5,"time":1793606400.25,"region":"gpu-b","bucket":"ckpt","key":"run/step-1/shard-00"}` + "\r\n\n" +
		`  {"time":"2026-11-02T09:00:00Z","region":"gpu-b","bucket":"ckpt","key":"run/step-1/shard-00","size":0,"op":"delete"}`
	for name, in := range map[string]string{"t.csv": csvIn, "t.jsonl": jsonIn} {
		got, err := readAll(t, name, in)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d rows, want %d", name, len(got), len(want))
		}
		for i := range want {
			if !got[i].Time.Equal(want[i].Time) || got[i].Region != want[i].Region || got[i].Bucket != want[i].Bucket ||
				got[i].Key != want[i].Key || got[i].Size != want[i].Size || got[i].Op != want[i].Op {
				t.Errorf("%s row %d = %+v, want %+v", name, i, got[i], want[i])
			}
		}
	}
	// What TraceWriter writes reads back the same.
	var buf bytes.Buffer
	w := NewTraceWriter(&buf)
	for _, ev := range want {
		if err := w.Write(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	back, err := readAll(t, "w.csv", buf.String())
	if err != nil || len(back) != len(want) || back[0].Key != want[0].Key || !back[1].Time.Equal(want[1].Time) {
		t.Fatalf("round trip: %+v, %v\n%s", back, err, buf.String())
	}
}

// Every bad row is an error naming the file, the line, the column and the
// field, and what was expected.
func TestTraceErrors(t *testing.T) {
	const head = "time,region,bucket,key,size,op\n"
	const ok = "2026-11-02T08:00:00Z,r,b,k,1,get\n"
	for _, c := range []struct {
		name, in string
		want     string // the whole error
	}{
		{"t.csv", "", "t.csv: empty trace: want a CSV header (time,region,bucket,key,size,op) or JSON lines"},
		{"t.csv", "time,region,bucket,key,size\n", `t.csv:1: header: no column "op": want the columns time,region,bucket,key,size,op (in any order); a CSV trace starts with its header`},
		{"t.csv", "time,region,bucket,key,size,op,extra\n", `t.csv:1:32: header: unknown column "extra": want the columns time,region,bucket,key,size,op (in any order)`},
		{"t.csv", "2026-11-02T08:00:00Z,r,b,k,1,get\n", `t.csv:1: the CSV header is missing: a CSV trace starts with a line naming its columns (time,region,bucket,key,size,op, in any order); this line names none of them`},
		{"t.csv", "time,region,bucket,key,size,opp\n", `t.csv:1:29: header: unknown column "opp": want the columns time,region,bucket,key,size,op (in any order)`},
		{"t.csv", head + ok + "2026-11-02T08:00:00Z,r,b,k,12x,get\n", `t.csv:3:28: size: "12x" is not a byte count: want a whole number of bytes, 0 or more`},
		{"t.csv", head + "2026-11-02T08:00:00Z,r,b,k,-1,get\n", `t.csv:2:28: size: "-1" is not a byte count: want a whole number of bytes, 0 or more`},
		{"t.csv", head + "2026-11-02T08:00:00Z,r,b,k,1,head\n", `t.csv:2:30: op: "head": want get, put or delete`},
		{"t.csv", head + "yesterday,r,b,k,1,get\n", `t.csv:2:1: time: "yesterday": want an RFC 3339 time (2026-11-02T08:00:00Z) or Unix seconds (1793606400)`},
		{"t.csv", head + "2026-11-02T08:00:00Z,,b,k,1,get\n", `t.csv:2:22: region: empty: want the name of a region of the policy`},
		{"t.csv", head + "2026-11-02T08:00:00Z,r,b,,1,get\n", `t.csv:2:26: key: empty: want an object key`},
		{"t.csv", head + "2026-11-02T08:00:00Z,r,b,k,1\n", `t.csv:2:1: want 6 fields (time,region,bucket,key,size,op), as in the header`},
		{"t.csv", head + ok + "2026-11-02T07:59:59Z,r,b,k,1,get\n", `t.csv:3: time: 2026-11-02T07:59:59Z is before the time of line 2 (2026-11-02T08:00:00Z): rows must be in time order (sort the trace by time first)`},
		{"t.csv", head + "2026-11-02T08:00:00Z,r,b,\"k,1,get\n", `t.csv:2:35: extraneous or missing " in quoted-field`},
		{"t.jsonl", `{"time":"2026-11-02T08:00:00Z","region":"r","bucket":"b","key":"k","size":"1","op":"get"}`, `t.jsonl:1:75: size: "1" is a string: want a number of bytes`},
		{"t.jsonl", `{"time":"2026-11-02T08:00:00Z","region":"r","bucket":"b","key":"k","size":1}`, `t.jsonl:1: op: missing: every row needs time, region, bucket, key, size, op`},
		{"t.jsonl", `{"time":"2026-11-02T08:00:00Z","region":"r","bucket":"b","key":"k","size":1,"op":"get","user":"x"}`, `t.jsonl:1:88: unknown field "user": want time, region, bucket, key, size, op`},
		{"t.jsonl", `{"time":"2026-11-02T08:00:00Z","region":"r","bucket":"b","key":"k","size":1,"op":"get"` + "\n", `t.jsonl:1:87: invalid JSON: the object does not end with }`},
		{"t.jsonl", `{"time":"2026-11-02T08:00:00Z","region":7,"bucket":"b","key":"k","size":1,"op":"get"}`, `t.jsonl:1:41: region: 7 is a number: want a string`},
		{"t.jsonl", `{"time":"2026-11-02T08:00:00Z","region":"r","bucket":"b","key":"k","size":1,"op":"get"} {}`, `t.jsonl:1:89: more than one JSON object on the line`},
		{"t.jsonl", "{\"time\":\"2026-11-02T08:00:00Z\",\"region\":\"r\",\"bucket\":\"b\",\"key\":\"k\",\"size\":1,\"op\":\"get\"}\n[1]", `t.jsonl:2:1: want a JSON object ({"time": ..., "region": ..., "bucket": ..., "key": ..., "size": ..., "op": ...}) on each line`},
	} {
		_, err := readAll(t, c.name, c.in)
		var te *TraceError
		if !errors.As(err, &te) {
			t.Errorf("%q: error %v, want a *TraceError", c.in, err)
			continue
		}
		if err.Error() != c.want {
			t.Errorf("%q:\n got %s\nwant %s", c.in, err, c.want)
		}
	}
}

// A line longer than MaxTraceLine is refused, not buffered.
func TestTraceLongLine(t *testing.T) {
	in := `{"time":"2026-11-02T08:00:00Z","region":"r","bucket":"b","key":"` + strings.Repeat("k", MaxTraceLine) + `","size":1,"op":"get"}`
	_, err := readAll(t, "t.jsonl", in)
	if err == nil || !strings.Contains(err.Error(), "t.jsonl:1: line longer than") {
		t.Fatalf("err = %v", err)
	}
}

// FuzzTraceReader: no input makes the reader panic or return a row that
// breaks its rules, and every error is a *TraceError with a position; rows
// it returns read back the same through TraceWriter. The seed corpus is
// testdata/fuzz/FuzzTraceReader.
func FuzzTraceReader(f *testing.F) {
	f.Add("time,region,bucket,key,size,op\n2026-11-02T08:00:00Z,r,b,k,1,get\n")
	f.Add(`{"time":1793606400,"region":"r","bucket":"b","key":"a/b","size":3,"op":"put"}` + "\n")
	f.Fuzz(func(t *testing.T, in string) {
		tr := NewTraceReader("f", strings.NewReader(in))
		var rows []TraceEvent
		var prev time.Time
		for {
			ev, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				var te *TraceError
				if !errors.As(err, &te) || te.File != "f" {
					t.Fatalf("error %v (%T) is not a *TraceError about the file", err, err)
				}
				if strings.TrimSpace(in) != "" && te.Line == 0 && !strings.Contains(te.Msg, "empty trace") && !strings.Contains(te.Msg, "bufio") {
					t.Fatalf("error without a line: %v", err)
				}
				return
			}
			if ev.Region == "" || ev.Bucket == "" || ev.Key == "" || len(ev.Key) > 1024 || ev.Size < 0 ||
				(ev.Op != OpGet && ev.Op != OpPut && ev.Op != OpDelete) || ev.Time.Before(prev) {
				t.Fatalf("row breaks the rules: %+v (previous time %v)", ev, prev)
			}
			prev = ev.Time
			rows = append(rows, ev)
		}
		var buf bytes.Buffer
		w := NewTraceWriter(&buf)
		for _, ev := range rows {
			if err := w.Write(ev); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		back := NewTraceReader("back", &buf)
		for i, want := range rows {
			got, err := back.Next()
			if err != nil || !got.Time.Equal(want.Time) || got.Region != want.Region || got.Bucket != want.Bucket ||
				got.Key != want.Key || got.Size != want.Size || got.Op != want.Op {
				t.Fatalf("row %d reads back as %+v, %v; want %+v", i, got, err, want)
			}
		}
		if _, err := back.Next(); err != io.EOF {
			t.Fatalf("after the rows written: %v", err)
		}
	})
}

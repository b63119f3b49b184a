package egress

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// An access trace is what `fedgate egress simulate` replays: one row per
// object read, write or delete, in time order. Two formats, told apart by
// the first byte that is not blank or a comment line:
//
// CSV, with a header naming the six columns (in any order):
//
//	time,region,bucket,key,size,op
//	2026-11-02T08:00:00Z,gpu-gcp,imagenet,train/a/shard-00001.tar,268435456,get
//
// JSON lines, one object per line with the same six names:
//
//	{"time":"2026-11-02T08:00:00Z","region":"gpu-gcp","bucket":"imagenet","key":"train/a/shard-00001.tar","size":268435456,"op":"get"}
//
// time is RFC 3339 (fractions allowed) or Unix seconds (1793606400,
// 1793606400.25); region names a region of the policy, bucket one of its
// buckets; key is the object key (1 to 1024 bytes of UTF-8); size is the
// bytes the operation moved (a whole object for get and put; 0 is fine for
// delete); op is get, put or delete. Rows must come in time order (equal
// times are fine). Blank lines, and in CSV lines starting with #, are
// skipped. docs/egress.md describes the format.

// TraceOp is what a trace row did.
type TraceOp string

// The trace operations.
const (
	OpGet    TraceOp = "get"    // a region read the object
	OpPut    TraceOp = "put"    // a region wrote (or overwrote) it
	OpDelete TraceOp = "delete" // a region deleted it
)

// TraceEvent is one row of an access trace.
type TraceEvent struct {
	Time   time.Time
	Region string
	Bucket string
	Key    string
	Size   int64
	Op     TraceOp
}

// TraceColumns are the columns of a trace, in the order TraceWriter
// writes them.
var TraceColumns = []string{"time", "region", "bucket", "key", "size", "op"}

// TraceError is a trace row that cannot be read: the file, the line
// (1-based), the column (1-based; 0 when unknown), the field, and what was
// expected.
type TraceError struct {
	File   string
	Line   int
	Column int
	Field  string // one of TraceColumns, or "" for the line as a whole
	Msg    string
}

func (e *TraceError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
		if e.Column > 0 {
			fmt.Fprintf(&b, ":%d", e.Column)
		}
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// MaxTraceLine is the longest line a trace may have (a 1024-byte key,
// escaped, fits many times over).
const MaxTraceLine = 64 << 10

// TraceReader reads an access trace, one row at a time: memory does not
// grow with the trace. It checks each row and that rows come in time
// order; the first problem is a *TraceError and ends the trace.
type TraceReader struct {
	file   string
	br     *bufio.Reader
	format string // "csv" or "jsonl", set by the first row
	csv    *csv.Reader
	cols   []int // csv: the column of each of TraceColumns
	line   int   // jsonl: lines read
	prev   time.Time
	prevAt int
	err    error
	// pos holds where each field (TraceColumns order) of the last row
	// returned is: line and column.
	pos [6][2]int
}

// NewTraceReader reads a trace from r; file names it in errors.
func NewTraceReader(file string, r io.Reader) *TraceReader {
	return &TraceReader{file: file, br: bufio.NewReaderSize(r, 64<<10)}
}

// Format returns "csv" or "jsonl" once the first row has been read.
func (t *TraceReader) Format() string { return t.format }

// Next returns the next row, io.EOF after the last one, or a *TraceError
// (and the same error on every later call).
func (t *TraceReader) Next() (TraceEvent, error) {
	if t.err != nil {
		return TraceEvent{}, t.err
	}
	ev, at, err := t.next()
	if err == nil && ev.Time.Before(t.prev) {
		err = &TraceError{File: t.file, Line: at, Field: "time", Msg: fmt.Sprintf("%s is before the time of line %d (%s): rows must be in time order (sort the trace by time first)",
			ev.Time.Format(time.RFC3339Nano), t.prevAt, t.prev.Format(time.RFC3339Nano))}
	}
	if err != nil {
		t.err = err
		return TraceEvent{}, err
	}
	t.prev, t.prevAt = ev.Time, at
	return ev, nil
}

func (t *TraceReader) next() (TraceEvent, int, error) {
	if t.format == "" {
		if err := t.sniff(); err != nil {
			return TraceEvent{}, 0, err
		}
	}
	if t.format == "csv" {
		return t.nextCSV()
	}
	return t.nextJSON()
}

// sniff decides the format from the first byte that is not blank and not
// in a # comment line.
func (t *TraceReader) sniff() error {
scan:
	for n := 0; ; n++ {
		b, err := t.br.Peek(n + 1)
		if err == io.EOF {
			return &TraceError{File: t.file, Msg: "empty trace: want a CSV header (" + strings.Join(TraceColumns, ",") + ") or JSON lines"}
		}
		if err != nil {
			return &TraceError{File: t.file, Msg: err.Error()}
		}
		c := b[n]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			continue
		case c == '#':
			t.format = "csv"
		case c == '{':
			t.format = "jsonl"
		default:
			t.format = "csv"
		}
		break scan
	}
	if t.format == "csv" {
		return t.csvHeader()
	}
	return nil
}

func (t *TraceReader) csvHeader() error {
	t.csv = csv.NewReader(t.br)
	t.csv.Comment = '#'
	t.csv.ReuseRecord = true
	head, err := t.csv.Read()
	if err == io.EOF {
		return &TraceError{File: t.file, Msg: "empty trace: only comments, no CSV header (" + strings.Join(TraceColumns, ",") + ")"}
	}
	if err != nil {
		return t.csvError(err)
	}
	t.cols = make([]int, len(TraceColumns))
	for i := range t.cols {
		t.cols[i] = -1
	}
	line, _ := t.csv.FieldPos(0)
	known := false
	for _, h := range head {
		known = known || slices.Contains(TraceColumns, strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))))
	}
	if !known {
		return &TraceError{File: t.file, Line: line, Msg: fmt.Sprintf("the CSV header is missing: a CSV trace starts with a line naming its columns (%s, in any order); this line names none of them", strings.Join(TraceColumns, ","))}
	}
	for i, h := range head {
		name := strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
		j := slices.Index(TraceColumns, name)
		_, col := t.csv.FieldPos(i)
		switch {
		case j < 0:
			return &TraceError{File: t.file, Line: line, Column: col, Msg: fmt.Sprintf("header: unknown column %q: want the columns %s (in any order)", h, strings.Join(TraceColumns, ","))}
		case t.cols[j] >= 0:
			return &TraceError{File: t.file, Line: line, Column: col, Msg: fmt.Sprintf("header: column %q given twice", name)}
		}
		t.cols[j] = i
	}
	for j, c := range t.cols {
		if c < 0 {
			return &TraceError{File: t.file, Line: line, Msg: fmt.Sprintf("header: no column %q: want the columns %s (in any order); a CSV trace starts with its header", TraceColumns[j], strings.Join(TraceColumns, ","))}
		}
	}
	t.csv.FieldsPerRecord = len(head)
	return nil
}

func (t *TraceReader) csvError(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		msg := pe.Err.Error()
		if errors.Is(pe.Err, csv.ErrFieldCount) {
			msg = fmt.Sprintf("want %d fields (%s), as in the header", t.csv.FieldsPerRecord, strings.Join(TraceColumns, ","))
		}
		return &TraceError{File: t.file, Line: pe.Line, Column: pe.Column, Msg: msg}
	}
	return &TraceError{File: t.file, Msg: err.Error()}
}

func (t *TraceReader) nextCSV() (TraceEvent, int, error) {
	rec, err := t.csv.Read()
	if err == io.EOF {
		return TraceEvent{}, 0, io.EOF
	}
	if err != nil {
		return TraceEvent{}, 0, t.csvError(err)
	}
	line, _ := t.csv.FieldPos(0)
	var ev TraceEvent
	for j, name := range TraceColumns {
		i := t.cols[j]
		if err := setField(&ev, name, rec[i]); err != nil {
			l, col := t.csv.FieldPos(i)
			return ev, line, &TraceError{File: t.file, Line: l, Column: col, Field: name, Msg: err.Error()}
		}
	}
	if err := checkEvent(ev); err != nil {
		err.File, err.Line = t.file, line
		if i := slices.Index(TraceColumns, err.Field); i >= 0 {
			_, err.Column = t.csv.FieldPos(t.cols[i])
		}
		return ev, line, err
	}
	for j := range TraceColumns {
		t.pos[j][0], t.pos[j][1] = t.csv.FieldPos(t.cols[j])
	}
	return ev, line, nil
}

// ErrorAt returns an error about a field (one of TraceColumns) of the row
// Next returned last, located at its line and column: for what the trace
// says that its reader cannot check alone (a region the policy does not
// have).
func (t *TraceReader) ErrorAt(field, msg string) error {
	p := t.position()
	return p.ErrorAt(field, msg)
}

// rowPos is where the row Next returned last is, for ErrorAt after the
// reader has moved on.
type rowPos struct {
	file string
	line int
	pos  [6][2]int
}

func (t *TraceReader) position() rowPos { return rowPos{file: t.file, line: t.prevAt, pos: t.pos} }

// ErrorAt is TraceReader.ErrorAt for the row.
func (p *rowPos) ErrorAt(field, msg string) error {
	e := &TraceError{File: p.file, Line: p.line, Field: field, Msg: msg}
	if i := slices.Index(TraceColumns, field); i >= 0 && p.pos[i][0] > 0 {
		e.Line, e.Column = p.pos[i][0], p.pos[i][1]
	}
	return e
}

func (t *TraceReader) nextJSON() (TraceEvent, int, error) {
	for {
		raw, err := t.readLine()
		if err != nil {
			return TraceEvent{}, t.line, err
		}
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		ev, err := t.parseJSON(raw)
		return ev, t.line, err
	}
}

// readLine returns the next line without its end, io.EOF after the last.
func (t *TraceReader) readLine() ([]byte, error) {
	var long []byte
	for {
		part, err := t.br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			long = append(long, part...)
			if len(long) > MaxTraceLine {
				t.line++
				return nil, &TraceError{File: t.file, Line: t.line, Msg: fmt.Sprintf("line longer than %d bytes", MaxTraceLine)}
			}
			continue
		}
		if err != nil && err != io.EOF {
			return nil, &TraceError{File: t.file, Line: t.line + 1, Msg: err.Error()}
		}
		if long != nil {
			part = append(long, part...)
		}
		if err == io.EOF && len(part) == 0 {
			return nil, io.EOF
		}
		t.line++
		if len(part) > MaxTraceLine {
			return nil, &TraceError{File: t.file, Line: t.line, Msg: fmt.Sprintf("line longer than %d bytes", MaxTraceLine)}
		}
		return bytes.TrimRight(part, "\r\n"), nil
	}
}

func (t *TraceReader) parseJSON(raw []byte) (TraceEvent, error) {
	fail := func(off int64, field, msg string) (TraceEvent, error) {
		col := 0
		if off >= 0 {
			col = utf8.RuneCount(raw[:min(int(off), len(raw))]) + 1
		}
		return TraceEvent{}, &TraceError{File: t.file, Line: t.line, Column: col, Field: field, Msg: msg}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return fail(0, "", "want a JSON object ({\"time\": ..., \"region\": ..., \"bucket\": ..., \"key\": ..., \"size\": ..., \"op\": ...}) on each line")
	}
	var ev TraceEvent
	seen := map[string]int64{}
	for dec.More() {
		keyAt := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return fail(keyAt, "", "invalid JSON: "+jsonMsg(err))
		}
		name, _ := tok.(string)
		keyAt = skipSpace(raw, keyAt)
		if !slices.Contains(TraceColumns, name) {
			return fail(keyAt, "", fmt.Sprintf("unknown field %q: want %s", name, strings.Join(TraceColumns, ", ")))
		}
		if _, dup := seen[name]; dup {
			return fail(keyAt, name, "given twice")
		}
		valAt := skipSpace(raw, dec.InputOffset())
		if valAt < int64(len(raw)) && raw[valAt] == ':' {
			valAt = skipSpace(raw, valAt+1)
		}
		seen[name] = valAt
		var v any
		if err := dec.Decode(&v); err != nil {
			return fail(valAt, name, "invalid JSON: "+jsonMsg(err))
		}
		var s string
		switch x := v.(type) {
		case string:
			s = x
			if name == "size" {
				return fail(valAt, name, fmt.Sprintf("%q is a string: want a number of bytes", x))
			}
		case json.Number:
			if name != "size" && name != "time" {
				return fail(valAt, name, fmt.Sprintf("%s is a number: want a string", x))
			}
			s = x.String()
		default:
			return fail(valAt, name, fmt.Sprintf("want a %s, not %s", jsonWant(name), jsonKind(v)))
		}
		if err := setField(&ev, name, s); err != nil {
			return fail(valAt, name, err.Error())
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return fail(dec.InputOffset(), "", "invalid JSON: the object does not end with }")
	}
	if dec.More() {
		return fail(skipSpace(raw, dec.InputOffset()), "", "more than one JSON object on the line")
	}
	if _, err := dec.Token(); err != io.EOF {
		return fail(skipSpace(raw, dec.InputOffset()), "", "text after the JSON object")
	}
	for _, name := range TraceColumns {
		if _, ok := seen[name]; !ok {
			return fail(-1, name, "missing: every row needs "+strings.Join(TraceColumns, ", "))
		}
	}
	if err := checkEvent(ev); err != nil {
		err.File, err.Line = t.file, t.line
		if off, ok := seen[err.Field]; ok {
			err.Column = utf8.RuneCount(raw[:min(int(off), len(raw))]) + 1
		}
		return TraceEvent{}, err
	}
	for j, name := range TraceColumns {
		t.pos[j] = [2]int{t.line, utf8.RuneCount(raw[:min(int(seen[name]), len(raw))]) + 1}
	}
	return ev, nil
}

func skipSpace(raw []byte, off int64) int64 {
	for off < int64(len(raw)) && (raw[off] == ' ' || raw[off] == '\t' || raw[off] == ',') {
		off++
	}
	return off
}

func jsonMsg(err error) string {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return "the line ends inside the object"
	}
	return err.Error()
}

func jsonWant(name string) string {
	switch name {
	case "size":
		return "number of bytes"
	case "time":
		return "RFC 3339 string or Unix seconds"
	}
	return "string"
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// setField parses one field of a row.
func setField(ev *TraceEvent, name, s string) error {
	switch name {
	case "time":
		t, err := ParseTraceTime(s)
		if err != nil {
			return err
		}
		ev.Time = t
	case "region":
		ev.Region = s
	case "bucket":
		ev.Bucket = s
	case "key":
		ev.Key = s
	case "size":
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("%q is not a byte count: want a whole number of bytes, 0 or more", s)
		}
		ev.Size = n
	case "op":
		switch op := TraceOp(strings.ToLower(strings.TrimSpace(s))); op {
		case OpGet, OpPut, OpDelete:
			ev.Op = op
		default:
			return fmt.Errorf("%q: want get, put or delete", s)
		}
	}
	return nil
}

// checkEvent checks what one field alone cannot.
func checkEvent(ev TraceEvent) *TraceError {
	switch {
	case ev.Region == "":
		return &TraceError{Field: "region", Msg: "empty: want the name of a region of the policy"}
	case ev.Bucket == "":
		return &TraceError{Field: "bucket", Msg: "empty: want a bucket name"}
	case ev.Key == "":
		return &TraceError{Field: "key", Msg: "empty: want an object key"}
	case len(ev.Key) > 1024:
		return &TraceError{Field: "key", Msg: fmt.Sprintf("%d bytes: an S3 key is at most 1024 bytes", len(ev.Key))}
	case !utf8.ValidString(ev.Key):
		return &TraceError{Field: "key", Msg: "not valid UTF-8"}
	case !utf8.ValidString(ev.Region) || !utf8.ValidString(ev.Bucket):
		return &TraceError{Field: "bucket", Msg: "not valid UTF-8"}
	}
	return nil
}

// minTraceTime and maxTraceTime bound the times a trace may hold: Unix
// microseconds of every time between them fit an int64 many times over.
var (
	minTraceTime = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTraceTime = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
)

// ParseTraceTime reads a trace's time: RFC 3339 (2026-11-02T08:00:00Z,
// fractions allowed) or Unix seconds (1793606400, 1793606400.25), from
// 1970 to 9999.
func ParseTraceTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	var t time.Time
	if secs, frac, ok := strings.Cut(s, "."); isDigits(secs) && (!ok || isDigits(frac)) {
		n, err := strconv.ParseInt(secs, 10, 64)
		if err != nil || n > maxTraceTime.Unix() {
			return time.Time{}, fmt.Errorf("%q: Unix seconds out of range (1970 to 9999)", s)
		}
		var ns int64
		if ok {
			f := (frac + "000000000")[:9]
			ns, _ = strconv.ParseInt(f, 10, 64)
		}
		t = time.Unix(n, ns).UTC()
	} else if ft, ok := parseUTCFast(s); ok {
		t = ft
	} else {
		var err error
		t, err = time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return time.Time{}, fmt.Errorf("%q: want an RFC 3339 time (2026-11-02T08:00:00Z) or Unix seconds (1793606400)", s)
		}
		t = t.UTC()
	}
	if t.Before(minTraceTime) || t.After(maxTraceTime) {
		return time.Time{}, fmt.Errorf("%q: out of range (1970 to 9999)", s)
	}
	return t, nil
}

// parseUTCFast reads the common form of a trace time,
// 2026-11-02T08:00:00Z or 2026-11-02T08:00:00.25Z, without time.Parse;
// ok false for anything else (time.Parse then decides, and words the
// error), a date that does not exist included.
func parseUTCFast(s string) (t time.Time, ok bool) {
	if len(s) < 20 || s[len(s)-1] != 'Z' || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return t, false
	}
	num := func(a, b int) (int, bool) {
		n := 0
		for i := a; i < b; i++ {
			c := s[i]
			if c < '0' || c > '9' {
				return 0, false
			}
			n = n*10 + int(c-'0')
		}
		return n, true
	}
	y, ok1 := num(0, 4)
	mo, ok2 := num(5, 7)
	d, ok3 := num(8, 10)
	h, ok4 := num(11, 13)
	mi, ok5 := num(14, 16)
	sec, ok6 := num(17, 19)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || sec > 59 {
		return t, false
	}
	ns := 0
	switch rest := s[19 : len(s)-1]; {
	case rest == "":
	case len(rest) >= 2 && len(rest) <= 10 && rest[0] == '.':
		f, okf := num(20, len(s)-1)
		if !okf {
			return t, false
		}
		for range 10 - len(rest) {
			f *= 10
		}
		ns = f
	default:
		return t, false
	}
	t = time.Date(y, time.Month(mo), d, h, mi, sec, ns, time.UTC)
	if t.Day() != d { // 2026-02-30 and the like: time.Parse says why
		return time.Time{}, false
	}
	return t, true
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// TraceWriter writes an access trace as CSV (header first), the format
// TraceReader reads.
type TraceWriter struct {
	w     *csv.Writer
	wrote bool
	rec   []string
}

// NewTraceWriter writes a CSV trace to w; call Flush at the end.
func NewTraceWriter(w io.Writer) *TraceWriter {
	return &TraceWriter{w: csv.NewWriter(w), rec: make([]string, len(TraceColumns))}
}

// Write writes one row (the header before the first).
func (t *TraceWriter) Write(ev TraceEvent) error {
	if !t.wrote {
		t.wrote = true
		if err := t.w.Write(TraceColumns); err != nil {
			return err
		}
	}
	t.rec[0] = ev.Time.UTC().Format(time.RFC3339Nano)
	t.rec[1], t.rec[2], t.rec[3] = ev.Region, ev.Bucket, ev.Key
	t.rec[4] = strconv.FormatInt(ev.Size, 10)
	t.rec[5] = string(ev.Op)
	return t.w.Write(t.rec)
}

// Flush writes what is buffered (the header alone for an empty trace).
func (t *TraceWriter) Flush() error {
	if !t.wrote {
		t.wrote = true
		if err := t.w.Write(TraceColumns); err != nil {
			return err
		}
	}
	t.w.Flush()
	return t.w.Error()
}

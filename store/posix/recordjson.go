package posix

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// decodeRecord decodes a record's JSON. Records as json.Marshal writes
// them are decoded by hand, without encoding/json's reflection (a fifth of
// a listing's time per key went to it); anything else (a null, an unknown
// or repeated field, a name in another case, a key, a surrogate escape,
// invalid UTF-8, bad JSON) goes to json.Unmarshal, so the result is always
// json.Unmarshal's (FuzzDecodeRecord checks that).
func decodeRecord(js []byte) (record, error) {
	if r, ok := decodeRecordFast(js); ok {
		return r, nil
	}
	var r record
	err := json.Unmarshal(js, &r)
	return r, err
}

// recDec is decodeRecordFast's cursor.
type recDec struct {
	b []byte
	i int
}

func (d *recDec) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// eat skips white space and then c, if it is there.
func (d *recDec) eat(c byte) bool {
	d.ws()
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// str reads a string in valid UTF-8 whose escapes, if any, are JSON's
// short ones or \u of a character outside the surrogates (json.Marshal
// writes \u003c, \u0026 and \u003e for <, & and >).
func (d *recDec) str() (string, bool) {
	if !d.eat('"') {
		return "", false
	}
	start, ascii := d.i, true
	for ; d.i < len(d.b); d.i++ {
		switch c := d.b[d.i]; {
		case c == '"':
			s := d.b[start:d.i]
			d.i++
			if !ascii && !utf8.Valid(s) {
				return "", false
			}
			return string(s), true
		case c == '\\':
			return d.escaped(start)
		case c < 0x20:
			return "", false
		case c >= 0x80:
			ascii = false
		}
	}
	return "", false
}

// escaped goes on reading the string that starts at start from its first
// backslash, at d.i.
func (d *recDec) escaped(start int) (string, bool) {
	out := append([]byte(nil), d.b[start:d.i]...)
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			if !utf8.Valid(out) {
				return "", false
			}
			return string(out), true
		case c < 0x20:
			return "", false
		case c != '\\':
			out = append(out, c)
			d.i++
			continue
		}
		if d.i+1 >= len(d.b) {
			return "", false
		}
		e := d.b[d.i+1]
		d.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			if d.i+4 > len(d.b) {
				return "", false
			}
			v, err := strconv.ParseUint(string(d.b[d.i:d.i+4]), 16, 16)
			if err != nil || (v >= 0xd800 && v < 0xe000) {
				return "", false
			}
			out = utf8.AppendRune(out, rune(v))
			d.i += 4
		default:
			return "", false
		}
	}
	return "", false
}

// int reads an integer as JSON writes one (no fraction, no exponent).
func (d *recDec) int() (int64, bool) {
	d.ws()
	start := d.i
	if d.i < len(d.b) && d.b[d.i] == '-' {
		d.i++
	}
	digits := d.i
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		d.i++
	}
	n := d.i - digits
	if n == 0 || (n > 1 && d.b[digits] == '0') {
		return 0, false
	}
	if d.i < len(d.b) && (d.b[d.i] == '.' || d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		return 0, false
	}
	v, err := strconv.ParseInt(string(d.b[start:d.i]), 10, 64)
	return v, err == nil
}

// strMap reads an object of strings.
func (d *recDec) strMap() (map[string]string, bool) {
	if !d.eat('{') {
		return nil, false
	}
	m := map[string]string{}
	if d.eat('}') {
		return m, true
	}
	for {
		k, ok := d.str()
		if !ok || !d.eat(':') {
			return nil, false
		}
		if _, dup := m[k]; dup {
			return nil, false
		}
		if m[k], ok = d.str(); !ok {
			return nil, false
		}
		if d.eat('}') {
			return m, true
		}
		if !d.eat(',') {
			return nil, false
		}
	}
}

// recordFields are the names decodeRecordFast knows, as json.Marshal
// writes them (key, base64, is left to encoding/json).
var recordFields = [...]string{"size", "etag", "content_type", "cache_control", "content_disposition",
	"content_encoding", "content_language", "expires", "user", "checksums"}

func decodeRecordFast(js []byte) (record, bool) {
	var r record
	d := recDec{b: js}
	if !d.eat('{') {
		return r, false
	}
	var seen uint16
	if !d.eat('}') {
		for {
			name, ok := d.str()
			if !ok || !d.eat(':') {
				return r, false
			}
			f := -1
			for i, n := range recordFields {
				if n == name {
					f = i
					break
				}
			}
			if f < 0 || seen&(1<<f) != 0 {
				return r, false
			}
			seen |= 1 << f
			if !d.field(&r, f) {
				return r, false
			}
			if d.eat('}') {
				break
			}
			if !d.eat(',') {
				return r, false
			}
		}
	}
	d.ws()
	return r, d.i == len(d.b)
}

// field reads the value of recordFields[f] into r.
func (d *recDec) field(r *record, f int) bool {
	var ok bool
	switch f {
	case 0:
		r.Size, ok = d.int()
	case 1:
		r.ETag, ok = d.str()
	case 2:
		r.ContentType, ok = d.str()
	case 3:
		r.CacheControl, ok = d.str()
	case 4:
		r.ContentDisposition, ok = d.str()
	case 5:
		r.ContentEncoding, ok = d.str()
	case 6:
		r.ContentLanguage, ok = d.str()
	case 7:
		r.Expires, ok = d.str()
	case 8:
		r.User, ok = d.strMap()
	case 9:
		r.Checksums, ok = d.strMap()
	}
	return ok
}

package lifecycle

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"time"
)

// The XML of PutBucketLifecycleConfiguration and
// GetBucketLifecycleConfiguration. Elements S3 allows once are read as
// lists so that a repeated one is MalformedXML rather than silently merged.

type xmlConfig struct {
	XMLName xml.Name  `xml:"LifecycleConfiguration"`
	Xmlns   string    `xml:"xmlns,attr,omitempty"`
	Rules   []xmlRule `xml:"Rule"`
}

type xmlRule struct {
	ID                             []string         `xml:"ID"`
	Prefix                         []string         `xml:"Prefix"`
	Filter                         []xmlFilter      `xml:"Filter"`
	Status                         []string         `xml:"Status"`
	Expiration                     []xmlExpiration  `xml:"Expiration"`
	Transition                     []struct{}       `xml:"Transition"`
	NoncurrentVersionTransition    []struct{}       `xml:"NoncurrentVersionTransition"`
	NoncurrentVersionExpiration    []xmlNoncurrent  `xml:"NoncurrentVersionExpiration"`
	AbortIncompleteMultipartUpload []xmlAbortUpload `xml:"AbortIncompleteMultipartUpload"`
}

type xmlFilter struct {
	xmlAnd
	And []xmlAnd `xml:"And"`
}

// xmlAnd is the conditions of an And element, which a Filter may also
// hold directly.
type xmlAnd struct {
	Prefix                []string `xml:"Prefix"`
	Tag                   []xmlTag `xml:"Tag"`
	ObjectSizeGreaterThan []int64  `xml:"ObjectSizeGreaterThan"`
	ObjectSizeLessThan    []int64  `xml:"ObjectSizeLessThan"`
	Other                 []xmlAny `xml:",any"`
}

type xmlAny struct {
	XMLName xml.Name
}

type xmlTag struct {
	Key   []string `xml:"Key"`
	Value []string `xml:"Value"`
}

type xmlExpiration struct {
	Days                      []int64  `xml:"Days"`
	Date                      []string `xml:"Date"`
	ExpiredObjectDeleteMarker []bool   `xml:"ExpiredObjectDeleteMarker"`
}

type xmlNoncurrent struct {
	NoncurrentDays          []int64 `xml:"NoncurrentDays"`
	NewerNoncurrentVersions []int64 `xml:"NewerNoncurrentVersions"`
}

type xmlAbortUpload struct {
	DaysAfterInitiation []int64 `xml:"DaysAfterInitiation"`
}

// one returns the only element of s: ok=false when there are several.
func one[T any](s []T) (v T, set, ok bool) {
	switch len(s) {
	case 0:
		return v, false, true
	case 1:
		return s[0], true, true
	}
	return v, true, false
}

// ParseXML reads and validates a LifecycleConfiguration document as S3
// does. Errors are *Error: MalformedXML for a document that does not fit
// the schema, InvalidArgument / InvalidRequest for values S3 refuses,
// NotImplemented for transitions (fedgate has no storage classes).
func ParseXML(data []byte) (Configuration, error) {
	var x xmlConfig
	if err := decodeStrict(data, &x); err != nil {
		return Configuration{}, err
	}
	if len(x.Rules) > MaxRules {
		return Configuration{}, invalidReq("The number of lifecycle rules should not exceed allowed limit of 1000 rules")
	}
	var c Configuration
	for _, xr := range x.Rules {
		r, err := xr.rule()
		if err != nil {
			return Configuration{}, err
		}
		c.Rules = append(c.Rules, r)
	}
	if err := c.Validate(); err != nil {
		return Configuration{}, err
	}
	return c, nil
}

// decodeStrict decodes one XML document; anything but white space,
// comments or processing instructions after it is MalformedXML.
func decodeStrict(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return errMalformed
	}
	dec := xml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return errMalformed
	}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return errMalformed
		}
		switch t := tok.(type) {
		case xml.CharData:
			if len(bytes.TrimSpace(t)) != 0 {
				return errMalformed
			}
		case xml.Comment, xml.ProcInst:
		default:
			return errMalformed
		}
	}
}

func (xr xmlRule) rule() (Rule, error) {
	var r Rule
	if len(xr.Transition) > 0 || len(xr.NoncurrentVersionTransition) > 0 {
		return r, &Error{CodeNotImplemented, "Lifecycle transitions (Transition, NoncurrentVersionTransition) are not implemented: fedgate has no storage classes."}
	}
	id, _, ok1 := one(xr.ID)
	status, hasStatus, ok2 := one(xr.Status)
	prefix, hasPrefix, ok3 := one(xr.Prefix)
	filter, hasFilter, ok4 := one(xr.Filter)
	exp, hasExp, ok5 := one(xr.Expiration)
	nc, hasNC, ok6 := one(xr.NoncurrentVersionExpiration)
	ab, hasAb, ok7 := one(xr.AbortIncompleteMultipartUpload)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || !ok7 || !hasStatus {
		return r, errMalformed
	}
	r.ID = strings.TrimSpace(id)
	switch strings.TrimSpace(status) {
	case "Enabled":
		r.Enabled = true
	case "Disabled":
	default:
		return r, errMalformed
	}
	var err error
	if r.Filter, r.LegacyPrefix, err = ruleFilter(prefix, hasPrefix, filter, hasFilter); err != nil {
		return r, err
	}
	if hasExp {
		e, err := exp.expiration()
		if err != nil {
			return r, err
		}
		r.Expiration = e
	}
	if hasNC {
		if r.NoncurrentVersionExpiration, err = nc.noncurrent(); err != nil {
			return r, err
		}
	}
	if hasAb {
		if r.AbortIncompleteMultipartUploadDays, err = ab.days(); err != nil {
			return r, err
		}
	}
	return r, nil
}

// ruleFilter is a rule's filter: the legacy Prefix element (legacy true) or
// the Filter element, exactly one of them.
func ruleFilter(prefix string, hasPrefix bool, filter xmlFilter, hasFilter bool) (f Filter, legacy bool, err error) {
	switch {
	case hasPrefix && hasFilter:
		return Filter{}, false, errMalformed
	case hasPrefix:
		return Filter{Prefix: prefix}, true, nil
	case hasFilter:
		f, err := filter.filter()
		return f, false, err
	}
	return Filter{}, false, errMalformed
}

func (nc xmlNoncurrent) noncurrent() (*NoncurrentVersionExpiration, error) {
	days, hasDays, ok := one(nc.NoncurrentDays)
	newer, _, ok2 := one(nc.NewerNoncurrentVersions)
	if !ok || !ok2 || !hasDays {
		return nil, errMalformed
	}
	if days <= 0 || days > 1<<31-1 {
		return nil, invalidArg("'NoncurrentDays' for NoncurrentVersionExpiration action must be a positive integer")
	}
	if newer < 0 || newer > MaxNewerNoncurrentVersions {
		return nil, invalidArg("'NewerNoncurrentVersions' for NoncurrentVersionExpiration action must be a positive integer up to 100")
	}
	return &NoncurrentVersionExpiration{NoncurrentDays: int(days), NewerNoncurrentVersions: int(newer)}, nil
}

func (ab xmlAbortUpload) days() (int, error) {
	days, hasDays, ok := one(ab.DaysAfterInitiation)
	if !ok || !hasDays {
		return 0, errMalformed
	}
	if days <= 0 || days > 1<<31-1 {
		return 0, invalidArg("'DaysAfterInitiation' for AbortIncompleteMultipartUpload action must be a positive integer")
	}
	return int(days), nil
}

func (x xmlExpiration) expiration() (*Expiration, error) {
	days, hasDays, ok1 := one(x.Days)
	date, hasDate, ok2 := one(x.Date)
	marker, hasMarker, ok3 := one(x.ExpiredObjectDeleteMarker)
	if !ok1 || !ok2 || !ok3 {
		return nil, errMalformed
	}
	e := &Expiration{ExpiredObjectDeleteMarker: marker}
	if hasDays {
		if days <= 0 || days > 1<<31-1 {
			return nil, invalidArg("'Days' for Expiration action must be a positive integer")
		}
		e.Days = int(days)
	}
	if hasDate {
		t, err := parseDate(date)
		if err != nil {
			return nil, invalidArg("'Date' must be an ISO 8601 date at midnight GMT")
		}
		if !isMidnightUTC(t) {
			return nil, invalidArg("'Date' must be at midnight GMT")
		}
		e.Date = t.UTC()
	}
	if !hasDays && !hasDate && !hasMarker {
		return nil, errMalformed
	}
	if hasMarker && !marker && !hasDays && !hasDate {
		// <ExpiredObjectDeleteMarker>false</...> alone is no action.
		return nil, errMalformed
	}
	return e, nil
}

func parseDate(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, errMalformed
}

func (x xmlFilter) filter() (Filter, error) {
	var f Filter
	if len(x.Other) > 0 {
		return f, errMalformed
	}
	prefix, hasPrefix, ok1 := one(x.Prefix)
	tag, hasTag, ok2 := one(x.Tag)
	gt, hasGT, ok3 := one(x.ObjectSizeGreaterThan)
	lt, hasLT, ok4 := one(x.ObjectSizeLessThan)
	and, hasAnd, ok5 := one(x.And)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		return f, errMalformed
	}
	set := 0
	for _, b := range []bool{hasPrefix, hasTag, hasGT, hasLT, hasAnd} {
		if b {
			set++
		}
	}
	if set > 1 {
		// Several conditions go in And.
		return f, errMalformed
	}
	switch {
	case hasPrefix:
		f.Prefix = prefix
	case hasTag:
		t, err := tag.tag()
		if err != nil {
			return f, err
		}
		f.Tags = []Tag{t}
	case hasGT:
		f.ObjectSizeGreaterThan = &gt
	case hasLT:
		f.ObjectSizeLessThan = &lt
	case hasAnd:
		if len(and.Other) > 0 {
			return f, errMalformed
		}
		p, _, ok1 := one(and.Prefix)
		agt, hasAGT, ok2 := one(and.ObjectSizeGreaterThan)
		alt, hasALT, ok3 := one(and.ObjectSizeLessThan)
		if !ok1 || !ok2 || !ok3 {
			return f, errMalformed
		}
		f.Prefix = p
		if hasAGT {
			f.ObjectSizeGreaterThan = &agt
		}
		if hasALT {
			f.ObjectSizeLessThan = &alt
		}
		for _, xt := range and.Tag {
			t, err := xt.tag()
			if err != nil {
				return f, err
			}
			f.Tags = append(f.Tags, t)
		}
	}
	return f, nil
}

func (x xmlTag) tag() (Tag, error) {
	k, hasK, ok1 := one(x.Key)
	v, _, ok2 := one(x.Value)
	if !ok1 || !ok2 || !hasK {
		return Tag{}, errMalformed
	}
	return Tag{Key: k, Value: v}, nil
}

// The XML fedgate returns (GetBucketLifecycleConfiguration) and stores.

type outConfig struct {
	XMLName xml.Name  `xml:"LifecycleConfiguration"`
	Xmlns   string    `xml:"xmlns,attr,omitempty"`
	Rules   []outRule `xml:"Rule"`
}

type outRule struct {
	ID                             string          `xml:"ID,omitempty"`
	Prefix                         *string         `xml:"Prefix"`
	Filter                         *outFilter      `xml:"Filter"`
	Status                         string          `xml:"Status"`
	Expiration                     *outExpiration  `xml:"Expiration"`
	NoncurrentVersionExpiration    *outNoncurrent  `xml:"NoncurrentVersionExpiration"`
	AbortIncompleteMultipartUpload *outAbortUpload `xml:"AbortIncompleteMultipartUpload"`
}

type outFilter struct {
	Prefix                *string `xml:"Prefix"`
	Tag                   *outTag `xml:"Tag"`
	ObjectSizeGreaterThan *int64  `xml:"ObjectSizeGreaterThan"`
	ObjectSizeLessThan    *int64  `xml:"ObjectSizeLessThan"`
	And                   *outAnd `xml:"And"`
}

type outAnd struct {
	Prefix                *string  `xml:"Prefix"`
	Tags                  []outTag `xml:"Tag"`
	ObjectSizeGreaterThan *int64   `xml:"ObjectSizeGreaterThan"`
	ObjectSizeLessThan    *int64   `xml:"ObjectSizeLessThan"`
}

type outTag struct {
	Key   string `xml:"Key"`
	Value string `xml:"Value"`
}

type outExpiration struct {
	Days                      int    `xml:"Days,omitempty"`
	Date                      string `xml:"Date,omitempty"`
	ExpiredObjectDeleteMarker bool   `xml:"ExpiredObjectDeleteMarker,omitempty"`
}

type outNoncurrent struct {
	NoncurrentDays          int `xml:"NoncurrentDays"`
	NewerNoncurrentVersions int `xml:"NewerNoncurrentVersions,omitempty"`
}

type outAbortUpload struct {
	DaysAfterInitiation int `xml:"DaysAfterInitiation"`
}

// DateLayout is how a rule's Expiration Date is written in XML.
const DateLayout = "2006-01-02T15:04:05.000Z"

// XML is the configuration as a LifecycleConfiguration document in
// namespace xmlns ("" for none); ParseXML reads it back to an equal
// configuration.
func (c Configuration) XML(xmlns string) ([]byte, error) {
	out := outConfig{Xmlns: xmlns}
	for _, r := range c.Rules {
		or := outRule{ID: r.ID, Status: "Disabled"}
		if r.Enabled {
			or.Status = "Enabled"
		}
		if r.LegacyPrefix {
			p := r.Filter.Prefix
			or.Prefix = &p
		} else {
			or.Filter = r.Filter.out()
		}
		if e := r.Expiration; e != nil {
			oe := &outExpiration{Days: e.Days, ExpiredObjectDeleteMarker: e.ExpiredObjectDeleteMarker}
			if !e.Date.IsZero() {
				oe.Date = e.Date.UTC().Format(DateLayout)
			}
			or.Expiration = oe
		}
		if n := r.NoncurrentVersionExpiration; n != nil {
			or.NoncurrentVersionExpiration = &outNoncurrent{NoncurrentDays: n.NoncurrentDays, NewerNoncurrentVersions: n.NewerNoncurrentVersions}
		}
		if d := r.AbortIncompleteMultipartUploadDays; d > 0 {
			or.AbortIncompleteMultipartUpload = &outAbortUpload{DaysAfterInitiation: d}
		}
		out.Rules = append(out.Rules, or)
	}
	return xml.Marshal(out)
}

// out is the filter's XML: one condition as itself, several in And, none
// as an empty Filter.
func (f Filter) out() *outFilter {
	of := &outFilter{}
	switch f.conditions() {
	case 0:
	case 1:
		switch {
		case f.Prefix != "":
			p := f.Prefix
			of.Prefix = &p
		case len(f.Tags) == 1:
			of.Tag = &outTag{f.Tags[0].Key, f.Tags[0].Value}
		case f.ObjectSizeGreaterThan != nil:
			of.ObjectSizeGreaterThan = f.ObjectSizeGreaterThan
		default:
			of.ObjectSizeLessThan = f.ObjectSizeLessThan
		}
	default:
		and := &outAnd{ObjectSizeGreaterThan: f.ObjectSizeGreaterThan, ObjectSizeLessThan: f.ObjectSizeLessThan}
		if f.Prefix != "" {
			p := f.Prefix
			and.Prefix = &p
		}
		for _, t := range f.Tags {
			and.Tags = append(and.Tags, outTag(t))
		}
		of.And = and
	}
	return of
}

// Package lifecycle is S3's bucket lifecycle configuration as fedgate
// applies it: the rules, their validation with S3's error codes and
// messages, the LifecycleConfiguration XML of S3 clients, and which objects
// and multipart uploads a rule applies to, and when.
//
// It is a leaf (it imports nothing of fedgate): the gateway reads and
// writes the XML (Put/Get/DeleteBucketLifecycleConfiguration), the policy
// file's buckets[].lifecycle decodes into the same Rule (package policies),
// and the region leader's runner (package federation) applies them.
package lifecycle

import (
	"math"
	"net/url"
	"strings"
	"time"
)

// MaxRules is S3's limit on the rules of one configuration.
const MaxRules = 1000

// MaxIDLength is the longest rule ID, in characters.
const MaxIDLength = 255

// MaxNewerNoncurrentVersions bounds NewerNoncurrentVersions (S3's limit).
const MaxNewerNoncurrentVersions = 100

// TaggingMetaKey is the reserved user-metadata entry that holds an
// object's tags with the object, URL-query encoded (gateway/tagging.go
// writes it; a gateway test keeps the two names equal).
const TaggingMetaKey = "fedgate-tagging"

// Configuration is a bucket's lifecycle configuration: 1 to MaxRules rules.
type Configuration struct {
	Rules []Rule
}

// Rule is one lifecycle rule.
type Rule struct {
	ID      string
	Enabled bool // Status Enabled (true) or Disabled
	Filter  Filter
	// LegacyPrefix: the rule named its prefix with the top-level Prefix
	// element of the older API rather than a Filter; it is returned so.
	LegacyPrefix bool

	Expiration                  *Expiration
	NoncurrentVersionExpiration *NoncurrentVersionExpiration
	// AbortIncompleteMultipartUploadDays: uploads initiated more than this
	// many days ago are aborted (0: the rule has no such action).
	AbortIncompleteMultipartUploadDays int
}

// Filter selects the objects a rule applies to: every condition set must
// hold. The zero Filter selects the whole bucket.
type Filter struct {
	Prefix string
	Tags   []Tag
	// ObjectSizeGreaterThan and ObjectSizeLessThan, in bytes (nil: no bound).
	ObjectSizeGreaterThan *int64
	ObjectSizeLessThan    *int64
}

// Tag is one object tag a filter requires.
type Tag struct{ Key, Value string }

// Expiration expires current objects: Days after they were last modified
// (rounded up to the next midnight UTC, as S3 does), or on Date (midnight
// UTC) and after (in a versioned bucket: a delete marker is added).
// ExpiredObjectDeleteMarker removes delete markers that are their key's
// only version (versioned buckets).
type Expiration struct {
	Days                      int
	Date                      time.Time
	ExpiredObjectDeleteMarker bool
}

// NoncurrentVersionExpiration applies to versioned buckets only: a
// version NoncurrentDays after it stopped being current is removed for
// good, except the NewerNoncurrentVersions newest noncurrent ones.
type NoncurrentVersionExpiration struct {
	NoncurrentDays          int
	NewerNoncurrentVersions int
}

// Error is a configuration S3 refuses, with S3's error code and message.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Message }

// S3 error codes of Error.
const (
	CodeMalformedXML    = "MalformedXML"
	CodeInvalidArgument = "InvalidArgument"
	CodeInvalidRequest  = "InvalidRequest"
	CodeNotImplemented  = "NotImplemented"
)

var errMalformed = &Error{CodeMalformedXML, "The XML you provided was not well-formed or did not validate against our published schema"}

func invalidArg(msg string) error { return &Error{CodeInvalidArgument, msg} }
func invalidReq(msg string) error { return &Error{CodeInvalidRequest, msg} }

// HasTagFilter reports whether the filter needs the object's tags.
func (f Filter) HasTagFilter() bool { return len(f.Tags) > 0 }

// conditions counts the filter's conditions.
func (f Filter) conditions() int {
	n := len(f.Tags)
	if f.Prefix != "" {
		n++
	}
	if f.ObjectSizeGreaterThan != nil {
		n++
	}
	if f.ObjectSizeLessThan != nil {
		n++
	}
	return n
}

// Validate checks a configuration as S3 does, returning an *Error.
func (c Configuration) Validate() error {
	if len(c.Rules) == 0 {
		return errMalformed
	}
	if len(c.Rules) > MaxRules {
		return invalidReq("The number of lifecycle rules should not exceed allowed limit of 1000 rules")
	}
	ids := map[string]bool{}
	for i := range c.Rules {
		r := &c.Rules[i]
		if err := r.Validate(); err != nil {
			return err
		}
		if r.ID != "" {
			if ids[r.ID] {
				return invalidArg("Rule ID must be unique. Found same ID for more than one rule")
			}
			ids[r.ID] = true
		}
	}
	return nil
}

// Validate checks one rule as S3 does, returning an *Error: the ID and
// that there is an action, then the filter, then each action in turn (the
// first error found, in this order, is the answer).
func (r *Rule) Validate() error {
	if len([]rune(r.ID)) > MaxIDLength {
		return invalidArg("ID length should not exceed allowed limit of 255")
	}
	if r.Expiration == nil && r.NoncurrentVersionExpiration == nil && r.AbortIncompleteMultipartUploadDays == 0 {
		return invalidReq("At least one action needs to be specified in a rule")
	}
	if err := r.Filter.validate(); err != nil {
		return err
	}
	if err := r.Expiration.validate(r.Filter); err != nil {
		return err
	}
	if err := r.NoncurrentVersionExpiration.validate(); err != nil {
		return err
	}
	return validateAbort(r.AbortIncompleteMultipartUploadDays, r.Filter)
}

// validate checks the filter's size bounds and tags.
func (f Filter) validate() error {
	if f.ObjectSizeGreaterThan != nil && *f.ObjectSizeGreaterThan < 0 {
		return invalidArg("'ObjectSizeGreaterThan' must be a non-negative integer")
	}
	if f.ObjectSizeLessThan != nil && *f.ObjectSizeLessThan <= 0 {
		return invalidArg("'ObjectSizeLessThan' must be a positive integer")
	}
	if f.ObjectSizeGreaterThan != nil && f.ObjectSizeLessThan != nil && *f.ObjectSizeGreaterThan >= *f.ObjectSizeLessThan {
		return invalidArg("ObjectSizeLessThan must be greater than ObjectSizeGreaterThan")
	}
	seen := map[string]bool{}
	for _, t := range f.Tags {
		if t.Key == "" || len([]rune(t.Key)) > 128 || len([]rune(t.Value)) > 256 {
			return &Error{"InvalidTag", "The TagKey you have provided is invalid"}
		}
		if seen[t.Key] {
			return invalidReq("Duplicate Tag Keys are not allowed.")
		}
		seen[t.Key] = true
	}
	return nil
}

// validate checks an Expiration action (nil: none) of a rule with filter f:
// exactly one of Days, Date and ExpiredObjectDeleteMarker.
func (e *Expiration) validate(f Filter) error {
	if e == nil {
		return nil
	}
	set := 0
	for _, on := range []bool{e.Days != 0, !e.Date.IsZero(), e.ExpiredObjectDeleteMarker} {
		if on {
			set++
		}
	}
	switch {
	case e.Days < 0 || e.Days > math.MaxInt32:
		return invalidArg("'Days' for Expiration action must be a positive integer")
	case set == 0:
		return errMalformed
	case set > 1 && e.ExpiredObjectDeleteMarker:
		return invalidReq("ExpiredObjectDeleteMarker cannot be specified with Days or Date in a Lifecycle Expiration Policy")
	case set > 1:
		return errMalformed
	case !e.Date.IsZero() && !isMidnightUTC(e.Date):
		return invalidArg("'Date' must be at midnight GMT")
	case e.ExpiredObjectDeleteMarker && f.HasTagFilter():
		return invalidReq("ExpiredObjectDeleteMarker cannot be specified with a Tag-based filter")
	}
	return nil
}

// validate checks a NoncurrentVersionExpiration action (nil: none).
func (n *NoncurrentVersionExpiration) validate() error {
	switch {
	case n == nil:
		return nil
	case n.NoncurrentDays <= 0 || n.NoncurrentDays > math.MaxInt32:
		return invalidArg("'NoncurrentDays' for NoncurrentVersionExpiration action must be a positive integer")
	case n.NewerNoncurrentVersions < 0 || n.NewerNoncurrentVersions > MaxNewerNoncurrentVersions:
		return invalidArg("'NewerNoncurrentVersions' for NoncurrentVersionExpiration action must be a positive integer up to 100")
	}
	return nil
}

// validateAbort checks an AbortIncompleteMultipartUpload action of d days
// (0: none) of a rule with filter f.
func validateAbort(d int, f Filter) error {
	switch {
	case d == 0:
		return nil
	case d < 0 || d > math.MaxInt32:
		return invalidArg("'DaysAfterInitiation' for AbortIncompleteMultipartUpload action must be a positive integer")
	case f.HasTagFilter():
		return invalidReq("AbortIncompleteMultipartUpload cannot be specified with Tags.")
	case f.ObjectSizeGreaterThan != nil || f.ObjectSizeLessThan != nil:
		return invalidReq("AbortIncompleteMultipartUpload cannot be specified with an object size filter.")
	}
	return nil
}

func isMidnightUTC(t time.Time) bool {
	t = t.UTC()
	return t.Hour() == 0 && t.Minute() == 0 && t.Second() == 0 && t.Nanosecond() == 0
}

// Matches reports whether an object of key, size and tags is selected by
// the filter.
func (f Filter) Matches(key string, size int64, tags map[string]string) bool {
	if !strings.HasPrefix(key, f.Prefix) {
		return false
	}
	if f.ObjectSizeGreaterThan != nil && size <= *f.ObjectSizeGreaterThan {
		return false
	}
	if f.ObjectSizeLessThan != nil && size >= *f.ObjectSizeLessThan {
		return false
	}
	for _, t := range f.Tags {
		if v, ok := tags[t.Key]; !ok || v != t.Value {
			return false
		}
	}
	return true
}

// afterDays is S3's due time of an action days after t: t plus the days,
// rounded up to the next midnight UTC.
func afterDays(t time.Time, days int) time.Time {
	due := t.UTC().Add(time.Duration(days) * 24 * time.Hour)
	mid := due.Truncate(24 * time.Hour)
	if mid.Before(due) {
		mid = mid.Add(24 * time.Hour)
	}
	return mid
}

// Expires reports whether the rule's Expiration (Days or Date) has come,
// at now, for a current object last modified at modTime. A disabled rule
// or one without such an action never expires anything.
func (r *Rule) Expires(modTime, now time.Time) bool {
	e := r.Expiration
	switch {
	case !r.Enabled || e == nil:
		return false
	case e.Days > 0:
		return !now.Before(afterDays(modTime, e.Days))
	case !e.Date.IsZero():
		return !now.Before(e.Date)
	}
	return false
}

// ExpiresNoncurrent reports whether the rule's NoncurrentVersionExpiration
// removes, at now, a noncurrent version that became noncurrent at since and
// has newer noncurrent versions before it (0 for the newest noncurrent
// version). S3 keeps NewerNoncurrentVersions of them whatever their age.
func (r *Rule) ExpiresNoncurrent(since time.Time, newer int, now time.Time) bool {
	e := r.NoncurrentVersionExpiration
	if !r.Enabled || e == nil || e.NoncurrentDays <= 0 || newer < e.NewerNoncurrentVersions {
		return false
	}
	return !now.Before(afterDays(since, e.NoncurrentDays))
}

// RemovesExpiredMarker reports whether the rule removes a delete marker
// that is its key's only version (ExpiredObjectDeleteMarker; an Expiration
// with Days or Date removes such markers too, as in S3).
func (r *Rule) RemovesExpiredMarker() bool {
	e := r.Expiration
	return r.Enabled && e != nil && (e.ExpiredObjectDeleteMarker || e.Days > 0 || !e.Date.IsZero())
}

// AbortsUpload reports whether the rule aborts, at now, a multipart upload
// of key initiated at created.
func (r *Rule) AbortsUpload(key string, created, now time.Time) bool {
	d := r.AbortIncompleteMultipartUploadDays
	if !r.Enabled || d <= 0 || !strings.HasPrefix(key, r.Filter.Prefix) {
		return false
	}
	return !now.Before(afterDays(created, d))
}

// ObjectTags decodes an object's tags from its user metadata
// (TaggingMetaKey); an object without tags has none.
func ObjectTags(user map[string]string) map[string]string {
	enc := user[TaggingMetaKey]
	if enc == "" {
		return nil
	}
	v, err := url.ParseQuery(enc)
	if err != nil {
		return nil
	}
	out := make(map[string]string, len(v))
	for k, vs := range v {
		if len(vs) > 0 {
			out[k] = vs[0]
		}
	}
	return out
}

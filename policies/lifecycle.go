package policies

import (
	"errors"
	"strings"
	"time"

	"github.com/fedgate/fedgate/lifecycle"
)

// buckets[].lifecycle: S3 lifecycle rules in the file, the fields of S3's
// LifecycleConfiguration in snake_case (docs/lifecycle.md). They decode
// into package lifecycle's Rule and are validated by it, so the file
// accepts exactly what PutBucketLifecycleConfiguration accepts.

var (
	lifecycleRuleKeys   = []string{"id", "status", "filter", "expiration", "noncurrent_version_expiration", "abort_incomplete_multipart_upload", "transitions"}
	lifecycleFilterKeys = []string{"prefix", "tags", "object_size_greater_than", "object_size_less_than"}
	lifecycleExpKeys    = []string{"days", "date", "expired_object_delete_marker"}
	lifecycleNCKeys     = []string{"noncurrent_days", "newer_noncurrent_versions"}
	lifecycleAbortKeys  = []string{"days_after_initiation"}
	lifecycleStatuses   = []string{"enabled", "disabled"}
)

// On a bucket mounted from an origin only abort_incomplete_multipart_upload
// is allowed: the origin's objects are not fedgate's to expire, the
// multipart uploads started through fedgate are (docs/lifecycle.md).
func (d *decoder) lifecycle(e entry, pth string, origin bool) []lifecycle.Rule {
	items, ok := d.list(e.val, e.vpos, pth, "lifecycle rules")
	if !ok {
		return nil
	}
	if len(items) > lifecycle.MaxRules {
		d.errorf(e.vpos, pth, "%d lifecycle rules: at most %d", len(items), lifecycle.MaxRules)
		return nil
	}
	var out []lifecycle.Rule
	ids := names{}
	for i, item := range items {
		rpth := index(pth, i)
		n, p := d.value(item, e.vpos, rpth)
		errs := len(d.errs)
		m, ok := d.fields(n, p, rpth, lifecycleRuleKeys)
		if !ok {
			continue
		}
		if origin {
			for _, k := range []string{"expiration", "noncurrent_version_expiration"} {
				if x, has := m[k]; has {
					d.errorf(x.kpos, join(rpth, k), "%s on a bucket mounted from an origin: its objects are the origin's and are not expired by fedgate (set the origin bucket's own lifecycle); only abort_incomplete_multipart_upload applies here", k)
				}
			}
		}
		r, ok := d.lifecycleRule(m, p, rpth, errs)
		if !ok {
			continue
		}
		if r.ID != "" {
			ipos := m["id"].vpos
			if first, dup := ids[r.ID]; dup {
				d.errorf(ipos, join(rpth, "id"), "duplicate rule id %s (first at %d:%d): ids must be unique, as in S3", quote(r.ID), first.line, first.col)
				continue
			}
			ids[r.ID] = ipos
		}
		out = append(out, r)
	}
	return out
}

// lifecycleRule reads one rule; ok is false once an error was reported.
// errs is how many errors were reported before the rule was read.
func (d *decoder) lifecycleRule(m map[string]entry, p pos, pth string, errs int) (lifecycle.Rule, bool) {
	r := lifecycle.Rule{Enabled: true}
	if e, ok := m["transitions"]; ok {
		d.errorf(e.kpos, join(pth, "transitions"), "lifecycle transitions are not supported: fedgate has no storage classes")
	}
	if e, ok := m["id"]; ok {
		r.ID, _ = d.str(e, join(pth, "id"), "a rule id")
	}
	if e, ok := m["status"]; ok {
		s, _ := d.enum(e, join(pth, "status"), "rule status", lifecycleStatuses)
		r.Enabled = s != "disabled"
	}
	if e, ok := m["filter"]; ok {
		r.Filter = d.lifecycleFilter(e, join(pth, "filter"))
	}
	if e, ok := m["expiration"]; ok {
		fpth := join(pth, "expiration")
		if f, ok := d.fields(e.val, e.vpos, fpth, lifecycleExpKeys); ok {
			x := &lifecycle.Expiration{}
			if e, ok := f["days"]; ok {
				x.Days = d.positiveDays(e, join(fpth, "days"))
			}
			if e, ok := f["date"]; ok {
				x.Date = d.midnight(e, join(fpth, "date"))
			}
			if e, ok := f["expired_object_delete_marker"]; ok {
				x.ExpiredObjectDeleteMarker, _ = d.boolean(e, join(fpth, "expired_object_delete_marker"))
			}
			if len(f) == 0 {
				d.errorf(e.vpos, fpth, "expected one of days, date or expired_object_delete_marker")
			}
			r.Expiration = x
		}
	}
	if e, ok := m["noncurrent_version_expiration"]; ok {
		fpth := join(pth, "noncurrent_version_expiration")
		if f, ok := d.fields(e.val, e.vpos, fpth, lifecycleNCKeys); ok {
			x := &lifecycle.NoncurrentVersionExpiration{}
			if e, ok := f["noncurrent_days"]; ok {
				x.NoncurrentDays = d.positiveDays(e, join(fpth, "noncurrent_days"))
			} else {
				d.errorf(e.vpos, join(fpth, "noncurrent_days"), "missing required key")
			}
			if e, ok := f["newer_noncurrent_versions"]; ok {
				if n, ok := d.integer(e, join(fpth, "newer_noncurrent_versions")); ok {
					if n < 1 || n > lifecycle.MaxNewerNoncurrentVersions {
						d.errorf(e.vpos, join(fpth, "newer_noncurrent_versions"), "expected 1 to %d, got %d", lifecycle.MaxNewerNoncurrentVersions, n)
					}
					x.NewerNoncurrentVersions = int(n)
				}
			}
			r.NoncurrentVersionExpiration = x
		}
	}
	if e, ok := m["abort_incomplete_multipart_upload"]; ok {
		fpth := join(pth, "abort_incomplete_multipart_upload")
		if f, ok := d.fields(e.val, e.vpos, fpth, lifecycleAbortKeys); ok {
			if e, ok := f["days_after_initiation"]; ok {
				r.AbortIncompleteMultipartUploadDays = d.positiveDays(e, join(fpth, "days_after_initiation"))
			} else {
				d.errorf(e.vpos, join(fpth, "days_after_initiation"), "missing required key")
			}
		}
	}
	if len(d.errs) > errs {
		return r, false
	}
	// The rest of S3's rules (one action at least, the combinations S3
	// refuses), with S3's messages.
	if err := r.Validate(); err != nil {
		var le *lifecycle.Error
		msg := err.Error()
		if errors.As(err, &le) && le.Code == lifecycle.CodeMalformedXML {
			msg = "expiration takes one of days, date or expired_object_delete_marker"
		}
		d.errorf(p, pth, "%s", strings.TrimSuffix(msg, "."))
		return r, false
	}
	return r, true
}

func (d *decoder) lifecycleFilter(e entry, pth string) lifecycle.Filter {
	var f lifecycle.Filter
	m, ok := d.fields(e.val, e.vpos, pth, lifecycleFilterKeys)
	if !ok {
		return f
	}
	if e, ok := m["prefix"]; ok {
		f.Prefix, _ = d.str(e, join(pth, "prefix"), "a key prefix")
	}
	if e, ok := m["tags"]; ok {
		tpth := join(pth, "tags")
		if _, isMap := mappingValues(e.val); !isMap && e.val != nil {
			d.errorf(e.vpos, tpth, "expected a mapping of tag keys to values, got %s", describe(e.val))
		}
		for _, t := range d.entries(e.val, tpth) {
			v, _ := d.str(t, join(tpth, short(t.key)), "a tag value")
			f.Tags = append(f.Tags, lifecycle.Tag{Key: t.key, Value: v})
		}
	}
	size := func(k string) *int64 {
		e, ok := m[k]
		if !ok {
			return nil
		}
		v, ok := d.parsed(e, join(pth, k), "a size like 0, 4096 or 1MiB", parseSize)
		if !ok {
			return nil
		}
		return &v
	}
	f.ObjectSizeGreaterThan = size("object_size_greater_than")
	f.ObjectSizeLessThan = size("object_size_less_than")
	return f
}

// positiveDays reads a number of days, at least 1.
func (d *decoder) positiveDays(e entry, pth string) int {
	n, ok := d.integer(e, pth)
	if !ok {
		return 0
	}
	if n < 1 || n > 1<<31-1 {
		d.errorf(e.vpos, pth, "expected a positive whole number of days, got %d", n)
		return 0
	}
	return int(n)
}

// midnight reads a date at midnight UTC: 2030-01-01 or
// 2030-01-01T00:00:00Z.
func (d *decoder) midnight(e entry, pth string) time.Time {
	s, ok := d.str(e, pth, "a date like 2030-01-01")
	if !ok {
		return time.Time{}
	}
	for _, layout := range []string{"2006-01-02", time.RFC3339Nano} {
		if t, err := time.Parse(layout, s); err == nil {
			t = t.UTC()
			if t.Hour() != 0 || t.Minute() != 0 || t.Second() != 0 || t.Nanosecond() != 0 {
				d.errorf(e.vpos, pth, "the date must be at midnight UTC (as in S3), got %s", quote(s))
				return time.Time{}
			}
			return t
		}
	}
	d.errorf(e.vpos, pth, "expected a date like 2030-01-01, got %s", quote(s))
	return time.Time{}
}

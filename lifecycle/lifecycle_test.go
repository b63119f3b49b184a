package lifecycle

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func wrap(rules string) string {
	return `<LifecycleConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">` + rules + `</LifecycleConfiguration>`
}

func TestParseXMLValid(t *testing.T) {
	doc := wrap(`
<Rule><ID>ckpt</ID><Filter><Prefix>ckpt/</Prefix></Filter><Status>Enabled</Status><Expiration><Days>7</Days></Expiration></Rule>
<Rule><ID>tagged</ID><Filter><And><Prefix>logs/</Prefix><Tag><Key>tier</Key><Value>tmp</Value></Tag><ObjectSizeGreaterThan>10</ObjectSizeGreaterThan></And></Filter><Status>Disabled</Status><Expiration><Date>2030-01-01T00:00:00.000Z</Date></Expiration></Rule>
<Rule><ID>uploads</ID><Prefix></Prefix><Status>Enabled</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>2</DaysAfterInitiation></AbortIncompleteMultipartUpload><NoncurrentVersionExpiration><NoncurrentDays>3</NoncurrentDays><NewerNoncurrentVersions>2</NewerNoncurrentVersions></NoncurrentVersionExpiration></Rule>
<Rule><Filter><Tag><Key>a</Key><Value>b</Value></Tag></Filter><Status>Enabled</Status><Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration></Rule>`)
	c, err := ParseXML([]byte(doc))
	if err == nil {
		t.Fatal("ExpiredObjectDeleteMarker with a tag filter was accepted")
	}
	doc = strings.Replace(doc, `<Filter><Tag><Key>a</Key><Value>b</Value></Tag></Filter>`, `<Filter></Filter>`, 1)
	c, err = ParseXML([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Rules) != 4 || c.Rules[0].Expiration.Days != 7 || c.Rules[0].Filter.Prefix != "ckpt/" || !c.Rules[0].Enabled {
		t.Fatalf("rules = %+v", c.Rules)
	}
	r1 := c.Rules[1]
	if r1.Enabled || *r1.Filter.ObjectSizeGreaterThan != 10 || len(r1.Filter.Tags) != 1 || !r1.Expiration.Date.Equal(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("rule 1 = %+v", r1)
	}
	if !c.Rules[2].LegacyPrefix || c.Rules[2].AbortIncompleteMultipartUploadDays != 2 || c.Rules[2].NoncurrentVersionExpiration.NewerNoncurrentVersions != 2 {
		t.Fatalf("rule 2 = %+v", c.Rules[2])
	}
	out, err := c.XML("")
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseXML(out)
	if err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if !reflect.DeepEqual(back, c) {
		t.Fatalf("round trip:\n%+v\n%+v", back, c)
	}
}

func TestParseXMLErrors(t *testing.T) {
	rule := func(inner string) string { return wrap("<Rule>" + inner + "</Rule>") }
	exp := `<Expiration><Days>1</Days></Expiration>`
	cases := []struct{ doc, code, msg string }{
		{"", CodeMalformedXML, ""},
		{wrap(""), CodeMalformedXML, ""},
		{rule(`<Filter></Filter>` + exp), CodeMalformedXML, ""}, // no Status
		{rule(`<Filter></Filter><Status>On</Status>` + exp), CodeMalformedXML, ""},
		{rule(`<Status>Enabled</Status>` + exp), CodeMalformedXML, ""}, // neither Filter nor Prefix
		{rule(`<Prefix>a</Prefix><Filter></Filter><Status>Enabled</Status>` + exp), CodeMalformedXML, ""},
		{rule(`<Filter><Prefix>a</Prefix><ObjectSizeLessThan>4</ObjectSizeLessThan></Filter><Status>Enabled</Status>` + exp), CodeMalformedXML, ""},
		{rule(`<Filter></Filter><Status>Enabled</Status><Expiration><Days>0</Days></Expiration>`), CodeInvalidArgument, "'Days' for Expiration action must be a positive integer"},
		{rule(`<Filter></Filter><Status>Enabled</Status><Expiration><Days>-3</Days></Expiration>`), CodeInvalidArgument, "'Days' for Expiration action must be a positive integer"},
		{rule(`<Filter></Filter><Status>Enabled</Status><Expiration><Days>1</Days><Date>2030-01-01T00:00:00Z</Date></Expiration>`), CodeMalformedXML, ""},
		{rule(`<Filter></Filter><Status>Enabled</Status><Expiration><Date>2030-01-01T10:00:00Z</Date></Expiration>`), CodeInvalidArgument, "'Date' must be at midnight GMT"},
		{rule(`<Filter></Filter><Status>Enabled</Status>`), CodeInvalidRequest, "At least one action needs to be specified in a rule"},
		{rule(`<ID>` + strings.Repeat("x", 256) + `</ID><Filter></Filter><Status>Enabled</Status>` + exp), CodeInvalidArgument, "ID length should not exceed allowed limit of 255"},
		{wrap(`<Rule><ID>a</ID><Filter></Filter><Status>Enabled</Status>` + exp + `</Rule><Rule><ID>a</ID><Filter></Filter><Status>Enabled</Status>` + exp + `</Rule>`), CodeInvalidArgument, "Rule ID must be unique. Found same ID for more than one rule"},
		{rule(`<Filter><Tag><Key>k</Key><Value>v</Value></Tag></Filter><Status>Enabled</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>1</DaysAfterInitiation></AbortIncompleteMultipartUpload>`), CodeInvalidRequest, "AbortIncompleteMultipartUpload cannot be specified with Tags."},
		{rule(`<Filter></Filter><Status>Enabled</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>0</DaysAfterInitiation></AbortIncompleteMultipartUpload>`), CodeInvalidArgument, "'DaysAfterInitiation' for AbortIncompleteMultipartUpload action must be a positive integer"},
		{rule(`<Filter></Filter><Status>Enabled</Status><Transition><Days>30</Days><StorageClass>GLACIER</StorageClass></Transition>`), CodeNotImplemented, "Lifecycle transitions (Transition, NoncurrentVersionTransition) are not implemented: fedgate has no storage classes."},
		{rule(`<Filter><And><ObjectSizeGreaterThan>10</ObjectSizeGreaterThan><ObjectSizeLessThan>5</ObjectSizeLessThan></And></Filter><Status>Enabled</Status>` + exp), CodeInvalidArgument, "ObjectSizeLessThan must be greater than ObjectSizeGreaterThan"},
		{rule(`<Filter><And><Tag><Key>k</Key><Value>1</Value></Tag><Tag><Key>k</Key><Value>2</Value></Tag></And></Filter><Status>Enabled</Status>` + exp), CodeInvalidRequest, "Duplicate Tag Keys are not allowed."},
		{rule(`<Filter></Filter><Status>Enabled</Status><Expiration><Days>1</Days><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration>`), CodeInvalidRequest, "ExpiredObjectDeleteMarker cannot be specified with Days or Date in a Lifecycle Expiration Policy"},
		{rule(`<Filter></Filter><Status>Enabled</Status>` + exp + exp), CodeMalformedXML, ""},
		{wrap(`<Rule><Filter></Filter><Status>Enabled</Status>`+exp+`</Rule>`) + "junk", CodeMalformedXML, ""},
	}
	for i, c := range cases {
		_, err := ParseXML([]byte(c.doc))
		var e *Error
		if !errors.As(err, &e) || e.Code != c.code || c.msg != "" && e.Message != c.msg {
			t.Errorf("case %d: err = %v (%#v), want %s %q", i, err, e, c.code, c.msg)
		}
	}
	many := strings.Repeat(`<Rule><Filter></Filter><Status>Enabled</Status>`+exp+`</Rule>`, MaxRules+1)
	if _, err := ParseXML([]byte(wrap(many))); err == nil || err.(*Error).Code != CodeInvalidRequest {
		t.Errorf("1001 rules: %v", err)
	}
}

func TestMatchAndDue(t *testing.T) {
	gt, lt := int64(10), int64(100)
	f := Filter{Prefix: "ckpt/", Tags: []Tag{{"tier", "tmp"}}, ObjectSizeGreaterThan: &gt, ObjectSizeLessThan: &lt}
	tags := map[string]string{"tier": "tmp", "x": "y"}
	for _, c := range []struct {
		key  string
		size int64
		tags map[string]string
		want bool
	}{
		{"ckpt/a", 50, tags, true},
		{"logs/a", 50, tags, false},
		{"ckpt/a", 10, tags, false},
		{"ckpt/a", 100, tags, false},
		{"ckpt/a", 50, map[string]string{"tier": "keep"}, false},
		{"ckpt/a", 50, nil, false},
	} {
		if got := f.Matches(c.key, c.size, c.tags); got != c.want {
			t.Errorf("Matches(%q, %d, %v) = %v", c.key, c.size, c.tags, got)
		}
	}
	r := Rule{Enabled: true, Expiration: &Expiration{Days: 3}}
	mod := time.Date(2014, 1, 15, 10, 30, 0, 0, time.UTC)
	// S3's example: created 1/15 10:30 with 3 days expires 1/19 00:00 UTC.
	if r.Expires(mod, time.Date(2014, 1, 18, 23, 59, 0, 0, time.UTC)) || !r.Expires(mod, time.Date(2014, 1, 19, 0, 0, 0, 0, time.UTC)) {
		t.Error("Days is not rounded up to the next midnight UTC")
	}
	r.Enabled = false
	if r.Expires(mod, mod.AddDate(1, 0, 0)) {
		t.Error("a disabled rule expires")
	}
	d := Rule{Enabled: true, Expiration: &Expiration{Date: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)}}
	if !d.Expires(time.Date(2021, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2021, 1, 2, 0, 0, 0, 0, time.UTC)) {
		t.Error("a Date in the past does not expire an object made after it")
	}
	a := Rule{Enabled: true, Filter: Filter{Prefix: "up/"}, AbortIncompleteMultipartUploadDays: 1}
	if !a.AbortsUpload("up/x", mod, mod.AddDate(0, 0, 2)) || a.AbortsUpload("other", mod, mod.AddDate(0, 0, 2)) || a.AbortsUpload("up/x", mod, mod.Add(time.Hour)) {
		t.Error("AbortsUpload")
	}
	if got := ObjectTags(map[string]string{TaggingMetaKey: "tier=tmp&a%20b=c"}); got["tier"] != "tmp" || got["a b"] != "c" {
		t.Errorf("ObjectTags = %v", got)
	}
}

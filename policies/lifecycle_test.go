package policies

import (
	"testing"
	"time"
)

func TestLifecycleParse(t *testing.T) {
	src := `buckets:
  - name: checkpoints
    lifecycle:
      - id: old-runs
        filter: {prefix: runs/, tags: {keep: "no"}, object_size_greater_than: 1MiB}
        expiration: {days: 7}
      - id: uploads
        status: disabled
        abort_incomplete_multipart_upload: {days_after_initiation: 2}
      - expiration: {date: 2030-01-01}
        noncurrent_version_expiration: {noncurrent_days: 30, newer_noncurrent_versions: 3}
`
	p, err := Parse("policy.yaml", []byte(src), AllFeatures())
	if err != nil {
		t.Fatal(err)
	}
	rules := p.Buckets[0].Lifecycle
	if len(rules) != 3 {
		t.Fatalf("rules = %+v", rules)
	}
	r := rules[0]
	if r.ID != "old-runs" || !r.Enabled || r.Filter.Prefix != "runs/" || len(r.Filter.Tags) != 1 || r.Filter.Tags[0].Value != "no" ||
		*r.Filter.ObjectSizeGreaterThan != 1<<20 || r.Expiration.Days != 7 {
		t.Errorf("rule 0 = %+v", r)
	}
	if rules[1].Enabled || rules[1].AbortIncompleteMultipartUploadDays != 2 {
		t.Errorf("rule 1 = %+v", rules[1])
	}
	if !rules[2].Expiration.Date.Equal(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)) || rules[2].NoncurrentVersionExpiration.NewerNoncurrentVersions != 3 {
		t.Errorf("rule 2 = %+v", rules[2])
	}
}

func TestLifecycleErrors(t *testing.T) {
	tests := []struct {
		name, src string
		want      []string
	}{
		{"zero days", "buckets:\n  - name: ckpt\n    lifecycle:\n      - expiration: {days: 0}\n",
			[]string{`4:28 buckets[0].lifecycle[0].expiration.days: expected a positive whole number of days, got 0`}},
		{"unknown key", "buckets:\n  - name: ckpt\n    lifecycle:\n      - expiraton: {days: 1}\n",
			[]string{`4:9 buckets[0].lifecycle[0].expiraton: unknown key "expiraton" (did you mean "expiration"?)`}},
		{"no action", "buckets:\n  - name: ckpt\n    lifecycle:\n      - id: x\n        filter: {prefix: a/}\n",
			[]string{`4:9 buckets[0].lifecycle[0]: At least one action needs to be specified in a rule`}},
		{"abort with tags", "buckets:\n  - name: ckpt\n    lifecycle:\n      - filter: {tags: {a: b}}\n        abort_incomplete_multipart_upload: {days_after_initiation: 1}\n",
			[]string{`4:9 buckets[0].lifecycle[0]: AbortIncompleteMultipartUpload cannot be specified with Tags`}},
		{"duplicate id", "buckets:\n  - name: ckpt\n    lifecycle:\n      - {id: a, expiration: {days: 1}}\n      - {id: a, expiration: {days: 2}}\n",
			[]string{`5:14 buckets[0].lifecycle[1].id: duplicate rule id "a" (first at 4:14)`}},
		{"date not midnight", "buckets:\n  - name: ckpt\n    lifecycle:\n      - expiration: {date: \"2030-01-01T10:00:00Z\"}\n",
			[]string{`4:28 buckets[0].lifecycle[0].expiration.date: the date must be at midnight UTC`}},
		{"transitions", "buckets:\n  - name: ckpt\n    lifecycle:\n      - expiration: {days: 1}\n        transitions: []\n",
			[]string{`5:9 buckets[0].lifecycle[0].transitions: lifecycle transitions are not supported: fedgate has no storage classes`}},
		{"size order", "buckets:\n  - name: ckpt\n    lifecycle:\n      - filter: {object_size_greater_than: 1MiB, object_size_less_than: 1KiB}\n        expiration: {days: 1}\n",
			[]string{`4:9 buckets[0].lifecycle[0]: ObjectSizeLessThan must be greater than ObjectSizeGreaterThan`}},
		{"status", "buckets:\n  - name: ckpt\n    lifecycle:\n      - {status: Enabled, expiration: {days: 1}}\n",
			[]string{`4:18 buckets[0].lifecycle[0].status: unknown rule status "Enabled" (expected one of enabled, disabled`}},
		{"origin expiration", storesPrefix + "buckets:\n  - name: data\n    origin: nas/imagenet/\n    lifecycle:\n      - {id: old, expiration: {days: 7}}\n      - {id: nc, noncurrent_version_expiration: {noncurrent_days: 1}}\n      - {id: ok, abort_incomplete_multipart_upload: {days_after_initiation: 2}}\n",
			[]string{`8:19 buckets[0].lifecycle[0].expiration: expiration on a bucket mounted from an origin: its objects are the origin's and are not expired by fedgate`,
				`9:18 buckets[0].lifecycle[1].noncurrent_version_expiration: noncurrent_version_expiration on a bucket mounted from an origin`}},
		{"not a list", "buckets:\n  - name: ckpt\n    lifecycle: {days: 1}\n",
			[]string{`3:16 buckets[0].lifecycle: expected a list of lifecycle rules, got a mapping`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("policy.yaml", []byte(tc.src), AllFeatures())
			checkErrors(t, err, tc.want)
		})
	}
}

package policies

import (
	"strings"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr string
	}{
		{"0", 0, ""},
		{"4096", 4096, ""},
		{"512B", 512, ""},
		{"2TiB", 2 << 40, ""},
		{"500GiB", 500 << 30, ""},
		{"8 MiB", 8 << 20, ""},
		{"1.5TB", 1500e9, ""},
		{"1.5KiB", 1536, ""},
		{"1PiB", 1 << 50, ""},
		{"0.1B", 0, "not a whole number of bytes"},
		{"99999999PiB", 0, "too large"},
		{"2TIB", 0, `did you mean "TiB"`},
		{"2 furlongs", 0, "unknown size unit"},
		{"-1GiB", 0, "invalid size"},
		{"", 0, "invalid size"},
	}
	for _, tt := range tests {
		got, err := parseSize(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parseSize(%q) error = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr string
	}{
		{"0s", 0, ""},
		{"0", 0, ""},
		{"24h", 24 * time.Hour, ""},
		{"1h30m", 90 * time.Minute, ""},
		{"7d", 7 * 24 * time.Hour, ""},
		{"1d12h", 36 * time.Hour, ""},
		{"-1s", 0, "must not be negative"},
		{"1d-13h", 0, "must not be negative"},
		{"soon", 0, "expected a duration"},
		{"30", 0, "expected a duration"},
	}
	for _, tt := range tests {
		got, err := parseDuration(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parseDuration(%q) error = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestParseMoney(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		str     string
		wantErr string
	}{
		{"500USD", 500e6, "500USD", ""},
		{"0.09USD", 90000, "0.09USD", ""},
		{"12.50 USD", 12.5e6, "12.5USD", ""},
		{"0.000001USD", 1, "0.000001USD", ""},
		{"0.0000001USD", 0, "", "invalid amount"},
		{"500", 0, "", "has no currency"},
		{"500usd", 0, "", "unknown currency"},
		{"$500", 0, "", "invalid amount"},
	}
	for _, tt := range tests {
		got, err := parseMoney(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parseMoney(%q) error = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got.Micros != tt.want || got.String() != tt.str {
			t.Errorf("parseMoney(%q) = %+v (%s), %v; want %d %s", tt.in, got, got, err, tt.want, tt.str)
		}
	}
}

func TestParseLocation(t *testing.T) {
	for _, in := range []string{"aws:us-east-1", "gcp:us-central1", "azure:eastus", "onprem:lga1"} {
		l, err := ParseLocation(in)
		if err != nil || l.String() != in {
			t.Errorf("ParseLocation(%q) = %v, %v", in, l, err)
		}
	}
	for in, want := range map[string]string{
		"aws":         "has no region",
		"us-east-1":   "expected cloud:region",
		"ibm:dal":     `unknown cloud "ibm"`,
		"aws:":        "invalid region",
		"aws:US-EAST": "invalid region",
	} {
		if _, err := ParseLocation(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseLocation(%q) error = %v, want %q", in, err, want)
		}
	}
}

func TestValidBucketName(t *testing.T) {
	for _, ok := range []string{"abc", "imagenet", "my.bucket-2", "a1b", strings.Repeat("a", 63), "192.168.5"} {
		if err := ValidBucketName(ok); err != nil {
			t.Errorf("ValidBucketName(%q) = %v", ok, err)
		}
	}
	for in, want := range map[string]string{
		"ab":                    "3 to 63 characters",
		strings.Repeat("a", 64): "3 to 63 characters",
		"Abc":                   "only lowercase letters",
		"a_b":                   "only lowercase letters",
		"_fedgate":              "only lowercase letters",
		"café":                  "only lowercase letters",
		"-abc":                  "start and end",
		"abc.":                  "start and end",
		"a..b":                  "two adjacent periods",
		"192.168.5.4":           "IP address",
		"xn--abc":               `start with "xn--"`,
		"sthree-abc":            `start with "sthree-"`,
		"amzn-s3-demo-bucket":   `start with "amzn-s3-demo-"`,
		"abc-s3alias":           `end with "-s3alias"`,
		"abc--ol-s3":            `end with "--ol-s3"`,
		"abc.mrap":              `end with ".mrap"`,
		"abc--x-s3":             `end with "--x-s3"`,
		"abc--table-s3":         `end with "--table-s3"`,
		"":                      "3 to 63 characters",
		"a b":                   "only lowercase letters",
		strings.Repeat("é", 10): "only lowercase letters",
		"abc\x00":               "only lowercase letters",
	} {
		if err := ValidBucketName(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ValidBucketName(%q) = %v, want %q", in, err, want)
		}
	}
}

func TestSuggest(t *testing.T) {
	keys := []string{"name", "kind", "location", "bucket", "credentials"}
	for in, want := range map[string]string{
		"bukcet": "bucket", "loction": "location", "Name": "name", "credential": "credentials",
		"zzz": "", "x": "", strings.Repeat("q", 500): "",
	} {
		if got := suggest(in, keys); got != want {
			t.Errorf("suggest(%q) = %q, want %q", in, got, want)
		}
	}
}

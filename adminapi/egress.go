package adminapi

import (
	"time"

	"github.com/fedgate/fedgate/egress"
)

// Egress is the answer of GET /_fedgate/admin/egress: the region's
// egress ledger for [since, until).
type Egress struct {
	Region   string       `json:"region"`
	Location string       `json:"location"` // the region's "cloud:region"
	Since    time.Time    `json:"since"`
	Until    time.Time    `json:"until"`
	Rows     []egress.Row `json:"rows"`
	// PolicyYAML is the region's active policy (its egress price overrides
	// and budgets), "" on embedded defaults.
	PolicyYAML string `json:"policy_yaml,omitempty"`
}

// Usage is the answer of GET /_fedgate/admin/usage?bucket=B&prefix=P
// [&direct=true]: the objects and bytes under a prefix of a bucket (with
// direct, only the objects right under it, not under deeper "/"
// prefixes), from a listing (for egress advice: what a copy would hold).
type Usage struct {
	Bucket  string `json:"bucket"`
	Prefix  string `json:"prefix"`
	Direct  bool   `json:"direct,omitempty"`
	Objects int64  `json:"objects"`
	Bytes   int64  `json:"bytes"`
}

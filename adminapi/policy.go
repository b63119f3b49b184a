package adminapi

// Policy is the answer of GET and PUT /_fedgate/admin/policy.
type Policy struct {
	Version uint64   `json:"version"` // 0: none applied (embedded defaults)
	YAML    string   `json:"yaml"`
	Changes []string `json:"changes,omitempty"` // what an apply changed (policies.Diff)
}

// PolicyApply is the body of PUT /_fedgate/admin/policy.
type PolicyApply struct {
	YAML string `json:"yaml"`
	// File names the file in error messages (file:line:column).
	File string `json:"file"`
	// BaseVersion is the version the caller diffed against; the apply is
	// refused when the active policy has moved on since.
	BaseVersion uint64 `json:"base_version"`
}

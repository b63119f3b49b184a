package adminapi

import "github.com/fedgate/fedgate/backend"

// Repair is the body of POST /_fedgate/admin/repair.
type Repair struct {
	Bucket string `json:"bucket"`
	Prefix string `json:"prefix"`
	// DryRun checks only: nothing is written; each object that needs
	// repair comes as a line with Found.
	DryRun bool `json:"dry_run,omitempty"`
}

// RepairLine is one line of the answer, a stream of JSON lines:
// progress lines, then one with Stats (or Error).
type RepairLine struct {
	Done  int64 `json:"done"`
	Total int64 `json:"total"`
	// BytesRead is the bytes read so far to check and rebuild.
	BytesRead int64                `json:"bytes_read,omitempty"`
	Stats     *backend.RepairStats `json:"stats,omitempty"`
	Error     string               `json:"error,omitempty"`
	// Found is an object a dry run found in need of repair (the stores
	// lacking its copy, shards or manifest); Seen is not set.
	Found *DegradedObject `json:"found,omitempty"`
}

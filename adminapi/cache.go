package adminapi

// Preload is the body of POST /_fedgate/admin/cache/jobs.
type Preload struct {
	Bucket string `json:"bucket"`
	Prefix string `json:"prefix,omitempty"`
	// Pin pins bucket/prefix before the job starts.
	Pin bool `json:"pin,omitempty"`
}

// Job is one preload job with its progress summed over the region.
type Job struct {
	ID      string `json:"id"`
	Bucket  string `json:"bucket"`
	Prefix  string `json:"prefix"`
	Pin     bool   `json:"pin,omitempty"`
	Created string `json:"created"`
	// State is "running", "done" or "canceled".
	State    string `json:"state"`
	Done     bool   `json:"done"`
	Canceled bool   `json:"canceled,omitempty"`
	// Objects is how many objects every node has finished; TotalObjects
	// and TotalBytes are what the job found to read (0 while unknown).
	Objects      int64 `json:"objects"`
	TotalObjects int64 `json:"total_objects"`
	// Bytes is the bytes of chunks warmed, over all nodes.
	Bytes      int64 `json:"bytes"`
	TotalBytes int64 `json:"total_bytes"`
	// Errors counts chunks that could not be cached.
	Errors int64 `json:"errors,omitempty"`
	// Pending names the members that have not finished their share.
	Pending []string `json:"pending,omitempty"`
	// Note says why there is nothing to do, when so.
	Note  string             `json:"note,omitempty"`
	Nodes map[string]JobNode `json:"nodes,omitempty"`
}

// JobNode is one node's share of a preload job.
type JobNode struct {
	After   string `json:"after,omitempty"` // the last key it finished
	Objects int64  `json:"objects"`
	Bytes   int64  `json:"bytes"`
	Errors  int64  `json:"errors,omitempty"`
	Done    bool   `json:"done"`
	Updated string `json:"updated"`
}

// Cancel is the answer of DELETE /_fedgate/admin/cache/jobs/{id}.
type Cancel struct {
	ID string `json:"id"`
	// Removed: the job had finished (or was canceled) and is forgotten;
	// otherwise it is now canceled.
	Removed bool `json:"removed"`
}

// Pin is a cache pin (and the body of POST and DELETE
// /_fedgate/admin/cache/pins).
type Pin struct {
	Bucket  string `json:"bucket"`
	Prefix  string `json:"prefix"`
	Created string `json:"created,omitempty"`
}

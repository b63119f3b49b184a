package adminapi

// Regions is the answer of GET /_fedgate/admin/regions.
type Regions struct {
	// Region is the region of the node that answered; Peered whether the
	// policy peers regions through the global catalog.
	Region string `json:"region"`
	Peered bool   `json:"peered"`
	// Catalog is this node's member of the global bucket catalog.
	Catalog Catalog  `json:"catalog"`
	Regions []Region `json:"regions"`
}

// Catalog is a node's view of the global bucket catalog.
type Catalog struct {
	Member string `json:"member"`
	Voter  bool   `json:"voter"`
	// Leader is the region leading the catalog ("": none known; creates and
	// deletes of buckets wait or fail, everything else goes on).
	Leader  string `json:"leader"`
	Applied uint64 `json:"applied"`
	// Lag is how many committed changes this member has not applied yet;
	// LastContactSeconds how long ago it last heard from the leader (0 on
	// the leader, -1 never).
	Lag                uint64  `json:"lag"`
	LastContactSeconds float64 `json:"last_contact_seconds"`
	Buckets            int     `json:"buckets"`
}

// Region is one region of the policy as the answering node sees it.
type Region struct {
	Name     string `json:"name"`
	Location string `json:"location"`
	Endpoint string `json:"endpoint"`
	Self     bool   `json:"self"`
	// Reachable: the region's endpoint answered its health check just now
	// (RTTMillis); Problem says why not.
	Reachable bool    `json:"reachable"`
	RTTMillis float64 `json:"rtt_ms"`
	Problem   string  `json:"problem,omitempty"`
	// Buckets at home in the region (the catalog's count).
	Buckets int `json:"buckets"`
	// BytesFrom are the bytes this region read through that region's
	// gateway (the egress ledger, since the start of the month), and
	// AvoidedBytes those its cache served instead.
	BytesFrom    int64 `json:"bytes_from"`
	AvoidedBytes int64 `json:"avoided_bytes"`
}

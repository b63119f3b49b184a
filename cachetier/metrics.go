package cachetier

import "github.com/prometheus/client_golang/prometheus"

// RegisterMetrics registers a collector that reports Stats at each scrape
// (fedgate_cache_*). It returns the registry's error, for example
// prometheus.AlreadyRegisteredError when called twice on one registry.
func (c *Cache) RegisterMetrics(reg prometheus.Registerer) error {
	return reg.Register(&collector{c: c})
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("fedgate_cache_"+name, help, labels, nil)
}

var (
	descHits        = desc("hits_total", "Chunk lookups served by a cached chunk.")
	descMisses      = desc("misses_total", "Chunk lookups that needed a fetch (their own or a shared one).")
	descFetches     = desc("fetches_total", "Chunk fetches started.")
	descFetchErrors = desc("fetch_errors_total", "Chunk fetches that failed.")
	descOrigin      = desc("origin_bytes_total", "Bytes fetched from origins.")
	descServed      = desc("served_bytes_total", "Bytes served from cached chunks.")
	descEvictions   = desc("evictions_total", "Chunks evicted to make room.")
	descBadChunks   = desc("bad_chunks_total", "Chunks loaded at start and dropped: file missing, wrong size or checksum.")
	descUsed        = desc("used_bytes", "Bytes of cached chunks and fills in progress.")
	descCapacity    = desc("capacity_bytes", "The cache's capacity in bytes.")
	descChunks      = desc("chunks", "Cached chunks.")
	descFilling     = desc("fills_in_progress", "Chunk fetches in progress.")
	descGroupUsed   = desc("group_used_bytes", "Bytes of a group's cached chunks and fills.", "group")
	descGroupQuota  = desc("group_quota_bytes", "A group's quota in bytes (0: none).", "group")
	descPinned      = desc("pinned_bytes", "Bytes of pinned chunks (never evicted).")
	descPeerReads   = desc("peer_reads_total", "Reads of chunks from the peers that own them.")
	descPeerBytes   = desc("peer_read_bytes_total", "Bytes read from peers.")
	descPeerFalls   = desc("peer_fallbacks_total", "Reads of peer-owned chunks that fell back to the origin (the peer failed or was slow).")
)

type collector struct{ c *Cache }

func (*collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descHits, descMisses, descFetches, descFetchErrors,
		descOrigin, descServed, descEvictions, descBadChunks, descUsed, descCapacity, descChunks, descFilling,
		descGroupUsed, descGroupQuota, descPinned, descPeerReads, descPeerBytes, descPeerFalls} {
		ch <- d
	}
}

func (m *collector) Collect(ch chan<- prometheus.Metric) {
	s := m.c.Stats()
	counter := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	gauge := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	counter(descHits, s.Hits)
	counter(descMisses, s.Misses)
	counter(descFetches, s.Fetches)
	counter(descFetchErrors, s.FetchErrors)
	counter(descOrigin, s.BytesFromOrigin)
	counter(descServed, s.BytesFromCache)
	counter(descEvictions, s.Evictions)
	counter(descBadChunks, s.BadChunks)
	gauge(descUsed, s.Used)
	gauge(descCapacity, s.Capacity)
	gauge(descChunks, int64(s.Chunks))
	gauge(descFilling, s.Filling)
	gauge(descPinned, s.PinnedBytes)
	counter(descPeerReads, s.PeerReads)
	counter(descPeerBytes, s.PeerReadBytes)
	counter(descPeerFalls, s.PeerFallbacks)
	for name, g := range s.Groups {
		gauge(descGroupUsed, g.Used, name)
		gauge(descGroupQuota, g.Quota, name)
	}
}

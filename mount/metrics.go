package mount

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the mount daemon's Prometheus series (docs/mount.md).
type metrics struct {
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	readBytes prometheus.Counter
	fuseReads prometheus.Counter
	statCache *prometheus.CounterVec
	dirCache  *prometheus.CounterVec
	opens     *prometheus.CounterVec

	writeBytes    prometheus.Counter
	uploads       *prometheus.CounterVec
	partsInFlight prometheus.Gauge
	memory        prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fedgate_mount_s3_requests_total", Help: "S3 requests made by the mount, by operation and result (ok, or the errno name).",
		}, []string{"op", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "fedgate_mount_s3_request_seconds", Help: "Latency of the mount's S3 requests (one try each).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"op"}),
		readBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fedgate_mount_s3_read_bytes_total", Help: "Object bytes fetched by ranged GETs.",
		}),
		fuseReads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fedgate_mount_fuse_reads_total", Help: "FUSE read calls answered by the daemon.",
		}),
		statCache: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fedgate_mount_stat_cache_total", Help: "Stat cache look-ups: hit, negative_hit or miss.",
		}, []string{"result"}),
		dirCache: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fedgate_mount_dir_cache_total", Help: "Directory reads: hit (the listing kept from within the stat TTL) or miss (ListObjectsV2).",
		}, []string{"result"}),
		opens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fedgate_mount_opens_total", Help: "Opened files by read path: s3 (ranged GETs), local (pread of the short-circuit descriptors), passthrough (FUSE passthrough).",
		}, []string{"path"}),
		writeBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fedgate_mount_write_bytes_total", Help: "Bytes written to files through the mount (FUSE writes taken).",
		}),
		uploads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fedgate_mount_uploads_total", Help: "Files written through the mount, by result: ok (the object was put or the multipart upload completed), failed (an S3 error; the upload was aborted), aborted (released without a completed close, truncated to 0 or unlinked while written, the writer killed).",
		}, []string{"result"}),
		partsInFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fedgate_mount_upload_parts_in_flight", Help: "UploadPart requests in flight across the mount.",
		}),
		memory: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fedgate_mount_memory_bytes", Help: "Bytes held for write part buffers and read blocks (bounded by --max-memory).",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.latency, m.readBytes, m.fuseReads, m.statCache, m.dirCache, m.opens, m.writeBytes, m.uploads, m.partsInFlight, m.memory)
	}
	return m
}

func (m *metrics) observe(op string, err error, d time.Duration) {
	result := "ok"
	if err != nil {
		result = toErrno(err).Error()
		if retryable(err) {
			result = "retryable"
		}
	}
	m.requests.WithLabelValues(op, result).Inc()
	m.latency.WithLabelValues(op).Observe(d.Seconds())
}

package gateway

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	bytesIn  *prometheus.CounterVec
	bytesOut *prometheus.CounterVec
	inFlight prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fedgate_s3_requests_total",
			Help: "S3 requests by operation and HTTP status.",
		}, []string{"op", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fedgate_s3_request_duration_seconds",
			Help:    "Time from request start to the last byte of the response, by operation.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"op"}),
		bytesIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fedgate_s3_bytes_in_total",
			Help: "Request body bytes received, by operation.",
		}, []string{"op"}),
		bytesOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fedgate_s3_bytes_out_total",
			Help: "Response body bytes sent, by operation.",
		}, []string{"op"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fedgate_s3_requests_in_flight",
			Help: "S3 requests being served now (the /_fedgate/ operations endpoints are not counted).",
		}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.latency, m.bytesIn, m.bytesOut, m.inFlight} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) observe(op string, status int, in, out int64, d time.Duration) {
	m.requests.WithLabelValues(op, strconv.Itoa(status)).Inc()
	m.latency.WithLabelValues(op).Observe(d.Seconds())
	if in > 0 {
		m.bytesIn.WithLabelValues(op).Add(float64(in))
	}
	if out > 0 {
		m.bytesOut.WithLabelValues(op).Add(float64(out))
	}
}

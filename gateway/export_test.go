package gateway

import "time"

// SampleCharts takes one reading for the console's charts at now, as the
// sampler RunCharts runs does every interval (tests drive it with their
// clock instead of waiting).
func (s *Server) SampleCharts(now time.Time) { s.console.SampleCharts(now) }

// Package deploy holds no code: it is the home of what operators deploy
// beside fedgate — the Grafana dashboard (grafana/fedgate.json) and the
// Prometheus alerting rules (prometheus/fedgate-alerts.yml), described in
// docs/monitoring.md — and of the tests that keep them true: the rules parse
// with Prometheus's own rule loader, every expression of the rules and the
// dashboard is valid PromQL, and every metric and label they use is exported
// by a running fedgate region.
package deploy

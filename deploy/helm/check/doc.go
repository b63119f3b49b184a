// Package check is the offline check of the Helm chart deploy/helm/fedgate
// (docs/kubernetes.md, "What was checked here and what was not"): its own
// Go module, so that Helm and the Kubernetes API types stay out of
// fedgate's. Its tests render the chart with the Helm Go library for 1, 3
// and 5 replicas and the values files in ../fedgate/ci, decode every
// manifest strictly into its typed object, check the invariants a region
// needs (odd replicas, the PodDisruptionBudget's majority, probes, spread,
// volumes, the mount DaemonSet's device, capability and propagation), run
// the rendered arguments and files through `fedgate server --check`,
// `fedgate policy validate` and `fedgate mount --check`, and run
// `helm lint --strict`.
package check

// Package adminapi holds the wire types of fedgate's admin API (the JSON
// bodies and answers under /_fedgate/admin/ on the S3 port) and the
// reserved path prefix, shared by the server (package gateway), the node
// (node, node/peerapi) and the CLI (cmd/fedgate). Fields are added, never
// renamed: a CLI of one version talks to nodes of another.
//
// It imports no fedgate package but the contract's leaves (backend, egress).
package adminapi

// ReservedPrefix is where health, metrics, the admin API and the console
// live on the S3 port. '_' cannot start a bucket name, so it never collides
// with one.
const ReservedPrefix = "/_fedgate/"

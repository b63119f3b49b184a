// Package node assembles one fedgate gateway node: its listeners, Raft
// state, namespace, chunk cache, write-back staging, policy manager,
// internal API (package peerapi) and the S3 gateway. cmd/fedgate turns its
// flags and environment into a Config; tests build nodes the same way,
// on 127.0.0.1:0 ports.
//
//	n, err := node.Open(ctx, cfg) // ready to serve, region formed or joined
//	defer n.Close()
//	err = n.Run(ctx)              // serves until ctx ends, then drains
//
// # Initialization order
//
// Raft must be open before the namespace can be built (the namespace's
// region state is the Raft node, and the policy it starts with is read
// from Raft state), yet the namespace and the policy manager react to
// commands Raft applies. Instead of an apply hook in regionstate.Config
// wired before either exists (and atomic pointers it loads on every
// command), they subscribe to the open Raft node
// (regionstate.Node.Subscribe) as soon as they are built. A command
// applied before a subscription is already in Raft's State, which is what
// both are built from, so nothing is missed; the policy manager also
// checks for a newer policy once its loop starts. A two-phase
// construction (namespace before Raft) would need federation.New to
// accept a region state and a policy that do not exist yet; the
// subscription needs no change outside package regionstate.
//
// A multi-node node serves its S3 port and internal API before Raft opens,
// so peers can discover each other while the region forms. Those handlers
// are built once, with what they serve later given as late-bound funcs
// (peerapi.ServerConfig.Backend and Data, the front handler's gateway):
// each reads an atomic pointer of the node's handoff (open.go) that the
// phase which builds the value stores once, and a handler that finds it
// nil answers 503. docs/architecture.md ("The node") lists the phases.
package node

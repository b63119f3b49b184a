// Package peerapi is fedgate's internal API: the calls the nodes of one
// region make to each other. The server side (Server) answers them; the
// client side (Client) makes them.
//
// The API lives under Prefix on each node's internal port (mutual TLS when
// the region uses peer TLS); a node's S3 port answers only GET Prefix+"info"
// (Server.Discovery), which is what a node started with --join S3-ADDRESS
// needs to find the peer's internal port. Every request is signed with
// SigV4 (service "s3", the node's S3 signing region) by the region's root
// credentials, given to every node by flag or environment: a joining node
// has no Raft state to look them up in.
//
// The routes, all JSON unless noted:
//
//	GET  info                  -> Info
//	POST join        JoinRequest -> Info (the leader adds a voter)
//	POST remove      RemoveRequest -> 204 (the leader removes a member)
//	POST apply       an encoded regionstate.Command -> {"index": N} (on the leader)
//	GET  readindex             -> {"index": N} (the leader's commit index)
//	PUT  stage/{id}  bytes     -> 204 once fsynced in the staging area
//	GET  stage/{id}?off=&n=    -> bytes of a staged file
//	POST hold        HoldRequest -> 204 (keep staged files for a reader)
//	GET  chunk?store=&key=&validator=&size=&index=&off=&n= -> bytes of a cached chunk
//
// An error is an ErrorBody (a regionstate.WireError, so errors.Is works after
// the trip, plus the leader's S3 address on "not the leader"); the staging
// and chunk routes answer plain-text errors with a status that says what
// they are. The wire format is shared by every version of a region: add
// fields, never rename or remove them.
package peerapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/fedgate/fedgate/adminapi"
	"github.com/fedgate/fedgate/regionstate"
)

// Prefix is the path every internal API route starts with.
const Prefix = adminapi.ReservedPrefix + "internal/"

// Info is the answer of GET info: a node's view of itself and its region.
type Info struct {
	ID         string `json:"id"`
	RaftAddr   string `json:"raft_addr"`
	HTTPAddr   string `json:"http_addr"`
	State      string `json:"state"`
	LeaderID   string `json:"leader_id,omitempty"`
	LeaderHTTP string `json:"leader_http,omitempty"`
	Term       uint64 `json:"term"`
	Applied    uint64 `json:"applied_index"`
	Commit     uint64 `json:"commit_index"`
	Members    int    `json:"members"` // servers in its configuration (0: not in a cluster yet)
	// InternalURL is where its internal API listens (https with peer TLS).
	InternalURL string `json:"internal_url,omitempty"`
	// RegionID is the id of the region whose Raft state the node holds
	// ("" before it has one).
	RegionID string `json:"region_id,omitempty"`
	// Time is the node's wall clock when it answered (peers measure clock
	// skew with it).
	Time time.Time `json:"time,omitzero"`
	adminapi.NodeUsage
}

// JoinRequest is the body of POST join.
type JoinRequest struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
	// RegionID is the joiner's region when it holds Raft state ("": a new
	// node); the leader refuses a node of another region.
	RegionID string `json:"region_id,omitempty"`
}

// HoldRequest is the body of POST hold: keep the staged files IDs for
// Millis milliseconds (a reader on another node has not reached them yet).
type HoldRequest struct {
	IDs    []string `json:"ids"`
	Millis int64    `json:"millis"`
}

// RemoveRequest is the body of POST remove.
type RemoveRequest struct {
	ID string `json:"id"`
}

// ErrorBody is every JSON error answer: a regionstate.WireError plus the
// leader's S3 address when the answer is "not the leader".
type ErrorBody struct {
	regionstate.WireError
	LeaderHTTP string `json:"leader_http,omitempty"`
}

// indexAnswer is the answer of apply and readindex.
type indexAnswer struct {
	Index uint64 `json:"index"`
}

// MemberKey is the Raft setting holding a member's S3 address.
func MemberKey(id string) string { return "member." + id + ".http" }

// NormalizeHTTP turns "host:port" (or a URL) into "http://host:port" with
// no trailing slash; "" stays "". A URL keeps its scheme (https://).
func NormalizeHTTP(addr string) string { return NormalizeURL(addr, "http") }

// NormalizeURL is NormalizeHTTP with scheme for an address that has none:
// a node whose S3 port serves TLS takes "host:port" to mean https.
func NormalizeURL(addr, scheme string) string {
	addr = strings.TrimRight(strings.TrimSpace(addr), "/")
	if addr != "" && !strings.Contains(addr, "://") {
		addr = scheme + "://" + addr
	}
	return addr
}

// SignRequest signs req, whose body is payload, with SigV4 for the S3
// service: how the CLI and nodes authenticate to the admin and internal
// APIs.
func SignRequest(ctx context.Context, req *http.Request, payload []byte, ak, sk, region string) error {
	sum := sha256.Sum256(payload)
	hash := hex.EncodeToString(sum[:])
	req.Header.Set("x-amz-content-sha256", hash)
	creds := aws.Credentials{AccessKeyID: ak, SecretAccessKey: sk}
	return v4.NewSigner().SignHTTP(ctx, creds, req, hash, "s3", region, time.Now())
}

// SignUnsigned signs req with an UNSIGNED-PAYLOAD body (a stream).
func SignUnsigned(ctx context.Context, req *http.Request, ak, sk, region string) error {
	const unsigned = "UNSIGNED-PAYLOAD"
	req.Header.Set("x-amz-content-sha256", unsigned)
	creds := aws.Credentials{AccessKeyID: ak, SecretAccessKey: sk}
	return v4.NewSigner().SignHTTP(ctx, creds, req, unsigned, "s3", region, time.Now())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func jsonBody(v any) []byte { b, _ := json.Marshal(v); return b }

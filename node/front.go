package node

import (
	"io"
	"net/http"
	"strings"

	"github.com/fedgate/fedgate/adminapi"
	"github.com/fedgate/fedgate/gateway"
	"github.com/fedgate/fedgate/gateway/s3err"
	"github.com/fedgate/fedgate/node/peerapi"
)

// frontHandler is the S3 port's handler. It serves the internal API's
// discovery answer (on a multi-node node) from the start and, once the
// node is ready, the gateway; until then every other request gets 503.
type frontHandler struct {
	internal http.Handler // nil: no internal API
	domain   string
	gw       func() *gateway.Server // bound late: nil until the gateway is built, then always it
}

func newFrontHandler(internal http.Handler, domain string, gw func() *gateway.Server) *frontHandler {
	return &frontHandler{internal: internal, domain: strings.ToLower(strings.TrimSuffix(domain, ".")), gw: gw}
}

func (h *frontHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.internal != nil && strings.HasPrefix(r.URL.Path, peerapi.Prefix) && !h.virtualHost(r) {
		h.internal.ServeHTTP(w, r)
		return
	}
	if gw := h.gw(); gw != nil {
		gw.ServeHTTP(w, r)
		return
	}
	w.Header().Set("Retry-After", "1")
	if r.URL.Path == adminapi.ReservedPrefix+"healthz" {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "ok (starting)\n")
		return
	}
	if r.URL.Path == adminapi.ReservedPrefix+"readyz" {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "starting: forming or joining the region's cluster\n")
		return
	}
	gateway.WriteError(w, r, errStarting)
}

var errStarting = s3err.New(s3err.CodeServiceUnavailable, "This node is starting (forming or joining its region's cluster); retry shortly or on another node.")

func (h *frontHandler) virtualHost(r *http.Request) bool {
	_, ok := gateway.VirtualHostBucket(r.Host, h.domain)
	return ok
}

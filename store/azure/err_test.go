package azure

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/fedgate/fedgate/store"
)

func TestKindOf(t *testing.T) {
	for _, c := range []struct {
		code   string
		status int
		want   error
	}{
		{"BlobNotFound", 404, store.ErrNotFound},
		{"", 404, store.ErrNotFound},
		{"ContainerNotFound", 404, nil},
		{"ConditionNotMet", 412, store.ErrPreconditionFailed},
		{"BlobAlreadyExists", 409, store.ErrPreconditionFailed},
		{"ServerBusy", 503, store.ErrThrottled},
		{"", 429, store.ErrThrottled},
		{"OperationTimedOut", 500, store.ErrThrottled},
		{"AuthorizationFailure", 403, store.ErrAccessDenied},
		{"AuthenticationFailed", 403, store.ErrAccessDenied},
		{"AuthorizationPermissionMismatch", 403, store.ErrAccessDenied},
		{"InvalidBlockList", 400, store.ErrInvalidPart},
		{"InvalidResourceName", 400, store.ErrInvalidKey},
		{"InvalidHeaderValue", 400, nil},
	} {
		err := fmt.Errorf("wrapped: %w", &azcore.ResponseError{ErrorCode: c.code, StatusCode: c.status})
		if got := kindOf(err); got != c.want {
			t.Errorf("kindOf(%d %s) = %v, want %v", c.status, c.code, got, c.want)
		}
	}
	if kindOf(context.Canceled) != nil || kindOf(errors.New("x")) != nil {
		t.Error("kindOf maps a non-Azure error")
	}
}

func TestMapErr(t *testing.T) {
	s := &Store{secrets: secretsOf(Config{SASToken: "?sv=1&sig=S3cr%2Bt", AccountKey: "KEYKEY=="})}
	err := s.mapErr("read", "k", &url.Error{Op: "Get", URL: "https://a.blob.core.windows.net/c/k?sv=1&sig=S3cr%2Bt",
		Err: fmt.Errorf("dial: %w", context.DeadlineExceeded)})
	if !errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "S3cr") {
		t.Errorf("mapErr(url error) = %v: want the context error kept and the signature gone", err)
	}
	err = s.mapErr("put", "k", &azcore.ResponseError{ErrorCode: "ServerBusy", StatusCode: http.StatusServiceUnavailable})
	if !errors.Is(err, store.ErrThrottled) || err.Error() != `azure: put "k": 503 ServerBusy` {
		t.Errorf("mapErr(503) = %q", err)
	}
	if !store.WasRetried(err) {
		t.Errorf("mapErr(503) = %q: not marked store.Retried (azcore has retried it)", err)
	}
	if got := s.scrub("key KEYKEY== sig=abc AccountKey=xyz;"); strings.Contains(got, "KEYKEY") ||
		strings.Contains(got, "abc") || strings.Contains(got, "xyz") {
		t.Errorf("scrub left a secret: %q", got)
	}
}

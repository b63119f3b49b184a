package s3err

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
)

func TestError(t *testing.T) {
	e := New(CodeSignatureDoesNotMatch, "bad")
	if e.Status != http.StatusForbidden || e.Error() != "SignatureDoesNotMatch: bad" {
		t.Fatalf("%+v %q", e, e.Error())
	}
	if New(CodeBadDigest, "").Status != http.StatusBadRequest || New(CodeNotImplemented, "").Status != http.StatusNotImplemented {
		t.Fatal("status table")
	}
	wrapped := fmt.Errorf("ctx: %w", Newf(CodeBadDigest, "n=%d", 3))
	if !errors.Is(wrapped, New(CodeBadDigest, "other message")) || errors.Is(wrapped, e) {
		t.Fatal("Is must match by code only")
	}
	if CodeOf(wrapped) != CodeBadDigest || CodeOf(errors.New("x")) != "" {
		t.Fatal("CodeOf")
	}
}

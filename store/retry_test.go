package store_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/fedgate/fedgate/store"
)

func TestRetried(t *testing.T) {
	if store.Retried(nil) != nil {
		t.Error("Retried(nil) != nil")
	}
	plain := fmt.Errorf("s3: read %q: %w", "k", store.ErrThrottled)
	if store.WasRetried(plain) {
		t.Errorf("WasRetried(%v) = true for an unmarked error", plain)
	}
	marked := store.Retried(plain)
	wrapped := fmt.Errorf("placement p: %w", marked)
	for _, err := range []error{marked, wrapped, errors.Join(errors.New("other"), marked)} {
		if !store.WasRetried(err) || !errors.Is(err, store.ErrThrottled) {
			t.Errorf("%v: WasRetried %t, Is(ErrThrottled) %t; want both", err, store.WasRetried(err), errors.Is(err, store.ErrThrottled))
		}
	}
	if marked.Error() != plain.Error() {
		t.Errorf("Retried changed the message: %q, want %q", marked, plain)
	}
	if store.Retried(marked) != marked {
		t.Error("Retried of a marked error wraps it again")
	}
}

package regionstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
)

func TestErrorCodesRoundTrip(t *testing.T) {
	for _, c := range codes {
		for _, err := range []error{c.err, fmt.Errorf("context: %w", c.err)} {
			if got := ErrorCode(err); got != c.code {
				t.Fatalf("ErrorCode(%v) = %q, want %q", err, got, c.code)
			}
			back := ErrorFromCode(c.code, err.Error())
			if !errors.Is(back, c.err) || ErrorCode(back) != c.code {
				t.Fatalf("ErrorFromCode(%q) = %v, does not match %v", c.code, back, c.err)
			}
			if c.code != CodeNotLeader && back.Error() != err.Error() {
				t.Fatalf("ErrorFromCode(%q).Error() = %q, want %q", c.code, back, err)
			}
			b, jerr := json.Marshal(ToWire(err))
			if jerr != nil {
				t.Fatal(jerr)
			}
			var w *WireError
			if jerr := json.Unmarshal(b, &w); jerr != nil {
				t.Fatal(jerr)
			}
			if back := w.Err(); !errors.Is(back, c.err) {
				t.Fatalf("wire round trip of %v = %v", err, back)
			}
		}
	}
	if ErrLeadershipLost == nil || !errors.Is(ErrLeadershipLost, ErrNotLeader) || ErrorCode(ErrLeadershipLost) != CodeLeadershipLost {
		t.Fatal("ErrLeadershipLost must match ErrNotLeader and keep its own code")
	}
	if ErrorCode(nil) != "" || ErrorFromCode("", "") != nil || ToWire(nil) != nil || (*WireError)(nil).Err() != nil {
		t.Fatal("nil does not round-trip to nil")
	}
	if got := ErrorCode(errors.New("disk on fire")); got != CodeInternal {
		t.Fatalf("ErrorCode(other) = %q", got)
	}
	if err := ErrorFromCode("from_the_future", "new error"); err == nil || err.Error() != "new error" {
		t.Fatalf("ErrorFromCode(unknown) = %v", err)
	}
	if got := ErrorCode(fmt.Errorf("%w: %w", ErrNoLeader, context.DeadlineExceeded)); got != CodeNoLeader {
		t.Fatalf("ErrNoLeader joined with a deadline has code %q", got)
	}

	// Structured errors keep their fields.
	var be *BucketExistsError
	w := wire(t, &BucketExistsError{Bucket: "b", Owner: "alice"})
	if err := w.Err(); !errors.As(err, &be) || be.Bucket != "b" || be.Owner != "alice" || !errors.Is(err, ErrBucketExists) {
		t.Fatalf("BucketExistsError round trip = %#v", err)
	}
	var nl *NotLeaderError
	w = wire(t, fmt.Errorf("apply: %w", &NotLeaderError{LeaderID: "n2", LeaderAddr: "10.0.0.2:7000"}))
	if err := w.Err(); !errors.As(err, &nl) || nl.LeaderID != "n2" || nl.LeaderAddr != "10.0.0.2:7000" || !errors.Is(err, ErrNotLeader) {
		t.Fatalf("NotLeaderError round trip = %#v", err)
	}
	if err := ErrorFromCode(CodeNotLeader, "x"); !errors.As(err, &nl) {
		t.Fatalf("ErrorFromCode(not_leader) = %#v, want a *NotLeaderError", err)
	}
	if (&NotLeaderError{}).Error() == "" || (&NotLeaderError{LeaderID: "a"}).Error() == "" {
		t.Fatal("empty NotLeaderError text")
	}
}

func wire(t *testing.T, err error) *WireError {
	t.Helper()
	b, jerr := json.Marshal(ToWire(err))
	if jerr != nil {
		t.Fatal(jerr)
	}
	var w WireError
	if jerr := json.Unmarshal(b, &w); jerr != nil {
		t.Fatal(jerr)
	}
	return &w
}

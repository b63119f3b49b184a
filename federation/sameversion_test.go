package federation

import (
	"testing"

	"github.com/fedgate/fedgate/regionstate"
	"github.com/fedgate/fedgate/store"
)

// A conditional write names the newest version by the validator a Stat
// returned; a drain that finished in between changes that validator from
// the staged one to the store's. The version is the same, so the write's
// condition holds (the conformance suite's staged conditional write got a
// spurious 412 when a drain won that race); another version's staged
// validator does not match.
func TestSameVersionAcrossADrain(t *testing.T) {
	drained := regionstate.ObjectVersion{Key: "k", ID: "v2", Seq: 7, Validator: "store-validator"}
	staged := drained
	staged.Validator, staged.Staged = "", 7
	for _, tc := range []struct {
		name      string
		v         regionstate.ObjectVersion
		validator string
		want      bool
	}{
		{"staged, its staged validator", staged, string(stagedValidator(7)), true},
		{"drained since, its staged validator", drained, string(stagedValidator(7)), true},
		{"drained, the store's validator", drained, "store-validator", true},
		{"drained, an older version's staged validator", drained, string(stagedValidator(6)), false},
		{"staged, another validator", staged, "store-validator", false},
	} {
		if got := sameVersion(tc.v, store.Validator(tc.validator)); got != tc.want {
			t.Errorf("%s: sameVersion = %v, want %v", tc.name, got, tc.want)
		}
	}
}

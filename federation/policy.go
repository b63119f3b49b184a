package federation

import (
	"fmt"
	"strings"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
)

// ErrPolicyChange: a new policy would strand data (a bucket it removes or
// moves still has undrained write-back writes or multipart uploads).
var ErrPolicyChange = backend.ErrPolicyChange

// Policy returns the policy in force on this node and its Raft version
// (nil, 0 on embedded defaults).
func (n *Namespace) Policy() (*policies.Policy, uint64) {
	v := n.v()
	return v.policy, v.version
}

// Stores returns the stores of the policy in force, by name.
func (n *Namespace) Stores() map[string]store.Store { return n.v().stores }

// CheckPolicyChange refuses a policy that removes a declared bucket, or
// moves it to another store or prefix, while the bucket still has
// write-back writes waiting to drain or multipart uploads in progress:
// those would be stranded. Drain (or complete/abort) first.
func (n *Namespace) CheckPolicyChange(next *policies.Policy, stores map[string]store.Store, defName string) error {
	nv, err := n.buildView(next, stores, defName)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrPolicyChange, err)
	}
	var problems []string
	st := n.rs.State()
	for name, old := range n.v().global {
		nb, kept := nv.global[name]
		if kept && nb.store.Name() == old.store.Name() && nb.prefix == old.prefix && nb.WriteBack() == old.WriteBack() {
			continue
		}
		pending, uploads := len(st.Journal(name, "")), len(st.Uploads(name, ""))
		if pending == 0 && uploads == 0 {
			continue
		}
		what := "removes"
		if kept {
			what = "moves (store, prefix or write mode)"
		}
		problems = append(problems, fmt.Sprintf("the new policy %s bucket %q, which has %d write-back writes not yet drained and %d multipart uploads in progress",
			what, name, pending, uploads))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s; let them drain (fedgate cluster status shows the backlog) or finish the uploads first",
			ErrPolicyChange, strings.Join(problems, "; "))
	}
	return nil
}

// ApplyPolicy puts a new policy in force on this node: its stores (opened
// by the caller) and its declared buckets replace the old ones in one
// step. Cached metadata is dropped (TTLs and origins may have changed);
// cached chunks stay valid (they are keyed by store, key and validator).
func (n *Namespace) ApplyPolicy(p *policies.Policy, stores map[string]store.Store, defName string, version uint64) error {
	v, err := n.buildView(p, stores, defName)
	if err != nil {
		return err
	}
	v.version = version
	close(n.view.Swap(v).replaced) // wakes awaitPolicy
	n.stats.dropAll()
	if n.cache != nil {
		n.setPriorities(v) // cache.priority may have changed
		go n.cache.Repin() // cache.pin may have changed
	}
	n.wakeDrainer()
	return nil
}

package egress

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/fedgate/fedgate/policies"
)

// Limit is one monthly egress budget: the cost of a bucket's bytes, of a
// region pair's, or of a bucket's on a region pair (every criterion set
// must match), as policies.Budget says it.
type Limit struct {
	Bucket string // "" for any bucket
	// Src and Dst select a region pair; a Location with an empty Region
	// matches every region of its cloud, a zero Location matches anything.
	Src, Dst policies.Location
	Monthly  USD
	Action   policies.BudgetAction // "" is alert
}

// LimitsFromPolicy converts the policy file's budgets. It fails on an
// amount that is not in USD.
func LimitsFromPolicy(budgets []policies.Budget) ([]Limit, error) {
	out := make([]Limit, 0, len(budgets))
	for _, b := range budgets {
		m, err := FromMoney(b.Monthly)
		if err != nil {
			l := Limit{Bucket: b.Bucket, Src: b.From, Dst: b.To}
			return nil, fmt.Errorf("egress: budget of %s: %w", l.Name(), err)
		}
		out = append(out, Limit{Bucket: b.Bucket, Src: b.From, Dst: b.To, Monthly: m, Action: b.Action})
	}
	return out, nil
}

// Name says what the limit covers, like `bucket "imagenet"` or
// `region pair aws:us-east-1 -> gcp`.
func (l Limit) Name() string {
	var parts []string
	if l.Bucket != "" {
		parts = append(parts, fmt.Sprintf("bucket %q", l.Bucket))
	}
	if l.Src.Cloud != "" || l.Dst.Cloud != "" {
		parts = append(parts, fmt.Sprintf("region pair %s -> %s", locOrAny(l.Src), locOrAny(l.Dst)))
	}
	if len(parts) == 0 {
		return "all egress"
	}
	return strings.Join(parts, " on ")
}

func locOrAny(l policies.Location) string {
	if l.Cloud == "" {
		return "*"
	}
	return l.String()
}

// Covers says whether bytes of bucket from src to dst ("cloud:region")
// count against the limit.
func (l Limit) Covers(bucket, src, dst string) bool {
	if l.Bucket != "" && l.Bucket != bucket {
		return false
	}
	for _, c := range []struct {
		pat policies.Location
		loc string
	}{{l.Src, src}, {l.Dst, dst}} {
		if c.pat.Cloud == "" {
			continue
		}
		loc, err := policies.ParseLocationOrCloud(c.loc)
		if err != nil || !matches(c.pat, loc) {
			return false
		}
	}
	return true
}

// Status is where one limit stands in a month.
type Status struct {
	Limit Limit
	Month string // "2006-01", UTC
	Spent USD
	// Exceeded: Spent has reached Limit.Monthly.
	Exceeded bool
}

// Used is Spent / Monthly (1 or more when exceeded), for metrics.
func (s Status) Used() float64 {
	if s.Limit.Monthly.Sign() <= 0 {
		return 0
	}
	return s.Spent.Float64() / s.Limit.Monthly.Float64()
}

// Blocks says whether cold reads (cache misses) under this limit must be
// refused: the limit is exceeded and its action is block-cold-reads.
func (s Status) Blocks() bool {
	return s.Exceeded && s.Limit.Action == policies.ActionBlockColdReads
}

// Message describes the status for a log line or an S3 error message,
// like `egress budget of bucket "imagenet" for 2026-11 is spent: 512.34 USD
// of 500.00 USD (action block-cold-reads)`.
func (s Status) Message() string {
	state := "is spent"
	if !s.Exceeded {
		state = "is not spent"
	}
	action := s.Limit.Action
	if action == "" {
		action = policies.ActionAlert
	}
	return fmt.Sprintf("egress budget of %s for %s %s: %s USD of %s USD (action %s)",
		s.Limit.Name(), s.Month, state, s.Spent, s.Limit.Monthly, action)
}

// Evaluate sums, for each limit, the cost of the priced rows it covers in
// now's calendar month (UTC) and says whether the limit is reached. The
// rows should be priced from the start of the month (MonthStart(now)) so
// their tiers are right; rows of other months are ignored. The statuses
// are in the order of limits.
func Evaluate(limits []Limit, priced []Priced, now time.Time) []Status {
	month := now.UTC().Format("2006-01")
	out := make([]Status, len(limits))
	for i, l := range limits {
		out[i] = Status{Limit: l, Month: month}
	}
	for _, p := range priced {
		if monthOf(p.Hour) != month || p.Cost.IsZero() {
			continue
		}
		for i := range out {
			if out[i].Limit.Covers(p.Bucket, p.Src, p.Dst) {
				out[i].Spent = out[i].Spent.Add(p.Cost)
			}
		}
	}
	for i := range out {
		out[i].Exceeded = out[i].Spent.Cmp(out[i].Limit.Monthly) >= 0
	}
	return out
}

// EvaluateBudgets is Evaluate for the policy file's budgets.
func EvaluateBudgets(budgets []policies.Budget, priced []Priced, now time.Time) ([]Status, error) {
	limits, err := LimitsFromPolicy(budgets)
	if err != nil {
		return nil, err
	}
	return Evaluate(limits, priced, now), nil
}

// ColdReadBlocked returns the first status that blocks a cold read of
// bucket from src to dst, for the read path: a cache hit is still served,
// a miss gets an S3 error carrying Status.Message.
func ColdReadBlocked(statuses []Status, bucket, src, dst string) (Status, bool) {
	for _, s := range statuses {
		if s.Blocks() && s.Limit.Covers(bucket, src, dst) {
			return s, true
		}
	}
	return Status{}, false
}

// MarshalJSON writes {"budget": Limit.Name(), "bucket", "src", "dst",
// "month", "spent_usd", "limit_usd", "exceeded", "action"}, with "" for a
// criterion the limit does not set.
func (s Status) MarshalJSON() ([]byte, error) {
	action := s.Limit.Action
	if action == "" {
		action = policies.ActionAlert
	}
	src, dst := "", ""
	if s.Limit.Src.Cloud != "" {
		src = s.Limit.Src.String()
	}
	if s.Limit.Dst.Cloud != "" {
		dst = s.Limit.Dst.String()
	}
	return json.Marshal(struct {
		Budget   string                `json:"budget"`
		Bucket   string                `json:"bucket"`
		Src      string                `json:"src"`
		Dst      string                `json:"dst"`
		Month    string                `json:"month"`
		Spent    USD                   `json:"spent_usd"`
		Limit    USD                   `json:"limit_usd"`
		Exceeded bool                  `json:"exceeded"`
		Action   policies.BudgetAction `json:"action"`
	}{s.Limit.Name(), s.Limit.Bucket, src, dst, s.Month, s.Spent, s.Limit.Monthly, s.Exceeded, action})
}

package egress

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fedgate/fedgate/policies"
)

func TestBudgetsFromPolicy(t *testing.T) {
	pol := loadTestPolicy(t)
	priced := pricedLedger(t)
	now := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	st, err := EvaluateBudgets(pol.Egress.Budgets, priced, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 2 {
		t.Fatalf("%d statuses", len(st))
	}
	// imagenet in November (see TestPriceLedgerToTheCent): 907.50 of 900:
	// spent; its action blocks cold reads. December's 1.80 is not counted.
	im := st[0]
	if im.Month != "2026-11" || im.Spent.Cmp(usd(t, "907.5")) != 0 || !im.Exceeded || !im.Blocks() {
		t.Errorf("imagenet: %+v spent %s", im, im.Spent)
	}
	if want := `egress budget of bucket "imagenet" for 2026-11 is spent: 907.50 USD of 900.00 USD (action block-cold-reads)`; im.Message() != want {
		t.Errorf("message %q", im.Message())
	}
	if u := im.Used(); u < 1.0083 || u > 1.0084 {
		t.Errorf("used %v, want 907.5/900", u)
	}
	// checkpoints: 148.59 of 500, alert.
	ck := st[1]
	if ck.Spent.Cmp(usd(t, "148.59")) != 0 || ck.Exceeded || ck.Blocks() || ck.Limit.Action != policies.ActionAlert {
		t.Errorf("checkpoints: %+v spent %s", ck, ck.Spent)
	}
	if s, ok := ColdReadBlocked(st, "imagenet", "aws:us-east-1", "gcp:us-central1"); !ok || s.Limit.Bucket != "imagenet" {
		t.Error("imagenet cold reads not blocked")
	}
	if _, ok := ColdReadBlocked(st, "checkpoints", "gcp:us-central1", "aws:us-east-1"); ok {
		t.Error("checkpoints blocked")
	}
	// In December only r12 counts: 1.80.
	st, _ = EvaluateBudgets(pol.Egress.Budgets, priced, time.Date(2026, 12, 15, 0, 0, 0, 0, time.UTC))
	if st[0].Spent.Cmp(usd(t, "1.8")) != 0 || st[0].Exceeded {
		t.Errorf("December imagenet: spent %s", st[0].Spent)
	}
	if _, err := EvaluateBudgets([]policies.Budget{{Bucket: "x", Monthly: policies.Money{Micros: 1, Currency: "EUR"}}}, priced, now); err == nil {
		t.Error("EUR budget accepted")
	}
}

func TestBudgetRegionPair(t *testing.T) {
	priced := pricedLedger(t)
	now := time.Date(2026, 11, 30, 23, 0, 0, 0, time.UTC)
	limits := []Limit{
		// aws -> gcp: r1 r2 r3 r3b = 0.90 + 898.60 + 0.085 = 899.585.
		{Src: policies.Location{Cloud: AWS}, Dst: policies.Location{Cloud: GCP}, Monthly: usd(t, "899.585"), Action: policies.ActionBlockColdReads},
		{Src: policies.Location{Cloud: AWS}, Dst: policies.Location{Cloud: GCP}, Monthly: usd(t, "899.59")},
		// Into onprem:lga1 from anywhere: r6 r8a r8b r11 = 4.35 + 5 + 3 + 0.
		{Dst: policies.Location{Cloud: OnPrem, Region: "lga1"}, Monthly: usd(t, "100")},
		// imagenet from aws:us-west-2 only: r8b = 3.
		{Bucket: "imagenet", Src: policies.Location{Cloud: AWS, Region: "us-west-2"}, Monthly: usd(t, "3")},
	}
	st := Evaluate(limits, priced, now)
	for i, want := range []struct {
		spent    string
		exceeded bool
		name     string
	}{
		{"899.585", true, "region pair aws -> gcp"},
		{"899.585", false, "region pair aws -> gcp"},
		{"12.35", false, "region pair * -> onprem:lga1"},
		{"3", true, `bucket "imagenet" on region pair aws:us-west-2 -> *`},
	} {
		if st[i].Spent.Cmp(usd(t, want.spent)) != 0 || st[i].Exceeded != want.exceeded || st[i].Limit.Name() != want.name {
			t.Errorf("limit %d: spent %s exceeded %v name %q, want %+v", i, st[i].Spent, st[i].Exceeded, st[i].Limit.Name(), want)
		}
	}
	if _, ok := ColdReadBlocked(st, "audio", "aws:us-east-1", "gcp:us-central1"); !ok {
		t.Error("the aws -> gcp pair does not block")
	}
	if _, ok := ColdReadBlocked(st, "audio", "aws:us-east-1", "azure:eastus"); ok {
		t.Error("aws -> azure blocked")
	}
	if !strings.Contains(st[1].Message(), "is not spent") {
		t.Errorf("message %q", st[1].Message())
	}

	// The same limits written in a policy file.
	pol, err := policies.Parse("p.yaml", []byte(`
buckets: [{name: imagenet}]
egress:
  budgets:
    - {from: aws, to: gcp, monthly: 899.585USD, action: block-cold-reads}
    - {to: onprem:lga1, monthly: 100USD}
    - {bucket: imagenet, from: aws:us-west-2, monthly: 3USD}
`), policies.AllFeatures())
	if err != nil {
		t.Fatal(err)
	}
	fromPolicy, err := EvaluateBudgets(pol.Egress.Budgets, priced, now)
	if err != nil {
		t.Fatal(err)
	}
	for i, j := range []int{0, 2, 3} {
		if got, want := fromPolicy[i], st[j]; got.Limit.Name() != want.Limit.Name() || got.Spent.Cmp(want.Spent) != 0 || got.Exceeded != want.Exceeded {
			t.Errorf("policy budget %d: %s spent %s exceeded %v; want %s spent %s exceeded %v",
				i, got.Limit.Name(), got.Spent, got.Exceeded, want.Limit.Name(), want.Spent, want.Exceeded)
		}
	}
	if _, ok := ColdReadBlocked(fromPolicy, "audio", "aws:us-east-1", "gcp:us-central1"); !ok {
		t.Error("the policy's aws -> gcp budget does not block")
	}
}

func TestBudgetsInReport(t *testing.T) {
	pol := loadTestPolicy(t)
	priced := pricedLedger(t)
	st, err := EvaluateBudgets(pol.Egress.Budgets, priced, time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	r := Build(priced, nov1, dec1, ByBucket)
	r.Totals.Budgets = st
	var tab, js, page bytes.Buffer
	if err := WriteTable(&tab, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tab.String(), "Budgets:\n- egress budget of bucket \"imagenet\" for 2026-11 is spent: 907.50 USD of 900.00 USD (action block-cold-reads)\n") {
		t.Errorf("table:\n%s", tab.String())
	}
	if err := WriteJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Totals struct {
			Budgets []map[string]any `json:"budgets"`
		} `json:"totals"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	b := doc.Totals.Budgets
	if len(b) != 2 || b[0]["bucket"] != "imagenet" || b[0]["spent_usd"] != 907.5 || b[0]["limit_usd"] != 900.0 || b[0]["exceeded"] != true ||
		b[0]["action"] != "block-cold-reads" || b[1]["exceeded"] != false || b[1]["action"] != "alert" || b[0]["month"] != "2026-11" {
		t.Errorf("budgets JSON %v", b)
	}
	if err := WriteHTML(&page, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), `<li class="spent">egress budget of bucket &#34;imagenet&#34;`) {
		t.Error("HTML does not flag the spent budget")
	}
}

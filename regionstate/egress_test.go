package regionstate

import "testing"

func TestAddEgressSums(t *testing.T) {
	n := openNode(t, testConfig(t, t.TempDir()))
	row := EgressRow{Hour: 10, Src: "aws:us-east-1", Dst: "onprem:lga1", Bucket: "b", Store: "s3", Direction: "read"}
	a, b := row, row
	a.Bytes, a.Served = 100, 7
	b.Bytes = 23
	other := row
	other.Hour, other.Bytes = 11, 5
	apply(t, n, AddEgress{Rows: []EgressRow{a, other}}, AddEgress{Rows: []EgressRow{b}})
	got := n.State().Egress(10, 12)
	if len(got) != 2 || got[0].Bytes != 123 || got[0].Served != 7 || got[1].Hour != 11 || got[1].Bytes != 5 {
		t.Fatalf("Egress = %+v", got)
	}
	if got := n.State().Egress(11, 12); len(got) != 1 {
		t.Fatalf("Egress of hour 11 = %+v", got)
	}
	bad := row
	bad.Direction = "sideways"
	wantErr(t, n, AddEgress{Rows: []EgressRow{a, bad}}, ErrInvalid)
	if got := n.State().Egress(10, 11); got[0].Bytes != 123 {
		t.Fatalf("a rejected batch changed the ledger: %+v", got)
	}

	// Rows of one key but different prefixes stay apart; Logical sums.
	p1, p2 := row, row
	p1.Prefix, p1.Bytes, p1.Logical = "train/", 40, 3
	p2.Prefix, p2.Bytes, p2.Logical = "val/", 2, 1
	apply(t, n, AddEgress{Rows: []EgressRow{p1, p2, p1}})
	got = n.State().Egress(10, 11)
	if len(got) != 3 || got[0].Prefix != "" || got[0].Bytes != 123 || got[1].Prefix != "train/" || got[1].Bytes != 80 ||
		got[1].Logical != 6 || got[2].Prefix != "val/" || got[2].Bytes != 2 {
		t.Fatalf("Egress with prefixes = %+v", got)
	}
	neg := p1
	neg.Logical = -1
	wantErr(t, n, AddEgress{Rows: []EgressRow{neg}}, ErrInvalid)
}

func TestPruneEgress(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, testConfig(t, dir))
	row := EgressRow{Src: "aws:us-east-1", Dst: "gcp:us-central1", Bucket: "b", Store: "s3", Direction: "read", Bytes: 1}
	var rows []EgressRow
	for h := int64(100); h < 110; h++ {
		r := row
		r.Hour = h
		rows = append(rows, r)
	}
	apply(t, n, AddEgress{Rows: rows}, PruneEgress{BeforeHour: 105}, PruneEgress{BeforeHour: 105})
	got := n.State().Egress(0, 1000)
	if len(got) != 5 || got[0].Hour != 105 {
		t.Fatalf("after pruning before hour 105: %+v", got)
	}
	wantErr(t, n, PruneEgress{}, ErrInvalid)
	// Pruned rows stay gone after a restart (the FSM's bbolt).
	n.Close()
	n = openNode(t, testConfig(t, dir))
	if got := n.State().Egress(0, 1000); len(got) != 5 {
		t.Fatalf("after a restart: %d rows, want 5", len(got))
	}
}

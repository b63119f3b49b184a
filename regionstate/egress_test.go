package regionstate

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
)

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

	// Preloaded (bytes a preload moved) sums too; negative is refused.
	pre := row
	pre.Hour, pre.Bytes, pre.Preloaded = 20, 9, 9
	apply(t, n, AddEgress{Rows: []EgressRow{pre, pre}})
	if got := n.State().Egress(20, 21); len(got) != 1 || got[0].Bytes != 18 || got[0].Preloaded != 18 {
		t.Fatalf("Egress with preloaded bytes = %+v", got)
	}
	pre.Preloaded = -1
	wantErr(t, n, AddEgress{Rows: []EgressRow{pre}}, ErrInvalid)
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

// Reuse distances sum element by element (lengths may differ), stay apart
// from rows without them, survive a restart and a snapshot, and are never
// changed in place under a reader.
func TestAddEgressReuse(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, testConfig(t, dir))
	row := EgressRow{Hour: 10, Src: "aws:us-east-1", Dst: "gcp:us-central1", Bucket: "b", Store: "s3", Direction: "read", Prefix: "train/a/"}
	a, b, c := row, row, row
	a.Bytes, a.Reuse = 100, []int64{100, 0, 0}
	b.Bytes, b.Reuse = 30, []int64{10, 0, 20}
	c.Bytes = 5 // an old node's row: no reuse
	apply(t, n, AddEgress{Rows: []EgressRow{a}})
	before := n.State().Egress(10, 11)
	apply(t, n, AddEgress{Rows: []EgressRow{b, c}})
	got := n.State().Egress(10, 11)
	if len(got) != 1 || got[0].Bytes != 135 || !slices.Equal(got[0].Reuse, []int64{110, 0, 20}) {
		t.Fatalf("Egress = %+v; want 135 bytes, reuse [110 0 20]", got)
	}
	if !slices.Equal(before[0].Reuse, []int64{100, 0, 0}) || !slices.Equal(a.Reuse, []int64{100, 0, 0}) {
		t.Fatalf("a later AddEgress changed a row read before (%v) or the command's own slice (%v)", before[0].Reuse, a.Reuse)
	}
	d := row
	d.Reuse = []int64{0, 0, 0, 0, 1} // longer: the sum grows
	apply(t, n, AddEgress{Rows: []EgressRow{d}})
	if got := n.State().Egress(10, 11); !slices.Equal(got[0].Reuse, []int64{110, 0, 20, 0, 1}) {
		t.Fatalf("a longer reuse: %+v", got[0])
	}
	plain := row
	plain.Prefix, plain.Bytes = "", 7
	apply(t, n, AddEgress{Rows: []EgressRow{plain}})
	if got := n.State().Egress(10, 11); got[0].Prefix != "" || got[0].Reuse != nil {
		t.Fatalf("a row without reuse distances: %+v", got[0])
	}

	neg := row
	neg.Reuse = []int64{1, -1}
	wantErr(t, n, AddEgress{Rows: []EgressRow{neg}}, ErrInvalid)
	long := row
	long.Reuse = make([]int64, MaxEgressReuse+1)
	wantErr(t, n, AddEgress{Rows: []EgressRow{long}}, ErrInvalid)

	// The FSM's file keeps them.
	n.Close()
	n = openNode(t, testConfig(t, dir))
	got = n.State().Egress(10, 11)
	if len(got) != 2 || !slices.Equal(got[1].Reuse, []int64{110, 0, 20, 0, 1}) {
		t.Fatalf("after a restart: %+v", got)
	}
}

// Ledger records and commands written before EgressRow had Reuse decode
// with none, and a row with Reuse decodes on a node that does not know
// the field (encoding/json ignores unknown fields): rolling upgrades
// either way.
func TestEgressReuseCompatible(t *testing.T) {
	old := []byte(`{"Hour":10,"Src":"aws:us-east-1","Dst":"gcp:us-central1","Bucket":"b","Store":"s3","Direction":"read","Bytes":4,"Served":2}`)
	var r EgressRow
	if err := json.Unmarshal(old, &r); err != nil || r.Reuse != nil || r.Bytes != 4 {
		t.Fatalf("an old row: %+v, %v", r, err)
	}
	c := newCatalog()
	if err := c.loadEgress([]byte(r.key()), old); err != nil {
		t.Fatal(err)
	}
	if got := c.egress.m[r.key()]; got.Served != 2 || got.Reuse != nil {
		t.Fatalf("an old snapshot record: %+v", got)
	}
	r.Reuse = []int64{1, 2}
	data, err := Encode(AddEgress{Rows: []EgressRow{r}})
	if err != nil {
		t.Fatal(err)
	}
	// What a node built before the field decodes the command into.
	var before struct {
		Rows []struct {
			Hour                               int64
			Src, Dst, Bucket, Store, Direction string
			Prefix                             string `json:",omitempty"`
			Bytes                              int64
			Served, Logical                    int64 `json:",omitempty"`
		}
	}
	if err := json.Unmarshal(data[1:], &before); err != nil || len(before.Rows) != 1 || before.Rows[0].Bytes != 4 {
		t.Fatalf("an old node's decoding: %+v, %v", before, err)
	}
	if bytes.Contains(mustJSON(EgressRow{Hour: 1, Bytes: 1}), []byte("Reuse")) {
		t.Fatal("a row without reuse distances writes a Reuse field")
	}
}

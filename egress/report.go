package egress

import (
	"cmp"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fedgate/fedgate/internal/bytesize"
)

// The groupings of a report (Build's by).
const (
	ByNone       = ""            // one line per (src, dst, bucket, store, direction)
	ByBucket     = "bucket"      // one line per bucket
	ByStore      = "store"       // one line per store
	ByRegionPair = "region-pair" // one line per (src, dst)
	ByDay        = "day"         // one line per UTC day
)

// CheckBy returns an error naming the choices when by is not a grouping
// Build knows.
func CheckBy(by string) error {
	switch by {
	case ByNone, ByBucket, ByStore, ByRegionPair, ByDay:
		return nil
	}
	return fmt.Errorf("egress: unknown grouping %q (expected bucket, store, region-pair or day)", by)
}

// Line is one line of a report: the sum of the priced rows of one group.
// A column the grouping does not split on holds the group's value when all
// its rows agree, else "" (the table shows "*").
type Line struct {
	Day          string    `json:"day,omitempty"` // "2006-01-02", by day only
	Src          string    `json:"src"`
	Dst          string    `json:"dst"`
	Bucket       string    `json:"bucket"`
	Store        string    `json:"store"`
	Direction    Direction `json:"direction"`
	Bytes        int64     `json:"bytes"`
	Cost         USD       `json:"cost_usd"`
	AvoidedBytes int64     `json:"avoided_bytes"`
	AvoidedCost  USD       `json:"avoided_usd"`
}

// Totals sum every line of a report.
type Totals struct {
	Bytes        int64 `json:"bytes"`
	ReadBytes    int64 `json:"read_bytes"`
	WriteBytes   int64 `json:"write_bytes"`
	Cost         USD   `json:"cost_usd"`
	AvoidedBytes int64 `json:"avoided_bytes"`
	// AvoidedCost is the money the cache saved.
	AvoidedCost USD `json:"avoided_usd"`
	// HitRatio is AvoidedBytes / (AvoidedBytes + ReadBytes); 0 when
	// nothing was read.
	HitRatio float64 `json:"cache_hit_ratio"`
	// Notes say what the figures cannot see and which rates are uncertain.
	Notes []string `json:"notes"`
	// Budgets are the statuses of the month's budgets, when the caller
	// sets them (Build does not: budgets are about the current month,
	// whatever the window): the report flags the exceeded ones.
	Budgets []Status `json:"budgets,omitempty"`
}

// Report is a priced ledger window, grouped: what the renderers write.
type Report struct {
	Since, Until time.Time // the window [Since, Until); a zero bound is open
	By           string
	Lines        []Line
	Totals       Totals
	// For the charts, whatever By is: cost per UTC day (every day of the
	// window, or of the data when a bound is open; days without data only
	// when the window is at most 400 days), per region pair and per bucket
	// (by cost, dearest first).
	Daily   []Line
	Pairs   []Line
	Buckets []Line
}

// Build groups the priced rows whose hour starts in [since, until) (a zero
// bound is open) by bucket, store, region-pair, day or "" (every column),
// and sums them. Lines are in day order for by day, else dearest first
// (then most bytes, then by their columns). An unknown by groups like "".
// Amounts stay exact; renderers round each figure to the cent once, so
// lines may differ from the total by a few cents.
func Build(priced []Priced, since, until time.Time, by string) Report {
	r := Report{Since: since, Until: until, By: by}
	var in []Priced
	for _, p := range priced {
		t := p.HourStart()
		if (!since.IsZero() && t.Before(since)) || (!until.IsZero() && !t.Before(until)) {
			continue
		}
		if p.Bytes == 0 && p.AvoidedBytes == 0 {
			// Rows that carry only reuse distances (a cache hit's
			// prefix, a composite placement's reads): nothing to show.
			continue
		}
		in = append(in, p)
	}
	if CheckBy(by) != nil {
		by = ByNone
	}
	r.Lines = group(in, by)
	r.Daily = daily(in, since, until)
	r.Pairs = group(in, ByRegionPair)
	r.Buckets = group(in, ByBucket)

	t := &r.Totals
	approx, overrides := map[string]bool{}, map[string]bool{}
	onprem := false
	for _, p := range in {
		t.Bytes += p.Bytes
		switch p.Direction {
		case Read:
			t.ReadBytes += p.Bytes
		case Write:
			t.WriteBytes += p.Bytes
		}
		t.AvoidedBytes += p.AvoidedBytes
		t.Cost = t.Cost.Add(p.Cost)
		t.AvoidedCost = t.AvoidedCost.Add(p.AvoidedCost)
		if p.Bytes == 0 && p.AvoidedBytes == 0 {
			continue
		}
		s := p.Schedule
		switch {
		case s.Override:
			overrides[s.Name] = true
		case s.Approx:
			approx[fmt.Sprintf("%s (%s: %s)", s.Name, s.String(), s.Note)] = true
		case s.Class == FromOnPrem:
			onprem = true
		}
	}
	if d := t.AvoidedBytes + t.ReadBytes; d > 0 {
		t.HitRatio = float64(t.AvoidedBytes) / float64(d)
	}
	t.Notes = append(t.Notes,
		"Volume tiers and free tiers (AWS and Azure: first 100 GB a month) count all of a cloud account's traffic in a calendar month; "+
			"this report counts only the bytes fedgate moved, in the regions asked, so tiered costs are estimates: "+
			"the bill may be higher (other traffic already used the free tier) or lower (other traffic reached cheaper tiers).",
		"Amounts are exact sums rounded half to even to the cent once; lines may differ from the total by a few cents.")
	if onprem {
		t.Notes = append(t.Notes, "Bytes leaving on-prem locations are priced 0 USD unless egress.prices in the policy sets a price.")
	}
	for _, n := range sortedKeys(overrides) {
		t.Notes = append(t.Notes, "Rate from the policy file: "+n+".")
	}
	for _, n := range sortedKeys(approx) {
		t.Notes = append(t.Notes, "Approximate rate: "+n+".")
	}
	return r
}

func sortedKeys(m map[string]bool) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// groupKey returns the columns by splits on.
func groupKey(p Priced, by string) Line {
	switch by {
	case ByBucket:
		return Line{Bucket: p.Bucket}
	case ByStore:
		return Line{Store: p.Store}
	case ByRegionPair:
		return Line{Src: p.Src, Dst: p.Dst}
	case ByDay:
		return Line{Day: p.HourStart().Format(time.DateOnly)}
	}
	return Line{Src: p.Src, Dst: p.Dst, Bucket: p.Bucket, Store: p.Store, Direction: p.Direction}
}

func group(in []Priced, by string) []Line {
	type acc struct {
		line                        Line
		src, dst, bucket, store, di bool // the column is mixed
	}
	idx := map[Line]int{}
	var accs []*acc
	for _, p := range in {
		k := groupKey(p, by)
		i, ok := idx[k]
		if !ok {
			i = len(accs)
			idx[k] = i
			l := k
			l.Src, l.Dst, l.Bucket, l.Store, l.Direction = p.Src, p.Dst, p.Bucket, p.Store, p.Direction
			accs = append(accs, &acc{line: l})
		}
		a := accs[i]
		a.src = a.src || a.line.Src != p.Src
		a.dst = a.dst || a.line.Dst != p.Dst
		a.bucket = a.bucket || a.line.Bucket != p.Bucket
		a.store = a.store || a.line.Store != p.Store
		a.di = a.di || a.line.Direction != p.Direction
		a.line.Bytes += p.Bytes
		a.line.AvoidedBytes += p.AvoidedBytes
		a.line.Cost = a.line.Cost.Add(p.Cost)
		a.line.AvoidedCost = a.line.AvoidedCost.Add(p.AvoidedCost)
	}
	out := make([]Line, 0, len(accs))
	for _, a := range accs {
		l := a.line
		if a.src {
			l.Src = ""
		}
		if a.dst {
			l.Dst = ""
		}
		if a.bucket {
			l.Bucket = ""
		}
		if a.store {
			l.Store = ""
		}
		if a.di {
			l.Direction = ""
		}
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b Line) int {
		if by == ByDay {
			return cmp.Compare(a.Day, b.Day)
		}
		return cmp.Or(
			b.Cost.Cmp(a.Cost),
			cmp.Compare(b.Bytes, a.Bytes),
			cmp.Compare(a.Src, b.Src), cmp.Compare(a.Dst, b.Dst),
			cmp.Compare(a.Bucket, b.Bucket), cmp.Compare(a.Store, b.Store),
			cmp.Compare(a.Direction, b.Direction))
	})
	return out
}

// daily returns one line per UTC day: every day of the window (or of the
// data, for an open bound) when that is at most 400 days, else the days
// that have data.
func daily(in []Priced, since, until time.Time) []Line {
	days := group(in, ByDay)
	if len(days) == 0 && (since.IsZero() || until.IsZero()) {
		return days
	}
	first, last := since.UTC(), until.UTC().Add(-time.Nanosecond)
	if since.IsZero() {
		first, _ = time.Parse(time.DateOnly, days[0].Day)
	}
	if until.IsZero() {
		last, _ = time.Parse(time.DateOnly, days[len(days)-1].Day)
	}
	first = time.Date(first.Year(), first.Month(), first.Day(), 0, 0, 0, 0, time.UTC)
	if last.Before(first) || last.Sub(first) > 400*24*time.Hour {
		return days
	}
	have := map[string]Line{}
	for _, d := range days {
		have[d.Day] = d
	}
	var out []Line
	for d := first; !d.After(last); d = d.AddDate(0, 0, 1) {
		s := d.Format(time.DateOnly)
		l, ok := have[s]
		if !ok {
			l = Line{Day: s}
		}
		out = append(out, l)
	}
	return out
}

// columns returns the header of the table and CSV forms.
func (r Report) columns() []string {
	cols := []string{"src", "dst", "bucket", "store", "direction", "bytes", "cost_usd", "avoided_bytes", "avoided_usd"}
	if r.By == ByDay {
		cols = append([]string{"day"}, cols...)
	}
	return cols
}

func window(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// WriteJSON writes the report as
//
//	{"since": RFC 3339, "until": ..., "rows": [{"src", "dst", "bucket",
//	 "store", "direction", "bytes", "cost_usd", "avoided_bytes",
//	 "avoided_usd"}], "totals": {"bytes", "read_bytes", "write_bytes",
//	 "cost_usd", "avoided_bytes", "avoided_usd", "cache_hit_ratio", "notes",
//	 "budgets" (only when set: see Status.MarshalJSON)}}
//
// with locations as "cloud:region", amounts as numbers rounded to the cent,
// an open bound as "", a mixed column as "", and "day" in rows grouped by
// day only.
func WriteJSON(w io.Writer, r Report) error {
	t := r.Totals
	t.HitRatio = math.Round(t.HitRatio*1e6) / 1e6
	if t.Notes == nil {
		t.Notes = []string{}
	}
	rows := r.Lines
	if rows == nil {
		rows = []Line{}
	}
	b, err := json.MarshalIndent(struct {
		Since  string `json:"since"`
		Until  string `json:"until"`
		Rows   []Line `json:"rows"`
		Totals Totals `json:"totals"`
	}{window(r.Since), window(r.Until), rows, t}, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// WriteCSV writes a header (src,dst,bucket,store,direction,bytes,cost_usd,
// avoided_bytes,avoided_usd; by day with a day column first) and one
// record per line, bytes as integers and amounts rounded to the cent. It
// writes no totals: sum the columns (or read the JSON form).
func WriteCSV(w io.Writer, r Report) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(r.columns()); err != nil {
		return err
	}
	for _, l := range r.Lines {
		rec := []string{l.Src, l.Dst, l.Bucket, l.Store, string(l.Direction),
			strconv.FormatInt(l.Bytes, 10), l.Cost.String(), strconv.FormatInt(l.AvoidedBytes, 10), l.AvoidedCost.String()}
		if r.By == ByDay {
			rec = append([]string{l.Day}, rec...)
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteTable writes the report for a terminal: aligned columns, sizes in
// decimal units, amounts in dollars, then the totals, the cache hit ratio,
// the money saved and the notes.
func WriteTable(w io.Writer, r Report) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "Egress %s, by %s\n\n", windowText(r.Since, r.Until), byText(r.By))
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"SRC", "DST", "BUCKET", "STORE", "DIR", "BYTES", "COST", "AVOIDED", "SAVED"}
	if r.By == ByDay {
		head = append([]string{"DAY"}, head...)
	}
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, l := range r.Lines {
		cells := []string{star(l.Src), star(l.Dst), star(l.Bucket), star(l.Store), star(string(l.Direction)),
			HumanBytes(l.Bytes), "$" + l.Cost.String(), HumanBytes(l.AvoidedBytes), "$" + l.AvoidedCost.String()}
		if r.By == ByDay {
			cells = append([]string{l.Day}, cells...)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	t := r.Totals
	tot := []string{"TOTAL", "", "", "", "", HumanBytes(t.Bytes), "$" + t.Cost.String(), HumanBytes(t.AvoidedBytes), "$" + t.AvoidedCost.String()}
	if r.By == ByDay {
		tot = append([]string{""}, tot...)
	}
	fmt.Fprintln(tw, strings.Join(tot, "\t")+"\t")
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(ew, "\nRead %s, wrote %s. Cache hit ratio %.1f%% (avoided / (avoided + read)). Money saved by the cache: $%s.\n",
		HumanBytes(t.ReadBytes), HumanBytes(t.WriteBytes), 100*t.HitRatio, t.AvoidedCost)
	if len(t.Budgets) > 0 {
		fmt.Fprintln(ew, "\nBudgets:")
		for _, b := range t.Budgets {
			fmt.Fprintf(ew, "- %s\n", b.Message())
		}
	}
	if len(t.Notes) > 0 {
		fmt.Fprintln(ew, "\nNotes:")
		for _, n := range t.Notes {
			fmt.Fprintf(ew, "- %s\n", n)
		}
	}
	return ew.err
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func star(s string) string {
	if s == "" {
		return "*"
	}
	return s
}

func windowText(since, until time.Time) string {
	s, u := window(since), window(until)
	if s == "" {
		s = "the beginning"
	}
	if u == "" {
		u = "now"
	}
	return "from " + s + " to " + u
}

func byText(by string) string {
	if by == ByNone || CheckBy(by) != nil {
		return "src, dst, bucket, store and direction"
	}
	return by
}

// HumanBytes writes n in IEC units with two decimals, as the whole CLI
// does (internal/bytesize): 1500000000 -> "1.40 GiB". Prices keep their
// schedules' own unit (USD per GB for AWS and Azure, per GiB for GCP);
// docs/units.md.
func HumanBytes(n int64) string { return bytesize.Format(n) }

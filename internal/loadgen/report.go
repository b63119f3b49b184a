package loadgen

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is the outcome of a run; its JSON form is `fedgate bench --json`.
type Report struct {
	Mode     Mode     `json:"mode"`
	Workload Workload `json:"workload"`
	// Targets in the order given; the second is the comparison.
	Targets []TargetReport `json:"targets"`
	// Ratios are Targets[0] / Targets[1] per operation, with --compare.
	Ratios []Ratio `json:"ratios,omitempty"`
	// Interrupted is set when the run was stopped (Ctrl-C) before its end:
	// the numbers cover what ran.
	Interrupted bool `json:"interrupted"`
}

// Workload is what every target was given.
type Workload struct {
	Sizes           string  `json:"sizes"`
	Objects         int     `json:"objects,omitempty"` // prepared objects (get, mixed, batch)
	Concurrency     int     `json:"concurrency"`
	DurationSeconds float64 `json:"duration_seconds"` // per round and target
	Rounds          int     `json:"rounds"`
	Mix             string  `json:"mix,omitempty"`
	BatchSize       int     `json:"batch_size,omitempty"`
	// Prefix is the run's unique prefix in every target's bucket.
	Prefix string `json:"prefix"`
}

// TargetReport is one target's numbers over all its rounds.
type TargetReport struct {
	Name     string `json:"name"`
	Endpoint string `json:"endpoint"`
	Bucket   string `json:"bucket"`
	// Seconds is the wall time of its rounds together (each round lasts
	// until the requests in flight at its deadline finish).
	Seconds float64        `json:"seconds"`
	Ops     []OpReport     `json:"ops"`
	Rounds  []RoundReport  `json:"rounds"`
	Prepare *PrepareReport `json:"prepare,omitempty"`
	Cleanup CleanupReport  `json:"cleanup"`
}

// OpReport is one kind of operation on one target.
type OpReport struct {
	Op Op `json:"op"`
	// Count is the successful operations; Errors the failed ones.
	Count  int64 `json:"count"`
	Errors int64 `json:"errors"`
	// EntryErrors counts batch entries answered as __errors__ entries.
	EntryErrors int64 `json:"entry_errors,omitempty"`
	// Objects read or written: Count, except for batch (entries read).
	Objects       int64   `json:"objects"`
	Bytes         int64   `json:"bytes"`
	OpsPerSec     float64 `json:"ops_per_sec"`
	ObjectsPerSec float64 `json:"objects_per_sec"`
	BytesPerSec   float64 `json:"bytes_per_sec"`
	MiBPerSec     float64 `json:"mib_per_sec"`
	// Latency of whole successful operations (to the last byte).
	Latency Latency `json:"latency_ms"`
	// FirstByte is the time to the response headers (get) or to the
	// first entry's header (batch).
	FirstByte    *Latency      `json:"first_byte_ms,omitempty"`
	ErrorSamples []ErrorSample `json:"error_samples,omitempty"`
}

// Latency quantiles in milliseconds.
type Latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// ErrorSample is an error message and how often it was seen.
type ErrorSample struct {
	Message string `json:"message"`
	Count   int64  `json:"count"`
}

// RoundReport is one round on one target (all operations together).
type RoundReport struct {
	Round         int     `json:"round"`
	Seconds       float64 `json:"seconds"`
	Ops           int64   `json:"ops"`
	Errors        int64   `json:"errors"`
	OpsPerSec     float64 `json:"ops_per_sec"`
	ObjectsPerSec float64 `json:"objects_per_sec"`
	BytesPerSec   float64 `json:"bytes_per_sec"`
}

// PrepareReport is the creation of the objects read.
type PrepareReport struct {
	Objects int64   `json:"objects"`
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
}

// CleanupReport says what was removed at the end.
type CleanupReport struct {
	Removed       int64  `json:"removed"`
	BucketRemoved bool   `json:"bucket_removed,omitempty"`
	Kept          bool   `json:"kept,omitempty"` // --keep
	Error         string `json:"error,omitempty"`
}

// Ratio is Targets[0] / Targets[1] for one operation; a metric either
// target has no value for is left out.
type Ratio struct {
	Op            Op       `json:"op"`
	OpsPerSec     *float64 `json:"ops_per_sec,omitempty"`
	ObjectsPerSec *float64 `json:"objects_per_sec,omitempty"`
	BytesPerSec   *float64 `json:"bytes_per_sec,omitempty"`
	P50           *float64 `json:"p50,omitempty"`
	P90           *float64 `json:"p90,omitempty"`
	P99           *float64 `json:"p99,omitempty"`
	Max           *float64 `json:"max,omitempty"`
}

// ratios compares a with b operation by operation.
func ratios(a, b TargetReport) []Ratio {
	div := func(x, y float64) *float64 {
		if x <= 0 || y <= 0 {
			return nil
		}
		v := x / y
		return &v
	}
	var out []Ratio
	for _, oa := range a.Ops {
		for _, ob := range b.Ops {
			if oa.Op != ob.Op {
				continue
			}
			out = append(out, Ratio{
				Op:            oa.Op,
				OpsPerSec:     div(oa.OpsPerSec, ob.OpsPerSec),
				ObjectsPerSec: div(oa.ObjectsPerSec, ob.ObjectsPerSec),
				BytesPerSec:   div(oa.BytesPerSec, ob.BytesPerSec),
				P50:           div(oa.Latency.P50, ob.Latency.P50),
				P90:           div(oa.Latency.P90, ob.Latency.P90),
				P99:           div(oa.Latency.P99, ob.Latency.P99),
				Max:           div(oa.Latency.Max, ob.Latency.Max),
			})
		}
	}
	return out
}

// WriteJSON writes r as indented JSON.
func WriteJSON(w io.Writer, r Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes r for people: the workload, a table per target, the
// ratios and the errors seen.
func WriteTable(w io.Writer, r Report) error {
	wl := r.Workload
	fmt.Fprintf(w, "fedgate bench %s: sizes %s", r.Mode, wl.Sizes)
	if wl.Objects > 0 {
		fmt.Fprintf(w, ", %d objects", wl.Objects)
	}
	if wl.Mix != "" {
		fmt.Fprintf(w, ", mix %s", wl.Mix)
	}
	if wl.BatchSize > 0 {
		fmt.Fprintf(w, ", %d entries per batch", wl.BatchSize)
	}
	round := "a round"
	if wl.Rounds > 1 {
		round = fmt.Sprintf("%d rounds", wl.Rounds)
	}
	fmt.Fprintf(w, ", concurrency %d, %s of %s per endpoint\n", wl.Concurrency, round, seconds(wl.DurationSeconds))
	if r.Interrupted {
		fmt.Fprintln(w, "INTERRUPTED: the numbers cover only what ran before Ctrl-C.")
	}
	batch := r.Mode == ModeBatch
	for _, t := range r.Targets {
		fmt.Fprintf(w, "\n%s  bucket %s, %s measured\n", t.Name, t.Bucket, seconds(t.Seconds))
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		head := "OP    \tOPS\tERRORS\tOPS/S\t"
		if batch {
			head += "OBJ/S\t"
		}
		fmt.Fprintln(tw, head+"MiB/S\tP50\tP90\tP99\tMAX\t")
		for _, o := range t.Ops {
			row := fmt.Sprintf("%-6s\t%d\t%s\t%.1f\t", o.Op, o.Count, errorsCell(o), o.OpsPerSec)
			if batch {
				row += fmt.Sprintf("%.1f\t", o.ObjectsPerSec)
			}
			row += fmt.Sprintf("%.2f\t%s\t%s\t%s\t%s\t", o.MiBPerSec, ms(o.Latency.P50), ms(o.Latency.P90), ms(o.Latency.P99), ms(o.Latency.Max))
			fmt.Fprintln(tw, row)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, o := range t.Ops {
			if o.FirstByte != nil && o.Op != OpTotal {
				fmt.Fprintf(w, "  %s first byte: p50 %s, p90 %s, p99 %s, max %s\n", o.Op,
					ms(o.FirstByte.P50), ms(o.FirstByte.P90), ms(o.FirstByte.P99), ms(o.FirstByte.Max))
			}
		}
		if len(t.Rounds) > 1 {
			var parts []string
			for _, rr := range t.Rounds {
				v := fmt.Sprintf("%.0f", rr.OpsPerSec)
				if batch {
					v = fmt.Sprintf("%.0f obj", rr.ObjectsPerSec)
				}
				parts = append(parts, v)
			}
			fmt.Fprintf(w, "  per round (ops/s): %s\n", strings.Join(parts, ", "))
		}
		for _, o := range t.Ops {
			for _, e := range o.ErrorSamples {
				fmt.Fprintf(w, "  %s error (%d×): %s\n", o.Op, e.Count, e.Message)
			}
		}
	}
	if len(r.Ratios) > 0 {
		fmt.Fprintf(w, "\nRatio %s / %s (throughput above 1: the first is faster; latency below 1: the first is faster)\n",
			r.Targets[0].Name, r.Targets[1].Name)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		head := "OP    \tOPS/S\t"
		if batch {
			head += "OBJ/S\t"
		}
		fmt.Fprintln(tw, head+"MiB/S\tP50\tP90\tP99\tMAX\t")
		for _, x := range r.Ratios {
			row := fmt.Sprintf("%-6s\t%s\t", x.Op, ratio(x.OpsPerSec))
			if batch {
				row += ratio(x.ObjectsPerSec) + "\t"
			}
			row += fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t", ratio(x.BytesPerSec), ratio(x.P50), ratio(x.P90), ratio(x.P99), ratio(x.Max))
			fmt.Fprintln(tw, row)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	for _, t := range r.Targets {
		switch c := t.Cleanup; {
		case c.Kept:
			fmt.Fprintf(w, "Kept the objects in %s: s3://%s/%s (--keep)\n", t.Name, t.Bucket, wl.Prefix)
		case c.Error != "":
			fmt.Fprintf(w, "Cleanup of s3://%s/%s at %s FAILED after removing %d objects: %s\n", t.Bucket, wl.Prefix, t.Name, c.Removed, c.Error)
		default:
			extra := ""
			if c.BucketRemoved {
				extra = " and the bucket it created"
			}
			fmt.Fprintf(w, "Removed %d objects under s3://%s/%s from %s%s.\n", c.Removed, t.Bucket, wl.Prefix, t.Name, extra)
		}
	}
	return nil
}

func errorsCell(o OpReport) string {
	if o.EntryErrors > 0 {
		return fmt.Sprintf("%d+%d entries", o.Errors, o.EntryErrors)
	}
	return fmt.Sprint(o.Errors)
}

// ms prints milliseconds with 3 significant digits.
func ms(v float64) string {
	switch {
	case v == 0:
		return "-"
	case v < 10:
		return fmt.Sprintf("%.2fms", v)
	case v < 100:
		return fmt.Sprintf("%.1fms", v)
	case v < 10000:
		return fmt.Sprintf("%.0fms", v)
	}
	return fmt.Sprintf("%.1fs", v/1000)
}

func ratio(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.2fx", *v)
}

func seconds(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(100 * time.Millisecond).String()
}

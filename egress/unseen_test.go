package egress_test

// Traces the project did not tune to, written a second time from
// docs/egress.md's trace format alone ("The trace": six named columns in
// any order, RFC 3339 or Unix-second times, or JSON lines): other code
// than egresstest (no TraceEvent, no WriteCSV), other shapes, another
// policy (testdata/unseen-policy.yaml: three regions in three clouds, one
// replicated bucket), puts and deletes, several seeds. Each trace is
// written to a file and replayed by egress.Simulate through
// egress.NewTraceReader, as `fedgate egress simulate --trace` does.

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fedgate/fedgate/egress"
	"github.com/fedgate/fedgate/policies"
)

// unseenRow is one line of a trace, as docs/egress.md describes it.
type unseenRow struct {
	at                  float64 // Unix seconds
	region, bucket, key string
	size                int64
	op                  string
}

// unseenTrace collects rows; write sorts them by time and writes them.
type unseenTrace struct {
	rows []unseenRow
	rng  *rand.Rand
}

const unseenDay = 86400.0

func (u *unseenTrace) add(at float64, region, bucket, key string, size int64, op string) {
	// Milliseconds: both time forms write the same instant.
	u.rows = append(u.rows, unseenRow{math.Round(at*1000) / 1000, region, bucket, key, size, op})
}

// sizes returns n object sizes between lo and hi bytes.
func (u *unseenTrace) sizes(n int, lo, hi int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = lo + u.rng.Int64N(hi-lo+1)
	}
	return out
}

// pass reads keys (prefix + index) in a shuffled order, spread over dur
// seconds from t0.
func (u *unseenTrace) pass(t0, dur float64, region, bucket, prefix string, sizes []int64, share float64) {
	order := u.rng.Perm(len(sizes))
	n := int(math.Ceil(share * float64(len(order))))
	for j, i := range order[:n] {
		u.add(t0+dur*float64(j)/float64(n), region, bucket, fmt.Sprintf("%s%05d.bin", prefix, i), sizes[i], "get")
	}
}

// The shapes. start is a Unix time; every trace lasts unseenDays.
const unseenDays = 64

// fractional: epochs at a non-integer-day period (1.3 to 6.6 days) over
// a dataset of mixed sizes in S3 read from GCP, and another in Azure read
// from Azure's Europe region at a second period.
func unseenFractional(u *unseenTrace, start float64) {
	periods := []float64{1.3, 2.45, 3.7, 5.2, 6.6}
	p := periods[u.rng.IntN(len(periods))]
	ds := u.sizes(300+u.rng.IntN(500), 256<<20, 1<<30)
	for t := start; t < start+unseenDays*unseenDay; t += p * unseenDay {
		u.pass(t, (3+7*u.rng.Float64())*3600, "tpu-west", "text", "corpus/en/", ds, 1)
	}
	q := periods[u.rng.IntN(len(periods))] + 0.35
	au := u.sizes(200+u.rng.IntN(200), 64<<20, 512<<20)
	for t := start + 0.4*unseenDay; t < start+unseenDays*unseenDay; t += q * unseenDay {
		u.pass(t, 5*3600, "gpu-eu", "audio", "speech/clips/", au, 1)
	}
}

// replaced: a dataset read every 1.5 days is rewritten under a new prefix
// mid-trace (puts from the region that made it), the old one deleted, and
// the new one read from then on.
func unseenReplaced(u *unseenTrace, start float64) {
	n := 400 + u.rng.IntN(300)
	v1, v2 := u.sizes(n, 128<<20, 768<<20), u.sizes(n, 128<<20, 768<<20)
	swap := start + float64(24+u.rng.IntN(12))*unseenDay + 0.3*unseenDay
	for i, sz := range v2 {
		u.add(swap+float64(i), "tpu-west", "images", fmt.Sprintf("ds/v2/%05d.bin", i), sz, "put")
	}
	for i := range v1 {
		u.add(swap+float64(n)+60+float64(i), "tpu-west", "images", fmt.Sprintf("ds/v1/%05d.bin", i), 0, "delete")
	}
	for t := start; t < start+unseenDays*unseenDay; t += 1.5 * unseenDay {
		if t < swap {
			u.pass(t, 4*3600, "gpu-ohio", "images", "ds/v1/", v1, 1)
		} else if t > swap+2*3600 {
			u.pass(t, 4*3600, "gpu-ohio", "images", "ds/v2/", v2, 1)
		}
	}
}

// tiers: Zipf-popular reads by all three regions of the buckets in the
// other clouds, heavy enough to cross tier boundaries, starting late in a
// month so that tiers reset twice.
func unseenTiers(u *unseenTrace, start float64) {
	pairs := [][2]string{{"tpu-west", "text"}, {"tpu-west", "audio"}, {"gpu-ohio", "images"}, {"gpu-ohio", "audio"}, {"gpu-eu", "text"}, {"gpu-eu", "images"}}
	for _, pr := range pairs {
		objs := 1500 + u.rng.IntN(1500)
		sz := u.sizes(objs, 32<<20, 512<<20)
		z := rand.NewZipf(u.rng, 1.05+0.4*u.rng.Float64(), 2, uint64(objs-1))
		reads := 12000 + u.rng.IntN(8000)
		for range reads {
			i := z.Uint64()
			u.add(start+u.rng.Float64()*unseenDays*unseenDay, pr[0], pr[1], fmt.Sprintf("pool/%s/%05d.bin", pr[0], i), sz[i], "get")
		}
	}
}

// tiny: many small objects (1 to 48 KiB) of the replicated bucket, a
// random part of them read in a session each day, requests outweighing
// bytes.
func unseenTiny(u *unseenTrace, start float64) {
	sz := u.sizes(5000+u.rng.IntN(2000), 1<<10, 48<<10)
	for d := range unseenDays {
		u.pass(start+float64(d)*unseenDay+(2+4*u.rng.Float64())*3600, 2*3600, "gpu-eu", "shared", "thumbs/s/", sz, 0.2+0.4*u.rng.Float64())
	}
}

// late: a dataset read from GCP every 2.8 days from the start; Azure's
// region appears on day 41 and reads it every 2.2 days; the AWS region
// appears on day 55 for one pass.
func unseenLate(u *unseenTrace, start float64) {
	ds := u.sizes(250+u.rng.IntN(250), 512<<20, 1<<30)
	end := start + unseenDays*unseenDay
	for t := start; t < end; t += 2.8 * unseenDay {
		u.pass(t, 6*3600, "tpu-west", "shared", "ckpt/base/", ds, 1)
	}
	for t := start + 41*unseenDay; t < end; t += 2.2 * unseenDay {
		u.pass(t, 8*3600, "gpu-eu", "shared", "ckpt/base/", ds, 1)
	}
	u.pass(start+55*unseenDay, 10*3600, "gpu-ohio", "shared", "ckpt/base/", ds, 1)
}

// bursts: reads of a dataset in bursts of a few hours separated by 9 to
// 25 days of silence, drawn at random; the silences longer than the
// evidence the advisor needs (8 days) and shorter than its T_even.
func unseenBursts(u *unseenTrace, start float64) {
	for _, rb := range [][2]string{{"gpu-ohio", "audio"}, {"gpu-eu", "text"}} {
		ds := u.sizes(150+u.rng.IntN(200), 256<<20, 1<<30)
		t := start + u.rng.Float64()*2*unseenDay
		for ; t < start+60*unseenDay; t += (9 + 16*u.rng.Float64()) * unseenDay {
			u.pass(t, (2+6*u.rng.Float64())*3600, rb[0], rb[1], "burst/"+rb[0]+"/", ds, 1)
		}
		// And one on the last days, however soon after the one before.
		u.pass(start+62*unseenDay, 3*3600, rb[0], rb[1], "burst/"+rb[0]+"/", ds, 1)
	}
}

var unseenShapes = []struct {
	name string
	make func(*unseenTrace, float64)
}{{"fractional", unseenFractional}, {"replaced", unseenReplaced}, {"tiers", unseenTiers}, {"tiny", unseenTiny}, {"late", unseenLate}, {"bursts", unseenBursts}}

// write sorts the rows by time (a stable sort: a put before the deletes
// and reads the generator put after it at equal times) and writes them
// to path: CSV with the columns in another order than the page's example
// and times in both forms, or JSON lines.
func (u *unseenTrace) write(path string, asJSON bool) error {
	slices.SortStableFunc(u.rows, func(a, b unseenRow) int { return cmp.Compare(a.at, b.at) })
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	if !asJSON {
		fmt.Fprintln(w, "# written by unseen_test.go from docs/egress.md")
		fmt.Fprintln(w, "op,size,key,bucket,region,time")
	}
	for i, r := range u.rows {
		ms := int64(math.Round(r.at * 1000))
		ts := time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
		if i%2 == 1 {
			ts = strconv.FormatInt(ms/1000, 10) + "." + fmt.Sprintf("%03d", ms%1000)
		}
		if asJSON {
			b, _ := json.Marshal(map[string]any{"time": ts, "region": r.region, "bucket": r.bucket, "key": r.key, "size": r.size, "op": r.op})
			w.Write(append(b, '\n'))
			continue
		}
		fmt.Fprintf(w, "%s,%d,%s,%s,%s,%s\n", r.op, r.size, r.key, r.bucket, r.region, ts)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

var unseenSeeds = []uint64{7, 1009, 424242}

// TestAdvisorUnseenTraces: the bounds (advisor at most 1.05 × the
// cheapest other strategy that keeps the policy's placements and 1.3 × the
// offline optimum) on the
// independent traces, three seeds each. `go test ./egress -run
// TestAdvisorUnseenTraces -v` prints the table docs/egress.md shows.
func TestAdvisorUnseenTraces(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 18 traces of 64 days")
	}
	pol, err := policies.Load("testdata/unseen-policy.yaml", policies.AllFeatures())
	if err != nil {
		t.Fatal(err)
	}
	tab, err := egress.NewTable(pol.Egress.Prices)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// The 20th: the trace crosses two month boundaries.
	start := float64(time.Date(2027, 1, 20, 0, 0, 0, 0, time.UTC).Unix())
	var table strings.Builder
	fmt.Fprintln(&table, "| trace | seed | rows | advisor USD | cheapest other | advisor / cheapest other | advisor / optimum | optimum USD |")
	fmt.Fprintln(&table, "|---|---:|---:|---:|---|---:|---:|---:|")
	for _, sh := range unseenShapes {
		if only := os.Getenv("UNSEEN_ONLY"); only != "" && only != sh.name {
			continue
		}
		for _, seed := range unseenSeeds {
			u := &unseenTrace{rng: rand.New(rand.NewPCG(seed, uint64(len(sh.name))))}
			sh.make(u, start)
			name := fmt.Sprintf("%s-%d", sh.name, seed)
			path := filepath.Join(dir, name+".csv")
			if seed%2 == 0 {
				path = filepath.Join(dir, name+".jsonl")
			}
			if err := u.write(path, seed%2 == 0); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			res, err := egress.Simulate(context.Background(), egress.NewTraceReader(path, f), egress.SimOptions{Policy: pol, Transfer: tab})
			f.Close()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if days := res.End.Sub(res.Start).Hours() / 24; days < 60 {
				t.Fatalf("%s: %.1f days: want at least 60", name, days)
			}
			adv, _ := res.Strategy("advisor")
			other, vsOther, vsOpt := advisorBounds(t, name, res)
			fmt.Fprintf(&table, "| %s | %d | %d | %s | %s %s | %.3f | %.3f | %s |\n", sh.name, seed, res.Rows, adv.Total, other.Name, other.Total,
				vsOther, vsOpt, res.Optimum)
			if vsOther > 1.05 || vsOpt > 1.3 || testing.Verbose() {
				var tb strings.Builder
				_ = egress.WriteSimTable(&tb, res)
				t.Logf("%s:\n%s", name, tableOnly(tb.String()))
			}
		}
	}
	t.Logf("\n%s", table.String())
}

package egresstest

import (
	"fmt"
	"iter"
	"math/rand/v2"
	"time"

	"github.com/fedgate/fedgate/egress"
)

// Diurnal is reads of a pool of objects (Zipf popularity) during the
// working hours of each day only: Hours hours from Offset after midnight
// UTC, Reads a day, for Days days.
type Diurnal struct {
	Region, Bucket, Prefix string // keys: Prefix + "obj-NNNNNN"
	Objects                int
	Size                   int64
	Start                  time.Time // a midnight
	Days, Reads            int
	Offset, Hours          time.Duration
	Seed                   uint64
}

// Events yields the reads.
func (d Diurnal) Events() iter.Seq[egress.TraceEvent] {
	return func(yield func(egress.TraceEvent) bool) {
		rng := rand.New(rand.NewPCG(d.Seed, 3))
		zipf := rand.NewZipf(rng, 1.2, 1, uint64(d.Objects-1))
		names := rng.Perm(d.Objects)
		step := d.Hours / time.Duration(max(d.Reads, 1))
		for day := range d.Days {
			t0 := d.Start.Add(time.Duration(day)*24*time.Hour + d.Offset)
			for i := range d.Reads {
				o := names[zipf.Uint64()]
				if !yield(egress.TraceEvent{Time: t0.Add(time.Duration(i) * step), Region: d.Region, Bucket: d.Bucket,
					Key: fmt.Sprintf("%sobj-%06d", d.Prefix, o), Size: d.Size, Op: egress.OpGet}) {
					return
				}
			}
		}
	}
}

// FamilyDays is how long every trace of Families lasts.
const FamilyDays = 60

// FamilyNames names the traces of Families, in the order docs/egress.md
// shows them.
var FamilyNames = []string{"periodic-1d", "periodic-2d", "periodic-3d", "periodic-4d", "periodic-5d", "periodic-6d", "periodic-7d",
	"periodic-3d-2tb", "bursts", "scans", "zipf-3clouds", "diurnal", "small-objects", "replaced", "mixed-60d"}

// Families returns trace families the advisor was not tuned to, each
// FamilyDays long from start (seeded), for
// egress/testdata/families-policy.yaml (regions gpu-gcp,
// gpu-aws and gpu-aws-west; buckets data-s3, data-gcs and data-blob):
//
//   - periodic-Nd: gpu-gcp reads a 1 TiB dataset (1,024 × 1 GiB in S3)
//     in full every N days (N = 1..7), each pass taking 6 hours;
//   - periodic-3d-2tb: gpu-gcp reads a 2 TB dataset (2,000 × 1 GB in S3)
//     every 3 days, 10 epochs of 20 hours (the first trace);
//   - bursts: a day of reads of 300 objects of 1 GiB every 3 weeks,
//     Azure → gpu-aws, and every 2 weeks, S3 → gpu-aws-west;
//   - scans: gpu-gcp reads 120 parts of 40 × 512 MiB (in S3) once each;
//   - zipf-3clouds: each of the three regions reads 30,000 times from
//     3,000 objects of 256 MiB in each of the other clouds' buckets (Zipf,
//     s = 1.1), starting mid-month, so tiers reset at month boundaries;
//   - diurnal: gpu-aws reads 2,000 times a day between 08:00 and 18:00
//     from 2,000 objects of 128 MiB in GCS (Zipf);
//   - small-objects: gpu-aws reads 20,000 objects of 64 KiB (in GCS)
//     once a day, requests outweighing bytes;
//   - replaced: gpu-gcp reads a 500 GiB dataset (in S3) daily for 30 days,
//     then its replacement (new keys) daily for 30 days;
//   - mixed-60d: periodic-3d, bursts, scans and diurnal interleaved.
func Families(start time.Time) map[string]iter.Seq[egress.TraceEvent] {
	const day = 24 * time.Hour
	span := FamilyDays * day
	out := map[string]iter.Seq[egress.TraceEvent]{}
	periodic := func(n int) Epochs {
		return Epochs{Region: "gpu-gcp", Bucket: "data-s3", Prefix: fmt.Sprintf("train/p%dd/", n), Objects: 1024, Size: 1 << 30, Start: start,
			Epochs: FamilyDays / n, Period: time.Duration(n) * day, Duration: 6 * time.Hour, Seed: uint64(10 + n)}
	}
	for n := 1; n <= 7; n++ {
		out[fmt.Sprintf("periodic-%dd", n)] = periodic(n).Events()
	}
	out["periodic-3d-2tb"] = Epochs{Region: "gpu-gcp", Bucket: "data-s3", Prefix: "train/big/", Objects: 2000, Size: 1e9, Start: start,
		Epochs: 10, Period: 3 * day, Duration: 20 * time.Hour, Seed: 20}.Events()
	bursts := func() iter.Seq[egress.TraceEvent] {
		return Merge(
			Epochs{Region: "gpu-aws", Bucket: "data-blob", Prefix: "burst/a/", Objects: 300, Size: 1 << 30, Start: start,
				Epochs: 3, Period: 21 * day, Duration: day, Seed: 21}.Events(),
			Epochs{Region: "gpu-aws-west", Bucket: "data-s3", Prefix: "burst/b/", Objects: 300, Size: 1 << 30, Start: start.Add(2 * day),
				Epochs: 4, Period: 14 * day, Duration: day, Seed: 22}.Events())
	}
	out["bursts"] = bursts()
	scans := Scans{Region: "gpu-gcp", Bucket: "data-s3", Prefixes: 120, Objects: 40, Size: 512 << 20, Start: start, Span: span}
	out["scans"] = scans.Events()
	mid := time.Date(start.Year(), start.Month(), 15, 0, 0, 0, 0, time.UTC)
	if mid.Before(start) {
		mid = mid.AddDate(0, 1, 0)
	}
	var zs []iter.Seq[egress.TraceEvent]
	for i, rb := range [][2]string{{"gpu-gcp", "data-s3"}, {"gpu-gcp", "data-blob"}, {"gpu-aws", "data-gcs"}, {"gpu-aws", "data-blob"},
		{"gpu-aws-west", "data-gcs"}, {"gpu-aws-west", "data-s3"}} {
		zs = append(zs, Zipf{Region: rb[0], Bucket: rb[1], Prefix: fmt.Sprintf("zipf/%s/", rb[0]), Objects: 3000, Size: 256 << 20, Start: mid,
			Reads: 30000, Span: span, S: 1.1, Seed: uint64(30 + i)}.Events())
	}
	out["zipf-3clouds"] = Merge(zs...)
	diurnal := Diurnal{Region: "gpu-aws", Bucket: "data-gcs", Prefix: "serve/", Objects: 2000, Size: 128 << 20, Start: start,
		Days: FamilyDays, Reads: 2000, Offset: 8 * time.Hour, Hours: 10 * time.Hour, Seed: 40}
	out["diurnal"] = diurnal.Events()
	out["small-objects"] = Epochs{Region: "gpu-aws", Bucket: "data-gcs", Prefix: "small/", Objects: 20000, Size: 64 << 10, Start: start,
		Epochs: FamilyDays, Period: day, Duration: 4 * time.Hour, Seed: 50}.Events()
	out["replaced"] = Merge(
		Epochs{Region: "gpu-gcp", Bucket: "data-s3", Prefix: "ds/v1/", Objects: 500, Size: 1 << 30, Start: start,
			Epochs: 30, Period: day, Duration: 4 * time.Hour, Seed: 60}.Events(),
		Epochs{Region: "gpu-gcp", Bucket: "data-s3", Prefix: "ds/v2/", Objects: 500, Size: 1 << 30, Start: start.Add(30 * day),
			Epochs: 30, Period: day, Duration: 4 * time.Hour, Seed: 61}.Events())
	out["mixed-60d"] = Merge(periodic(3).Events(), bursts(), scans.Events(), diurnal.Events())
	return out
}

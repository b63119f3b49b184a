// Package egresstest makes synthetic access traces of known shapes for the
// egress simulator's tests and for trying `fedgate egress simulate`:
// epochs over a dataset, Zipf-popular reads, one-shot scans, and
// checkpoints written in one region and read in another. Every generator
// is deterministic for its Seed and yields rows in time order, one at a
// time (no generator holds its trace in memory); Merge interleaves several.
package egresstest

import (
	"fmt"
	"io"
	"iter"
	"math/rand/v2"
	"time"

	"github.com/fedgate/fedgate/egress"
)

// Epochs is a training job reading a whole dataset once per epoch, in a
// new random order each time: the dataset is re-read every Period.
type Epochs struct {
	Region, Bucket, Prefix string // the keys are Prefix + "shard-NNNNNN.tar"
	Objects                int
	Size                   int64 // bytes per object
	Start                  time.Time
	Epochs                 int
	// Period is the time from one epoch's start to the next; each epoch's
	// reads are spread evenly over Duration (at most Period).
	Period, Duration time.Duration
	Seed             uint64
}

// Events yields the epochs' reads.
func (e Epochs) Events() iter.Seq[egress.TraceEvent] {
	return func(yield func(egress.TraceEvent) bool) {
		rng := rand.New(rand.NewPCG(e.Seed, 1))
		order := make([]int, e.Objects)
		for i := range order {
			order[i] = i
		}
		step := e.Duration / time.Duration(max(e.Objects, 1))
		for ep := range e.Epochs {
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			t0 := e.Start.Add(time.Duration(ep) * e.Period)
			for i, o := range order {
				if !yield(egress.TraceEvent{Time: t0.Add(time.Duration(i) * step), Region: e.Region, Bucket: e.Bucket,
					Key: fmt.Sprintf("%sshard-%06d.tar", e.Prefix, o), Size: e.Size, Op: egress.OpGet}) {
					return
				}
			}
		}
	}
}

// Zipf is reads of a pool of objects whose popularity follows Zipf's law
// (the k-th most popular is read in proportion to 1/k^S), arriving as a
// Poisson process over Span: feature stores, embeddings, hot and cold
// shards of a shared corpus.
type Zipf struct {
	Region, Bucket, Prefix string // keys: Prefix + "obj-NNNNNN"
	Objects                int
	Size                   int64
	Start                  time.Time
	Reads                  int
	Span                   time.Duration
	S                      float64 // > 1; 0 means 1.2
	Seed                   uint64
}

// Events yields the reads.
func (z Zipf) Events() iter.Seq[egress.TraceEvent] {
	return func(yield func(egress.TraceEvent) bool) {
		rng := rand.New(rand.NewPCG(z.Seed, 2))
		s := z.S
		if s <= 1 {
			s = 1.2
		}
		zipf := rand.NewZipf(rng, s, 1, uint64(z.Objects-1))
		// The popularity rank of an object is not its name's order.
		names := rng.Perm(z.Objects)
		mean := float64(z.Span) / float64(max(z.Reads, 1))
		t := float64(0)
		for range z.Reads {
			t += rng.ExpFloat64() * mean
			if t >= float64(z.Span) {
				t = float64(z.Span) - 1
			}
			k := names[zipf.Uint64()]
			if !yield(egress.TraceEvent{Time: z.Start.Add(time.Duration(t)), Region: z.Region, Bucket: z.Bucket,
				Key: fmt.Sprintf("%sobj-%06d", z.Prefix, k), Size: z.Size, Op: egress.OpGet}) {
				return
			}
		}
	}
}

// Scans is one-shot reads: Prefixes parts of a bucket, each of Objects
// objects, read once each, one part after the other, evenly over Span
// (data preparation, a single pass of evaluation, an export).
type Scans struct {
	Region, Bucket string // keys: "scan/part-NNNN/obj-NNNNNN"
	Prefixes       int
	Objects        int // per prefix
	Size           int64
	Start          time.Time
	Span           time.Duration
}

// Events yields the reads.
func (s Scans) Events() iter.Seq[egress.TraceEvent] {
	return func(yield func(egress.TraceEvent) bool) {
		n := s.Prefixes * s.Objects
		step := s.Span / time.Duration(max(n, 1))
		for i := range n {
			if !yield(egress.TraceEvent{Time: s.Start.Add(time.Duration(i) * step), Region: s.Region, Bucket: s.Bucket,
				Key: fmt.Sprintf("scan/part-%04d/obj-%06d", i/s.Objects, i%s.Objects), Size: s.Size, Op: egress.OpGet}) {
				return
			}
		}
	}
}

// Checkpoints is a training job in Writer writing a checkpoint of Shards
// objects every Every, which a job in Reader (evaluation, or a second
// cluster resuming) reads ReadDelay later; every ReadAgain-th checkpoint
// is read a second time AgainAfter after the first read (0: never).
// Checkpoints older than Keep steps are deleted.
type Checkpoints struct {
	Writer, Reader, Bucket string // keys: "run/step-NNNNNN/shard-NN"
	Shards                 int
	Size                   int64
	Start                  time.Time
	Count                  int
	Every, ReadDelay       time.Duration // ReadDelay + AgainAfter < Every
	ReadAgain              int
	AgainAfter             time.Duration
	Keep                   int // 0: keep all
}

// Events yields the writes, reads and deletes.
func (c Checkpoints) Events() iter.Seq[egress.TraceEvent] {
	return func(yield func(egress.TraceEvent) bool) {
		key := func(step, shard int) string { return fmt.Sprintf("run/step-%06d/shard-%02d", step, shard) }
		for i := range c.Count {
			t0 := c.Start.Add(time.Duration(i) * c.Every)
			ev := func(t time.Time, region, key string, size int64, op egress.TraceOp) bool {
				return yield(egress.TraceEvent{Time: t, Region: region, Bucket: c.Bucket, Key: key, Size: size, Op: op})
			}
			if c.Keep > 0 && i >= c.Keep {
				for s := range c.Shards {
					if !ev(t0, c.Writer, key(i-c.Keep, s), 0, egress.OpDelete) {
						return
					}
				}
			}
			for s := range c.Shards {
				if !ev(t0.Add(time.Duration(s)*time.Second), c.Writer, key(i, s), c.Size, egress.OpPut) {
					return
				}
			}
			for s := range c.Shards {
				if !ev(t0.Add(c.ReadDelay+time.Duration(s)*time.Second), c.Reader, key(i, s), c.Size, egress.OpGet) {
					return
				}
			}
			if c.ReadAgain > 0 && i%c.ReadAgain == 0 {
				for s := range c.Shards {
					if !ev(t0.Add(c.ReadDelay+c.AgainAfter+time.Duration(s)*time.Second), c.Reader, key(i, s), c.Size, egress.OpGet) {
						return
					}
				}
			}
		}
	}
}

// Merge interleaves traces in time order (rows at the same time in the
// order of the traces given). Each must be in time order itself.
func Merge(traces ...iter.Seq[egress.TraceEvent]) iter.Seq[egress.TraceEvent] {
	return func(yield func(egress.TraceEvent) bool) {
		type head struct {
			next func() (egress.TraceEvent, bool)
			stop func()
			ev   egress.TraceEvent
			ok   bool
		}
		heads := make([]*head, len(traces))
		for i, tr := range traces {
			next, stop := iter.Pull(tr)
			defer stop()
			h := &head{next: next, stop: stop}
			h.ev, h.ok = next()
			heads[i] = h
		}
		for {
			best := -1
			for i, h := range heads {
				if h.ok && (best < 0 || h.ev.Time.Before(heads[best].ev.Time)) {
					best = i
				}
			}
			if best < 0 {
				return
			}
			h := heads[best]
			if !yield(h.ev) {
				return
			}
			h.ev, h.ok = h.next()
		}
	}
}

// WriteCSV writes a trace as CSV (egress.TraceWriter).
func WriteCSV(w io.Writer, trace iter.Seq[egress.TraceEvent]) error {
	tw := egress.NewTraceWriter(w)
	for ev := range trace {
		if err := tw.Write(ev); err != nil {
			return err
		}
	}
	return tw.Flush()
}

// StandardShapes names the traces of Standard, single shapes first.
var StandardShapes = []string{"epochs", "scans", "zipf", "checkpoints", "mixed"}

// Standard returns the traces the simulator's tests and docs/egress.md
// replay against egress/testdata/sim-policy.yaml (regions
// gpu-gcp in gcp:us-central1 and gpu-aws in aws:us-east-1; stores in AWS,
// GCP and Azure), two weeks from start, by name (StandardShapes):
//
//   - epochs: gpu-gcp reads a 200 GiB dataset (400 × 512 MiB, bucket
//     imagenet, mounted from Azure) once every 8 hours, each pass taking
//     6 hours, 40 times;
//   - scans: gpu-gcp reads 56 parts of 50 GiB (bucket scans, in S3) once
//     each, one after the other;
//   - zipf: gpu-aws reads 40,000 times from 4,000 objects of 256 MiB
//     (bucket features, in GCS) with Zipf popularity (s = 1.2);
//   - checkpoints: gpu-gcp writes a 16 GiB checkpoint (8 × 2 GiB, bucket
//     checkpoints, in GCS) every 2 hours, gpu-aws reads each 30 minutes
//     later and every 4th again 40 minutes after that; checkpoints older
//     than 12 steps are deleted;
//   - mixed: the four interleaved.
func Standard(start time.Time) map[string]iter.Seq[egress.TraceEvent] {
	const span = 14 * 24 * time.Hour
	epochs := Epochs{Region: "gpu-gcp", Bucket: "imagenet", Prefix: "train/in1k/", Objects: 400, Size: 512 << 20, Start: start,
		Epochs: 40, Period: 8 * time.Hour, Duration: 6 * time.Hour, Seed: 1}
	scans := Scans{Region: "gpu-gcp", Bucket: "scans", Prefixes: 56, Objects: 50, Size: 1 << 30, Start: start, Span: span}
	zipf := Zipf{Region: "gpu-aws", Bucket: "features", Prefix: "emb/v1/", Objects: 4000, Size: 256 << 20, Start: start,
		Reads: 40000, Span: span, S: 1.2, Seed: 2}
	ckpt := Checkpoints{Writer: "gpu-gcp", Reader: "gpu-aws", Bucket: "checkpoints", Shards: 8, Size: 2 << 30, Start: start,
		Count: 14 * 12, Every: 2 * time.Hour, ReadDelay: 30 * time.Minute, ReadAgain: 4, AgainAfter: 40 * time.Minute, Keep: 12}
	return map[string]iter.Seq[egress.TraceEvent]{
		"epochs":      epochs.Events(),
		"scans":       scans.Events(),
		"zipf":        zipf.Events(),
		"checkpoints": ckpt.Events(),
		"mixed":       Merge(epochs.Events(), scans.Events(), zipf.Events(), ckpt.Events()),
	}
}

// Package loadgen is the engine of `fedgate bench`: a load generator for
// any S3 endpoint (fedgate, MinIO, AWS S3, ...) in the spirit of MinIO's
// warp and AIStore's aisloader. It creates its own objects under a unique
// prefix, runs GET, PUT, mixed or batch-GET workers for a duration, measures
// throughput and latency (HdrHistogram), optionally against a second
// endpoint in alternating rounds, and removes what it created.
//
// It talks S3 through aws-sdk-go-v2 and fedgate's batch GET
// (POST /_fedgate/v1/batch) through a SigV4-signed HTTP request; it imports
// nothing of fedgate but the size parser of the policy file.
package loadgen

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// Mode is the kind of workload.
type Mode string

// The workloads.
const (
	// ModeGet GETs random objects of a set prepared before the run.
	ModeGet Mode = "get"
	// ModePut PUTs new objects.
	ModePut Mode = "put"
	// ModeMixed draws GET, PUT, DELETE and HEAD by the weights of Config.Mix
	// over a prepared set that PUTs add to and DELETEs take from.
	ModeMixed Mode = "mixed"
	// ModeBatch reads random objects of a prepared set in batches through
	// fedgate's batch GET.
	ModeBatch Mode = "batch"
)

// Op is one kind of operation measured.
type Op string

// The operations.
const (
	OpGet    Op = "get"
	OpPut    Op = "put"
	OpStat   Op = "stat"
	OpDelete Op = "delete"
	OpBatch  Op = "batch"
	// OpTotal is the sum over every kind (reported when there are several).
	OpTotal Op = "total"
)

// opOrder is the order operations are reported in.
var opOrder = []Op{OpGet, OpPut, OpStat, OpDelete, OpBatch, OpTotal}

// Target is one S3 endpoint to load.
type Target struct {
	// Name labels the target in reports; default: the endpoint.
	Name string
	// Endpoint is the server's URL ("http://127.0.0.1:9000"); "" is AWS S3
	// itself (as the SDK resolves it for Region).
	Endpoint string
	// Region is the signing region.
	Region string
	// Credentials sign every request.
	Credentials aws.CredentialsProvider
	// Bucket holds the objects; it is created (and removed at the end)
	// when it does not exist.
	Bucket string
	// PathStyle addresses buckets as http://host/bucket/key.
	PathStyle bool
	// TLS is the client's TLS configuration for an https endpoint (nil:
	// the system's roots).
	TLS *tls.Config
}

// Config is one benchmark: the workload and the targets it runs against.
type Config struct {
	Mode Mode
	// Targets are loaded one after the other, in alternating rounds; one
	// or two (the second is the comparison).
	Targets []Target
	// Prefix is put before the run's unique prefix
	// ("<Prefix>fedgate-bench-<time>-<random>/").
	Prefix string
	// Sizes are the objects' sizes.
	Sizes Sizes
	// Objects is how many objects get, mixed and batch prepare.
	Objects int
	// Concurrency is the number of workers, each with one request in flight.
	Concurrency int
	// Duration is how long each round runs on each target.
	Duration time.Duration
	// Rounds is the number of rounds (each target once per round).
	Rounds int
	// Mix weighs mixed mode's operations.
	Mix Mix
	// BatchSize is the number of entries per batch request.
	BatchSize int
	// ContinueOnError asks the batch server to answer a failed entry with
	// an __errors__ entry instead of ending the stream.
	ContinueOnError bool
	// Keep leaves the objects (and a bucket the run created) in place.
	Keep bool
	// Log gets warnings (cleanup failures); default: discard.
	Log *slog.Logger
	// Progress, when set, is called every ProgressEvery (default 250ms)
	// while a phase runs and once more at its end, always from one
	// goroutine.
	Progress      func(Snapshot)
	ProgressEvery time.Duration
}

// Phase is what a target is doing.
type Phase string

// The phases of a run.
const (
	PhasePrepare Phase = "prepare"
	PhaseRun     Phase = "run"
	PhaseCleanup Phase = "cleanup"
)

// Snapshot is the progress of one phase on one target.
type Snapshot struct {
	Target string
	Phase  Phase
	// Round counts from 1 (PhaseRun only) of Rounds.
	Round, Rounds int
	// Elapsed since the phase started; Duration is the run phase's length.
	Elapsed, Duration time.Duration
	// Done of Total objects prepared or removed (Total -1: not known yet).
	Done, Total int64
	// Ops, Objects, Bytes and Errors so far in this phase (run phase).
	Ops, Objects, Bytes, Errors int64
	// Final is set on the last snapshot of a phase.
	Final bool
}

// Limits of the settings.
const (
	MaxObjectSize = 5 << 30 // a single PUT
	MaxTargets    = 2
)

// check validates c and fills in defaults.
func (c *Config) check() error {
	switch c.Mode {
	case ModeGet, ModePut, ModeMixed, ModeBatch:
	default:
		return fmt.Errorf("unknown mode %q: want get, put, mixed or batch", c.Mode)
	}
	if len(c.Targets) == 0 || len(c.Targets) > MaxTargets {
		return fmt.Errorf("want 1 or 2 targets, got %d", len(c.Targets))
	}
	for i := range c.Targets {
		t := &c.Targets[i]
		if t.Bucket == "" {
			return errors.New("no bucket given")
		}
		if t.Credentials == nil {
			return errors.New("no credentials given")
		}
		if t.Region == "" {
			t.Region = "us-east-1"
		}
		if t.Endpoint != "" && !strings.Contains(t.Endpoint, "://") {
			t.Endpoint = "http://" + t.Endpoint
		}
		t.Endpoint = strings.TrimRight(t.Endpoint, "/")
		if t.Name == "" {
			t.Name = t.Endpoint
			if t.Name == "" {
				t.Name = "s3." + t.Region + ".amazonaws.com"
			}
		}
		if c.Mode == ModeBatch && t.Endpoint == "" {
			return errors.New("batch mode needs the endpoint of a fedgate server (--endpoint)")
		}
	}
	if len(c.Targets) == 2 && c.Targets[0].Name == c.Targets[1].Name {
		c.Targets[0].Name += " (" + c.Targets[0].Bucket + ")"
		c.Targets[1].Name += " (" + c.Targets[1].Bucket + ")"
		if c.Targets[0].Name == c.Targets[1].Name {
			return errors.New("the two targets are the same endpoint and bucket")
		}
	}
	if c.Sizes.n() == 0 {
		return errors.New("no object size given")
	}
	if c.Concurrency < 1 {
		return fmt.Errorf("concurrency %d: want at least 1", c.Concurrency)
	}
	if c.Duration <= 0 {
		return fmt.Errorf("duration %s: want more than 0", c.Duration)
	}
	if c.Rounds < 1 {
		return fmt.Errorf("rounds %d: want at least 1", c.Rounds)
	}
	switch c.Mode {
	case ModeGet, ModeMixed, ModeBatch:
		if c.Objects < 1 {
			return fmt.Errorf("objects %d: %s needs at least 1 object to read", c.Objects, c.Mode)
		}
	}
	if c.Mode == ModeMixed && c.Mix.total() == 0 {
		return errors.New("mixed mode needs a mix with at least one weight above 0")
	}
	if c.Mode == ModeBatch && c.BatchSize < 1 {
		return fmt.Errorf("batch size %d: want at least 1", c.BatchSize)
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.ProgressEvery <= 0 {
		c.ProgressEvery = 250 * time.Millisecond
	}
	return nil
}

package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go/logging"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/fedgate/fedgate/internal/loadgen"
)

// benchFlags are the flags of `fedgate bench` and its modes.
type benchFlags struct {
	endpoint, bucket, prefix        string
	accessKey, secretKey, profile   string
	region, caFile                  string
	pathStyle                       bool
	size                            string
	objects, concurrency, rounds    int
	duration                        time.Duration
	compare, compareBucket          string
	compareAccessKey, compareSecret string
	compareProfile, compareRegion   string
	keep, asJSON                    bool
	mix                             string
	batchSize                       int
	continueOnError                 bool
	cmd                             *cobra.Command // the mode's command, for Changed
	getenv                          func(string) string
	credentialsTimeout              time.Duration
	progressEvery, progressLine     time.Duration
	stderrIsTerminal                func(io.Writer) bool
	logLevel                        slog.Level
	defaultRegion                   string
	loadConfig                      func(ctx context.Context, profile string) (aws.Config, error)
	caBundle                        func() (*tls.Config, error)
}

const benchLong = `Load any S3 endpoint (fedgate, MinIO, AWS S3, ...) and measure it: throughput,
operations per second and latency quantiles (p50, p90, p99, max) per kind of
operation, like MinIO's warp or AIStore's aisloader.

The modes:
  get     GET random objects of a set it writes first (--objects, --size)
  put     PUT new objects
  mixed   GET, HEAD, PUT and DELETE drawn by --mix over a set it writes first
  batch   fedgate's batch GET (POST /_fedgate/v1/batch): --batch-size random
          objects per request, read as one tar stream (fedgate servers only)

It writes only under a prefix of its own, s3://BUCKET/[PREFIX]fedgate-bench-<time>-<id>/,
creates the bucket if it does not exist, and removes everything it wrote (and a
bucket it created) at the end, also after Ctrl-C (press it again to leave the
objects; --keep leaves them on purpose).

Each of --concurrency workers keeps one request in flight for --duration; requests
are not retried (a failure is counted and listed) and bodies are sent as
UNSIGNED-PAYLOAD. With --compare URL the same workload runs against a second
endpoint too, the two taking turns for --rounds rounds, and a last table gives
the ratio endpoint / compare of every number.

Credentials: --access-key and --secret-key, else the AWS SDK's usual chain
(AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE or --profile, ~/.aws).
Progress goes to stderr (a live line on a terminal, a line every few seconds
otherwise); the result table, or with --json the result as JSON, to stdout.
docs/bench.md explains every number.`

const benchExamples = `  # 16 KiB GETs against a local fedgate, 16 workers for 30 s
  fedgate bench get --endpoint http://127.0.0.1:9000 --size 16KiB

  # the same against fedgate and MinIO in turns, 3 rounds of 20 s each
  fedgate bench get --endpoint http://127.0.0.1:9000 --size 16KiB --duration 20s \
      --compare http://127.0.0.1:9100 --compare-access-key minioadmin --compare-secret-key minioadmin

  # PUTs of 1-64 MiB objects (log-uniform), JSON out
  fedgate bench put --endpoint http://127.0.0.1:9000 --size 1MiB-64MiB --concurrency 8 --json

  # batches of 256 samples of 128 KiB
  fedgate bench batch --endpoint http://127.0.0.1:9000 --size 128KiB --batch-size 256`

func newBenchCmd() *cobra.Command { return benchCommand(defaultBenchFlags()) }

// defaultBenchFlags are the settings flags do not set: the environment,
// the AWS SDK's configuration, how progress is shown.
func defaultBenchFlags() *benchFlags {
	f := &benchFlags{
		getenv:             os.Getenv,
		credentialsTimeout: 15 * time.Second,
		progressEvery:      250 * time.Millisecond,
		progressLine:       watchLine,
		stderrIsTerminal:   isTerminal,
		logLevel:           slog.LevelWarn,
		defaultRegion:      "us-east-1",
		loadConfig: func(ctx context.Context, profile string) (aws.Config, error) {
			// The SDK's own log lines (IMDS fallbacks) stay out of the
			// output: a failure to find credentials is reported with its error.
			opts := []func(*config.LoadOptions) error{config.WithLogger(logging.Nop{})}
			if profile != "" {
				opts = append(opts, config.WithSharedConfigProfile(profile))
			}
			return config.LoadDefaultConfig(ctx, opts...)
		},
	}
	f.caBundle = f.tlsConfig
	return f
}

// benchCommand is `fedgate bench` and its modes over f.
func benchCommand(f *benchFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "bench",
		Short:   "Load an S3 endpoint (fedgate or any other) and report throughput and latency",
		Long:    benchLong,
		Example: benchExamples,
	}
	fl := cmd.PersistentFlags()
	fl.StringVar(&f.endpoint, "endpoint", "", "the S3 endpoint's URL (default $AWS_ENDPOINT_URL_S3, else $AWS_ENDPOINT_URL, else AWS S3 itself)")
	fl.StringVar(&f.bucket, "bucket", "fedgate-bench", "bucket to write in; created (and removed at the end) when it does not exist")
	fl.StringVar(&f.prefix, "prefix", "", "key prefix to put before the run's own prefix (fedgate-bench-<time>-<id>/)")
	fl.StringVar(&f.accessKey, "access-key", "", "access key (default: the AWS SDK's chain: $AWS_ACCESS_KEY_ID, the profile, ...)")
	fl.StringVar(&f.secretKey, "secret-key", "", "secret key (with --access-key)")
	fl.StringVar(&f.profile, "profile", "", "AWS shared config profile for credentials and region (default $AWS_PROFILE)")
	fl.StringVar(&f.region, "region", "", "signing region (default: the profile's or $AWS_REGION, else us-east-1)")
	fl.BoolVar(&f.pathStyle, "path-style", true, "address buckets as URL/BUCKET/KEY; false: virtual-hosted, BUCKET.HOST/KEY (on AWS S3, without --endpoint, virtual-hosted unless given)")
	bindCAFile(fl, &f.caFile)
	fl.StringVar(&f.size, "size", "1MiB", "object size: SIZE (16KiB), a list SIZE[:WEIGHT],... (16KiB:90,8MiB:10) or a range MIN-MAX, drawn log-uniformly (1KiB-1MiB)")
	fl.IntVarP(&f.concurrency, "concurrency", "c", 16, "workers, each with one request in flight")
	fl.DurationVar(&f.duration, "duration", 30*time.Second, "how long each round runs on each endpoint")
	fl.IntVar(&f.rounds, "rounds", 0, "rounds, each endpoint once per round, taking turns with --compare (default: 1, or 3 with --compare)")
	fl.StringVar(&f.compare, "compare", "", "a second endpoint's URL: run the same workload against it in alternating rounds and print the ratios")
	fl.StringVar(&f.compareBucket, "compare-bucket", "", "bucket at --compare (default: --bucket)")
	fl.StringVar(&f.compareAccessKey, "compare-access-key", "", "access key at --compare (default: the credentials of --endpoint)")
	fl.StringVar(&f.compareSecret, "compare-secret-key", "", "secret key at --compare (with --compare-access-key)")
	fl.StringVar(&f.compareProfile, "compare-profile", "", "AWS shared config profile for --compare's credentials")
	fl.StringVar(&f.compareRegion, "compare-region", "", "signing region at --compare (default: --region's)")
	fl.BoolVar(&f.keep, "keep", false, "leave the objects written (and a bucket created) in place")
	fl.BoolVar(&f.asJSON, "json", false, "print the result as JSON (the same numbers as the table; docs/bench.md)")

	withObjects := func(c *cobra.Command) {
		c.Flags().IntVar(&f.objects, "objects", 1000, "objects to write before the run and read during it")
	}
	get := &cobra.Command{
		Use:   "get",
		Short: "GET random objects of a set written first",
		Long: `Write --objects objects of --size, then GET random ones of them (each read to its
end) from --concurrency workers for --duration. Latency is to the last byte;
"first byte" is to the response headers.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return f.run(c, loadgen.ModeGet) },
	}
	withObjects(get)
	put := &cobra.Command{
		Use:   "put",
		Short: "PUT new objects",
		Long: `PUT new objects of --size (one PutObject each, no multipart) from --concurrency
workers for --duration.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return f.run(c, loadgen.ModePut) },
	}
	mixed := &cobra.Command{
		Use:   "mixed",
		Short: "GET, HEAD, PUT and DELETE in proportions (--mix)",
		Long: `Write --objects objects, then draw each operation by --mix: GET and HEAD read a
random object of the set, PUT adds a new one to it and DELETE removes one no
worker is reading (never below half of --objects). Each kind has its own row
and a "total" row sums them.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return f.run(c, loadgen.ModeMixed) },
	}
	withObjects(mixed)
	mixed.Flags().StringVar(&f.mix, "mix", "get=45,stat=30,put=15,delete=10", "weights of the operations: get, stat (HEAD), put, delete")
	batch := &cobra.Command{
		Use:   "batch",
		Short: "fedgate's batch GET: many objects per request, answered as one tar",
		Long: `Write --objects objects, then read them --batch-size random ones per request
through fedgate's batch GET (POST /_fedgate/v1/batch, SigV4-signed; the answer
is a tar with one entry per object in request order). OPS/S counts batches,
OBJ/S the objects in them. "first byte" is to the first entry of the answer.
Against a server without batch GET (MinIO, AWS S3, an older fedgate) it stops
after writing its objects with an error that says so.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return f.run(c, loadgen.ModeBatch) },
	}
	withObjects(batch)
	batch.Flags().IntVar(&f.batchSize, "batch-size", 64, "objects per batch request")
	batch.Flags().BoolVar(&f.continueOnError, "continue-on-error", true, "ask the server to answer a failed entry with an __errors__ entry and go on (false: a failed entry fails its batch)")
	cmd.AddCommand(get, put, mixed, batch)
	return cmd
}

// run runs one mode with the flags.
func (f *benchFlags) run(cmd *cobra.Command, mode loadgen.Mode) error {
	f.cmd = cmd
	cfg, err := f.config(cmd.Context(), mode)
	if err != nil {
		return err
	}
	stderr := cmd.ErrOrStderr()
	// The first Ctrl-C (or SIGTERM) stops the load and lets the run clean
	// up; once it came, the signal's default action is back, so a second
	// one ends the process at once.
	ctx, cancel := context.WithCancel(cmd.Context())
	defer cancel()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		select {
		case <-sigs:
			signal.Stop(sigs)
			if cfg.Keep {
				fmt.Fprintln(stderr, "\nStopping (--keep: the objects written stay).")
			} else {
				fmt.Fprintln(stderr, "\nStopping; removing the objects written (Ctrl-C again to leave them).")
			}
			cancel()
		case <-ctx.Done():
		}
	}()
	p := &benchProgress{w: stderr, term: f.stderrIsTerminal(stderr), every: f.progressLine}
	cfg.Progress = p.update
	cfg.ProgressEvery = f.progressEvery
	cfg.Log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: f.logLevel}))
	rep, err := loadgen.Run(ctx, cfg)
	p.close()
	if err != nil {
		if len(rep.Targets) > 0 {
			for _, t := range rep.Targets {
				if c := t.Cleanup; c.Error != "" {
					fmt.Fprintf(stderr, "fedgate: cleanup at %s failed, objects are left under s3://%s/%s: %s\n", t.Name, t.Bucket, rep.Workload.Prefix, c.Error)
				}
			}
		}
		return err
	}
	out := cmd.OutOrStdout()
	if f.asJSON {
		err = loadgen.WriteJSON(out, rep)
	} else {
		err = loadgen.WriteTable(out, rep)
	}
	if err != nil {
		return err
	}
	if rep.Interrupted {
		return exitError{code: 130, err: errors.New("interrupted")}
	}
	for _, t := range rep.Targets {
		if t.Cleanup.Error != "" {
			return fmt.Errorf("cleanup at %s failed; objects are left under s3://%s/%s: %s", t.Name, t.Bucket, rep.Workload.Prefix, t.Cleanup.Error)
		}
	}
	for _, t := range rep.Targets {
		var ok, failed int64
		var sample string
		for _, o := range t.Ops {
			if o.Op == loadgen.OpTotal {
				continue
			}
			ok += o.Count
			failed += o.Errors
			if sample == "" && len(o.ErrorSamples) > 0 {
				sample = o.ErrorSamples[0].Message
			}
		}
		if ok == 0 && failed > 0 {
			return fmt.Errorf("every request to %s failed (%d), e.g. %s", t.Name, failed, sample)
		}
	}
	return nil
}

// config builds the run's configuration from the flags and the
// environment.
func (f *benchFlags) config(ctx context.Context, mode loadgen.Mode) (loadgen.Config, error) {
	changed := func(name string) bool { return f.cmd.Flags().Changed(name) }
	sizes, err := loadgen.ParseSizes(f.size)
	if err != nil {
		return loadgen.Config{}, fmt.Errorf("--size: %w", err)
	}
	cfg := loadgen.Config{
		Mode: mode, Prefix: f.prefix, Sizes: sizes, Objects: f.objects, Concurrency: f.concurrency,
		Duration: f.duration, Rounds: f.rounds, BatchSize: f.batchSize, ContinueOnError: f.continueOnError, Keep: f.keep,
	}
	if mode == loadgen.ModeMixed {
		if cfg.Mix, err = loadgen.ParseMix(f.mix); err != nil {
			return cfg, fmt.Errorf("--mix: %w", err)
		}
	}
	if f.concurrency < 1 {
		return cfg, fmt.Errorf("--concurrency %d: want at least 1", f.concurrency)
	}
	if f.duration <= 0 {
		return cfg, fmt.Errorf("--duration %s: want more than 0", f.duration)
	}
	if changed("rounds") && f.rounds < 1 {
		return cfg, fmt.Errorf("--rounds %d: want at least 1", f.rounds)
	}
	if mode != loadgen.ModePut && f.objects < 1 {
		return cfg, fmt.Errorf("--objects %d: want at least 1", f.objects)
	}
	if mode == loadgen.ModeBatch && f.batchSize < 1 {
		return cfg, fmt.Errorf("--batch-size %d: want at least 1", f.batchSize)
	}
	if f.compare == "" {
		for _, n := range []string{"compare-bucket", "compare-access-key", "compare-secret-key", "compare-profile", "compare-region"} {
			if changed(n) {
				return cfg, fmt.Errorf("--%s needs --compare URL", n)
			}
		}
	}
	if !changed("rounds") {
		cfg.Rounds = 1
		if f.compare != "" {
			cfg.Rounds = 3
		}
	}
	tlsCfg, err := f.caBundle()
	if err != nil {
		return cfg, err
	}
	endpoint := f.endpoint
	if endpoint == "" {
		endpoint = f.getenv("AWS_ENDPOINT_URL_S3")
	}
	if endpoint == "" {
		endpoint = f.getenv("AWS_ENDPOINT_URL")
	}
	pathStyle := f.pathStyle
	if endpoint == "" && !changed("path-style") {
		pathStyle = false
	}
	main, err := f.target(ctx, endpoint, f.bucket, f.accessKey, f.secretKey, f.profile, f.region, "--access-key", nil)
	if err != nil {
		return cfg, err
	}
	main.PathStyle, main.TLS = pathStyle, tlsCfg
	cfg.Targets = []loadgen.Target{main}
	if f.compare != "" {
		bucket := f.compareBucket
		if bucket == "" {
			bucket = f.bucket
		}
		region := f.compareRegion
		if region == "" {
			region = main.Region
		}
		var fallback aws.CredentialsProvider
		if f.compareAccessKey == "" && f.compareSecret == "" && f.compareProfile == "" {
			fallback = main.Credentials
		}
		cmp, err := f.target(ctx, f.compare, bucket, f.compareAccessKey, f.compareSecret, f.compareProfile, region, "--compare-access-key", fallback)
		if err != nil {
			return cfg, err
		}
		cmp.PathStyle, cmp.TLS = f.pathStyle, tlsCfg
		cfg.Targets = append(cfg.Targets, cmp)
	}
	return cfg, nil
}

// target resolves one endpoint's credentials and region: the keys given,
// else fallback, else the AWS SDK's default chain (with profile). The
// credentials are fetched once here, so that a machine without any fails
// at once with a message that says what to give.
func (f *benchFlags) target(ctx context.Context, endpoint, bucket, ak, sk, profile, region, akFlag string, fallback aws.CredentialsProvider) (loadgen.Target, error) {
	t := loadgen.Target{Endpoint: endpoint, Bucket: bucket, Region: region}
	skFlag := strings.Replace(akFlag, "access", "secret", 1)
	switch {
	case (ak == "") != (sk == ""):
		return t, fmt.Errorf("give both %s and %s, or neither", akFlag, skFlag)
	case ak != "":
		t.Credentials = credentials.NewStaticCredentialsProvider(ak, sk, "")
	case fallback != nil:
		t.Credentials = fallback
	}
	if t.Credentials == nil || t.Region == "" {
		cfg, err := f.loadConfig(ctx, profile)
		if err != nil {
			return t, fmt.Errorf("AWS configuration for %s: %w", displayEndpoint(endpoint), err)
		}
		if t.Region == "" {
			t.Region = cfg.Region
		}
		if t.Credentials == nil {
			t.Credentials = cfg.Credentials
			if _, ok := t.Credentials.(*aws.CredentialsCache); !ok && t.Credentials != nil {
				t.Credentials = aws.NewCredentialsCache(t.Credentials)
			}
			if t.Credentials == nil {
				return t, fmt.Errorf("no credentials for %s: give %s and %s, or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile (--profile, AWS_PROFILE)", displayEndpoint(endpoint), akFlag, skFlag)
			}
			cctx, cancel := context.WithTimeout(ctx, f.credentialsTimeout)
			_, err := t.Credentials.Retrieve(cctx)
			cancel()
			if err != nil {
				return t, fmt.Errorf("no credentials for %s: give %s and %s, or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile (--profile, AWS_PROFILE) (the AWS SDK said: %v)",
					displayEndpoint(endpoint), akFlag, skFlag, err)
			}
		}
	}
	if t.Region == "" {
		t.Region = f.defaultRegion
	}
	return t, nil
}

func displayEndpoint(e string) string {
	if e == "" {
		return "AWS S3"
	}
	return e
}

// tlsConfig is the TLS configuration for https endpoints: the system's
// roots plus --ca-file (or $FEDGATE_CA_FILE) and $AWS_CA_BUNDLE, which the
// AWS tools honour too.
func (f *benchFlags) tlsConfig() (*tls.Config, error) {
	cfg, err := clientTLS(f.caFile)
	if err != nil {
		return nil, err
	}
	bundle := f.getenv("AWS_CA_BUNDLE")
	if bundle == "" {
		return cfg, nil
	}
	data, err := os.ReadFile(bundle)
	if err != nil {
		return nil, fmt.Errorf("AWS_CA_BUNDLE: %w", err)
	}
	if cfg == nil {
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		cfg = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	if !cfg.RootCAs.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("AWS_CA_BUNDLE %s: no PEM certificate in it", bundle)
	}
	return cfg, nil
}

// benchProgress shows the run's progress on stderr: a bar per phase on a
// terminal, a line every so often otherwise, and a line at the end of
// every phase in both cases.
type benchProgress struct {
	w     io.Writer
	term  bool
	every time.Duration
	bar   *progressbar.ProgressBar
	key   string
	last  time.Time
}

func (p *benchProgress) update(s loadgen.Snapshot) {
	key := fmt.Sprintf("%s/%s/%d", s.Target, s.Phase, s.Round)
	if key != p.key {
		p.clearBar()
		p.key = key
		p.last = time.Now()
		if p.term {
			p.bar = newPhaseBar(p.w, s)
		}
	}
	if p.term {
		p.bar.Describe(phaseText(s))
		switch s.Phase {
		case loadgen.PhasePrepare:
			_ = p.bar.Set64(s.Done)
		case loadgen.PhaseRun:
			_ = p.bar.Set64(min(s.Elapsed, s.Duration).Milliseconds())
		default:
			_ = p.bar.Add64(0)
		}
	} else if !s.Final && time.Since(p.last) >= p.every {
		p.last = time.Now()
		fmt.Fprintln(p.w, phaseText(s))
	}
	if s.Final {
		p.clearBar()
		if s.Phase != loadgen.PhaseCleanup || s.Done > 0 {
			fmt.Fprintln(p.w, phaseText(s))
		}
	}
}

func (p *benchProgress) clearBar() {
	if p.bar != nil {
		_ = p.bar.Clear()
		_ = p.bar.Exit()
		p.bar = nil
	}
}

func (p *benchProgress) close() { p.clearBar() }

func newPhaseBar(w io.Writer, s loadgen.Snapshot) *progressbar.ProgressBar {
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetWidth(20),
		progressbar.OptionSetRenderBlankState(true),
		progressbar.OptionShowDescriptionAtLineEnd(),
	}
	switch s.Phase {
	case loadgen.PhasePrepare:
		return progressbar.NewOptions64(s.Total, append(opts, progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(true))...)
	case loadgen.PhaseRun:
		return progressbar.NewOptions64(s.Duration.Milliseconds(), append(opts, progressbar.OptionSetElapsedTime(true), progressbar.OptionSetPredictTime(true))...)
	}
	return progressbar.NewOptions64(-1, append(opts, progressbar.OptionSpinnerType(14))...)
}

// phaseText is a snapshot in words: "http://127.0.0.1:9000 round 1/3:
// 1520 ops/s, 23.7 MiB/s, 0 errors, 4.1s of 10s".
func phaseText(s loadgen.Snapshot) string {
	secs := s.Elapsed.Seconds()
	rate := func(n int64) float64 {
		if secs <= 0 {
			return 0
		}
		return float64(n) / secs
	}
	switch s.Phase {
	case loadgen.PhasePrepare:
		return fmt.Sprintf("%s: writing the objects to read: %d of %d, %s, %.1fs", s.Target, s.Done, s.Total, humanBytes(s.Bytes), secs)
	case loadgen.PhaseCleanup:
		return fmt.Sprintf("%s: removing the objects written: %d removed", s.Target, s.Done)
	}
	objs := ""
	if s.Objects != s.Ops {
		objs = fmt.Sprintf(", %.0f obj/s", rate(s.Objects))
	}
	return fmt.Sprintf("%s round %d/%d: %.0f ops/s%s, %.1f MiB/s, %d errors, %.1fs of %s",
		s.Target, s.Round, s.Rounds, rate(s.Ops), objs, rate(s.Bytes)/(1<<20), s.Errors, min(s.Elapsed, s.Duration).Seconds(), s.Duration)
}

package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/spf13/cobra"

	"github.com/fedgate/fedgate/internal/loadgen"
)

// benchConfig parses args for `fedgate bench MODE` with the environment
// env and an AWS configuration of region with (or without) credentials,
// and returns the Config the command would run.
func benchConfig(t *testing.T, env map[string]string, awsCreds bool, args ...string) (loadgen.Config, error) {
	t.Helper()
	f := defaultBenchFlags()
	root := benchCommand(f)
	var got loadgen.Config
	var cfgErr error
	for _, sub := range root.Commands() {
		sub.RunE = func(c *cobra.Command, _ []string) error {
			f.cmd = c
			got, cfgErr = f.config(context.Background(), loadgen.Mode(c.Name()))
			return nil
		}
	}
	f.getenv = func(k string) string { return env[k] }
	f.caBundle = func() (*tls.Config, error) { return nil, nil }
	f.loadConfig = func(context.Context, string) (aws.Config, error) {
		c := aws.Config{Region: "eu-west-1"}
		if awsCreds {
			c.Credentials = credentials.NewStaticCredentialsProvider("ENVKEY", "envsecret", "")
		} else {
			c.Credentials = aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
				return aws.Credentials{}, errors.New("no EC2 IMDS role found")
			})
		}
		return c, nil
	}
	root.SetArgs(args)
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	if err := root.Execute(); err != nil {
		return got, err
	}
	return got, cfgErr
}

func creds(t *testing.T, p aws.CredentialsProvider) string {
	t.Helper()
	c, err := p.Retrieve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return c.AccessKeyID
}

func TestBenchConfig(t *testing.T) {
	cfg, err := benchConfig(t, nil, true, "get", "--endpoint", "127.0.0.1:9000", "--size", "16KiB", "--objects", "7", "-c", "3", "--duration", "5s")
	if err != nil {
		t.Fatal(err)
	}
	tg := cfg.Targets[0]
	if cfg.Mode != loadgen.ModeGet || cfg.Objects != 7 || cfg.Concurrency != 3 || cfg.Duration != 5*time.Second || cfg.Rounds != 1 ||
		cfg.Sizes.Max() != 16<<10 || len(cfg.Targets) != 1 || tg.Endpoint != "127.0.0.1:9000" || !tg.PathStyle || tg.Bucket != "fedgate-bench" ||
		tg.Region != "eu-west-1" || creds(t, tg.Credentials) != "ENVKEY" {
		t.Fatalf("config = %+v, target %+v", cfg, tg)
	}

	// --compare: 3 rounds unless given, the first endpoint's credentials
	// unless given, keys given as flags win over the SDK's chain.
	cfg, err = benchConfig(t, map[string]string{"AWS_ENDPOINT_URL": "http://env:1"}, true, "put", "--access-key", "AK", "--secret-key", "SK", "--region", "us-east-1", "--compare", "http://other:2", "--compare-bucket", "cb")
	if err != nil {
		t.Fatal(err)
	}
	a, b := cfg.Targets[0], cfg.Targets[1]
	if cfg.Rounds != 3 || a.Endpoint != "http://env:1" || b.Endpoint != "http://other:2" || b.Bucket != "cb" || b.Region != "us-east-1" ||
		creds(t, a.Credentials) != "AK" || creds(t, b.Credentials) != "AK" {
		t.Fatalf("compare config: rounds %d, %+v, %+v", cfg.Rounds, a, b)
	}
	cfg, err = benchConfig(t, nil, true, "mixed", "--endpoint", "http://a:1", "--compare", "http://b:2", "--compare-access-key", "CAK", "--compare-secret-key", "CSK", "--rounds", "2", "--mix", "get=1,put=1")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Rounds != 2 || creds(t, cfg.Targets[1].Credentials) != "CAK" || creds(t, cfg.Targets[0].Credentials) != "ENVKEY" || cfg.Mix != (loadgen.Mix{Get: 1, Put: 1}) {
		t.Fatalf("rounds %d, mix %+v", cfg.Rounds, cfg.Mix)
	}

	// Without an endpoint: AWS S3, virtual-hosted unless asked.
	cfg, err = benchConfig(t, nil, true, "batch", "--batch-size", "256")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Targets[0].Endpoint != "" || cfg.Targets[0].PathStyle || cfg.BatchSize != 256 || !cfg.ContinueOnError {
		t.Fatalf("AWS target %+v, batch size %d", cfg.Targets[0], cfg.BatchSize)
	}

	for _, tc := range []struct {
		creds bool
		args  []string
		want  string
	}{
		{false, []string{"get", "--endpoint", "http://a:1"}, "no credentials for http://a:1: give --access-key and --secret-key, or set AWS_ACCESS_KEY_ID"},
		{true, []string{"get", "--access-key", "x"}, "give both --access-key and --secret-key"},
		{true, []string{"get", "--compare-bucket", "x"}, "--compare-bucket needs --compare URL"},
		{true, []string{"get", "--compare", "http://b", "--compare-secret-key", "x"}, "give both --compare-access-key and --compare-secret-key"},
		{true, []string{"get", "--size", "16QB"}, "--size: unknown size unit"},
		{true, []string{"get", "--rounds", "0"}, "--rounds 0"},
		{true, []string{"get", "--objects", "0"}, "--objects 0"},
		{true, []string{"mixed", "--mix", "get=1,list=1"}, "--mix: "},
		{true, []string{"put", "--objects", "3"}, "unknown flag: --objects"},
	} {
		_, err := benchConfig(t, nil, tc.creds, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want %q", tc.args, err, tc.want)
		}
	}
}

// Without a terminal, progress is a line every so often and one at the
// end of each phase; a cleanup that removed nothing prints nothing.
func TestBenchProgressLines(t *testing.T) {
	var buf bytes.Buffer
	p := &benchProgress{w: &buf, every: time.Hour}
	run := loadgen.Snapshot{Target: "http://a", Phase: loadgen.PhaseRun, Round: 2, Rounds: 3, Duration: 10 * time.Second}
	for i := 1; i <= 4; i++ {
		s := run
		s.Elapsed, s.Ops, s.Bytes = time.Duration(i)*time.Second, int64(i*1000), int64(i)<<20
		p.update(s)
	}
	s := run
	s.Elapsed, s.Ops, s.Objects, s.Bytes, s.Errors, s.Final = 10100*time.Millisecond, 10100, 10100, 10100<<10, 2, true
	p.update(s)
	p.update(loadgen.Snapshot{Target: "http://a", Phase: loadgen.PhaseCleanup, Final: true})
	p.update(loadgen.Snapshot{Target: "http://b", Phase: loadgen.PhaseCleanup, Done: 7, Final: true})
	p.close()
	want := "http://a round 2/3: 1000 ops/s, 1.0 MiB/s, 2 errors, 10.0s of 10s\n" +
		"http://b: removing the objects written: 7 removed\n"
	if buf.String() != want {
		t.Fatalf("progress:\n%s\nwant:\n%s", buf.String(), want)
	}
	// A batch round shows objects per second too.
	got := phaseText(loadgen.Snapshot{Target: "x", Phase: loadgen.PhaseRun, Round: 1, Rounds: 1, Elapsed: 2 * time.Second, Duration: 5 * time.Second, Ops: 10, Objects: 640})
	if got != "x round 1/1: 5 ops/s, 320 obj/s, 0.0 MiB/s, 0 errors, 2.0s of 5s" {
		t.Fatalf("batch line %q", got)
	}
}

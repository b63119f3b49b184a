package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/fedgate/fedgate/clients/localread"
	"github.com/fedgate/fedgate/mount"
)

type mountFlags struct {
	endpoint, region, bucket string
	readOnly                 bool
	statTTL, requestTimeout  time.Duration
	uid, gid                 int
	allowOther               bool
	debugListen, localSocket string
	logLevel, logFormat      string
	readAhead, blockSize     int64
	maxParallel, tries       int
	fuseDebug                bool
	partSize, maxMemory      int64
	writeParallel            int
	check                    bool // --check: validate the flags and exit
}

func newMountCmd() *cobra.Command {
	var f mountFlags
	cmd := &cobra.Command{
		Use:   "mount [flags] MOUNTPOINT",
		Short: "Mount the region's buckets as a file system (FUSE; docs/mount.md)",
		Long: `Mount the region's namespace on MOUNTPOINT as /<bucket>/<key...>, or one bucket or a
prefix in it with --bucket name[/prefix]. Runs in the foreground until SIGTERM or SIGINT, then
unmounts. Credentials are found as the aws CLI finds them (AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY, AWS_PROFILE and the shared config files). Needs /dev/fuse and root
(or CAP_SYS_ADMIN).

Writes (docs/mount.md, "Writes"): a new file, or one opened with O_TRUNC, written
sequentially is streamed as a multipart upload (--part-size parts, --write-parallel of them
uploading per file) and becomes the object at close(), whose error is the upload's; a file
smaller than one part is one PUT at close. Writes inside the part not yet uploaded may go
anywhere (header fix-ups); a write before it, a hole past it, or a write to a file opened
without O_TRUNC (unless first truncated to 0) fails with EOPNOTSUPP and a log line naming the
file. fsync completes the upload like close. Part buffers and read blocks share --max-memory;
a writer waits for room. unlink, mkdir (a "dir/" marker), rmdir and rename of a file (copy, then
delete: not atomic; directories get EXDEV) work; chmod, chown and utimes are accepted and
ignored; truncate of a closed file: to 0 only. A process killed while writing, or a mount
stopped with files open for writing, leaves no object and no upload. --read-only mounts
read-only (EROFS).

--check validates the flags and MOUNTPOINT as a mount would, prints them and exits (0:
valid) without mounting or connecting (the Helm chart's check uses it: docs/kubernetes.md).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.check {
				if err := f.validate(args[0]); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "fedgate mount --check: OK: would mount %s (bucket %q) on %s, read-only %v (not checked: the endpoint answering, the credentials, /dev/fuse)\n",
					f.endpoint, f.bucket, args[0], f.readOnly)
				return nil
			}
			return runMount(cmd.Context(), f, args[0])
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.check, "check", false, "validate the flags and MOUNTPOINT, print what would be mounted, and exit (0: valid) without mounting")
	fl.StringVar(&f.endpoint, "endpoint", "http://127.0.0.1:9000", "URL of the fedgate S3 endpoint")
	fl.StringVar(&f.region, "region", "us-east-1", "region the requests are signed for")
	fl.StringVar(&f.bucket, "bucket", "", "mount only this bucket, or name/prefix for a prefix in it (default: every bucket, as /<bucket>/...)")
	fl.BoolVar(&f.readOnly, "read-only", false, "mount read-only: every write gets EROFS")
	fl.Int64Var(&f.partSize, "part-size", mount.DefaultPartSize, "bytes of one part of the multipart upload of a file written through the mount (5 MiB to 5 GiB); a smaller file is one PUT at close")
	fl.IntVar(&f.writeParallel, "write-parallel", mount.DefaultWriteParallel, "parts of one file uploading at once while the writer goes on")
	fl.Int64Var(&f.maxMemory, "max-memory", mount.DefaultMaxMemory, "bytes the mount holds at most for write parts and read blocks, across all files; a writer waits for room (up to --tries x --request-timeout, then EIO)")
	fl.DurationVar(&f.statTTL, "stat-ttl", mount.DefaultStatTTL, "how long sizes, mtimes, ETags and missing paths are cached before S3 is asked again (0: always ask)")
	fl.IntVar(&f.uid, "uid", os.Getuid(), "owner of every file")
	fl.IntVar(&f.gid, "gid", os.Getgid(), "group of every file")
	fl.BoolVar(&f.allowOther, "allow-other", false, "let users other than the one who mounted in (FUSE allow_other)")
	fl.StringVar(&f.localSocket, "local-socket", "", "the node's --local-socket on this host: open files by short-circuit, with FUSE passthrough for whole files (docs/mount.md); off by default")
	fl.StringVar(&f.debugListen, "debug-listen", "", "serve Prometheus /metrics and Go's pprof on this address (e.g. 127.0.0.1:6061); off by default")
	fl.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fl.StringVar(&f.logFormat, "log-format", "", "text or json (default: text on a terminal, json otherwise)")
	fl.Int64Var(&f.readAhead, "read-ahead", mount.DefaultReadAhead, "bytes a sequential reader of one open file fetches ahead, in parallel ranged GETs")
	fl.Int64Var(&f.blockSize, "block-size", mount.DefaultBlockSize, "bytes of one ranged GET")
	fl.IntVar(&f.maxParallel, "max-parallel", mount.DefaultMaxParallel, "ranged GETs in flight across the mount at most")
	fl.DurationVar(&f.requestTimeout, "request-timeout", mount.DefaultRequestTimeout, "deadline of one try of one S3 request")
	fl.IntVar(&f.tries, "tries", mount.DefaultTries, "tries of a throttled or failed S3 request before the call fails with EIO")
	fl.BoolVar(&f.fuseDebug, "fuse-debug", false, "log every FUSE request (very verbose)")
	return cmd
}

// validate checks the flags and the mount point before anything is
// mounted or connected: what runMount and --check refuse.
func (f mountFlags) validate(dir string) error {
	if _, err := newLogger(f.logLevel, f.logFormat, io.Discard); err != nil {
		return err
	}
	if dir == "" {
		return errors.New("MOUNTPOINT: give the directory to mount on")
	}
	u, err := url.Parse(f.endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--endpoint %q: want the URL of a fedgate S3 port, like http://127.0.0.1:9000", f.endpoint)
	}
	if b, _, _ := strings.Cut(f.bucket, "/"); f.bucket != "" && b == "" {
		return fmt.Errorf("--bucket %q: want a bucket name, or name/prefix", f.bucket)
	}
	if f.partSize < mount.MinPartSize || f.partSize > mount.MaxPartSize {
		return fmt.Errorf("--part-size %d: must be 5 MiB (%d) to 5 GiB (%d), S3's bounds of a part", f.partSize, mount.MinPartSize, int64(mount.MaxPartSize))
	}
	if f.writeParallel < 1 {
		return fmt.Errorf("--write-parallel %d: must be at least 1", f.writeParallel)
	}
	if f.maxMemory < f.partSize*2 {
		return fmt.Errorf("--max-memory %d: must hold at least two parts (2 x --part-size = %d)", f.maxMemory, 2*f.partSize)
	}
	if f.debugListen != "" {
		if _, _, err := net.SplitHostPort(f.debugListen); err != nil {
			return fmt.Errorf("--debug-listen %q: %w", f.debugListen, err)
		}
	}
	return nil
}

func runMount(ctx context.Context, f mountFlags, dir string) error {
	log, err := newLogger(f.logLevel, f.logFormat, os.Stderr)
	if err != nil {
		return err
	}
	if err := f.validate(dir); err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(f.region))
	if err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(f.endpoint)
		o.UsePathStyle = true
		o.Retryer = aws.NopRetryer{} // the mount retries itself, with deadlines
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	bucket, prefix, _ := strings.Cut(f.bucket, "/")
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if f.debugListen != "" {
		ln, err := net.Listen("tcp", f.debugListen)
		if err != nil {
			return fmt.Errorf("--debug-listen %s: %w", f.debugListen, err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		hs := &http.Server{Handler: mux, ReadHeaderTimeout: 30 * time.Second}
		go func() { _ = hs.Serve(ln) }()
		defer hs.Close()
		log.Info("debug listener", "addr", ln.Addr().String())
	}
	var local *localread.Client
	if f.localSocket != "" {
		creds, err := awsCfg.Credentials.Retrieve(ctx)
		if err != nil {
			return fmt.Errorf("credentials for --local-socket: %w", err)
		}
		local = &localread.Client{Socket: f.localSocket, Endpoint: f.endpoint, Region: f.region, AccessKey: creds.AccessKeyID, SecretKey: creds.SecretAccessKey}
	}
	// Asked for before the mount exists, so that a SIGTERM that comes
	// while it mounts still unmounts.
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sig)
	srv, err := mount.Start(dir, mount.Config{
		Local:  local,
		Client: client, Bucket: bucket, Prefix: prefix,
		StatTTL: f.statTTL, UID: uint32(f.uid), GID: uint32(f.gid), AllowOther: f.allowOther,
		BlockSize: f.blockSize, ReadAhead: f.readAhead, MaxParallel: f.maxParallel,
		RequestTimeout: f.requestTimeout, Tries: f.tries,
		ReadOnly: f.readOnly, PartSize: f.partSize, WriteParallel: f.writeParallel, MaxMemory: f.maxMemory,
		Logger: log, Registerer: reg, FUSEDebug: f.fuseDebug,
	})
	if err != nil {
		return err
	}
	log.Info("mounted", "mountpoint", dir, "endpoint", f.endpoint, "bucket", f.bucket, "stat_ttl", f.statTTL.String(), "read_only", f.readOnly)

	done := make(chan struct{})
	go func() { srv.Wait(); close(done) }()
	select {
	case <-done:
		log.Info("unmounted from outside", "mountpoint", dir)
		return nil
	case s := <-sig:
		log.Info("unmounting", "mountpoint", dir, "signal", s.String())
	}
	// A busy mount (a file still open) is detached: the mount point is
	// free at once, and when this process exits the files still open
	// there fail (ENOTCONN) rather than hang.
	wait := 10 * time.Second
	if err := srv.Unmount(); err != nil {
		log.Warn("unmount busy, detaching", "mountpoint", dir, "err", err)
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			return fmt.Errorf("unmount %s: %w", dir, err)
		}
		wait = time.Second
	}
	select {
	case <-done:
	case <-time.After(wait):
		log.Warn("FUSE server still serving open files; exiting", "mountpoint", dir)
	}
	if n := srv.AbortWrites(); n > 0 {
		log.Warn("aborted the uploads of files still open for writing", "files", n)
	}
	log.Info("unmounted", "mountpoint", dir)
	return nil
}

package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"golang.org/x/sys/unix"

	"github.com/fedgate/fedgate/clients/localread"
	"github.com/fedgate/fedgate/internal/testserver"
)

// procCPU is the user+system CPU seconds process pid has used.
func procCPU(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64) // fields 14 and 15 of stat(5)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

// selfCPU is this process's user+system CPU seconds (the client's).
func selfCPU() float64 {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// preadAll reads f whole with pread in blocks of block bytes (O_DIRECT
// when f was opened so: then into a page-aligned buffer).
func preadAll(f *os.File, size int64, block int) error {
	buf, err := unix.Mmap(-1, 0, block, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return err
	}
	defer unix.Munmap(buf)
	for off := int64(0); off < size; {
		n, err := unix.Pread(int(f.Fd()), buf, off)
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrUnexpectedEOF
		}
		off += int64(n)
	}
	return nil
}

// BenchmarkLocalRead reads a warm 1 GiB object (issue 14): (a) by
// short-circuit through --local-socket with O_DIRECT (and with buffered
// pread), (b) by HTTP GET through fedgate, (c) by pread of a plain file of
// the same size (the origin's own file; buffered and O_DIRECT), in
// alternating rounds; it reports MB/s and client+server CPU seconds per
// GiB. The object is an fs origin read through the region cache, so (a)
// reads the cache's chunk files on the same disk as (c).
func BenchmarkLocalRead(b *testing.B) {
	const size = 1 << 30
	const block = 4 << 20
	tree := b.TempDir()
	plain := filepath.Join(tree, "obj.bin")
	f, err := os.Create(plain)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.CopyN(f, reader(size), size); err != nil {
		b.Fatal(err)
	}
	f.Sync()
	f.Close()
	policy := "regions:\n  - {name: bench, location: onprem:lab}\nstores:\n  - {name: nas, kind: fs, location: onprem:lab, path: " + tree + ", read_only: true}\n" +
		"buckets:\n  - {name: data, origin: nas, cache: {ttl: 1h}}\n"
	pf := filepath.Join(b.TempDir(), "policy.yaml")
	if err := os.WriteFile(pf, []byte(policy), 0o644); err != nil {
		b.Fatal(err)
	}
	sock := filepath.Join(b.TempDir(), "s3.sock")
	fg := testserver.Start(b, binary, b.TempDir(), "--config", pf, "--cache-size", "4GiB", "--local-socket", sock)
	ctx := context.Background()
	lc := func(direct bool) *localread.Client {
		return &localread.Client{Socket: sock, AccessKey: testserver.RootAccessKey, SecretKey: testserver.RootSecretKey, Direct: direct}
	}
	readLocal := func(direct bool) error {
		f, err := lc(direct).OpenLocal(ctx, "data", "obj.bin")
		if err != nil {
			return err
		}
		defer f.Close()
		buf := make([]byte, block)
		for off := int64(0); off < size; off += block {
			if _, err := f.ReadAt(buf, off); err != nil && err != io.EOF {
				return err
			}
		}
		return nil
	}
	// Warm: the first short-circuit read fills the cache.
	if err := readLocal(false); err != nil {
		b.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	s3c := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(fg.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(testserver.RootAccessKey, testserver.RootSecretKey, "")})
	getURL := presigner(b, s3c, "data")("obj.bin")
	readHTTP := func() error {
		resp, err := hc.Get(getURL)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("GET: %s", resp.Status)
		}
		n, err := io.CopyBuffer(io.Discard, resp.Body, make([]byte, 256<<10))
		if err == nil && n != size {
			err = fmt.Errorf("GET: %d bytes", n)
		}
		return err
	}
	readPlain := func(direct bool) error {
		flags := os.O_RDONLY
		if direct {
			flags |= unix.O_DIRECT
		}
		f, err := os.OpenFile(plain, flags, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		return preadAll(f, size, block)
	}
	if err := readHTTP(); err != nil { // warms the page cache of the chunk files too
		b.Fatal(err)
	}
	type way struct {
		name string
		read func() error
	}
	ways := []way{
		{"a: short-circuit O_DIRECT", func() error { return readLocal(true) }},
		{"a: short-circuit pread", func() error { return readLocal(false) }},
		{"b: HTTP GET via fedgate", readHTTP},
		{"c: pread plain file O_DIRECT", func() error { return readPlain(true) }},
		{"c: pread plain file", func() error { return readPlain(false) }},
	}
	type res struct{ mbps, cpu []float64 }
	got := make([]res, len(ways))
	for round := 0; round < *rounds; round++ {
		for i, w := range ways {
			c0, s0, t0 := selfCPU(), procCPU(fg.Pid()), time.Now()
			if err := w.read(); err != nil {
				b.Fatalf("%s: %v", w.name, err)
			}
			el := time.Since(t0).Seconds()
			cpu := selfCPU() - c0 + procCPU(fg.Pid()) - s0
			got[i].mbps = append(got[i].mbps, size/el/1e6)
			got[i].cpu = append(got[i].cpu, cpu/(size/float64(1<<30)))
		}
	}
	var out strings.Builder
	fmt.Fprintf(&out, "BenchmarkLocalRead: a warm 1 GiB object, %d rounds, 4 MiB reads, one stream\n\n| way | MB/s: median (rounds) | client+server CPU s/GiB: median (rounds) |\n|---|---|---|\n", *rounds)
	for i, w := range ways {
		fmt.Fprintf(&out, "| %s | %.0f (%s) | %.3f (%s) |\n", w.name, median(got[i].mbps), spread(got[i].mbps), median(got[i].cpu), spread(got[i].cpu))
	}
	fmt.Fprintf(&out, "\na/c, both O_DIRECT: %.2f; a (pread)/c (pread): %.2f; CPU per GiB a (O_DIRECT)/b: %.2f, a (pread)/b: %.2f\n",
		median(got[0].mbps)/median(got[3].mbps), median(got[1].mbps)/median(got[4].mbps),
		median(got[0].cpu)/median(got[2].cpu), median(got[1].cpu)/median(got[2].cpu))
	notes = append(notes, out.String())
}

package bench

// BenchmarkScaleList: listings of 10k, 100k and 1M keys in one directory
// (flat) and in 1,000-key directories (nested), on the posix and fs stores,
// paged as the gateway pages ListObjectsV2 (1000 entries, StartAfter = the
// last key). Each listing runs in its own process (this test binary, run
// again with listerEnv set), which reports its keys/s, the time per page and
// its extra RSS: VmHWM after the listing minus VmRSS before it (VmHWM reset
// through /proc/self/clear_refs after the store is opened).
//
// The trees are synthetic, made directly in each store's on-disk layout:
// posix files are named by posix.ObjectPath (the store's own encoding) and
// carry the extended attributes of one object written by the store's Put
// (0-byte objects); fs files are plain empty files named by their keys.

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
	"github.com/fedgate/fedgate/store/fs"
	"github.com/fedgate/fedgate/store/posix"
)

const listerEnv = "FEDGATE_BENCH_LISTER"

var (
	scaleSizes   = flag.String("scale-sizes", "10000,100000,1000000", "key counts of BenchmarkScaleList")
	scaleStores  = flag.String("scale-stores", "posix,fs", "stores of BenchmarkScaleList")
	scaleLayouts = flag.String("scale-layouts", "flat,nested", "layouts of BenchmarkScaleList")
)

func init() {
	if spec := os.Getenv(listerEnv); spec != "" {
		if err := runLister(spec); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// listerSpec is what the lister process is asked to do.
type listerSpec struct {
	Store   string // "posix" or "fs"
	Dir     string
	Prefix  string
	Listers int // concurrent listings of the same prefix
	Rounds  int // listings each, one after the other, each on a freshly opened store
}

type listerResult struct {
	Keys      int64
	Seconds   float64
	Pages     int
	PageMean  float64 // ms
	PageMed   float64
	PageMax   float64
	FirstPage float64
	BaseRSS   int64 // bytes
	PeakRSS   int64
}

const pageSize = 1000

func openStore(kind, dir string) (store.Store, func(), error) {
	switch kind {
	case "posix":
		s, err := posix.New("bench", policies.Location{}, dir)
		if err != nil {
			return nil, nil, err
		}
		return s, func() { s.Close() }, nil
	case "fs":
		s, err := fs.New("bench", policies.Location{}, dir, fs.Options{})
		if err != nil {
			return nil, nil, err
		}
		return s, func() { s.Close() }, nil
	}
	return nil, nil, fmt.Errorf("unknown store %q", kind)
}

// listPaged lists prefix in pages as the gateway does and returns the keys
// seen and each page's time.
func listPaged(ctx context.Context, s store.Store, prefix string) (int64, []time.Duration, error) {
	var n int64
	var pages []time.Duration
	after := ""
	for {
		start := time.Now()
		got, last := 0, ""
		for e, err := range s.List(ctx, store.ListOptions{Prefix: prefix, StartAfter: after}) {
			if err != nil {
				return n, pages, err
			}
			if last != "" && e.Key <= last {
				return n, pages, fmt.Errorf("key %q after %q", e.Key, last)
			}
			last = e.Key
			if got++; got == pageSize {
				break
			}
		}
		pages = append(pages, time.Since(start))
		n += int64(got)
		if got < pageSize {
			return n, pages, nil
		}
		after = last
	}
}

func procStatus(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func runLister(spec string) error {
	var sp listerSpec
	if err := json.Unmarshal([]byte(spec), &sp); err != nil {
		return err
	}
	var res listerResult
	var all []time.Duration
	var elapsed time.Duration
	for r := 0; r < sp.Rounds; r++ {
		s, closeStore, err := openStore(sp.Store, sp.Dir)
		if err != nil {
			return err
		}
		if r == 0 {
			res.BaseRSS = procStatus("VmRSS")
			if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
				return fmt.Errorf("reset VmHWM: %w", err)
			}
		}
		start := time.Now()
		var wg sync.WaitGroup
		var mu sync.Mutex
		var firstErr error
		for range sp.Listers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n, pages, err := listPaged(context.Background(), s, sp.Prefix)
				mu.Lock()
				defer mu.Unlock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				res.Keys += n
				if len(pages) > 0 {
					res.FirstPage += float64(pages[0]) / 1e6
				}
				all = append(all, pages...)
			}()
		}
		wg.Wait()
		elapsed += time.Since(start)
		closeStore()
		if firstErr != nil {
			return firstErr
		}
	}
	res.PeakRSS = procStatus("VmHWM")
	res.Seconds = elapsed.Seconds()
	res.Pages = len(all)
	res.FirstPage /= float64(sp.Rounds * sp.Listers)
	var sum time.Duration
	for _, d := range all {
		sum += d
	}
	if len(all) > 0 {
		slices.Sort(all)
		res.PageMean = float64(sum) / float64(len(all)) / 1e6
		res.PageMed = float64(all[len(all)/2]) / 1e6
		res.PageMax = float64(all[len(all)-1]) / 1e6
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// makeTree lays out n keys under prefix: flat (one directory) or nested
// (directories of 1000 keys).
func makeTree(b *testing.B, kind, dir, prefix string, n int, nested bool) {
	b.Helper()
	name := func(i int) string {
		if nested {
			return fmt.Sprintf("%sd%05d/s%07d", prefix, i/1000, i)
		}
		return fmt.Sprintf("%ss%07d", prefix, i)
	}
	pathOf := func(key string) (string, error) { return key, nil }
	var attrs map[string][]byte
	if kind == "posix" {
		pathOf = posix.ObjectPath
		s, err := posix.New("bench", policies.Location{}, dir)
		if err != nil {
			b.Fatal(err)
		}
		const tmpl = "template-object"
		if _, err := s.Put(context.Background(), tmpl, bytes.NewReader(nil), 0, store.PutOptions{}); err != nil {
			b.Fatal(err)
		}
		s.Close()
		rel, _ := posix.ObjectPath(tmpl)
		attrs = xattrsOf(b, filepath.Join(dir, rel))
		os.Remove(filepath.Join(dir, rel))
	}
	const workers = 4
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				rel, err := pathOf(name(i))
				if err != nil {
					errs <- err
					return
				}
				p := filepath.Join(dir, rel)
				fd, err := unix.Open(p, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
				if err == unix.ENOENT {
					if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
						errs <- err
						return
					}
					fd, err = unix.Open(p, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
				}
				if err != nil {
					errs <- err
					return
				}
				for k, v := range attrs {
					if err := unix.Fsetxattr(fd, k, v, 0); err != nil {
						unix.Close(fd)
						errs <- err
						return
					}
				}
				unix.Close(fd)
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

func xattrsOf(b *testing.B, path string) map[string][]byte {
	buf := make([]byte, 4096)
	n, err := unix.Listxattr(path, buf)
	if err != nil {
		b.Fatal(err)
	}
	attrs := map[string][]byte{}
	for _, k := range strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00") {
		if k == "" {
			continue
		}
		v := make([]byte, 4096)
		m, err := unix.Getxattr(path, k, v)
		if err != nil {
			b.Fatal(err)
		}
		attrs[k] = v[:m]
	}
	return attrs
}

func runListerProcess(b *testing.B, sp listerSpec) listerResult {
	b.Helper()
	js, _ := json.Marshal(sp)
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), listerEnv+"="+string(js))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("lister: %v: %s", err, stderr.String())
	}
	var res listerResult
	if err := json.Unmarshal(out, &res); err != nil {
		b.Fatalf("lister output %q: %v", out, err)
	}
	return res
}

type scaleRow struct {
	name string
	n    int
	res  listerResult
}

func BenchmarkScaleList(b *testing.B) {
	var sizes []int
	for _, f := range strings.Split(*scaleSizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			b.Fatalf("-scale-sizes: %v", err)
		}
		sizes = append(sizes, n)
	}
	var rows []scaleRow
	for _, kind := range strings.Split(*scaleStores, ",") {
		for _, layout := range strings.Split(*scaleLayouts, ",") {
			for _, n := range sizes {
				dir, err := os.MkdirTemp("", "fedgate-scale-list-")
				if err != nil {
					b.Fatal(err)
				}
				prefix := "data/"
				makeTree(b, kind, dir, prefix, n, layout == "nested")
				listers := []int{1}
				if layout == "flat" && n == sizes[len(sizes)-1] {
					listers = append(listers, 4)
				}
				for _, l := range listers {
					name := fmt.Sprintf("%s/%s/keys=%d/listers=%d", kind, layout, n, l)
					var last listerResult
					b.Run(name, func(b *testing.B) {
						res := runListerProcess(b, listerSpec{Store: kind, Dir: dir, Prefix: prefix, Listers: l, Rounds: b.N})
						if want := int64(n * l * b.N); res.Keys != want {
							b.Fatalf("listed %d keys, want %d", res.Keys, want)
						}
						b.ReportMetric(float64(res.Keys)/res.Seconds, "keys/s")
						b.ReportMetric(res.PageMean, "ms/page")
						b.ReportMetric(res.FirstPage, "ms/first-page")
						b.ReportMetric(float64(res.PeakRSS-res.BaseRSS)/(1<<20), "extraRSS-MiB")
						last = res
					})
					rows = append(rows, scaleRow{name: name, n: n, res: last})
				}
				os.RemoveAll(dir)
			}
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "scale listing (pages of %d, each listing in its own process):\n", pageSize)
	fmt.Fprintf(&sb, "%-36s %10s %9s %9s %9s %11s\n", "store/layout/keys/listers", "keys/s", "ms/page", "p50 ms", "first ms", "extra MiB")
	for _, r := range rows {
		fmt.Fprintf(&sb, "%-36s %10.0f %9.2f %9.2f %9.1f %11.1f\n", r.name, float64(r.res.Keys)/r.res.Seconds,
			r.res.PageMean, r.res.PageMed, r.res.FirstPage, float64(r.res.PeakRSS-r.res.BaseRSS)/(1<<20))
	}
	notes = append(notes, sb.String())
}

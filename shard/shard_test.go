package shard

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// memShard serves ranged reads of b and counts what was read.
type memShard struct {
	b     []byte
	opens atomic.Int64
	read  atomic.Int64
	fail  error // returned by every open when set
}

func (s *memShard) rr(_ context.Context, off, n int64) (io.ReadCloser, error) {
	if s.fail != nil {
		return nil, s.fail
	}
	if off < 0 || off > int64(len(s.b)) {
		return nil, fmt.Errorf("range at %d outside %d bytes", off, len(s.b))
	}
	if n < 0 || off+n > int64(len(s.b)) {
		n = int64(len(s.b)) - off
	}
	s.opens.Add(1)
	return io.NopCloser(&countReader{r: bytes.NewReader(s.b[off : off+n]), n: &s.read}), nil
}

type countReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

type file struct {
	name string
	data []byte
}

func sample(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed*7+1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func makeTar(t testing.TB, files []file, extra func(*tar.Writer)) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if extra != nil {
		extra(tw)
	}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

func makeZip(t testing.TB, files []file, method uint16) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for i, f := range files {
		m := method
		if method == 99 { // alternate
			m = []uint16{zip.Store, zip.Deflate}[i%2]
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: f.name, Method: m})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(f.data)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// webdataset is a shard of n samples, each a .jpg and a .cls member.
func webdataset(n, size int) []file {
	var fs []file
	for i := range n {
		fs = append(fs, file{fmt.Sprintf("%06d.jpg", i), sample(uint64(i), size+i)}, file{fmt.Sprintf("%06d.cls", i), []byte(fmt.Sprint(i % 10))})
	}
	return fs
}

func readMember(t testing.TB, ix *Index, s *memShard, name string, start, n int64) ([]byte, error) {
	t.Helper()
	m, err := ix.Lookup(name)
	if err != nil {
		return nil, err
	}
	rc, err := ix.Open(context.Background(), m, s.rr, start, n)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func TestFormats(t *testing.T) {
	files := webdataset(40, 3000)
	files = append(files, file{"dir/" + strings.Repeat("long-name-", 20) + ".bin", sample(99, 70000)}, file{"empty", nil})
	cases := map[string]struct {
		f    Format
		data []byte
	}{
		"tar":         {Tar, makeTar(t, files, nil)},
		"tar.gz":      {TarGz, gz(t, makeTar(t, files, nil))},
		"zip-deflate": {Zip, makeZip(t, files, zip.Deflate)},
		"zip-stored":  {Zip, makeZip(t, files, zip.Store)},
		"zip-mixed":   {Zip, makeZip(t, files, 99)},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s := &memShard{b: c.data}
			ix, err := Build(context.Background(), c.f, int64(len(c.data)), s.rr)
			if err != nil {
				t.Fatal(err)
			}
			if ix.Len() != len(files) {
				t.Fatalf("%d members, want %d", ix.Len(), len(files))
			}
			for _, f := range files {
				got, err := readMember(t, ix, s, f.name, 0, -1)
				if err != nil || !bytes.Equal(got, f.data) {
					t.Fatalf("member %s: %d bytes (want %d), %v", f.name, len(got), len(f.data), err)
				}
			}
			// Ranges inside members.
			big := files[len(files)-2]
			for _, r := range [][2]int64{{0, 1}, {1, 100}, {5000, 65000}, {69999, 1}, {12345, -1}} {
				got, err := readMember(t, ix, s, big.name, r[0], r[1])
				end := int64(len(big.data))
				if r[1] >= 0 {
					end = r[0] + r[1]
				}
				if err != nil || !bytes.Equal(got, big.data[r[0]:end]) {
					t.Fatalf("range %v of %s: %d bytes, %v", r, big.name, len(got), err)
				}
			}
			_, err = readMember(t, ix, s, "000999.jpg", 0, -1)
			var me *MemberError
			if !errors.Is(err, ErrNoMember) || !errors.As(err, &me) || me.Name != "000999.jpg" {
				t.Fatalf("missing member: %v", err)
			}
			if _, err := ix.Lookup("./000001.cls"); err != nil {
				t.Fatalf("./ prefix not matched: %v", err)
			}
		})
	}
}

// A tar scan skips member data: indexing a shard of large members reads
// a small fraction of it.
func TestTarScanSkipsData(t *testing.T) {
	var files []file
	for i := range 6 {
		files = append(files, file{fmt.Sprintf("big%d.bin", i), sample(uint64(i), 4<<20+i)})
	}
	data := makeTar(t, files, nil)
	s := &memShard{b: data}
	ix, err := Build(context.Background(), Tar, int64(len(data)), s.rr)
	if err != nil {
		t.Fatal(err)
	}
	if ix.Len() != 6 {
		t.Fatalf("%d members", ix.Len())
	}
	if got := s.read.Load(); got > 6*scanBuf+scanBuf {
		t.Fatalf("indexing read %d of %d bytes", got, len(data))
	}
	before := s.read.Load()
	got, err := readMember(t, ix, s, "big3.bin", 0, -1)
	if err != nil || !bytes.Equal(got, files[3].data) {
		t.Fatal("member differs", err)
	}
	if d := s.read.Load() - before; d != int64(len(files[3].data)) {
		t.Fatalf("reading a stored tar member read %d bytes, want exactly its %d", d, len(files[3].data))
	}
}

// A WebDataset shard of small members is indexed in one sequential range.
func TestTarScanSmallMembersOneRange(t *testing.T) {
	data := makeTar(t, webdataset(500, 2000), nil)
	s := &memShard{b: data}
	if _, err := Build(context.Background(), Tar, int64(len(data)), s.rr); err != nil {
		t.Fatal(err)
	}
	if s.opens.Load() != 1 {
		t.Fatalf("%d ranges opened to index small members", s.opens.Load())
	}
}

// A zip index reads the end of the archive and the central directory;
// a member read reads about its own bytes.
func TestZipReadsLittle(t *testing.T) {
	var files []file
	for i := range 4 {
		files = append(files, file{fmt.Sprintf("big%d.bin", i), sample(uint64(i), 3<<20)})
	}
	data := makeZip(t, files, zip.Store)
	s := &memShard{b: data}
	ix, err := Build(context.Background(), Zip, int64(len(data)), s.rr)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.read.Load(); got > 70<<10 {
		t.Fatalf("indexing read %d bytes", got)
	}
	before := s.read.Load()
	got, err := readMember(t, ix, s, "big2.bin", 0, -1)
	if err != nil || !bytes.Equal(got, files[2].data) {
		t.Fatal("member differs", err)
	}
	if d := s.read.Load() - before; d > int64(len(files[2].data))+512 {
		t.Fatalf("reading a member read %d bytes for %d", d, len(files[2].data))
	}
	before = s.read.Load()
	got, err = readMember(t, ix, s, "big1.bin", 2<<20, 100)
	if err != nil || !bytes.Equal(got, files[1].data[2<<20:2<<20+100]) {
		t.Fatal("range differs", err)
	}
	if d := s.read.Load() - before; d > 1024 {
		t.Fatalf("a 100-byte range of a stored member read %d bytes", d)
	}
}

// zip64: more than 65535 entries makes archive/zip write the zip64 end
// records.
func TestZip64(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 70000 entries")
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for i := range 70000 {
		w, _ := zw.CreateHeader(&zip.FileHeader{Name: fmt.Sprintf("%05d", i), Method: zip.Store})
		fmt.Fprint(w, i)
	}
	zw.Close()
	s := &memShard{b: buf.Bytes()}
	ix, err := Build(context.Background(), Zip, int64(buf.Len()), s.rr)
	if err != nil {
		t.Fatal(err)
	}
	if ix.Len() != 70000 {
		t.Fatalf("%d members", ix.Len())
	}
	if got, err := readMember(t, ix, s, "69999", 0, -1); err != nil || string(got) != "69999" {
		t.Fatalf("%q %v", got, err)
	}
}

func TestTarOddities(t *testing.T) {
	data := makeTar(t, []file{{"./a.txt", []byte("first")}, {"b.txt", []byte("bee")}, {"./a.txt", []byte("second")}}, func(tw *tar.Writer) {
		tw.WriteHeader(&tar.Header{Name: "dir/", Typeflag: tar.TypeDir, Mode: 0o755})
		tw.WriteHeader(&tar.Header{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "b.txt"})
		tw.WriteHeader(&tar.Header{Name: "meta", Typeflag: tar.TypeXGlobalHeader, PAXRecords: map[string]string{"comment": "x"}})
	})
	s := &memShard{b: data}
	ix, err := Build(context.Background(), Tar, int64(len(data)), s.rr)
	if err != nil {
		t.Fatal(err)
	}
	if names := ix.Names(); strings.Join(names, ",") != "a.txt,b.txt" {
		t.Fatalf("names %v", names)
	}
	if got, _ := readMember(t, ix, s, "a.txt", 0, -1); string(got) != "second" {
		t.Fatalf("duplicate member: got %q, want the last one", got)
	}
	if _, err := ix.Lookup("link"); !errors.Is(err, ErrNoMember) {
		t.Fatalf("a symlink is a member: %v", err)
	}
}

func TestCorrupt(t *testing.T) {
	good := makeTar(t, webdataset(20, 1000), nil)
	z := makeZip(t, webdataset(20, 1000), zip.Deflate)
	for name, c := range map[string]struct {
		f    Format
		data []byte
	}{
		"tar truncated":   {Tar, good[:len(good)/2+100]},
		"tar garbage":     {Tar, bytes.Repeat([]byte("x"), 4096)},
		"tgz not gzip":    {TarGz, good},
		"tgz truncated":   {TarGz, gz(t, good)[:300]},
		"zip garbage":     {Zip, bytes.Repeat([]byte("PK"), 3000)},
		"zip short":       {Zip, []byte("PK\x05\x06")},
		"zip cut":         {Zip, z[len(z)/2:]},
		"unknown format":  {Unknown, good},
		"zip cd past end": {Zip, append(bytes.Repeat([]byte{0}, 10), []byte("PK\x05\x06\x00\x00\x00\x00\x01\x00\x01\x00\x2e\x00\x00\x00\x00\x00\x00\x00\x00\x00")...)},
	} {
		t.Run(name, func(t *testing.T) {
			s := &memShard{b: c.data}
			_, err := Build(context.Background(), c.f, int64(len(c.data)), s.rr)
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("got %v, want ErrFormat", err)
			}
		})
	}
	// A zip member whose bytes were changed after its CRC was written.
	files := []file{{"a.bin", sample(1, 5000)}}
	data := makeZip(t, files, zip.Store)
	i := bytes.Index(data, files[0].data[100:120])
	data[i] ^= 0xff
	s := &memShard{b: data}
	ix, err := Build(context.Background(), Zip, int64(len(data)), s.rr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readMember(t, ix, s, "a.bin", 0, -1); !errors.Is(err, ErrChecksum) {
		t.Fatalf("a corrupted member read %v", err)
	}
}

func TestStoreErrorsPassThrough(t *testing.T) {
	boom := errors.New("store says no")
	for _, f := range []Format{Tar, TarGz, Zip} {
		s := &memShard{b: make([]byte, 4096), fail: boom}
		if _, err := Build(context.Background(), f, 4096, s.rr); !errors.Is(err, boom) {
			t.Fatalf("%s: %v", f, err)
		}
	}
	// A failure while a tar.gz member streams is the store's error too.
	data := gz(t, makeTar(t, webdataset(50, 4000), nil))
	s := &memShard{b: data}
	ix, err := Build(context.Background(), TarGz, int64(len(data)), s.rr)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := ix.Lookup("000040.jpg")
	rc, err := ix.Open(context.Background(), m, func(ctx context.Context, off, n int64) (io.ReadCloser, error) {
		rc, _ := s.rr(ctx, off, n)
		return io.NopCloser(io.MultiReader(io.LimitReader(rc, 1000), &errReader{boom})), nil
	}, 0, -1)
	if err == nil {
		_, err = io.ReadAll(rc)
	}
	if !errors.Is(err, boom) {
		t.Fatalf("got %v", err)
	}
}

type errReader struct{ err error }

func (e *errReader) Read([]byte) (int, error) { return 0, e.err }

func TestFormatOfAndSniff(t *testing.T) {
	for k, want := range map[string]Format{"a/b.tar": Tar, "x.TAR.GZ": TarGz, "x.tgz": TarGz, "x.zip": Zip, "x.tar.zst": Unknown, "x": Unknown} {
		if got := FormatOf(k); got != want {
			t.Errorf("FormatOf(%q) = %v", k, got)
		}
	}
	tr := makeTar(t, webdataset(1, 10), nil)
	for name, c := range map[string]struct {
		b    []byte
		want Format
	}{"tar": {tr, Tar}, "tgz": {gz(t, tr), TarGz}, "zip": {makeZip(t, webdataset(1, 10), zip.Store), Zip}, "text": {[]byte("hello"), Unknown}} {
		if got := Sniff(c.b[:min(len(c.b), SniffLen)]); got != c.want {
			t.Errorf("Sniff(%s) = %v", name, got)
		}
	}
}

func TestCache(t *testing.T) {
	data := makeTar(t, webdataset(10, 100), nil)
	s := &memShard{b: data}
	var builds atomic.Int64
	build := func(ctx context.Context) (*Index, error) {
		builds.Add(1)
		return Build(ctx, Tar, int64(len(data)), s.rr)
	}
	c := NewCache(1 << 20)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if ix, err := c.Get(context.Background(), "k", build); err != nil || ix.Len() != 20 {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if builds.Load() != 1 {
		t.Fatalf("%d builds for one key", builds.Load())
	}
	// Failures are not kept.
	fails := 0
	bad := func(context.Context) (*Index, error) { fails++; return nil, ErrFormat }
	c.Get(context.Background(), "bad", bad)
	c.Get(context.Background(), "bad", bad)
	if fails != 2 {
		t.Fatalf("a failed build was kept")
	}
	// The bound evicts the least recently used.
	one, _ := build(context.Background())
	small := NewCache(one.MemoryBytes()*2 + 1)
	for _, k := range []string{"a", "b", "a", "c"} {
		small.Get(context.Background(), k, func(context.Context) (*Index, error) { return one, nil })
	}
	st := small.Stats()
	if st.Indexes != 2 || st.Evictions != 1 || st.Bytes > one.MemoryBytes()*2+1 {
		t.Fatalf("stats %+v", st)
	}
	if _, ok := small.entries["b"]; ok {
		t.Fatal("b, the least recently used, was kept")
	}
	// A build whose caller went away is retried by a waiter still there.
	c2 := NewCache(1 << 20)
	started, gate := make(chan struct{}), make(chan struct{})
	go c2.Get(context.Background(), "k", func(context.Context) (*Index, error) {
		close(started)
		<-gate
		return nil, context.Canceled
	})
	<-started
	res := make(chan error, 1)
	go func() {
		ix, err := c2.Get(context.Background(), "k", build)
		if err == nil && ix.Len() != 20 {
			err = fmt.Errorf("%d members", ix.Len())
		}
		res <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for c2.Stats().Misses < 2 && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	close(gate)
	if err := <-res; err != nil {
		t.Fatalf("the waiter did not build again: %v", err)
	}
	if st := c2.Stats(); st.Builds != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// A scan's ranges are bounded: indexing a tar of large members never asks
// the reader below for more than scanWindow at once, and a scan of many
// small members goes on across windows.
func TestTarScanWindows(t *testing.T) {
	var files []file
	for i := range 3 {
		files = append(files, file{fmt.Sprintf("big%d", i), sample(uint64(i), 9<<20)})
	}
	files = append(files, webdataset(3000, 2000)...) // ~ 12 MB of small members
	data := makeTar(t, files, nil)
	s := &memShard{b: data}
	var maxAsk int64
	var mu sync.Mutex
	rr := func(ctx context.Context, off, n int64) (io.ReadCloser, error) {
		mu.Lock()
		maxAsk = max(maxAsk, n)
		mu.Unlock()
		return s.rr(ctx, off, n)
	}
	ix, err := Build(context.Background(), Tar, int64(len(data)), rr)
	if err != nil {
		t.Fatal(err)
	}
	if ix.Len() != len(files) || maxAsk > scanWindow {
		t.Fatalf("%d members, largest range asked %d", ix.Len(), maxAsk)
	}
	if got, err := readMember(t, ix, s, "002999.cls", 0, -1); err != nil || string(got) != "9" {
		t.Fatalf("%q %v", got, err)
	}
}

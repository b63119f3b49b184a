package node

import (
	"bytes"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fedgate/fedgate/cachetier/staging"
)

// fixedFS is a statfs stand-in: every directory has free bytes free.
func fixedFS(free int64) statFS {
	return func(string) (diskSpace, error) { return diskSpace{Free: free, Total: 4 * free}, nil }
}

func bufLogger() (*slog.Logger, *bytes.Buffer) {
	var b bytes.Buffer
	return slog.New(slog.NewTextHandler(&b, nil)), &b
}

// Without --cache-size the cache takes 80% of the space free on its file
// system (not of its size), says so at INFO with the reason, and counts
// what it already holds, so a restart does not shrink a full cache.
func TestCacheSizeFromFreeSpace(t *testing.T) {
	for _, tc := range []struct {
		name       string
		free, held int64
		want       int64
		log        string
	}{
		{"80% of free", 10 << 30, 0, 8 << 30, "cache size from free space: 8.00 GiB, 80% of 10.00 GiB free plus 0 B held on "},
		{"a full cache keeps its size", 1 << 30, 7 << 30, 6554 << 20, "cache size from free space: 6.40 GiB, 80% of 1.00 GiB free plus 7.00 GiB held on "},
		{"the floor", 1100 << 20, 0, 1 << 30, "cache size from free space: 1.00 GiB, the 1.00 GiB floor (80% of 1.07 GiB free plus 0 B held is less) on "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, buf := bufLogger()
			dir := t.TempDir()
			got, err := cacheArea.fromFree(fixedFS(tc.free), log, dir, tc.held)
			if err != nil {
				t.Fatal(err)
			}
			if d := got - tc.want; d < -(1<<20) || d > 1<<20 {
				t.Errorf("size %d, want about %d", got, tc.want)
			}
			if !strings.Contains(buf.String(), "level=INFO") || !strings.Contains(buf.String(), tc.log+dir+" (set --cache-size to choose)") {
				t.Errorf("log:\n%s\nwant an INFO line with %q", buf, tc.log)
			}
		})
	}
}

// Below the floor (free plus held) the node refuses, naming the directory,
// the free space and the flag.
func TestCacheSizeBelowFloorRefuses(t *testing.T) {
	log, _ := bufLogger()
	dir := t.TempDir()
	_, err := cacheArea.fromFree(fixedFS(300<<20), log, dir, 200<<20)
	for _, want := range []string{"--cache-dir " + dir, "only 300.00 MiB free", "plus 200.00 MiB the cache holds", "below the 1.00 GiB", "--cache-size"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v; want it to say %q", err, want)
		}
	}
	_, err = stagingArea.fromFree(fixedFS(100<<20), log, dir, 0)
	if err == nil || !strings.Contains(err.Error(), "--staging-size") || !strings.Contains(err.Error(), "below the 256.00 MiB") {
		t.Errorf("staging below its floor: %v", err)
	}
	broken := errors.New("statfs broke")
	if _, err := cacheArea.fromFree(func(string) (diskSpace, error) { return diskSpace{}, broken }, log, dir, 0); !errors.Is(err, broken) {
		t.Errorf("statfs error: %v", err)
	}
}

// openCache and openStaging use the computation when no size is given,
// count what the cache holds, and use an explicit size as given, with a
// warning when it is more than free plus held.
func TestOpenCacheAndStagingSizes(t *testing.T) {
	log, buf := bufLogger()
	cfg := &Config{NodeID: "n1", CacheDir: t.TempDir()}
	c, err := openCache(cfg, log, nil, fixedFS(5<<30))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Stats().Capacity; got != 4<<30 {
		t.Errorf("cache capacity %d, want 80%% of 5 GiB", got)
	}
	c.Close()
	a, err := openStaging(cfg, log, fixedFS(5<<30))
	if err != nil {
		t.Fatal(err)
	}
	if got := a.Stats().Capacity; got != 512<<20 {
		t.Errorf("staging capacity %d, want 10%% of 5 GiB", got)
	}
	if !strings.Contains(buf.String(), "staging size from free space: 512.00 MiB, 10% of 5.00 GiB free plus 0 B held on "+filepath.Join(cfg.CacheDir, "staging")) {
		t.Errorf("log:\n%s", buf)
	}

	// Staged bytes count as held.
	res, err := a.Reserve(t.Context(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Write("00112233445566778899aabbccddeeff", bytes.NewReader(make([]byte, 1<<20)), 1<<20, res); err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	if _, err := openStaging(cfg, log, fixedFS(5<<30)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "plus 1.00 MiB held") {
		t.Errorf("reopened staging's log:\n%s\nwant the staged MiB counted as held", buf)
	}

	buf.Reset()
	cfg.CacheSize, cfg.StagingSize = 2<<30, 1<<30
	c, err = openCache(cfg, log, nil, fixedFS(1<<30))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.Stats().Capacity; got != 2<<30 {
		t.Errorf("explicit cache size: capacity %d", got)
	}
	var s *staging.Area
	if s, err = openStaging(cfg, log, fixedFS(1<<30)); err != nil || s.Stats().Capacity != 1<<30 {
		t.Fatalf("explicit staging size: %v", err)
	}
	out := buf.String()
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "--cache-size 2.00 GiB is more than the 1.00 GiB free") ||
		strings.Contains(out, "--staging-size") || strings.Contains(out, "from free space") {
		t.Errorf("explicit sizes' log:\n%s\nwant one WARN for --cache-size over free space, none for --staging-size (1 GiB free + 1 MiB held)", out)
	}
}

package node

import (
	"fmt"
	"log/slog"
	"syscall"

	"github.com/fedgate/fedgate/internal/bytesize"
)

// The default sizes of the chunk cache and of write-back staging (no
// --cache-size, no --staging-size): a share of the space free on the file
// system of --cache-dir when the node starts plus what the area already
// holds there (so that a restart does not shrink a full cache), and at
// least a floor. A node refuses to start when even the floor is not there
// (free plus held): it would fill the disk. docs/cache.md.
const (
	DefaultCachePercent   = 80
	DefaultStagingPercent = 10
	MinDefaultCacheSize   = 1 << 30
	MinDefaultStagingSize = 256 << 20
)

// diskSpace is what statfs says of the file system holding a directory:
// the bytes an unprivileged process may still write (Free: f_bavail) and
// the whole size.
type diskSpace struct{ Free, Total int64 }

// statFS reads a directory's diskSpace (statfs, or a test's stand-in).
type statFS func(dir string) (diskSpace, error)

func statfs(dir string) (diskSpace, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return diskSpace{}, err
	}
	return diskSpace{Free: int64(st.Bavail) * st.Bsize, Total: int64(st.Blocks) * st.Bsize}, nil
}

// areaSize describes one area sized from free space: the cache or staging.
type areaSize struct {
	what    string // "cache", "staging"
	flag    string // "--cache-size"
	percent int64
	floor   int64
}

var (
	cacheArea   = areaSize{what: "cache", flag: "--cache-size", percent: DefaultCachePercent, floor: MinDefaultCacheSize}
	stagingArea = areaSize{what: "staging", flag: "--staging-size", percent: DefaultStagingPercent, floor: MinDefaultStagingSize}
)

// fromFree returns the area's default size in dir, which holds held bytes
// of it already, and logs it with the reason at INFO; or an error naming
// the directory, the space and the flag when even the floor is not there.
func (a areaSize) fromFree(stat statFS, log *slog.Logger, dir string, held int64) (int64, error) {
	sp, err := stat(dir)
	if err != nil {
		return 0, fmt.Errorf("--cache-dir %s: %w", dir, err)
	}
	avail := sp.Free + held
	if avail < a.floor {
		return 0, fmt.Errorf("--cache-dir %s: only %s free on its file system (plus %s the %s holds there), below the %s the %s takes at least "+
			"when %s is not given (%d%% of free space plus what it holds, at least %s): free space there, point --cache-dir at a larger disk, "+
			"or give %s explicitly",
			dir, bytesize.Format(sp.Free), bytesize.Format(held), a.what, bytesize.Format(a.floor), a.what,
			a.flag, a.percent, bytesize.Format(a.floor), a.flag)
	}
	size := avail/100*a.percent + avail%100*a.percent/100 // no overflow
	reason := fmt.Sprintf("%d%% of %s free plus %s held", a.percent, bytesize.Format(sp.Free), bytesize.Format(held))
	if size < a.floor {
		size = a.floor
		reason = fmt.Sprintf("the %s floor (%d%% of %s free plus %s held is less)", bytesize.Format(a.floor), a.percent,
			bytesize.Format(sp.Free), bytesize.Format(held))
	}
	log.Info(fmt.Sprintf("%s size from free space: %s, %s on %s (set %s to choose)", a.what, bytesize.Format(size), reason, dir, a.flag),
		"dir", dir, "size_bytes", size, "free_bytes", sp.Free, "held_bytes", held, "fs_bytes", sp.Total, "percent", a.percent, "floor_bytes", a.floor)
	return size, nil
}

// checkGiven warns when an explicit size is larger than the space free in
// dir plus what the area holds: the disk fills before the area does.
func (a areaSize) checkGiven(stat statFS, log *slog.Logger, dir string, size, held int64) {
	sp, err := stat(dir)
	if err != nil || size <= sp.Free+held {
		return
	}
	log.Warn(fmt.Sprintf("%s %s is more than the %s free on the file system of %s plus the %s the %s holds: the disk will fill before the %s does",
		a.flag, bytesize.Format(size), bytesize.Format(sp.Free), dir, bytesize.Format(held), a.what, a.what),
		"dir", dir, "size_bytes", size, "free_bytes", sp.Free, "held_bytes", held)
}

// Package staging is a node's write-back staging area: whole objects (or
// multipart parts) written to local NVMe and fsynced before a write-back
// PUT is acknowledged, kept until the drainer has copied them to their
// store. Unlike the chunk cache, nothing here may be dropped to make room:
// space is reserved before a write starts, and a writer that finds the area
// full waits (backpressure) until drains free space or its context ends.
package staging

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Errors of the staging area.
var (
	// ErrFull: the area had no room within the writer's wait.
	ErrFull = errors.New("staging: no room in the write-back staging area")
	// ErrNotFound: no staged file has the id.
	ErrNotFound = errors.New("staging: not found")
	// ErrInvalidID: an id that is not 16-64 lower-case hex digits.
	ErrInvalidID = errors.New("staging: invalid id")
	// ErrShortBody: the body ended before the announced size, or ran past it.
	ErrShortBody = errors.New("staging: body size differs from the announced size")
)

// Config configures an Area.
type Config struct {
	// Dir holds the staged files (required).
	Dir string
	// Capacity bounds the bytes of staged files and reservations (> 0, or
	// 0 with CapacityFor).
	Capacity int64
	// CapacityFor, when Capacity is 0, chooses it once Open has counted
	// the bytes already staged (held). An error fails Open; a non-positive
	// answer is an error too.
	CapacityFor func(held int64) (int64, error)
	// NoSync skips fsync (tests only: an acknowledged write must be on disk).
	NoSync bool
}

// Area is one node's staging area. It is safe for concurrent use.
type Area struct {
	cfg Config

	mu       sync.Mutex
	used     int64 // bytes of staged files
	reserved int64 // bytes promised to writers in progress
	files    int
	freed    chan struct{} // closed (and replaced) whenever space is freed
	// drained holds the files whose entries were drained (MarkDrained),
	// with when: kept for readers until swept, or until a Reserve needs
	// their room.
	drained map[string]mark
	// superseded holds the files of versions a newer write replaced before
	// they were drained (MarkSuperseded): only readers of that version
	// still want them, and a Reserve short of room removes them after
	// every drained file.
	superseded map[string]mark
	// reclaimable is the bytes of the files in drained and superseded.
	reclaimable int64
	// holds keeps files from being reclaimed until a time (Hold).
	holds map[string]time.Time
}

// mark is when a file was marked drained or superseded, and its size.
type mark struct {
	at   time.Time
	size int64
}

// Open opens (creating) the area in cfg.Dir, removes leftovers of writes
// that never finished, and counts what is staged.
func Open(cfg Config) (*Area, error) {
	if cfg.Dir == "" || cfg.Capacity < 0 || cfg.Capacity == 0 && cfg.CapacityFor == nil {
		return nil, errors.New("staging: Config needs Dir and a positive Capacity (or CapacityFor)")
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("staging: %w", err)
	}
	a := &Area{cfg: cfg, freed: make(chan struct{})}
	err := filepath.WalkDir(cfg.Dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if strings.HasSuffix(path, ".tmp") {
			return os.Remove(path)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		a.used += info.Size()
		a.files++
		// A mark survives a restart in the file's mode (markLocked).
		set := map[fs.FileMode]*map[string]mark{modeDrained: &a.drained, modeSuperseded: &a.superseded}[info.Mode().Perm()]
		if set != nil {
			if *set == nil {
				*set = map[string]mark{}
			}
			(*set)[d.Name()] = mark{at: info.ModTime(), size: info.Size()}
			a.reclaimable += info.Size()
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("staging: scan %s: %w", cfg.Dir, err)
	}
	if cfg.Capacity == 0 {
		size, err := cfg.CapacityFor(a.used)
		if err != nil {
			return nil, err
		}
		if size <= 0 {
			return nil, fmt.Errorf("staging: CapacityFor(%d) chose %d bytes", a.used, size)
		}
		a.cfg.Capacity = size
	}
	return a, nil
}

// ValidID reports whether id can name a staged file.
func ValidID(id string) bool {
	if len(id) < 16 || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func (a *Area) path(id string) string { return filepath.Join(a.cfg.Dir, id[:2], id) }

// Reservation is room promised to one writer.
type Reservation struct {
	a    *Area
	n    int64
	once sync.Once
}

// Release gives unused room back (a no-op after Write consumed it).
func (r *Reservation) Release() {
	r.once.Do(func() {
		r.a.mu.Lock()
		r.a.reserved -= r.n
		r.a.wakeLocked()
		r.a.mu.Unlock()
	})
}

func (a *Area) wakeLocked() {
	close(a.freed)
	a.freed = make(chan struct{})
}

// Reserve waits until n bytes fit in the area, then holds them for one
// Write. It fails with ErrFull when n exceeds the capacity, or when ctx
// ends first (wrapping ctx's error): set the wait with ctx's deadline.
func (a *Area) Reserve(ctx context.Context, n int64) (*Reservation, error) {
	if n < 0 {
		return nil, fmt.Errorf("staging: negative size %d", n)
	}
	if n > a.cfg.Capacity {
		return nil, fmt.Errorf("%w: %d bytes exceed its capacity of %d", ErrFull, n, a.cfg.Capacity)
	}
	for {
		a.mu.Lock()
		if a.used+a.reserved+n > a.cfg.Capacity {
			a.dropDrainedLocked(a.used + a.reserved + n - a.cfg.Capacity)
		}
		if a.used+a.reserved+n <= a.cfg.Capacity {
			a.reserved += n
			a.mu.Unlock()
			return &Reservation{a: a, n: n}, nil
		}
		ch := a.freed
		a.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (waited for %d bytes): %w", ErrFull, n, ctx.Err())
		}
	}
}

// Write stores exactly n bytes of r as id, durably (file and directory
// fsynced) before it returns, using res (which it consumes, success or
// not). A partial write leaves nothing behind. Writing an id that exists
// replaces it.
func (a *Area) Write(id string, r io.Reader, n int64, res *Reservation) (err error) {
	defer res.Release()
	if !ValidID(id) {
		return fmt.Errorf("%w: %q", ErrInvalidID, id)
	}
	if res == nil || res.n < n {
		return fmt.Errorf("staging: write of %d bytes without a reservation for them", n)
	}
	dst := a.path(id)
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return fmt.Errorf("staging: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(dst), id+".*.tmp")
	if err != nil {
		return fmt.Errorf("staging: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	got, err := io.Copy(f, io.LimitReader(r, n))
	if err != nil {
		return fmt.Errorf("staging: write %s: %w", id, err)
	}
	if got != n {
		return fmt.Errorf("%w: got %d of %d bytes", ErrShortBody, got, n)
	}
	var one [1]byte
	if k, _ := r.Read(one[:]); k > 0 {
		return fmt.Errorf("%w: more than %d bytes", ErrShortBody, n)
	}
	if !a.cfg.NoSync {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("staging: fsync %s: %w", id, err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("staging: %w", err)
	}
	a.mu.Lock()
	var old int64 = -1
	if info, err := os.Stat(dst); err == nil {
		old = info.Size()
	}
	if err := os.Rename(f.Name(), dst); err != nil {
		a.mu.Unlock()
		return fmt.Errorf("staging: %w", err)
	}
	a.reserved -= n
	res.n -= n // consumed: Release gives back only what was not used
	a.used += n
	a.unmarkLocked(id) // a new file under the id: not drained yet
	if old >= 0 {
		a.used -= old
	} else {
		a.files++
	}
	a.mu.Unlock()
	if !a.cfg.NoSync {
		if d, err := os.Open(filepath.Dir(dst)); err == nil {
			err = d.Sync()
			d.Close()
			if err != nil {
				return fmt.Errorf("staging: fsync directory of %s: %w", id, err)
			}
		}
	}
	return nil
}

// Open opens the staged file id for reading, with its size.
func (a *Area) Open(id string) (*os.File, int64, error) {
	if !ValidID(id) {
		return nil, 0, fmt.Errorf("%w: %q", ErrInvalidID, id)
	}
	f, err := os.Open(a.path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("staging: %w", err)
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("staging: %w", err)
	}
	return f, info.Size(), nil
}

// Has reports whether id is staged here.
func (a *Area) Has(id string) bool {
	if !ValidID(id) {
		return false
	}
	_, err := os.Stat(a.path(id))
	return err == nil
}

// MarkDrained records that id's journal entry was drained to its store:
// the file stays for readers that are still reading it (DrainedWithin
// tells the sweeper how long ago), but a Reserve short of room removes
// drained files, oldest first, before it waits.
func (a *Area) MarkDrained(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.markLocked(id, false)
	a.wakeLocked() // a waiting Reserve may use the room now
}

// DrainedWithin reports whether id was marked drained less than d ago.
func (a *Area) DrainedWithin(id string, d time.Duration) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	m, ok := a.drained[id]
	return ok && time.Since(m.at) < d
}

// MarkSuperseded records that id holds (part of) a version that a newer
// write replaced before it was drained: no journal entry refers to it, but
// a reader of that version may still be reading it. It stays until swept,
// or until a Reserve short of room removes it, after every drained file
// (whose bytes the store also has), oldest first.
func (a *Area) MarkSuperseded(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.markLocked(id, true)
	a.wakeLocked()
}

// Staged files are written with mode 0600; a mark changes the mode, so
// that a node that restarts knows which files it may reclaim (the marks
// are otherwise in memory). A mode change that a crash loses only delays
// reclaiming the file until the sweeper removes it.
const (
	modeDrained    fs.FileMode = 0o400
	modeSuperseded fs.FileMode = 0o440
)

// markLocked marks id drained or superseded (moving it from the other
// set), counting its size as reclaimable once.
func (a *Area) markLocked(id string, superseded bool) {
	m, ok := a.drained[id]
	if !ok {
		m, ok = a.superseded[id]
	}
	if !ok {
		info, err := os.Stat(a.path(id))
		if err != nil {
			return // not staged here
		}
		m.size = info.Size()
		a.reclaimable += m.size
	}
	delete(a.drained, id)
	delete(a.superseded, id)
	m.at = time.Now()
	set, mode := &a.drained, modeDrained
	if superseded {
		set, mode = &a.superseded, modeSuperseded
	}
	if *set == nil {
		*set = map[string]mark{}
	}
	(*set)[id] = m
	_ = os.Chmod(a.path(id), mode)
}

// unmarkLocked forgets id's mark.
func (a *Area) unmarkLocked(id string) {
	m, ok := a.drained[id]
	if !ok {
		m, ok = a.superseded[id]
	}
	if ok {
		a.reclaimable -= m.size
	}
	delete(a.drained, id)
	delete(a.superseded, id)
}

// Hold keeps ids from being reclaimed for d: a Reserve short of room and
// the sweeper (which asks Held) pass them by. A reader of a staged object
// of several parts holds the parts it has not reached yet, which a newer
// write may have superseded meanwhile. Ids not staged here are held too
// (cheaply) in case they arrive.
func (a *Area) Hold(ids []string, d time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	if a.holds == nil {
		a.holds = map[string]time.Time{}
	}
	if len(a.holds) > 4096 {
		for id, until := range a.holds {
			if now.After(until) {
				delete(a.holds, id)
			}
		}
	}
	for _, id := range ids {
		if until := now.Add(d); until.After(a.holds[id]) {
			a.holds[id] = until
		}
	}
}

// Held reports whether id is held (Hold) now.
func (a *Area) Held(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.heldLocked(id)
}

func (a *Area) heldLocked(id string) bool {
	until, ok := a.holds[id]
	return ok && time.Now().Before(until)
}

// dropDrainedLocked removes drained files, then superseded ones, each
// oldest first, until need bytes are freed or none is left; held files
// stay.
func (a *Area) dropDrainedLocked(need int64) {
	for _, set := range []map[string]mark{a.drained, a.superseded} {
		if len(set) == 0 {
			continue
		}
		ids := make([]string, 0, len(set))
		for id := range set {
			ids = append(ids, id)
		}
		slices.SortFunc(ids, func(x, y string) int { return set[x].at.Compare(set[y].at) })
		for _, id := range ids {
			if need <= 0 {
				return
			}
			if a.heldLocked(id) {
				continue
			}
			before := a.used
			_ = a.removeLocked(id)
			need -= before - a.used
		}
	}
}

// Remove deletes a staged file and frees its room; a missing id is not an
// error. Readers that have it open keep reading it.
func (a *Area) Remove(id string) error {
	if !ValidID(id) {
		return fmt.Errorf("%w: %q", ErrInvalidID, id)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.removeLocked(id)
}

func (a *Area) removeLocked(id string) error {
	a.unmarkLocked(id)
	p := a.path(id)
	info, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("staging: %w", err)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("staging: %w", err)
	}
	a.used -= info.Size()
	a.files--
	a.wakeLocked()
	return nil
}

// File describes one staged file.
type File struct {
	ID      string
	Size    int64
	ModTime time.Time
}

// List returns every staged file (for sweeping files no journal entry
// refers to any more).
func (a *Area) List() ([]File, error) {
	var out []File
	err := filepath.WalkDir(a.cfg.Dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() || !ValidID(d.Name()) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil // removed meanwhile
		}
		out = append(out, File{ID: d.Name(), Size: info.Size(), ModTime: info.ModTime()})
		return nil
	})
	return out, err
}

// Stats is the area's use.
type Stats struct {
	Files    int
	Used     int64 // bytes of staged files
	Reserved int64 // bytes promised to writes in progress
	// Reclaimable is the part of Used that new writes may take: files
	// drained to their store, or of versions overwritten before they
	// drained (kept for readers still reading them).
	Reclaimable int64
	Capacity    int64
}

// Stats returns the area's current use.
func (a *Area) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return Stats{Files: a.files, Used: a.used, Reserved: a.reserved, Reclaimable: a.reclaimable, Capacity: a.cfg.Capacity}
}

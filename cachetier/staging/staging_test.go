package staging

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

const idA = "00112233445566778899aabbccddeeff"
const idB = "ffeeddccbbaa99887766554433221100"

func open(t *testing.T, dir string, capacity int64) *Area {
	t.Helper()
	a, err := Open(Config{Dir: dir, Capacity: capacity})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func write(t *testing.T, a *Area, id string, data []byte) {
	t.Helper()
	res, err := a.Reserve(context.Background(), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Write(id, bytes.NewReader(data), int64(len(data)), res); err != nil {
		t.Fatal(err)
	}
}

func TestWriteReadRemove(t *testing.T) {
	dir := t.TempDir()
	a := open(t, dir, 100)
	write(t, a, idA, []byte("hello"))
	f, n, err := a.Open(idA)
	if err != nil || n != 5 {
		t.Fatalf("Open = %d, %v", n, err)
	}
	got, _ := io.ReadAll(f)
	f.Close()
	if string(got) != "hello" {
		t.Fatalf("read %q", got)
	}
	if s := a.Stats(); s.Files != 1 || s.Used != 5 || s.Reserved != 0 {
		t.Fatalf("Stats = %+v", s)
	}
	// Overwrite accounts the difference, not both.
	write(t, a, idA, []byte("hi"))
	if s := a.Stats(); s.Files != 1 || s.Used != 2 {
		t.Fatalf("Stats after overwrite = %+v", s)
	}
	// Reopen counts what is there and removes unfinished writes.
	os.WriteFile(filepath.Join(dir, "00", idA+".123.tmp"), []byte("partial"), 0o600)
	b := open(t, dir, 100)
	if s := b.Stats(); s.Files != 1 || s.Used != 2 {
		t.Fatalf("Stats after reopen = %+v", s)
	}
	if files, _ := b.List(); len(files) != 1 || files[0].ID != idA || files[0].Size != 2 {
		t.Fatalf("List = %+v", files)
	}
	if err := b.Remove(idA); err != nil || b.Has(idA) {
		t.Fatalf("Remove = %v, still there %v", err, b.Has(idA))
	}
	if err := b.Remove(idA); err != nil {
		t.Fatalf("second Remove = %v", err)
	}
	if _, _, err := b.Open(idA); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Open removed = %v", err)
	}
	if s := b.Stats(); s.Files != 0 || s.Used != 0 {
		t.Fatalf("Stats after remove = %+v", s)
	}
}

func TestBadWritesLeaveNothing(t *testing.T) {
	a := open(t, t.TempDir(), 100)
	for _, body := range []string{"abc", "abcdefgh"} {
		res, _ := a.Reserve(context.Background(), 5)
		if err := a.Write(idA, strings.NewReader(body), 5, res); !errors.Is(err, ErrShortBody) {
			t.Fatalf("Write of %q as 5 bytes = %v", body, err)
		}
	}
	if _, err := a.Reserve(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if s := a.Stats(); s.Files != 0 || s.Used != 0 || s.Reserved != 1 || a.Has(idA) {
		t.Fatalf("failed writes left %+v", s)
	}
	res, _ := a.Reserve(context.Background(), 1)
	if err := a.Write("../etc", strings.NewReader("x"), 1, res); !errors.Is(err, ErrInvalidID) {
		t.Fatalf("Write with a bad id = %v", err)
	}
}

// TestBackpressure: a writer waits while the area is full and proceeds
// when a drain frees room; past its deadline it gets ErrFull.
func TestBackpressure(t *testing.T) {
	a := open(t, t.TempDir(), 10)
	write(t, a, idA, make([]byte, 8))
	if _, err := a.Reserve(context.Background(), 11); !errors.Is(err, ErrFull) {
		t.Fatalf("Reserve above capacity = %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := a.Reserve(ctx, 5); !errors.Is(err, ErrFull) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Reserve on a full area = %v", err)
	}
	got := make(chan error, 1)
	go func() {
		res, err := a.Reserve(context.Background(), 5)
		if err == nil {
			err = a.Write(idB, bytes.NewReader(make([]byte, 5)), 5, res)
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("a writer did not wait for room: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := a.Remove(idA); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting writer was not woken by Remove")
	}
	if s := a.Stats(); s.Used != 5 || s.Reserved != 0 {
		t.Fatalf("Stats = %+v", s)
	}
}

// A drained file stays until its room is needed: a Reserve short of room
// removes drained files (oldest first) instead of waiting, and never a
// file that is not drained.
func TestDrainedFilesGiveWayToNewWrites(t *testing.T) {
	a := open(t, t.TempDir(), 100)
	write(t, a, idA, bytes.Repeat([]byte("a"), 60))
	write(t, a, idB, bytes.Repeat([]byte("b"), 30))

	// Nothing drained: 60 more bytes do not fit, and nothing is removed.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err := a.Reserve(ctx, 60)
	cancel()
	if !errors.Is(err, ErrFull) || !a.Has(idA) || !a.Has(idB) {
		t.Fatalf("reserve with no drained file: %v (A kept %v, B kept %v); want ErrFull and both kept", err, a.Has(idA), a.Has(idB))
	}

	a.MarkDrained(idA)
	if !a.DrainedWithin(idA, time.Minute) || a.DrainedWithin(idB, time.Minute) || a.DrainedWithin(idA, 0) {
		t.Fatal("DrainedWithin")
	}
	if f, _, err := a.Open(idA); err != nil { // kept for readers while there is room
		t.Fatalf("a drained file is gone before its room was needed: %v", err)
	} else {
		f.Close()
	}
	res, err := a.Reserve(context.Background(), 60)
	if err != nil {
		t.Fatalf("reserve with a drained file to give way: %v", err)
	}
	res.Release()
	if a.Has(idA) || !a.Has(idB) || a.DrainedWithin(idA, time.Minute) {
		t.Fatalf("after the reserve: A kept %v, B kept %v; want A removed, B kept", a.Has(idA), a.Has(idB))
	}
	if st := a.Stats(); st.Used != 30 {
		t.Fatalf("used %d bytes; want 30", st.Used)
	}
}

// Superseded files give way too, but only once no drained file is left:
// a drained file's bytes are also in the store, a superseded one's are not.
func TestSupersededFilesGiveWayAfterDrainedOnes(t *testing.T) {
	a := open(t, t.TempDir(), 100)
	write(t, a, idA, bytes.Repeat([]byte("a"), 40))
	write(t, a, idB, bytes.Repeat([]byte("b"), 40))
	a.MarkSuperseded(idA)
	a.MarkDrained(idB)
	res, err := a.Reserve(context.Background(), 50)
	if err != nil {
		t.Fatalf("reserve: %v", err)
	}
	res.Release()
	if !a.Has(idA) || a.Has(idB) {
		t.Fatalf("after 50 bytes: superseded kept %v, drained kept %v; want the drained one removed first", a.Has(idA), a.Has(idB))
	}
	res, err = a.Reserve(context.Background(), 90)
	if err != nil {
		t.Fatalf("reserve: %v", err)
	}
	res.Release()
	if a.Has(idA) {
		t.Fatal("the superseded file did not give way")
	}
}

// Reclaimable counts marked files once, and forgets them when removed.
func TestReclaimable(t *testing.T) {
	a := open(t, t.TempDir(), 100)
	write(t, a, idA, bytes.Repeat([]byte("a"), 40))
	write(t, a, idB, bytes.Repeat([]byte("b"), 30))
	a.MarkSuperseded(idA)
	a.MarkDrained(idA) // moved, not counted twice
	a.MarkDrained(idB)
	if r := a.Stats().Reclaimable; r != 70 {
		t.Fatalf("reclaimable %d; want 70", r)
	}
	if err := a.Remove(idA); err != nil {
		t.Fatal(err)
	}
	if r := a.Stats().Reclaimable; r != 30 {
		t.Fatalf("reclaimable %d after removing A; want 30", r)
	}
}

// Marks survive a restart: a reopened area still lets drained and
// superseded files give way (a node restarted with a full staging area of
// drained copies would otherwise refuse writes until the sweep).
func TestMarksSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	a := open(t, dir, 100)
	write(t, a, idA, bytes.Repeat([]byte("a"), 40))
	write(t, a, idB, bytes.Repeat([]byte("b"), 40))
	a.MarkSuperseded(idA)
	a.MarkDrained(idB)

	a = open(t, dir, 100)
	if st := a.Stats(); st.Used != 80 || st.Reclaimable != 80 {
		t.Fatalf("reopened: %+v; want 80 bytes used, all reclaimable", st)
	}
	if !a.DrainedWithin(idB, time.Hour) {
		t.Fatal("reopened: B is no longer drained")
	}
	res, err := a.Reserve(context.Background(), 50)
	if err != nil {
		t.Fatalf("reserve after reopening: %v", err)
	}
	res.Release()
	if !a.Has(idA) || a.Has(idB) {
		t.Fatalf("after reopening: superseded kept %v, drained kept %v; want the drained one removed first", a.Has(idA), a.Has(idB))
	}
	// Written again under the same id, a file is not drained any more.
	write(t, a, idA, bytes.Repeat([]byte("c"), 10))
	if st := a.Stats(); st.Reclaimable != 0 {
		t.Fatalf("a rewritten file is still reclaimable: %+v", st)
	}
}

// A held file is passed by when a Reserve needs room, until the hold ends.
// In a synctest bubble: the hold's 200 ms pass on the fake clock.
func TestHeldFilesStay(t *testing.T) { synctest.Test(t, testHeldFilesStay) }

func testHeldFilesStay(t *testing.T) {
	a := open(t, t.TempDir(), 100)
	write(t, a, idA, bytes.Repeat([]byte("a"), 60))
	a.MarkSuperseded(idA)
	a.Hold([]string{idA}, 200*time.Millisecond)
	if !a.Held(idA) || a.Held(idB) {
		t.Fatal("Held")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err := a.Reserve(ctx, 60)
	cancel()
	if !errors.Is(err, ErrFull) || !a.Has(idA) {
		t.Fatalf("reserve over a held file: %v (kept %v); want ErrFull and the file kept", err, a.Has(idA))
	}
	time.Sleep(250 * time.Millisecond) // the fake clock: past the hold
	res, err := a.Reserve(context.Background(), 60)
	if err != nil {
		t.Fatalf("reserve after the hold ended: %v", err)
	}
	res.Release()
	if a.Has(idA) {
		t.Fatal("the file stayed after its hold ended")
	}
}

// CapacityFor chooses the capacity from the bytes already staged.
func TestCapacityForSeesStagedBytes(t *testing.T) {
	dir := t.TempDir()
	write(t, open(t, dir, 100), idA, []byte("hello"))
	var seen []int64
	a, err := Open(Config{Dir: dir, CapacityFor: func(held int64) (int64, error) { seen = append(seen, held); return held + 10, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || seen[0] != 5 {
		t.Fatalf("CapacityFor called with %v; want once with the 5 bytes staged", seen)
	}
	if s := a.Stats(); s.Capacity != 15 || s.Used != 5 {
		t.Fatalf("Stats = %+v; want capacity 15", s)
	}
	refuse := errors.New("no room")
	if _, err := Open(Config{Dir: dir, CapacityFor: func(int64) (int64, error) { return 0, refuse }}); !errors.Is(err, refuse) {
		t.Fatalf("Open with a failing CapacityFor: %v", err)
	}
	if _, err := Open(Config{Dir: dir, CapacityFor: func(int64) (int64, error) { return -1, nil }}); err == nil || !strings.Contains(err.Error(), "CapacityFor") {
		t.Fatalf("Open with CapacityFor choosing -1: %v", err)
	}
	if _, err := Open(Config{Dir: dir}); err == nil {
		t.Fatal("Open without Capacity or CapacityFor succeeded")
	}
}

package mount

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/fedgate/fedgate/internal/testenv"
)

// A file renamed back and forth while another caller stats and reads both
// names through the kernel: every read whole and right, the names right
// after. (The kernel serialises a rename against lookups in its
// directories; operations on the inode itself, such as a Getattr, may run
// during it, which is why a node's place is replaced atomically. This
// test passed under -race before that change too: it checks the
// behaviour, not the race.)
func TestRenameWhileInUse(t *testing.T) {
	testenv.FUSE(t)
	c := stack(t)
	body := randBytes(41, 70_000)
	put(t, c, "r/a", body)
	dir := t.TempDir()
	m, err := Start(dir, Config{Client: c, Bucket: "data", StatTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Unmount(); err != nil {
			t.Error(err)
		}
		m.Wait()
	})
	names := [2]string{filepath.Join(dir, "r/a"), filepath.Join(dir, "r/b")}

	const rounds = 30
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var readErr error
	var reads int
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, p := range names {
				if _, err := os.Stat(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
					readErr = err
					return
				}
				got, err := os.ReadFile(p)
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				if err != nil || !bytes.Equal(got, body) {
					readErr = errors.Join(err, errors.New("content differs"))
					return
				}
				reads++
			}
		}
	})
	for i := range rounds {
		if err := os.Rename(names[i%2], names[(i+1)%2]); err != nil {
			close(stop)
			wg.Wait()
			t.Fatalf("rename %d: %v", i, err)
		}
	}
	close(stop)
	wg.Wait()
	if readErr != nil {
		t.Fatalf("a reader during the renames: %v", readErr)
	}
	// rounds is even: the file is back at its first name, the other is gone.
	if got, err := os.ReadFile(names[0]); err != nil || !bytes.Equal(got, body) {
		t.Errorf("after %d renames: %v (equal %v)", rounds, err, bytes.Equal(got, body))
	}
	if _, err := os.Stat(names[1]); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the other name after the renames: %v, want ENOENT", err)
	}
	t.Logf("%d whole-file reads during %d renames", reads, rounds)
}

package storetest

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/fedgate/fedgate/store"
)

// testConcurrentKeys: writers and readers of different keys in shared
// "directories" run at once; every object ends up intact.
func testConcurrentKeys(t *testing.T, s store.Store, caps Capabilities) {
	const writers, perWriter = 8, 8
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				key := fmt.Sprintf("shared/%d/w%d-%d", i%2, w, i)
				b := data(uint64(1000+w*perWriter+i), 10_000+i*1000)
				if _, err := s.Put(t.Context(), key, bytes.NewReader(b), int64(len(b)), store.PutOptions{}); err != nil {
					t.Errorf("Put(%s): %v", key, err)
					return
				}
				got, err := readRange(t, s, key, 0, -1, "")
				if err != nil || !bytes.Equal(got, b) {
					t.Errorf("ReadRange(%s) right after Put: %d bytes, %v", key, len(got), err)
				}
			}
		})
	}
	wg.Wait()
	n := 0
	for e, err := range s.List(t.Context(), store.ListOptions{Prefix: "shared/"}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		var w, i int
		if _, err := fmt.Sscanf(e.Key[len("shared/x/"):], "w%d-%d", &w, &i); err != nil {
			t.Errorf("unexpected key %s", quote(e.Key))
			continue
		}
		checkObject(t, s, e.Key, data(uint64(1000+w*perWriter+i), 10_000+i*1000))
	}
	if n != writers*perWriter {
		t.Errorf("List found %d objects, want %d", n, writers*perWriter)
	}
}

// testDeleteRacesPut: deleting the last object of a "directory" while
// another object is written into it never loses the write.
func testDeleteRacesPut(t *testing.T, s store.Store, caps Capabilities) {
	rounds := 100
	if caps.short() {
		rounds = 30
	}
	ctx := t.Context()
	var wg sync.WaitGroup
	wg.Go(func() {
		for range rounds {
			if _, err := s.Put(ctx, "race/d/churn", bytes.NewReader([]byte("c")), 1, store.PutOptions{}); err != nil {
				t.Errorf("Put(churn): %v", err)
				return
			}
			if err := s.Delete(ctx, "race/d/churn"); err != nil {
				t.Errorf("Delete(churn): %v", err)
				return
			}
		}
	})
	wg.Go(func() {
		for i := range rounds {
			key := fmt.Sprintf("race/d/k%03d", i)
			if _, err := s.Put(ctx, key, bytes.NewReader([]byte(key)), int64(len(key)), store.PutOptions{}); err != nil {
				t.Errorf("Put(%s): %v", key, err)
				return
			}
			if _, err := s.Stat(ctx, key); err != nil {
				t.Errorf("Stat(%s) right after Put: %v", key, err)
			}
			if i%2 == 1 { // empty the directory again now and then
				if err := s.Delete(ctx, key); err != nil {
					t.Errorf("Delete(%s): %v", key, err)
				}
			}
		}
	})
	wg.Wait()
	var w []want
	for i := 0; i < rounds; i += 2 {
		w = append(w, want{key: fmt.Sprintf("race/d/k%03d", i)})
	}
	checkList(t, s, store.ListOptions{Prefix: "race/"}, w)
}

// testConcurrentDeletes: deleting every object of a "directory" at once,
// as `aws s3 rm --recursive` does, succeeds for each key (Delete is
// idempotent and must not trip over a sibling's cleanup) and leaves nothing.
func testConcurrentDeletes(t *testing.T, s store.Store, caps Capabilities) {
	ctx := t.Context()
	rounds := 20
	if caps.short() {
		rounds = 5
	}
	for r := range rounds {
		var keys []string
		for i := range 8 {
			keys = append(keys, fmt.Sprintf("rm/%d/sub/k%d", r, i))
		}
		for _, k := range keys {
			if _, err := s.Put(ctx, k, bytes.NewReader([]byte(k)), int64(len(k)), store.PutOptions{}); err != nil {
				t.Fatalf("Put(%s): %v", k, err)
			}
		}
		var wg sync.WaitGroup
		for _, k := range keys {
			wg.Go(func() {
				if err := s.Delete(ctx, k); err != nil {
					t.Errorf("Delete(%s) racing sibling deletes: %v", k, err)
				}
			})
		}
		wg.Wait()
	}
	for e, err := range s.List(ctx, store.ListOptions{Prefix: "rm/"}) {
		t.Fatalf("List after deleting everything: %v %v", e.Key, err)
	}
}

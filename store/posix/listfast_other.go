//go:build !linux

package posix

import "github.com/fedgate/fedgate/store"

// listInfo has no fast path off Linux: the listing opens each file
// through the store's os.Root.
func (s *Store) listInfo(dirfd int, name, key string, buf []byte) (store.ObjectInfo, bool) {
	return store.ObjectInfo{}, false
}

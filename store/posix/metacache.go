package posix

import (
	"os"
	"sync"

	"github.com/fedgate/fedgate/store"
)

// metaCache keeps the parsed metadata of recently read objects, so a GET of
// an unchanged object costs an fstat instead of a getxattr and a JSON
// decode.
// An entry is used only while the file's Validator (inode, nanosecond mtime,
// size) is the one it was read with; every commit stamps a fresh mtime, so a
// rewritten object never matches an old entry.
type metaCache struct {
	shards [16]metaShard
}

type metaShard struct {
	mu sync.Mutex
	m  map[string]cachedInfo
}

type cachedInfo struct {
	validator store.Validator
	dataSize  int64
	meta      meta
	form      form
}

// metaShardMax bounds each shard; a full shard starts over (64k entries in
// all, a few MiB at most).
const metaShardMax = 4096

func (c *metaCache) shard(rel string) *metaShard {
	var h uint32 = 2166136261
	for i := 0; i < len(rel); i++ {
		h = (h ^ uint32(rel[i])) * 16777619
	}
	return &c.shards[h%uint32(len(c.shards))]
}

func (c *metaCache) get(rel string, v store.Validator) (cachedInfo, bool) {
	sh := c.shard(rel)
	sh.mu.Lock()
	ci, ok := sh.m[rel]
	sh.mu.Unlock()
	return ci, ok && ci.validator == v
}

func (c *metaCache) put(rel string, ci cachedInfo) {
	sh := c.shard(rel)
	sh.mu.Lock()
	if sh.m == nil || len(sh.m) >= metaShardMax {
		sh.m = make(map[string]cachedInfo, 64)
	}
	sh.m[rel] = ci
	sh.mu.Unlock()
}

// readInfo returns the ObjectInfo of the open object file f at rel, from
// the cache when the file is unchanged, and how the file holds its
// metadata. The returned maps are shared: callers must not modify them.
func (s *Store) readInfo(f *os.File, rel, key string) (store.ObjectInfo, form, error) {
	fi, err := f.Stat()
	if err != nil {
		return store.ObjectInfo{}, 0, err
	}
	v := validatorOf(fi)
	ci, ok := s.metas.get(rel, v)
	if !ok {
		size, m, fm, err := s.loadMeta(f, fi)
		if err != nil {
			return store.ObjectInfo{}, 0, err
		}
		ci = cachedInfo{validator: v, dataSize: size, meta: m, form: fm}
		s.metas.put(rel, ci)
	}
	return store.ObjectInfo{
		Key:       key,
		Size:      ci.dataSize,
		ModTime:   fi.ModTime().UTC(),
		ETag:      ci.meta.ETag,
		Validator: v,
		Metadata:  ci.meta.metadata(),
	}, ci.form, nil
}

package store

import (
	"context"
	"io"
)

// FirstReader is the optional ability of a store to answer an object's
// metadata together with its first bytes, in one request (S3: a ranged
// GET, whose headers carry what a HEAD would). A cold read of a small
// object then costs the origin one request instead of a Stat and a read:
// what a training epoch's first pass over many small samples pays per
// sample.
type FirstReader interface {
	// ReadFirst returns key's info, as Stat would, and a reader of its
	// first min(n, info.Size) bytes (n > 0) of the version info
	// describes. Its errors are Stat's.
	ReadFirst(ctx context.Context, key string, n int64) (ObjectInfo, io.ReadCloser, error)
}

package federation

import (
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"iter"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/cachetier/staging"
	"github.com/fedgate/fedgate/federation/placement"
	"github.com/fedgate/fedgate/regionstate"
	"github.com/fedgate/fedgate/store"
)

// Write-back: a PUT to a write-back bucket is acknowledged once its bytes
// are fsynced in the staging areas of Copies nodes and a journal entry is
// committed through Raft; the drainer (drain.go) later writes it to the
// bucket's store. Until then reads in the region are served from staging.

// ErrStagingUnavailable: a write-back write could not be staged in time on
// enough nodes (staging full, or too few nodes reachable). Nothing was
// acknowledged; the client should retry (S3: 503 SlowDown).
var ErrStagingUnavailable = backend.ErrStagingUnavailable

// ErrLengthRequired: a write-back write must say its length in advance.
var ErrLengthRequired = backend.ErrLengthRequired

// Region is the rest of the region as the namespace sees it; cmd/fedgate
// implements it over the internal node-to-node API.
type Region interface {
	// Self is this node's id.
	Self() string
	// Members are the ids of the region's Raft members, this node included.
	Members() []string
	// StageTo copies exactly n bytes of r into node's staging area as id
	// and returns once that node has fsynced them.
	StageTo(ctx context.Context, node, id string, r io.Reader, n int64) error
	// ReadStaged streams [off, off+n) of the file id staged on node.
	ReadStaged(ctx context.Context, node, id string, off, n int64) (io.ReadCloser, error)
	// HoldStaged asks node to keep the files ids staged there for d
	// (staging.Area.Hold).
	HoldStaged(ctx context.Context, node string, ids []string, d time.Duration) error
	// ReadBarrier returns once this node has applied every Raft entry
	// committed anywhere in the region before the call.
	ReadBarrier(ctx context.Context) error
}

// soloRegion is a one-node region: no peers, nothing to wait for.
type soloRegion struct{ id string }

func (s soloRegion) Self() string                      { return s.id }
func (s soloRegion) Members() []string                 { return []string{s.id} }
func (s soloRegion) ReadBarrier(context.Context) error { return nil }
func (s soloRegion) StageTo(context.Context, string, string, io.Reader, int64) error {
	return errors.New("federation: a one-node region has no peers")
}
func (s soloRegion) ReadStaged(context.Context, string, string, int64, int64) (io.ReadCloser, error) {
	return nil, errors.New("federation: a one-node region has no peers")
}
func (s soloRegion) HoldStaged(context.Context, string, []string, time.Duration) error { return nil }

// WriteBackConfig configures write-back on a namespace.
type WriteBackConfig struct {
	// Staging is this node's staging area (nil: write-back buckets are
	// refused).
	Staging *staging.Area
	// Copies is how many nodes must hold a write's bytes before it is
	// acknowledged (default 2; a region with fewer members uses all).
	Copies int
	// Wait bounds how long a write waits for room in the staging areas
	// (backpressure) before it fails with ErrStagingUnavailable (default 30s).
	Wait time.Duration
	// PeerStall bounds how long a peer taking a staged copy may stop
	// reading it (a frozen or hung node) before it is given up and the copy
	// goes to the next peer (default 2s; a node sets 1.5 x its election
	// timeout, at least 1 s), and how long a staged read waits on a holder
	// that does not answer or stops sending; once a peer has every byte it has
	// PeerStall plus the time to fsync them at 50 MB/s to answer
	// (peerFinal).
	PeerStall time.Duration
}

// stagedPrefix starts the Validator of an object served from staging:
// "staged:<journal version>".
const stagedPrefix = "staged:"

func stagedValidator(version uint64) store.Validator {
	return store.Validator(stagedPrefix + strconv.FormatUint(version, 10))
}

func newStageID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// copies is how many nodes a write-back write goes to now.
func (n *Namespace) copies() int {
	return max(1, min(n.wb.Copies, len(n.region.Members())))
}

// peersFor orders the other members for a staged file: a stable order per
// id (rendezvous), so copies spread evenly over the region.
func (n *Namespace) peersFor(id string) []string {
	self := n.region.Self()
	var peers []string
	for _, m := range n.region.Members() {
		if m != self {
			peers = append(peers, m)
		}
	}
	score := func(m string) uint64 {
		h := fnv.New64a()
		h.Write([]byte(id))
		h.Write([]byte{0})
		h.Write([]byte(m))
		return h.Sum64()
	}
	slices.SortFunc(peers, func(a, b string) int {
		sa, sb := score(a), score(b)
		switch {
		case sa > sb:
			return -1
		case sa < sb:
			return 1
		}
		return strings.Compare(a, b)
	})
	return peers
}

// stage writes exactly size bytes of body to this node's staging area and
// to copies-1 peers at once, and returns the segment and the bytes' MD5.
// Nothing is left behind here on failure (a peer's orphan is swept by it).
func (n *Namespace) stage(ctx context.Context, body io.Reader, size int64) (regionstate.Segment, string, error) {
	if n.wb.Staging == nil {
		return regionstate.Segment{}, "", fmt.Errorf("%w: this node has no staging area", ErrStagingUnavailable)
	}
	if size < 0 {
		return regionstate.Segment{}, "", fmt.Errorf("%w: a write-back bucket reserves staging room for each write; send Content-Length (or x-amz-decoded-content-length with aws-chunked)", ErrLengthRequired)
	}
	id := newStageID()
	wctx, cancel := context.WithTimeout(ctx, n.wb.Wait)
	res, err := n.wb.Staging.Reserve(wctx, size)
	cancel()
	if err != nil {
		n.metrics.stagingWaits.Inc()
		return regionstate.Segment{}, "", fmt.Errorf("%w: %v", ErrStagingUnavailable, err)
	}
	want := n.copies()
	peers := n.healthyFirst(n.peersFor(id))
	first := peers[:min(len(peers), want-1)]

	// placement.Tee reads the body once and hands each chunk to every sink
	// at once: the MD5, this node's staging file and the first want-1
	// peers. A peer that fails is dropped (and replaced below); this node's
	// copy failing gives the write up, which cancelling sctx makes every
	// other sink see.
	sctx, cancelSinks := context.WithCancel(ctx)
	defer cancelSinks()
	h := md5.New()
	sinks := []func(io.Reader) error{
		func(r io.Reader) error {
			_, err := io.Copy(h, store.ContextReader(sctx, r))
			return err
		},
		func(r io.Reader) error {
			err := n.wb.Staging.Write(id, r, size, res)
			if err != nil {
				cancelSinks()
			}
			return err
		},
	}
	for _, p := range first {
		sinks = append(sinks, func(r io.Reader) error { return n.stageToPeer(sctx, p, id, r, size, n.wb.PeerStall) })
	}
	sinkErrs, bodyErr := placement.Tee(ctx, body, size, sinks, false, cancelSinks)
	fail := func(err error) (regionstate.Segment, string, error) {
		_ = n.wb.Staging.Remove(id)
		return regionstate.Segment{}, "", err
	}
	switch {
	case bodyErr != nil:
		return fail(bodyErr)
	case errors.Is(sinkErrs[1], syscall.ENOSPC):
		// The disk is fuller than staging's own accounting knows (another
		// program filled it): nothing is stored; the client retries,
		// through this node or another (S3: 503 SlowDown).
		return fail(fmt.Errorf("%w: this node's staging disk is full: %w", ErrStagingUnavailable, sinkErrs[1]))
	case sinkErrs[1] != nil:
		return fail(fmt.Errorf("stage locally: %w", sinkErrs[1]))
	case sinkErrs[0] != nil:
		return fail(sinkErrs[0])
	}
	nodes := []string{n.region.Self()}
	var peerErrs []error
	for i, p := range first {
		if err := sinkErrs[2+i]; err != nil {
			peerErrs = append(peerErrs, fmt.Errorf("%s: %w", p, err))
			continue
		}
		nodes = append(nodes, p)
	}
	// A peer that failed is replaced by the next one, copying the local
	// file. When every peer stalled, the region is more likely loaded than
	// frozen: the stalled ones get a second try with a bound ten times as
	// long before the write is refused.
	copyTo := func(p string, stall time.Duration) bool {
		f, _, err := n.wb.Staging.Open(id)
		if err != nil {
			peerErrs = append(peerErrs, err)
			return false
		}
		err = n.stageToPeer(ctx, p, id, f, size, stall)
		f.Close()
		if err != nil {
			peerErrs = append(peerErrs, fmt.Errorf("%s: %w", p, err))
			return false
		}
		nodes = append(nodes, p)
		return true
	}
	for _, p := range peers[min(len(peers), want-1):] {
		if len(nodes) >= want {
			break
		}
		copyTo(p, n.wb.PeerStall)
	}
	// The peer that stalled longest ago first: a frozen one stalls every
	// write that tries it, a loaded one now and then.
	var again []string
	for _, p := range peers {
		if !slices.Contains(nodes, p) && n.stalledRecently(p) {
			again = append(again, p)
		}
	}
	slices.SortStableFunc(again, func(a, b string) int { return n.lastStall(a).Compare(n.lastStall(b)) })
	for _, p := range again {
		if len(nodes) >= want || ctx.Err() != nil {
			break
		}
		copyTo(p, 10*n.wb.PeerStall)
	}
	if len(nodes) < want {
		n.log.Warn("write-back: not enough nodes took a copy", "want", want, "got", len(nodes), "errors", errors.Join(peerErrs...))
		return fail(fmt.Errorf("%w: %d of %d copies staged (%v)", ErrStagingUnavailable, len(nodes), want, errors.Join(peerErrs...)))
	}
	n.metrics.stagedBytes.Add(float64(size))
	return regionstate.Segment{ID: id, Size: size, Nodes: nodes}, hex.EncodeToString(h.Sum(nil)), nil
}

// stageToPeer copies exactly size bytes of r to peer's staging area as id,
// giving the peer up when it stops reading for PeerStall, or does not
// answer within the final bound once it has every byte: a frozen node
// must not hold a write-back write (the caller moves on to the next peer).
func (n *Namespace) stageToPeer(ctx context.Context, peer, id string, r io.Reader, size int64, stall time.Duration) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	pr := &progressReader{r: r, last: time.Now()}
	done := make(chan struct{})
	defer close(done)
	go func() {
		final := peerFinal(stall, size)
		t := time.NewTicker(stall / 4)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				read, last := pr.progress()
				switch {
				case read < size && time.Since(last) > stall:
					n.noteStall(peer)
					cancel(fmt.Errorf("peer %s read nothing of staged %s for %s (at byte %d of %d)", peer, id, stall, read, size))
					return
				case read >= size && time.Since(last) > final:
					n.noteStall(peer)
					cancel(fmt.Errorf("peer %s did not confirm staged %s within %s of its last byte", peer, id, final))
					return
				}
			}
		}
	}()
	err := n.region.StageTo(ctx, peer, id, pr, size)
	if cause := context.Cause(ctx); err != nil && cause != nil && !errors.Is(cause, context.Canceled) {
		n.log.Warn("write-back: a peer stalled taking a staged copy; trying the next one", "peer", peer, "error", cause)
		return cause
	}
	return err
}

// stallMemory is how long a peer that stalled is tried after the others:
// one frozen node costs one request the stall bound, not every request.
const stallMemory = 10 * time.Second

func (n *Namespace) noteStall(peer string) { n.stalls.Store(peer, time.Now()) }

// lastStall is when peer last stalled (zero: never).
func (n *Namespace) lastStall(peer string) time.Time {
	v, _ := n.stalls.Load(peer)
	t, _ := v.(time.Time)
	return t
}

// stalledRecently reports whether peer stalled within stallMemory.
func (n *Namespace) stalledRecently(peer string) bool {
	t := n.lastStall(peer)
	return !t.IsZero() && time.Since(t) < stallMemory
}

// healthyFirst orders nodes with those that stalled within stallMemory
// last, keeping the order otherwise.
func (n *Namespace) healthyFirst(nodes []string) []string {
	stalled := func(p string) int {
		if n.stalledRecently(p) {
			return 1
		}
		return 0
	}
	out := slices.Clone(nodes)
	slices.SortStableFunc(out, func(a, b string) int { return stalled(a) - stalled(b) })
	return out
}

// peerFinal is how long a peer that has read every byte of a staged copy
// of size bytes has to fsync it and answer: stall plus size at 50 MB/s. A
// small copy (the kernel's socket buffers take it whole, so a frozen peer
// "reads" it at once) waits for no more than the stall bound.
func peerFinal(stall time.Duration, size int64) time.Duration {
	return stall + time.Duration(size)*time.Second/50e6
}

// progressReader counts what a peer has read, and when it last read.
type progressReader struct {
	r    io.Reader
	mu   sync.Mutex
	n    int64
	last time.Time
}

func (p *progressReader) Read(b []byte) (int, error) {
	k, err := p.r.Read(b)
	if k > 0 {
		p.mu.Lock()
		p.n += int64(k)
		p.last = time.Now()
		p.mu.Unlock()
	}
	return k, err
}

func (p *progressReader) progress() (int64, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n, p.last
}

// unstage removes a segment's local copy after its write was not
// acknowledged (peers sweep theirs as unreferenced).
//
// A write whose commit failed with an unknown outcome (the leader changed
// while it was in flight, or the request ended while it waited for the
// commit) may have committed: its copy stays, and the sweeper removes it
// later if no entry refers to it.
func (n *Namespace) unstage(seg regionstate.Segment, err error) {
	if n.wb.Staging == nil || errors.Is(err, regionstate.ErrLeadershipLost) || errors.Is(err, ErrOutcomeUnknown) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return
	}
	_ = n.wb.Staging.Remove(seg.ID)
}

// writeBackPath stages a bucket's writes on the region's nodes and
// journals them through Raft; the drainer writes them to the store.
type writeBackPath struct{ b *Bucket }

// lookup answers from the journal: a version not drained yet, or a
// pending delete.
func (p writeBackPath) lookup(ctx context.Context, key string) (store.ObjectInfo, bool, error) {
	e, ok, err := p.b.journaled(ctx, key)
	switch {
	case err != nil:
		return store.ObjectInfo{}, true, err
	case ok && e.Tombstone:
		return store.ObjectInfo{}, true, fmt.Errorf("%w: %s (deleted; the delete is not drained yet)", store.ErrNotFound, key)
	case ok:
		return entryInfo(e), true, nil
	}
	return store.ObjectInfo{}, false, nil
}

// localFiler: none; the newest version may be in staging, not the store.
func (writeBackPath) localFiler() (store.LocalFiler, string) { return nil, "" }

func (p writeBackPath) list(ctx context.Context, opts store.ListOptions) iter.Seq2[store.Entry, error] {
	return p.b.listMerged(ctx, opts)
}

// put stages the body and journals it.
func (p writeBackPath) put(ctx context.Context, key string, body io.Reader, size int64, opts store.PutOptions) (store.ObjectInfo, error) {
	b, n := p.b, p.b.ns
	if err := n.writeBarrier(ctx); err != nil {
		return store.ObjectInfo{}, err
	}
	if b.versioned() {
		return b.stageVersion(ctx, key, body, size, opts)
	}
	if err := b.checkWriteConditions(ctx, key, opts); err != nil {
		return store.ObjectInfo{}, err
	}
	seg, etag, err := n.stage(ctx, body, size)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	meta := opts.Metadata
	if opts.LateChecksums != nil {
		meta.Checksums = store.MergeMaps(meta.Checksums, opts.LateChecksums())
	}
	e := regionstate.JournalEntry{Bucket: b.Name, Key: key, Store: b.store.Name(), StoreKey: b.prefix + key,
		Size: size, ETag: etag, Meta: toRaftMeta(meta, ""), Checksums: meta.Checksums,
		Segments: []regionstate.Segment{seg}, Created: n.now().UTC()}
	version, err := b.applyConditional(ctx, key, opts, func(seen uint64) (uint64, error) {
		return n.rs.ApplyIndex(ctx, regionstate.StageObject{Entry: e, IfUnchangedSince: seen})
	})
	if err != nil {
		n.unstage(seg, err)
		return store.ObjectInfo{}, err
	}
	b.invalidate(key)
	n.wakeDrainer()
	e.Version = version
	return entryInfo(e), nil
}

// conditionRetries bounds how often a conditional write-back write checks
// again after its key (or any drained entry) changed between its check
// and its commit.
const conditionRetries = 10

// applyConditional commits a write-back write with apply. An unconditional
// write is applied as it is (seen 0). A conditional one (If-None-Match,
// If-Match) is checked against the region's state at a log index, then
// applied with that index: Raft refuses it (ErrChanged) if the key may have
// changed since, and it is checked again. Check and commit are therefore
// one step, as in a store's conditional write: of two writers racing with
// If-None-Match: *, one gets 412.
func (b *Bucket) applyConditional(ctx context.Context, key string, opts store.PutOptions, apply func(seen uint64) (uint64, error)) (uint64, error) {
	if !opts.IfNoneMatch && opts.IfMatch == "" {
		return apply(0)
	}
	for try := 0; ; try++ {
		seen := max(b.ns.rs.State().AppliedIndex(), 1)
		if err := b.checkWriteConditions(ctx, key, opts); err != nil {
			return 0, err
		}
		idx, err := apply(seen)
		if !errors.Is(err, regionstate.ErrChanged) {
			return idx, err
		}
		if try == conditionRetries {
			return 0, fmt.Errorf("%w: %s changed under %d conditional write attempts", store.ErrThrottled, key, try+1)
		}
	}
}

// checkWriteConditions evaluates If-None-Match: * and If-Match for a
// write-back write against what the region sees now. On its own it is a
// check, not an atomic step with the write: applyConditional makes it one.
func (b *Bucket) checkWriteConditions(ctx context.Context, key string, opts store.PutOptions) error {
	if !opts.IfNoneMatch && opts.IfMatch == "" {
		return nil
	}
	cur, err := b.Stat(ctx, key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		if opts.IfMatch != "" {
			return store.ErrPreconditionFailed
		}
		return nil
	case err != nil:
		return err
	case opts.IfNoneMatch, opts.IfMatch != "" && opts.IfMatch != cur.Validator:
		return store.ErrPreconditionFailed
	}
	return nil
}

// delete journals a tombstone, which hides the key at once and deletes it
// from the store when drained.
func (p writeBackPath) delete(ctx context.Context, key string) error {
	b := p.b
	e := regionstate.JournalEntry{Bucket: b.Name, Key: key, Tombstone: true, Store: b.store.Name(),
		StoreKey: b.prefix + key, Created: b.ns.now().UTC()}
	if err := b.ns.rs.Apply(ctx, regionstate.StageObject{Entry: e}); err != nil {
		return err
	}
	b.invalidate(key)
	b.ns.wakeDrainer()
	return nil
}

func entryInfo(e regionstate.JournalEntry) store.ObjectInfo {
	meta := fromRaftMeta(e.Meta)
	meta.Checksums = e.Checksums
	return store.ObjectInfo{Key: e.Key, Size: e.Size, ModTime: e.Created, ETag: e.ETag,
		Validator: stagedValidator(e.Version), Metadata: meta}
}

// journaled returns the key's pending write-back entry, after making sure
// this node has applied every write acknowledged before the call.
func (b *Bucket) journaled(ctx context.Context, key string) (regionstate.JournalEntry, bool, error) {
	if err := b.ns.readBarrier(ctx); err != nil {
		return regionstate.JournalEntry{}, false, err
	}
	e, ok := b.ns.rs.State().JournalEntry(b.Name, key)
	if ok && !e.Tombstone {
		b.ns.recent.put(e)
	}
	return e, ok, nil
}

// recentStaged remembers the segments of staged versions recently looked
// up, so a GET whose entry is drained between its lookup and its read
// still reads the (not yet swept) staged copies.
type recentStaged struct {
	mu sync.Mutex
	m  map[string][]regionstate.Segment // bucket NUL key NUL version
}

const recentStagedMax = 10_000

func recentKey(bucket, key string, v store.Validator) string {
	return bucket + "\x00" + key + "\x00" + string(v)
}

func (r *recentStaged) put(e regionstate.JournalEntry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil || len(r.m) >= recentStagedMax {
		r.m = map[string][]regionstate.Segment{}
	}
	r.m[recentKey(e.Bucket, e.Key, stagedValidator(e.Version))] = e.Segments
}

func (r *recentStaged) get(bucket, key string, v store.Validator) ([]regionstate.Segment, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.m[recentKey(bucket, key, v)]
	return s, ok
}

// openStaged streams [off, off+n) of a staged object version. The reader
// never loses its source mid-stream: a segment whose copies are gone (the
// entry was drained, its staged files removed) or a holder that fails
// mid-read is continued from another holder, else from the store's
// drained copy at the same offset (openDrained).
func (b *Bucket) openStaged(ctx context.Context, info store.ObjectInfo, off, n int64) (io.ReadCloser, error) {
	if off < 0 || n < 0 || off+n > info.Size {
		return nil, fmt.Errorf("federation: range [%d, %d) outside a %d-byte object", off, off+n, info.Size)
	}
	fallback := func(off, n int64) (io.ReadCloser, error) { return b.openDrained(ctx, info, off, n) }
	jkey := b.journalKeyOf(info)
	segs, ok := b.ns.recent.get(b.Name, jkey, info.Validator)
	if !ok {
		e, found := b.ns.rs.State().JournalEntry(b.Name, jkey)
		if !found || stagedValidator(e.Version) != info.Validator {
			// Drained (or replaced) since the lookup: the store may hold
			// these very bytes now.
			return fallback(off, n)
		}
		segs = e.Segments
	}
	r := &segmentReader{ctx: ctx, ns: b.ns, segs: segs, off: off, left: n, fallback: fallback}
	if len(segs) > 1 {
		r.unhold = b.ns.holdSegments(ctx, segs)
	}
	return r, nil
}

// holdTTL is how long a staged read's hold on the parts it has not read
// yet lasts; it is renewed every third of it while the read goes on.
const holdTTL = 30 * time.Second

// holdSegments asks every holder of segs to keep them (staging.Area.Hold)
// while a read of them goes on: a newer write may supersede the version
// being read, and a write short of staging room would otherwise take its
// later parts, which are in no store. Holders that do not answer are
// passed by (the read still continues from another holder). The returned
// func ends the renewals; the holds then lapse within holdTTL.
func (n *Namespace) holdSegments(ctx context.Context, segs []regionstate.Segment) (stop func()) {
	byNode := map[string][]string{}
	for _, s := range segs {
		for _, node := range s.Nodes {
			byNode[node] = append(byNode[node], s.ID)
		}
	}
	hold := func() {
		for node, ids := range byNode {
			if node == n.region.Self() {
				if n.wb.Staging != nil {
					n.wb.Staging.Hold(ids, holdTTL)
				}
				continue
			}
			go func() {
				hctx, cancel := context.WithTimeout(ctx, n.wb.PeerStall)
				defer cancel()
				_ = n.region.HoldStaged(hctx, node, ids, holdTTL)
			}()
		}
	}
	hold()
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(holdTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				hold()
			}
		}
	}()
	return sync.OnceFunc(func() { close(done) })
}

// openDrained opens [off, off+n) of the staged version staged describes
// from wherever the bucket now has it, once that version was drained: the
// current object is the same bytes when its ETag (the content's MD5, or
// the multipart MD5 of MD5s) and size are the staged version's. Otherwise
// it returns store.ErrPreconditionFailed (the key was overwritten or
// deleted since: the client retries and reads the new version).
func (b *Bucket) openDrained(ctx context.Context, staged store.ObjectInfo, off, n int64) (io.ReadCloser, error) {
	b.invalidate(staged.Key) // what this node remembers may predate the drain
	var cur store.ObjectInfo
	var err error
	if staged.VersionID != "" && b.versioned() {
		// A version: the drain recorded its stored validator in the index.
		cur, err = b.StatVersion(ctx, staged.Key, staged.VersionID)
	} else {
		cur, err = b.Stat(ctx, staged.Key)
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, fmt.Errorf("%w: %s was deleted after its staged version was drained", store.ErrPreconditionFailed, staged.Key)
	case err != nil:
		return nil, err
	case cur.ETag != staged.ETag || cur.Size != staged.Size:
		return nil, fmt.Errorf("%w: the staged version of %s was replaced", store.ErrPreconditionFailed, staged.Key)
	case cur.Validator == staged.Validator:
		return nil, fmt.Errorf("%w: no copy of the staged version of %s is left", store.ErrPreconditionFailed, staged.Key)
	}
	return b.Open(ctx, cur, off, n)
}

// maxResumes bounds how often one staged read is continued from another
// source after a failure (each resume tries every holder, then the store).
const maxResumes = 4

// midStreamWait is how long a staged read that has sent bytes already
// keeps trying the holders (and the store) when none answers, before it
// gives up: a node cut off from every holder for a moment (a partition, a
// leader change) finishes its response late instead of cutting it short,
// which a client can only take as an error. The segments stay held for
// the read meanwhile (holdTTL is longer).
const midStreamWait = 20 * time.Second

// segmentReader reads a range across staged segments, opening each one
// lazily from this node's staging area or from another holder.
type segmentReader struct {
	ctx  context.Context
	ns   *Namespace
	segs []regionstate.Segment
	off  int64 // offset in the object of the next byte
	left int64
	cur  io.ReadCloser
	end  int64 // object offset where cur ends
	// fallback opens [off, off+n) from the store's drained copy.
	fallback func(off, n int64) (io.ReadCloser, error)
	resumes  int
	unhold   func() // ends the holds on the segments (nil: none)
	sent     bool   // bytes were returned: the response is under way
}

func (r *segmentReader) Read(p []byte) (int, error) {
	for {
		if r.left <= 0 {
			return 0, io.EOF
		}
		if r.cur == nil {
			if err := r.openWaiting(); err != nil {
				return 0, err
			}
		}
		k, err := r.cur.Read(p[:min(int64(len(p)), r.left, r.end-r.off)])
		r.off += int64(k)
		r.left -= int64(k)
		if k > 0 {
			r.sent = true
		}
		switch {
		case r.off == r.end:
			r.cur.Close()
			r.cur = nil
			if r.left == 0 {
				return k, io.EOF
			}
			return k, nil
		case err == nil:
			return k, nil
		}
		// The source failed or ended early: continue at r.off from
		// another copy.
		r.cur.Close()
		r.cur = nil
		if r.resumes == maxResumes {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return k, fmt.Errorf("federation: staged read at byte %d: %w", r.off, err)
		}
		r.resumes++
		r.ns.log.Warn("write-back: a staged read's source failed; continuing from another copy", "offset", r.off, "error", err)
		if k > 0 {
			return k, nil
		}
	}
}

// openWaiting is open, which, once the response is under way, keeps
// trying for midStreamWait (with backoff) before it gives up.
func (r *segmentReader) openWaiting() error {
	err := r.open()
	if err == nil || !r.sent {
		return err
	}
	deadline := time.Now().Add(midStreamWait)
	r.ns.log.Warn("write-back: no source of a staged read answers; waiting for one", "offset", r.off, "for", midStreamWait.String(), "error", err)
	for attempt := 1; time.Now().Before(deadline); attempt++ {
		if readBackoff.Sleep(r.ctx, attempt+3) != nil {
			return err
		}
		if err = r.open(); err == nil {
			return nil
		}
	}
	return err
}

// open opens the segment holding r.off at that offset, from this node or
// another holder, else the rest of the range from the store's copy.
func (r *segmentReader) open() error {
	var start int64
	for _, s := range r.segs {
		if r.off < start+s.Size {
			rel := r.off - start
			n := min(s.Size-rel, r.left)
			rc, err := r.ns.openSegment(r.ctx, s, rel, n)
			if err == nil {
				r.cur, r.end = rc, r.off+n
				return nil
			}
			if r.fallback == nil {
				return err
			}
			if ferr := r.fromStore(); ferr != nil {
				return fmt.Errorf("%w; from the store: %w", err, ferr)
			}
			return nil
		}
		start += s.Size
	}
	if r.segs == nil && r.fallback != nil { // reading from the store already
		return r.fromStore()
	}
	return io.ErrUnexpectedEOF
}

// fromStore opens the rest of the range from the store's drained copy;
// the reader stays on it to the end.
func (r *segmentReader) fromStore() error {
	rc, err := r.fallback(r.off, r.left)
	if err != nil {
		return err
	}
	r.cur, r.end, r.segs = rc, r.off+r.left, nil
	return nil
}

func (r *segmentReader) Close() error {
	if r.unhold != nil {
		r.unhold()
	}
	if r.cur != nil {
		return r.cur.Close()
	}
	return nil
}

// openSegment opens [off, off+n) of a staged segment: the local copy when
// this node holds one, else the first holder that answers.
func (n *Namespace) openSegment(ctx context.Context, s regionstate.Segment, off, length int64) (io.ReadCloser, error) {
	if n.wb.Staging != nil {
		if f, size, err := n.wb.Staging.Open(s.ID); err == nil {
			if size != s.Size {
				f.Close()
				return nil, fmt.Errorf("federation: staged file %s holds %d bytes, want %d", s.ID, size, s.Size)
			}
			return struct {
				io.Reader
				io.Closer
			}{io.NewSectionReader(f, off, length), f}, nil
		}
	}
	var errs []error
	for _, node := range n.healthyFirst(s.Nodes) {
		if node == n.region.Self() {
			continue
		}
		rc, err := n.readStagedBounded(ctx, node, s.ID, off, length)
		if err == nil {
			return rc, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", node, err))
	}
	// Typically the entry was drained and its copies removed between the
	// lookup and this read: the client retries and finds the stored object.
	return nil, fmt.Errorf("%w: no holder of staged segment %s has it any more: %w", store.ErrPreconditionFailed, s.ID, errors.Join(errs...))
}

// readStagedBounded opens [off, off+n) of id staged on node, giving the
// node up when it does not answer within PeerStall or a read of its body
// blocks for longer: a frozen holder must not hold a GET (openSegment
// tries the next holder; a reader mid-stream continues from another copy).
func (n *Namespace) readStagedBounded(ctx context.Context, node, id string, off, length int64) (io.ReadCloser, error) {
	stall := n.wb.PeerStall
	ctx, cancel := context.WithCancelCause(ctx)
	t := time.AfterFunc(stall, func() {
		n.noteStall(node)
		cancel(fmt.Errorf("peer %s stalled for %s serving staged %s", node, stall, id))
	})
	rc, err := n.region.ReadStaged(ctx, node, id, off, length)
	if !t.Stop() || err != nil {
		if err == nil {
			rc.Close()
		}
		if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
			err = c
		}
		cancel(nil)
		return nil, err
	}
	return &stallReader{rc: rc, t: t, stall: stall, cancel: cancel}, nil
}

// stallReader arms its timer around each Read: a Read blocked for stall
// cancels the request (the timer's function), so the Read fails.
type stallReader struct {
	rc     io.ReadCloser
	t      *time.Timer
	stall  time.Duration
	cancel context.CancelCauseFunc
}

func (s *stallReader) Read(p []byte) (int, error) {
	s.t.Reset(s.stall)
	k, err := s.rc.Read(p)
	s.t.Stop()
	return k, err
}

func (s *stallReader) Close() error {
	s.t.Stop()
	s.cancel(nil)
	return s.rc.Close()
}

// HoldStaged serves the internal API: keep ids staged here for d.
func (n *Namespace) HoldStaged(ids []string, d time.Duration) {
	if n.wb.Staging != nil {
		n.wb.Staging.Hold(ids, d)
	}
}

// OpenStaged serves the internal API: [off, off+n) of a file staged here.
func (n *Namespace) OpenStaged(id string, off, length int64) (io.ReadCloser, int64, error) {
	if n.wb.Staging == nil {
		return nil, 0, staging.ErrNotFound
	}
	f, size, err := n.wb.Staging.Open(id)
	if err != nil {
		return nil, 0, err
	}
	if length < 0 {
		length = size - off
	}
	if off < 0 || off+length > size {
		f.Close()
		return nil, 0, fmt.Errorf("federation: range [%d, %d) outside staged file of %d bytes", off, off+length, size)
	}
	return struct {
		io.Reader
		io.Closer
	}{io.NewSectionReader(f, off, length), f}, size, nil
}

// StageHere serves the internal API: a peer's copy of a write-back write,
// fsynced before it returns.
func (n *Namespace) StageHere(ctx context.Context, id string, body io.Reader, size int64) error {
	if n.wb.Staging == nil {
		return fmt.Errorf("%w: this node has no staging area", ErrStagingUnavailable)
	}
	wctx, cancel := context.WithTimeout(ctx, n.wb.Wait)
	res, err := n.wb.Staging.Reserve(wctx, size)
	cancel()
	if err != nil {
		n.metrics.stagingWaits.Inc()
		return fmt.Errorf("%w: %v", ErrStagingUnavailable, err)
	}
	return n.wb.Staging.Write(id, body, size, res)
}

// createUpload starts a write-back multipart upload: a session in Raft
// only; parts are staged like objects.
func (p writeBackPath) createUpload(ctx context.Context, u User, key string, meta store.Metadata, checksumAlg string) (Upload, error) {
	b, n := p.b, p.b.ns
	up := Upload{ID: newUploadID(), Bucket: b.Name, Key: key, Store: b.store.Name(),
		Initiator: u.Name, Created: n.now().UTC(), Meta: toRaftMeta(meta, checksumAlg), WriteBack: true}
	if err := n.applyAcked(ctx, regionstate.CreateUpload{Upload: up}); err != nil {
		return Upload{}, err
	}
	return up, nil
}

// uploadPart stages one part on Copies nodes and records it.
func (p writeBackPath) uploadPart(ctx context.Context, up Upload, number int, body io.Reader, size int64, checksums func() map[string]string) (store.PartInfo, error) {
	n := p.b.ns
	seg, etag, err := n.stage(ctx, body, size)
	if err != nil {
		return store.PartInfo{}, err
	}
	pi := store.PartInfo{Number: number, Size: size, ETag: etag, ModTime: n.now().UTC()}
	if checksums != nil {
		pi.Checksums = checksums()
	}
	err = n.applyAcked(ctx, regionstate.PutPart{UploadID: up.ID, Part: regionstate.Part{
		Number: number, Size: size, ETag: etag, Checksums: pi.Checksums, Modified: pi.ModTime, Staged: &seg}})
	if err != nil {
		n.unstage(seg, err)
		if errors.Is(err, regionstate.ErrNoSuchUpload) {
			return store.PartInfo{}, ErrNoSuchUpload
		}
		return store.PartInfo{}, err
	}
	return pi, nil
}

// complete journals a write-back multipart upload's object: its segments
// are the staged parts, so completion copies no bytes.
func (p writeBackPath) complete(ctx context.Context, up Upload, _ []store.PartInfo, refs []PartRef, ifNoneMatch bool) (store.ObjectInfo, error) {
	b, n := p.b, p.b.ns
	if err := n.writeBarrier(ctx); err != nil {
		return store.ObjectInfo{}, err
	}
	versioned := b.versioned()
	if !versioned {
		if err := b.checkWriteConditions(ctx, up.Key, store.PutOptions{IfNoneMatch: ifNoneMatch}); err != nil {
			return store.ObjectInfo{}, err
		}
	}
	sum := md5.New()
	var segs []regionstate.Segment
	var size int64
	for _, ref := range refs {
		p := up.Parts[ref.Number]
		if p.Staged == nil {
			return store.ObjectInfo{}, fmt.Errorf("%w: part %d has no staged copy", store.ErrInvalidPart, ref.Number)
		}
		raw, err := hex.DecodeString(p.ETag)
		if err != nil {
			return store.ObjectInfo{}, fmt.Errorf("%w: part %d has ETag %q", store.ErrInvalidPart, ref.Number, p.ETag)
		}
		sum.Write(raw)
		segs = append(segs, *p.Staged)
		size += p.Size
	}
	etag := fmt.Sprintf("%s-%d", hex.EncodeToString(sum.Sum(nil)), len(refs))
	e := regionstate.JournalEntry{Bucket: b.Name, Key: up.Key, Store: b.store.Name(), StoreKey: b.prefix + up.Key,
		Size: size, ETag: etag, Meta: up.Meta, Segments: segs, Created: n.now().UTC()}
	e.Meta.ChecksumAlgorithm = ""
	if versioned {
		return b.completeStagedVersion(ctx, up, e, ifNoneMatch)
	}
	idx, err := b.applyConditional(ctx, up.Key, store.PutOptions{IfNoneMatch: ifNoneMatch}, func(seen uint64) (uint64, error) {
		return n.rs.ApplyIndex(ctx, regionstate.CompleteUpload{UploadID: up.ID, Stage: &e, IfUnchangedSince: seen})
	})
	if errors.Is(err, regionstate.ErrNoSuchUpload) {
		return store.ObjectInfo{}, ErrNoSuchUpload
	}
	if err != nil {
		return store.ObjectInfo{}, err
	}
	b.invalidate(up.Key)
	n.wakeDrainer()
	e.Version = idx
	return entryInfo(e), nil
}

// abort forgets the session; staged parts are swept once no session
// refers to them.
func (p writeBackPath) abort(ctx context.Context, up Upload) error {
	return p.b.ns.dropUpload(ctx, up)
}

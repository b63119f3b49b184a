// Package placement holds the composite placements of a bucket, each of
// them a store.Store (and a store.Multiparter) built from other stores, so
// the namespace uses a replicated or erasure-coded bucket exactly like a
// single store, and both pass the store conformance suite (storetest).
//
// # Replicated
//
// NewReplicated keeps a full copy of every object in each store.
//
//   - Put reads the body once and tees it to every store at once through
//     pipes (memory: one 256 KiB chunk, whatever the size); it is
//     acknowledged when every store committed it. An error from any store
//     fails the Put and names the store: a store failing before the body's
//     end aborts the others, so nothing changes; one failing as it commits
//     may leave the new object in some stores only — a later Put, Delete
//     or Repair settles the key.
//   - Stat and ReadRange go to the first healthy store in read order
//     (WithRank: cheapest or nearest first, supplied by the caller; default
//     the listed order; stores that failed within the cooldown go last) and
//     fail over to the next on an error. A store answering ErrNotFound is
//     skipped too: an object missing from one copy but present in another
//     is a partial write (or a lost copy), and it is served from the copy
//     that has it; ErrNotFound means no reachable store has the key (so a
//     miss costs one call per store).
//   - List lists the first healthy store, resuming on the next one after the
//     last entry when a store fails part-way. Delete deletes in every
//     store.
//   - Validators: every copy of one write carries the write's version id
//     (Unix nanoseconds + 64 random bits) in its metadata, and the
//     Validator is "rv-<version>": the same whichever copy answers, changed
//     by every write. (A store's own validator, S3 ETag or GCS generation,
//     differs between copies and would change on failover.) A ReadRange
//     with ifMatch checks the copy's version, then reads with the store's
//     own validator, so the bytes read are the ones matched.
//   - Concurrent writers: after a Put the copies are checked, and copies of
//     an older version than the newest one are replaced by it
//     (compare-and-swap on each store's validator), so interleaved writers
//     leave one version everywhere. Conditional writes (IfNoneMatch,
//     IfMatch) are decided by the primary, the first listed store, and
//     copied from it to the others afterwards.
//   - Repair copies the newest version of every key to the stores that
//     miss it or hold an older one.
//
// # Erasure
//
// NewErasure cuts objects into segments (WithSegmentSize, default 32 MiB)
// and each segment into K data shards plus M parity shards with
// github.com/klauspost/reedsolomon; any K of a segment's K+M shards rebuild
// it. Shard j of segment i goes to store (r+i+j) mod N, where r depends on
// the key: several shards of a segment may share a store only when losing
// one store still leaves K (the constructor refuses other layouts). Total
// stored bytes are (K+M)/K times the object's, plus one manifest per store.
//
// The data shards are striped in blocks (WithBlockSize, default 1 MiB, B
// below): stripe r of a segment is block r of each of its K+M shards, and
// data shard j's block r holds the segment's bytes [(r*K+j)*B,
// (r*K+j+1)*B); parity block r is the Reed-Solomon parity of stripe r. The
// segment's last stripe holds the rem <= K*B bytes left in blocks of
// ceil(rem/K) bytes (zero padded at the end of the last data shards), so
// every shard of a segment of R stripes holds (R-1)*B + ceil(rem/K)
// bytes. A block is also the unit of checksums (one CRC32C per block of
// every shard), of reads and of rebuilds: a range is read as the stripes
// that hold it, each one either from the data blocks it needs or decoded
// from any K blocks of the stripe.
//
// On-store layout, in every store of the layout:
//
//	<key>                                          the manifest
//	.fedgate-ec/<kh>/<set>/<segment>.<shard>       shards
//	.fedgate-ec/<kh>/u-<upload>/{upload,p-NNNNN}   multipart records (first store only)
//
// <kh> is 32 hex digits of the key's SHA-256, so every shard name is short
// and fixed in length whatever the key; <set> is a fresh version-id-shaped
// id per write (or per uploaded part), so concurrent writers of one key
// never mix shards. User keys under ".fedgate-ec/" are refused with
// ErrInvalidKey, and List hides that prefix (restarting a listing after it
// rather than walking the shards). The manifest sits at the user's own key,
// so keys of any length work and List maps each listed manifest straight
// back to its object.
//
// The manifest is two JSON lines: a header (format, key hash, version id,
// size, S3 ETag, modification time, metadata, K, M, block size, the
// layout's store names) and a body: per segment its shard set, size,
// shard size, the store of each shard and the CRC32C of each block of each
// shard. Stat and List read only the header. A small object
// (WithInlineLimit, default 4 KiB) is kept inside the manifest instead of
// in shards, with its CRC32C: N copies of a few bytes cost less than K+M
// shards. The manifest object itself carries Content-Type
// application/vnd.fedgate.erasure-manifest+json and its version in the
// metadata name "fedgate-ec-version".
//
// Manifest format 2 is the striped layout. Format 1 (contiguous shards:
// shard j held bytes [j*S, (j+1)*S) of its segment) was never released;
// its manifests still parse, so Stat, List, Delete, overwrites and Repair
// (whose per-block checks and per-stripe rebuilds do not depend on how
// bytes map to shards) work on such objects, but reads refuse them with
// ErrCorrupt naming format 1.
//
//   - Put: segment by segment, read the body stripe by stripe into the
//     data shards (at most one segment: memory is segmentSize × (K+M)/K,
//     48 MiB for 4+2 at the default, plus one stripe being read, allocated
//     only as far as the body goes), encode, write the K+M shards in
//     parallel. When every shard is durable, install the manifest in every
//     store in listed order with a compare-and-swap per store. The first
//     store is the sequencer: the write's conditions are checked there and
//     the version id is chosen there, later than the one it replaces; the
//     other stores take a manifest only over an older version. So each
//     store's manifest only moves forward, the newest complete version wins
//     everywhere, and a writer that meets a newer version stops and removes
//     its own shards. Once every store has the new manifest, the replaced
//     version's shards are removed. A body or store failure before the
//     manifest is installed anywhere removes the new shards and leaves the
//     old object.
//   - Stat/ReadRange: the manifest comes from the first store in read order
//     with an intact copy (failing over on errors and on ErrNotFound, as
//     for Replicated). A range reads only the stripes that hold it. For
//     each stripe the reader prices two plans over the shards of the
//     segment that are not known bad: (a) read the needed data shards'
//     blocks directly, or (b) read the stripe's block from the K cheapest
//     shards and decode the needed data blocks; it takes (b) only when
//     strictly cheaper. Prices come from WithCosts (the price per byte of
//     reading from each store, asked once per read; without it every
//     store costs the same, so healthy reads are direct and nothing is
//     decoded). A store that failed within the cooldown counts as dearer
//     than any price, so it is read only when a stripe cannot be read
//     without it. Among shards of one price, data shards come first, then
//     the read order (WithRank, health), then the lower index. Every
//     block is checked against its CRC32C; a shard that fails to open or
//     read, or reads short, is dropped for the rest of the segment, one
//     whose block fails its checksum for that stripe (a second such block
//     drops it too), and the stripe is planned again. ErrUnrecoverable
//     when fewer than K shards of a stripe can be read. Each shard in use
//     has one ranged read open, over the stripes of the segment still
//     needed (opened when first needed, reopened at the right block after
//     a plan left it out). Memory: at most K+M blocks per reader.
//   - Validator: "ec-<version>", the version id in the manifest: the same
//     in every store's copy.
//   - Delete: remove every store's manifest, then — only when all are gone
//     — the shards they named (best effort; shards left behind are
//     unreachable garbage).
//   - Multipart: each part is encoded into a shard set of its own, recorded
//     on the first store; CompleteMultipart writes a manifest listing the
//     parts' segments in order, a metadata operation. A part encoded with
//     another layout than the placement's at completion (K, M or block
//     size changed) is refused with ErrInvalidPart.
//   - Repair(ctx, prefix, progress) re-creates missing or corrupt shards
//     (every shard is read and checked block by block, and every damaged
//     block is rebuilt from K intact blocks of its stripe, so damage in
//     more than M shards is repaired while no stripe lost more than M
//     blocks) and missing, damaged or outdated manifests for every object
//     under prefix. Memory: one segment's K+M shards.
//
// Writes need every store of the layout: while one is down, Puts fail
// naming it (a write-back bucket's drainer retries them), and reads carry
// on from the others.
package placement

"""A PyTorch IterableDataset that reads samples through fedgate's batch GET.

Each epoch the sample list is shuffled (deterministically: from seed, the
epoch and, without set_epoch, the DataLoader's per-epoch seed), cut into
batches of batch_size, and the batches are dealt round-robin to the
DataLoader's workers, so each sample is read exactly once per epoch. In each
worker a background thread requests the next batch while the current one is
consumed.
"""

import collections
import hashlib
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import botocore.exceptions
import torch
from torch.utils.data import IterableDataset, get_worker_info

from .batch import BatchClient, BatchEntryError, BatchError, BatchStreamError, make_entry

log = logging.getLogger("fedgate")

# HTTP statuses of a refused batch that are worth another try.
_RETRY_STATUS = frozenset((500, 502, 503, 504))


class FedgateBatchDataset(IterableDataset):
    """Yields (name, bytes) per sample, or transform(name, bytes).

    entries     samples: dicts {"bucket", "key", "range"?, "archpath"?},
                (bucket, key) pairs, or keys with bucket=
    client      a BatchClient, a boto3 S3 client or an endpoint URL
                (anything with a batch_get method of BatchClient's
                signature also works)
    batch_size  samples per batch request (64-512; docs/training.md)
    shuffle     a new order each epoch (else the entries' order, batches
                still dealt round-robin to the workers)
    seed        the shuffle's seed
    transform   called as transform(name, data) in the worker; its result
                is yielded
    prefetch_batches  batch requests in flight while a batch is consumed
                (1: the next one; 0: none, each batch is requested when
                the previous one is used up)
    on_error    "raise": a missing or refused sample fails the iteration
                with BatchError; "skip": it is left out, logged on the
                "fedgate" logger and counted in .skipped (per process)
    retries     how often a batch is requested again (for the samples not
                yet received) after a cut stream, a connection error or a
                5xx answer, with backoff from retry_backoff seconds

    The order of an epoch: call set_epoch(n) before each epoch (as with
    DistributedSampler) for an order fixed by (seed, n) whatever the
    number of workers. Without it, each iteration draws a new order: in
    the main process from seed and a count of iterations; in DataLoader
    workers from seed and the DataLoader's per-epoch base seed (the same
    in all workers of an epoch; reproducible with torch.manual_seed or
    DataLoader(generator=...)).
    """

    def __init__(self, entries, client, *, bucket=None, batch_size=256, shuffle=True, seed=0,
                 transform=None, prefetch_batches=1, on_error="raise", retries=2, retry_backoff=0.5):
        super().__init__()
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if prefetch_batches < 0:
            raise ValueError("prefetch_batches must be 0 or more")
        if on_error not in ("raise", "skip"):
            raise ValueError('on_error must be "raise" or "skip"')
        self.entries = [make_entry(e, bucket) for e in entries]
        if not hasattr(client, "batch_get"):
            client = BatchClient(client)
        self.client = client
        self.batch_size = int(batch_size)
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        self.transform = transform
        self.prefetch_batches = int(prefetch_batches)
        self.on_error = on_error
        self.retries = int(retries)
        self.retry_backoff = float(retry_backoff)
        self.skipped = 0
        self._epoch = None
        self._iters = 0

    def __len__(self):
        return len(self.entries)

    def set_epoch(self, epoch):
        """Fixes the next iteration's order to the one of (seed, epoch)."""
        self._epoch = int(epoch)
        self._iters = 0

    def epoch_key(self, worker_info=None):
        """The string the next iteration's order is drawn from."""
        if self._epoch is not None:
            base = "epoch=%d" % self._epoch
        elif worker_info is not None:
            base = "loader=%d" % (worker_info.seed - worker_info.id)
        else:
            base = "epoch=0"
        return "%d/%s/%d" % (self.seed, base, self._iters)

    def order(self, key):
        """The indexes of entries in the order of an epoch drawn from key."""
        n = len(self.entries)
        if not self.shuffle:
            return list(range(n))
        g = torch.Generator()
        g.manual_seed(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little") >> 1)
        return torch.randperm(n, generator=g).tolist()

    def plan(self, key, worker_id=0, num_workers=1):
        """The batches (lists of entry indexes) worker_id of num_workers
        reads in the epoch drawn from key: batch j of the epoch's order goes
        to worker j % num_workers."""
        order = self.order(key)
        b = self.batch_size
        nb = (len(order) + b - 1) // b
        return [order[j * b:(j + 1) * b] for j in range(worker_id, nb, num_workers)]

    def __iter__(self):
        info = get_worker_info()
        key = self.epoch_key(info)
        self._iters += 1
        wid, nw = (info.id, info.num_workers) if info is not None else (0, 1)
        for name, data in self._iter_batches(self.plan(key, wid, nw)):
            yield self.transform(name, data) if self.transform is not None else (name, data)

    def _iter_batches(self, batches):
        if not batches:
            return
        p = self.prefetch_batches
        if p == 0:
            for b in batches:
                yield from self._fetch(b, None)
            return
        stop = threading.Event()
        pool = ThreadPoolExecutor(max_workers=p, thread_name_prefix="fedgate-batch")
        pending = collections.deque()
        rest = iter(batches)

        def submit():
            b = next(rest, None)
            if b is not None:
                pending.append(pool.submit(self._fetch, b, stop))

        try:
            for _ in range(p):
                submit()
            while pending:
                items = pending.popleft().result()
                submit()  # in flight while this batch is consumed
                yield from items
        finally:
            stop.set()
            pool.shutdown(wait=False, cancel_futures=True)

    def _fetch(self, idxs, stop):
        """The (name, data) of one batch: requested again for the samples
        not yet received after a retryable failure; failed samples left
        out (on_error="skip") or raised."""
        want = [self.entries[i] for i in idxs]
        skip = self.on_error == "skip"
        got = []
        attempt = 0
        while True:
            try:
                for item in self.client.batch_get(want[len(got):], continue_on_error=skip):
                    got.append(item)
                    if stop is not None and stop.is_set():
                        return got  # nobody will read it
                break
            except (BatchStreamError, botocore.exceptions.HTTPClientError, botocore.exceptions.ConnectionError) as e:
                err = e
            except BatchError as e:
                if e.status not in _RETRY_STATUS:
                    raise
                err = e
            attempt += 1
            if attempt > self.retries:
                raise err
            log.warning("fedgate batch of %d samples: %s; requesting the %d not received again (try %d of %d)",
                        len(want), err, len(want) - len(got), attempt, self.retries)
            time.sleep(self.retry_backoff * 2 ** (attempt - 1))
        if skip:
            ok = []
            for name, data in got:
                if isinstance(data, BatchEntryError):
                    self.skipped += 1
                    log.warning("fedgate: skipping sample %s: %s", name, data)
                else:
                    ok.append((name, data))
            got = ok
        return got

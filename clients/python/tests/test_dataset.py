"""FedgateBatchDataset: the epoch's order and its split across workers, one
batch in flight, retries (against fakes); DataLoaders with 2 workers over a
real fedgate server reading every sample byte-identical."""

import collections
import hashlib
import json
import pickle
import random
import threading
import unittest
from concurrent.futures import ThreadPoolExecutor

import torch
from torch.utils.data import DataLoader, get_worker_info

from fedgate import BatchClient, BatchError, BatchStreamError
from fedgate.dataset import FedgateBatchDataset

from .support import TAR_END, FakeBatchServer, fedgate_env, new_bucket, s3_client, send_tar, sha, tar_entry

WAIT = 20  # seconds any wait on a condition may take before the test fails


class FakeWorkerInfo:
    def __init__(self, id, num_workers, base_seed):
        self.id, self.num_workers, self.seed = id, num_workers, base_seed + id


def keys(n):
    return [("bkt", "k%05d" % i) for i in range(n)]


class PlanTest(unittest.TestCase):
    def test_every_sample_once_per_epoch_whatever_the_workers(self):
        for n, bs, nw in [(500, 64, 2), (10, 3, 4), (7, 10, 3), (1, 1, 2), (0, 4, 2), (256, 256, 1)]:
            with self.subTest(n=n, batch_size=bs, workers=nw):
                ds = FedgateBatchDataset(keys(n), FakeClient(), batch_size=bs, seed=1)
                key = ds.epoch_key()
                plans = [ds.plan(key, w, nw) for w in range(nw)]
                got = [i for p in plans for b in p for i in b]
                self.assertEqual(sorted(got), list(range(n)))
                self.assertTrue(all(0 < len(b) <= bs for p in plans for b in p))
                # batch j of the epoch's order is worker j % nw's
                order = ds.order(key)
                for w, p in enumerate(plans):
                    self.assertEqual(p, [order[j * bs:(j + 1) * bs] for j in range(w, (n + bs - 1) // bs, nw)])

    def test_orders(self):
        ds = FedgateBatchDataset(keys(1000), FakeClient(), seed=5)
        ds.set_epoch(3)
        k3 = ds.epoch_key()
        self.assertEqual(ds.order(k3), ds.order(k3))
        self.assertNotEqual(ds.order(k3), list(range(1000)))
        ds.set_epoch(4)
        self.assertNotEqual(ds.order(ds.epoch_key()), ds.order(k3))
        other_seed = FedgateBatchDataset(keys(1000), FakeClient(), seed=6)
        other_seed.set_epoch(3)
        self.assertNotEqual(other_seed.order(other_seed.epoch_key()), ds.order(k3))
        plain = FedgateBatchDataset(keys(10), FakeClient(), shuffle=False)
        self.assertEqual(plain.order(plain.epoch_key()), list(range(10)))

    def test_epoch_keys(self):
        ds = FedgateBatchDataset(keys(10), FakeClient(), seed=5)
        # set_epoch: the same in the main process and in every worker of any loader
        ds.set_epoch(7)
        k = ds.epoch_key()
        self.assertEqual({ds.epoch_key(FakeWorkerInfo(w, 2, 1234)) for w in range(2)}, {k})
        self.assertEqual(ds.epoch_key(FakeWorkerInfo(0, 4, 99)), k)
        # without it: the main process counts its iterations ...
        ds2 = FedgateBatchDataset(keys(100), FakeClient(), seed=5, batch_size=7)
        first, second = list(ds2), list(ds2)
        self.assertNotEqual(first, second)
        self.assertEqual(sorted(first), sorted(second))
        # ... and workers (fresh copies each epoch) follow the loader's base seed
        fresh = FedgateBatchDataset(keys(10), FakeClient(), seed=5)
        a = {fresh.epoch_key(FakeWorkerInfo(w, 2, 1000)) for w in range(2)}
        b = {fresh.epoch_key(FakeWorkerInfo(w, 2, 2000)) for w in range(2)}
        self.assertEqual(len(a), 1)
        self.assertNotEqual(a, b)


class FakeClient:
    """batch_get over an in-memory store, recording when each batch's
    request starts and ends; a batch may be held until released."""

    def __init__(self):
        self.lock = threading.Lock()
        self.started = []
        self.events = collections.defaultdict(threading.Event)
        self.hold = {}

    def batch_get(self, entries, continue_on_error=False):
        first = entries[0]["key"]
        with self.lock:
            self.started.append(first)
        self.events["start " + first].set()
        if first in self.hold:
            assert self.hold[first].wait(WAIT), "held batch never released"
        try:
            for e in entries:
                yield e["bucket"] + "/" + e["key"], e["key"].encode()
            self.events["done " + first].set()
        finally:
            self.events["end " + first].set()  # done, or closed by the reader


class PrefetchTest(unittest.TestCase):
    def test_one_batch_in_flight_while_one_is_consumed(self):
        c = FakeClient()
        ds = FedgateBatchDataset(keys(12), c, batch_size=4, shuffle=False)
        it = iter(ds)
        self.assertEqual(next(it), ("bkt/k00000", b"k00000"))  # batch 0 is being consumed
        self.assertTrue(c.events["done k00004"].wait(WAIT), "batch 1 not requested while batch 0 is consumed")
        self.assertNotIn("k00008", c.started)  # only one batch ahead
        rest = [n for n, _ in it]
        self.assertEqual(rest, ["bkt/k%05d" % i for i in range(1, 12)])
        self.assertEqual(c.started, ["k00000", "k00004", "k00008"])

    def test_no_prefetch(self):
        c = FakeClient()
        ds = FedgateBatchDataset(keys(8), c, batch_size=4, shuffle=False, prefetch_batches=0)
        it = iter(ds)
        next(it)
        self.assertEqual(c.started, ["k00000"])
        for _ in range(3):
            next(it)
        self.assertEqual(c.started, ["k00000"])
        next(it)
        self.assertEqual(c.started, ["k00000", "k00004"])

    def test_consumer_stopping_early(self):
        c = FakeClient()
        c.hold["k00004"] = threading.Event()
        ds = FedgateBatchDataset(keys(12), c, batch_size=4, shuffle=False)
        it = iter(ds)
        next(it)
        self.assertTrue(c.events["start k00004"].wait(WAIT))
        it.close()  # the in-flight batch is abandoned, nothing more is requested
        c.hold["k00004"].set()
        self.assertTrue(c.events["end k00004"].wait(WAIT))
        self.assertFalse(c.events["done k00004"].is_set())  # its reader stopped after the first sample
        self.assertEqual(c.started, ["k00000", "k00004"])

    def test_transform(self):
        ds = FedgateBatchDataset(keys(5), FakeClient(), batch_size=2, shuffle=False, transform=lambda n, d: (len(n), d.upper()))
        self.assertEqual(list(ds), [(10, b"K%05d" % i) for i in range(5)])


ENTRIES4 = [("b1", "a"), ("b1", "b"), ("b1", "c"), ("b1", "d")]


class RetryTest(unittest.TestCase):
    def serve(self, respond):
        srv = FakeBatchServer(respond)
        self.addCleanup(srv.close)
        c = BatchClient(srv.url, credentials=("AK", "SK"))
        self.addCleanup(c.close)
        return srv, c

    def test_cut_stream_is_requested_again_for_the_rest(self):
        def respond(h, body, n):
            want = [e["key"] for e in json.loads(body)["entries"]]
            chunks = [tar_entry("b1/" + k, k.encode() * 1000) for k in want]
            if n == 0:
                send_tar(h, chunks[:2] + [chunks[2][:700]])  # cut inside the third
            else:
                send_tar(h, chunks + [TAR_END])
        srv, c = self.serve(respond)
        ds = FedgateBatchDataset(ENTRIES4, c, batch_size=4, shuffle=False, retry_backoff=0)
        with self.assertLogs("fedgate", "WARNING"):
            got = list(ds)
        self.assertEqual(got, [("b1/" + k, k.encode() * 1000) for _, k in ENTRIES4])
        self.assertEqual([[e["key"] for e in json.loads(r[2])["entries"]] for r in srv.requests], [["a", "b", "c", "d"], ["c", "d"]])

    def test_retries_run_out(self):
        srv, c = self.serve(lambda h, body, n: send_tar(h, [tar_entry("b1/a", b"x")]))
        ds = FedgateBatchDataset(ENTRIES4, c, batch_size=4, shuffle=False, retries=2, retry_backoff=0)
        with self.assertLogs("fedgate", "WARNING"), self.assertRaises(BatchStreamError):
            list(ds)
        self.assertEqual(len(srv.requests), 3)

    def test_refusals_are_not_retried(self):
        def respond(h, body, n):
            x = b"<Error><Code>NoSuchKey</Code><Message>The specified key does not exist (batch entry 2: b1/c)</Message></Error>"
            h.send_response(404)
            h.send_header("Content-Length", str(len(x)))
            h.end_headers()
            h.wfile.write(x)
        srv, c = self.serve(respond)
        ds = FedgateBatchDataset(ENTRIES4, c, batch_size=4, shuffle=False, retry_backoff=0)
        with self.assertRaises(BatchError) as cm:
            list(ds)
        self.assertEqual((cm.exception.code, cm.exception.entry, cm.exception.name), ("NoSuchKey", 2, "b1/c"))
        self.assertEqual(len(srv.requests), 1)


def sample_digest(name, data):
    """A transform: what the main process checks, and which worker read it."""
    return name, hashlib.sha256(data).hexdigest(), get_worker_info().id


class FedgateDataLoaderTest(unittest.TestCase):
    N = 500

    @classmethod
    def setUpClass(cls):
        cls.ep, ak, sk = fedgate_env()
        cls.s3 = s3_client(cls.ep, ak, sk)
        cls.bucket = new_bucket(cls.s3, "pyds")
        rnd = random.Random(11)
        blobs = {"train/%05d.bin" % i: rnd.randbytes(rnd.randint(1024, 200 * 1024)) for i in range(cls.N)}
        with ThreadPoolExecutor(8) as ex:
            list(ex.map(lambda kv: cls.s3.put_object(Bucket=cls.bucket, Key=kv[0], Body=kv[1]), blobs.items()))
        cls.sums = {cls.bucket + "/" + k: sha(v) for k, v in blobs.items()}
        cls.keys = sorted(blobs)
        cls.client = BatchClient(cls.s3)
        cls.addClassCleanup(cls.client.close)

    def dataset(self, keys=None, **kw):
        kw.setdefault("batch_size", 64)
        return FedgateBatchDataset(self.keys if keys is None else keys, self.client, bucket=self.bucket, **kw)

    def test_two_workers_read_every_sample_once_byte_identical(self):
        ds = self.dataset(transform=sample_digest, seed=42)
        got = list(DataLoader(ds, batch_size=None, num_workers=2))
        counts = collections.Counter(n for n, _, _ in got)
        self.assertEqual(len(got), self.N)
        self.assertEqual(set(counts), set(self.sums))
        self.assertEqual(set(counts.values()), {1})
        bad = [n for n, s, _ in got if s != self.sums[n]]
        self.assertEqual(bad, [])
        by_worker = collections.Counter(w for _, _, w in got)
        self.assertEqual(by_worker, {0: 256, 1: 244})  # batches of 64: 0, 2, 4, 6 and 1, 3, 5, 7 (52)
        self.assertNotEqual([n for n, _, _ in got], sorted(counts))  # shuffled

    def test_epoch_orders_through_a_dataloader(self):
        ds = self.dataset(self.keys[:120], batch_size=16, seed=3)

        def epoch(e=None, **kw):
            if e is not None:
                ds.set_epoch(e)
            return [n for n, _ in DataLoader(ds, batch_size=None, num_workers=2, **kw)]
        a, a2, b = epoch(3), epoch(3), epoch(4)
        self.assertEqual(a, a2)
        self.assertNotEqual(a, b)
        self.assertEqual(sorted(a), sorted(b))
        self.assertEqual(len(set(a)), 120)
        # without set_epoch the loader's per-epoch seed draws a new order:
        ds2 = self.dataset(self.keys[:120], batch_size=16, seed=3)
        runs = [[n for n, _ in DataLoader(ds2, batch_size=None, num_workers=2)] for _ in range(2)]
        self.assertNotEqual(runs[0], runs[1])
        self.assertEqual(sorted(runs[0]), sorted(runs[1]))
        # ... reproducibly when torch is seeded
        seeded = []
        for _ in range(2):
            torch.manual_seed(9)
            seeded.append([n for n, _ in DataLoader(ds2, batch_size=None, num_workers=2)])
        self.assertEqual(seeded[0], seeded[1])
        # persistent workers keep their copies: a new order each epoch all the same
        dl = DataLoader(ds2, batch_size=None, num_workers=2, persistent_workers=True)
        p1, p2 = [n for n, _ in dl], [n for n, _ in dl]
        self.assertNotEqual(p1, p2)
        self.assertEqual(sorted(p1), sorted(runs[0]))
        self.assertEqual(sorted(p2), sorted(runs[0]))

    def test_loader_batches(self):
        ds = self.dataset(self.keys[:100], batch_size=32, transform=lambda n, d: torch.tensor(len(d)))
        batches = list(DataLoader(ds, batch_size=10, num_workers=2))
        # each worker collates its own samples: worker 0 reads 64 (6 x 10 + 4), worker 1 36 (3 x 10 + 6)
        self.assertEqual(sorted(len(b) for b in batches), [4, 6] + [10] * 9)
        self.assertEqual(sum(int(b.sum()) for b in batches),
                         sum(self.s3.head_object(Bucket=self.bucket, Key=k)["ContentLength"] for k in self.keys[:100]))

    def test_missing_samples(self):
        want = self.keys[:30] + ["missing/1", "missing/2"]
        skip = self.dataset(want, batch_size=8, on_error="skip")
        with self.assertLogs("fedgate", "WARNING") as logs:
            got = list(skip)
        self.assertEqual(sorted(n for n, _ in got), sorted(self.bucket + "/" + k for k in self.keys[:30]))
        self.assertEqual(skip.skipped, 2)
        self.assertEqual(sum("missing/" in m and "NoSuchKey" in m for m in logs.output), 2)
        for n, d in got:
            self.assertEqual(sha(d), self.sums[n])
        strict = self.dataset(want, batch_size=8, on_error="raise")
        with self.assertRaisesRegex(BatchError, "NoSuchKey"):
            list(DataLoader(strict, batch_size=None, num_workers=2))

    def test_spawned_workers(self):
        # spawn pickles the dataset (and its client) into each worker
        ds = self.dataset(self.keys[:20], batch_size=4, transform=sample_digest)
        self.assertIsInstance(pickle.loads(pickle.dumps(ds)), FedgateBatchDataset)
        got = list(DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context="spawn"))
        self.assertEqual(sorted(n for n, _, _ in got), sorted(self.bucket + "/" + k for k in self.keys[:20]))
        self.assertEqual([n for n, s, _ in got if s != self.sums[n]], [])
        self.assertEqual({w for _, _, w in got}, {0, 1})


if __name__ == "__main__":
    unittest.main()

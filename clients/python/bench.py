#!/usr/bin/env python3
"""Samples per second of a PyTorch DataLoader over fedgate: FedgateBatchDataset
(batch GETs) against a dataset doing one boto3 get_object per sample, the same
samples, the same workers, warm cache, in alternating rounds.

    # a fedgate this script starts (fresh data dir, deleted afterwards):
    /usr/bin/python3 clients/python/bench.py --fedgate bin/fedgate
    # or an endpoint that is running (keys from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY):
    /usr/bin/python3 clients/python/bench.py --endpoint http://127.0.0.1:9000

Each sample is read in a worker (its length checked) and its name and length
go to the main process, so the numbers are the loading, not the IPC of the
bytes (the same for both). A third line is batch_get alone in this process,
no DataLoader: what the client reads when nothing else is in the way.
"""

import argparse
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import boto3  # noqa: E402
import botocore.config  # noqa: E402
import torch  # noqa: E402
from torch.utils.data import DataLoader, IterableDataset, get_worker_info  # noqa: E402

from fedgate import BatchClient  # noqa: E402
from fedgate.dataset import FedgateBatchDataset  # noqa: E402


class Boto3PerSampleDataset(IterableDataset):
    """The baseline: keys shuffled per epoch, split across workers, one
    get_object per sample, one boto3 client per worker."""

    def __init__(self, keys, bucket, endpoint, ak, sk, seed=0):
        self.keys, self.bucket, self.endpoint, self.ak, self.sk, self.seed = keys, bucket, endpoint, ak, sk, seed
        self.epoch = 0

    def __iter__(self):
        info = get_worker_info()
        wid, nw = (info.id, info.num_workers) if info else (0, 1)
        s3 = boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1", aws_access_key_id=self.ak,
                          aws_secret_access_key=self.sk, config=botocore.config.Config(max_pool_connections=4))
        order = list(self.keys)
        random.Random("%d/%d" % (self.seed, self.epoch)).shuffle(order)
        for k in order[wid::nw]:
            yield self.bucket + "/" + k, len(s3.get_object(Bucket=self.bucket, Key=k)["Body"].read())


def start_fedgate(binary, work):
    ak, sk = "BENCHACCESSKEY000001", "bench-secret-key-0123456789abcdef"
    out = open(os.path.join(work, "out"), "w+")
    p = subprocess.Popen([binary, "server", "--listen", "127.0.0.1:0", "--data-dir", os.path.join(work, "data"),
                          "--log-level", "warn", "--access-key", ak, "--secret-key", sk],
                         stdout=out, stderr=open(os.path.join(work, "log"), "w"))
    deadline = time.time() + 60
    while time.time() < deadline:
        if p.poll() is not None:
            sys.exit("fedgate exited: " + open(os.path.join(work, "log")).read()[-2000:])
        out.seek(0)
        m = re.search(r"S3 endpoint (http://\S+)", out.read())
        if m:
            try:
                urllib.request.urlopen(m.group(1) + "/_fedgate/readyz", timeout=2).read()
                return p, m.group(1), ak, sk
            except OSError:
                pass
        time.sleep(0.1)
    p.kill()
    sys.exit("fedgate did not become ready")


def run(ds, workers, n, total_bytes):
    t = time.perf_counter()
    got = nbytes = 0
    for _, length in DataLoader(ds, batch_size=None, num_workers=workers):
        got += 1
        nbytes += length
    dt = time.perf_counter() - t
    if got != n or nbytes != total_bytes:
        sys.exit("read %d samples, %d bytes; want %d, %d" % (got, nbytes, n, total_bytes))
    return n / dt


def run_batch_get(bc, keys, bucket, batch_size, total_bytes):
    """The client alone: batch_get in this process, no DataLoader."""
    t = time.perf_counter()
    nbytes = 0
    for i in range(0, len(keys), batch_size):
        for _, data in bc.batch_get(keys[i:i + batch_size], bucket=bucket):
            nbytes += len(data)
    dt = time.perf_counter() - t
    if nbytes != total_bytes:
        sys.exit("batch_get read %d bytes, want %d" % (nbytes, total_bytes))
    return len(keys) / dt


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--fedgate", help="a fedgate binary to start for the run")
    g.add_argument("--endpoint", help="a running fedgate's S3 endpoint")
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--size", type=int, default=128 * 1024, help="bytes per sample")
    ap.add_argument("--workers", type=int, default=2, help="DataLoader workers")
    ap.add_argument("--batch-size", type=int, default=256, help="samples per batch GET")
    ap.add_argument("--rounds", type=int, default=3, help="timed epochs of each, alternating")
    a = ap.parse_args()

    work = tempfile.mkdtemp(prefix="fedgate-pybench-")
    proc = None
    try:
        if a.fedgate:
            proc, ep, ak, sk = start_fedgate(a.fedgate, work)
        else:
            ep, ak, sk = a.endpoint, os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]
        s3 = boto3.client("s3", endpoint_url=ep, region_name="us-east-1", aws_access_key_id=ak, aws_secret_access_key=sk,
                          config=botocore.config.Config(max_pool_connections=16))
        bucket = "pybench-%d" % int(time.time())
        s3.create_bucket(Bucket=bucket)
        keys = ["s/%06d.bin" % i for i in range(a.samples)]
        payload = os.urandom(a.size)
        with ThreadPoolExecutor(8) as ex:
            list(ex.map(lambda k: s3.put_object(Bucket=bucket, Key=k, Body=payload), keys))
        total = a.samples * a.size
        fg = FedgateBatchDataset(keys, BatchClient(ep, credentials=(ak, sk)), bucket=bucket,
                                 batch_size=a.batch_size, transform=lambda n, d: (n, len(d)))
        b3 = Boto3PerSampleDataset(keys, bucket, ep, ak, sk)
        print("endpoint %s, %d samples x %d bytes, %d DataLoader workers, batches of %d, torch %s, %d CPUs"
              % (ep, a.samples, a.size, a.workers, a.batch_size, torch.__version__, os.cpu_count()))
        run(fg, a.workers, a.samples, total)  # warm-up: caches filled, both paths exercised once
        run(b3, a.workers, a.samples, total)
        res = {"fedgate batch dataset": [], "boto3 get_object per sample": [], "batch_get, 1 process": []}
        bc = BatchClient(ep, credentials=(ak, sk))
        for r in range(a.rounds):
            fg.set_epoch(r + 1)
            b3.epoch = r + 1
            res["fedgate batch dataset"].append(run(fg, a.workers, a.samples, total))
            res["boto3 get_object per sample"].append(run(b3, a.workers, a.samples, total))
            res["batch_get, 1 process"].append(run_batch_get(bc, keys, bucket, a.batch_size, total))
        bc.close()
        for name, v in res.items():
            print("%-28s %8.0f samples/s  %7.1f MB/s  (rounds: %s)" % (
                name, statistics.median(v), statistics.median(v) * a.size / 1e6, ", ".join("%.0f" % x for x in v)))
        print("ratio (median): %.2fx" % (statistics.median(res["fedgate batch dataset"]) / statistics.median(res["boto3 get_object per sample"])))
        for i in range(0, len(keys), 1000):
            s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys[i:i + 1000]]})
        s3.delete_bucket(Bucket=bucket)
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

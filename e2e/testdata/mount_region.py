"""Training-code readers and writers for e2e/mount_region_test.go, run by
/usr/bin/python3 (Debian's python3-torch and numpy) against `fedgate mount`
directories. Each mode prints what it saw; the Go test compares it with
what it uploaded.

  imagefolder ROOT          an ImageFolder-like Dataset in a DataLoader with
                            4 workers; one JSON line per sample
  save PATH                 torch.save of a ~1 GiB state dict (seeded) into
                            PATH; an OSError exits 3 naming its errno
  load PATH                 torch.load of PATH, every tensor compared with
                            the seeded state dict regenerated
  npy PATH                  np.load(PATH, mmap_mode="r"); one JSON line
  read PATH PAUSE_AT        read PATH in 1 MiB calls, one line per call;
                            after PAUSE_AT bytes print "paused" and wait for
                            a line on stdin; an OSError ends the read with
                            "error ERRNO NAME OFFSET SECONDS"
"""

import errno
import hashlib
import json
import os
import sys
import time


def imagefolder(root):
    import torch
    from torch.utils.data import DataLoader, Dataset, get_worker_info

    class Folder(Dataset):
        """torchvision's ImageFolder without decoding: classes are the sorted
        directories of root, samples every file under each (os.walk)."""

        def __init__(self, root):
            self.root = root
            self.classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
            self.samples = []
            for i, c in enumerate(self.classes):
                for dirpath, dirnames, files in os.walk(os.path.join(root, c)):
                    dirnames.sort()
                    for f in sorted(files):
                        self.samples.append((os.path.join(dirpath, f), i))

        def __len__(self):
            return len(self.samples)

        def __getitem__(self, i):
            path, target = self.samples[i]
            with open(path, "rb") as f:
                data = f.read()
            w = get_worker_info()
            return (os.path.relpath(path, self.root), hashlib.sha256(data).hexdigest(), len(data), target,
                    -1 if w is None else w.id)

    ds = Folder(root)
    g = torch.Generator().manual_seed(36)
    loader = DataLoader(ds, batch_size=32, shuffle=True, num_workers=4, generator=g)
    print(json.dumps({"classes": ds.classes, "samples": len(ds)}), flush=True)
    for paths, hashes, sizes, targets, workers in loader:
        for p, h, n, c, w in zip(paths, hashes, sizes.tolist(), targets.tolist(), workers.tolist()):
            print(json.dumps({"path": p, "sha256": h, "size": n, "class": c, "worker": w}))
    sys.stdout.flush()


def state_dict():
    """~1 GiB, the same every call: 16 float32 matrices of 64 MiB and a few
    small tensors of other dtypes."""
    import torch

    g = torch.Generator().manual_seed(36)
    sd = {}
    for i in range(16):
        sd["layers.%d.weight" % i] = torch.randn(4096, 4096, generator=g)
    sd["embed.index"] = torch.randint(0, 1 << 40, (100003,), generator=g, dtype=torch.int64)
    sd["norm.half"] = torch.randn(12345, generator=g).half()
    sd["empty"] = torch.zeros(0)
    return sd


def save(path):
    import torch

    sd = state_dict()
    n = sum(t.numel() * t.element_size() for t in sd.values())
    start = time.monotonic()
    try:
        with open(path, "wb") as f:
            torch.save(sd, f)
    except OSError as e:
        print("save %s: errno %d %s: %s" % (path, e.errno, errno.errorcode.get(e.errno, "?"), e), file=sys.stderr)
        sys.exit(3)
    print(json.dumps({"tensor_bytes": n, "file_bytes": os.stat(path).st_size,
                      "seconds": round(time.monotonic() - start, 2)}))


def load(path):
    import torch

    start = time.monotonic()
    got = torch.load(path, map_location="cpu")
    secs = round(time.monotonic() - start, 2)
    want = state_dict()
    bad = []
    if sorted(got) != sorted(want):
        bad.append("keys %s, want %s" % (sorted(got), sorted(want)))
    for k, w in want.items():
        t = got.get(k)
        if t is None or t.dtype != w.dtype or t.shape != w.shape or not torch.equal(t, w):
            bad.append("%s differs" % k)
    print(json.dumps({"tensors": len(got), "bad": bad, "seconds": secs}))
    sys.exit(1 if bad else 0)


def npy(path):
    import numpy as np

    a = np.load(path, mmap_mode="r")
    # A read from the middle first, as a random-access reader would.
    mid = hashlib.sha256(np.ascontiguousarray(a[a.shape[0] // 2]).tobytes()).hexdigest()
    print(json.dumps({"memmap": isinstance(a, np.memmap), "dtype": a.dtype.str, "shape": list(a.shape),
                      "sha256": hashlib.sha256(memoryview(a).cast("B")).hexdigest(), "mid_row_sha256": mid}))


def read(path, pause_at):
    buf = bytearray(1 << 20)
    off = 0
    paused = False
    with open(path, "rb", buffering=0) as f:
        while True:
            if not paused and off >= pause_at:
                print("paused %d" % off, flush=True)
                sys.stdin.readline()
                paused = True
            start = time.monotonic()
            try:
                n = f.readinto(buf)
            except OSError as e:
                print("error %d %s %d %.3f" % (e.errno, errno.errorcode.get(e.errno, "?"), off, time.monotonic() - start),
                      flush=True)
                return
            if n == 0:
                print("eof %d" % off, flush=True)
                return
            print("chunk %d %d %s %.3f" % (off, n, hashlib.sha256(buf[:n]).hexdigest(), time.monotonic() - start),
                  flush=True)
            off += n


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "imagefolder":
        imagefolder(sys.argv[2])
    elif mode == "save":
        save(sys.argv[2])
    elif mode == "load":
        load(sys.argv[2])
    elif mode == "npy":
        npy(sys.argv[2])
    elif mode == "read":
        read(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit("unknown mode " + mode)

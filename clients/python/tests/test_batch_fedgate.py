"""batch_get against a real fedgate server (scripts/test-python-client.sh
starts one): order, ranges, tar and zip shard members, errors with and
without continue_on_error, credentials."""

import io
import random
import unittest
import zipfile

import boto3
import botocore.session

import fedgate
from fedgate import BatchClient, BatchEntryError, BatchError

from .support import fedgate_env, new_bucket, s3_client, sha, tar_bytes


class FedgateBatchTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ep, cls.ak, cls.sk = fedgate_env()
        cls.s3 = s3_client(cls.ep, cls.ak, cls.sk)
        cls.client = BatchClient(cls.s3)
        cls.addClassCleanup(cls.client.close)
        cls.bucket = new_bucket(cls.s3)
        cls.bucket2 = new_bucket(cls.s3)
        rnd = random.Random(7)
        cls.objects = {}
        sizes = [0, 1, 511, 512, 513, 4096, 300_000, 3 * 1024 * 1024] + [rnd.randint(1, 64 * 1024) for _ in range(24)]
        for i, n in enumerate(sizes):
            cls.put(cls.bucket, "obj/%03d.bin" % i, rnd.randbytes(n))
        # a key longer than ustar's name field, and one not ASCII: PAX headers in the answer
        cls.put(cls.bucket, "deep/" + "d" * 150 + "/long-name.bin", b"long " * 100)
        cls.put(cls.bucket, "unicodé/ключ 1.txt", "héllo".encode())
        cls.put(cls.bucket2, "other.bin", b"from the second bucket")

    @classmethod
    def put(cls, bucket, key, data):
        cls.s3.put_object(Bucket=bucket, Key=key, Body=data)
        cls.objects[(bucket, key)] = data

    def fetch(self, entries, **kw):
        return list(self.client.batch_get(entries, **kw))

    def test_order_duplicates_and_bytes(self):
        keys = list(self.objects)
        want = keys + random.Random(1).sample(keys, 10)  # duplicates too
        random.Random(2).shuffle(want)
        got = self.fetch(want)
        self.assertEqual([n for n, _ in got], ["%s/%s" % k for k in want])
        for (n, data), k in zip(got, want):
            self.assertEqual(sha(data), sha(self.objects[k]), n)

    def test_entry_forms(self):
        b = self.bucket
        got = self.fetch(["obj/001.bin", {"key": "obj/002.bin"}, (self.bucket2, "other.bin"),
                          {"bucket": b, "key": "obj/003.bin"}], bucket=b)
        self.assertEqual([d for _, d in got], [self.objects[(b, "obj/001.bin")], self.objects[(b, "obj/002.bin")],
                                               b"from the second bucket", self.objects[(b, "obj/003.bin")]])

    def test_ranges(self):
        key = "obj/006.bin"
        data = self.objects[(self.bucket, key)]
        ranges = {"bytes=0-9": data[:10], "bytes=1000-": data[1000:], "bytes=-7": data[-7:],
                  "bytes=299990-999999999": data[299990:], "bytes=5-5": data[5:6]}
        got = self.fetch([{"key": key, "range": r} for r in ranges], bucket=self.bucket)
        self.assertEqual([d for _, d in got], list(ranges.values()))
        with self.assertRaises(BatchError) as cm:
            self.fetch([{"key": key, "range": "bytes=400000-"}], bucket=self.bucket)
        self.assertEqual((cm.exception.code, cm.exception.status, cm.exception.entry), ("InvalidRange", 416, 0))

    def test_tar_shard_members(self):
        rnd = random.Random(3)
        members = [("./000001.jpg", rnd.randbytes(20_000)), ("000001.cls", b"7"),
                   ("dir/sub/000002.jpg", rnd.randbytes(70_000)), ("n" * 120 + ".txt", b"long member name"),
                   ("000003.jpg", b"")]
        self.s3.put_object(Bucket=self.bucket, Key="shards/train-0000.tar", Body=tar_bytes(members))
        want = [{"key": "shards/train-0000.tar", "archpath": m} for m, _ in reversed(members)]
        want.append({"key": "shards/train-0000.tar", "archpath": "000001.jpg", "range": "bytes=100-199"})
        want.append({"key": "shards/train-0000.tar", "archpath": "./dir/sub/000002.jpg", "range": "bytes=-10"})
        got = self.fetch(want, bucket=self.bucket)
        base = self.bucket + "/shards/train-0000.tar/"
        self.assertEqual([n for n, _ in got], [base + m.removeprefix("./") for m, _ in reversed(members)]
                         + [base + "000001.jpg", base + "dir/sub/000002.jpg"])
        self.assertEqual([d for _, d in got], [d for _, d in reversed(members)] + [members[0][1][100:200], members[2][1][-10:]])

    def test_zip_shard_members(self):
        rnd = random.Random(4)
        buf = io.BytesIO()
        deflated = b"compressible " * 5000
        stored = rnd.randbytes(30_000)
        with zipfile.ZipFile(buf, "w") as z:
            z.writestr(zipfile.ZipInfo("a/deflated.txt"), deflated, compress_type=zipfile.ZIP_DEFLATED)
            z.writestr(zipfile.ZipInfo("stored.bin"), stored, compress_type=zipfile.ZIP_STORED)
        self.s3.put_object(Bucket=self.bucket, Key="shards/s.zip", Body=buf.getvalue())
        got = self.fetch([{"key": "shards/s.zip", "archpath": "stored.bin"}, {"key": "shards/s.zip", "archpath": "a/deflated.txt"}],
                         bucket=self.bucket)
        self.assertEqual([d for _, d in got], [stored, deflated])

    def test_refused_entry_without_continue_on_error(self):
        got = []
        with self.assertRaises(BatchError) as cm:
            for item in self.client.batch_get(["obj/001.bin", "obj/002.bin", "no/such/key"], bucket=self.bucket):
                got.append(item)
        self.assertEqual(got, [])  # refused before the first byte
        e = cm.exception
        self.assertEqual((e.code, e.status, e.entry, e.name), ("NoSuchKey", 404, 2, self.bucket + "/no/such/key"))
        self.assertNotIsInstance(e, BatchEntryError)
        with self.assertRaises(BatchError) as cm:
            self.fetch([{"key": "obj/001.bin", "archpath": "x"}], bucket=self.bucket)  # not a shard
        self.assertEqual((cm.exception.code, cm.exception.status), ("InvalidRequest", 400))

    def test_continue_on_error(self):
        self.s3.put_object(Bucket=self.bucket, Key="shards/c.tar", Body=tar_bytes([("m1", b"member one")]))
        want = [(self.bucket, "obj/001.bin"), (self.bucket, "missing"), (self.bucket, "obj/002.bin"),
                {"bucket": self.bucket, "key": "shards/c.tar", "archpath": "m2"},
                {"bucket": self.bucket, "key": "shards/c.tar", "archpath": "m1"},
                ("no-such-bucket-py", "x"), (self.bucket, "obj/003.bin")]
        got = self.fetch(want, continue_on_error=True)
        self.assertEqual([n for n, _ in got], [fedgate.entry_name(fedgate.make_entry(e)) for e in want])
        errs = {i: d for i, (_, d) in enumerate(got) if isinstance(d, BatchEntryError)}
        self.assertEqual({i: (e.code, e.entry) for i, e in errs.items()},
                         {1: ("NoSuchKey", 1), 3: ("NoSuchKey", 3), 5: ("NoSuchBucket", 5)})
        self.assertIn('no member "m2"', errs[3].message)
        self.assertEqual(got[0][1], self.objects[(self.bucket, "obj/001.bin")])
        self.assertEqual(got[2][1], self.objects[(self.bucket, "obj/002.bin")])
        self.assertEqual(got[4][1], b"member one")
        self.assertEqual(got[6][1], self.objects[(self.bucket, "obj/003.bin")])

    def test_bad_credentials(self):
        cases = {"SignatureDoesNotMatch": (self.ak, self.sk + "x"), "InvalidAccessKeyId": ("AKNOSUCHKEY000000000", self.sk)}
        for code, creds in cases.items():
            with self.subTest(code):
                c = BatchClient(self.ep, credentials=creds)
                self.addCleanup(c.close)
                with self.assertRaises(BatchError) as cm:
                    list(c.batch_get(["obj/001.bin"], bucket=self.bucket))
                self.assertEqual((cm.exception.code, cm.exception.status), (code, 403))

    def test_ways_to_make_a_client(self):
        want = [(self.bucket, "obj/004.bin")]
        data = self.objects[want[0]]
        bs = boto3.Session(aws_access_key_id=self.ak, aws_secret_access_key=self.sk, region_name="us-east-1")
        bc = botocore.session.Session()
        bc.set_credentials(self.ak, self.sk)
        clients = {
            "boto3 client": BatchClient(self.s3),
            "boto3 session": BatchClient(self.ep, session=bs),
            "botocore session": BatchClient(self.ep, session=bc),
            "keys": BatchClient(self.ep + "/", credentials=(self.ak, self.sk)),
        }
        for what, c in clients.items():
            self.addCleanup(c.close)
            with self.subTest(what):
                self.assertEqual(c.region, "us-east-1")
                self.assertEqual(list(c.batch_get(want)), [("%s/%s" % want[0], data)])
        self.assertEqual(list(fedgate.batch_get(self.s3, want)), [("%s/%s" % want[0], data)])
        self.assertEqual(list(fedgate.batch_get(self.ep, want, session=bs)), [("%s/%s" % want[0], data)])


if __name__ == "__main__":
    unittest.main()

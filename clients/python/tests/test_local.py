"""open_local against the fedgate server of scripts/test-python-client.sh,
started with --local-socket (FEDGATE_TEST_SOCKET)."""

import os
import tempfile
import unittest

import fedgate

from .support import fedgate_env, new_bucket, s3_client


def socket_path():
    p = os.environ.get("FEDGATE_TEST_SOCKET")
    if not p:
        msg = "FEDGATE_TEST_SOCKET not set: run scripts/test-python-client.sh bin/fedgate"
        if os.environ.get("CI"):
            raise AssertionError(msg)
        raise unittest.SkipTest(msg)
    return p


class OpenLocalTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ep, cls.ak, cls.sk = fedgate_env()
        cls.sock = socket_path()
        cls.s3 = s3_client(cls.ep, cls.ak, cls.sk)
        cls.bucket = new_bucket(cls.s3, "local")
        cls.data = os.urandom(9 << 20) + b"tail"
        cls.s3.put_object(Bucket=cls.bucket, Key="dir/obj.bin", Body=cls.data)

    def open(self, **kw):
        args = dict(socket_path=self.sock, endpoint_url=self.ep, credentials=(self.ak, self.sk))
        args.update(kw)
        return fedgate.open_local(self.bucket, "dir/obj.bin", **args)

    def check_reads(self, f):
        self.assertEqual(f.size, len(self.data))
        self.assertEqual(f.read(), self.data)
        for off, n in [(0, 1), (4095, 2), (8 << 20, 5000), (len(self.data) - 3, 10)]:
            f.seek(off)
            self.assertEqual(f.read(n), self.data[off:off + n])
        f.seek(-4, os.SEEK_END)
        self.assertEqual(f.read(), b"tail")
        self.assertEqual(f.read(10), b"")

    def test_short_circuit(self):
        with self.open() as f:
            self.assertTrue(f.local)
            self.assertTrue(f.extents)
            self.check_reads(f)

    def test_buffered_reader(self):
        import io
        with io.BufferedReader(self.open()) as f:
            self.assertEqual(f.read(), self.data)

    def test_fallback_without_socket(self):
        with tempfile.TemporaryDirectory() as d:
            with self.open(socket_path=os.path.join(d, "absent.sock")) as f:
                self.assertFalse(f.local)
                self.check_reads(f)

    def test_errors_do_not_fall_back(self):
        with self.assertRaises(fedgate.LocalReadError) as cm:
            fedgate.open_local(self.bucket, "dir/missing", socket_path=self.sock, credentials=(self.ak, self.sk))
        self.assertEqual(cm.exception.code, "NoSuchKey")
        with self.assertRaises(fedgate.LocalReadError) as cm:
            fedgate.open_local(self.bucket, "dir/obj.bin", socket_path=self.sock,
                               credentials=(self.ak, "wrong-secret-key-00000000000000000000"))
        self.assertEqual(cm.exception.code, "SignatureDoesNotMatch")


if __name__ == "__main__":
    unittest.main()

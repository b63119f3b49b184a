"""Entry names the server escapes so that no tar name climbs out of the
folder an answer is extracted into (gateway.BatchEntryName in Go)."""

import unittest

from fedgate import BatchEntryError
from fedgate.batch import BatchClient, entry_name, tar_name

from .support import TAR_END, FakeBatchServer, send_tar, tar_entry

ERR_XML = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InvalidArgument</Code>'
           b"<Message>Object key contains a '.' or '..' path segment.</Message>"
           b"<Resource>/shared/../../../x.txt</Resource><RequestId>req-1</RequestId></Error>")


class TarNameTest(unittest.TestCase):
    def test_same_names_as_the_server(self):
        # The cases of TestBatchTarNamesStayLocal (gateway/batchnames_test.go).
        for name, want in [
            ("shared/../../../x.txt", "shared/%2E%2E/%2E%2E/%2E%2E/x.txt"),
            ("ds/./a", "ds/%2E/a"),
            ("ds/a/.", "ds/a/%2E"),
            ("../x", "%2E%2E/x"),
            ("//etc/passwd", "%2F/etc/passwd"),
            ("/etc/passwd", "%2Fetc/passwd"),
            ("ds//abs/key", "ds//abs/key"),
            ("ds//../../x", "ds//%2E%2E/%2E%2E/x"),
            ("ds/a\0/../../../x", "ds/a%00/%2E%2E/%2E%2E/%2E%2E/x"),
            ("ds/..\\..\\win.txt", "ds/%2E%2E\\%2E%2E\\win.txt"),
            ("ds/a\\.\\b", "ds/a\\%2E\\b"),
            ("ds/.../x..y/.z", "ds/.../x..y/.z"),
            ("ds/plain/x.jpg", "ds/plain/x.jpg"),
        ]:
            self.assertEqual(tar_name(name), want, name)
        self.assertEqual(entry_name({"bucket": "ds", "key": "s.tar", "archpath": "./x/y.jpg"}), "ds/s.tar/x/y.jpg")

    def test_escaped_error_entry_matches(self):
        srv = FakeBatchServer(lambda h, body, n: send_tar(h, [
            tar_entry("__errors__/shared/%2E%2E/%2E%2E/%2E%2E/x.txt", ERR_XML), tar_entry("shared/a", b"A"), TAR_END]))
        self.addCleanup(srv.close)
        c = BatchClient(srv.url, credentials=("AKFAKE", "secret"))
        self.addCleanup(c.close)
        got = list(c.batch_get([("shared", "../../../x.txt"), ("shared", "a")], continue_on_error=True))
        self.assertEqual(got[0][0], "shared/%2E%2E/%2E%2E/%2E%2E/x.txt")
        self.assertIsInstance(got[0][1], BatchEntryError)
        self.assertEqual(got[0][1].code, "InvalidArgument")
        self.assertEqual(got[1], ("shared/a", b"A"))


if __name__ == "__main__":
    unittest.main()

"""batch_get against a fake server: the request on the wire, and answers
fedgate sends only on failures (an error trailer, a cut connection) or never
(a wrong name, not a tar)."""

import hashlib
import json
import threading
import unittest

import fedgate
from fedgate import BatchClient, BatchEntryError, BatchError, BatchStreamError

from .support import TAR_END, FakeBatchServer, send_tar, tar_entry

ENTRIES = [("b1", "a"), ("b1", "b"), ("b2", "c")]
DATA = {"b1/a": b"A" * 700, "b1/b": b"B" * 5000, "b2/c": b"C" * 3}
ERR_XML = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InternalError</Code>'
           b"<Message>We encountered an internal error. Please try again.</Message>"
           b"<Resource>/b1/b</Resource><RequestId>req-1</RequestId></Error>")


class StreamTest(unittest.TestCase):
    def serve(self, respond):
        srv = FakeBatchServer(respond)
        self.addCleanup(srv.close)
        c = BatchClient(srv.url, credentials=("AKFAKE", "secret"), region="eu-test-1")
        self.addCleanup(c.close)
        return srv, c

    def test_request_on_the_wire(self):
        srv, c = self.serve(lambda h, body, n: send_tar(h, [tar_entry(k, v) for k, v in DATA.items()] + [TAR_END]))
        got = list(c.batch_get(ENTRIES))
        self.assertEqual([(n, d) for n, d in got], list(DATA.items()))
        path, headers, body, _ = srv.requests[0]
        self.assertEqual(path, "/_fedgate/v1/batch")
        self.assertEqual(json.loads(body), {"entries": [{"bucket": b, "key": k} for b, k in ENTRIES], "continue_on_error": False})
        self.assertEqual(headers["Content-Type"], "application/json")
        self.assertEqual(headers["X-Amz-Content-SHA256"], hashlib.sha256(body).hexdigest())
        auth = headers["Authorization"]
        self.assertTrue(auth.startswith("AWS4-HMAC-SHA256 Credential=AKFAKE/"), auth)
        self.assertIn("/eu-test-1/s3/aws4_request", auth)
        self.assertIn("x-amz-content-sha256", auth)  # a signed header

    def test_entry_fields_and_archpath_names(self):
        want = [{"bucket": "b1", "key": "s.tar", "archpath": "./x/y.jpg", "range": "bytes=0-1"},
                {"bucket": "b1", "key": "s.zip", "archpath": "/z"}]
        srv, c = self.serve(lambda h, body, n: send_tar(h, [tar_entry("b1/s.tar/x/y.jpg", b"ab"), tar_entry("b1/s.zip/z", b"z"), TAR_END]))
        self.assertEqual(list(c.batch_get(want, continue_on_error=True)), [("b1/s.tar/x/y.jpg", b"ab"), ("b1/s.zip/z", b"z")])
        self.assertEqual(json.loads(srv.requests[0][2]), {"entries": want, "continue_on_error": True})
        with self.assertRaises(ValueError):
            list(c.batch_get([{"bucket": "b1", "key": "k", "archive": "x"}]))  # a typo is refused here
        with self.assertRaises(ValueError):
            list(c.batch_get(["k"]))  # a plain key needs bucket=
        self.assertEqual(len(srv.requests), 1)

    def test_error_trailer_raises_after_the_entries_before_it(self):
        _, c = self.serve(lambda h, body, n: send_tar(h, [tar_entry("b1/a", DATA["b1/a"]), tar_entry("__errors__/b1/b", ERR_XML), TAR_END]))
        got = []
        with self.assertRaises(BatchEntryError) as cm:
            for item in c.batch_get(ENTRIES):
                got.append(item)
        self.assertEqual(got, [("b1/a", DATA["b1/a"])])
        e = cm.exception
        self.assertEqual((e.code, e.entry, e.name, e.status, e.request_id), ("InternalError", 1, "b1/b", None, "req-1"))
        self.assertIn("internal error", str(e))

    def test_continue_on_error_yields_the_error_in_place(self):
        _, c = self.serve(lambda h, body, n: send_tar(h, [tar_entry("b1/a", DATA["b1/a"]), tar_entry("__errors__/b1/b", ERR_XML),
                                                          tar_entry("b2/c", DATA["b2/c"]), TAR_END]))
        got = list(c.batch_get(ENTRIES, continue_on_error=True))
        self.assertEqual([n for n, _ in got], ["b1/a", "b1/b", "b2/c"])
        self.assertEqual(got[0][1], DATA["b1/a"])
        self.assertIsInstance(got[1][1], BatchEntryError)
        self.assertEqual((got[1][1].code, got[1][1].entry), ("InternalError", 1))
        self.assertEqual(got[2][1], DATA["b2/c"])

    def test_stream_ending_between_entries_raises(self):
        # No error entry, no end-of-archive blocks: tarfile alone would end
        # quietly; the client counts the entries.
        _, c = self.serve(lambda h, body, n: send_tar(h, [tar_entry("b1/a", DATA["b1/a"])]))
        got = []
        with self.assertRaises(BatchStreamError) as cm:
            for item in c.batch_get(ENTRIES):
                got.append(item)
        self.assertEqual(got, [("b1/a", DATA["b1/a"])])
        self.assertEqual(cm.exception.received, 1)

    def test_connection_cut_inside_an_entry_raises(self):
        whole = tar_entry("b1/a", DATA["b1/a"]) + tar_entry("b1/b", DATA["b1/b"]) + tar_entry("b2/c", DATA["b2/c"]) + TAR_END
        cut = len(tar_entry("b1/a", DATA["b1/a"])) + 512 + 1000  # into b's data
        for chunked_length in (len(whole), None):
            _, c = self.serve(lambda h, body, n: send_tar(h, [whole[:cut]], length=chunked_length))
            got = []
            with self.assertRaises(BatchStreamError) as cm:
                for item in c.batch_get(ENTRIES):
                    got.append(item)
            self.assertEqual(got, [("b1/a", DATA["b1/a"])])
            self.assertEqual(cm.exception.received, 1)

    def test_answers_that_do_not_match_the_request(self):
        cases = {
            "other name": [tar_entry("b1/a", b"x"), tar_entry("b1/zzz", b"y"), TAR_END],
            "more entries": [tar_entry(k, v) for k, v in DATA.items()] + [tar_entry("b9/extra", b"!"), TAR_END],
        }
        for what, chunks in cases.items():
            with self.subTest(what):
                _, c = self.serve(lambda h, body, n, chunks=chunks: send_tar(h, chunks))
                with self.assertRaises(BatchStreamError):
                    list(c.batch_get(ENTRIES))

    def test_not_a_tar(self):
        def respond(h, body, n):
            h.send_response(200)
            h.send_header("Content-Type", "text/html")
            h.send_header("Content-Length", "5")
            h.end_headers()
            h.wfile.write(b"hello")
        _, c = self.serve(respond)
        with self.assertRaisesRegex(BatchStreamError, "not a tar"):
            list(c.batch_get(ENTRIES))

    def test_error_answers(self):
        def respond(h, body, n):
            xml = n == 0
            h.send_response(503 if xml else 502)
            payload = (b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message><RequestId>r9</RequestId></Error>"
                       if xml else b"<html>bad gateway</html>")
            h.send_header("Content-Length", str(len(payload)))
            h.end_headers()
            h.wfile.write(payload)
        _, c = self.serve(respond)
        with self.assertRaises(BatchError) as cm:
            list(c.batch_get(ENTRIES))
        self.assertEqual((cm.exception.code, cm.exception.status, cm.exception.request_id), ("SlowDown", 503, "r9"))
        with self.assertRaises(BatchError) as cm:
            list(c.batch_get(ENTRIES))
        self.assertEqual((cm.exception.code, cm.exception.status), ("HTTP502", 502))
        self.assertIn("bad gateway", cm.exception.message)

    def test_entries_are_yielded_as_they_arrive(self):
        # The server sends entry 0, then waits until the client has it: a
        # client that buffered the answer (or waited to fill a read buffer)
        # would not have it, and the server gives up after 20 s.
        got_first = threading.Event()
        waited = []
        big = b"x" * 200_000

        def respond(h, body, n):
            send_tar(h, [tar_entry("b1/a", big), lambda: waited.append(got_first.wait(20)),
                         tar_entry("b1/b", DATA["b1/b"]), tar_entry("b2/c", DATA["b2/c"]), TAR_END])
        _, c = self.serve(respond)
        it = c.batch_get(ENTRIES)
        self.assertEqual(next(it), ("b1/a", big))
        got_first.set()
        self.assertEqual([n for n, _ in it], ["b1/b", "b2/c"])
        self.assertEqual(waited, [True])

    def test_connection_is_reused(self):
        whole = b"".join(tar_entry(k, v) for k, v in DATA.items()) + TAR_END
        srv, c = self.serve(lambda h, body, n: send_tar(h, [whole], length=len(whole), close=False))
        for _ in range(3):
            self.assertEqual(list(c.batch_get(ENTRIES)), list(DATA.items()))
        self.assertEqual(len(srv.requests), 3)
        self.assertEqual(len({r[3] for r in srv.requests}), 1, srv.requests)  # one client port: one connection

    def test_module_function_and_errors_pickle(self):
        import pickle
        _, c = self.serve(lambda h, body, n: send_tar(h, [tar_entry(k, v) for k, v in DATA.items()] + [TAR_END]))
        with BatchClient(c.endpoint_url, credentials=("AK", "SK")) as c1:
            self.assertEqual(list(fedgate.batch_get(c1, ENTRIES)), list(DATA.items()))
        got = list(fedgate.batch_get(c.endpoint_url, ENTRIES, credentials=("AK", "SK")))
        self.assertEqual(got, list(DATA.items()))
        e = pickle.loads(pickle.dumps(BatchEntryError("m", code="NoSuchKey", entry=3, name="b/k")))
        self.assertEqual((type(e), e.code, e.entry, e.name), (BatchEntryError, "NoSuchKey", 3, "b/k"))
        # DataLoader workers re-raise an exception as its type with one message argument.
        self.assertEqual(str(BatchError("just a message")), "Error: just a message")
        c2 = pickle.loads(pickle.dumps(c))
        self.assertEqual(list(c2.batch_get(ENTRIES)), list(DATA.items()))


if __name__ == "__main__":
    unittest.main()

"""What the tests share: the fedgate server scripts/test-python-client.sh
started (FEDGATE_TEST_ENDPOINT, _ACCESS_KEY, _SECRET_KEY), a fake batch
server for answers fedgate cannot be made to send on demand, and tar bytes."""

import hashlib
import http.server
import io
import os
import tarfile
import threading
import unittest
import uuid


def fedgate_env():
    """(endpoint, access key, secret key) of the test server; without one
    the test fails in CI (CI set) and skips elsewhere."""
    ep = os.environ.get("FEDGATE_TEST_ENDPOINT")
    if not ep:
        msg = "FEDGATE_TEST_ENDPOINT not set: run scripts/test-python-client.sh bin/fedgate"
        if os.environ.get("CI"):
            raise AssertionError(msg)
        raise unittest.SkipTest(msg)
    return ep, os.environ["FEDGATE_TEST_ACCESS_KEY"], os.environ["FEDGATE_TEST_SECRET_KEY"]


def s3_client(ep, ak, sk):
    import boto3
    return boto3.client("s3", endpoint_url=ep, region_name="us-east-1",
                        aws_access_key_id=ak, aws_secret_access_key=sk)


def new_bucket(s3, prefix="py"):
    name = "%s-%s" % (prefix, uuid.uuid4().hex[:12])
    s3.create_bucket(Bucket=name)
    return name


def sha(data):
    return hashlib.sha256(data).hexdigest()


def tar_entry(name, data):
    """One tar entry (header, data, padding) as fedgate writes it: a regular
    file, PAX headers where ustar does not fit."""
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    ti.mode = 0o644
    out = ti.tobuf(format=tarfile.PAX_FORMAT) + data
    return out + b"\0" * (-len(out) % 512)


TAR_END = b"\0" * 1024


def tar_bytes(members):
    """A whole tar file of (name, data) members, as a shard."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for name, data in members:
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


class FakeBatchServer:
    """An HTTP server on 127.0.0.1:0 that answers every POST with
    respond(handler, body, n) (n counts requests from 0) and records the
    request paths, headers, bodies and client ports. It does not check signatures."""

    def __init__(self, respond):
        self.respond = respond
        self.requests = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                n = len(outer.requests)
                outer.requests.append((self.path, dict(self.headers), body, self.client_address[1]))
                outer.respond(self, body, n)

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def send_tar(h, chunks, length=None, close=True):
    """Answers 200 with a tar body written in chunks (bytes, or callables
    run between writes); length sets Content-Length (else the body ends
    when the connection closes)."""
    h.send_response(200)
    h.send_header("Content-Type", "application/x-tar")
    if length is not None:
        h.send_header("Content-Length", str(length))
    if close:
        h.send_header("Connection", "close")
    h.end_headers()
    for c in chunks:
        if callable(c):
            c()
        else:
            h.wfile.write(c)
            h.wfile.flush()
    h.close_connection = close

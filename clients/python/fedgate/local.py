"""Short-circuit reads through a fedgate node's Unix socket (--local-socket).

    f = fedgate.open_local("datasets", "train/shard-0001.tar",
                           socket_path="/run/fedgate/s3.sock",
                           endpoint_url="http://127.0.0.1:9000",
                           credentials=(access_key, secret_key))
    with f:
        f.seek(1 << 20)
        data = f.read(4096)

The node answers POST /_fedgate/v1/local (signed with SigV4 like any S3
request) with the open files that hold the object's bytes, passed with
SCM_RIGHTS, and the extents (descriptor, file offset, length, object offset)
that cover it; the file object reads them with os.pread, without a copy
through the gateway. When the socket is absent, or the node cannot hand the
bytes over as files (NotLocal), it reads with signed HTTP range GETs instead
(endpoint_url, or S3 over the socket). docs/gpu-data-path.md has the protocol.
"""

import http.client
import io
import json
import os
import socket
import urllib.parse
import xml.etree.ElementTree as ET

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest

from .batch import DEFAULT_REGION, FedgateError, _freeze

LOCAL_PATH = "/_fedgate/v1/local"
_MAX_FDS = 1024


class LocalReadError(FedgateError):
    """An S3 error answer (code, status) to a short-circuit read or its
    HTTP fallback."""

    def __init__(self, message, code=None, status=None):
        super().__init__(message)
        self.message, self.code, self.status = message, code, status

    def __str__(self):
        return "%s (HTTP %s): %s" % (self.code, self.status, self.message)


def _error(status, body):
    code, message = None, body.decode("utf-8", "replace").strip()
    try:
        root = ET.fromstring(body)
        code = root.findtext("Code")
        message = root.findtext("Message") or message
    except ET.ParseError:
        pass
    return LocalReadError(message, code=code or "HTTP%d" % status, status=status)


def _credentials(credentials, session):
    if credentials is None:
        import botocore.session
        credentials = (session or botocore.session.get_session()).get_credentials()
        if credentials is None:
            raise ValueError("no AWS credentials found; pass credentials=(access_key, secret_key)")
    return _freeze(credentials)


def _signed(method, url, creds, region, body=b"", headers=None):
    req = AWSRequest(method=method, url=url, data=body, headers=dict(headers or {}))
    S3SigV4Auth(creds.get_frozen_credentials(), "s3", region).add_auth(req)
    return req.prepare()


class _UnixHTTPConnection(http.client.HTTPConnection):
    """http.client over a Unix socket (the fallback when no endpoint_url)."""

    def __init__(self, path, timeout=60):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self._path)
        self.sock = s


def open_local(bucket, key, *, socket_path=None, endpoint_url=None, credentials=None,
               session=None, region=None, timeout=60):
    """Opens bucket/key for reading: by short-circuit when socket_path is a
    fedgate node's socket that can hand the bytes over as files, else over
    HTTP (endpoint_url, or S3 over the socket). Returns a read-only, seekable
    binary file object; its .local says which path it took. Errors other
    than a missing socket or NotLocal (AccessDenied, NoSuchKey, ...) raise
    LocalReadError."""
    creds = _credentials(credentials, session)
    region = region or DEFAULT_REGION
    if socket_path and os.path.exists(socket_path):
        try:
            return _LocalFile(bucket, key, socket_path, creds, region, timeout)
        except LocalReadError as e:
            if e.code != "NotLocal":
                raise
        except (FileNotFoundError, ConnectionRefusedError):
            pass
    if not endpoint_url and not socket_path:
        raise ValueError("open_local needs socket_path or endpoint_url")
    return _HTTPFile(bucket, key, endpoint_url, socket_path, creds, region, timeout)


class _LocalFile(io.RawIOBase):
    """The received descriptors and extents, read with os.pread."""

    local = True

    def __init__(self, bucket, key, socket_path, creds, region, timeout):
        super().__init__()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._fds = []
        try:
            self._sock.settimeout(timeout)
            self._sock.connect(socket_path)
            body = json.dumps({"bucket": bucket, "key": key, "offset": 0}).encode()
            req = _signed("POST", "http://localhost" + LOCAL_PATH, creds, region, body,
                          {"Content-Type": "application/json"})
            head = "POST %s HTTP/1.1\r\n" % LOCAL_PATH
            hdrs = dict(req.headers)
            hdrs["Host"] = "localhost"
            hdrs["Content-Length"] = str(len(body))
            head += "".join("%s: %s\r\n" % (k, v) for k, v in hdrs.items()) + "\r\n"
            self._sock.sendall(head.encode("latin-1") + body)
            status, answer = self._receive()
            if status != 200:
                raise _error(status, answer)
            ans = json.loads(answer)
            if len(self._fds) != ans["fds"]:
                raise LocalReadError("%d descriptors received, the answer names %d" % (len(self._fds), ans["fds"]),
                                     code="BadAnswer", status=status)
        except BaseException:
            self._release()
            raise
        self.size = ans["size"]
        self.etag = ans["etag"]
        self.extents = ans["extents"]
        self._pos = 0

    def _receive(self):
        """Reads the HTTP answer with recvmsg, collecting the descriptors
        that come with its first bytes."""
        buf = b""
        while True:
            data, fds, _flags, _addr = socket.recv_fds(self._sock, 1 << 16, _MAX_FDS)
            self._fds.extend(fds)
            buf += data
            end = buf.find(b"\r\n\r\n")
            if end >= 0:
                lines = buf[:end].decode("latin-1").split("\r\n")
                status = int(lines[0].split(" ", 2)[1])
                length = 0
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value.strip())
                if len(buf) - end - 4 >= length:
                    return status, buf[end + 4:end + 4 + length]
            if not data:
                raise LocalReadError("the node closed the connection before its answer was complete",
                                     code="BadAnswer")

    def readable(self):
        return True

    def seekable(self):
        return True

    def tell(self):
        return self._pos

    def seek(self, offset, whence=io.SEEK_SET):
        if whence == io.SEEK_CUR:
            offset += self._pos
        elif whence == io.SEEK_END:
            offset += self.size
        if offset < 0:
            raise ValueError("negative seek position")
        self._pos = offset
        return offset

    def readinto(self, b):
        view = memoryview(b).cast("B")
        want = min(len(view), max(self.size - self._pos, 0))
        done = 0
        for e in self.extents:
            if done == want:
                break
            at = self._pos + done
            if not e["object_offset"] <= at < e["object_offset"] + e["length"]:
                continue
            inner = at - e["object_offset"]
            n = min(want - done, e["length"] - inner)
            got = os.preadv(self._fds[e["fd"]], [view[done:done + n]], e["file_offset"] + inner)
            if got != n:
                raise OSError("short read of a cache file: %d of %d bytes" % (got, n))
            done += n
        self._pos += done
        return done

    def _release(self):
        for fd in self._fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds = []
        self._sock.close()  # the node lets go of its copies

    def close(self):
        if not self.closed:
            self._release()
        super().close()


class _HTTPFile(io.RawIOBase):
    """The fallback: signed HTTP range GETs."""

    local = False

    def __init__(self, bucket, key, endpoint_url, socket_path, creds, region, timeout):
        super().__init__()
        self._creds, self._region, self._timeout = creds, region, timeout
        if endpoint_url:
            u = urllib.parse.urlsplit(endpoint_url)
            base = endpoint_url.rstrip("/")
            conn = (http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection)
            self._connect = lambda: conn(u.netloc, timeout=timeout)
        else:
            base = "http://localhost"
            self._connect = lambda: _UnixHTTPConnection(socket_path, timeout)
        self._url = base + "/" + bucket + "/" + urllib.parse.quote(key, safe="/~")
        self._conn = self._connect()
        resp = self._request("HEAD", {})
        resp.read()
        if resp.status != 200:
            raise LocalReadError("HEAD %s/%s" % (bucket, key), code="HTTP%d" % resp.status, status=resp.status)
        self.size = int(resp.getheader("Content-Length"))
        self.etag = (resp.getheader("ETag") or "").strip('"')
        self.extents = None
        self._pos = 0

    def _request(self, method, headers):
        req = _signed(method, self._url, self._creds, self._region, b"", headers)
        path = urllib.parse.urlsplit(self._url)
        target = path.path + ("?" + path.query if path.query else "")
        hdrs = dict(req.headers)
        try:
            self._conn.request(method, target, headers=hdrs)
            return self._conn.getresponse()
        except (http.client.HTTPException, OSError):
            self._conn.close()
            self._conn = self._connect()
            self._conn.request(method, target, headers=hdrs)
            return self._conn.getresponse()

    readable = _LocalFile.readable
    seekable = _LocalFile.seekable
    tell = _LocalFile.tell
    seek = _LocalFile.seek

    def readinto(self, b):
        view = memoryview(b).cast("B")
        want = min(len(view), max(self.size - self._pos, 0))
        if want == 0:
            return 0
        rng = "bytes=%d-%d" % (self._pos, self._pos + want - 1)
        resp = self._request("GET", {"Range": rng, "If-Match": '"%s"' % self.etag})
        if resp.status not in (200, 206):
            raise _error(resp.status, resp.read())
        got = resp.readinto(view[:want])
        resp.read()
        self._pos += got
        return got

    def close(self):
        if not self.closed:
            self._conn.close()
        super().close()

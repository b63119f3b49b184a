"""fedgate's batch GET endpoint (POST /_fedgate/v1/batch) from Python.

Signing is botocore's (S3SigV4Auth, service s3) and so is the HTTP client
(botocore.httpsession.URLLib3Session): nothing beyond what boto3 users already
have. The answer is a tar stream read with the standard library's tarfile in
stream mode, one entry at a time; it is never held whole in memory.
"""

import http.client
import json
import os
import re
import tarfile
import threading
import xml.etree.ElementTree as ET

import botocore.credentials
import botocore.exceptions
import botocore.httpsession
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.utils import get_environ_proxies

BATCH_PATH = "/_fedgate/v1/batch"
ERRORS_DIR = "__errors__/"
DEFAULT_REGION = "us-east-1"

# The tar stream is read in blocks of this size from the HTTP answer.
_TAR_BUFSIZE = 64 * 1024

_ENTRY_FIELDS = ("bucket", "key", "range", "archpath")
_ENTRY_IN_MESSAGE = re.compile(r"\(batch entry (\d+): ")


class FedgateError(Exception):
    """Base class of the errors this package raises."""


class BatchError(FedgateError):
    """An S3 error answer from the batch endpoint.

    Raised for a batch refused as a whole (status is the HTTP status: 400,
    403, 404, ...), and, without continue_on_error, for the entry whose
    failure ended the stream. With continue_on_error the failed entries'
    BatchEntryError instances are yielded in their places instead.

    code       the S3 error code ("NoSuchKey", "AccessDenied", ...)
    status     the HTTP status, or None for an error sent inside the stream
    entry      the index (in the request) of the entry it is about, or None
    name       that entry's name (bucket/key[/archpath]), or None
    request_id the batch's request id
    """

    def __init__(self, message, code=None, status=None, entry=None, name=None,
                 request_id=None, resource=None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.entry = entry
        self.name = name
        self.request_id = request_id
        self.resource = resource

    def __str__(self):
        parts = [self.code or "Error"]
        if self.status is not None:
            parts.append("(HTTP %d)" % self.status)
        s = " ".join(parts) + ": " + (self.message or "")
        if self.name is not None and self.name not in s:
            s += " [entry %s: %s]" % (self.entry, self.name)
        return s

    def __reduce__(self):
        return (_rebuild, (type(self), self.message, self.code, self.status, self.entry,
                           self.name, self.request_id, self.resource))


class BatchEntryError(BatchError):
    """One entry's failure, sent as an __errors__/ entry of the tar stream."""


class BatchStreamError(FedgateError):
    """The answer could not be read to its end: the connection was cut, the
    tar stream ended early without an error entry, or it was not the answer
    asked for. Entries yielded before it are whole and correct; the request
    can be sent again for the entries after them (the dataset does)."""

    def __init__(self, message, received=None):
        super().__init__(message)
        self.received = received

    def __reduce__(self):
        return (BatchStreamError, (self.args[0], self.received))


def _rebuild(cls, *args):
    return cls(*args)


def normalize_archpath(p):
    """The member name the server uses: a leading "./" or "/" dropped."""
    while True:
        if p.startswith("./"):
            p = p[2:]
        elif p.startswith("/"):
            p = p[1:]
        else:
            return p


# A "." or ".." segment, with "/" and "\\" as separators.
_DOT_SEGMENT = re.compile(r"(?<![^/\\])\.\.?(?![^/\\])")


def tar_name(name):
    """The name the server writes for bucket/key[/archpath] (Go's
    gateway.BatchEntryName): so that no name climbs out of the folder an
    answer is extracted into, each dot of a "." or ".." segment is "%2E", a
    NUL is "%00" and a leading "/" is "%2F". Other names are unchanged."""
    name = _DOT_SEGMENT.sub(lambda m: "%2E" * len(m.group()), name).replace("\0", "%00")
    if name.startswith("/"):
        name = "%2F" + name[1:]
    return name


def entry_name(entry):
    """The tar name of an entry's answer: bucket/key, plus /archpath, as
    tar_name writes it."""
    n = entry["bucket"] + "/" + entry["key"]
    if entry.get("archpath"):
        n += "/" + normalize_archpath(entry["archpath"])
    return tar_name(n)


def make_entry(e, bucket=None):
    """An entry as the request's JSON wants it, from a dict with bucket, key
    and optional range and archpath, a (bucket, key) tuple, or a key string
    when bucket is given."""
    if isinstance(e, dict):
        extra = set(e) - set(_ENTRY_FIELDS)
        if extra:
            raise ValueError("batch entry has unknown fields %s (known: %s)" % (sorted(extra), ", ".join(_ENTRY_FIELDS)))
        out = {"bucket": e.get("bucket", bucket), "key": e.get("key")}
        for f in ("range", "archpath"):
            if e.get(f):
                out[f] = e[f]
    elif isinstance(e, (tuple, list)) and len(e) == 2:
        out = {"bucket": e[0], "key": e[1]}
    elif isinstance(e, str):
        out = {"bucket": bucket, "key": e}
    else:
        raise TypeError("batch entry must be a dict, a (bucket, key) pair or a key string, not %r" % (e,))
    if not out["bucket"]:
        raise ValueError("batch entry %r has no bucket (pass bucket=... for plain keys)" % (e,))
    if not out["key"]:
        raise ValueError("batch entry %r has no key" % (e,))
    return out


def parse_error_xml(data, status=None, default_code=None):
    """A BatchError from an S3 error document (or whatever the body was)."""
    if isinstance(data, bytes):
        text = data.decode("utf-8", "replace")
    else:
        text = data
    code = message = request_id = resource = None
    try:
        root = ET.fromstring(text)
        code = root.findtext("Code")
        message = root.findtext("Message")
        request_id = root.findtext("RequestId")
        resource = root.findtext("Resource")
    except ET.ParseError:
        pass
    if code is None:
        code = default_code or ("HTTP%d" % status if status else "UnknownError")
        message = text.strip()[:500] or "(empty answer)"
    entry = None
    m = _ENTRY_IN_MESSAGE.search(message or "")
    if m:
        entry = int(m.group(1))
    return BatchError(message or "", code=code, status=status, entry=entry,
                      request_id=request_id, resource=resource)


def _freeze(credentials):
    if credentials is None:
        return None
    if isinstance(credentials, (tuple, list)):
        return botocore.credentials.Credentials(*credentials)
    return credentials


class BatchClient:
    """Sends batch GETs to one fedgate endpoint.

    BatchClient(s3_client)                      a boto3 S3 client: its endpoint,
                                                region and credentials
    BatchClient("http://fedgate:9000")          default credentials (env, files, ...)
    BatchClient(url, session=boto3.Session())   a boto3 or botocore session's
    BatchClient(url, credentials=(ak, sk))      explicit keys (and a token)

    region defaults to the client's or session's region, else us-east-1
    (fedgate's default signing region). verify is what boto3 takes: True,
    False or a CA bundle path (default: AWS_CA_BUNDLE, else botocore's).
    The client is safe to share between threads and to use after a fork
    (each process opens its own connections).
    """

    def __init__(self, endpoint_url=None, *, session=None, credentials=None, region=None,
                 verify=None, timeout=60, max_pool_connections=10):
        s3_client = None
        if endpoint_url is not None and not isinstance(endpoint_url, str):
            s3_client, endpoint_url = endpoint_url, None
        if s3_client is not None:
            endpoint_url = s3_client.meta.endpoint_url
            region = region or s3_client.meta.region_name
            if credentials is None:
                # botocore has no public accessor for a client's credentials;
                # its signer has held them as _credentials for years.
                signer = getattr(s3_client, "_request_signer", None)
                credentials = getattr(signer, "_credentials", None)
                if credentials is None:
                    raise ValueError("cannot take credentials from this S3 client; pass credentials= or session=")
            if verify is None:
                http = getattr(getattr(s3_client, "_endpoint", None), "http_session", None)
                verify = getattr(http, "_verify", None)
        if not endpoint_url:
            raise ValueError("BatchClient needs an endpoint URL or a boto3 S3 client")
        if credentials is None:
            if session is None:
                import botocore.session
                session = botocore.session.get_session()
            credentials = session.get_credentials()
            if credentials is None:
                raise ValueError("no AWS credentials found (environment, config files or session); the batch endpoint refuses unsigned requests")
        if region is None and session is not None:
            region = getattr(session, "region_name", None)
            if region is None and hasattr(session, "get_config_variable"):
                region = session.get_config_variable("region")
        if verify is None:
            verify = os.environ.get("AWS_CA_BUNDLE") or True
        self.endpoint_url = endpoint_url.rstrip("/")
        self.url = self.endpoint_url + BATCH_PATH
        self.region = region or DEFAULT_REGION
        self._credentials = _freeze(credentials)
        self._verify = verify
        self._timeout = timeout
        self._max_pool = max_pool_connections
        self._http = None
        self._inherited = None
        self._pid = None
        self._lock = threading.Lock()

    def __getstate__(self):
        # For DataLoader workers started with spawn: no connections, and
        # credentials as a plain copy (a refreshing provider holds a lock).
        st = self.__dict__.copy()
        st["_http"] = None
        st["_inherited"] = None
        st["_pid"] = None
        st["_lock"] = None
        c = self._credentials.get_frozen_credentials()
        st["_credentials"] = botocore.credentials.Credentials(c.access_key, c.secret_key, c.token)
        return st

    def __setstate__(self, st):
        self.__dict__.update(st)
        self._lock = threading.Lock()

    def _session(self):
        pid = os.getpid()
        if self._http is None or self._pid != pid:
            with self._lock:
                if self._http is None or self._pid != pid:
                    if self._http is not None:
                        # Connections of the parent, inherited by a fork
                        # (a DataLoader worker): never used here, and kept
                        # referenced so that no clean-up here touches them.
                        self._inherited = self._http
                    self._http = botocore.httpsession.URLLib3Session(
                        verify=self._verify, proxies=get_environ_proxies(self.url),
                        timeout=self._timeout, max_pool_connections=self._max_pool)
                    self._pid = pid
        return self._http

    def close(self):
        """Closes the connections kept for the next batches."""
        http, self._http = self._http, None
        if http is not None and self._pid == os.getpid():
            http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _send(self, body):
        req = AWSRequest(method="POST", url=self.url, data=body,
                         headers={"Content-Type": "application/json"}, stream_output=True)
        S3SigV4Auth(self._credentials.get_frozen_credentials(), "s3", self.region).add_auth(req)
        return self._session().send(req.prepare())

    def batch_get(self, entries, *, continue_on_error=False, bucket=None):
        """Yields (name, bytes) for each entry, in request order, as the
        answer streams in.

        entries: dicts {"bucket", "key", "range"?, "archpath"?}, (bucket, key)
        pairs, or key strings with bucket=. name is bucket/key (plus
        /archpath, without a leading "./").

        Errors:
        - a batch refused as a whole (bad signature, malformed, and without
          continue_on_error any entry missing or refused): BatchError with
          the HTTP status, before anything is yielded;
        - without continue_on_error, an entry that fails after the stream
          began (the server's error trailer): the entries before it are
          yielded, then its BatchEntryError is raised;
        - with continue_on_error, a failed entry is yielded as
          (name, BatchEntryError) in its place and the stream goes on;
        - a stream cut short or not matching the request: BatchStreamError
          (after the whole entries received before it).
        """
        want = [make_entry(e, bucket) for e in entries]
        if not want:
            return
        body = json.dumps({"entries": want, "continue_on_error": bool(continue_on_error)},
                          separators=(",", ":")).encode()
        resp = self._send(body)
        raw = resp.raw
        done = False
        try:
            if resp.status_code != 200:
                err = parse_error_xml(raw.read(), status=resp.status_code)
                if err.entry is not None and err.entry < len(want):
                    err.name = entry_name(want[err.entry])
                raise err
            ctype = resp.headers.get("Content-Type", "")
            if not ctype.startswith("application/x-tar"):
                raise BatchStreamError("the batch answer is %r, not a tar stream (is %s a fedgate endpoint?)" % (ctype, self.endpoint_url), 0)
            n = resp.headers.get("x-fedgate-batch-entries")
            if n is not None and int(n) != len(want):
                raise BatchStreamError("the server answers %s entries for a batch of %d" % (n, len(want)), 0)
            yield from _read_stream(raw, want, continue_on_error)
            # What follows the end of the archive (nothing, or padding), so
            # that the connection goes back to the pool for the next batch.
            raw.read()
            done = True
        finally:
            if done:
                raw.release_conn()
            else:
                raw.close()  # an answer not read to its end: the connection goes


class _Body:
    """The answer's body for tarfile: read(n) returns what has arrived (at
    least one byte, at most n) instead of waiting for n bytes, so an entry is
    yielded as soon as its own bytes are in, not when the bytes after it
    fill a buffer. urllib3's response waits for n; the http.client response
    under it (urllib3 1.x and 2.x keep it as _fp) has read1."""

    def __init__(self, raw):
        self._raw = raw
        self._read1 = getattr(getattr(raw, "_fp", None), "read1", None)

    def read(self, n=-1):
        if self._read1 is not None and n is not None and n > 0:
            return self._read1(n)
        return self._raw.read(n)


def _read_stream(raw, want, continue_on_error):
    i = 0
    names = [entry_name(e) for e in want]
    try:
        tf = tarfile.open(fileobj=_Body(raw), mode="r|", bufsize=_TAR_BUFSIZE)
        while True:
            m = tf.next()
            if m is None:
                break
            tf.members.clear()  # tarfile keeps every header it read; a batch may be long
            if i >= len(want):
                raise BatchStreamError("the batch answer has more entries than the %d asked for (%r)" % (len(want), m.name), i)
            if not m.isreg():
                raise BatchStreamError("batch entry %d: %r is not a regular file in the answer" % (i, m.name), i)
            data = tf.extractfile(m).read(m.size)
            if len(data) != m.size:
                raise BatchStreamError("batch entry %d (%s): %d of %d bytes, then the stream ended" % (i, names[i], len(data), m.size), i)
            if m.name == names[i]:
                yield names[i], data
            elif m.name == ERRORS_DIR + names[i]:
                err = parse_error_xml(data)
                e = BatchEntryError(err.message, code=err.code, entry=i, name=names[i],
                                    request_id=err.request_id, resource=err.resource)
                if not continue_on_error:
                    raise e
                yield names[i], e
            else:
                raise BatchStreamError("batch entry %d: the answer names %r, the request %r" % (i, m.name, names[i]), i)
            i += 1
    except (tarfile.TarError, botocore.exceptions.HTTPClientError, http.client.HTTPException, OSError) as e:
        raise BatchStreamError("the batch answer broke off after %d of %d entries: %s" % (i, len(want), _cause(e)), i) from e
    except Exception as e:
        # urllib3's ProtocolError (a cut chunked body) and the like.
        if type(e).__module__.startswith("urllib3"):
            raise BatchStreamError("the batch answer broke off after %d of %d entries: %s" % (i, len(want), e), i) from e
        raise
    if i < len(want):
        raise BatchStreamError("the batch answer ended after %d of %d entries without an error entry (a cut connection?)" % (i, len(want)), i)


def _cause(e):
    return "%s: %s" % (type(e).__name__, e)

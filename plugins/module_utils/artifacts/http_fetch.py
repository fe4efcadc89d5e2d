# Resumable HTTP downloads for mtslime.posttrain modules, on ansible.module_utils.urls.
#
# - Partial files are written to <file>.part and resumed with "Range: bytes=N-"; the final name appears only
#   when the body is complete (its size equals the server's Content-Length / Content-Range total).
# - Redirects are followed by hand so that the Authorization header is sent only to the host it was meant
#   for (Hugging Face redirects large files to a CDN with a signed URL).
# - Every failure is a FetchError whose message names the file, the URL (never the token) and the class
#   of the problem: network, auth, not_found, disk, server or http.
from __future__ import annotations

import http.client
import os
import shutil
import socket
import ssl
import time
import urllib.error
import urllib.parse

from ansible.module_utils.urls import Request
from ansible_collections.mtslime.posttrain.plugins.module_utils.common import human_bytes

CHUNK = 1 << 20
BACKOFF_BASE = 1.0  # seconds before the first retry; doubles each time (tests set it to 0)
BACKOFF_CAP = 60.0
MAX_REDIRECTS = 10
REDIRECTS = (301, 302, 303, 307, 308)
RETRY_STATUS = (408, 425, 429, 500, 502, 503, 504)
AGENT = "mtslime.posttrain-http_fetch/1"


def redact(url):
    """The URL without user:password@ and without a query string (signed CDN URLs carry long signatures)."""
    parts = urllib.parse.urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def host_of(url):
    return (urllib.parse.urlsplit(url).hostname or "").lower()


class FetchError(Exception):
    """A classified download failure. kind: network, auth, not_found, disk, server, http."""

    def __init__(self, kind, name, url, why, status=None, attempts=1, path=None, free=None):
        self.kind = kind
        self.name = name
        self.url = redact(url) if url else url
        self.why = why
        self.status = status
        self.attempts = attempts
        self.path = path
        self.free = free
        super().__init__(self.message())

    def message(self):
        tries = " (gave up after %d attempts)" % self.attempts if self.attempts > 1 else ""
        if self.kind == "network":
            return ("%s: network error fetching %s: %s%s; check that this node reaches %s (DNS, proxy, firewall) or "
                    "set base_url to a reachable mirror" % (self.name, self.url, self.why, tries, host_of(self.url)))
        if self.kind == "auth":
            return ("%s: HTTP %s from %s (%s): the server refused access; set model_hf_token or check access to the "
                    "repository (gated models need their license accepted on the model page)"
                    % (self.name, self.status, self.url, self.why))
        if self.kind == "not_found":
            return ("%s: not found at %s (HTTP 404); check base_url (organisation, repository and revision) and the "
                    "file name" % (self.name, self.url))
        if self.kind == "disk":
            free = human_bytes(self.free) if self.free is not None else "unknown"
            return ("%s: cannot write %s: %s; %s free on that file system - free space there or choose another "
                    "dest" % (self.name, self.path, self.why, free))
        if self.kind == "server":
            return ("%s: HTTP %s from %s (%s)%s; the server is failing - retry later or set base_url to another "
                    "mirror" % (self.name, self.status, self.url, self.why, tries))
        return "%s: HTTP %s from %s (%s); check base_url" % (self.name, self.status, self.url, self.why)


class _Retry(Exception):
    """A failure worth another attempt; carries the FetchError to raise when attempts run out."""

    def __init__(self, error):
        super().__init__(str(error))
        self.error = error


def free_bytes(path):
    directory = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    try:
        return shutil.disk_usage(directory).free
    except OSError:
        return None


def network_reason(exc):
    reason = getattr(exc, "reason", exc)
    if isinstance(reason, socket.gaierror):
        return "DNS lookup failed (%s)" % (reason.strerror or reason)
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    if isinstance(reason, (socket.timeout, TimeoutError)):
        return "timed out"
    if isinstance(reason, ConnectionResetError):
        return "connection reset by the server"
    if isinstance(reason, http.client.IncompleteRead):
        return "the server closed the connection in the middle of the body"
    if isinstance(reason, http.client.RemoteDisconnected):
        return "the server closed the connection without a response"
    if isinstance(reason, ssl.SSLError):
        return "TLS error (%s)" % reason
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror
    return str(reason) or type(reason).__name__


def parse_content_range(value):
    """'bytes a-b/total' -> (a, b, total); 'bytes */total' -> (None, None, total); total None when '*'."""
    if not value or not value.strip().lower().startswith("bytes"):
        return None
    spec = value.strip()[5:].strip()
    try:
        span, _sep, total = spec.partition("/")
        total = None if total.strip() in ("", "*") else int(total)
        if span.strip() == "*":
            return None, None, total
        start, _sep, end = span.partition("-")
        return int(start), int(end), total
    except ValueError:
        return None


class Fetcher:
    def __init__(self, token=None, timeout=60, retries=5, validate_certs=True, sleep=None):
        self.token = token or None
        self.timeout = timeout
        self.retries = max(0, int(retries))
        self.validate_certs = validate_certs
        self.sleep = sleep or time.sleep

    # --- requests -------------------------------------------------------------------------------------------
    def _open(self, method, url, headers=None):
        """Open `url`, following redirects by hand; the token goes only to the first URL's host."""
        auth_host = host_of(url)
        current = url
        for _hop in range(MAX_REDIRECTS + 1):
            hdrs = {"Accept-Encoding": "identity"}
            hdrs.update(headers or {})
            if self.token and host_of(current) == auth_host:
                hdrs["Authorization"] = "Bearer %s" % self.token
            request = Request(timeout=self.timeout, validate_certs=self.validate_certs, http_agent=AGENT,
                              follow_redirects="none", decompress=False, use_netrc=not self.token)
            try:
                return request.open(method, current, headers=hdrs)
            except urllib.error.HTTPError as exc:
                if exc.code in REDIRECTS and exc.headers and exc.headers.get("Location"):
                    location = exc.headers.get("Location")
                    exc.close()
                    current = urllib.parse.urljoin(current, location)
                    continue
                raise
        raise urllib.error.URLError("more than %d redirects" % MAX_REDIRECTS)

    def _classify(self, exc, name, url):
        """Turn an exception from _open/read into a FetchError (raised) or a _Retry (raised)."""
        if isinstance(exc, urllib.error.HTTPError):
            why = exc.reason if isinstance(exc.reason, str) else str(exc.reason)
            status = exc.code
            try:
                exc.close()
            except Exception:
                pass
            if status in (401, 403):
                raise FetchError("auth", name, url, why, status=status)
            if status == 404:
                raise FetchError("not_found", name, url, why, status=status)
            if status in RETRY_STATUS:
                raise _Retry(FetchError("server", name, url, why, status=status))
            raise FetchError("http", name, url, why, status=status)
        if isinstance(exc, ssl.SSLCertVerificationError) or isinstance(
                getattr(exc, "reason", None), ssl.SSLCertVerificationError):
            raise FetchError("network", name, url, network_reason(exc) + "; install the CA of the mirror")
        if isinstance(exc, (urllib.error.URLError, http.client.HTTPException, OSError)):
            raise _Retry(FetchError("network", name, url, network_reason(exc)))
        raise exc

    def _with_retries(self, name, url, attempt):
        """Run attempt() and return its result; retry the _Retry failures it raises, waiting BACKOFF_BASE,
        2x, 4x, ... (at most BACKOFF_CAP) in between. A failure after progress (a _Retry with progressed=True)
        is retried at once and does not use up a retry."""
        failures = 0
        while True:
            try:
                return attempt()
            except _Retry as retry:
                progressed = getattr(retry, "progressed", False)
                failures = 0 if progressed else failures + 1
                if failures > self.retries:
                    retry.error.attempts = failures
                    retry.error.args = (retry.error.message(),)
                    raise retry.error from retry
                if not progressed:
                    self.sleep(min(BACKOFF_CAP, BACKOFF_BASE * (2 ** (failures - 1))))

    # --- size probe -----------------------------------------------------------------------------------------
    def size(self, name, url):
        """The size of `url` on the server (HEAD, or a one-byte ranged GET when HEAD gives no length).
        Raises FetchError (kind not_found for a 404)."""

        def attempt():
            try:
                try:
                    resp = self._open("HEAD", url)
                    length = resp.headers.get("Content-Length")
                    resp.close()
                    if length is not None:
                        return int(length)
                except urllib.error.HTTPError as exc:
                    if exc.code not in (405, 501):
                        raise
                    exc.close()
                resp = self._open("GET", url, {"Range": "bytes=0-0"})
                try:
                    if resp.status == 206:
                        parsed = parse_content_range(resp.headers.get("Content-Range"))
                        return parsed[2] if parsed else None
                    length = resp.headers.get("Content-Length")
                    return int(length) if length is not None else None
                finally:
                    resp.close()
            except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
                self._classify(exc, name, url)

        return self._with_retries(name, url, attempt)

    # --- download -------------------------------------------------------------------------------------------
    def download(self, name, url, path, expected=None, on_progress=None):
        """Fetch `url` into `path` through `path`.part, resuming a partial .part.
        Returns {"bytes": final size, "downloaded": bytes transferred, "resumed_from": first offset}."""
        part = path + ".part"
        state = {"downloaded": 0, "resumed_from": None}

        def part_size():
            try:
                return os.path.getsize(part)
            except OSError:
                return 0

        def reset_part():
            with open(part, "wb"):
                pass

        def finish():
            os.replace(part, path)
            return {"bytes": os.path.getsize(path), "downloaded": state["downloaded"],
                    "resumed_from": state["resumed_from"] or 0}

        def attempt():
            offset = part_size()
            if expected is not None and offset > expected:
                reset_part()
                offset = 0
            if expected is not None and offset == expected and offset > 0:
                return finish()
            if state["resumed_from"] is None:
                state["resumed_from"] = offset
            headers = {"Range": "bytes=%d-" % offset} if offset else {}
            try:
                resp = self._open("GET", url, headers)
            except urllib.error.HTTPError as exc:
                if exc.code == 416:
                    parsed = parse_content_range(exc.headers.get("Content-Range") if exc.headers else None)
                    exc.close()
                    if parsed and parsed[2] is not None and parsed[2] == offset:
                        return finish()
                    reset_part()
                    error = FetchError("http", name, url, "range not satisfiable; restarting", status=416)
                    raise _Retry(error) from exc
                self._classify(exc, name, url)
            except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
                self._classify(exc, name, url)
            progressed = False
            try:
                if resp.status == 206:
                    parsed = parse_content_range(resp.headers.get("Content-Range"))
                    if not parsed or parsed[0] != offset:
                        reset_part()  # not the range we asked for: start again from zero
                        raise _Retry(FetchError("http", name, url, "unexpected Content-Range %r"
                                                % resp.headers.get("Content-Range"), status=206))
                    total = parsed[2]
                    mode = "ab"
                else:
                    length = resp.headers.get("Content-Length")
                    total = int(length) if length is not None else None
                    offset = 0  # the server sent the whole file
                    mode = "wb"
                if expected is not None and total is not None and total != expected:
                    expected_note = "server now reports %d bytes, expected %d" % (total, expected)
                    raise FetchError("http", name, url, expected_note + "; the file changed on the server - rerun",
                                     status=resp.status)
                try:
                    handle = open(part, mode)
                except OSError as exc:
                    raise FetchError(
                        "disk", name, url, exc.strerror or str(exc), path=part, free=free_bytes(part)
                    ) from exc
                with handle:
                    while True:
                        try:
                            block = resp.read(CHUNK)
                        except (http.client.HTTPException, OSError) as exc:
                            retry = _Retry(FetchError("network", name, url, network_reason(exc)))
                            retry.progressed = progressed
                            raise retry from exc
                        if not block:
                            break
                        try:
                            handle.write(block)
                        except OSError as exc:  # ENOSPC / EDQUOT (disk full, quota) and other write errors
                            raise FetchError("disk", name, url, exc.strerror or str(exc), path=part,
                                             free=free_bytes(part)) from exc
                        progressed = True
                        state["downloaded"] += len(block)
                        if on_progress:
                            on_progress(len(block))
                    try:
                        handle.flush()
                        os.fsync(handle.fileno())
                    except OSError as exc:
                        raise FetchError("disk", name, url, exc.strerror or str(exc), path=part,
                                         free=free_bytes(part)) from exc
            finally:
                resp.close()
            size = part_size()
            if total is not None and size != total:
                retry = _Retry(FetchError("network", name, url, "the connection ended after %d of %d bytes"
                                          % (size, total)))
                retry.progressed = progressed
                raise retry
            return finish()

        return self._with_retries(name, url, attempt)

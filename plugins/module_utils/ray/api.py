# A small client for the Ray dashboard's REST API (Ray 2.60): version, GCS
# health, Jobs API, node list, and the package endpoint a local working_dir
# needs. Standard library + ansible.module_utils.urls only; Python 3.8+.
#
# Measured on a real Ray 2.60.0 head (tests/unit/data/ray/responses.json):
#   GET  /api/version                 200 JSON {version, ray_version, ray_commit, session_name}
#   GET  /api/gcs_healthz             200 text "success" (content type application/text)
#   GET  /api/jobs/                   200 JSON list of JobDetails (SUBMISSION and DRIVER jobs)
#   GET  /api/jobs/<id>               200 JobDetails | 404 text/plain "Job <id> does not exist"
#   POST /api/jobs/                   200 {job_id, submission_id}; the same submission_id twice: 500
#                                     text/plain traceback ending "ValueError: Job with submission_id
#                                     <id> already exists. Please use a different submission_id."
#                                     missing entrypoint: 400 text/plain; a body that is not JSON: 500
#   POST /api/jobs/<id>/stop          200 {stopped: true|false (already terminal)} | 404 text/plain
#   GET  /api/jobs/<id>/logs          200 {logs: "..."} (the whole log) | 404 text/plain
#   GET  /api/v0/nodes?limit=&detail= 200 {result, msg, data: {result: {total, result: [
#                                     {node_id, node_ip, is_head_node, state, resources_total, ...}]}}}
#   GET  /nodes?view=summary          200 {result, msg, data: {summary: [{ip, hostname, raylet:
#                                     {nodeId, state, isHeadNode, resourcesTotal, ...}}]}} (fallback)
#   GET  /api/packages/gcs/<name>     200 empty body when stored | 404 text/plain "Package gcs://<name> does not exist"
#   PUT  /api/packages/gcs/<name>     200 empty body (body = the zip bytes)
# Every error body is text/plain, never JSON. The GCS port (ray start --port,
# 64379 in the guide) speaks gRPC: an HTTP/1.1 request gets an HTTP/2 SETTINGS
# frame back (bytes 00 00 18 04 ...), which Python reports as BadStatusLine.
from __future__ import annotations

import json
import re
import socket

try:  # the urls helpers are always there inside a module; keep the import soft for plain helpers
    from ansible.module_utils.urls import open_url
except ImportError:  # pragma: no cover
    open_url = None

from urllib.error import HTTPError
from urllib.parse import quote, urlparse

# the one rule for job states (job/rules.py); the working_dir package is package.py, re-exported here
from ansible_collections.mtslime.posttrain.plugins.module_utils.job.rules import ACTIVE, TERMINAL  # noqa: E402,F401
from ansible_collections.mtslime.posttrain.plugins.module_utils.ray.errors import RayApiError  # noqa: E402
from ansible_collections.mtslime.posttrain.plugins.module_utils.ray.package import (  # noqa: E402,F401
    PKG_DEFAULT_EXCLUDES,
    PKG_MAX_BYTES,
    PKG_PREFIX,
    build_package,
    collect_files,
    is_local_working_dir,
    split_package_uri,
)

from ansible_collections.mtslime.posttrain.plugins.module_utils.ray.common import (  # noqa: E402
    DASHBOARD_PORT,
    DEFAULT_DASHBOARD_URL,
    DEFAULT_GCS_ADDRESS,
    GCS_PORT,
    RAY_DEFAULT_GCS_PORT,
)

# Ports people give for the dashboard by mistake: the guide's GCS port and Ray's default GCS port.
GCS_PORTS = (GCS_PORT, RAY_DEFAULT_GCS_PORT)

PORT_HINT = (
    "FAQ Q1: Ray has two ports. The dashboard / Jobs API is HTTP on the port given to "
    "`ray start --dashboard-port` (%(dash)d in the guide): use it for dashboard_url and "
    "RAY_ADDRESS=http://<head>:%(dash)d (`ray job submit`, `ray job list`). The GCS port given to "
    "`ray start --port` (%(gcs)d in the guide) speaks gRPC, not HTTP: it is for "
    "`ray status --address=%(gcs_address)s` and for worker nodes joining."
) % dict(dash=DASHBOARD_PORT, gcs=GCS_PORT, gcs_address=DEFAULT_GCS_ADDRESS)
DOWN_HINT = (
    "nothing answers there: is the Ray head running (`ray start --head --dashboard-host=0.0.0.0 "
    "--dashboard-port=%d --port=%d`)? If it is, check the port: " % (DASHBOARD_PORT, GCS_PORT) + PORT_HINT
)
PROXY_HINT = (
    "an HTTP proxy may be answering instead of Ray: the guide exports no_proxy=127.0.0.1; add the head's "
    "address to no_proxy"
)


def normalize_url(url):
    """'127.0.0.1:8772' -> 'http://127.0.0.1:8772'; trailing slashes removed.
    Raises ValueError for a URL that cannot be a dashboard address."""
    url = (url or "").strip()
    if not url:
        raise ValueError("dashboard_url is empty")
    if "://" not in url:
        url = "http://" + url
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https"):
        raise ValueError(
            "dashboard_url %r has scheme %r; the Jobs API is plain HTTP(S), e.g. %s. %s"
            % (url, parsed.scheme, DEFAULT_DASHBOARD_URL, PORT_HINT)
        )
    if not parsed.hostname:
        raise ValueError("dashboard_url %r has no host" % url)
    try:
        _ = parsed.port  # urllib parses the port lazily
    except ValueError:
        raise ValueError("dashboard_url %r has an invalid port" % url) from None
    return url.rstrip("/")


def url_port(url):
    parsed = urlparse(url)
    if parsed.port:
        return parsed.port
    return 443 if parsed.scheme == "https" else 80


def parse_hostport(address, default_port=None):
    """'10.0.0.1:64379' -> ('10.0.0.1', 64379); '[::1]:64379' too. ValueError when malformed."""
    address = (address or "").strip()
    if "://" in address:
        raise ValueError("%r is a URL; the GCS address is host:port, e.g. %s" % (address, DEFAULT_GCS_ADDRESS))
    match = re.match(r"^\[(?P<h6>[^\]]+)\](?::(?P<p6>\d+))?$|^(?P<h>[^:\s]+)(?::(?P<p>\d+))?$", address)
    if not match:
        raise ValueError("%r is not host:port (e.g. %s)" % (address, DEFAULT_GCS_ADDRESS))
    host = match.group("h6") or match.group("h")
    port = match.group("p6") or match.group("p")
    if port is None:
        if default_port is None:
            raise ValueError("%r has no port (e.g. %s)" % (address, DEFAULT_GCS_ADDRESS))
        port = default_port
    port = int(port)
    if not 0 < port < 65536:
        raise ValueError("%r: port %d is out of range" % (address, port))
    return host, port


def looks_like_grpc(data):
    """An HTTP/2 frame header of a SETTINGS frame (type 0x04): what a gRPC server (the GCS) sends."""
    if isinstance(data, str):
        data = data.encode("latin-1", "replace")
    return len(data) >= 4 and data[0] == 0 and data[3] == 0x04


def probe_port(host, port, timeout=3.0):
    """Open a TCP connection to host:port and find out what protocol answers.

    Returns {"open": bool, "protocol": "grpc"|"http"|"unknown"|None, "error": str|None}.
    It sends the HTTP/2 connection preface: a gRPC server (Ray's GCS) answers with a
    SETTINGS frame, an HTTP/1 server (the dashboard) with "HTTP/1.x 400"."""
    result = {"open": False, "protocol": None, "error": None}
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except (OSError, socket.timeout) as exc:
        result["error"] = _socket_error_text(exc)
        return result
    result["open"] = True
    try:
        sock.settimeout(timeout)
        sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        data = sock.recv(64)
        if data.startswith(b"HTTP/") or data.lstrip()[:1] == b"<":
            result["protocol"] = "http"  # an HTTP/1 server (an HTML error page: Python's http.server)
        elif looks_like_grpc(data):
            result["protocol"] = "grpc"
        else:
            result["protocol"] = "unknown"
    except (OSError, socket.timeout):
        result["protocol"] = "unknown"
    finally:
        try:
            sock.close()
        except OSError:
            pass
    return result


def _socket_error_text(exc):
    if isinstance(exc, socket.timeout):
        return "timed out"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    return getattr(exc, "strerror", None) or str(exc) or exc.__class__.__name__


def port_hint_for(url):
    """The FAQ Q1 hint when `url` uses a port that is usually the GCS port."""
    try:
        port = url_port(url)
    except ValueError:
        return None
    if port in GCS_PORTS:
        return "port %d is usually the GCS port, not the dashboard. %s" % (port, PORT_HINT)
    return None


class RayClient:
    """Requests to one Ray dashboard. Every failure raises RayApiError."""

    def __init__(self, url=DEFAULT_DASHBOARD_URL, timeout=30, use_proxy=False, validate_certs=True, headers=None):
        self.url = normalize_url(url)
        self.timeout = timeout
        self.use_proxy = use_proxy
        self.validate_certs = validate_certs
        self.headers = dict(headers or {})

    # -- transport -----------------------------------------------------------
    def request(self, method, path, body=None, data=None, content_type=None, expect="json", ok_404=False, timeout=None):
        """Send one request. body: JSON-serialisable (sent as application/json); data: raw bytes.
        expect: 'json' | 'text' | 'none'. With ok_404, a 404 returns None."""
        url = self.url + path
        headers = dict(self.headers)
        payload = None
        if body is not None:
            payload = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        elif data is not None:
            payload = data
            headers["Content-Type"] = content_type or "application/octet-stream"
        try:
            response = open_url(
                url,
                data=payload,
                method=method,
                headers=headers,
                timeout=timeout or self.timeout,
                use_proxy=self.use_proxy,
                validate_certs=self.validate_certs,
                follow_redirects="none",
            )
            raw = response.read()
        except HTTPError as exc:
            text = _read_error_body(exc)
            if exc.code == 404 and ok_404:
                return None
            raise RayApiError(
                "Ray dashboard answered HTTP %s" % exc.code,
                url=url,
                method=method,
                status=exc.code,
                body=text,
                hint=self._hint_for_status(exc.code, path, text),
            ) from exc
        except Exception as exc:  # connection problems of every kind
            raise self._transport_error(exc, url, method) from exc
        if expect == "none":
            return raw
        text = raw.decode("utf-8", errors="replace")
        if expect == "text":
            return text
        try:
            return json.loads(text) if text.strip() else None
        except ValueError:
            raise RayApiError(
                "Ray dashboard sent a body that is not JSON",
                url=url,
                method=method,
                status=200,
                body=text[:2000],
                hint="is %s really the Ray dashboard? %s" % (self.url, PROXY_HINT),
                kind="decode",
            ) from None

    def _hint_for_status(self, status, path, text):
        if status == 404 and path.startswith("/api/version"):
            return "%s answers HTTP but has no /api/version: it is not a Ray dashboard. %s" % (self.url, PORT_HINT)
        if status in (502, 503, 504):
            return "Ray's dashboard is not ready or a proxy answered. " + PROXY_HINT
        if status in (301, 302, 303, 307, 308, 407):
            return PROXY_HINT
        return port_hint_for(self.url)

    def _transport_error(self, exc, url, method):
        name = exc.__class__.__name__
        reason = getattr(exc, "reason", None)
        inner = reason if isinstance(reason, BaseException) else exc
        text = str(exc)
        first = getattr(exc, "line", None) or (exc.args[0] if getattr(exc, "args", None) else "")
        if name in ("BadStatusLine", "RemoteDisconnected", "IncompleteRead", "LineTooLong") or "HTTP/0.9" in text:
            grpc = looks_like_grpc(first if isinstance(first, (str, bytes)) else "")
            message = (
                "%s answers with HTTP/2 frames (gRPC): that is Ray's GCS port, not the dashboard" % self.url
                if grpc
                else "%s does not answer HTTP/1.1 (%s)" % (self.url, name)
            )
            return RayApiError(message, url=url, method=method, hint=PORT_HINT, kind="protocol")
        if isinstance(inner, (socket.timeout,)) or "timed out" in text:
            return RayApiError(
                "no answer from %s within %ss" % (self.url, self.timeout),
                url=url,
                method=method,
                hint="the head may be overloaded or a firewall drops the packets. "
                + (port_hint_for(self.url) or PORT_HINT),
                kind="timeout",
            )
        if isinstance(inner, ConnectionRefusedError) or "refused" in text.lower():
            return RayApiError(
                "cannot connect to %s: connection refused" % self.url,
                url=url,
                method=method,
                hint=port_hint_for(self.url) or DOWN_HINT,
                kind="connect",
            )
        return RayApiError(
            "cannot reach %s: %s"
            % (self.url, _socket_error_text(inner) if isinstance(inner, OSError) else text or name),
            url=url,
            method=method,
            hint=port_hint_for(self.url) or DOWN_HINT,
            kind="connect",
        )

    # -- cluster -----------------------------------------------------------
    def version(self):
        """{version, ray_version, ray_commit, session_name}."""
        data = self.request("GET", "/api/version")
        if not isinstance(data, dict) or "ray_version" not in data:
            raise RayApiError(
                "%s/api/version did not return Ray's version document" % self.url,
                url=self.url + "/api/version",
                status=200,
                body=json.dumps(data)[:2000],
                hint=PORT_HINT,
                kind="decode",
            )
        return data

    def gcs_healthz(self):
        """True when the dashboard reaches the GCS (body 'success')."""
        return self.request("GET", "/api/gcs_healthz", expect="text").strip() == "success"

    def nodes(self):
        """Every node Ray knows (alive and dead), normalised:
        {node_id, ip, hostname, alive, state, is_head, resources: {GPU, CPU}, resources_total}.

        Uses the state API GET /api/v0/nodes (per-node resources_total); falls back
        to the dashboard's GET /nodes?view=summary when the state API fails."""
        try:
            data = self.request("GET", "/api/v0/nodes?limit=10000&detail=false")
            if isinstance(data, dict) and data.get("result") is not False:
                rows = ((data.get("data") or {}).get("result") or {}).get("result")
                if isinstance(rows, list):
                    return [_node_from_state_api(row) for row in rows]
        except RayApiError as exc:
            if exc.kind != "http":
                raise
        data = self.request("GET", "/nodes?view=summary")
        rows = ((data or {}).get("data") or {}).get("summary")
        if not isinstance(rows, list):
            raise RayApiError(
                "neither /api/v0/nodes nor /nodes?view=summary returned a node list",
                url=self.url + "/nodes?view=summary",
                status=200,
                body=json.dumps(data)[:2000],
                kind="decode",
            )
        return [_node_from_summary(row) for row in rows]

    # -- jobs --------------------------------------------------------------
    def list_jobs(self):
        data = self.request("GET", "/api/jobs/")
        if not isinstance(data, list):
            raise RayApiError(
                "GET /api/jobs/ did not return a list",
                url=self.url + "/api/jobs/",
                status=200,
                body=json.dumps(data)[:2000],
                kind="decode",
            )
        return data

    def get_job(self, submission_id):
        """JobDetails, or None when Ray does not know the id (404)."""
        return self.request("GET", "/api/jobs/%s" % quote(submission_id, safe=""), ok_404=True)

    def submit_job(self, entrypoint, submission_id, runtime_env=None, metadata=None, entrypoint_resources=None):
        """Submit once: GET first and POST only when the id is unknown.

        Returns {"submitted": bool, "duplicate": bool, "submission_id", "job": JobDetails or None}.
        An existing id (found by the GET, or Ray's 500 "already exists" on the POST) is
        reported as duplicate=True and never posted again."""
        existing = self.get_job(submission_id)
        if existing is not None:
            return {"submitted": False, "duplicate": True, "submission_id": submission_id, "job": existing}
        body = {"entrypoint": entrypoint, "submission_id": submission_id}
        if runtime_env:
            body["runtime_env"] = runtime_env
        if metadata:
            body["metadata"] = {str(k): str(v) for k, v in metadata.items()}
        if entrypoint_resources:
            body["entrypoint_resources"] = entrypoint_resources
        try:
            self.request("POST", "/api/jobs/", body=body)
        except RayApiError as exc:
            if exc.status == 500 and "already exists" in exc.body:
                return {
                    "submitted": False,
                    "duplicate": True,
                    "submission_id": submission_id,
                    "job": self.get_job(submission_id),
                }
            if exc.status == 400 and not exc.hint:
                exc.hint = "Ray rejected the request body (entrypoint, runtime_env or metadata); see the error above"
            raise
        return {
            "submitted": True,
            "duplicate": False,
            "submission_id": submission_id,
            "job": self.get_job(submission_id),
        }

    def stop_job(self, submission_id):
        """True when Ray stopped the job, False when it had already ended."""
        data = self.request("POST", "/api/jobs/%s/stop" % quote(submission_id, safe=""))
        return bool((data or {}).get("stopped"))

    def job_logs(self, submission_id):
        """The job's whole driver log (text)."""
        data = self.request("GET", "/api/jobs/%s/logs" % quote(submission_id, safe=""))
        return (data or {}).get("logs") or ""

    # -- packages ------------------------------------------------------------
    def package_exists(self, uri):
        protocol, name = split_package_uri(uri)
        return (
            self.request("GET", "/api/packages/%s/%s" % (protocol, quote(name)), expect="none", ok_404=True) is not None
        )

    def upload_package(self, uri, data, timeout=None):
        protocol, name = split_package_uri(uri)
        self.request(
            "PUT",
            "/api/packages/%s/%s" % (protocol, quote(name)),
            data=data,
            content_type="application/zip",
            expect="none",
            timeout=timeout or max(self.timeout, 300),
        )

    def upload_working_dir(self, directory, excludes=None):
        """Zip a local working_dir (see build_package) and upload it unless Ray has it.

        Returns {"uri", "uploaded": bool, "bytes", "files", "directory"}."""
        package = build_package(directory, excludes)
        uploaded = False
        if not self.package_exists(package["uri"]):
            self.upload_package(package["uri"], package["data"])
            uploaded = True
        return {
            "uri": package["uri"],
            "uploaded": uploaded,
            "bytes": len(package["data"]),
            "files": package["files"],
            "directory": package["directory"],
        }


def _read_error_body(exc):
    try:
        raw = exc.read()
    except Exception:
        raw = b""
    if isinstance(raw, bytes):
        return raw.decode("utf-8", errors="replace")
    return str(raw or "")


def _resources(total):
    total = total or {}
    return {"GPU": float(total.get("GPU", 0) or 0), "CPU": float(total.get("CPU", 0) or 0)}


def _node_from_state_api(row):
    state = row.get("state") or "UNKNOWN"
    return {
        "node_id": row.get("node_id"),
        "ip": row.get("node_ip"),
        "hostname": row.get("node_name"),
        "state": state,
        "alive": state == "ALIVE",
        "is_head": bool(row.get("is_head_node")),
        "resources": _resources(row.get("resources_total")),
        "resources_total": row.get("resources_total") or {},
    }


def _node_from_summary(row):
    raylet = row.get("raylet") or {}
    state = raylet.get("state") or "UNKNOWN"
    return {
        "node_id": raylet.get("nodeId"),
        "ip": raylet.get("nodeManagerAddress") or row.get("ip"),
        "hostname": row.get("hostname") or raylet.get("nodeManagerHostname"),
        "state": state,
        "alive": state == "ALIVE",
        "is_head": bool(raylet.get("isHeadNode")),
        "resources": _resources(raylet.get("resourcesTotal")),
        "resources_total": raylet.get("resourcesTotal") or {},
    }


# -- working_dir packages ------------------------------------------------------

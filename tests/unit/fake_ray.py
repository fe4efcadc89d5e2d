"""A fake Ray 2.60 dashboard/Jobs API and GCS port, for unit tests and the rerun benchmark.

FakeRay is an http.server on 127.0.0.1 shaped from the responses recorded on a real Ray 2.60.0
head (tests/unit/data/ray/responses.json): JSON bodies on success, text/plain bodies on every
error, 404 for unknown ids, 500 "already exists" for a submission id posted twice,
PENDING -> RUNNING -> SUCCEEDED / FAILED / STOPPED, the logs, package and node endpoints.
FakeGcs answers like the GCS port: an HTTP/2 SETTINGS frame (recorded bytes)."""

from __future__ import annotations

import copy
import json
import socket
import socketserver
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse

from ansible_collections.mtslime.posttrain.plugins.module_utils.ray import api as ray_api

DATA = Path(__file__).parent / "data" / "ray"
RECORDED = json.loads((DATA / "responses.json").read_text())["samples"]

MESSAGES = {
    "PENDING": json.loads(RECORDED["job_pending"]["body"])["message"],
    "RUNNING": json.loads(RECORDED["job_running"]["body"])["message"],
    "SUCCEEDED": json.loads(RECORDED["job_succeeded"]["body"])["message"],
    "STOPPED": json.loads(RECORDED["job_stopped"]["body"])["message"],
}
JOB_TEMPLATE = json.loads(RECORDED["job_running"]["body"])
NODE_TEMPLATE = json.loads(RECORDED["state_nodes"]["body"])["data"]["result"]["result"][0]
SUMMARY_TEMPLATE = json.loads(RECORDED["nodes_summary"]["body"])["data"]["summary"][0]
DUPLICATE_BODY = RECORDED["submit_duplicate"]["body"]
GCS_REPLY = bytes.fromhex(RECORDED["gcs_port_http_reply"]["body_hex"])


def node(ip, gpus=8, cpus=64, head=False, state="ALIVE", node_id=None):
    entry = copy.deepcopy(NODE_TEMPLATE)
    entry.update(
        node_id=node_id or ("n%s" % ip.replace(".", "")).ljust(56, "0"),
        node_ip=ip,
        node_name=ip,
        is_head_node=head,
        state=state,
        resources_total={"node:%s" % ip: 1.0, "GPU": float(gpus), "CPU": float(cpus), "memory": 1.0e11},
    )
    if not head:
        entry["resources_total"].pop("node:__internal_head__", None)
    return entry


class FakeRay:
    """A fake Ray dashboard. Jobs move PENDING -> RUNNING after `start_after` GETs of the
    job (None: stay PENDING until set_status); a stop request makes a job STOPPED after
    `stop_after` more GETs (None: the job ignores stops)."""

    def __init__(self, nodes=None, start_after=None, stop_after=1):
        self.jobs = {}
        self.logs = {}
        self.packages = {}
        self.requests = []
        self.gets = {}
        self.stopping = {}
        self.start_after = start_after
        self.stop_after = stop_after
        self.state_api = True
        self.healthz = "success"
        self.nodes = nodes if nodes is not None else [node("10.121.38.2", head=True)]
        self._clock = 1796014000000
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _send(self, status, body=b"", ctype=None):
                if isinstance(body, str):
                    body = body.encode("utf-8")
                self.send_response(status)
                if ctype:
                    self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def json(self, data, status=200):
                self._send(status, json.dumps(data), "application/json; charset=utf-8")

            def text(self, status, text):
                self._send(status, text, "text/plain; charset=utf-8")

            def _body(self):
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else b""

            def do_GET(self):
                fake.requests.append(("GET", self.path))
                with fake.lock:
                    fake.route_get(self)

            def do_POST(self):
                data = self._body()
                fake.requests.append(("POST", self.path))
                with fake.lock:
                    fake.route_post(self, data)

            def do_PUT(self):
                data = self._body()
                fake.requests.append(("PUT", self.path))
                with fake.lock:
                    fake.route_put(self, data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.server.server_address[1]

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    # -- state ---------------------------------------------------------------
    def tick(self):
        self._clock += 1000
        return self._clock

    def add_job(
        self,
        sid,
        status="RUNNING",
        metadata=None,
        entrypoint="python3 train.py --load /data/LLMs/MCORE/Qwen3-8B_slime",
        runtime_env=None,
        start_time=None,
        exit_code=None,
        type_="SUBMISSION",
    ):
        job = copy.deepcopy(JOB_TEMPLATE)
        job.update(
            type=type_,
            submission_id=sid,
            entrypoint=entrypoint,
            metadata=metadata or {},
            runtime_env=runtime_env,
            start_time=start_time or self.tick(),
            end_time=None,
            driver_exit_code=None,
        )
        if type_ == "DRIVER":
            job["job_id"] = "01000000"
            job["submission_id"] = None
        self.jobs[sid] = job
        self.set_status(sid, status, exit_code=exit_code)
        return job

    def set_status(self, sid, status, exit_code=None):
        job = self.jobs[sid]
        job["status"] = status
        if status == "FAILED":
            code = 1 if exit_code is None else exit_code
            job["message"] = (
                "Job entrypoint command failed with exit code %d, last available logs (truncated to 20,000 chars):\n%s"
                % (
                    code,
                    self.logs.get(sid, "")[-200:],
                )
            )
            job["error_type"] = "JOB_ENTRYPOINT_COMMAND_ERROR"
            job["driver_exit_code"] = code
        else:
            job["message"] = MESSAGES[status]
            job["error_type"] = None
            job["driver_exit_code"] = 0 if status == "SUCCEEDED" else None
        job["end_time"] = self.tick() if status in ray_api.TERMINAL else None

    def _advance(self, sid):
        job = self.jobs[sid]
        self.gets[sid] = self.gets.get(sid, 0) + 1
        if job["status"] == "PENDING" and self.start_after is not None and self.gets[sid] > self.start_after:
            self.set_status(sid, "RUNNING")
        if sid in self.stopping and job["status"] in ray_api.ACTIVE:
            self.stopping[sid] -= 1
            if self.stopping[sid] < 0:
                self.set_status(sid, "STOPPED")
                del self.stopping[sid]

    def submitted(self):
        return [path for method, path in self.requests if method == "POST" and path == "/api/jobs/"]

    # -- routes --------------------------------------------------------------
    def route_get(self, h):
        parsed = urlparse(h.path)
        path = parsed.path
        if path == "/api/version":
            return h.json(json.loads(RECORDED["version"]["body"]))
        if path == "/api/gcs_healthz":
            return h._send(200, self.healthz, "application/text; charset=utf-8")
        if path == "/api/v0/nodes":
            if not self.state_api:
                return h.text(500, "Traceback (most recent call last):\nRuntimeError: state API unavailable\n")
            doc = json.loads(RECORDED["state_nodes"]["body"])
            doc["data"]["result"]["result"] = self.nodes
            doc["data"]["result"]["total"] = len(self.nodes)
            return h.json(doc)
        if path == "/nodes":
            doc = json.loads(RECORDED["nodes_summary"]["body"])
            rows = []
            for entry in self.nodes:
                row = copy.deepcopy(SUMMARY_TEMPLATE)
                row["ip"] = entry["node_ip"]
                row["raylet"].update(
                    nodeId=entry["node_id"],
                    nodeManagerAddress=entry["node_ip"],
                    isHeadNode=entry["is_head_node"],
                    state=entry["state"],
                    resourcesTotal=dict(entry["resources_total"], **{"objectStoreMemory": 1.0}),
                )
                rows.append(row)
            doc["data"]["summary"] = rows
            return h.json(doc)
        if path == "/api/jobs/":
            return h.json([self.jobs[k] for k in self.jobs])
        if path.startswith("/api/packages/"):
            protocol, name = path[len("/api/packages/") :].split("/", 1)
            name = unquote(name)
            if name in self.packages:
                return h._send(200)
            return h.text(404, "Package %s://%s does not exist" % (protocol, name))
        if path.startswith("/api/jobs/"):
            rest = unquote(path[len("/api/jobs/") :])
            logs = rest.endswith("/logs")
            sid = rest[: -len("/logs")] if logs else rest
            if sid not in self.jobs:
                return h.text(404, "Job %s does not exist" % sid)
            if logs:
                return h.json({"logs": self.logs.get(sid, "")})
            self._advance(sid)
            return h.json(self.jobs[sid])
        return h.text(404, "404: Not Found")

    def route_post(self, h, data):
        path = urlparse(h.path).path
        if path == "/api/jobs/":
            try:
                body = json.loads(data.decode("utf-8"))
            except ValueError:
                return h.text(500, RECORDED["submit_not_json"]["body"])
            if "entrypoint" not in body:
                return h.text(400, RECORDED["submit_missing_entrypoint"]["body"])
            sid = body.get("submission_id") or "raysubmit_fake%d" % len(self.jobs)
            if sid in self.jobs:
                return h.text(500, DUPLICATE_BODY.replace("rec-attempt-1", sid))
            self.add_job(sid, "PENDING", body.get("metadata"), body["entrypoint"], body.get("runtime_env"))
            return h.json({"job_id": sid, "submission_id": sid})
        if path.startswith("/api/jobs/") and path.endswith("/stop"):
            sid = unquote(path[len("/api/jobs/") : -len("/stop")])
            if sid not in self.jobs:
                return h.text(404, "Job %s does not exist" % sid)
            if self.jobs[sid]["status"] in ray_api.TERMINAL:
                return h.json({"stopped": False})
            if self.stop_after is not None:
                self.stopping[sid] = self.stop_after
            return h.json({"stopped": True})
        return h.text(404, "404: Not Found")

    def route_put(self, h, data):
        path = urlparse(h.path).path
        if path.startswith("/api/packages/"):
            protocol, name = path[len("/api/packages/") :].split("/", 1)
            self.packages[unquote(name)] = data
            return h._send(200)
        return h.text(404, "404: Not Found")


class FakeGcs:
    """Listens like Ray's GCS port: whatever arrives, answers an HTTP/2 SETTINGS frame."""

    def __init__(self):
        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                try:
                    self.request.settimeout(2)
                    self.request.recv(1024)
                    self.request.sendall(GCS_REPLY)
                    time.sleep(0.05)
                except OSError:
                    pass

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def port(self):
        return self.server.server_address[1]

    @property
    def address(self):
        return "127.0.0.1:%d" % self.port

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def free_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port

"""module_utils/ray_api.py against a fake Ray 2.60 dashboard.

FakeRay (also used by test_ray_cluster, test_ray_job and test_train_progress) is an
http.server on 127.0.0.1 shaped from the responses recorded on a real Ray 2.60.0 head
(tests/unit/data/ray/responses.json): JSON bodies on success, text/plain bodies on
every error, 404 for unknown ids, 500 "already exists" for a submission id posted twice,
PENDING -> RUNNING -> SUCCEEDED / FAILED / STOPPED, the logs, package and node endpoints.
FakeGcs answers like the GCS port: an HTTP/2 SETTINGS frame (recorded bytes)."""

from __future__ import annotations

import copy
import io
import json
import os
import socket
import socketserver
import stat
import threading
import time
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from ansible_collections.mtslime.posttrain.plugins.module_utils import ray_api
from ansible_collections.mtslime.posttrain.plugins.module_utils.ray_api import (
    PORT_HINT,
    RayApiError,
    RayClient,
    build_package,
    collect_files,
    normalize_url,
    parse_hostport,
    probe_port,
)

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


@pytest.fixture
def fake():
    server = FakeRay()
    yield server
    server.close()


@pytest.fixture
def gcs():
    server = FakeGcs()
    yield server
    server.close()


# -- the recorded samples -----------------------------------------------------------
def test_recorded_samples_have_the_measured_shapes():
    assert RECORDED["job_404"]["status"] == 404 and RECORDED["job_404"]["content_type"].startswith("text/plain")
    assert RECORDED["submit_duplicate"]["status"] == 500 and "already exists" in RECORDED["submit_duplicate"]["body"]
    assert RECORDED["submit_missing_entrypoint"]["status"] == 400
    assert RECORDED["stop_finished"]["body"] == '{"stopped": false}'
    assert json.loads(RECORDED["stop_running"]["body"]) == {"stopped": True}
    assert RECORDED["package_get_missing"]["status"] == 404 and RECORDED["package_put"]["status"] == 200
    assert RECORDED["package_get_present"]["status"] == 200
    for name in ("job_pending", "job_running", "job_succeeded", "job_failed", "job_stopped"):
        assert set(JOB_TEMPLATE) == set(json.loads(RECORDED[name]["body"])), name
    failed = json.loads(RECORDED["job_failed"]["body"])
    assert failed["error_type"] == "JOB_ENTRYPOINT_COMMAND_ERROR" and failed["driver_exit_code"] == 3
    wd = json.loads(RECORDED["job_working_dir_succeeded"]["body"])
    assert wd["runtime_env"]["working_dir"].startswith("gcs://_ray_pkg_") and wd["status"] == "SUCCEEDED"
    assert "marker-content" in json.loads(RECORDED["logs_working_dir"]["body"])["logs"]
    assert ray_api.looks_like_grpc(GCS_REPLY)


# -- URLs and addresses -------------------------------------------------------------
def test_normalize_url_adds_the_scheme_and_rejects_others():
    assert normalize_url("127.0.0.1:8772/") == "http://127.0.0.1:8772"
    assert normalize_url("http://10.0.0.1:8772") == "http://10.0.0.1:8772"
    with pytest.raises(ValueError, match="dashboard_url.*ray"):
        normalize_url("ray://127.0.0.1:10001")
    with pytest.raises(ValueError, match="empty"):
        normalize_url("")


def test_parse_hostport():
    assert parse_hostport("10.0.0.1:64379") == ("10.0.0.1", 64379)
    assert parse_hostport("[::1]:64379") == ("::1", 64379)
    with pytest.raises(ValueError, match="no port"):
        parse_hostport("10.0.0.1")
    with pytest.raises(ValueError, match="is a URL"):
        parse_hostport("http://10.0.0.1:8772")


# -- cluster endpoints -----------------------------------------------------------------
def test_version_and_gcs_healthz(fake):
    client = RayClient(fake.url)
    assert client.version()["ray_version"] == "2.60.0"
    assert client.gcs_healthz() is True
    fake.healthz = "failed"
    assert client.gcs_healthz() is False


def test_nodes_from_the_state_api(fake):
    fake.nodes = [node("10.0.0.1", head=True), node("10.0.0.2", gpus=4, state="DEAD")]
    nodes = RayClient(fake.url).nodes()
    assert [(n["ip"], n["alive"], n["is_head"], n["resources"]["GPU"]) for n in nodes] == [
        ("10.0.0.1", True, True, 8.0),
        ("10.0.0.2", False, False, 4.0),
    ]
    assert ("GET", "/api/v0/nodes?limit=10000&detail=false") in fake.requests


def test_nodes_fall_back_to_the_summary_view(fake):
    fake.state_api = False
    fake.nodes = [node("10.0.0.1", head=True, cpus=32)]
    nodes = RayClient(fake.url).nodes()
    assert nodes[0]["ip"] == "10.0.0.1" and nodes[0]["resources"] == {"GPU": 8.0, "CPU": 32.0} and nodes[0]["is_head"]
    assert ("GET", "/nodes?view=summary") in fake.requests


def test_real_recorded_node_documents_parse():
    state = json.loads(RECORDED["state_nodes"]["body"])["data"]["result"]["result"][0]
    summary = json.loads(RECORDED["nodes_summary"]["body"])["data"]["summary"][0]
    a = ray_api._node_from_state_api(state)
    b = ray_api._node_from_summary(summary)
    assert a["ip"] == b["ip"] == "192.0.2.2"
    assert a["resources"] == b["resources"] == {"GPU": 8.0, "CPU": 4.0}
    assert a["alive"] and b["alive"] and a["is_head"] and b["is_head"]


# -- jobs -----------------------------------------------------------------------------
def test_get_job_is_none_on_404(fake):
    assert RayClient(fake.url).get_job("nope") is None


def test_submit_gets_first_and_posts_once(fake):
    client = RayClient(fake.url)
    first = client.submit_job(
        "python3 train.py", "exp-attempt-1", runtime_env={"env_vars": {"A": "1"}}, metadata={"n": 1}
    )
    assert first["submitted"] and not first["duplicate"] and first["job"]["status"] == "PENDING"
    assert fake.jobs["exp-attempt-1"]["metadata"] == {"n": "1"}
    second = client.submit_job("python3 train.py", "exp-attempt-1")
    assert second == {
        "submitted": False,
        "duplicate": True,
        "submission_id": "exp-attempt-1",
        "job": fake.jobs["exp-attempt-1"],
    }
    assert len(fake.submitted()) == 1


def test_a_500_already_exists_is_a_duplicate_not_a_retry(fake, monkeypatch):
    client = RayClient(fake.url)
    fake.add_job("exp-attempt-1", "RUNNING")
    real_get = client.get_job
    calls = []

    def get_job(sid):  # the job appears between the GET and the POST (a concurrent submitter)
        calls.append(sid)
        return None if len(calls) == 1 else real_get(sid)

    monkeypatch.setattr(client, "get_job", get_job)
    answer = client.submit_job("python3 train.py", "exp-attempt-1")
    assert answer["duplicate"] and not answer["submitted"] and answer["job"]["status"] == "RUNNING"
    assert len(fake.submitted()) == 1  # one POST, answered 500, not retried


def test_errors_carry_url_status_and_the_text_body(fake):
    client = RayClient(fake.url)
    with pytest.raises(RayApiError) as info:
        client.request("POST", "/api/jobs/", body={"submission_id": "x"})
    error = info.value
    assert error.status == 400 and error.url == fake.url + "/api/jobs/" and error.method == "POST"
    assert "missing 1 required positional argument: 'entrypoint'" in error.summary
    assert "HTTP 400" in str(error) and fake.url in str(error)
    assert error.to_dict()["body"].startswith("Traceback")
    with pytest.raises(RayApiError) as info:
        client.stop_job("nope")
    assert info.value.status == 404 and info.value.summary == "Job nope does not exist"
    with pytest.raises(RayApiError) as info:
        client.job_logs("nope")
    assert info.value.status == 404


def test_stop_and_logs(fake):
    client = RayClient(fake.url)
    fake.add_job("exp-attempt-1", "RUNNING")
    fake.logs["exp-attempt-1"] = "hello\n"
    assert client.job_logs("exp-attempt-1") == "hello\n"
    assert client.stop_job("exp-attempt-1") is True
    client.get_job("exp-attempt-1")
    assert client.get_job("exp-attempt-1")["status"] == "STOPPED"
    assert client.stop_job("exp-attempt-1") is False


def test_list_jobs(fake):
    fake.add_job("a", "SUCCEEDED")
    fake.add_job("b", "FAILED")
    assert [j["submission_id"] for j in RayClient(fake.url).list_jobs()] == ["a", "b"]


# -- port confusion (FAQ Q1) --------------------------------------------------------
def test_the_gcs_port_given_as_dashboard_is_recognised(gcs):
    with pytest.raises(RayApiError) as info:
        RayClient("http://127.0.0.1:%d" % gcs.port, timeout=3).version()
    error = info.value
    assert error.kind == "protocol" and "GCS port" in error.message
    assert error.hint == PORT_HINT and "8772" in str(error) and "64379" in str(error)


def test_nothing_listening_gives_the_down_hint():
    port = free_port()
    with pytest.raises(RayApiError) as info:
        RayClient("http://127.0.0.1:%d" % port, timeout=3).version()
    assert info.value.kind == "connect" and "connection refused" in str(info.value)
    assert "ray start --head" in info.value.hint


def test_a_gcs_like_port_number_gets_the_port_hint():
    assert "GCS port" in ray_api.port_hint_for("http://127.0.0.1:64379")
    assert ray_api.port_hint_for("http://127.0.0.1:8772") is None


def test_probe_port_tells_grpc_from_http(gcs, fake):
    assert probe_port("127.0.0.1", gcs.port)["protocol"] == "grpc"
    assert probe_port("127.0.0.1", int(fake.url.rsplit(":", 1)[1]))["protocol"] == "http"
    closed = probe_port("127.0.0.1", free_port())
    assert not closed["open"] and closed["error"] == "connection refused"


# -- working_dir packages -----------------------------------------------------------
def make_tree(root):
    (root / "sub").mkdir(parents=True)
    (root / "logs").mkdir()
    (root / ".git").mkdir()
    (root / "empty").mkdir()
    (root / "deep" / "cache").mkdir(parents=True)
    (root / "train.py").write_text("print('train')\n")
    (root / "run.sh").write_text("#!/bin/sh\necho run\n")
    (root / "run.sh").chmod(0o755)
    (root / "sub" / "a.txt").write_text("a\n")
    (root / "sub" / "keep.pyc").write_text("kept by !\n")
    (root / "sub" / "x.pyc").write_text("pyc\n")
    (root / "logs" / "x.log").write_text("log\n")
    (root / ".git" / "HEAD").write_text("ref\n")
    (root / "deep" / "cache" / "blob.bin").write_text("blob\n")
    (root / "deep" / "keep.txt").write_text("k\n")
    (root / "big.ckpt").write_text("ckpt\n")
    (root / ".gitignore").write_text("# comment\nlogs/\n*.pyc\n!keep.pyc\n")
    (root / "deep" / ".rayignore").write_text("cache/\n")


def test_collect_files_follows_excludes_gitignore_and_rayignore(tmp_path):
    make_tree(tmp_path)
    files = collect_files(str(tmp_path), excludes=["*.ckpt", str(tmp_path / "sub" / "a.txt")])
    assert files == [".gitignore", "deep/.rayignore", "deep/keep.txt", "empty/", "run.sh", "sub/keep.pyc", "train.py"]


def test_build_package_is_deterministic_and_keeps_modes(tmp_path):
    make_tree(tmp_path)
    first = build_package(str(tmp_path), excludes=["*.ckpt"])
    os.utime(tmp_path / "train.py", (1, 1))
    second = build_package(str(tmp_path), excludes=["*.ckpt"])
    assert (
        first["uri"] == second["uri"] and first["uri"].startswith("gcs://_ray_pkg_") and first["uri"].endswith(".zip")
    )
    archive = zipfile.ZipFile(io.BytesIO(first["data"]))
    names = archive.namelist()
    assert "run.sh" in names and "empty/" in names and not any(n.startswith(".git/") for n in names)
    assert stat.S_IMODE(archive.getinfo("run.sh").external_attr >> 16) == 0o755
    (tmp_path / "train.py").write_text("print('changed')\n")
    assert build_package(str(tmp_path), excludes=["*.ckpt"])["uri"] != first["uri"]


def test_build_package_refuses_what_ray_would_refuse(tmp_path):
    (tmp_path / "a.bin").write_bytes(os.urandom(4096))
    with pytest.raises(RayApiError, match="over Ray's limit.*excludes"):
        build_package(str(tmp_path), max_bytes=1024)
    with pytest.raises(RayApiError, match="not a directory"):
        build_package(str(tmp_path / "missing"))


def test_upload_working_dir_puts_once(fake, tmp_path):
    make_tree(tmp_path)
    client = RayClient(fake.url)
    first = client.upload_working_dir(str(tmp_path))
    again = client.upload_working_dir(str(tmp_path))
    assert first["uploaded"] and not again["uploaded"] and first["uri"] == again["uri"]
    name = first["uri"][len("gcs://") :]
    assert [m for m, p in fake.requests if m == "PUT"] == ["PUT"]
    assert zipfile.ZipFile(io.BytesIO(fake.packages[name])).read("train.py") == b"print('train')\n"


def test_split_package_uri():
    assert ray_api.split_package_uri("gcs://_ray_pkg_ab.zip") == ("gcs", "_ray_pkg_ab.zip")
    with pytest.raises(ValueError):
        ray_api.split_package_uri("/tmp/x.zip")


def test_fake_state_machine_follows_ray():
    """PENDING -> RUNNING on its own (as Ray does about a second after the submission), then the test ends it."""
    server = FakeRay(start_after=1)
    try:
        client = RayClient(server.url)
        assert client.submit_job("python3 train.py", "exp-attempt-1")["job"]["status"] == "PENDING"
        assert [client.get_job("exp-attempt-1")["status"] for _ in range(2)] == ["RUNNING", "RUNNING"]
        server.set_status("exp-attempt-1", "FAILED", exit_code=3)
        failed = client.get_job("exp-attempt-1")
        assert failed["status"] == "FAILED" and failed["driver_exit_code"] == 3 and failed["end_time"]
        assert failed["error_type"] == "JOB_ENTRYPOINT_COMMAND_ERROR"
    finally:
        server.close()

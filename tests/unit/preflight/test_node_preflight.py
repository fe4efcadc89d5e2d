"""node_preflight, run in-process: stand-in accelerator tools printing recorded outputs, a unix-socket
HTTP server standing in for the Docker engine, real listening sockets, real disks."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading

import pytest
from ansible_collections.mtslime.posttrain.plugins.module_utils.preflight import docker_engine as dengine
from ansible_collections.mtslime.posttrain.plugins.module_utils.preflight import disk as pdisk
from ansible_collections.mtslime.posttrain.plugins.module_utils.preflight import ports as pports
from ansible_collections.mtslime.posttrain.plugins.modules import node_preflight as npf
from gpu_tools import no_tools, write_tool

DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "accelerator")
GIB = 1024**3


def sample(name):
    with open(os.path.join(DATA, name), encoding="utf-8") as handle:
        return handle.read()


def eight_cards_json(total="49152MiB", name="MTT S4000"):
    doc = json.loads(sample("mthreads-gmi_q_json_s5000.json"))
    first = doc["GPU"][0]
    cards = []
    for i in range(8):
        card = dict(
            first, Index=str(i), **{"Product Name": name, "GPU UUID": "5e1f0a00-0000-4000-8000-0000000040%02d" % i}
        )
        card["FB Memory Usage"] = dict(first["FB Memory Usage"], Total=total)
        cards.append(card)
    doc["GPU"] = cards
    return json.dumps(doc)


# ---------------------------------------------------------------- a Docker engine on a unix socket


class EngineHandler(http.server.BaseHTTPRequestHandler):
    answers = {}

    def do_GET(self):
        status, body = self.server.answers.get(self.path, (404, '{"message":"page not found"}'))
        payload = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain" if self.path == "/_ping" else "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def address_string(self):
        return "unix"

    def log_message(self, *args):
        pass


class UnixEngine(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


HEALTHY_ENGINE = {
    "/_ping": (200, "OK"),
    "/version": (200, json.dumps({"Version": "27.3.1", "ApiVersion": "1.47", "Os": "linux"})),
    "/info": (
        200,
        json.dumps({"Runtimes": {"runc": {"path": "runc"}, "mthreads": {"path": "mthreads-container-runtime"}}}),
    ),
}


@pytest.fixture
def engine():
    """start(answers) -> `unix://...` address of a fake Docker engine answering GETs from `answers`."""
    directory = tempfile.mkdtemp(prefix="dock", dir="/tmp")  # unix socket paths must stay short
    servers = []

    def start(answers=None):
        path = os.path.join(directory, "docker%d.sock" % len(servers))
        server = UnixEngine(path, EngineHandler)
        server.answers = HEALTHY_ENGINE if answers is None else answers
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
        return "unix://" + path

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def node(monkeypatch, tmp_path):
    """PATH holds only `sh`; no vendor install directories are searched."""
    no_tools(monkeypatch, tmp_path / "bin")
    os.symlink("/bin/sh", tmp_path / "bin" / "sh")
    return tmp_path


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe_socket:
        probe_socket.bind(("127.0.0.1", 0))
        return probe_socket.getsockname()[1]


@pytest.fixture
def listener():
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    yield sock.getsockname()[1]
    sock.close()


# ---------------------------------------------------------------- whole module


def test_ready_node(run_module, node, engine):
    tools = write_tool(node / "tools", "mthreads-gmi", {"-q --json": (0, eight_cards_json())})
    port = free_port()
    args = {
        "accelerator": {"vendor": "musa", "tool_dir": tools, "expected_count": 8, "expected_memory_mib": 49152},
        "docker": {"socket": engine()},
        "disk": [{"path": str(node / "data" / "models" / "Qwen3-8B"), "need_bytes": "1m", "what": "a small model"}],
        "shm": {"size": "64m"},
        "ports": [{"port": port, "what": "Ray GCS", "var": "ray_gcs_port"}],
        "commands": ["sh"],
    }
    result, failed = run_module(npf, args)
    assert not failed, result.get("msg")
    assert result["ready"] is True and result["failures"] == [] and result["preflight_warnings"] == []
    assert result["accelerator"]["count"] == 8
    checks = result["checks"]
    assert all(check["ok"] for check in checks.values())
    assert checks["docker"]["version"] == "27.3.1" and checks["docker"]["api_version"] == "1.47"
    assert checks["docker"]["runtimes"] == ["mthreads", "runc"]
    assert checks["disk"]["items"][0]["checked"] == str(node)
    assert checks["ports"]["items"] == [
        {"port": port, "what": "Ray GCS", "state": "free", "pid": None, "command": None}
    ]
    assert checks["commands"]["items"] == [{"name": "sh", "path": str(node / "bin" / "sh")}]


def test_every_failure_is_reported_at_once(run_module, node, listener, tmp_path):
    huge = 1 << 60
    args = {
        "accelerator": {"vendor": "musa", "tool_dir": str(node / "no-tools"), "expected_count": 8},
        "docker": {"socket": "unix://" + str(tmp_path / "missing" / "docker.sock")},
        "disk": [
            {
                "path": str(tmp_path / "data" / "models"),
                "need_bytes": huge,
                "what": "the Qwen3-8B HF model (16 GiB) + torch_dist checkpoint (16 GiB)",
                "var": "slime_data_dir",
            }
        ],
        "shm": {"size": "1000000t", "var": "container_shm_size"},
        "ports": [{"port": listener, "what": "Ray dashboard / jobs API", "var": "ray_dashboard_port"}],
        "commands": ["definitely-not-a-command-xyz"],
    }
    result, failed = run_module(npf, args)
    assert failed and result["ready"] is False
    msg = result["msg"]
    assert msg.startswith(
        "node preflight failed on 5 checks: (1) no MUSA accelerator: mthreads-gmi not found on PATH or in "
        "slime_accelerator_tool_dir"
    )
    assert "set slime_accelerator: cuda for NVIDIA nodes; (2) Docker engine not reachable at unix://" in msg
    assert "does not exist; install Docker and start it" in msg
    assert "(3) disk: %s needs" % (tmp_path / "data" / "models") in msg
    assert "for the Qwen3-8B HF model (16 GiB) + torch_dist checkpoint (16 GiB) but only" in msg
    assert "(measured at %s, its nearest existing parent)" % tmp_path in msg
    assert "set slime_data_dir to a path on a larger disk" in msg
    assert "(4) port %d (Ray dashboard / jobs API) is held by pid %d (" % (listener, os.getpid()) in msg
    assert "which is not Ray; stop that process or change ray_dashboard_port to a free port" in msg
    assert "(5) command definitely-not-a-command-xyz not found on PATH" in msg
    assert len(result["failures"]) == 5
    # shm larger than RAM is a warning, not a failure
    (warning,) = result["preflight_warnings"]
    assert warning.startswith("shm: the container's shared memory 1000000t")
    assert "exceeds this node's RAM" in warning and "lower container_shm_size" in warning
    assert result["checks"]["shm"]["ok"] is False
    port_row = result["checks"]["ports"]["items"][0]
    assert (port_row["state"], port_row["pid"]) == ("foreign", os.getpid())


def test_port_held_by_ray_is_accepted(run_module, node, engine):
    # a process that looks like Ray's GCS (argv[0] gcs_server) listening on a port
    code = (
        "import socket,sys,time\n"
        "s=socket.socket(); s.bind(('127.0.0.1',0)); s.listen(1)\n"
        "print(s.getsockname()[1], flush=True); time.sleep(60)\n"
    )
    child = subprocess.Popen(
        ["/bin/bash", "-c", 'exec -a gcs_server "$0" -c "$1"', sys.executable, code], stdout=subprocess.PIPE, text=True
    )
    try:
        port = int(child.stdout.readline())
        tools = write_tool(node / "tools", "mthreads-gmi", {"-q --json": (0, eight_cards_json())})
        result, failed = run_module(
            npf,
            {
                "accelerator": {"vendor": "musa", "tool_dir": tools},
                "docker": {"socket": engine()},
                "ports": [{"port": port, "what": "Ray GCS", "var": "ray_gcs_port"}],
            },
        )
        assert not failed, result.get("msg")
        row = result["checks"]["ports"]["items"][0]
        assert (row["state"], row["pid"]) == ("ray", child.pid)
        assert row["command"].startswith("gcs_server -c")
    finally:
        child.kill()
        child.wait()


def test_only_the_port_check(run_module, node, listener, tmp_path):
    # no accelerator tool and no Docker engine: with checks: [ports] neither is probed, only the port fails
    args = {
        "checks": ["ports"],
        "accelerator": {"vendor": "musa", "tool_dir": str(node / "no-tools"), "expected_count": 8},
        "docker": {"socket": "unix://" + str(tmp_path / "missing" / "docker.sock")},
        "disk": [{"path": str(tmp_path), "need_bytes": 1 << 60, "what": "too much"}],
        "commands": ["no-such-program"],
        "ports": [{"port": listener, "what": "Ray GCS", "var": "ray_gcs_port"}],
    }
    result, failed = run_module(npf, args)
    assert failed
    assert len(result["failures"]) == 1 and result["failures"][0].startswith("port %d (Ray GCS) is held by pid %d"
                                                                            % (listener, os.getpid()))
    assert result["accelerator"] == {} and result["preflight_warnings"] == []
    for name in ("accelerator", "docker", "disk", "shm", "commands"):
        assert result["checks"][name] == {"ok": True, "skipped": True, "detail": "not in checks"}
    assert result["checks"]["ports"]["items"][0]["state"] == "foreign"
    result, failed = run_module(npf, dict(args, checks=["ports", "disk"]))
    assert [f.split(" ")[0] for f in result["failures"]] == ["disk:", "port"]


def test_docker_ping_not_ok_and_not_required(run_module, node, engine):
    tools = write_tool(node / "tools", "mthreads-gmi", {"-q --json": (0, eight_cards_json())})
    address = engine({"/_ping": (500, "Internal Server Error")})
    args = {"accelerator": {"vendor": "musa", "tool_dir": tools}, "docker": {"socket": address}}
    result, failed = run_module(npf, args)
    assert failed
    assert result["msg"] == (
        "node preflight failed on 1 check: (1) Docker engine at %s answered GET /_ping with HTTP 500 "
        "'Internal Server Error' instead of OK; check systemctl status docker and journalctl -u docker" % address
    )
    result, failed = run_module(npf, dict(args, docker={"socket": address, "required": False}))
    assert not failed and result["ready"] is True
    assert result["preflight_warnings"][0].startswith("Docker engine at %s answered GET /_ping with HTTP 500" % address)


def test_a_python_without_requests_is_named_with_the_fix(run_module, node, engine, monkeypatch):
    """community.docker's modules (the container role) import requests on the node: the preflight says when the
    node's Python lacks it, besides what the engine answered."""
    tools = write_tool(node / "tools", "mthreads-gmi", {"-q --json": (0, eight_cards_json())})
    address = engine({"/_ping": (200, "OK")})
    args = {"accelerator": {"vendor": "musa", "tool_dir": tools}, "docker": {"socket": address}}
    result, failed = run_module(npf, args)
    assert not failed and result["checks"]["docker"]["python_requests"] is True
    real = dengine.importlib.util.find_spec
    monkeypatch.setattr(dengine.importlib.util, "find_spec", lambda name: None if name == "requests" else real(name))
    result, failed = run_module(npf, args)
    assert failed and result["checks"]["docker"]["ok"] is False
    assert result["checks"]["docker"]["python_requests"] is False
    assert result["msg"].startswith("node preflight failed on 1 check: (1) the node's Python ")
    assert "lacks the requests package, which the container role's community.docker modules import" in result["msg"]
    assert "apt install python3-requests" in result["msg"]


def test_connection_refused_socket(run_module, node, tmp_path):
    path = tempfile.mktemp(prefix="dead", suffix=".sock", dir="/tmp")
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(path)  # bound but never listening: connect() is refused
    try:
        tools = write_tool(node / "tools", "mthreads-gmi", {"-q --json": (0, eight_cards_json())})
        result, failed = run_module(
            npf, {"accelerator": {"vendor": "musa", "tool_dir": tools}, "docker": {"socket": "unix://" + path}}
        )
        assert failed
        assert (
            "connection refused on %s, the Docker daemon is not running; start it (systemctl start docker)" % path
            in result["msg"]
        )
    finally:
        dead.close()
        os.unlink(path)


def test_musa_node_without_mthreads_runtime_is_warned(run_module, node, engine):
    tools = write_tool(node / "tools", "mthreads-gmi", {"-q --json": (0, eight_cards_json())})
    answers = dict(HEALTHY_ENGINE, **{"/info": (200, json.dumps({"Runtimes": {"runc": {}}}))})
    result, failed = run_module(
        npf, {"accelerator": {"vendor": "musa", "tool_dir": tools}, "docker": {"socket": engine(answers)}}
    )
    assert not failed
    (warning,) = result["preflight_warnings"]
    assert warning.startswith("docker: the engine has no mthreads runtime (runtimes: runc)")
    assert "mt-container-toolkit" in warning


def test_iommu_off_cards_fail_with_the_hint(run_module, node, engine):
    tools = write_tool(node / "tools", "mthreads-gmi", {"-q --json": (0, eight_cards_json(total="32768MiB"))})
    result, failed = run_module(
        npf,
        {
            "accelerator": {"vendor": "musa", "tool_dir": tools, "expected_count": 8, "expected_memory_mib": 49152},
            "docker": {"socket": engine()},
        },
    )
    assert failed
    assert result["msg"].startswith(
        "node preflight failed on 1 check: (1) GPU 0, 1, 2, 3, 4, 5, 6, 7 (MTT S4000) report "
        "32768 MiB instead of 49152 MiB: IOMMU is off"
    )


def test_accelerator_not_required_is_a_warning(run_module, node, engine):
    result, failed = run_module(
        npf, {"accelerator": {"vendor": "cuda", "required": False}, "docker": {"socket": engine()}}
    )
    assert not failed
    assert result["preflight_warnings"][0].startswith("no CUDA accelerator: nvidia-smi not found")
    assert result["checks"]["accelerator"]["ok"] is False


def test_paths_on_one_filesystem_must_fit_together(run_module, node, engine, tmp_path):
    st = os.statvfs(str(tmp_path))
    free = st.f_bavail * st.f_frsize
    share = int(free * 0.6)
    tools = write_tool(node / "tools", "mthreads-gmi", {"-q --json": (0, eight_cards_json())})
    result, failed = run_module(
        npf,
        {
            "accelerator": {"vendor": "musa", "tool_dir": tools},
            "docker": {"socket": engine()},
            "disk": [
                {"path": str(tmp_path / "hf"), "need_bytes": share, "what": "the HF model"},
                {"path": str(tmp_path / "mcore"), "need_bytes": share, "what": "the torch_dist checkpoint"},
            ],
        },
    )
    assert failed
    assert (
        "disk: %s, %s are on one filesystem and together need" % (tmp_path / "hf", tmp_path / "mcore") in result["msg"]
    )
    assert "for the HF model + " in result["msg"]


def test_check_mode_runs_the_same_read_only_checks(run_module, node, engine, listener):
    tools = write_tool(node / "tools", "mthreads-gmi", {"-q --json": (0, eight_cards_json())})
    args = {
        "accelerator": {"vendor": "musa", "tool_dir": tools},
        "docker": {"socket": engine()},
        "ports": [{"port": listener, "what": "Ray GCS"}],
    }
    result, failed = run_module(npf, args, check_mode=True)
    assert failed and result["changed"] is False
    assert "port %d (Ray GCS) is held by pid %d" % (listener, os.getpid()) in result["msg"]
    assert "change the port variable (ray_gcs_port / ray_dashboard_port)" in result["msg"]


def test_invalid_sizes_and_ports_are_failures(run_module, node, engine, tmp_path):
    tools = write_tool(node / "tools", "mthreads-gmi", {"-q --json": (0, eight_cards_json())})
    result, failed = run_module(
        npf,
        {
            "accelerator": {"vendor": "musa", "tool_dir": tools},
            "docker": {"socket": engine()},
            "disk": [{"path": str(tmp_path), "need_bytes": "lots"}],
            "shm": {"size": "half", "var": "container_shm_size"},
            "ports": [{"port": 70000, "what": "Ray GCS", "var": "ray_gcs_port"}],
        },
    )
    assert failed
    assert "(1) disk: need_bytes 'lots' for %s is not a size" % tmp_path in result["msg"]
    assert (
        "(2) shm: size 'half' is not a Docker size (use e.g. 500g, 2g or bytes); fix container_shm_size"
        in result["msg"]
    )
    assert "(3) port 70000 (Ray GCS) is not a TCP port number; fix ray_gcs_port" in result["msg"]


# ---------------------------------------------------------------- helpers


@pytest.mark.parametrize(
    "value,size",
    [
        ("500g", 500 * GIB),
        ("2G", 2 * GIB),
        ("512m", 512 << 20),
        ("16GiB", 16 * GIB),
        ("1.5g", int(1.5 * GIB)),
        ("64k", 65536),
        ("1024", 1024),
        (4096, 4096),
        ("2gb", 2 * GIB),
        ("1t", 1 << 40),
    ],
)
def test_parse_size(value, size):
    assert pdisk.parse_size(value) == size


@pytest.mark.parametrize("value", ["", "g", "lots", "-1g", "5 q", True, -3])
def test_parse_size_rejects(value):
    with pytest.raises(ValueError):
        pdisk.parse_size(value)


def test_nearest_existing(tmp_path):
    assert pdisk.nearest_existing(str(tmp_path / "a" / "b" / "c")) == str(tmp_path)
    assert pdisk.nearest_existing(str(tmp_path)) == str(tmp_path)


def test_check_shm_against_a_meminfo(tmp_path):
    (tmp_path / "meminfo").write_text("MemTotal:       263859924 kB\nMemFree:        1000 kB\n")
    failures, warnings, info = pdisk.check_shm({"size": "500g", "var": "container_shm_size"}, proc=str(tmp_path))
    assert failures == [] and info["mem_total_bytes"] == 263859924 * 1024
    (warning,) = warnings
    assert "500g (500.0 GiB) exceeds this node's RAM (251.6 GiB MemTotal)" in warning
    assert warning.endswith("lower container_shm_size to at most the RAM, e.g. 125g")
    failures, warnings, info = pdisk.check_shm({"size": "2g"}, proc=str(tmp_path))
    assert failures == [] and warnings == [] and info["ok"]
    failures, warnings, info = pdisk.check_shm({"size": "2g"}, proc=str(tmp_path / "nowhere"))
    assert failures == [] and "cannot read MemTotal" in warnings[0]


def test_listening_socket_is_found_with_its_owner(listener):
    inodes = pports.listening_inodes([listener])[listener]
    assert inodes
    owners, _ = pports.socket_owners(inodes)
    assert os.getpid() in {pid for pids in owners.values() for pid in pids}


def test_ipv6_listener_is_found():
    if not socket.has_ipv6 or not os.path.exists("/proc/net/tcp6"):
        pytest.skip("no IPv6 here")
    try:
        sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        sock.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback")
    with sock:
        sock.listen(1)
        port = sock.getsockname()[1]
        assert pports.listening_inodes([port])[port]


def test_a_free_port_has_no_listener():
    port = free_port()
    assert pports.listening_inodes([port]) == {port: set()}
    failures, info = pports.check_ports([{"port": port, "what": "Ray GCS", "var": "ray_gcs_port"}])
    assert failures == [] and info["items"][0]["state"] == "free"


def test_docker_addresses():
    assert dengine.docker_connection("unix:///var/run/docker.sock")[1] == "/var/run/docker.sock"
    assert dengine.docker_connection("/run/docker.sock")[1] == "/run/docker.sock"
    assert dengine.docker_connection("tcp://10.0.0.5:2375")[1] == "10.0.0.5:2375"
    assert dengine.docker_connection("tcp://docker-host")[1] == "docker-host:2375"
    with pytest.raises(ValueError):
        dengine.docker_connection("ssh://user@host")
    failures, _ = dengine.check_docker({"socket": "ssh://user@host"})
    assert "is neither unix:///path nor tcp://host:port; fix docker.socket" in failures[0]


def test_docker_over_tcp(engine):
    # the same engine answers over TCP too: a plain HTTP server on a free port
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), EngineHandler)
    server.answers = HEALTHY_ENGINE
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        failures, info = dengine.check_docker({"socket": "tcp://127.0.0.1:%d" % server.server_address[1]})
        assert failures == [] and info["version"] == "27.3.1"
    finally:
        server.shutdown()
        server.server_close()

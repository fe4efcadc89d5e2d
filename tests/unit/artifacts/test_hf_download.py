"""hf_download and module_utils/http_fetch against a local HTTP server with Range support."""
from __future__ import annotations

import errno
import json
import os
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.mtslime.posttrain.plugins.module_utils.artifacts import http_fetch
from ansible_collections.mtslime.posttrain.plugins.modules import hf_download, hf_model_check
from artifacts.test_hf_model_check import QWEN3_8B_CONFIG, safetensors_bytes

PREFIX = "/Qwen/Qwen3-8B/resolve/main/"
TOKEN = "hf_SeCrEtToKeN123"


def repo_files():
    shard1 = safetensors_bytes({"model.embed_tokens.weight": ("BF16", [512, 64])})
    shard2 = safetensors_bytes({"lm_head.weight": ("BF16", [512, 64]), "model.norm.weight": ("F32", [64])})
    index = {"metadata": {"total_size": 0}, "weight_map": {
        "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
        "lm_head.weight": "model-00002-of-00002.safetensors",
        "model.norm.weight": "model-00002-of-00002.safetensors"}}
    return {
        "config.json": json.dumps(QWEN3_8B_CONFIG).encode(),
        "generation_config.json": b'{"do_sample": true}',
        "tokenizer_config.json": b'{"model_max_length": 40960}',
        "tokenizer.json": b'{"version": "1.0"}' + b" " * 3000,
        "vocab.json": b'{"a": 0}',
        "merges.txt": b"#version: 0.2\n",
        "model.safetensors.index.json": json.dumps(index).encode(),
        "model-00001-of-00002.safetensors": shard1,
        "model-00002-of-00002.safetensors": shard2,
    }


class Repo:
    """State shared with the handler: files, switches and a log of requests."""

    def __init__(self, files):
        self.files = dict(files)
        self.token = None  # when set, PREFIX requests need "Bearer <token>"
        self.cut_once = set()  # names whose next GET sends half the body and closes
        self.redirect = set()  # names that 302 to /cdn/<name> on the "localhost" host name
        self.ignore_range = False
        self.fail_status = {}  # name -> status to answer every time
        self.requests = []
        self.port = None


def make_handler(repo):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _route(self):
            repo.requests.append((self.command, self.path, dict(self.headers)))
            if self.path.startswith("/cdn/"):
                return self.path[len("/cdn/"):], False
            if not self.path.startswith(PREFIX):
                return None, False
            return self.path[len(PREFIX):], True

        def _send(self, status, headers=(), body=b""):
            self.send_response(status)
            for key, value in headers:
                self.send_header(key, value)
            if not any(k == "Content-Length" for k, _v in headers):
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD" and body:
                self.wfile.write(body)

        def _serve(self):
            name, on_repo = self._route()
            if on_repo and repo.token and self.headers.get("Authorization") != "Bearer %s" % repo.token:
                return self._send(401, body=b"Invalid credentials in Authorization header")
            if name in repo.fail_status:
                return self._send(repo.fail_status[name], body=b"boom")
            if name is None or name not in repo.files:
                return self._send(404, body=b"Entry not found")
            if on_repo and name in repo.redirect:
                return self._send(302, [("Location", "http://localhost:%d/cdn/%s" % (repo.port, name))])
            data = repo.files[name]
            wanted = self.headers.get("Range")
            if wanted and not repo.ignore_range:
                start_text, _sep, end_text = wanted[len("bytes="):].partition("-")
                start = int(start_text)
                end = int(end_text) if end_text else len(data) - 1
                if start >= len(data):
                    return self._send(416, [("Content-Range", "bytes */%d" % len(data))])
                body = data[start:end + 1]
                return self._send(206, [("Content-Range", "bytes %d-%d/%d" % (start, start + len(body) - 1,
                                                                              len(data)))], body)
            if self.command == "GET" and name in repo.cut_once:
                repo.cut_once.discard(name)
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(data[: len(data) // 2])
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return None
            return self._send(200, [("Accept-Ranges", "bytes")], data)

        do_GET = _serve
        do_HEAD = _serve

    return Handler


@pytest.fixture
def repo():
    state = Repo(repo_files())
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(state))
    server.daemon_threads = True
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch):
    monkeypatch.setattr(http_fetch, "BACKOFF_BASE", 0.0)


def base(repo):
    return "http://127.0.0.1:%d%s" % (repo.port, PREFIX.rstrip("/"))


def args(repo, tmp_path, **extra):
    out = {"base_url": base(repo), "dest": str(tmp_path / ".Qwen3-8B.download"), "timeout": 5}
    out.update(extra)
    return out


def gets(repo, name):
    return [r for r in repo.requests if r[0] == "GET" and r[1].endswith("/" + name)]


def test_full_download(run_module, repo, tmp_path):
    expected_file = str(tmp_path / "expected.bytes")
    result, failed = run_module(hf_download, args(repo, tmp_path, expected_bytes_file=expected_file))
    assert not failed, result.get("msg")
    dest = str(tmp_path / ".Qwen3-8B.download")
    for name, data in repo.files.items():
        assert open(os.path.join(dest, name), "rb").read() == data, name
    assert not [n for n in os.listdir(dest) if n.endswith(".part")]
    total = sum(len(d) for d in repo.files.values())
    assert result["changed"] and result["total_bytes"] == total and result["downloaded_bytes"] == total
    assert int(open(expected_file).read()) == total
    actions = {f["name"]: f["action"] for f in result["files"]}
    assert actions["model-00002-of-00002.safetensors"] == "downloaded"
    assert actions["tokenizer.model"] == "absent" and actions["special_tokens_map.json"] == "absent"
    names = [f["name"] for f in result["files"]]
    assert names.index("config.json") < names.index("model.safetensors.index.json") < names.index(
        "model-00001-of-00002.safetensors") < names.index("model-00002-of-00002.safetensors")
    assert "downloaded model-00001-of-00002.safetensors (64.1 KiB)" in result["actions"]
    # what the role checks before moving dest into place
    checked, bad = run_module(hf_model_check, {"path": dest})
    assert not bad, checked.get("msg")
    assert checked["shards"] == 2 and checked["parameters"] == 512 * 64 * 2 + 64


def test_rerun_when_complete_is_unchanged(run_module, repo, tmp_path):
    run_module(hf_download, args(repo, tmp_path))
    repo.requests.clear()
    result, failed = run_module(hf_download, args(repo, tmp_path))
    assert not failed and result["changed"] is False
    assert result["downloaded_bytes"] == 0
    assert {f["action"] for f in result["files"]} == {"complete", "absent"}
    assert not [r for r in repo.requests if r[0] == "GET"]
    assert result["actions"][-1].startswith("all 9 files in")


def test_resume_after_interrupted_body(run_module, repo, tmp_path):
    name = "model-00001-of-00002.safetensors"
    repo.cut_once.add(name)
    result, failed = run_module(hf_download, args(repo, tmp_path))
    assert not failed, result.get("msg")
    data = repo.files[name]
    assert open(os.path.join(str(tmp_path / ".Qwen3-8B.download"), name), "rb").read() == data
    requests = gets(repo, name)
    assert len(requests) == 2
    assert "Range" not in requests[0][2]
    assert requests[1][2]["Range"] == "bytes=%d-" % (len(data) // 2)
    assert result["downloaded_bytes"] == sum(len(d) for d in repo.files.values())


def test_resume_a_part_left_by_an_earlier_run(run_module, repo, tmp_path):
    name = "model-00002-of-00002.safetensors"
    dest = tmp_path / ".Qwen3-8B.download"
    dest.mkdir()
    data = repo.files[name]
    (dest / (name + ".part")).write_bytes(data[:1000])
    result, failed = run_module(hf_download, args(repo, tmp_path, files=[name, "config.json"]))
    assert not failed, result.get("msg")
    assert (dest / name).read_bytes() == data and not (dest / (name + ".part")).exists()
    assert gets(repo, name)[0][2]["Range"] == "bytes=1000-"
    entry = result["files"][0]
    assert entry == {"name": name, "url": base(repo) + "/" + name, "bytes": len(data), "action": "resumed"}
    assert result["downloaded_bytes"] == len(data) - 1000 + len(repo.files["config.json"])
    assert any(a.startswith("resumed %s at 1000 B" % name) for a in result["actions"])


def test_complete_part_is_renamed_and_oversized_part_restarted(run_module, repo, tmp_path):
    dest = tmp_path / ".Qwen3-8B.download"
    dest.mkdir()
    (dest / "config.json.part").write_bytes(repo.files["config.json"])
    (dest / "vocab.json.part").write_bytes(b"x" * 5000)
    result, failed = run_module(hf_download, args(repo, tmp_path, files=["config.json", "vocab.json"]))
    assert not failed, result.get("msg")
    assert (dest / "config.json").read_bytes() == repo.files["config.json"]
    assert (dest / "vocab.json").read_bytes() == repo.files["vocab.json"]
    assert not gets(repo, "config.json")


def test_server_ignoring_range_restarts_cleanly(run_module, repo, tmp_path):
    dest = tmp_path / ".Qwen3-8B.download"
    dest.mkdir()
    name = "tokenizer.json"
    (dest / (name + ".part")).write_bytes(repo.files[name][:100])
    repo.ignore_range = True
    result, failed = run_module(hf_download, args(repo, tmp_path, files=[name]))
    assert not failed, result.get("msg")
    assert (dest / name).read_bytes() == repo.files[name]


def test_wrong_size_file_is_moved_aside(run_module, repo, tmp_path):
    dest = tmp_path / ".Qwen3-8B.download"
    dest.mkdir()
    (dest / "config.json").write_text("{}")
    result, failed = run_module(hf_download, args(repo, tmp_path, files=["config.json"]))
    assert not failed and result["changed"]
    assert len(result["moved_to"]) == 1 and open(result["moved_to"][0]).read() == "{}"
    assert ".size-mismatch-" in result["moved_to"][0]
    assert (dest / "config.json").read_bytes() == repo.files["config.json"]


def test_auth_message_without_token(run_module, repo, tmp_path):
    repo.token = TOKEN
    result, failed = run_module(hf_download, args(repo, tmp_path, token="hf_wrongToken999"))
    assert failed
    msg = result["msg"]
    assert msg.startswith("hf_download: config.json: HTTP 401 from %s/config.json" % base(repo))
    assert "set model_hf_token or check access to the repository" in msg
    assert result["error_kind"] == "auth"
    dumped = json.dumps(result)
    assert "hf_wrongToken999" not in dumped and "Bearer" not in dumped
    assert len(gets(repo, "config.json")) == 0  # auth errors are not retried: HEAD once
    assert len([r for r in repo.requests if r[1].endswith("/config.json")]) == 1


def test_token_sent_to_the_repo_host_only(run_module, repo, tmp_path):
    repo.token = TOKEN
    repo.redirect.add("model-00001-of-00002.safetensors")
    result, failed = run_module(hf_download, args(repo, tmp_path, token=TOKEN))
    assert not failed, result.get("msg")
    assert TOKEN not in json.dumps(result)
    cdn = [r for r in repo.requests if r[1].startswith("/cdn/")]
    assert cdn and all("Authorization" not in r[2] for r in cdn)
    assert all(r[2].get("Authorization") == "Bearer " + TOKEN for r in repo.requests if r[1].startswith(PREFIX))


def test_not_found(run_module, repo, tmp_path):
    result, failed = run_module(hf_download, args(repo, tmp_path, files=["config.json", "missing.bin"]))
    assert failed
    assert "missing.bin: not found at %s/missing.bin (HTTP 404); check base_url" % base(repo) in result["msg"]
    assert result["error_kind"] == "not_found"
    assert not os.path.exists(tmp_path / ".Qwen3-8B.download" / "config.json")  # probed first, nothing fetched


def test_required_default_file_not_found(run_module, repo, tmp_path):
    del repo.files["tokenizer_config.json"]
    result, failed = run_module(hf_download, args(repo, tmp_path))
    assert failed and "tokenizer_config.json: not found at" in result["msg"]


def test_single_file_model_and_no_weights(run_module, repo, tmp_path):
    del repo.files["model.safetensors.index.json"]
    shard = repo.files.pop("model-00001-of-00002.safetensors")
    del repo.files["model-00002-of-00002.safetensors"]
    repo.files["model.safetensors"] = shard
    result, failed = run_module(hf_download, args(repo, tmp_path))
    assert not failed, result.get("msg")
    assert [f["name"] for f in result["files"]][-1] == "model.safetensors"
    assert {f["name"]: f["action"] for f in result["files"]}["model.safetensors.index.json"] == "absent"
    del repo.files["model.safetensors"]
    result, failed = run_module(hf_download, args(repo, tmp_path, dest=str(tmp_path / "other")))
    assert failed
    assert "neither model.safetensors.index.json nor model.safetensors at %s (HTTP 404)" % base(repo) in result["msg"]


def test_bad_index(run_module, repo, tmp_path):
    repo.files["model.safetensors.index.json"] = b'{"weight_map": {"a": "../../etc/evil.safetensors"}}'
    result, failed = run_module(hf_download, args(repo, tmp_path))
    assert failed and "names shard files outside the model directory ('../../etc/evil.safetensors')" in result["msg"]
    repo.files["model.safetensors.index.json"] = b"<html>login</html>"
    result, failed = run_module(hf_download, args(repo, tmp_path, dest=str(tmp_path / "d2")))
    assert failed and "model.safetensors.index.json from %s/model.safetensors.index.json is not a usable index" % (
        base(repo)) in result["msg"]


def test_network_error_connection_refused(run_module, tmp_path):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    result, failed = run_module(hf_download, {
        "base_url": "http://127.0.0.1:%d/Qwen/Qwen3-8B/resolve/main" % port, "dest": str(tmp_path / "d"),
        "files": ["config.json"], "retries": 2, "timeout": 2})
    assert failed
    assert ("config.json: network error fetching http://127.0.0.1:%d/Qwen/Qwen3-8B/resolve/main/config.json: "
            "connection refused (gave up after 3 attempts); check that this node reaches 127.0.0.1" % port) \
        in result["msg"]
    assert result["error_kind"] == "network"


def test_backoff_doubles(monkeypatch):
    monkeypatch.setattr(http_fetch, "BACKOFF_BASE", 1.0)
    sleeps = []
    fetcher = http_fetch.Fetcher(retries=4, sleep=sleeps.append)

    def attempt():
        raise http_fetch._Retry(http_fetch.FetchError("network", "x", "http://h/x", "timed out"))

    with pytest.raises(http_fetch.FetchError) as info:
        fetcher._with_retries("x", "http://h/x", attempt)
    assert sleeps == [1.0, 2.0, 4.0, 8.0]
    assert "gave up after 5 attempts" in str(info.value)


def test_dns_error_message():
    exc = OSError()
    exc.reason = socket.gaierror(-2, "Name or service not known")
    assert http_fetch.network_reason(exc) == "DNS lookup failed (Name or service not known)"
    assert http_fetch.network_reason(socket.timeout("timed out")) == "timed out"


def test_server_error_retried_then_reported(run_module, repo, tmp_path):
    repo.fail_status["config.json"] = 503
    result, failed = run_module(hf_download, args(repo, tmp_path, files=["config.json"], retries=2))
    assert failed
    assert "config.json: HTTP 503 from %s/config.json (Service Unavailable) (gave up after 3 attempts); the " \
           "server is failing" % base(repo) in result["msg"]
    assert len([r for r in repo.requests if r[1].endswith("/config.json")]) == 3


def test_other_http_error(run_module, repo, tmp_path):
    repo.fail_status["config.json"] = 400
    result, failed = run_module(hf_download, args(repo, tmp_path, files=["config.json"]))
    assert failed and "config.json: HTTP 400 from %s/config.json (Bad Request); check base_url" % base(repo) \
        in result["msg"]


def test_disk_full(run_module, repo, tmp_path, monkeypatch):
    real_open = open

    class Full:
        def __init__(self, handle):
            self.handle = handle

        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

        def __getattr__(self, name):
            return getattr(self.handle, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

    def fake_open(path, mode="r", *a, **k):
        handle = real_open(path, mode, *a, **k)
        return Full(handle) if str(path).endswith(".part") and "b" in mode else handle

    monkeypatch.setattr(http_fetch, "open", fake_open, raising=False)
    monkeypatch.setattr(http_fetch.shutil, "disk_usage", lambda p: type("U", (), {"free": 3 * 1024 ** 2})())
    result, failed = run_module(hf_download, args(repo, tmp_path, files=["config.json"]))
    assert failed
    part = str(tmp_path / ".Qwen3-8B.download" / "config.json.part")
    assert "config.json: cannot write %s: No space left on device; 3.0 MiB free on that file system" % part \
        in result["msg"]
    assert result["error_kind"] == "disk"


def test_check_mode_fetches_nothing(run_module, repo, tmp_path):
    result, failed = run_module(hf_download, args(repo, tmp_path), check_mode=True)
    assert not failed and result["changed"]
    assert repo.requests == []
    assert not os.path.exists(tmp_path / ".Qwen3-8B.download")
    assert result["actions"][0].startswith("would fetch from %s: config.json, generation_config.json" % base(repo))
    assert "shards named in model.safetensors.index.json" in result["actions"][1]
    # after a full download the plan is known (shards from the local index) and nothing is missing
    run_module(hf_download, args(repo, tmp_path))
    repo.requests.clear()
    result, failed = run_module(hf_download, args(repo, tmp_path), check_mode=True)
    assert not failed and not result["changed"] and repo.requests == []
    assert "model-00002-of-00002.safetensors" in [f["name"] for f in result["files"]]
    result, failed = run_module(hf_download, args(repo, tmp_path, files=["new.bin"]), check_mode=True)
    assert result["changed"] and result["files"][0]["action"] == "would fetch"


def test_bad_options(run_module, repo, tmp_path):
    result, failed = run_module(hf_download, args(repo, tmp_path, base_url="ftp://user:pw@host/x"))
    assert failed and "base_url 'ftp://host/x' is not an http(s) URL" in result["msg"]
    result, failed = run_module(hf_download, args(repo, tmp_path, files=["../x", "/etc/passwd"]))
    assert failed and "files '../x', '/etc/passwd' are not relative names inside dest" in result["msg"]


def test_redact_and_content_range():
    assert http_fetch.redact("https://u:p@mirror.local/a/b?sig=1") == "https://mirror.local/a/b"
    assert http_fetch.parse_content_range("bytes 10-19/100") == (10, 19, 100)
    assert http_fetch.parse_content_range("bytes */100") == (None, None, 100)
    assert http_fetch.parse_content_range("bytes 0-9/*") == (0, 9, None)
    assert http_fetch.parse_content_range("nonsense") is None


def test_dest_not_writable(run_module, repo, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result, failed = run_module(hf_download, args(repo, tmp_path, dest=str(blocker)))
    assert failed and "hf_download: cannot write under %s" % blocker in result["msg"]


def test_file_changed_on_the_server(run_module, repo, tmp_path, monkeypatch):
    real_size = http_fetch.Fetcher.size
    monkeypatch.setattr(http_fetch.Fetcher, "size", lambda self, name, url: real_size(self, name, url) + 1)
    result, failed = run_module(hf_download, args(repo, tmp_path, files=["config.json"]))
    assert failed
    assert "config.json: HTTP 200 from %s/config.json (server now reports %d bytes, expected %d; the file " \
           "changed on the server" % (base(repo), len(repo.files["config.json"]),
                                      len(repo.files["config.json"]) + 1) in result["msg"]


def test_certificate_errors_are_not_retried():
    import ssl
    import urllib.error
    fetcher = http_fetch.Fetcher()
    exc = urllib.error.URLError(ssl.SSLCertVerificationError(1, "certificate verify failed"))
    with pytest.raises(http_fetch.FetchError) as info:
        fetcher._classify(exc, "config.json", "https://mirror.local/m/config.json")
    assert info.value.kind == "network" and "install the CA of the mirror" in str(info.value)

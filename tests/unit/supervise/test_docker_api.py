"""module_utils/supervise/docker_api.py against a unix-socket HTTP server in a thread that answers as the Docker
engine does (status codes, JSON bodies, the multiplexed exec stream, an exec that never ends)."""
from __future__ import annotations

import http.server
import json
import os
import socket
import socketserver
import struct
import tempfile
import threading
import time

import pytest

from ansible_collections.mtslime.posttrain.plugins.module_utils.supervise import docker_api
from ansible_collections.mtslime.posttrain.plugins.module_utils.supervise.docker_api import DockerError, Engine

EXEC_ID = "e1d2c3"
START = "/exec/%s/start" % EXEC_ID


def frame(stream, data):
    return struct.pack(">BxxxL", stream, len(data)) + data


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        self.server.requests.append((self.command, self.path, body))
        reply = self.server.routes.get((self.command, self.path), (404, {"message": "page not found"}))
        if callable(reply):
            reply(self)
            return
        status, payload = reply
        data = json.dumps(payload).encode() if payload is not None else b""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = answer

    def stream(self, *parts, pause=0.0):
        """The exec start answer: a raw stream written in `parts` (each its own send) until the connection closes."""
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.docker.raw-stream")
        self.end_headers()
        for part in parts:
            self.wfile.write(part)
            self.wfile.flush()
            time.sleep(pause)


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    block_on_close = False


@pytest.fixture
def engine():
    """(Engine on the fake socket, the server: .routes to set answers, .requests as received)."""
    folder = tempfile.mkdtemp(prefix="dockerapi-")
    path = os.path.join(folder, "docker.sock")
    server = Server(path, Handler)
    server.routes, server.requests = {}, []
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield Engine(path, timeout=5), server
    server.shutdown()
    server.server_close()
    os.unlink(path)
    os.rmdir(folder)


def exec_routes(server, start, exit_code=0, container="train"):
    server.routes.update({
        ("POST", "/containers/%s/exec" % container): (201, {"Id": EXEC_ID}),
        ("POST", START): start,
        ("GET", "/exec/%s/json" % EXEC_ID): (200, {"Running": False, "ExitCode": exit_code}),
    })


def test_inspect_returns_the_container_and_none_when_there_is_none(engine):
    client, server = engine
    server.routes[("GET", "/containers/train/json")] = (200, {"Id": "abc", "State": {"Running": True}})
    assert client.inspect("train") == {"Id": "abc", "State": {"Running": True}}
    server.routes[("GET", "/containers/gone/json")] = (404, {"message": "No such container: gone"})
    assert client.inspect("gone") is None


def test_names_are_quoted_in_the_path(engine):
    client, server = engine
    assert client.inspect("a/b c?") is None
    assert server.requests[-1][:2] == ("GET", "/containers/a%2Fb%20c%3F/json")


def test_an_engine_error_names_the_request_status_and_message(engine):
    client, server = engine
    server.routes[("GET", "/containers/train/json")] = (500, {"message": "daemon is shutting down"})
    with pytest.raises(DockerError) as caught:
        client.inspect("train")
    assert caught.value.status == 500
    assert str(caught.value) == ("Docker engine at %s: GET /containers/train/json answered 500: daemon is shutting "
                                 "down" % client.socket_path)


def test_start_says_whether_it_started_the_container(engine):
    client, server = engine
    server.routes[("POST", "/containers/train/start")] = (204, None)
    assert client.start("train") is True
    server.routes[("POST", "/containers/train/start")] = (304, None)
    assert client.start("train") is False
    server.routes[("POST", "/containers/gone/start")] = (404, {"message": "No such container: gone"})
    with pytest.raises(DockerError) as caught:
        client.start("gone")
    assert caught.value.status == 404 and "No such container: gone" in str(caught.value)


def test_exec_sends_the_command_and_demultiplexes_its_output(engine):
    client, server = engine
    body = frame(1, b"out 1\n") + frame(2, b"err 1\n") + frame(1, b"out 2\n")
    exec_routes(server, lambda handler: handler.stream(body), exit_code=3)
    result = client.exec_run("train", ("sh", "-c", "work"), timeout=5, env={"A": "1", "B": "x=y"}, user="1000")
    assert result == (3, "out 1\nout 2\n", "err 1\n")
    assert server.requests[0] == ("POST", "/containers/train/exec", {
        "AttachStdout": True, "AttachStderr": True, "Tty": False, "Cmd": ["sh", "-c", "work"],
        "Env": ["A=1", "B=x=y"], "User": "1000"})
    assert server.requests[1] == ("POST", START, {"Detach": False, "Tty": False})
    assert server.requests[2][:2] == ("GET", "/exec/%s/json" % EXEC_ID)


def test_exec_reads_frames_split_across_reads(engine):
    client, server = engine
    whole = frame(1, b"hello ") + frame(2, "wörld\n".encode()) + frame(1, b"bye\n")
    parts = [whole[:3], whole[3:10], whole[10:20], whole[20:21], whole[21:]]
    exec_routes(server, lambda handler: handler.stream(*parts, pause=0.02))
    assert client.exec_run("train", ["x"], timeout=5) == (0, "hello bye\n", "wörld\n")


def test_exec_output_that_is_not_utf8_is_replaced(engine):
    client, server = engine
    exec_routes(server, lambda handler: handler.stream(frame(1, b"a\xffb\n")))
    assert client.exec_run("train", ["x"], timeout=5) == (0, "a\ufffdb\n", "")


def test_exec_keeps_the_tail_of_a_large_output(engine):
    client, server = engine
    chunk = b"x" * 65536
    frames = [frame(1, chunk) for dummy in range(40)] + [frame(1, b"THE END\n"), frame(2, b"small\n")]
    exec_routes(server, lambda handler: handler.stream(b"".join(frames)))
    code, stdout, stderr = client.exec_run("train", ["x"], timeout=10)
    assert (code, stderr) == (0, "small\n")
    assert len(stdout) == docker_api.OUTPUT_CAP and stdout.endswith("x" * 100 + "THE END\n")


def test_an_exec_that_outlives_its_timeout_is_left_running_and_reported(engine):
    client, server = engine
    exec_routes(server, lambda handler: handler.stream(frame(1, b"started\n"), b"", pause=3))
    began = time.monotonic()
    with pytest.raises(DockerError) as caught:
        client.exec_run("train", ["sleep", "100"], timeout=0.5)
    assert time.monotonic() - began < 2
    assert caught.value.status is None
    assert str(caught.value) == ("Docker engine at %s: exec of ['sleep', '100'] in train timed out after 0.5 s; "
                                 "stopped reading its output (the process may still be running in the container)"
                                 % client.socket_path)


def test_the_timeout_covers_the_whole_exec_not_each_read(engine):
    client, server = engine
    exec_routes(server, lambda handler: handler.stream(*[frame(1, b"tick\n")] * 50, pause=0.1))
    began = time.monotonic()
    with pytest.raises(DockerError, match="timed out after 0.6 s"):
        client.exec_run("train", ["ticker"], timeout=0.6)
    assert time.monotonic() - began < 1.5


def test_exec_in_a_missing_container_names_it(engine):
    client, server = engine
    server.routes[("POST", "/containers/gone/exec")] = (404, {"message": "No such container: gone"})
    with pytest.raises(DockerError) as caught:
        client.exec_run("gone", ["true"], timeout=5)
    assert caught.value.status == 404
    assert "POST /containers/gone/exec answered 404: No such container: gone" in str(caught.value)


def test_a_socket_that_does_not_exist_is_named_with_the_fix(tmp_path):
    path = str(tmp_path / "docker.sock")
    with pytest.raises(DockerError) as caught:
        Engine(path).inspect("train")
    message = str(caught.value)
    assert caught.value.status is None
    assert message.startswith("cannot reach the Docker engine at %s (" % path) and "No such file" in message
    assert "mount the node's engine socket into the container" in message


def test_a_socket_nobody_listens_on_is_named():
    folder = tempfile.mkdtemp(prefix="dockerapi-")
    path = os.path.join(folder, "docker.sock")
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(path)
    stale.close()
    try:
        with pytest.raises(DockerError, match="cannot reach the Docker engine at %s .*refused" % path):
            Engine(path).start("train")
    finally:
        os.unlink(path)
        os.rmdir(folder)


def test_an_exec_start_the_engine_refuses_names_its_message(engine):
    client, server = engine
    exec_routes(server, (409, {"message": "Container train is not running"}))
    with pytest.raises(DockerError) as caught:
        client.exec_run("train", ["true"], timeout=5)
    assert caught.value.status == 409
    assert str(caught.value) == ("Docker engine at %s: POST %s answered 409: Container train is not running"
                                 % (client.socket_path, START))

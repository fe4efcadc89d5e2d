# Copyright: mtslime.posttrain contributors
# Apache License 2.0
"""A minimal client of the Docker Engine HTTP API over its unix socket.

A long-lived supervisor process inside a training container inspects, starts and execs into
containers through the node's engine socket mounted into it; the image has neither the docker
CLI nor the Docker SDK, so this speaks the unversioned API with the standard library alone.
Python 3.8+.
"""
from __future__ import annotations

import http.client
import json
import socket
import struct
import time
from urllib.parse import quote

OUTPUT_CAP = 1 << 20


class DockerError(Exception):
    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over a unix socket; unix_sock stays reachable after a response that reads to EOF takes the socket."""

    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path
        self.unix_sock = None

    def connect(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.unix_path)
        except BaseException:
            sock.close()
            raise
        self.sock = self.unix_sock = sock


class Engine:
    def __init__(self, socket_path="/var/run/docker.sock", timeout=30):
        self.socket_path = socket_path
        self.timeout = timeout

    def _open(self, method, path, body=None, timeout=None):
        conn = UnixHTTPConnection(self.socket_path, self.timeout if timeout is None else timeout)
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if body is not None else {}
        try:
            conn.request(method, path, body=data, headers=headers)
            return conn, conn.getresponse()
        except (FileNotFoundError, PermissionError, ConnectionRefusedError) as exc:
            conn.close()
            raise DockerError("cannot reach the Docker engine at %s (%s): mount the node's engine socket into the "
                              "container (-v /var/run/docker.sock:/var/run/docker.sock) and make it accessible "
                              "to this user" % (self.socket_path, exc)) from exc
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise DockerError("Docker engine at %s: %s %s failed: %s" % (self.socket_path, method, path, exc)) from exc

    def _call(self, method, path, body=None, ok=(200,), missing_ok=False):
        conn, response = self._open(method, path, body)
        try:
            raw = response.read()
        except (OSError, http.client.HTTPException) as exc:
            raise DockerError("Docker engine at %s: %s %s: reading the answer failed: %s"
                              % (self.socket_path, method, path, exc)) from exc
        finally:
            conn.close()
        if missing_ok and response.status == 404:
            return response.status, None
        if response.status not in ok:
            raise self._refused(method, path, response.status, raw)
        return response.status, json.loads(raw.decode("utf-8")) if raw.strip() else None

    def _refused(self, method, path, status, raw):
        try:
            detail = json.loads(raw.decode("utf-8", "replace"))["message"]
        except (ValueError, KeyError, TypeError):
            detail = raw.decode("utf-8", "replace").strip()
        text = "Docker engine at %s: %s %s answered %d: %s" % (self.socket_path, method, path, status, detail)
        return DockerError(text, status)

    def inspect(self, name):
        return self._call("GET", "/containers/%s/json" % quote(name, safe=""), missing_ok=True)[1]

    def start(self, name):
        status = self._call("POST", "/containers/%s/start" % quote(name, safe=""), ok=(204, 304))[0]
        return status == 204

    def exec_run(self, name, argv, timeout, env=None, user=None):
        config = {"AttachStdout": True, "AttachStderr": True, "Tty": False, "Cmd": list(argv)}
        if env:
            config["Env"] = ["%s=%s" % item for item in env.items()]
        if user:
            config["User"] = user
        exec_id = self._call("POST", "/containers/%s/exec" % quote(name, safe=""), config, ok=(201,))[1]["Id"]
        path = "/exec/%s" % quote(exec_id, safe="")
        deadline = time.monotonic() + timeout
        conn, response = self._open("POST", path + "/start", {"Detach": False, "Tty": False}, timeout=timeout)
        try:
            if response.status != 200:
                raise self._refused("POST", path + "/start", response.status, response.read())
            stdout, stderr = self._demux(conn, response, deadline)
        except (socket.timeout, TimeoutError) as exc:
            raise DockerError("Docker engine at %s: exec of %r in %s timed out after %s s; stopped reading its "
                              "output (the process may still be running in the container)"
                              % (self.socket_path, list(argv), name, timeout)) from exc
        except (OSError, http.client.HTTPException) as exc:
            raise DockerError("Docker engine at %s: reading the output of exec %r in %s failed: %s"
                              % (self.socket_path, list(argv), name, exc)) from exc
        finally:
            response.close()
            conn.close()
        state = self._call("GET", path + "/json")[1]
        while state.get("Running") and time.monotonic() < deadline:
            time.sleep(0.05)
            state = self._call("GET", path + "/json")[1]
        return state.get("ExitCode"), stdout.decode("utf-8", "replace"), stderr.decode("utf-8", "replace")

    @staticmethod
    def _demux(conn, response, deadline):
        streams = {1: bytearray(), 2: bytearray()}
        buf, target, left = b"", None, 0
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise socket.timeout("timed out")
            conn.unix_sock.settimeout(remaining)
            chunk = response.read1(65536)
            if not chunk:
                return bytes(streams[1]), bytes(streams[2])
            buf += chunk
            while buf:
                if not left:
                    if len(buf) < 8:
                        break
                    kind, left = struct.unpack(">BxxxL", buf[:8])
                    target, buf = streams[2 if kind == 2 else 1], buf[8:]
                    continue
                target += buf[:left]
                del target[:-OUTPUT_CAP]
                buf, left = buf[left:], max(0, left - len(buf))

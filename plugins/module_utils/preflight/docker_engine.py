# node_preflight's Docker check: the engine API over its unix socket (or plain-HTTP TCP), with no
# docker client program: GET /_ping must answer OK; /version and /info add the version and runtimes.
# It also checks what the container role's community.docker modules need in the node's Python (requests):
# they run on the node with the interpreter that runs this check.
from __future__ import annotations

import http.client
import importlib.util
import json
import platform
import re
import socket
import sys

from ansible_collections.mtslime.posttrain.plugins.module_utils.common import shorten
from ansible_collections.mtslime.posttrain.plugins.module_utils.supervise.docker_api import UnixHTTPConnection

DOCKER_TIMEOUT = 10


def docker_connection(address, timeout=DOCKER_TIMEOUT):
    """(connection, description) for `unix:///path`, a bare `/path`, or `tcp://host:port` / `http://host:port`."""
    if address.startswith("unix://"):
        path = address[len("unix://") :]
        return UnixHTTPConnection(path, timeout), path
    if address.startswith("/"):
        return UnixHTTPConnection(address, timeout), address
    match = re.match(r"^(?:tcp|http)://([^/:]+|\[[^\]]+\])(?::(\d+))?/?$", address)
    if match:
        host, port = match.group(1).strip("[]"), int(match.group(2) or 2375)
        return http.client.HTTPConnection(host, port, timeout=timeout), "%s:%d" % (host, port)
    raise ValueError(address)


def docker_get(address, path, timeout=DOCKER_TIMEOUT):
    conn, dummy = docker_connection(address, timeout)
    try:
        conn.request("GET", path, headers={"Host": "docker"})
        response = conn.getresponse()
        return response.status, response.read().decode("utf-8", "replace")
    finally:
        conn.close()


def requests_problem():
    """Why community.docker's modules cannot run with this Python (they import requests), or None."""
    if importlib.util.find_spec("requests") is not None:
        return None
    return (
        "the node's Python %s (%s) lacks the requests package, which the container role's community.docker modules "
        "import on the node; install it for that interpreter (Debian/Ubuntu: apt install python3-requests; RHEL: "
        "dnf install python3-requests) or set ansible_python_interpreter to a Python that has it"
        % (platform.python_version(), sys.executable)
    )


def check_docker(docker):
    """(failures, check entry): the engine answers, and (when the node runs a training container) the node's
    Python can run community.docker's modules."""
    failures, info = check_engine(docker)
    missing = requests_problem() if docker.get("required", True) else None
    info["python_requests"] = importlib.util.find_spec("requests") is not None
    if missing:
        failures = failures + [missing]
        info["ok"] = False
    return failures, info


def check_engine(docker):
    address = docker.get("socket") or "unix:///var/run/docker.sock"
    try:
        dummy, where = docker_connection(address)
    except ValueError:
        return [
            "Docker engine address %r is neither unix:///path nor tcp://host:port; fix docker.socket" % address
        ], dict(ok=False, detail="bad address")
    prefix = "Docker engine not reachable at %s" % address
    try:
        status, body = docker_get(address, "/_ping")
    except FileNotFoundError:
        return [
            "%s: the socket %s does not exist; install Docker and start it (systemctl enable --now docker), "
            "or set docker.socket to the engine's address" % (prefix, where)
        ], dict(ok=False, detail="no socket")
    except PermissionError:
        return [
            "%s: permission denied on %s; run the preflight with become: true or add the Ansible user to the docker "
            "group"
            % (prefix, where)
        ], dict(ok=False, detail="permission denied")
    except ConnectionRefusedError:
        return [
            "%s: connection refused on %s, the Docker daemon is not running; start it (systemctl start docker)"
            % (prefix, where)
        ], dict(ok=False, detail="connection refused")
    except socket.timeout:
        return [
            "%s: no answer within %d s on %s; check systemctl status docker" % (prefix, DOCKER_TIMEOUT, where)
        ], dict(ok=False, detail="timeout")
    except (OSError, http.client.HTTPException) as exc:
        return ["%s: %s; check that %s is the Docker engine (systemctl status docker)" % (prefix, exc, where)], dict(
            ok=False, detail=str(exc)
        )
    if status != 200 or body.strip() != "OK":
        return [
            "Docker engine at %s answered GET /_ping with HTTP %d %r instead of OK; check systemctl status docker "
            "and journalctl -u docker" % (address, status, shorten(body.strip(), 80))
        ], dict(ok=False, detail="ping failed")
    info = dict(ok=True, detail="engine answers on %s" % address, version=None, api_version=None, runtimes=None)
    try:
        status, body = docker_get(address, "/version")
        if status == 200:
            data = json.loads(body)
            info.update(version=data.get("Version"), api_version=data.get("ApiVersion"))
            info["detail"] = "Docker %s (API %s) answers on %s" % (info["version"], info["api_version"], address)
        status, body = docker_get(address, "/info")
        if status == 200:
            runtimes = json.loads(body).get("Runtimes")
            if isinstance(runtimes, dict):
                info["runtimes"] = sorted(runtimes)
    except (OSError, ValueError, http.client.HTTPException):
        pass
    return [], info

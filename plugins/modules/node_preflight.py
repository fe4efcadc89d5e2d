#!/usr/bin/python
# Copyright: mtslime.posttrain contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_preflight
short_description: Check in one call everything a node needs before the training stages, and report every failing reason at once
version_added: "0.1.0"
description:
  - Checks the node host (not the training container) for what the stages need, read-only, and reports
    every failure in one message, numbered, with the variable to change and the fix. Findings that do not
    stop the stages (shared memory larger than RAM) are Ansible warnings and RV(preflight_warnings).
  - "Accelerators: the same probe as M(mtslime.posttrain.accelerator_info) (C(mthreads-gmi) or C(nvidia-smi)),
    counted against O(accelerator.expected_count)."
  - "Docker: the engine must answer C(GET /_ping) with C(OK) on its socket; its version comes from C(/version).
    The C(docker) client program is not needed."
  - "Disk: free space at each path, or at its nearest existing parent, must cover what is going to be put there;
    paths on one filesystem must fit together."
  - "Shared memory: the container's C(--shm-size) is compared with the node's C(MemTotal) (a warning, not a failure)."
  - "Ports: each must be free, or held by Ray (C(gcs_server), C(raylet), the Ray dashboard, C(ray::) workers), which
    the Ray stage takes over. Any other holder is named with its pid and command."
  - "Commands: programs that must be on E(PATH)."
options:
  accelerator:
    description: What to look for, as in M(mtslime.posttrain.accelerator_info).
    type: dict
    default: {}
    suboptions:
      vendor:
        description: V(auto), V(musa) or V(cuda) (C(slime_accelerator)).
        type: str
        choices: [auto, musa, cuda]
        default: auto
      tool_dir:
        description: Directory searched for C(mthreads-gmi) / C(nvidia-smi) before E(PATH) (C(slime_accelerator_tool_dir)).
        type: path
      expected_count:
        description: Number of devices the node must have (C(slime_gpus_per_node)).
        type: int
      expected_memory_mib:
        description: Memory each device must have at least, in MiB (49152 for an MTT S4000).
        type: int
      required:
        description: When false, accelerator problems are warnings instead of failures.
        type: bool
        default: true
  docker:
    description: The Docker engine the stages start the training container with.
    type: dict
    default: {}
    suboptions:
      required:
        description: When false, an unreachable engine is a warning instead of a failure.
        type: bool
        default: true
      socket:
        description: "Engine address: C(unix:///path/to/docker.sock) or C(tcp://host:port) (plain HTTP)."
        type: str
        default: unix:///var/run/docker.sock
  disk:
    description: Paths that must have free space.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Where the data will go; need not exist yet (its nearest existing parent is measured).
        type: path
        required: true
      need_bytes:
        description: "Space needed, in bytes or as a size such as C(32g) or C(16GiB)."
        type: raw
        required: true
      what:
        description: "What needs the space, for the message, e.g. C(the Qwen3-8B HF model (16 GiB) + torch_dist checkpoint (16 GiB))."
        type: str
      var:
        description: Variable that sets the path, named in the message.
        type: str
      projection:
        description:
          - "For a training save dir: the run's checkpoints, O(disk[].projection.num_rollout) /
            O(disk[].projection.save_interval) saves (plus the last rollout) of O(disk[].need_bytes) each (or the
            size of the newest complete iteration already there), counted from the tracker's iteration, minus what
            retention deletes, against the free space."
          - A run that does not fit is a warning with the figures and the C(train_job_keep_checkpoints) that would
            fit, not a failure.
        type: dict
        suboptions:
          num_rollout:
            description: C(--num-rollout).
            type: int
            required: true
          save_interval:
            description: C(--save-interval).
            type: int
            required: true
          keep:
            description: C(train_job_keep_checkpoints) (V(0) = keep all).
            type: int
            default: 0
          prune:
            description: C(train_job_prune); V(trash) keeps pruned checkpoints on the same disk.
            type: str
            choices: [trash, delete]
            default: trash
  shm:
    description: Shared memory the training container gets.
    type: dict
    suboptions:
      size:
        description: "Docker-style size (C(500g), C(2g), C(512m) or bytes), as given to C(docker run --shm-size)."
        type: raw
        required: true
      var:
        description: Variable that sets the size, named in the warning.
        type: str
  ports:
    description: TCP ports the node must have free (or held by Ray).
    type: list
    elements: dict
    default: []
    suboptions:
      port:
        description: Port number.
        type: int
        required: true
      what:
        description: What uses the port, for the message (C(Ray GCS), C(Ray dashboard / jobs API)).
        type: str
      var:
        description: Variable that sets the port (C(ray_gcs_port), C(ray_dashboard_port)), named in the message.
        type: str
  commands:
    description: Programs that must be on E(PATH) of the node.
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - mtslime.posttrain.attributes
  - mtslime.posttrain.attributes.INFO_MODULE
notes:
  - Run it with C(become) so that the owners of busy ports can be named; without it other users' processes stay anonymous.
  - Sockets are looked up in C(/proc/net/tcp) and C(/proc/net/tcp6) of the node's network namespace, which the
    C(--net host) training container shares.
seealso:
  - module: mtslime.posttrain.accelerator_info
author:
  - mtslime.posttrain contributors
"""

EXAMPLES = r"""
- name: Check the node before any stage
  mtslime.posttrain.node_preflight:
    accelerator:
      vendor: "{{ slime_accelerator | default('auto') }}"
      tool_dir: "{{ slime_accelerator_tool_dir | default(omit) }}"
      expected_count: "{{ slime_gpus_per_node }}"
      expected_memory_mib: 49152
    docker:
      socket: unix:///var/run/docker.sock
    disk:
      - path: /data/models/Qwen3-8B
        need_bytes: 17g
        what: the Qwen3-8B HF model (16 GiB)
        var: slime_hf_model_dir
      - path: /data/LLMs/MCORE/Qwen3-8B_slime
        need_bytes: 17g
        what: the torch_dist checkpoint (16 GiB)
        var: slime_mcore_dir
    shm:
      size: 500g
      var: slime_container_shm_size
    ports:
      - {port: 64379, what: Ray GCS, var: ray_gcs_port}
      - {port: 8772, what: Ray dashboard / jobs API, var: ray_dashboard_port}
  become: true
  register: preflight
"""

RETURN = r"""
ready:
  description: No check failed (warnings allowed).
  returned: always
  type: bool
failures:
  description: One sentence per failed check, with the variable to change and the fix.
  returned: always
  type: list
  elements: str
preflight_warnings:
  description:
    - Findings that do not stop the stages (shared memory larger than RAM, a check that is not O(docker.required)).
    - The same messages are issued as Ansible warnings, so they also appear in the task's C(warnings)
      (a key Ansible reserves and rewrites, hence this separate plain list).
  returned: always
  type: list
  elements: str
accelerator:
  description: The accelerator probe (see RV(mtslime.posttrain.accelerator_info#module:accelerator)).
  returned: always
  type: dict
checks:
  description:
    - "One entry per check (C(accelerator), C(docker), C(disk), C(shm), C(ports), C(commands)), each with C(ok) and C(detail);
      C(skipped) when the check was not asked for."
    - "C(docker) adds C(version), C(api_version), C(runtimes); C(disk), C(ports) and C(commands) add C(items);
      C(shm) adds C(size_bytes) and C(mem_total_bytes); a C(disk) item with O(disk[].projection) adds C(projection)
      (C(saves_total), C(saves_remaining), C(checkpoint_bytes), C(at_end), C(need_bytes), C(free_bytes), C(ok),
      C(fits_keep), C(warning))."
  returned: always
  type: dict
  sample:
    ports:
      ok: false
      detail: "1 of 2 ports busy"
      items:
        - {port: 8772, what: Ray dashboard, state: foreign, pid: 4242, command: "python3 -m http.server 8772"}
"""

import http.client
import json
import os
import re
import shutil
import socket

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mtslime.posttrain.plugins.module_utils.accelerator import (
    failure_message,
    probe,
    problems_for,
    tools_for,
)
from ansible_collections.mtslime.posttrain.plugins.module_utils.common import human_bytes
from ansible_collections.mtslime.posttrain.plugins.module_utils.disk_projection import project

PROC = "/proc"
DOCKER_TIMEOUT = 10

_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgtpe]?)(i?b)?\s*$", re.IGNORECASE)
_UNITS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5, "e": 6}

RAY_PROGRAMS = ("gcs_server", "raylet")
RAY_MARKERS = (
    "/ray/dashboard/",
    "ray/dashboard",
    "ray.dashboard",
    "/ray/_private/",
    "ray.util.client.server",
    "/ray/core/src/ray/",
)


# ---------------------------------------------------------------- sizes


def parse_size(value):
    """Bytes from a Docker-style size: `500g`, `2G`, `512m`, `16GiB`, `1.5t`, or a plain number of bytes
    (1024-based, as `docker run --shm-size`). Raises ValueError when it is not one."""
    if isinstance(value, bool):
        raise ValueError("not a size: %r" % (value,))
    if isinstance(value, int):
        if value < 0:
            raise ValueError("negative size: %r" % (value,))
        return value
    if isinstance(value, float):
        return int(value)
    match = _SIZE.match(str(value))
    if not match:
        raise ValueError("not a size: %r" % (value,))
    return int(float(match.group(1)) * (1024 ** _UNITS[match.group(2).lower()]))


def mem_total_bytes(proc=PROC):
    with open(os.path.join(proc, "meminfo"), encoding="ascii", errors="replace") as handle:
        for line in handle:
            if line.startswith("MemTotal:"):
                parts = line.split()
                return int(parts[1]) * (1024 if len(parts) < 3 or parts[2].lower() == "kb" else 1)
    raise ValueError("no MemTotal line in %s/meminfo" % proc)


# ---------------------------------------------------------------- disk


def nearest_existing(path):
    current = os.path.abspath(os.path.expanduser(path))
    while not os.path.exists(current):
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    return current


def project_run(path, free, need, projection):
    """The run's checkpoints against the free space (a warning when they do not fit)."""
    return project(os.path.abspath(os.path.expanduser(path)), free, need, projection["num_rollout"],
                   projection["save_interval"], projection.get("keep") or 0, projection.get("prune") or "trash")


def check_disk(items):
    failures = []
    rows = []
    for item in items:
        path = item["path"]
        what = item.get("what") or "data"
        var = item.get("var")
        try:
            need = parse_size(item["need_bytes"])
        except ValueError:
            failures.append(
                "disk: need_bytes %r for %s is not a size (use bytes or e.g. 32g)" % (item["need_bytes"], path)
            )
            continue
        checked = nearest_existing(path)
        try:
            stat = os.statvfs(checked)
            device = os.stat(checked).st_dev
        except OSError as exc:
            failures.append("disk: cannot measure free space at %s for %s (%s)" % (checked, path, exc.strerror or exc))
            continue
        free = stat.f_bavail * stat.f_frsize
        row = dict(
            path=path, checked=checked, free_bytes=free, need_bytes=need, what=what, ok=free >= need, device=device
        )
        if item.get("projection"):
            row["projection"] = project_run(path, free, need, item["projection"])
        rows.append(row)
        if free < need:
            at = "" if checked == os.path.abspath(path) else " (measured at %s, its nearest existing parent)" % checked
            fix = "set %s to a path on a larger disk" % var if var else "point it to a larger disk"
            failures.append(
                "disk: %s needs %s for %s but only %s is free there%s; free space on that filesystem or %s"
                % (path, human_bytes(need), what, human_bytes(free), at, fix)
            )
    # several paths on one filesystem must fit together
    by_device = {}
    for row in rows:
        by_device.setdefault(row["device"], []).append(row)
    for group in by_device.values():
        if len(group) < 2 or not all(r["ok"] for r in group):
            continue
        total = sum(r["need_bytes"] for r in group)
        free = min(r["free_bytes"] for r in group)
        if total > free:
            for row in group:
                row["ok"] = False
            failures.append(
                "disk: %s are on one filesystem and together need %s (%s) but it has %s free; free space there "
                "or move one of them to another disk"
                % (
                    ", ".join(r["path"] for r in group),
                    human_bytes(total),
                    " + ".join("%s for %s" % (human_bytes(r["need_bytes"]), r["what"]) for r in group),
                    human_bytes(free),
                )
            )
    for row in rows:
        row.pop("device", None)
    detail = "%d path%s checked" % (len(rows), "" if len(rows) == 1 else "s")
    return failures, dict(ok=not failures, detail=detail, items=rows)


# ---------------------------------------------------------------- shm


def check_shm(shm, proc=PROC):
    warnings = []
    failures = []
    var = shm.get("var")
    try:
        size = parse_size(shm["size"])
    except ValueError:
        failures.append(
            "shm: size %r is not a Docker size (use e.g. 500g, 2g or bytes)%s"
            % (shm["size"], "; fix %s" % var if var else "")
        )
        return failures, warnings, dict(ok=False, detail="invalid size")
    try:
        total = mem_total_bytes(proc)
    except (OSError, ValueError) as exc:
        warnings.append(
            "shm: cannot read MemTotal from %s/meminfo (%s); the shm size %s was not compared with RAM"
            % (proc, exc, shm["size"])
        )
        return failures, warnings, dict(ok=True, detail="RAM unknown", size_bytes=size, mem_total_bytes=None)
    info = dict(size_bytes=size, mem_total_bytes=total)
    if size > total:
        suggest = max(1, total // 2 // (1024**3))
        warnings.append(
            "shm: the container's shared memory %s (%s) exceeds this node's RAM (%s MemTotal); /dev/shm is RAM-backed "
            "tmpfs, so filling it (Ray object store, DataLoader workers) can run the node out of memory; lower %s "
            "to at most the RAM, e.g. %dg"
            % (shm["size"], human_bytes(size), human_bytes(total), var or "the shm size (docker --shm-size)", suggest)
        )
        return failures, warnings, dict(ok=False, detail="shm larger than RAM", **info)
    return failures, warnings, dict(ok=True, detail="%s of %s RAM" % (human_bytes(size), human_bytes(total)), **info)


# ---------------------------------------------------------------- ports


def listening_inodes(ports, proc=PROC):
    """{port: set(inode)} of TCP sockets in LISTEN state (IPv4 and IPv6) on the given ports."""
    wanted = set(ports)
    found = {p: set() for p in wanted}
    for table in ("tcp", "tcp6"):
        try:
            with open(os.path.join(proc, "net", table), encoding="ascii", errors="replace") as handle:
                lines = handle.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != "0A":
                continue
            try:
                port = int(fields[1].rsplit(":", 1)[1], 16)
            except (IndexError, ValueError):
                continue
            if port in wanted:
                found[port].add(fields[9])
    return found


def socket_owners(inodes, proc=PROC):
    """({inode: [pid, ...]}, denied) by reading the /proc/<pid>/fd links; `denied` is true when some
    processes could not be inspected (not root)."""
    targets = {"socket:[%s]" % inode: inode for inode in inodes}
    owners = {}
    denied = False
    if not targets:
        return owners, denied
    for name in os.listdir(proc):
        if not name.isdigit():
            continue
        fd_dir = os.path.join(proc, name, "fd")
        try:
            fds = os.listdir(fd_dir)
        except PermissionError:
            denied = True
            continue
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if target in targets:
                owners.setdefault(targets[target], []).append(int(name))
    return owners, denied


def process_args(pid, proc=PROC):
    try:
        with open(os.path.join(proc, str(pid), "cmdline"), "rb") as handle:
            raw = handle.read()
    except OSError:
        raw = b""
    args = [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]
    comm = ""
    try:
        with open(os.path.join(proc, str(pid), "comm"), encoding="utf-8", errors="replace") as handle:
            comm = handle.read().strip()
    except OSError:
        pass
    return args, comm


def is_ray(args, comm=""):
    """Whether a command line is one of Ray's processes: gcs_server, raylet, the dashboard (and its agent),
    the client server, or a `ray::` worker/actor."""
    joined = " ".join(args)
    if comm in RAY_PROGRAMS or any(os.path.basename(a) in RAY_PROGRAMS for a in args[:1]):
        return True
    if joined.startswith("ray::") or comm.startswith("ray::"):
        return True
    if any(os.path.basename(a) in RAY_PROGRAMS for a in args):
        return True
    return any(marker in joined for marker in RAY_MARKERS)


def _shorten(text, limit=160):
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_ports(items, proc=PROC):
    failures = []
    rows = []
    valid = [i for i in items if 0 < i["port"] < 65536]
    for item in items:
        if item not in valid:
            failures.append(
                "port %r (%s) is not a TCP port number; fix %s"
                % (item["port"], item.get("what") or "port", item.get("var") or "the port variable")
            )
    listening = listening_inodes([i["port"] for i in valid], proc)
    owners, denied = socket_owners(set().union(*listening.values()) if listening else set(), proc)
    busy = 0
    for item in valid:
        port, what = item["port"], item.get("what") or "port"
        var = item.get("var") or "the port variable (ray_gcs_port / ray_dashboard_port)"
        inodes = listening.get(port) or set()
        row = dict(port=port, what=what, state="free", pid=None, command=None)
        rows.append(row)
        if not inodes:
            continue
        busy += 1
        pids = sorted({pid for inode in inodes for pid in owners.get(inode, [])})
        if not pids:
            row["state"] = "unknown"
            why = (
                "a process this user may not inspect; run the preflight with become: true to name it"
                if denied
                else "a process outside this PID namespace (another container?)"
            )
            failures.append(
                "port %d (%s) is already listening (socket inode %s), held by %s; free the port or change %s"
                % (port, what, ", ".join(sorted(inodes)), why, var)
            )
            continue
        described = []
        ray = True
        for pid in pids:
            args, comm = process_args(pid, proc)
            command = _shorten(" ".join(args) or "[%s]" % comm)
            described.append((pid, command))
            ray = ray and is_ray(args, comm)
        row.update(pid=pids[0], pids=pids, command=described[0][1])
        if ray:
            row["state"] = "ray"
            continue
        row["state"] = "foreign"
        holders = ", ".join("pid %d (%s)" % d for d in described)
        failures.append(
            "port %d (%s) is held by %s, which is not Ray; stop that process or change %s to a free port"
            % (port, what, holders, var)
        )
    detail = "%d of %d port%s busy" % (busy, len(rows), "" if len(rows) == 1 else "s")
    return failures, dict(ok=not failures, detail=detail, items=rows)


# ---------------------------------------------------------------- docker


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over a unix socket (the Docker engine API)."""

    def __init__(self, path, timeout=DOCKER_TIMEOUT):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.unix_path)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


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
    conn, _ = docker_connection(address, timeout)
    try:
        conn.request("GET", path, headers={"Host": "docker"})
        response = conn.getresponse()
        return response.status, response.read().decode("utf-8", "replace")
    finally:
        conn.close()


def check_docker(docker):
    address = docker.get("socket") or "unix:///var/run/docker.sock"
    try:
        _, where = docker_connection(address)
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
            "%s: permission denied on %s; run the preflight with become: true or add the Ansible user to the docker group"
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
            "and journalctl -u docker" % (address, status, _shorten(body.strip(), 80))
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


# ---------------------------------------------------------------- commands


def check_commands(names):
    failures = []
    rows = []
    for name in names:
        path = shutil.which(name)
        rows.append(dict(name=name, path=path))
        if not path:
            failures.append(
                "command %s not found on PATH (%s); install it on the node" % (name, os.environ.get("PATH", ""))
            )
    return failures, dict(ok=not failures, detail="%d of %d found" % (len(rows) - len(failures), len(rows)), items=rows)


# ---------------------------------------------------------------- main

ARGUMENT_SPEC = dict(
    accelerator=dict(
        type="dict",
        default={},
        apply_defaults=True,
        options=dict(
            vendor=dict(type="str", choices=["auto", "musa", "cuda"], default="auto"),
            tool_dir=dict(type="path"),
            expected_count=dict(type="int"),
            expected_memory_mib=dict(type="int"),
            required=dict(type="bool", default=True),
        ),
    ),
    docker=dict(
        type="dict",
        default={},
        apply_defaults=True,
        options=dict(
            required=dict(type="bool", default=True),
            socket=dict(type="str", default="unix:///var/run/docker.sock"),
        ),
    ),
    disk=dict(
        type="list",
        elements="dict",
        default=[],
        options=dict(
            path=dict(type="path", required=True),
            need_bytes=dict(type="raw", required=True),
            what=dict(type="str"),
            var=dict(type="str"),
            projection=dict(
                type="dict",
                options=dict(
                    num_rollout=dict(type="int", required=True),
                    save_interval=dict(type="int", required=True),
                    keep=dict(type="int", default=0),
                    prune=dict(type="str", choices=["trash", "delete"], default="trash"),
                ),
            ),
        ),
    ),
    shm=dict(type="dict", options=dict(size=dict(type="raw", required=True), var=dict(type="str"))),
    ports=dict(
        type="list",
        elements="dict",
        default=[],
        options=dict(port=dict(type="int", required=True), what=dict(type="str"), var=dict(type="str")),
    ),
    commands=dict(type="list", elements="str", default=[]),
)


def preflight(params):
    """Run every check; returns (failures, warnings, checks, accelerator)."""
    failures, warnings, checks = [], [], {}

    accel = params["accelerator"]
    result = probe(accel["vendor"], accel["tool_dir"])
    problems = problems_for(
        result, accel["vendor"], accel["tool_dir"], accel["expected_count"], accel["expected_memory_mib"]
    )
    (failures if accel["required"] else warnings).extend(problems)
    warnings.extend("accelerator: %s" % warning for warning in result.get("warnings") or [])
    if result.get("tool_path"):
        detail = "%d %s device%s via %s" % (
            result["count"],
            result.get("vendor"),
            "" if result["count"] == 1 else "s",
            result.get("command") or result["tool_path"],
        )
    else:
        detail = "no %s found" % " / ".join(tools_for(accel["vendor"]))
    checks["accelerator"] = dict(ok=not problems, detail=detail, problems=problems)

    docker = params["docker"]
    docker_failures, checks["docker"] = check_docker(docker)
    (failures if docker["required"] else warnings).extend(docker_failures)
    runtimes = checks["docker"].get("runtimes")
    if result.get("vendor") == "musa" and result["count"] and runtimes is not None and "mthreads" not in runtimes:
        warnings.append(
            "docker: the engine has no mthreads runtime (runtimes: %s); Moore Threads' FAQ wants mt-container-toolkit "
            "bound to Docker (needed for --runtime mthreads containers; a --privileged container may still see the cards)"
            % ", ".join(runtimes)
        )

    if params["disk"]:
        disk_failures, checks["disk"] = check_disk(params["disk"])
        failures.extend(disk_failures)
        projections = [row.get("projection") or {} for row in checks["disk"]["items"]]
        warnings.extend(item["warning"] for item in projections if item.get("warning"))
    else:
        checks["disk"] = dict(ok=True, skipped=True, detail="no paths given")

    if params["shm"]:
        shm_failures, shm_warnings, checks["shm"] = check_shm(params["shm"])
        failures.extend(shm_failures)
        warnings.extend(shm_warnings)
    else:
        checks["shm"] = dict(ok=True, skipped=True, detail="no size given")

    if params["ports"]:
        port_failures, checks["ports"] = check_ports(params["ports"])
        failures.extend(port_failures)
    else:
        checks["ports"] = dict(ok=True, skipped=True, detail="no ports given")

    if params["commands"]:
        command_failures, checks["commands"] = check_commands(params["commands"])
        failures.extend(command_failures)
    else:
        checks["commands"] = dict(ok=True, skipped=True, detail="no commands given")

    return failures, warnings, checks, result


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    failures, warnings, checks, accelerator = preflight(module.params)
    for warning in warnings:
        module.warn(warning)
    result = dict(
        changed=False,
        ready=not failures,
        failures=failures,
        preflight_warnings=warnings,
        checks=checks,
        accelerator=accelerator,
    )
    if failures:
        module.fail_json(msg=failure_message("node preflight failed", failures, noun="check"), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()

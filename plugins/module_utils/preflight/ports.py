# node_preflight's port check: which process listens on a TCP port (from /proc/net/tcp{,6} and the
# /proc/<pid>/fd links), and whether it is Ray (ray/processes.py; the Ray stage takes it over) or something else.
from __future__ import annotations

import os

from ansible_collections.mtslime.posttrain.plugins.module_utils.common import shorten
from ansible_collections.mtslime.posttrain.plugins.module_utils.ray.processes import is_ray, process_args

PROC = "/proc"

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
            command = shorten(" ".join(args) or "[%s]" % comm)
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


# Whether Ray runs here: which processes of this PID namespace are Ray's, read from /proc. The one rule
# for "is this process Ray", used by the preflight's port check (who holds a Ray port) and by the Ray
# node probe (are there Ray processes on this node).
from __future__ import annotations

import os

PROC = "/proc"

RAY_PROGRAMS = ("gcs_server", "raylet")
RAY_MARKERS = (
    "/ray/dashboard/",
    "ray/dashboard",
    "ray.dashboard",
    "/ray/_private/",
    "ray.util.client.server",
    "/ray/core/src/ray/",
)


def process_args(pid, proc=PROC):
    """(argv, comm) of a process; empty when it is gone or cannot be read."""
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
    if comm in RAY_PROGRAMS or comm.startswith("ray::"):
        return True
    if args and args[0].startswith("ray::"):
        return True
    if any(os.path.basename(a) in RAY_PROGRAMS for a in args):
        return True
    joined = " ".join(args)
    return any(marker in joined for marker in RAY_MARKERS)


def ray_processes(proc=PROC, me=None):
    """[(pid, command)] of this PID namespace's Ray processes (not this one)."""
    me = os.getpid() if me is None else me
    found = []
    try:
        names = os.listdir(proc)
    except OSError:
        return found
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        args, comm = process_args(name, proc)
        if args and is_ray(args, comm):
            found.append((int(name), " ".join(args)[:160]))
    return sorted(found)

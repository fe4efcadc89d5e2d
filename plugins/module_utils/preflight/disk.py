# node_preflight's disk and shared-memory checks: free space at each path (paths on one filesystem
# must fit together, a training save dir's checkpoints are projected), and the container's --shm-size
# against the node's RAM. Each check returns (failures, [warnings,] check-entry).
from __future__ import annotations

import os
import re

from ansible_collections.mtslime.posttrain.plugins.module_utils.common import human_bytes
from ansible_collections.mtslime.posttrain.plugins.module_utils.checkpoint.disk_projection import project

PROC = "/proc"

_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgtpe]?)(i?b)?\s*$", re.IGNORECASE)
_UNITS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5, "e": 6}


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
                   projection["save_interval"], projection.get("keep") or 0, projection.get("prune") or "trash",
                   projection.get("size_from") or "need_bytes")


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


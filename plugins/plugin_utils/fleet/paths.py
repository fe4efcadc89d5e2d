# Container paths and the node paths behind them (bind mounts), and the relation of two paths.
from __future__ import annotations

import posixpath


def norm(path):
    """The compared form of a path: normalised, without a trailing '/'."""
    return posixpath.normpath(str(path)) if path else ""


def within(path, parent):
    """True when `path` is `parent` or lies below it (after normalisation)."""
    path, parent = norm(path), norm(parent)
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def relation(a, b):
    """'equal', 'inside' (a in b), 'contains' (b in a) or None."""
    if norm(a) == norm(b):
        return "equal"
    if within(a, b):
        return "inside"
    if within(b, a):
        return "contains"
    return None


def mounts(volumes):
    """[(host side, container side)] of bind mounts `host:container[:mode]`."""
    result = []
    for volume in volumes or []:
        parts = str(volume).split(":")
        if len(parts) >= 2 and parts[0] and parts[1]:
            result.append((parts[0], parts[1]))
    return result


def mount_of(path, volumes):
    """(host side, container side) of the mount `path` lies in (the longest one), or None."""
    best = None
    for host, inside in mounts(volumes):
        if within(path, inside) and (best is None or len(norm(inside)) > len(norm(best[1]))):
            best = (host, inside)
    return best


def host_path(path, volumes):
    """The node's path behind a container path; a path outside every mount is returned unchanged."""
    best = mount_of(path, volumes)
    if best is None:
        return path
    host, inside = best
    rest = norm(path)[len(norm(inside)):].lstrip("/")
    host = norm(host)
    if not rest:
        return host
    return host.rstrip("/") + "/" + rest

# What a node shows about its own Ray, read-only and fast (no `ray status`, which takes
# 40 s to fail on a dead head): Ray's processes in /proc (ray/processes.py), the cluster address Ray
# recorded at `ray start` (/tmp/ray/ray_current_cluster), whether that address answers,
# and which of the given TCP ports something listens on (/proc/net/tcp, tcp6).
from __future__ import annotations

import socket

from ansible_collections.mtslime.posttrain.plugins.module_utils.preflight.ports import listening_inodes
from ansible_collections.mtslime.posttrain.plugins.module_utils.ray.processes import ray_processes

PROC = "/proc"
RAY_CLUSTER_FILE = "/tmp/ray/ray_current_cluster"


def recorded_address(path=RAY_CLUSTER_FILE):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return (handle.readline() or "").strip()
    except OSError:
        return ""


def answers(address, timeout=3.0):
    """Whether `host:port` accepts a TCP connection."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return False
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return True
    except OSError:
        return False


def listening(ports, proc=PROC):
    """The ports of `ports` that a TCP socket listens on (IPv4 or IPv6), sorted."""
    wanted = set(int(p) for p in ports if p)
    return sorted(port for port, inodes in listening_inodes(wanted, proc).items() if inodes)


def probe_node(ports, proc=PROC, cluster_file=RAY_CLUSTER_FILE):
    processes = ray_processes(proc)
    address = recorded_address(cluster_file)
    return {
        "processes": len(processes),
        "process_list": ["%d %s" % p for p in processes[:10]],
        "recorded_address": address,
        "recorded_answers": bool(address) and answers(address),
        "listening": listening(ports, proc),
    }

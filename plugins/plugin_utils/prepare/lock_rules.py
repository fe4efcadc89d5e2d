# Controller side: when a storage lock's holder is dead, and what a waiter says.
#
# The holder of a lock (plugins/module_utils/prepare/lock.py) is a run: the
# ansible-playbook process on its controller. So:
#   - a holder on this controller is dead when its process no longer runs (or the pid
#     now belongs to another process: its start time differs) -> taken over at once;
#   - a holder on another controller cannot be looked at: it is dead when its lease
#     ran out (it renews the lease on every progress poll) -> taken over then;
#   - otherwise it is alive, and the run waits, saying who holds it, since when and
#     what it is doing, until the lock is free or `timeout` has passed.
# Never by waiting out a timeout: a dead holder is recognised on the first look.
from __future__ import annotations

import os
import socket
import time

from ansible_collections.mtslime.posttrain.plugins.plugin_utils.waiting import duration

LIVE, DEAD, EXPIRED, UNKNOWN_DEAD = "live", "dead", "expired", "no-record"


def process_start(pid):
    """The start time of process `pid` (clock ticks since boot, from /proc), None when
    it does not run. On a system without /proc: 0 when it runs (pid reuse not detected)."""
    try:
        with open("/proc/%d/stat" % int(pid), encoding="utf-8") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return int(fields[19])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, IndexError):
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return None
        except OSError:
            pass
        return 0


def me(run_id, node):
    """The holder record of this run on `node`: the ansible-playbook process is the
    parent of the worker that runs the action plugin."""
    pid = os.getppid()
    return {
        "token": "%s/%s" % (run_id, node),
        "run_id": run_id,
        "node": node,
        "controller": socket.gethostname(),
        "controller_pid": pid,
        "controller_pid_start": process_start(pid),
    }


def judge(record, mine, node_now, start_of=process_start):
    """(verdict, reason) for a lock held by `record`, seen by `mine` at `node_now`
    (the node's clock, which wrote `renewed`)."""
    if not record.get("token"):
        if _lease_over(record, node_now):
            return UNKNOWN_DEAD, "the lock has no holder record and is older than its lease"
        return LIVE, "the lock is being taken (no holder record yet)"
    if record.get("controller") == mine["controller"] and record.get("controller_pid"):
        started = start_of(record["controller_pid"])
        if started is None:
            return DEAD, "its process %s on %s no longer runs" % (record["controller_pid"], record["controller"])
        wanted = record.get("controller_pid_start")
        if wanted not in (None, 0) and started not in (0, wanted):
            return DEAD, ("its process %s on %s no longer runs (the pid now belongs to another process)"
                          % (record["controller_pid"], record["controller"]))
        return LIVE, "its process %s on %s runs" % (record["controller_pid"], record["controller"])
    if _lease_over(record, node_now):
        return EXPIRED, "its lease ran out %s ago (last renewed %s ago, lease %s)" % (
            duration(node_now - _renewed(record) - _lease(record)), duration(node_now - _renewed(record)),
            duration(_lease(record)))
    return LIVE, "its lease runs %s more" % duration(_renewed(record) + _lease(record) - node_now)


def _lease(record):
    return float(record.get("lease") or 0) or 300.0


def _renewed(record):
    return float(record.get("renewed") or record.get("since") or 0)


def _lease_over(record, now):
    return now - _renewed(record) > _lease(record)


def when(epoch):
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(epoch or 0)))


def describe(record, node_now):
    """Who holds the lock, since when, what it is doing: the waiter's progress line."""
    if not record:
        return "the lock is free"
    who = "run %s of node %s (controller %s, pid %s)" % (
        record.get("run_id", "?"), record.get("node", "?"), record.get("controller", "?"),
        record.get("controller_pid", "?"))
    if not record.get("token"):
        who = "an unknown holder"
    since = float(record.get("since") or 0)
    return "held by %s since %s (%s ago), doing: %s" % (
        who, when(since), duration(node_now - since), record.get("doing") or "nothing said")

# Copyright: mtslime.posttrain contributors
# Apache License 2.0
"""The one lease on a cluster's job: a site.yml run's ray_job task (its `lease_dir`), job_supervise when it
disables supervision (playbooks/stop.yml), and the supervisor's check each take it before they plan, submit or
stop, so two of them never act on the same job at once. It is a lock directory of prepare/lock.py (the
storage lock's record, mkdir-atomic); its holder is a process of the training container, so a holder whose
process is gone, on the same host, is dead at once, and any holder is dead when its lease runs out.
Standard library only; Python 3.8+."""
from __future__ import annotations

import contextlib
import os
import socket
import time
import uuid

from ansible_collections.mtslime.posttrain.plugins.module_utils.prepare import lock

LEASE_SECONDS = 900


class LeaseBusy(Exception):
    def __init__(self, record):
        self.record = record or {}
        super().__init__("the job's lease is held by %s since %s (%s)" % (
            self.record.get("who") or "an unknown holder", self.record.get("since_iso") or "?",
            self.record.get("doing") or "acting on the job"))


def holder(who):
    host = socket.gethostname()
    return {"token": "%s/%s/%d/%s" % (who, host, os.getpid(), uuid.uuid4().hex[:8]), "who": who, "host": host,
            "pid": os.getpid(), "since_iso": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def dead(record, now, proc="/proc"):
    """Whether the holder of `record` is gone: its lease ran out, or it ran on this host and its process is gone."""
    if lock.expired(record, now):
        return True
    pid = record.get("pid")
    return bool(pid) and record.get("host") == socket.gethostname() and not os.path.exists(
        os.path.join(proc, str(pid)))


def take(lock_dir, who, doing, wait, sleep=time.sleep, clock=time.time):
    """The holder record once the lease is ours; waits up to `wait` seconds for a live holder, takes a dead one's
    over; raises LeaseBusy when a live holder keeps it."""
    mine = holder(who)
    deadline = clock() + wait
    while True:
        state, record = lock.acquire(lock_dir, mine, LEASE_SECONDS, doing=doing)
        if state in ("taken", "ours"):
            return mine
        if record is not None and dead(record, clock()):
            state, record = lock.take_over(lock_dir, record.get("token"), mine, LEASE_SECONDS, doing=doing)
            if state == "taken":
                return mine
            if state == "free":
                continue
        if clock() >= deadline:
            raise LeaseBusy(record)
        sleep(1.0)


@contextlib.contextmanager
def held(lock_dir, who, doing, wait=300, sleep=time.sleep, clock=time.time):
    """Hold the lease for the body; released after it, whatever happens."""
    os.makedirs(os.path.dirname(lock_dir.rstrip("/")) or ".", mode=0o750, exist_ok=True)
    mine = take(lock_dir, who, doing, wait, sleep=sleep, clock=clock)
    try:
        yield mine
    finally:
        lock.release(lock_dir, mine["token"])

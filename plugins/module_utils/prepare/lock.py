# The lock on shared storage that the prepare flow (roles/prepare) holds while it
# makes a shared artifact (the data, the model, the converted checkpoint).
#
# A lock is a directory `<target>.lock` (mkdir is atomic on local file systems and
# on NFS) holding `holder.json`, the record of who holds it:
#   token                  unique per run and node ("<run id>/<node>")
#   run_id, node           the run and the inventory host that took it
#   controller, controller_pid, controller_pid_start
#                          the controller host and its ansible-playbook process (the
#                          holder: when it dies, the lock is dead), with the process's
#                          start time so a reused pid is not mistaken for it
#   since, renewed, lease  when it was taken and last renewed (this node's clock),
#                          and for how long a renewal keeps it alive
#   doing, doing_data      what the holder is doing (a line for people) and what a
#                          run that takes the lock over needs to adopt the work (the
#                          async job id of the producer, its temporary directory)
# Only this file reads or writes the record; the rules that decide whether a
# holder is dead are the controller's (plugins/plugin_utils/prepare/lock_rules.py).
#
# Standard library only; Python 3.8+.
from __future__ import annotations

import json
import os
import time

RECORD = "holder.json"
GUARD_SUFFIX = ".takeover"
# A takeover holds the guard for a few milliseconds; one older than this was left by a crash.
GUARD_STALE = 60


def _record_path(lock_dir):
    return os.path.join(lock_dir, RECORD)


def read(lock_dir):
    """The holder record; None when there is no lock. A lock directory without a
    readable record (a holder that died between mkdir and writing it) reads as a
    record without token, renewed when the directory was made."""
    try:
        with open(_record_path(lock_dir), encoding="utf-8") as handle:
            record = json.load(handle)
        if isinstance(record, dict):
            return record
    except (OSError, ValueError):
        pass
    try:
        mtime = os.stat(lock_dir).st_mtime
    except OSError:
        return None
    return {"token": None, "since": mtime, "renewed": mtime, "lease": 60,
            "doing": "unknown (the lock has no holder record)"}


def _write(lock_dir, record):
    tmp = _record_path(lock_dir) + ".%d.tmp" % os.getpid()
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(record, handle, sort_keys=True)
    os.replace(tmp, _record_path(lock_dir))
    return record


def new_record(holder, lease, doing, doing_data, now):
    record = dict(holder)
    record.update(since=now, renewed=now, lease=int(lease), doing=doing or "", doing_data=doing_data or {})
    return record


def acquire(lock_dir, holder, lease, doing="", doing_data=None, now=None):
    """One attempt, never waits. ("taken" | "ours" | "held", record)."""
    now = time.time() if now is None else now
    try:
        os.mkdir(lock_dir, 0o755)
    except FileExistsError:
        record = read(lock_dir)
        if record is None:  # released in between: try once more
            return acquire(lock_dir, holder, lease, doing, doing_data, now)
        if record.get("token") == holder["token"]:
            return "ours", renew(lock_dir, holder["token"], doing, doing_data, now=now, lease=lease)
        return "held", record
    return "taken", _write(lock_dir, new_record(holder, lease, doing, doing_data, now))


def renew(lock_dir, token, doing=None, doing_data=None, now=None, lease=None):
    """Extend the lease (and update what the holder is doing). Raises LookupError
    when the lock is not held by `token` (gone, or taken over after its lease ran out)."""
    record = read(lock_dir)
    if record is None or record.get("token") != token:
        raise LookupError("the lock %s is not held by %s (holder: %s)"
                          % (lock_dir, token, (record or {}).get("token") or "none"))
    record["renewed"] = time.time() if now is None else now
    if lease is not None:
        record["lease"] = int(lease)
    if doing is not None:
        record["doing"] = doing
    if doing_data is not None:
        record["doing_data"] = doing_data
    return _write(lock_dir, record)


def take_over(lock_dir, dead_token, holder, lease, doing="", doing_data=None, now=None):
    """Replace the record of the dead holder `dead_token` with ours, only if it still
    is that holder's (under a guard file, so two runs that both found it dead do not
    both take it). ("taken", previous record) | ("held", current record) | ("free", None)."""
    now = time.time() if now is None else now
    guard = lock_dir.rstrip("/") + GUARD_SUFFIX
    try:
        fd = os.open(guard, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        try:
            if now - os.stat(guard).st_mtime > GUARD_STALE:
                os.unlink(guard)
        except OSError:
            pass
        return "held", read(lock_dir)
    try:
        os.write(fd, holder["token"].encode())
        os.close(fd)
        record = read(lock_dir)
        if record is None:
            return "free", None
        if (record.get("token") or "") != (dead_token or ""):
            return "held", record
        if not os.path.isdir(lock_dir):
            return "free", None
        _write(lock_dir, new_record(holder, lease, doing, doing_data, now))
        return "taken", record
    finally:
        try:
            os.unlink(guard)
        except OSError:
            pass


def release(lock_dir, token):
    """Remove the lock when `token` holds it. (released, record of the holder found)."""
    record = read(lock_dir)
    if record is None or record.get("token") != token:
        return False, record
    try:
        os.unlink(_record_path(lock_dir))
    except FileNotFoundError:
        pass
    os.rmdir(lock_dir)
    return True, record


def expired(record, now):
    """Whether the record's lease ran out (the holder stopped renewing it)."""
    lease = float(record.get("lease") or 0) or 300.0
    return now - float(record.get("renewed") or record.get("since") or 0) > lease

# Copyright: mtslime.posttrain contributors
# Apache License 2.0
"""What ray_job returns: the fields of a reported job, the summaries of the experiment's jobs,
and the small record each step of the module returns (an outcome) and how they add up.

Each step (run files, plan, submission, stop, follower) builds its own outcome and returns it;
the module adds them up once, at the end. Nothing is written on a shared object."""
from __future__ import annotations

import datetime

from ansible_collections.mtslime.posttrain.plugins.module_utils.job.rules import ACTIVE, STATUSES

# The job fields the module always returns, None when no job is reported.
JOB_FIELDS = ("submission_id", "attempt", "status", "message", "start_time", "start_time_ms", "end_time",
              "end_time_ms", "driver_exit_code", "entrypoint")


class JobError(Exception):
    """A failure of one step; `extra` goes into the failed result (e.g. Ray's error)."""

    def __init__(self, message, **extra):
        super().__init__(message)
        self.extra = extra


def iso(ms):
    if not ms:
        return None
    stamp = datetime.datetime.fromtimestamp(ms / 1000.0, tz=datetime.timezone.utc)
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def now_iso():
    return datetime.datetime.now(tz=datetime.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def tail_text(text, limit=4000):
    text = text or ""
    return text if len(text) <= limit else "..." + text[-limit:]


def job_fields(job):
    """The returned fields of one reported job (Ray's record plus `_attempt`)."""
    if job is None:
        return {}
    fields = {
        "submission_id": job.get("submission_id"),
        "attempt": job.get("_attempt"),
        "status": job.get("status"),
        "message": tail_text(job.get("message")),
        "start_time": iso(job.get("start_time")),
        "start_time_ms": job.get("start_time"),
        "end_time": iso(job.get("end_time")),
        "end_time_ms": job.get("end_time"),
        "driver_exit_code": job.get("driver_exit_code"),
        "entrypoint": job.get("entrypoint"),
        "metadata": job.get("metadata") or {},
    }
    manifest = fields["metadata"].get("mtslime_manifest")
    if manifest:
        fields["manifest_file"] = manifest
    return fields


def job_summary(job):
    return {
        "submission_id": job.get("submission_id"),
        "attempt": job.get("_attempt"),
        "status": job.get("status"),
        "start_time": iso(job.get("start_time")),
        "end_time": iso(job.get("end_time")),
        "driver_exit_code": job.get("driver_exit_code"),
    }


def outcome(changed=False, fields=None, actions=(), warnings=(), diffs=(), seen=(), job=None):
    """One step's result: `fields` for the module's result, `seen` the newest records of jobs
    it touched, `job` the job whose log to follow next."""
    return {"changed": bool(changed), "fields": dict(fields or {}), "actions": list(actions),
            "warnings": list(warnings), "diffs": list(diffs), "seen": list(seen), "job": job}


def reported(job, **fields):
    """The outcome of a step that reports `job` (its fields, then `fields` on top)."""
    merged = job_fields(job)
    merged.update(fields)
    return outcome(fields=merged, seen=[job] if job else [], job=job)


def combine(parts):
    """The steps' outcomes, in order: later fields win, lists add up, changed if any changed."""
    total = outcome()
    for part in parts:
        if not part:
            continue
        total["changed"] = total["changed"] or part["changed"]
        total["fields"].update(part["fields"])
        for key in ("actions", "diffs", "seen"):
            total[key].extend(part[key])
        for warning in part["warnings"]:
            if warning not in total["warnings"]:
                total["warnings"].append(warning)
        if part["job"] is not None:
            total["job"] = part["job"]
    return total


def experiment_jobs(ours, seen):
    """(jobs, active) after the task: the listed jobs updated by the newest records seen."""
    listed = {job["submission_id"]: job for job in ours}
    for job in seen:
        sid = job.get("submission_id")
        if sid and job.get("status") in STATUSES:
            listed[sid] = dict(job, _attempt=job.get("_attempt", (listed.get(sid) or {}).get("_attempt")))
    ordered = sorted(listed.values(), key=lambda j: (j.get("start_time") or float("inf"), j.get("_attempt") or 0))
    active = [job["submission_id"] for job in ordered if job.get("status") in ACTIVE]
    return [job_summary(job) for job in ordered], active


def base_result(url, log_file):
    result = dict.fromkeys(JOB_FIELDS)
    result.update(message="", dashboard_url=url, jobs=[], active=[], resumed_from_iteration=None,
                  manifest_file=None, log_file=log_file, attempt_log=None, follower_pid=None,
                  follower={"kind": None, "what": "none"}, files_changed=[])
    return result

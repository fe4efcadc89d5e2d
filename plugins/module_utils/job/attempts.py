# The history of an experiment's attempts, from what is on disk and what Ray still knows:
# per attempt its status, the step it reached, its exception line and the guide's FAQ hint.
#
# Sources, newest knowledge first:
# - Ray's job list (jobs of the experiment whose submission id is <experiment>-attempt-<n>);
# - the end record <manifest dir>/<id>.end.json, written (atomically) the first time a run
#   sees the attempt ended, so the history survives a restart of the Ray head, which forgets
#   every job;
# - the attempt's own log (<log dir>/<stem>.<id>.log, written by ray_job's follower): the last
#   step line, and the exception line of the last traceback that no step followed
#   (logs/slime.py / logs/tracebacks.py: rank prefixes, Ray's RayTaskError, launcher noise).
# An attempt that Ray forgot and that has no end record is FAILED when its log ends with such an
# exception, else LOST (the head went away under it: nothing says it failed).
# Standard library only; Python 3.8+.
from __future__ import annotations

import datetime
import json
import os
import re

from ansible_collections.mtslime.posttrain.plugins.module_utils.common import atomic_write
from ansible_collections.mtslime.posttrain.plugins.module_utils.job import rules
from ansible_collections.mtslime.posttrain.plugins.module_utils.logs.slime import summarize_file, summarize_text

END_SUFFIX = ".end.json"
LOST = "LOST"  # not Ray's: an attempt Ray forgot whose end nothing recorded
LOG_SUMMARY_BYTES = 1024 * 1024  # the metrics (last step) come from the log's last MiB; errors from all of it


def attempt_re(experiment):
    return re.compile(r"(?:^|\.)(%s-attempt-(\d+))\.(?:json|log|end\.json)$" % re.escape(experiment))


def end_file(manifest_dir, submission_id):
    return os.path.join(manifest_dir, submission_id + END_SUFFIX)


def read_end(manifest_dir, submission_id):
    """The end record of an attempt, or None (missing, empty or unreadable: a record is only trusted whole)."""
    if not manifest_dir:
        return None
    try:
        with open(end_file(manifest_dir, submission_id), encoding="utf-8") as handle:
            record = json.load(handle)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("status") else None


def write_end(manifest_dir, record):
    path = end_file(manifest_dir, record["submission_id"])
    atomic_write(path, json.dumps(record, indent=2, sort_keys=True) + "\n", mode=0o640)
    return path


def recorded_attempts(experiment, directories):
    """{attempt number: submission id} of every attempt with a file in `directories` (manifests,
    end records, per-attempt logs)."""
    pattern = attempt_re(experiment)
    found = {}
    for directory in directories:
        if not directory:
            continue
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            match = pattern.search(name)
            if match:
                found[int(match.group(2))] = match.group(1)
    return found


def from_log(summary):
    """What an attempt's log says about its end: {step, first_step, exception, exception_line, hint, faq,
    survived}. `exception` is the `Xxx: message` line of the last traceback that no step followed (None when
    every traceback was followed by steps); `survived` the first error-looking line when it is not that one."""
    fatal = summary.get("fatal_error") or None
    first = summary.get("first_error") or None
    hint = summary.get("hint")
    faq = None
    if summary.get("hint_from") == "fatal_error" and fatal:
        faq = fatal.get("faq")
    elif summary.get("hint_from") == "first_error" and first:
        faq = first.get("faq")
    return {
        "step": summary.get("last_step"),
        "first_step": summary.get("first_step"),
        "exception": (fatal or {}).get("exception"),
        "exception_line": (fatal or {}).get("lineno"),
        "hint": hint,
        "faq": faq,
        "survived": _survived(first, fatal),
    }


def _survived(first, fatal):
    if not first or (fatal and (first.get("lineno") == fatal.get("lineno")
                                or (first.get("exception") or "").strip() == (fatal.get("exception") or "").strip())):
        return None
    return {"lineno": first.get("lineno"), "line": (first.get("exception") or first.get("line") or "").strip()}


def read_log(log_path=None, text=None):
    """from_log() of a log file or text; None when there is neither."""
    if log_path and os.path.isfile(log_path):
        try:
            return from_log(summarize_file(log_path, max_bytes=LOG_SUMMARY_BYTES, tail_lines=0, context_lines=0))
        except OSError:
            return None
    if text is not None:
        return from_log(summarize_text(text, max_bytes=LOG_SUMMARY_BYTES, tail_lines=0, context_lines=0))
    return None


def iso_ms(ms):
    if not ms:
        return None
    return datetime.datetime.fromtimestamp(ms / 1000.0, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def read_manifest(manifest_dir, submission_id):
    if not manifest_dir:
        return {}
    try:
        with open(os.path.join(manifest_dir, submission_id + ".json"), encoding="utf-8") as handle:
            found = json.load(handle)
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _end_record(submission_id, attempt, status, status_from, job, log, log_path, now, manifest=None):
    manifest = manifest or {}
    resume = manifest.get("resume") if isinstance(manifest.get("resume"), dict) else {}
    record = {
        "submission_id": submission_id,
        "attempt": attempt,
        "status": status,
        "status_from": status_from,
        "submitted_at": manifest.get("submitted_at") or iso_ms((job or {}).get("start_time")),
        "ended_at": iso_ms((job or {}).get("end_time")),
        "resumed_from_iteration": manifest.get("resumed_from_iteration"),
        "data_state": resume.get("dataset_state") if isinstance(resume.get("dataset_state"), bool) else None,
        "end_time_ms": (job or {}).get("end_time"),
        "driver_exit_code": (job or {}).get("driver_exit_code"),
        "message": ((job or {}).get("message") or "")[-500:] or None,
        "log": log_path,
        "recorded_at": now,
    }
    record.update(log or {"step": None, "first_step": None, "exception": None, "exception_line": None,
                          "hint": None, "faq": None, "survived": None})
    return record


def history(experiment, ray_jobs, manifest_dir=None, log_path_of=None, ray_log_text=None, now=None,
            include_active=False):
    """(records, new_records): every ended attempt of `experiment`, oldest first, and those of them that have
    no end record yet (the caller writes them with write_end unless in check mode).

    ray_jobs: Ray's jobs of the experiment as dicts (submission_id, status, end_time, ...; `_attempt` or the
    id's number); log_path_of(submission_id) -> the attempt's log path or None; ray_log_text(submission_id)
    -> its log through the Jobs API or None, used when there is no file. Attempts still PENDING or RUNNING
    are left out, unless include_active (they are then never among new_records)."""
    pattern = re.compile(r"^%s-attempt-(\d+)$" % re.escape(experiment))
    known = {}
    for job in ray_jobs or []:
        match = pattern.match(job.get("submission_id") or "")
        if match:
            known[int(match.group(1))] = job
    directories = [manifest_dir]
    if log_path_of:
        sample = log_path_of("%s-attempt-0" % experiment)
        directories.append(os.path.dirname(sample) if sample else None)
    numbers = recorded_attempts(experiment, directories)
    for number, job in known.items():
        numbers[number] = job["submission_id"]
    records, new = [], []
    for number in sorted(numbers):
        sid = numbers[number]
        job = known.get(number)
        active = job is not None and not rules.is_ended(job)
        if active and not include_active:
            continue
        recorded = None if active else read_end(manifest_dir, sid)
        if recorded is not None and (job is None or recorded.get("status") == job.get("status")):
            records.append(recorded)
            continue
        log_path = log_path_of(sid) if log_path_of else None
        log = read_log(log_path if log_path and os.path.isfile(log_path) else None)
        if log is None and job is not None and ray_log_text:
            try:
                text = ray_log_text(sid)
            except Exception:  # the Jobs API may have dropped the log; the record says "no log"
                text = None
            log = read_log(text=text)
        if job is not None:
            status, status_from = job["status"], "ray"
        elif log is not None and log.get("exception"):
            status, status_from = rules.FAILED, "log"
        else:
            status, status_from = LOST, "none"
        record = _end_record(sid, number, status, status_from, job, log, log_path, now,
                             read_manifest(manifest_dir, sid))
        records.append(record)
        if not active:
            new.append(record)
    return records, new


ATTEMPT_FIELDS = ("submission_id", "attempt", "status", "submitted_at", "ended_at", "first_step", "last_step",
                  "exception", "hint", "resumed_from_iteration", "data_state", "log")


def as_attempt(record):
    """A record in the shape of ray_job's RV(attempts) (docs/status.md): last_step is the step it reached."""
    item = {name: record.get(name) for name in ATTEMPT_FIELDS}
    item["last_step"] = record.get("step")
    item["exception_line"] = record.get("exception_line")
    item["faq"] = record.get("faq")
    return item

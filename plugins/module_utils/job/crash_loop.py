# The crash-loop rule: a job that fails at the same place every time is not resubmitted forever.
#
# Over the experiment's ended attempts (attempts.history, oldest first): the count of attempts that
# FAILED without passing the furthest step the earlier failures of the streak reached. An attempt that
# gets past that step (whatever its end) or that SUCCEEDED starts a new streak; STOPPED and LOST
# attempts that did not pass it neither count nor reset. With `limit` (ray_job's max_failures_at_step,
# the role's train_job_max_failures_at_step, default 2) failures in the streak, the next attempt is not
# submitted unless `retry` is set: the module fails with the history and the ways out.
# Each submission reports the previous attempt's end (status, step, exception line, FAQ hint).
# Standard library only; Python 3.8+.
from __future__ import annotations

import datetime
import os

from ansible_collections.mtslime.posttrain.plugins.module_utils.job import rules
from ansible_collections.mtslime.posttrain.plugins.module_utils.job.attempts import LOST, as_attempt, history, write_end

DEFAULT_LIMIT = 2


def _step(record):
    step = record.get("step")
    return -1 if step is None else step


def count(records):
    """{count, step, attempts}: the current streak of failures at the same place.
    `step` is the furthest step the streak's attempts reached (None: none logged a step)."""
    failures, furthest, streak = 0, None, []
    for record in records:
        step = _step(record)
        if failures and step > furthest:
            failures, furthest, streak = 0, None, []
        status = record.get("status")
        if status == rules.SUCCEEDED:
            failures, furthest, streak = 0, None, []
        elif status == rules.FAILED:
            failures += 1
            furthest = step if furthest is None else max(furthest, step)
            streak.append(record["submission_id"])
    return {
        "count": failures,
        "step": None if furthest is None or furthest < 0 else furthest,
        "attempts": streak,
    }


def where(record):
    step = record.get("step")
    return "after step %d" % step if step is not None else "before its first step"


def describe(record):
    """One line: "<id> FAILED after step 7: RuntimeError: boom (log line 120) -- FAQ Q4: <hint>"."""
    text = "%s %s %s" % (record["submission_id"], record.get("status"), where(record))
    if record.get("exception"):
        text += ": %s" % record["exception"]
        if record.get("exception_line"):
            text += " (log line %d)" % record["exception_line"]
    elif record.get("status") == rules.FAILED:
        text += "; its log has no exception after the last step"
        if record.get("message"):
            text += " (Ray: %s)" % record["message"].strip().splitlines()[-1][:200]
    elif record.get("status") == LOST:
        text += " (Ray forgot it, e.g. the head restarted, and nothing recorded its end)"
    if record.get("hint"):
        text += " -- %s%s" % (("FAQ %s: " % record["faq"]) if record.get("faq") else "", record["hint"])
    return text


def streak_text(loop):
    if loop["step"] is None:
        return "before their first step"
    return "without passing step %d" % loop["step"]


def refusal(experiment, records, loop, limit, next_attempt):
    by_id = {r["submission_id"]: r for r in records}
    lines = [
        "experiment %s: %d attempts in a row failed %s (max_failures_at_step is %d), so attempt %d is not submitted:"
        % (experiment, loop["count"], streak_text(loop), limit, next_attempt)
    ]
    lines += ["  %s" % describe(by_id[sid]) for sid in loop["attempts"]]
    lines.append(
        "Fix the cause (the exception and hint above, or a value of the run such as a train argument), then rerun "
        "with -e train_job_retry=true (module option retry) to submit one more attempt; or raise "
        "train_job_max_failures_at_step."
    )
    return "\n".join(lines)


def before_submit(run, jobs, manifest_dir, log_path_of=None, ray_log_text=None, next_attempt=None):
    """The hook ray_job calls before it submits attempt `next_attempt`: records the ends of ended attempts
    (not in check mode), reports the previous attempt's end, and fails when the rule says so."""
    params = run.params
    limit = params.get("max_failures_at_step")
    limit = DEFAULT_LIMIT if limit is None else limit
    if limit < 0:
        run.fail("max_failures_at_step is %d; give 0 (no limit) or more (train_job_max_failures_at_step)" % limit)
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    records, new = history(params["experiment"], jobs, manifest_dir, log_path_of, ray_log_text, now)
    if manifest_dir and new and not run.check:
        try:
            os.makedirs(manifest_dir, mode=0o750, exist_ok=True)
            for record in new:
                path = write_end(manifest_dir, record)
                run.actions.append("recorded the end of %s in %s" % (record["submission_id"], path))
        except OSError as exc:
            run.warn("cannot record the end of an attempt in %s: %s" % (manifest_dir, exc.strerror or exc))
    loop = count(records)
    loop.update(limit=limit, retry=bool(params.get("retry")), blocked=False)
    run.result["attempts_history"] = records
    run.result["crash_loop"] = loop
    run.result["previous_attempt"] = records[-1] if records else None
    if not records:
        return loop
    previous = records[-1]
    if previous.get("status") != rules.SUCCEEDED:
        text = "previous attempt: %s" % describe(previous)
        if loop["count"]:
            text += "; %d of %d failures %s" % (loop["count"], limit, streak_text(loop))
        run.actions.append(text)
        run.warn(text)
    if limit > 0 and loop["count"] >= limit:
        if loop["retry"]:
            note = "retry is set: submitting one more attempt although %d attempts failed %s" % (
                loop["count"], streak_text(loop))
            run.actions.append(note)
            run.warn(note)
        else:
            loop["blocked"] = True
            run.fail(refusal(params["experiment"], records, loop, limit, next_attempt or 0))
    return loop


def for_status(run, jobs, manifest_dir, log_path_of=None):
    """ray_job state=status: RV(attempts) (every attempt, the active one too, from Ray, the end records and the
    logs) and RV(crash_loop) {count, step, limit, attempts}. Reads only."""
    params = run.params
    limit = params.get("max_failures_at_step")
    records, _new = history(params["experiment"], jobs, manifest_dir, log_path_of, None, None, include_active=True)
    ended = [r for r in records if not rules.is_active(r)]
    loop = count(ended)
    loop["limit"] = DEFAULT_LIMIT if limit is None else limit
    run.result["attempts"] = [as_attempt(r) for r in records]
    run.result["crash_loop"] = loop
    return loop

"""Crash loops stop, and errors a job survives are not fatal (issue 11; issue 13 item 3).

A job that crashes at a fixed step (stand-in knob crash_at_step) over three reruns: the first rerun submits and
reports the previous attempt's end, the second refuses (rc != 0) with the history and the way out, and
`-e train_job_retry=true` submits exactly once more. Then a job that prints a handled traceback (knob
handled_traceback_at_step) right before its first step passes the first-step wait with a warning. Every file of
the checkpoint dir and of the logs that existed before is still there afterwards."""
from __future__ import annotations

import os
import time

from default_bed import LOGS, SAVE, active, control, in_container, ours, site, tracker, wait

JOB_TASK = "Keep the experiment's training job"
WAIT_TASK = "Wait for the first training step"


def files_under(root):
    found = set()
    for directory, _dirs, names in os.walk(root):
        found.update(os.path.relpath(os.path.join(directory, name), root) for name in names)
    return found


def logs():
    return set(in_container("ls -A %s" % LOGS).stdout.split())


def current_step():
    out = in_container("grep -oE 'step [0-9]+:' %s/qwen3-8B.log | tail -1 | grep -oE '[0-9]+'" % LOGS).stdout
    return int(out) if out.strip() else None


def status_of(sid):
    return next((j["status"] for j in ours() if j["submission_id"] == sid), None)


def ended(sid):
    return status_of(sid) in ("FAILED", "STOPPED", "SUCCEEDED")


def refusals(run):
    return [r for r in run.results(JOB_TASK) if (r.get("crash_loop") or {}).get("blocked")]


def job_results(run):
    return [r for r in run.results(JOB_TASK) if "crash_loop" in r or "msg" in r]


def timed(label, call, *args):
    start = time.time()
    value = call(*args)
    print("%s: %.0f s" % (label, time.time() - start))
    return value


def crash_step_after(step):
    """A step N > step + 2 that is two steps after a save (save-interval 3: saves after steps 2, 5, 8, ...):
    each attempt resumed from the save before N logs N-2 and N-1, then crashes, so each reaches N-1."""
    n = step + 3
    while n % 3 != 2:
        n += 1
    return n


def crash_ahead_of(job):
    """Sets a crash step ahead of `job` and waits for the job to end there; returns the step. A job that logs past
    the step before it reads the knob (the step read from its log a moment late, on a loaded machine) gets a later
    one, up to three times."""
    for dummy in range(3):
        crash = crash_step_after(wait(current_step, what="a step line"))
        control(crash_at_step=crash)
        wait(lambda step=crash: ended(job) or (current_step() or 0) > step, timeout=180,
             what="the crash of %s at step %d" % (job, crash))
        if ended(job):
            return crash
    raise AssertionError("%s ran past three crash steps without crashing" % job)


def test_a_crash_at_the_same_step_stops_after_two_failures_and_retry_submits_once_more():
    start = time.time()
    if not active():  # a bed that an earlier crash loop left refusing: one forced attempt
        assert site("-e", "train_job_retry=true").rc == 0
    first = wait(active, what="an active job")[-1]["submission_id"]
    checkpoints, logs_before = files_under(SAVE), logs()
    crash = crash_ahead_of(first)
    assert status_of(first) == "FAILED"

    # rerun 1: one failure, so a new attempt; it reports how the previous one ended
    run = timed("rerun 1 (submits)", site)
    assert run.rc == 0, run.stdout[-3000:]
    result = job_results(run)[-1]
    second = result["submission_id"]
    assert second != first and result["changed"]
    previous = result["previous_attempt"]
    assert previous["submission_id"] == first and previous["status"] == "FAILED"
    assert previous["step"] == crash - 1
    assert previous["exception"] == "RuntimeError: stand-in crash at step %d" % crash
    assert "previous attempt: %s FAILED after step %d: RuntimeError: stand-in crash at step %d" % (
        first, crash - 1, crash) in " ".join(result.get("warnings") or []) + " ".join(result["actions"])
    assert result["crash_loop"]["count"] == 1
    wait(lambda: ended(second), timeout=180, what="the crash of %s" % second)

    # rerun 2: two failures without passing step crash-1: no submission, rc != 0, the history and the way out
    jobs_before = len(ours())
    run = timed("rerun 2 (refuses)", site)
    assert run.rc != 0
    failed = refusals(run)
    assert failed, run.stdout[-3000:]
    msg = failed[-1]["msg"]
    assert "2 attempts in a row failed without passing step %d (max_failures_at_step is 2)" % (crash - 1) in msg
    for sid in (first, second):
        assert "%s FAILED after step %d: RuntimeError: stand-in crash at step %d" % (sid, crash - 1, crash) in msg
    assert "-e train_job_retry=true" in msg and "train_job_max_failures_at_step" in msg
    assert len(ours()) == jobs_before and not active()

    # rerun 3 with train_job_retry=true: exactly one more attempt
    run = timed("rerun 3 (-e train_job_retry=true)", site, "-e", "train_job_retry=true")
    assert run.rc == 0, run.stdout[-3000:]
    third = job_results(run)[-1]["submission_id"]
    assert third not in (first, second) and len(ours()) == jobs_before + 1
    assert "retry is set: submitting one more attempt although 2 attempts failed" in " ".join(
        job_results(run)[-1].get("warnings") or [])
    wait(lambda: ended(third), timeout=180, what="the crash of %s" % third)

    # still crashing: the next plain rerun refuses again, with three failures
    run = timed("rerun 4 (refuses again)", site)
    assert run.rc != 0
    assert "3 attempts in a row failed without passing step %d" % (crash - 1) in refusals(run)[-1]["msg"]
    assert len(ours()) == jobs_before + 1

    # the cause fixed (knob off): one forced attempt runs past the step, and the node is converged again
    control()
    run = timed("rerun 5 (fixed, retry)", site, "-e", "train_job_retry=true")
    assert run.rc == 0, run.stdout[-3000:]
    fourth = wait(active, what="the fixed attempt")[-1]["submission_id"]
    wait(lambda: (current_step() or 0) > crash, timeout=180, what="%s past step %d" % (fourth, crash))
    assert checkpoints <= files_under(SAVE), sorted(checkpoints - files_under(SAVE))
    assert logs_before <= logs(), sorted(logs_before - logs())
    print("crash loop: %.0f s in all" % (time.time() - start))


def test_a_handled_traceback_passes_the_first_step_wait_with_a_warning():
    start = time.time()
    job = wait(active, what="an active job")[-1]["submission_id"]
    checkpoints, logs_before = files_under(SAVE), logs()
    crash_ahead_of(job)
    # the new attempt resumes at the step after the tracker and prints a handled traceback just before it
    control(handled_traceback_at_step=tracker() + 1)
    run = timed("rerun (handled traceback)", site)
    assert run.rc == 0, run.stdout[-3000:]
    # the earlier attempt made progress past the crash loop's step: the count started over, no retry needed
    assert job_results(run)[-1]["crash_loop"]["count"] == 1
    waited = run.results(WAIT_TASK)[-1]
    assert not waited.get("failed") and waited["last_step"] is not None, waited
    assert waited["survived_errors"], waited
    warning = waited["survived_errors"][0]["warning"]
    assert "logged an error line but is RUNNING, so the wait goes on" in warning
    assert "httpx.ReadTimeout: timed out" in warning
    assert "httpx.ReadTimeout: timed out" in run.stdout  # the [WARNING] line the user sees
    control()
    assert wait(active, what="the new attempt")[-1]["submission_id"] != job
    assert checkpoints <= files_under(SAVE) and logs_before <= logs()
    print("handled traceback: %.0f s in all" % (time.time() - start))

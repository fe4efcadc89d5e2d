# Controller side of the first-step wait (action plugin job_first_step): what one poll means.
#
# A poll is the job's own Ray status (ray_job state=status) and what its log says (train_progress with
# that status). The job's status decides: the wait fails only when the job is FAILED or STOPPED (naming
# the exception line and the guide's hint) or when the time is up; an error-looking line in the log of a
# job that is still PENDING or RUNNING (a traceback printed and handled, an OOM that slime recovers from)
# is reported as a warning and the wait goes on. A step line ends the wait.
from __future__ import annotations

from ansible_collections.mtslime.posttrain.plugins.module_utils.job import rules as job_rules

WAIT, DONE, FAILED = "wait", "done", "failed"


def job_status(status_result, submission_id=None):
    """(submission id, status) of the job to wait for, from ray_job state=status: the given submission's
    status from its job list, else the latest job's."""
    if submission_id:
        for job in status_result.get("jobs") or []:
            if job.get("submission_id") == submission_id:
                return submission_id, job.get("status")
        if status_result.get("submission_id") == submission_id:
            return submission_id, status_result.get("status")
        return submission_id, None
    return status_result.get("submission_id"), status_result.get("status")


def errors_of(progress):
    """The error lines of the log so far, [{key, lineno, line}], once per traceback: `key` is the line where
    it starts (its header, or the error line itself), `lineno` its exception line when known."""
    found = {}
    for name in ("fatal_error", "first_error"):
        error = (progress or {}).get(name)
        if not error or error.get("lineno") is None:
            continue
        key = error.get("traceback_start") or error["lineno"]
        text = error.get("exception") or (error.get("line") or "").strip()
        if error.get("task"):
            text += " [in %s]" % error["task"]
        elif error.get("rank") is not None:
            text += " [rank %s]" % error["rank"]
        found.setdefault(key, {"key": key, "lineno": error["lineno"], "line": text[:300]})
    return [found[k] for k in sorted(found)]


def survived_warning(sid, status, error, log_file):
    return ("job %s logged an error line but is %s, so the wait goes on (%s line %d): %s"
            % (sid, status or "not yet listed", log_file, error["lineno"], error["line"]))


def _gpus(progress):
    wait = (progress or {}).get("waiting_for_gpus")
    return wait.get("message") if wait else None


def describe(sid, status, progress, log_error=None):
    """The progress text of one poll."""
    text = "job %s %s" % (sid or "?", status or "not listed yet")
    if progress is None:
        text += ", no log yet" + (" (%s)" % log_error if log_error else "")
        return text
    text += ", %d log lines, no training step yet" % (progress.get("lines") or 0)
    gpus = _gpus(progress)
    if gpus:
        text += "; " + gpus
    return text


def decide(sid, status, progress, log_file, log_error=None):
    """(verdict, message) for one poll: DONE (a step was logged, or the job SUCCEEDED), FAILED (the job's own
    status is FAILED or STOPPED) or WAIT."""
    progress_ok = progress is not None
    if progress_ok and progress.get("last_step") is not None:
        return DONE, "job %s reached step %d (first step %s)" % (
            sid, progress["last_step"], progress.get("first_step"))
    if status in job_rules.ENDED_BADLY:
        text = "job %s is %s before its first step" % (sid, status)
        if progress_ok:
            fatal = progress.get("fatal_error") or progress.get("first_error")
            if fatal:
                text += ": %s (%s line %d)" % (
                    (fatal.get("exception") or (fatal.get("line") or "").strip())[:300], log_file, fatal["lineno"])
            else:
                text += "; its log %s has no error line" % log_file
            if progress.get("hint"):
                faq = (fatal or {}).get("faq") if fatal else None
                text += " -- %s%s" % (("FAQ %s: " % faq) if faq else "", progress["hint"])
        else:
            text += "; no log at %s%s" % (log_file, " (%s)" % log_error if log_error else "")
        return FAILED, text
    if status == job_rules.SUCCEEDED:
        return DONE, "job %s SUCCEEDED without a step line in %s" % (sid, log_file)
    return WAIT, describe(sid, status, progress, log_error)


def timeout_message(sid, status, progress, log_file, waited_text, log_error=None):
    text = "no training step of job %s after %s (train_job_first_step_timeout); it is %s" % (
        sid, waited_text, status or "not listed")
    text += "; " + describe(sid, status, progress, log_error).split(", ", 1)[-1]
    if progress and progress.get("hint"):
        text += " -- " + progress["hint"]
    text += "; the job was left as it is (the log: %s)" % log_file
    return text

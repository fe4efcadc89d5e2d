# The one rule for which Ray jobs belong to an experiment ("ours") and which are
# active, and the one spelling of Ray's job statuses, used by every part of the
# collection that asks: the job module, the Ray head role (never restart under a
# job), the container role (never recreate under a job), stop/status, the report,
# and the run script in the run directory.
#
# Standard library only, Python 3.8+. Also a small program, for the places that run
# outside a module (the container guard, the run script):
#   python3 rules.py active <dashboard_url> [<experiment>]
# prints the submission ids of the active jobs (of <experiment>, else all) as JSON.
from __future__ import annotations
# pylint: disable=ansible-bad-function  # also a program (python3 FILE, outside any module): prints, exits

import json
import re
import sys

# Ray's job statuses (JobStatus). Everyone who names one imports it from here.
PENDING, RUNNING, SUCCEEDED, FAILED, STOPPED = "PENDING", "RUNNING", "SUCCEEDED", "FAILED", "STOPPED"
ACTIVE = (PENDING, RUNNING)
TERMINAL = (SUCCEEDED, FAILED, STOPPED)
ENDED_BADLY = (FAILED, STOPPED)
STATUSES = ACTIVE + TERMINAL
# Every job the collection (or its run script) submits carries this metadata key.
EXPERIMENT_KEY = "mtslime_experiment"
ATTEMPT_KEY = "mtslime_attempt"


def submission_id(experiment, attempt):
    return "%s-attempt-%d" % (experiment, attempt)


def attempt_of(job_or_id, experiment):
    """The attempt number in a submission id `<experiment>-attempt-<n>`, else None."""
    sid = job_or_id.get("submission_id") if isinstance(job_or_id, dict) else job_or_id
    match = re.match(r"^%s-attempt-(\d+)$" % re.escape(experiment), sid or "")
    return int(match.group(1)) if match else None


def is_ours(job, experiment):
    """A job of `experiment`: tagged with its metadata, or named like its attempts."""
    metadata = job.get("metadata") or {}
    return bool(job.get("submission_id")) and (
        metadata.get(EXPERIMENT_KEY) == experiment or attempt_of(job, experiment) is not None
    )


def is_active(job):
    return job.get("status") in ACTIVE


def is_ended(job_or_status):
    """A job (or status) that Ray says ended: SUCCEEDED, FAILED or STOPPED."""
    status = job_or_status.get("status") if isinstance(job_or_status, dict) else job_or_status
    return status in TERMINAL


def runs_training(job):
    return "train.py" in (job.get("entrypoint") or "")


def classify(jobs, experiment):
    """The cluster's jobs as an experiment sees them:
    ours (oldest first, each with `_attempt`), active (ours that are active),
    foreign_active (other active jobs that run train.py: they hold the GPUs too),
    any_active (every active job), max_attempt (highest attempt number Ray knows)."""
    ours = []
    for job in jobs or []:
        if is_ours(job, experiment):
            entry = dict(job)
            entry["_attempt"] = attempt_of(job, experiment)
            ours.append(entry)
    ours.sort(key=lambda j: (j.get("start_time") or 0, j["_attempt"] or 0, j.get("submission_id") or ""))
    return {
        "ours": ours,
        "active": [job for job in ours if is_active(job)],
        "foreign_active": [
            job for job in jobs or [] if is_active(job) and not is_ours(job, experiment) and runs_training(job)
        ],
        "any_active": [job for job in jobs or [] if is_active(job)],
        "max_attempt": max([job["_attempt"] or 0 for job in ours] or [0]),
    }


def fetch_jobs(dashboard_url, timeout=10):
    """GET <dashboard>/api/jobs/ without a proxy (the guide's no_proxy=127.0.0.1)."""
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(dashboard_url.rstrip("/") + "/api/jobs/", timeout=timeout) as answer:
        return json.loads(answer.read().decode("utf-8"))


def main(argv):
    if len(argv) < 2 or argv[0] != "active":
        sys.stderr.write("usage: rules.py active <dashboard_url> [<experiment>]\n")
        return 2
    try:
        jobs = fetch_jobs(argv[1])
    except OSError as exc:
        sys.stderr.write("cannot list the jobs at %s: %s\n" % (argv[1], exc))
        return 1
    found = classify(jobs, argv[2])["active"] if len(argv) > 2 else [job for job in jobs if is_active(job)]
    print(json.dumps([job.get("submission_id") or job.get("job_id") for job in found]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

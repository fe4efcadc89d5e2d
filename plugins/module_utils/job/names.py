# The names of a run's files, defined once: the guide's log `<log dir>/<stem>.log` (a link to the
# current attempt's), each attempt's log `<log dir>/<stem>.<submission id>.log`, and the manifest
# directory `<work dir>/manifests` (one `<submission id>.json` per submission, `.end.json` when it ended), and
# the converged record `<work dir>/converged.json` (what the last full site.yml run checked, replayed by the next
# run's first call on the node: module_utils/rerun/record.py).
# The job module, the attempts' history, the report's log reader and, through the filter
# slime_job_files, the facts play, the run script, status.yml and the container's mounts use these.
#
# Standard library only, no import from the collection; Python 3.8+.
from __future__ import annotations

import os

LOG_SUFFIX = ".log"
MANIFEST_DIRNAME = "manifests"
CONVERGED_RECORD = "converged.json"


def guide_log(log_dir, stem):
    """The log people read (the guide's logs/<model>.log)."""
    return os.path.join(log_dir, stem + LOG_SUFFIX)


def stem_of(log_file):
    """The stem of a guide log's file name (qwen3-8B for .../qwen3-8B.log)."""
    base = os.path.basename(log_file)
    return base[: -len(LOG_SUFFIX)] if base.endswith(LOG_SUFFIX) and len(base) > len(LOG_SUFFIX) else base


def attempt_log_prefix(log_dir, stem):
    """What every attempt log's path starts with; the submission id and LOG_SUFFIX follow."""
    return os.path.join(log_dir, stem + ".")


def attempt_log(log_dir, stem, submission_id):
    """The log of one attempt (written by the follower, linked from the guide log while it is current)."""
    return attempt_log_prefix(log_dir, stem) + submission_id + LOG_SUFFIX


def submission_of(file_name, stem):
    """The submission id in an attempt log's file name, or None (another file, or the guide log)."""
    head = stem + "."
    if file_name.startswith(head) and file_name.endswith(LOG_SUFFIX) and len(file_name) > len(head + LOG_SUFFIX):
        return file_name[len(head): -len(LOG_SUFFIX)]
    return None


def manifest_dir(work_dir):
    """The manifests of the submissions, beside the run script."""
    return os.path.join(work_dir, MANIFEST_DIRNAME)


def converged_record(work_dir):
    """The record of the checks the last full run passed on this node, beside the run script."""
    return os.path.join(work_dir, CONVERGED_RECORD)

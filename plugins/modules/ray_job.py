#!/usr/bin/python
# Copyright: mtslime.posttrain contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_job
short_description: Keep one slime training job per experiment on a Ray cluster (submit, resume, stop, follow its log)
version_added: "0.1.0"
description:
  - Manages the training job of one experiment through the Ray Jobs REST API of the dashboard
    (C(ray start --dashboard-port), 8772 in the guide). It needs no Ray on the controller.
  - "The jobs of the experiment are the jobs whose metadata C(mtslime_experiment) equals O(experiment),
    whatever their submission id (the role's run script submits C(<experiment>_<timestamp>) with that metadata,
    like the guide), and the jobs whose submission id is C(<experiment>-attempt-<N>), the ids this module submits."
  - "O(state=running): when a job of the experiment is PENDING or RUNNING, nothing is submitted (several active
    jobs are all reported, with a warning). When the latest one SUCCEEDED, nothing is submitted (the experiment
    is finished). Otherwise (no job yet, or the latest FAILED or was STOPPED) attempt N+1 is submitted, N being the
    highest attempt number seen. Before that it refuses to submit, naming the job, when another active job on the
    cluster runs C(train.py) without this experiment's metadata (a job started by hand)."
  - "Resume: with O(resume), the save directory goes through the resume rule (module_utils mcore.resume_plan, see
    docs/architecture.md): the newest complete iteration that has slime's data cursor (else the newest complete one,
    with a warning that the prompt order starts over). Newer iterations (incomplete, torn, or without a data cursor),
    their data cursors and a tracker naming them are moved aside (never deleted) and the tracker is rewritten to the
    chosen iteration; then the value of C(--load) in O(entrypoint) becomes the save directory (C(--load <save_dir>) is
    appended when absent), so Megatron loads that iteration and slime continues at the next rollout (slime.md §4.3);
    RV(resumed_from_iteration) says which. With no complete iteration the entrypoint is submitted unchanged and
    training starts from the converted checkpoint, as in the guide, with a warning. In check mode the moves are only
    predicted."
  - "A local O(runtime_env) C(working_dir) is zipped (files at the root, Unix modes kept; C(excludes), C(.gitignore),
    C(.rayignore) and C(.git/) left out), named C(_ray_pkg_<sha256 of the zip>.zip), uploaded with
    C(GET)/C(PUT /api/packages/gcs/<name>) when Ray does not have it yet, and the job is submitted with
    C(working_dir: gcs://<name>), as C(ray job submit --runtime-env) does. The entrypoint runs in the unpacked directory."
  - "O(files) (run script, runtime_env.yaml, hostfile rendered by the role) are written atomically when their content or
    mode differs. When that happens while a job is active, the job keeps running with its old arguments: the change is
    reported in RV(actions) and as a warning (stop it with playbooks/stop.yml to apply it); the job is never stopped
    or resubmitted for it."
  - "At each submission the O(manifest) facts, the submission id, entrypoint, runtime_env, resume details and the time
    are written as JSON to C(<manifest_dir>/<submission_id>.json) (mode 0640), and the path goes into the job metadata
    as C(mtslime_manifest)."
  - "O(log_file): a detached follower copies the active job's log to C(<log dir>/<stem>.<submission_id>.log) with ANSI
    codes removed, and O(log_file) is a symbolic link to the current attempt's file, so an earlier attempt's log is
    never overwritten. The follower is the guide's pipeline C(RAY_ADDRESS=<url> ray job logs <id> -f 2>&1 | sed -u -E
    's/\\x1B\\[[0-9;?]*[ -/]*[@-~]//g' > <file>) when the C(ray) CLI and C(sed) are on E(PATH), else a standard-library
    Python script written next to the log (C(.<stem>.follower.py)) that polls C(GET /api/jobs/<id>/logs). It runs in its
    own session, survives the end of the playbook, ends when the job ends, and its pid is kept in
    C(<log dir>/.<stem>.follower.pid). An alive follower of the active job is left alone; a dead one is restarted
    (that is a change). A regular file found at O(log_file) (the guide's script writes one) is moved aside first."
  - "O(state=stopped) stops every active job of the experiment and waits until each has ended. O(state=status)
    reports the latest job and changes nothing."
options:
  state:
    description: What to ensure.
    type: str
    choices: [running, stopped, status]
    default: running
  dashboard_url:
    description: The dashboard / Jobs API URL (not the GCS port; see the guide's FAQ Q1).
    type: str
    default: http://127.0.0.1:8772
  experiment:
    description: Name of the experiment, for example V(qwen3-8B). Letters, digits, C(.), C(_) and C(-).
    type: str
    required: true
  entrypoint:
    description:
      - The shell command of the job, for example C(python3 train.py --actor-num-nodes 1 ...). Needed to submit.
    type: str
  runtime_env:
    description:
      - "The job's runtime environment, for example C({working_dir: /home/slime, excludes: [...], env_vars: {...}})
        (the content of the guide's runtime_env.yaml)."
      - A relative local C(working_dir) is taken relative to the directory of the first file in O(files).
    type: dict
  metadata:
    description:
      - Extra metadata for the job (values become strings).
      - The module adds C(mtslime_experiment), C(mtslime_attempt), C(mtslime_manifest) and C(mtslime_resumed_from).
    type: dict
  resume:
    description: Resume from the training save directory when it holds a complete checkpoint.
    type: dict
    suboptions:
      save_dir:
        description: The C(--save) directory of the training run.
        type: path
        required: true
      load_flag:
        description: The flag whose value is replaced by O(resume.save_dir).
        type: str
        default: --load
  files:
    description: Files of the run directory to keep as given.
    type: list
    elements: dict
    suboptions:
      path:
        description: Absolute path of the file.
        type: path
        required: true
      content:
        description: The whole content.
        type: str
        required: true
      mode:
        description: Octal mode such as V('0755'). When unset an existing file keeps its mode, a new one gets 0644.
        type: raw
  manifest:
    description: Facts to record with each submission (image id/digest, versions, accelerators, rendered arguments).
    type: dict
  manifest_dir:
    description: Directory of the manifests. Default C(manifests/) next to the first file of O(files); without
      either, no manifest is written.
    type: path
  manifest_commands:
    description:
      - "Shell commands run on the node at each submission only, C({name: command}); their output goes into the
        manifest under C(found), for example the versions of slime, Megatron, SGLang and torch as installed."
    type: dict
  log_file:
    description: The log path people read (the guide's C(.../logs/qwen3-8B.log)); becomes a link to the current attempt's log.
    type: path
  log_follower:
    description: Which follower to run. V(auto) uses the C(ray) CLI when it and C(sed) are on E(PATH), else V(python).
      V(none) starts none.
    type: str
    choices: [auto, ray, python, none]
    default: auto
  follow_interval:
    description: Seconds between two polls of the Python follower.
    type: int
    default: 5
  stop_timeout:
    description: Seconds to wait, after asking Ray to stop a job, for it to reach a terminal state.
    type: int
    default: 60
    aliases: [job_timeout]
  request_timeout:
    description: Seconds one HTTP request may take.
    type: int
    default: 30
  use_proxy:
    description: Send requests through the E(http_proxy) of the environment. Off by default (the dashboard is local).
    type: bool
    default: false
  max_failures_at_step:
    description:
      - "The crash-loop rule (C(module_utils/crash_loop.py)): when this many attempts in a row FAILED without
        passing the furthest step the earlier ones reached, no new attempt is submitted and the module fails with
        their history (status, step, exception line, FAQ hint). An attempt that gets past that step, or one that
        SUCCEEDED, resets the count. V(0) means no limit."
      - "Ended attempts are recorded as C(<manifest_dir>/<submission_id>.end.json), so the history survives a
        restart of the Ray head."
    type: int
    default: 2
  retry:
    description: Submit one more attempt although the crash-loop rule of O(max_failures_at_step) would refuse.
    type: bool
    default: false
extends_documentation_fragment:
  - mtslime.posttrain.attributes
attributes:
  check_mode:
    support: full
    details:
      - Predicts the submission (attempt and resume iteration) or the stop, and the files and follower it would write; writes and submits nothing.
  diff_mode:
    support: full
  idempotent:
    support: full
    details:
      - A second run finds the job it submitted active (or finished) and changes nothing, unless the follower died.
seealso:
  - module: mtslime.posttrain.ray_cluster
  - module: mtslime.posttrain.train_progress
  - module: mtslime.posttrain.mcore_checkpoint
author:
  - mtslime.posttrain contributors
"""

EXAMPLES = r"""
- name: Keep the training job of qwen3-8B running (resume from the save dir after a failure)
  mtslime.posttrain.ray_job:
    dashboard_url: "http://{{ slime_head_ip }}:8772"
    experiment: qwen3-8B
    entrypoint: "python3 train.py {{ slime_train_argv | join(' ') }}"
    runtime_env: "{{ lookup('file', 'runtime_env.yaml') | from_yaml }}"
    resume:
      save_dir: /tmp/Qwen3-8B_slime
    files:
      - path: /home/slime/musa_example/qwen_32b_sherry/run-qwen3-8B.sh
        content: "{{ lookup('template', 'run-qwen3-8B.sh.j2') }}"
        mode: "0755"
      - path: /home/slime/musa_example/qwen_32b_sherry/hostfile
        content: "10.121.38.2 slots=8\n"
    manifest:
      image: "{{ __slime_container.image }}"
      ray_version: "{{ __ray.ray_version }}"
    log_file: /home/slime/musa_example/qwen_32b_sherry/logs/qwen3-8B.log
  register: train_job

- name: Stop it (playbooks/stop.yml)
  mtslime.posttrain.ray_job:
    experiment: qwen3-8B
    state: stopped
    stop_timeout: 120

- name: Where is it?
  mtslime.posttrain.ray_job:
    experiment: qwen3-8B
    state: status
  register: job_status
"""

RETURN = r"""
submission_id:
  description: The job reported (the active one, the one submitted, or the latest).
  returned: always
  type: str
  sample: qwen3-8B-attempt-2
attempt:
  description: Its attempt number; null for a job submitted under another id (the run script's C(<experiment>_<timestamp>)).
  returned: always
  type: int
status:
  description: Its Ray status (PENDING, RUNNING, SUCCEEDED, FAILED, STOPPED); in check mode V(WOULD_SUBMIT) for a predicted submission.
  returned: always
  type: str
message:
  description: Ray's message for the job (for a failed one, the end of its log), or what the module found.
  returned: always
  type: str
start_time:
  description: Start time, ISO 8601 UTC.
  returned: always
  type: str
start_time_ms:
  description: Start time, milliseconds since the epoch (as Ray gives it).
  returned: always
  type: int
end_time:
  description: End time, ISO 8601 UTC; null while the job runs.
  returned: always
  type: str
end_time_ms:
  description: End time in milliseconds since the epoch.
  returned: always
  type: int
driver_exit_code:
  description: Exit code of the entrypoint, once it ended.
  returned: always
  type: int
dashboard_url:
  description: The dashboard URL used.
  returned: always
  type: str
jobs:
  description: Every job of the experiment, oldest first.
  returned: always
  type: list
  elements: dict
  contains:
    submission_id:
      description: Submission id.
      type: str
    attempt:
      description: Attempt number, or null.
      type: int
    status:
      description: Ray status.
      type: str
    start_time:
      description: ISO 8601 start time.
      type: str
    end_time:
      description: ISO 8601 end time.
      type: str
active:
  description: Submission ids of the experiment's PENDING or RUNNING jobs (after the task).
  returned: always
  type: list
  elements: str
resumed_from_iteration:
  description: The checkpoint iteration a submission resumes from; null when it starts from the converted checkpoint or nothing was submitted.
  returned: always
  type: int
resume:
  description: >-
    What the save directory held (state, latest_iteration, latest_complete_iteration, as found before any move),
    what the resume rule decided (resumed_from_iteration, dataset_state of that iteration, message, warnings, the
    whole plan) and moved_to, the list of C({path, to}) moved aside (in check mode: that would be).
  returned: when O(resume) is set and a submission was planned
  type: dict
entrypoint:
  description: The entrypoint of the reported job (for a submission, after the C(--load) change).
  returned: always
  type: str
runtime_env:
  description: The runtime_env submitted (C(working_dir) as the C(gcs://) URI).
  returned: when a job was submitted
  type: dict
working_dir_package:
  description: The package made of a local working_dir (uri, uploaded, bytes, files, directory).
  returned: when a job was submitted with a local working_dir
  type: dict
manifest_file:
  description: Path of the manifest written for the submission.
  returned: always
  type: str
log_file:
  description: O(log_file), when set.
  returned: always
  type: str
metadata:
  description: The reported job's metadata (C(mtslime_experiment), C(mtslime_attempt), C(mtslime_manifest), ...).
  returned: when a job is reported
  type: dict
attempt_log:
  description: The log file of the reported attempt (the target of the O(log_file) link).
  returned: always
  type: str
follower_pid:
  description: Pid of the log follower of the reported job, when one is alive.
  returned: always
  type: int
follower:
  description: The follower's kind (ray or python), and what was done (kept, started, restarted, none).
  returned: always
  type: dict
moved_to:
  description: Where a regular file found at O(log_file) was moved.
  returned: when one was moved
  type: str
files_changed:
  description: Paths of O(files) written (or that would be).
  returned: always
  type: list
  elements: str
previous_attempt:
  description: >-
    Before a submission: how the latest ended attempt ended (submission_id, attempt, status, status_from
    C(ray)/C(log)/C(none), step, first_step, exception, exception_line, hint, faq, survived, log, end_time_ms);
    status V(LOST) when Ray forgot it and nothing recorded its end.
  returned: when a submission was planned and an earlier attempt ended
  type: dict
attempts_history:
  description: Every ended attempt of the experiment, oldest first, in the shape of RV(previous_attempt).
  returned: when a submission was planned
  type: list
  elements: dict
crash_loop:
  description: >-
    The crash-loop count: count (attempts that FAILED in a row without passing step), step (the furthest step
    they reached, null when none logged one), attempts (their ids), limit; before a submission also retry and
    blocked.
  returned: when a submission was planned, and with O(state=status)
  type: dict
attempts:
  description: >-
    With O(state=status): every attempt of the experiment, oldest first (from Ray, the end records and the attempt
    logs): submission_id, attempt, status, submitted_at, ended_at, first_step, last_step, exception (the C(Xxx:
    message) line of the last traceback that no step followed), exception_line, hint, faq, resumed_from_iteration,
    data_state, log.
  returned: with O(state=status)
  type: list
  elements: dict
actions:
  description: Sentences saying what was done (or would be done in check mode).
  returned: always
  type: list
  elements: str
"""

import copy
import datetime
import json
import os
import re
import shlex
import subprocess
import sys
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mtslime.posttrain.plugins.module_utils.common import (
    atomic_write,
    read_text,
    sha256_text,
    text_diff,
)
from ansible_collections.mtslime.posttrain.plugins.module_utils.ray_api import (
    ACTIVE,
    TERMINAL,
    RayApiError,
    RayClient,
    is_local_working_dir,
    normalize_url,
)

from ansible_collections.mtslime.posttrain.plugins.module_utils.aside import move_aside
from ansible_collections.mtslime.posttrain.plugins.module_utils import crash_loop

try:
    from ansible_collections.mtslime.posttrain.plugins.module_utils.mcore import (
        apply_resume_plan,
        inspect_checkpoint,
        resume_plan,
    )
    from ansible_collections.mtslime.posttrain.plugins.module_utils.mcore_resume import ResumeError, describe_actions
except ImportError:  # pragma: no cover - mcore ships with the collection
    inspect_checkpoint = None

EXPERIMENT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
RESTART_NOTE = "the running job keeps its arguments; stop it with playbooks/stop.yml to apply"
FOLLOWER_NAME = "mtslime-log-follower"
# The guide's pipeline, with the values as positional parameters so nothing needs quoting.
RAY_FOLLOWER_SH = '"$1" job logs "$2" -f 2>&1 | "$3" -u -E \'s/\\x1B\\[[0-9;?]*[ -/]*[@-~]//g\' > "$4"'

FOLLOWER_SCRIPT = r"""#!/usr/bin/env python3
# mtslime.posttrain log follower: copies a Ray job's log into a file, ANSI codes removed.
# Written by mtslime.posttrain.ray_job when the `ray` CLI is not on PATH; it polls
# GET <dashboard>/api/jobs/<id>/logs and appends what is new, and ends when the job ends.
# Usage: follower.py <dashboard_url> <submission_id> <output file> [interval seconds]
import json
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

ANSI = re.compile(r"\x1B\[[0-9;?]*[ -/]*[@-~]")
TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")


def main():
    url, sid, out = sys.argv[1].rstrip("/"), sys.argv[2], sys.argv[3]
    interval = float(sys.argv[4]) if len(sys.argv) > 4 else 5.0
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    quoted = urllib.parse.quote(sid, safe="")

    def get(path):
        with opener.open(url + path, timeout=60) as response:
            return json.loads(response.read().decode("utf-8", "replace"))

    seen = 0
    failures = 0
    with open(out, "w", encoding="utf-8") as handle:
        while True:
            try:
                status = (get("/api/jobs/%s" % quoted) or {}).get("status")
                logs = (get("/api/jobs/%s/logs" % quoted) or {}).get("logs") or ""
                failures = 0
            except urllib.error.HTTPError as exc:
                if exc.code == 404:
                    handle.write("[%s: job %s is not known to %s]\n" % (sys.argv[0], sid, url))
                    return 1
                failures += 1
            except Exception:
                failures += 1
            else:
                if len(logs) < seen:
                    seen = 0
                chunk = logs[seen:]
                if status not in TERMINAL:
                    chunk = chunk[: chunk.rfind("\n") + 1]
                if chunk:
                    handle.write(ANSI.sub("", chunk))
                    handle.flush()
                    seen += len(chunk)
                if status in TERMINAL:
                    return 0
            if failures >= 120:
                handle.write("[%s: the dashboard %s did not answer %d times; giving up]\n" % (sys.argv[0], url, failures))
                return 2
            time.sleep(interval)


if __name__ == "__main__":
    sys.exit(main())
"""


# -- small helpers ---------------------------------------------------------------
def iso(ms):
    if not ms:
        return None
    stamp = datetime.datetime.fromtimestamp(ms / 1000.0, tz=datetime.timezone.utc)
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def now_iso():
    return datetime.datetime.now(tz=datetime.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def parse_mode(value, name):
    if value is None or value == "":
        return None
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if not re.match(r"^0?[0-7]{3,4}$", text):
        raise ValueError("%s: mode %r is not an octal mode like '0644'" % (name, value))
    return int(text, 8)


def tail_text(text, limit=4000):
    text = text or ""
    return text if len(text) <= limit else "..." + text[-limit:]


def set_flag(entrypoint, flag, value):
    """Replace every value of `flag` in a shell command line (`--load X` or `--load=X`),
    or append `flag value` when the flag is absent."""
    pattern = re.compile(r"(?P<pre>(?:^|\s))%s(?P<sep>=|\s+)(?P<val>'[^']*'|\"[^\"]*\"|[^\s;&|]+)" % re.escape(flag))
    quoted = shlex.quote(value)
    new, count = pattern.subn(lambda m: "%s%s%s%s" % (m.group("pre"), flag, m.group("sep"), quoted), entrypoint)
    if count:
        return new
    return "%s %s %s" % (entrypoint.rstrip(), flag, quoted)


class Jobs:
    """The cluster's jobs, sorted into this experiment's and the others."""

    def __init__(self, jobs, experiment):
        self.experiment = experiment
        attempt_re = re.compile(r"^%s-attempt-(\d+)$" % re.escape(experiment))
        self.ours = []
        self.foreign_active = []
        self.max_attempt = 0
        for job in jobs:
            sid = job.get("submission_id")
            match = attempt_re.match(sid or "")
            attempt = int(match.group(1)) if match else None
            if attempt is not None:
                self.max_attempt = max(self.max_attempt, attempt)
            metadata = job.get("metadata") or {}
            if sid and (metadata.get("mtslime_experiment") == experiment or attempt is not None):
                entry = dict(job)
                entry["_attempt"] = attempt
                self.ours.append(entry)
            elif job.get("status") in ACTIVE and "train.py" in (job.get("entrypoint") or ""):
                self.foreign_active.append(job)
        self.ours.sort(key=lambda j: (j.get("start_time") or 0, j["_attempt"] or 0, j.get("submission_id") or ""))

    @property
    def active(self):
        return [job for job in self.ours if job.get("status") in ACTIVE]

    @property
    def latest(self):
        return self.ours[-1] if self.ours else None


def job_summary(job):
    return {
        "submission_id": job.get("submission_id"),
        "attempt": job.get("_attempt"),
        "status": job.get("status"),
        "start_time": iso(job.get("start_time")),
        "end_time": iso(job.get("end_time")),
        "driver_exit_code": job.get("driver_exit_code"),
    }


def foreign_description(job):
    metadata = job.get("metadata") or {}
    who = job.get("submission_id") or "driver job %s" % job.get("job_id")
    text = "%s (%s" % (who, job.get("status"))
    if metadata.get("mtslime_experiment"):
        text += ", experiment %s" % metadata["mtslime_experiment"]
    entry = job.get("entrypoint") or ""
    return text + ", entrypoint: %s)" % (entry if len(entry) <= 120 else entry[:117] + "...")


# -- files ---------------------------------------------------------------------------
def plan_files(files):
    """[(path, content, mode, before, before_mode, content_changed, mode_changed)] for files that differ."""
    plans = []
    for index, item in enumerate(files or []):
        path = os.path.abspath(os.path.expanduser(item["path"]))
        mode = parse_mode(item.get("mode"), "files[%d] (%s)" % (index, path))
        if os.path.isdir(path):
            raise ValueError("files[%d]: %s is a directory; give the path of a file" % (index, path))
        before = read_text(path)
        before_mode = os.stat(path).st_mode & 0o7777 if before is not None else None
        content_changed = before != item["content"]
        mode_changed = mode is not None and before_mode is not None and before_mode != mode
        if content_changed or mode_changed:
            plans.append(
                {
                    "path": path,
                    "content": item["content"],
                    "mode": mode if mode is not None else (before_mode if before_mode is not None else 0o644),
                    "before": before,
                    "before_mode": before_mode,
                    "content_changed": content_changed,
                    "mode_changed": mode_changed,
                }
            )
    return plans


def apply_files(plans):
    for plan in plans:
        directory = os.path.dirname(plan["path"])
        if not os.path.isdir(directory):
            os.makedirs(directory, exist_ok=True)
        atomic_write(plan["path"], plan["content"], mode=plan["mode"])


def file_diffs(plans):
    diffs = []
    for plan in plans:
        if plan["content_changed"]:
            diffs.append(text_diff(plan["before"], plan["content"], plan["path"]))
        if plan["mode_changed"]:
            diffs.append(
                {
                    "before": "mode %04o\n" % plan["before_mode"],
                    "after": "mode %04o\n" % plan["mode"],
                    "before_header": plan["path"] + " (mode)",
                    "after_header": plan["path"] + " (mode)",
                }
            )
    return diffs


# -- resume ----------------------------------------------------------------------------
class ResumeRefused(Exception):
    pass


def plan_resume(resume, entrypoint, check_mode=False):
    """(entrypoint to submit, resume info dict, warnings, actions). The resume rule is mcore.resume_plan; its
    moves and tracker rewrite are applied here (predicted only in check mode)."""
    if not resume:
        return entrypoint, None, [], []
    if inspect_checkpoint is None:
        raise ResumeRefused(
            "resume needs module_utils/mcore.py (inspect_checkpoint), which is missing from the collection"
        )
    save_dir = os.path.abspath(os.path.expanduser(resume["save_dir"]))
    found = inspect_checkpoint(save_dir, expect="training")
    plan = resume_plan(save_dir)
    if check_mode:
        actions = describe_actions(plan, check_mode=True)
        moved = [{"path": m["path"], "to": m["to"]} for m in plan["moves"]]
    else:
        try:
            done = apply_resume_plan(plan)
        except ResumeError as exc:
            raise ResumeRefused("resume.save_dir: %s" % exc) from None
        actions, moved = done["actions"], done["moved"]
    info = {
        "save_dir": save_dir,
        "state": found.get("state"),
        "latest_iteration": found.get("latest_iteration"),
        "latest_complete_iteration": found.get("latest_complete_iteration"),
        "iterations": found.get("iterations") or [],
        "dataset_state": plan["data_state"],
        "dataset_state_file": plan["dataset_state_file"],
        "message": plan["message"],
        "warnings": plan["warnings"],
        "moved_to": moved,
        "plan": plan,
        "load_flag": resume.get("load_flag") or "--load",
        "resumed_from_iteration": plan["resume_iteration"],
    }
    warnings = list(plan["warnings"])
    if moved:
        # Moving user data is said in the output, not only in the result.
        why = {m["path"]: m["why"] for m in plan["moves"]}
        warnings.append("resume.save_dir %s: %s aside, never deleted: %s; %s" % (
            save_dir, "would move" if check_mode else "moved",
            "; ".join("%s -> %s (%s)" % (m["path"], m["to"], why.get(m["path"], "")) for m in moved),
            "the job resumes from iteration %d" % plan["resume_iteration"] if plan["resume_iteration"] is not None
            else "the job starts from the converted checkpoint"))
    if plan["resume_iteration"] is None:
        return entrypoint, info, warnings, actions
    return set_flag(entrypoint, info["load_flag"], save_dir), info, warnings, actions


# -- log follower -----------------------------------------------------------------------
class Follower:
    """The detached process that copies a job's log into <log dir>/<stem>.<id>.log."""

    def __init__(self, module, log_file, url, kind_wanted, interval):
        self.module = module
        self.log_file = os.path.abspath(os.path.expanduser(log_file))
        self.log_dir = os.path.dirname(self.log_file)
        base = os.path.basename(self.log_file)
        self.stem = base[:-4] if base.endswith(".log") and len(base) > 4 else base
        self.pid_file = os.path.join(self.log_dir, ".%s.follower.pid" % self.stem)
        self.script = os.path.join(self.log_dir, ".%s.follower.py" % self.stem)
        self.url = url
        self.kind_wanted = kind_wanted
        self.interval = interval

    def attempt_file(self, sid):
        return os.path.join(self.log_dir, "%s.%s.log" % (self.stem, sid))

    def record(self):
        """(pid, submission_id, kind) from the pid file, or (None, None, None)."""
        text = read_text(self.pid_file)
        if not text:
            return None, None, None
        parts = text.split()
        try:
            pid = int(parts[0])
        except (ValueError, IndexError):
            return None, None, None
        return pid, (parts[1] if len(parts) > 1 else None), (parts[2] if len(parts) > 2 else None)

    @staticmethod
    def alive(pid, token):
        """The process exists, is not a zombie, and its command line names `token`."""
        if not pid:
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        try:
            with open("/proc/%d/stat" % pid) as handle:
                state = handle.read().rsplit(")", 1)[1].split()[0]
            if state in ("Z", "X"):
                try:
                    os.waitpid(pid, os.WNOHANG)
                except (ChildProcessError, OSError):
                    pass
                return False
            with open("/proc/%d/cmdline" % pid, "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except (OSError, IndexError):
            return True  # no /proc: trust kill(0)
        return bool(token) and token in cmdline

    def current(self, sid):
        pid, recorded, kind = self.record()
        if pid and recorded == sid and self.alive(pid, sid):
            return pid, kind
        return None, None

    def kind(self):
        if self.kind_wanted == "python":
            return "python", None, None
        ray_bin = self.module.get_bin_path("ray")
        sed_bin = self.module.get_bin_path("sed")
        if self.kind_wanted == "ray" and not (ray_bin and sed_bin):
            raise ValueError("log_follower=ray but %s is not on PATH" % ("the ray CLI" if not ray_bin else "sed"))
        if ray_bin and sed_bin:
            return "ray", ray_bin, sed_bin
        return "python", None, None

    def link_state(self, sid):
        """'ok' | 'missing' | 'other' (a link elsewhere) | 'file' (a regular file) | 'dir'."""
        target = os.path.basename(self.attempt_file(sid))
        if os.path.islink(self.log_file):
            return "ok" if os.readlink(self.log_file) == target else "other"
        if os.path.isdir(self.log_file):
            return "dir"
        if os.path.lexists(self.log_file):
            return "file"
        return "missing"

    def ensure(self, sid, active, check_mode):
        """Keep the follower and the link right for job `sid`. Returns a dict with
        changed, actions, pid, kind, what, moved_to."""
        out = {"changed": False, "actions": [], "pid": None, "kind": None, "what": "none", "moved_to": None}
        link = self.link_state(sid)
        if link == "dir":
            raise ValueError(
                "log_file %s is a directory; give the path of the log file (e.g. .../logs/qwen3-8B.log)" % self.log_file
            )
        pid, kind = self.current(sid)
        out["pid"], out["kind"] = pid, kind
        if not active:
            if pid:
                out["what"] = "running"
            return out
        if link != "ok":
            out["changed"] = True
            if link == "file":
                out["actions"].append(
                    "%s %s aside (a regular file, probably written by the run script)"
                    % ("would move" if check_mode else "moved", self.log_file)
                )
                if not check_mode:
                    out["moved_to"] = move_aside(self.log_file, "previous")
            out["actions"].append(
                "%s %s -> %s"
                % ("would link" if check_mode else "linked", self.log_file, os.path.basename(self.attempt_file(sid)))
            )
            if not check_mode:
                os.makedirs(self.log_dir, exist_ok=True)
                tmp = "%s.tmp-link-%d" % (self.log_file, os.getpid())
                if os.path.lexists(tmp):
                    os.unlink(tmp)
                os.symlink(os.path.basename(self.attempt_file(sid)), tmp)
                os.replace(tmp, self.log_file)
        if pid:
            out["what"] = "kept"
            return out
        _old_pid, old_sid, _old_kind = self.record()
        restart = old_sid == sid
        out["changed"] = True
        out["what"] = "restarted" if restart else "started"
        verb = (
            ("would restart" if restart else "would start") if check_mode else ("restarted" if restart else "started")
        )
        kind, ray_bin, sed_bin = self.kind()
        out["kind"] = kind
        if check_mode:
            out["actions"].append("%s the %s log follower of %s into %s" % (verb, kind, sid, self.attempt_file(sid)))
            return out
        # A follower of an earlier submission is left alone: it writes only its own attempt's
        # file and ends with its job (killing it could cut the last lines of that log).
        os.makedirs(self.log_dir, exist_ok=True)
        out["pid"] = self.spawn(sid, kind, ray_bin, sed_bin)
        out["actions"].append(
            "%s the %s log follower of %s into %s (pid %d)" % (verb, kind, sid, self.attempt_file(sid), out["pid"])
        )
        return out

    def spawn(self, sid, kind, ray_bin=None, sed_bin=None):
        env = dict(os.environ)
        host = re.sub(r"^\w+://", "", self.url).split("/")[0].rsplit(":", 1)[0].strip("[]")
        for name in ("no_proxy", "NO_PROXY"):
            values = [v for v in (env.get(name) or "").split(",") if v]
            for extra in ("127.0.0.1", "localhost", host):
                if extra not in values:
                    values.append(extra)
            env[name] = ",".join(values)
        target = self.attempt_file(sid)
        if kind == "ray":
            env["RAY_ADDRESS"] = self.url
            cmd = ["/bin/sh", "-c", RAY_FOLLOWER_SH, FOLLOWER_NAME, ray_bin, sid, sed_bin, target]
        else:
            if read_text(self.script) != FOLLOWER_SCRIPT:
                atomic_write(self.script, FOLLOWER_SCRIPT, mode=0o755)
            cmd = [sys.executable or "python3", self.script, self.url, sid, target, str(self.interval)]
        with open(os.devnull, "rb") as devnull_in, open(os.devnull, "wb") as devnull_out:
            process = subprocess.Popen(
                cmd,
                stdin=devnull_in,
                stdout=devnull_out,
                stderr=devnull_out,
                cwd=self.log_dir,
                env=env,
                close_fds=True,
                start_new_session=True,
            )
        # the module exits soon; the follower is reparented and reaped by init
        process.returncode = 0  # keep Popen.__del__ quiet about a child that outlives it
        atomic_write(self.pid_file, "%d\n%s\n%s\n" % (process.pid, sid, kind), mode=0o644)
        return process.pid


# -- the module --------------------------------------------------------------------------
class Run:
    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.check = module.check_mode
        self.actions = []
        self.warnings = []
        self.diffs = []
        self.changed = False
        self.result = {}
        self.updated = {}  # submission id -> the newest details seen of a job of the experiment

    def fail(self, msg, **extra):
        result = dict(self.result)
        result.update(extra)
        result["actions"] = self.actions
        self.module.fail_json(msg="ray_job: " + msg, **result)

    def warn(self, text):
        if text not in self.warnings:
            self.warnings.append(text)
            self.module.warn(text)

    def report_job(self, job):
        if job is None:
            return
        if job.get("submission_id") and job.get("status") in ACTIVE + TERMINAL:
            self.updated[job["submission_id"]] = job
        self.result.update(
            submission_id=job.get("submission_id"),
            attempt=job.get("_attempt"),
            status=job.get("status"),
            message=tail_text(job.get("message")),
            start_time=iso(job.get("start_time")),
            start_time_ms=job.get("start_time"),
            end_time=iso(job.get("end_time")),
            end_time_ms=job.get("end_time"),
            driver_exit_code=job.get("driver_exit_code"),
            entrypoint=job.get("entrypoint"),
            metadata=job.get("metadata") or {},
        )
        manifest = (job.get("metadata") or {}).get("mtslime_manifest")
        if manifest and not self.result.get("manifest_file"):
            self.result["manifest_file"] = manifest


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["running", "stopped", "status"], default="running"),
            dashboard_url=dict(type="str", default="http://127.0.0.1:8772"),
            experiment=dict(type="str", required=True),
            entrypoint=dict(type="str"),
            runtime_env=dict(type="dict"),
            metadata=dict(type="dict"),
            resume=dict(
                type="dict",
                options=dict(save_dir=dict(type="path", required=True), load_flag=dict(type="str", default="--load")),
            ),
            files=dict(
                type="list",
                elements="dict",
                options=dict(
                    path=dict(type="path", required=True),
                    content=dict(type="str", required=True),
                    mode=dict(type="raw"),
                ),
            ),
            manifest=dict(type="dict"),
            manifest_dir=dict(type="path"),
            manifest_commands=dict(type="dict"),
            log_file=dict(type="path"),
            log_follower=dict(type="str", choices=["auto", "ray", "python", "none"], default="auto"),
            follow_interval=dict(type="int", default=5),
            stop_timeout=dict(type="int", default=60, aliases=["job_timeout"]),
            request_timeout=dict(type="int", default=30),
            use_proxy=dict(type="bool", default=False),
            max_failures_at_step=dict(type="int", default=2),
            retry=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )


def validate(run):
    params = run.params
    problems = []
    if not EXPERIMENT_RE.match(params["experiment"] or ""):
        problems.append(
            "experiment %r may hold only letters, digits, '.', '_' and '-' (it is part of submission ids and file names)"
            % params["experiment"]
        )
    try:
        url = normalize_url(params["dashboard_url"])
    except ValueError as exc:
        problems.append("dashboard_url: %s" % exc)
        url = None
    for name in ("stop_timeout", "request_timeout", "follow_interval"):
        if params[name] < 1:
            problems.append("%s is %d; give seconds >= 1" % (name, params[name]))
    for index, item in enumerate(params["files"] or []):
        try:
            parse_mode(item.get("mode"), "files[%d] (%s)" % (index, item["path"]))
        except ValueError as exc:
            problems.append(str(exc))
        if not os.path.isabs(os.path.expanduser(item["path"])):
            problems.append("files[%d]: path %s is relative; give an absolute path" % (index, item["path"]))
    if params["manifest"] is not None and not params["manifest_dir"] and not params["files"]:
        problems.append(
            "manifest is set but there is neither manifest_dir nor files to put manifests/ next to; set manifest_dir"
        )
    if problems:
        run.fail("; ".join(problems))
    return url


def manifest_dir_of(params):
    if params["manifest_dir"]:
        return os.path.abspath(os.path.expanduser(params["manifest_dir"]))
    if params["files"]:
        return os.path.join(
            os.path.dirname(os.path.abspath(os.path.expanduser(params["files"][0]["path"]))), "manifests"
        )
    return None


def do_files(run, allow_write):
    try:
        plans = plan_files(run.params["files"])
    except (ValueError, OSError) as exc:
        run.fail("files: %s" % exc)
    run.result["files_changed"] = [plan["path"] for plan in plans]
    if not plans:
        return plans
    run.changed = True
    run.diffs.extend(file_diffs(plans))
    for plan in plans:
        what = "content" if plan["content_changed"] else ""
        if plan["mode_changed"]:
            what = (what + " and " if what else "") + "mode %04o" % plan["mode"]
        run.actions.append(
            "%s %s (%s)" % ("would write" if run.check or not allow_write else "wrote", plan["path"], what)
        )
    if allow_write and not run.check:
        try:
            apply_files(plans)
        except OSError as exc:
            run.fail("cannot write %s: %s" % (exc.filename or "a file of files", exc.strerror or exc))
    return plans


def follower_step(run, follower, job):
    if follower is None or job is None:
        return
    sid = job.get("submission_id")
    run.result["attempt_log"] = follower.attempt_file(sid)
    if run.params["log_follower"] == "none":
        pid, kind = follower.current(sid)
        run.result["follower_pid"] = pid
        run.result["follower"] = {"kind": kind, "what": "none"}
        return
    try:
        out = follower.ensure(sid, job.get("status") in ACTIVE, run.check)
    except (ValueError, OSError) as exc:
        run.fail("log follower: %s" % exc)
    run.result["follower_pid"] = out["pid"]
    run.result["follower"] = {"kind": out["kind"], "what": out["what"]}
    if out["moved_to"]:
        run.result["moved_to"] = out["moved_to"]
    run.actions.extend(out["actions"])
    if out["changed"]:
        run.changed = True


def state_running(run, client, url, jobs, follower):
    params = run.params
    do_files(run, allow_write=True)
    active = jobs.active
    if active:
        job = active[-1]
        run.report_job(job)
        if len(active) > 1:
            run.warn(
                "experiment %s has %d active jobs: %s; only one should run (stop the extra ones with state=stopped or "
                "`ray job stop <id>`)"
                % (params["experiment"], len(active), ", ".join(j["submission_id"] for j in active))
            )
        if run.result.get("files_changed"):
            note = "%s changed while %s is %s: %s" % (
                ", ".join(run.result["files_changed"]),
                job["submission_id"],
                job.get("status"),
                RESTART_NOTE,
            )
            run.actions.append(note)
            run.warn(note)
        if jobs.foreign_active:
            run.warn(
                "other jobs run train.py on this cluster: %s"
                % "; ".join(foreign_description(j) for j in jobs.foreign_active)
            )
        run.result["message"] = run.result.get("message") or "running"
        follower_step(run, follower, job)
        return
    latest = jobs.latest
    if latest is not None and latest.get("status") == "SUCCEEDED":
        run.report_job(latest)
        run.result["message"] = "finished: %s succeeded%s" % (
            latest["submission_id"],
            " at %s" % iso(latest.get("end_time")) if latest.get("end_time") else "",
        )
        follower_step(run, follower, latest)
        return
    if jobs.foreign_active:
        run.fail(
            "refusing to submit a job for experiment %s: another job runs train.py on %s without this experiment's "
            "metadata: %s. Stop it first (RAY_ADDRESS=%s ray job stop <id>) or wait for it to end."
            % (params["experiment"], url, "; ".join(foreign_description(j) for j in jobs.foreign_active), url)
        )
    if not params["entrypoint"]:
        run.fail(
            "entrypoint is required to submit attempt %d of experiment %s (latest job: %s)"
            % (
                jobs.max_attempt + 1,
                params["experiment"],
                "%s %s" % (latest["submission_id"], latest.get("status")) if latest else "none",
            )
        )
    submit(run, client, url, jobs, follower, latest)


def local_max_attempt(experiment, directories):
    """Highest attempt number recorded on this node (manifests, per-attempt logs): Ray forgets
    its jobs when the head restarts, and a reused id would overwrite an attempt's files."""
    pattern = re.compile(r"(?:^|\.)%s-attempt-(\d+)\.(?:json|log)$" % re.escape(experiment))
    highest = 0
    for directory in directories:
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            match = pattern.search(name)
            if match:
                highest = max(highest, int(match.group(1)))
    return highest


def found_in_container(run, commands):
    """Output of each manifest command: the versions as installed where the job runs."""
    found = {}
    for name, command in sorted((commands or {}).items()):
        rc, out, err = run.module.run_command(["/bin/bash", "-c", command])
        found[name] = out.strip() if rc == 0 and out.strip() else {"rc": rc, "error": (err or out).strip()[-500:]}
    return found


def submit(run, client, url, jobs, follower, latest):
    params = run.params
    recorded = local_max_attempt(
        params["experiment"],
        [d for d in (manifest_dir_of(params), follower.log_dir if follower else None) if d],
    )
    attempt = max(jobs.max_attempt, recorded) + 1
    sid = "%s-attempt-%d" % (params["experiment"], attempt)
    # the crash-loop rule (module_utils/crash_loop.py): before anything is moved or submitted
    crash_loop.before_submit(run, jobs.ours, manifest_dir_of(params), follower.attempt_file if follower else None,
                             client.job_logs, attempt)
    try:
        entrypoint, resume_info, resume_warnings, resume_actions = plan_resume(
            params["resume"], params["entrypoint"], run.check
        )
    except ResumeRefused as exc:
        run.fail(str(exc))
    for warning in resume_warnings:
        run.warn(warning)
    run.actions.extend(resume_actions)
    resumed = resume_info["resumed_from_iteration"] if resume_info else None
    run.result.update(
        submission_id=sid,
        attempt=attempt,
        entrypoint=entrypoint,
        resumed_from_iteration=resumed,
        start_time=None,
        start_time_ms=None,
        end_time=None,
        end_time_ms=None,
        driver_exit_code=None,
    )
    if resume_info is not None:
        run.result["resume"] = resume_info
    how = (
        "resuming from iteration %d of %s" % (resumed, resume_info["save_dir"])
        if resumed is not None
        else "from the checkpoint in its entrypoint"
    )
    before = "experiment %s: %s\n" % (
        params["experiment"],
        "latest job %s %s" % (latest["submission_id"], latest.get("status")) if latest else "no job",
    )
    after = "experiment %s: %s submitted, %s\n" % (params["experiment"], sid, how)
    for move in (resume_info or {}).get("moved_to") or []:
        after += "moved aside: %s -> %s\n" % (move["path"], move["to"])
    run.diffs.insert(0, {"before": before, "after": after, "before_header": "ray job", "after_header": "ray job"})
    run.changed = True

    runtime_env = copy.deepcopy(params["runtime_env"]) if params["runtime_env"] else None
    working_dir = (runtime_env or {}).get("working_dir")
    local_dir = None
    if is_local_working_dir(working_dir):
        base = (
            os.path.dirname(os.path.abspath(os.path.expanduser(params["files"][0]["path"])))
            if params["files"]
            else os.getcwd()
        )
        local_dir = os.path.abspath(os.path.join(base, os.path.expanduser(working_dir)))
        if not os.path.isdir(local_dir):
            run.fail("runtime_env.working_dir %s is not a directory on this node (%s)" % (working_dir, local_dir))

    manifest_dir = manifest_dir_of(params)
    manifest_file = os.path.join(manifest_dir, "%s.json" % sid) if manifest_dir else None
    run.result["manifest_file"] = manifest_file

    if run.check:
        run.result["status"] = "WOULD_SUBMIT"
        run.result["message"] = "would submit %s %s" % (sid, how)
        if local_dir:
            run.actions.append("would upload working_dir %s as a gcs:// package" % local_dir)
        if manifest_file:
            run.actions.append("would write the manifest %s" % manifest_file)
        run.actions.append("would submit %s (attempt %d) %s" % (sid, attempt, how))
        fake = {"submission_id": sid, "status": "PENDING", "_attempt": attempt}
        follower_step(run, follower, fake)
        return

    package = None
    if local_dir:
        try:
            package = client.upload_working_dir(local_dir, runtime_env.get("excludes"))
        except RayApiError as exc:
            run.fail("runtime_env.working_dir %s: %s" % (local_dir, exc), error=exc.to_dict())
        runtime_env["working_dir"] = package["uri"]
        run.result["working_dir_package"] = package
        run.actions.append(
            "%s working_dir %s as %s (%d files, %d bytes)"
            % (
                "uploaded" if package["uploaded"] else "reused",
                local_dir,
                package["uri"],
                package["files"],
                package["bytes"],
            )
        )

    metadata = {str(k): str(v) for k, v in (params["metadata"] or {}).items()}
    metadata.update(mtslime_experiment=params["experiment"], mtslime_attempt=str(attempt))
    if manifest_file:
        metadata["mtslime_manifest"] = manifest_file
    if resumed is not None:
        metadata["mtslime_resumed_from"] = str(resumed)

    if manifest_file:
        document = {
            "experiment": params["experiment"],
            "submission_id": sid,
            "attempt": attempt,
            "submitted_at": now_iso(),
            "dashboard_url": url,
            "entrypoint": entrypoint,
            "entrypoint_given": params["entrypoint"],
            "runtime_env": runtime_env,
            "working_dir": local_dir,
            "working_dir_package": {k: v for k, v in (package or {}).items()} or None,
            "metadata": metadata,
            "resume": resume_info,
            "resumed_from_iteration": resumed,
            "previous_job": job_summary(latest) if latest else None,
            "files": [
                {"path": os.path.abspath(os.path.expanduser(f["path"])), "sha256": sha256_text(f["content"])}
                for f in params["files"] or []
            ],
            "manifest": params["manifest"] or {},
            "found": found_in_container(run, params["manifest_commands"]),
        }
        try:
            os.makedirs(manifest_dir, mode=0o750, exist_ok=True)
            atomic_write(manifest_file, json.dumps(document, indent=2, sort_keys=True, default=str) + "\n", mode=0o640)
        except OSError as exc:
            run.fail("cannot write the manifest %s: %s" % (manifest_file, exc.strerror or exc))
        run.actions.append("wrote the manifest %s" % manifest_file)

    try:
        answer = client.submit_job(entrypoint, sid, runtime_env=runtime_env, metadata=metadata)
    except RayApiError as exc:
        run.fail("submitting %s to %s failed: %s" % (sid, url, exc), error=exc.to_dict())
    job = answer.get("job") or {"submission_id": sid, "status": "PENDING"}
    job["_attempt"] = attempt
    if answer["duplicate"]:
        existing = job
        ours = (existing.get("metadata") or {}).get("mtslime_experiment") == params["experiment"]
        if ours and existing.get("status") in ACTIVE:
            run.changed = bool(run.result.get("files_changed"))
            run.diffs.pop(0)
            run.report_job(existing)
            run.warn(
                "%s appeared on the cluster between listing and submitting (another run submitted it); it was not submitted again"
                % sid
            )
            follower_step(run, follower, existing)
            return
        run.fail(
            "submission id %s already exists on %s (status %s) although the job list did not show it: another run is "
            "submitting for experiment %s at the same time; rerun the task"
            % (sid, url, existing.get("status"), params["experiment"])
        )
    run.actions.append("submitted %s (attempt %d) %s" % (sid, attempt, how))
    run.report_job(job)
    run.result["entrypoint"] = entrypoint
    run.result["runtime_env"] = runtime_env
    run.result["message"] = job.get("message") or "submitted"
    follower_step(run, follower, job)


def state_stopped(run, client, url, jobs):
    params = run.params
    do_files(run, allow_write=True)
    active = jobs.active
    if not active:
        run.report_job(jobs.latest)
        run.result["message"] = "no active job of experiment %s" % params["experiment"]
        return
    names = ", ".join("%s (%s)" % (j["submission_id"], j.get("status")) for j in active)
    run.changed = True
    run.diffs.insert(
        0,
        {
            "before": "".join("%s %s\n" % (j["submission_id"], j.get("status")) for j in active),
            "after": "".join("%s STOPPED\n" % j["submission_id"] for j in active),
            "before_header": "ray job",
            "after_header": "ray job",
        },
    )
    if run.check:
        run.report_job(active[-1])
        run.actions.append("would stop %s" % names)
        run.result["message"] = "would stop %s" % names
        return
    for job in active:
        try:
            stopped = client.stop_job(job["submission_id"])
        except RayApiError as exc:
            if exc.status == 404:
                run.actions.append("%s vanished before it could be stopped" % job["submission_id"])
                continue
            run.fail("stopping %s failed: %s" % (job["submission_id"], exc), error=exc.to_dict())
        run.actions.append(
            "asked Ray to stop %s" % job["submission_id"] if stopped else "%s had already ended" % job["submission_id"]
        )
    deadline = time.time() + params["stop_timeout"]
    pending = {job["submission_id"]: job for job in active}
    final = {}
    while pending:
        for sid in list(pending):
            try:
                details = client.get_job(sid)
            except RayApiError as exc:
                run.fail("checking %s after the stop failed: %s" % (sid, exc), error=exc.to_dict())
            if details is None or details.get("status") in TERMINAL:
                final[sid] = details or dict(pending[sid], status="STOPPED")
                final[sid]["_attempt"] = pending[sid].get("_attempt")
                del pending[sid]
            else:
                pending[sid] = dict(details, _attempt=pending[sid].get("_attempt"))
        if not pending or time.time() >= deadline:
            break
        time.sleep(min(1.0, max(0.1, deadline - time.time())))
    if pending:
        run.report_job(list(pending.values())[-1])
        run.fail(
            "%s still %s %ds after the stop request (stop_timeout); Ray may still be tearing down its actors: rerun "
            "later, raise stop_timeout, or look at the job in the dashboard %s"
            % (
                ", ".join(pending),
                "/".join(sorted(set(j.get("status") or "?" for j in pending.values()))),
                params["stop_timeout"],
                url,
            )
        )
    for sid, job in final.items():
        run.actions.append("%s is %s" % (sid, job.get("status")))
        run.updated[sid] = job
    run.report_job(final[active[-1]["submission_id"]])
    run.result["message"] = "stopped %s" % ", ".join(final)


def main():
    module = build_module()
    run = Run(module)
    url = validate(run)
    params = module.params
    run.result.update(
        dashboard_url=url,
        submission_id=None,
        attempt=None,
        status=None,
        message="",
        start_time=None,
        start_time_ms=None,
        end_time=None,
        end_time_ms=None,
        driver_exit_code=None,
        entrypoint=None,
        jobs=[],
        active=[],
        resumed_from_iteration=None,
        manifest_file=None,
        log_file=os.path.abspath(os.path.expanduser(params["log_file"])) if params["log_file"] else None,
        attempt_log=None,
        follower_pid=None,
        follower={"kind": None, "what": "none"},
        files_changed=[],
    )
    client = RayClient(url, timeout=params["request_timeout"], use_proxy=params["use_proxy"])
    try:
        jobs = Jobs(client.list_jobs(), params["experiment"])
    except RayApiError as exc:
        run.fail("cannot list the jobs at %s: %s" % (url, exc), error=exc.to_dict())
    follower = (
        Follower(module, params["log_file"], url, params["log_follower"], params["follow_interval"])
        if params["log_file"]
        else None
    )

    if params["state"] == "status":
        latest = jobs.latest
        run.report_job(latest)
        if latest is None:
            run.result["message"] = "no job of experiment %s at %s" % (params["experiment"], url)
        if follower and latest:
            run.result["attempt_log"] = follower.attempt_file(latest["submission_id"])
            pid, kind = follower.current(latest["submission_id"])
            run.result["follower_pid"] = pid
            run.result["follower"] = {"kind": kind, "what": "running" if pid else "none"}
        crash_loop.for_status(run, jobs.ours, manifest_dir_of(params), follower.attempt_file if follower else None)
    elif params["state"] == "stopped":
        state_stopped(run, client, url, jobs)
    else:
        state_running(run, client, url, jobs, follower)

    # the experiment's jobs after the task
    listed = {job["submission_id"]: job for job in jobs.ours}
    for sid, job in run.updated.items():
        listed[sid] = dict(job, _attempt=job.get("_attempt", (listed.get(sid) or {}).get("_attempt")))
    ordered = sorted(listed.values(), key=lambda j: (j.get("start_time") or float("inf"), j.get("_attempt") or 0))
    run.result["jobs"] = [job_summary(job) for job in ordered]
    run.result["active"] = [job["submission_id"] for job in ordered if job.get("status") in ACTIVE]
    run.result["changed"] = run.changed
    run.result["actions"] = run.actions
    if module._diff and run.diffs:
        run.result["diff"] = run.diffs
    module.exit_json(**run.result)


if __name__ == "__main__":
    main()
